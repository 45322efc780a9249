//! The gates: each one decides about one URL (or host) and never builds a response.
//!
//! A gate is a plain struct implementing [`Gate`]; its decision is a [`Verdict`] carrying a
//! [`DenyReason`] whose [`DenyReason::code`] is the stable snake_case name used in JSON error
//! bodies, the `x-fleetgate-error` header, metric labels and the canonical log line.
//! Which gates run for which listener, and in what order, lives in `crate::judge::admit`, nowhere
//! else.

use std::fmt;

/// Gate E2's address and name table, shared with the controller through the policy crate.
pub use fleetgate_policy::addr as ip_guard;
#[cfg(fuzzing)]
pub mod parse_items;
#[cfg(not(fuzzing))]
pub(crate) mod parse_items;
pub mod secret_url;
pub mod ssrf;
pub mod website_blocklist;

/// One gate: a named, synchronous decision about a request target.
///
/// Gates that need I/O (the SSRF gate resolves names) expose an async function instead; the
/// trait stays synchronous so the common case costs no allocation or task switch.
pub trait Gate {
    /// Stable name of the gate, used as the `gate` metric label and log field.
    fn name(&self) -> &'static str;
    /// Decide about `target`.
    fn check(&self, target: &crate::base::target_url::TargetUrl) -> Verdict;
}

/// What a gate decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Let the request through.
    Allow,
    /// Refuse the request.
    Deny(DenyReason),
    /// Shadow mode: the request would have been refused; it passes, and the decision is
    /// logged and counted with verdict `report`.
    Report(DenyReason),
}

/// Which part of an extract call a refusal ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The whole call is refused; no URL of it is fetched.
    Call,
    /// Only this item is refused; the other items proceed.
    Item,
}

/// Why a gate refused a target. Every variant has a stable [`code`](DenyReason::code).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DenyReason {
    /// E0: an item that is neither a URL string nor an object with a string `url`/`href`.
    InvalidItem {
        /// 0-based index of the item in the call.
        index: usize,
    },
    /// The URL could not be parsed (WHATWG) or has no host.
    InvalidUrl {
        /// What the parser said.
        detail: String,
    },
    /// The scheme is not `http` or `https`.
    UnsupportedScheme {
        /// The scheme as given, lowercased.
        scheme: String,
    },
    /// E1: a secret rule matched one of the URL's forms.
    SecretInUrl {
        /// The id of the rule that matched (never the matched text).
        rule: String,
    },
    /// E1: a credential-like query parameter name carries a non-empty value.
    SensitiveQueryParam {
        /// The decoded key, original case kept (Hermes names it in the message).
        key: String,
    },
    /// E1: the URL carries userinfo (`user:pass@`); vendors are third-party readers.
    CredentialsInUserinfo,
    /// E1 (host level): a credential-shaped token in the host name itself, which would leak
    /// through the DNS query before any connection.
    SecretInHost {
        /// The id of the rule that matched.
        rule: String,
    },
    /// E2: what the address policy refuses, as the policy crate decides it (one source for
    /// the gate and the controller): a host name always refused before DNS (metadata and
    /// cluster-internal names, `blocked_hostname`), an address of the cloud-metadata floor
    /// (`ip_cloud_metadata`), an address outside public unicast space (`ip_private_range`).
    Address(ip_guard::AddrRefusal),
    /// E2: a host name with `_` in a label, refused before DNS (no web host name has one).
    UnderscoreInHostname,
    /// E2: the name did not resolve. Reported as a DNS failure, never as a private address.
    DnsFailure {
        /// The name that failed.
        host: String,
        /// What the resolver said.
        detail: String,
    },
    /// E2: the name resolved to no usable address.
    DnsNoAddresses {
        /// The name.
        host: String,
    },
    /// E4: the website blocklist matched.
    BlockedByPolicy {
        /// The canonical host that matched.
        host: String,
        /// The normalised rule that matched.
        rule: String,
        /// `config` or the shared file's absolute path.
        source: String,
    },
    /// Egress: the port is not on the `egress.ports` allow-list.
    PortNotAllowed {
        /// The refused port.
        port: u16,
    },
    /// Egress: a checked address and port reach one of the gate's own listeners.
    ProxyLoop {
        /// The address that would be dialled.
        target: std::net::SocketAddr,
    },
    /// A TLS ClientHello inside a CONNECT tunnel names another server than the tunnel's: a
    /// name that is not the CONNECT host, or, for a CONNECT to an address, a name that does not
    /// resolve to it.
    SniMismatch {
        /// The ClientHello's canonical server name (it passed the secret check).
        sni: String,
        /// The CONNECT target's canonical host.
        target: String,
    },
}

