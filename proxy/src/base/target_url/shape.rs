//! What the gates and the fetch read of a URL's WHATWG parse, however it was read.

use std::net::IpAddr;
use std::ops::Range;

use url::{Position, Url};

/// The kind of host a URL names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) enum HostKind {
    /// A domain name (the canonical text is `TargetUrl::host`).
    Domain,
    /// An IPv4 or IPv6 literal.
    Ip(IpAddr),
}

/// What the gates and the fetch read of the WHATWG parse of a URL. The ranges are byte
/// offsets in its serialisation (`TargetUrl::canonical`), as the `url` crate's
/// [`Position`]s give them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Shape {
    /// The serialisation is `normalized` itself (read by the quick reading).
    pub(super) own_form: bool,
    /// `..scheme_end` is the lowercase scheme.
    pub(super) scheme_end: usize,
    /// `None`: a URL without a host (`mailto:`, `data:`).
    pub(super) host: Option<HostKind>,
    /// The explicit port, or the scheme's default.
    pub(super) port: Option<u16>,
    /// A non-empty user name or password.
    pub(super) userinfo: bool,
    /// `BeforeHost..AfterPort`: `host[:port]` as a `Host` field carries it.
    pub(super) authority: Range<usize>,
    /// `BeforePath`: `AfterPort`, except where a host-less URL's path starting `//` is
    /// serialised after a `/.`.
    pub(super) path_start: usize,
    /// `AfterPath`.
    pub(super) path_end: usize,
    /// `AfterQuery`: `path_start..query_end` is the origin-form request target.
    pub(super) query_end: usize,
}

/// The [`Shape`] of a URL the `url` crate parsed.
pub(super) fn shape_of(url: &Url) -> Shape {
    let at = |p: Position| url[..p].len();
    Shape {
        own_form: false,
        scheme_end: url.scheme().len(),
        host: url.host().map(|h| match h {
            url::Host::Domain(_) => HostKind::Domain,
            url::Host::Ipv4(ip) => HostKind::Ip(IpAddr::V4(ip)),
            url::Host::Ipv6(ip) => HostKind::Ip(IpAddr::V6(ip)),
        }),
        port: url.port_or_known_default(),
        userinfo: !url.username().is_empty() || url.password().is_some_and(|p| !p.is_empty()),
        authority: at(Position::BeforeHost)..at(Position::AfterPort),
        path_start: at(Position::BeforePath),
        path_end: at(Position::AfterPath),
        query_end: at(Position::AfterQuery),
    }
}
