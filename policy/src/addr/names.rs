//! Host names refused before any DNS query: metadata, localhost and cluster-internal names.
//!
//! These names either resolve to an address the table refuses anyway (so refusing early saves a
//! query and gives a clearer reason) or are turned into cluster names by a resolver search list,
//! which no address check can see. Comparison is ASCII case-insensitive and ignores trailing
//! dots, so a caller that forgot to canonicalise is still covered.

use std::net::IpAddr;

/// Why a host name is refused before DNS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockedName {
    /// A cloud-metadata name; never exemptible.
    Metadata,
    /// `localhost` and its aliases.
    Localhost,
    /// A Kubernetes or private-use name (`*.internal`, `*.svc`, `*.cluster.local`, ...).
    ClusterInternal,
    /// A name without a dot, which resolver search lists complete into cluster names.
    SingleLabel,
}

// === impl BlockedName ===

impl BlockedName {
    /// Every reason, for the code uniqueness test.
    pub const ALL: &'static [BlockedName] = &[
        Self::Metadata,
        Self::Localhost,
        Self::ClusterInternal,
        Self::SingleLabel,
    ];

    /// Stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Metadata => "metadata_name",
            Self::Localhost => "localhost_name",
            Self::ClusterInternal => "cluster_internal_name",
            Self::SingleLabel => "single_label_name",
        }
    }
}

/// Metadata names, refused exactly and with every subdomain.
const METADATA_NAMES: &[&str] = &[
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "instance-data",
    "instance-data.ec2.internal",
];

/// Localhost aliases, refused exactly; `*.localhost` is refused as a suffix (RFC 6761).
const LOCALHOST_NAMES: &[&str] = &[
    "localhost",
    "localhost.localdomain",
    "ip6-localhost",
    "ip6-loopback",
];

/// Cluster-internal zones, refused with every subdomain. `*.svc.cluster.local` is covered by
/// `cluster.local`; `internal` is the ICANN private-use TLD.
const CLUSTER_SUFFIXES: &[&str] = &["internal", "svc", "cluster.local"];

/// The API server's service name: any name starting with it is refused (`kubernetes.default*`).
const KUBERNETES_PREFIX: &str = "kubernetes.default";

/// Classify a host name (canonical: lowercase, no trailing dot; tolerated otherwise).
/// IP literals, bracketed or not, are not names and yield `None`.
pub fn classify_hostname(host: &str) -> Option<BlockedName> {
    let name = host.trim_end_matches('.');
    if is_ip_literal(name) {
        return None;
    }
    if METADATA_NAMES.iter().any(|m| is_name_or_subdomain(name, m)) {
        return Some(BlockedName::Metadata);
    }
    if LOCALHOST_NAMES.iter().any(|l| eq_ic(name, l)) || is_strict_subdomain(name, "localhost") {
        return Some(BlockedName::Localhost);
    }
    if CLUSTER_SUFFIXES
        .iter()
        .any(|s| is_name_or_subdomain(name, s))
        || starts_with_ic(name)
    {
        return Some(BlockedName::ClusterInternal);
    }
    // An empty name has no dot either: refusing it keeps the check fail-closed.
    if !name.contains('.') {
        return Some(BlockedName::SingleLabel);
    }
    None
}

/// The reason code (`metadata_name`, `localhost_name`, `cluster_internal_name`,
/// `single_label_name`) when `host` is refused before DNS; `None` for other names and for IP
/// literals.
pub fn is_blocked_hostname(host: &str) -> Option<&'static str> {
    classify_hostname(host).map(|b| b.code())
}

fn is_ip_literal(name: &str) -> bool {
    let bare = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
    bare.parse::<IpAddr>().is_ok()
}

fn eq_ic(a: &str, b: &str) -> bool {
    a.as_bytes().eq_ignore_ascii_case(b.as_bytes())
}

fn starts_with_ic(name: &str) -> bool {
    let prefix = KUBERNETES_PREFIX.as_bytes();
    name.as_bytes()
        .get(..prefix.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
}

/// `name` is `parent` or a subdomain of it.
pub(super) fn is_name_or_subdomain(name: &str, parent: &str) -> bool {
    eq_ic(name, parent) || is_strict_subdomain(name, parent)
}

/// `name` ends with `.` + `parent` (ASCII case-insensitive).
pub(super) fn is_strict_subdomain(name: &str, parent: &str) -> bool {
    let (n, p) = (name.as_bytes(), parent.as_bytes());
    n.len() > p.len()
        && n[n.len() - p.len() - 1] == b'.'
        && n[n.len() - p.len()..].eq_ignore_ascii_case(p)
}