// === impl DenyReason ===

/// The Hermes E1 message for a credential-shaped token in a URL.
pub(crate) const SECRET_IN_URL_MESSAGE: &str = "Blocked: URL contains what appears to be an API key or token. Secrets must not be sent in URLs.";

/// The Hermes E2 message for a refused address.
pub(crate) const PRIVATE_ADDRESS_MESSAGE: &str =
    "Blocked: URL targets a private or internal network address";

impl DenyReason {
    /// The gate that decided, by its code family: the `gate` field of a listener's decision
    /// line.
    pub(crate) fn gate(&self) -> &'static str {
        match self {
            Self::SecretInUrl { .. }
            | Self::SensitiveQueryParam { .. }
            | Self::CredentialsInUserinfo
            | Self::SecretInHost { .. } => "secret_url",
            Self::BlockedByPolicy { .. } => "website_blocklist",
            Self::PortNotAllowed { .. } => "port",
            Self::ProxyLoop { .. } => "proxy_loop",
            Self::SniMismatch { .. } => "sni",
            _ => "ssrf",
        }
    }

    /// Every code, for the uniqueness test and documentation tables.
    #[cfg(test)]
    pub(crate) const ALL_CODES: &'static [&'static str] = &[
        "invalid_item",
        "invalid_url",
        "unsupported_scheme",
        "secret_in_url",
        "sensitive_query_param",
        "credentials_in_userinfo",
        "secret_in_host",
        "blocked_hostname",
        "ip_cloud_metadata",
        "ip_private_range",
        "hostname_underscore",
        "dns_failure",
        "dns_no_addresses",
        "blocked_by_policy",
        "port_not_allowed",
        "proxy_loop",
        "sni_mismatch",
    ];

    /// The stable snake_case code of this reason.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidItem { .. } => "invalid_item",
            Self::InvalidUrl { .. } => "invalid_url",
            Self::UnsupportedScheme { .. } => "unsupported_scheme",
            Self::SecretInUrl { .. } => "secret_in_url",
            Self::SensitiveQueryParam { .. } => "sensitive_query_param",
            Self::CredentialsInUserinfo => "credentials_in_userinfo",
            Self::SecretInHost { .. } => "secret_in_host",
            Self::Address(refusal) => refusal.code(),
            Self::UnderscoreInHostname => "hostname_underscore",
            Self::DnsFailure { .. } => "dns_failure",
            Self::DnsNoAddresses { .. } => "dns_no_addresses",
            Self::BlockedByPolicy { .. } => "blocked_by_policy",
            Self::PortNotAllowed { .. } => "port_not_allowed",
            Self::ProxyLoop { .. } => "proxy_loop",
            Self::SniMismatch { .. } => "sni_mismatch",
        }
    }

    /// Whether this refusal ends the whole extract call (Hermes' E1 semantics) or one item.
    pub(crate) fn scope(&self) -> Scope {
        match self {
            Self::SecretInUrl { .. }
            | Self::SensitiveQueryParam { .. }
            | Self::CredentialsInUserinfo
            | Self::SecretInHost { .. } => Scope::Call,
            _ => Scope::Item,
        }
    }

    /// The id of the secret rule behind an E1 refusal (`rule` in answers and decision lines).
    pub(crate) fn rule(&self) -> Option<&str> {
        match self {
            Self::SecretInUrl { rule } | Self::SecretInHost { rule } => Some(rule),
            _ => None,
        }
    }

    /// The message shown to the agent. Hermes' exact strings where Hermes has one.
    pub fn message(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for DenyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidItem { index } => write!(
                f,
                "Invalid URL item at index {index}: expected a URL string or an object with a string 'url' or 'href' field"
            ),
            Self::InvalidUrl { detail } => write!(f, "Blocked: invalid URL ({detail})"),
            Self::UnsupportedScheme { scheme } => write!(
                f,
                "Blocked: unsupported URL scheme '{scheme}'; only http and https are fetched"
            ),
            Self::SecretInUrl { .. } => f.write_str(SECRET_IN_URL_MESSAGE),
            Self::SensitiveQueryParam { key } => write!(
                f,
                "Blocked: URL contains a credential-like query parameter ({key}). Web extract backends are third-party readers; remove the sensitive query parameter or use a local browser session when this access is explicitly required."
            ),
            Self::CredentialsInUserinfo => f.write_str(
                "Blocked: URL contains credentials in its user-info part (user:password@). Secrets must not be sent in URLs.",
            ),
            Self::SecretInHost { .. } => f.write_str(
                "Blocked: host name contains what appears to be an API key or token. Secrets must not be sent in URLs.",
            ),
            Self::Address(_) => f.write_str(PRIVATE_ADDRESS_MESSAGE),
            Self::UnderscoreInHostname => f.write_str(
                "Blocked: the host name has a label with '_', which no web host name has; it was not resolved",
            ),
            Self::DnsFailure { host, detail } => {
                write!(f, "Blocked: DNS resolution failed for {host}: {detail}")
            }
            Self::DnsNoAddresses { host } => {
                write!(f, "Blocked: DNS returned no usable addresses for {host}")
            }
            Self::BlockedByPolicy { host, rule, source } => write!(
                f,
                "Blocked by website policy: '{host}' matched rule '{rule}' from {source}"
            ),
            Self::PortNotAllowed { port } => write!(
                f,
                "Blocked: port {port} is not on the egress port allow-list"
            ),
            Self::ProxyLoop { target } => write!(
                f,
                "Blocked: {target} is one of this gate's own listeners; a proxied request must not loop back into the gate"
            ),
            Self::SniMismatch { sni, target } => write!(
                f,
                "Blocked: the TLS server name {sni} is not the tunnel's target {target} (a CONNECT to a name carries that name; a CONNECT to an address, a name that resolves to it)"
            ),
        }
    }
}

impl From<ip_guard::AddrRefusal> for DenyReason {
    fn from(refusal: ip_guard::AddrRefusal) -> Self {
        Self::Address(refusal)
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;

    #[test]
    fn an_address_refusal_keeps_its_code_as_a_deny_reason() {
        use ip_guard::AddrRefusal as A;
        let addr: IpAddr = "10.0.0.1".parse().expect("an address");
        for refusal in [
            A::BlockedHostname {
                host: "localhost".into(),
            },
            A::CloudMetadata { addr },
            A::PrivateAddress {
                addr,
                class: "private",
            },
        ] {
            let code = refusal.code();
            assert_eq!(DenyReason::from(refusal).code(), code);
        }
    }

    #[test]
    fn codes_are_unique_snake_case_and_listed() {
        let mut seen = std::collections::HashSet::new();
        for code in DenyReason::ALL_CODES {
            assert!(seen.insert(*code), "code {code} must be unique");
            assert!(
                !code.is_empty()
                    && code
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "code {code} must match ^[a-z0-9_]+$"
            );
        }
        let samples = [
            DenyReason::InvalidItem { index: 0 },
            DenyReason::SecretInUrl { rule: "r".into() },
            DenyReason::PortNotAllowed { port: 1 },
            DenyReason::DnsNoAddresses { host: "h".into() },
            DenyReason::SniMismatch {
                sni: "a".into(),
                target: "b".into(),
            },
        ];
        for reason in samples {
            assert!(
                DenyReason::ALL_CODES.contains(&reason.code()),
                "{} must be listed in ALL_CODES",
                reason.code()
            );
        }
    }

    #[test]
    fn secret_refusals_end_the_whole_call() {
        assert_eq!(
            DenyReason::SecretInUrl { rule: "r".into() }.scope(),
            Scope::Call
        );
        assert_eq!(
            DenyReason::SensitiveQueryParam {
                key: "token".into()
            }
            .scope(),
            Scope::Call
        );
        assert_eq!(
            DenyReason::DnsNoAddresses { host: "x".into() }.scope(),
            Scope::Item
        );
    }

    #[test]
    fn hermes_messages_are_exact() {
        assert_eq!(
            DenyReason::SensitiveQueryParam {
                key: "token".into()
            }
            .message(),
            "Blocked: URL contains a credential-like query parameter (token). Web extract backends are third-party readers; remove the sensitive query parameter or use a local browser session when this access is explicitly required."
        );
        assert_eq!(
            DenyReason::InvalidItem { index: 3 }.message(),
            "Invalid URL item at index 3: expected a URL string or an object with a string 'url' or 'href' field"
        );
        assert_eq!(
            DenyReason::Address(ip_guard::AddrRefusal::PrivateAddress {
                addr: "10.0.0.1".parse().unwrap(),
                class: "private"
            })
            .message(),
            "Blocked: URL targets a private or internal network address"
        );
    }
}
