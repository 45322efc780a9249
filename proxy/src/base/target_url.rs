//! Typed facts gathered about one request target, shared by every gate.
//!
//! A [`TargetUrl`] is built once per URL: the caller's string, Hermes' normalised form and what
//! the WHATWG parse of that form says (scheme, host, port, userinfo, where each part sits in the
//! serialisation), which policy, DNS, dialing, logs and cache keys all use (no parser
//! differentials between the check and the fetch).
//!
//! Most URLs an agent fetches are already their own WHATWG serialisation: a lowercase
//! `http`/`https` scheme, a lowercase ASCII host name or a dotted-quad or canonical IPv6 address,
//! no userinfo, no default port, a path without dot segments and only bytes the parser keeps.
//! [`quick`] reads those in one pass and the full parse ([`TargetUrl::parsed`]) is made only
//! when something asks for the [`Url`] itself (a redirect's base, the vendor fetch); any other
//! URL is parsed by the `url` crate up front, as before. Tests hold the quick reading to the
//! parser's answers on every URL it accepts.

use std::sync::OnceLock;

use url::Url;

use crate::base::url_form::{self, SplitUrl};

mod quick;
mod shape;
#[cfg(test)]
mod tests;

#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) use shape::HostKind;
use shape::{Shape, shape_of};

/// One URL under decision.
#[derive(Clone, Debug)]
pub struct TargetUrl {
    /// The caller's string, surrounding whitespace stripped.
    pub raw: String,
    /// Hermes' request form (`normalize_url_for_request`): IDNA host, percent-encoded path.
    pub normalized: String,
    /// Canonical host: lowercase, trailing dots removed, IPv6 without brackets.
    pub host: Option<String>,
    /// What the WHATWG parse of `normalized` says; `None` when it does not parse.
    shape: Option<Shape>,
    /// The WHATWG parse of `normalized`: made at construction unless `shape` was read
    /// without it, then on first use.
    parsed: OnceLock<Option<Url>>,
}

// === impl TargetUrl ===

impl TargetUrl {
    /// Build the target from a caller-supplied URL string.
    pub fn new(raw: &str) -> Self {
        let raw = raw.trim().to_string();
        let normalized = url_form::normalize_url_for_request(&raw);
        let parsed = OnceLock::new();
        let (shape, host) = match quick::read(&normalized) {
            Some(read) => (Some(read.shape), Some(read.host)),
            None => {
                let url = Url::parse(&normalized).ok();
                let shape = url.as_ref().map(shape_of);
                let host = url.as_ref().and_then(canonical_host);
                // Filled here, so `parsed()` never parses twice.
                let _ = parsed.set(url);
                (shape, host)
            }
        };
        Self {
            raw,
            normalized,
            host,
            shape,
            parsed,
        }
    }

    /// The WHATWG parse of [`TargetUrl::normalized`]; `None` when it does not parse.
    pub(crate) fn parsed(&self) -> Option<&Url> {
        self.parsed
            .get_or_init(|| Url::parse(&self.normalized).ok())
            .as_ref()
    }

    /// The canonical WHATWG serialisation, when the URL parses.
    #[cfg_attr(fuzzing, visibility::make(pub))]
    pub(crate) fn canonical(&self) -> Option<&str> {
        let shape = self.shape.as_ref()?;
        if shape.own_form {
            return Some(&self.normalized);
        }
        self.parsed().map(Url::as_str)
    }

    /// The lowercase scheme, when the URL parses.
    #[cfg_attr(fuzzing, visibility::make(pub))]
    pub(crate) fn scheme(&self) -> Option<&str> {
        let end = self.shape.as_ref()?.scheme_end;
        self.canonical().map(|c| &c[..end])
    }

    /// The port the URL targets (explicit or the scheme's default).
    #[cfg_attr(fuzzing, visibility::make(pub))]
    pub(crate) fn port(&self) -> Option<u16> {
        self.shape.as_ref()?.port
    }

    /// The kind of host the URL names; `None` when it does not parse or has no host.
    #[cfg_attr(fuzzing, visibility::make(pub))]
    pub(crate) fn host_kind(&self) -> Option<HostKind> {
        self.shape.as_ref()?.host
    }

    /// Whether the URL carries a non-empty user name or password.
    pub fn has_userinfo(&self) -> bool {
        self.shape.as_ref().is_some_and(|s| s.userinfo)
    }

    /// `host[:port]` as the URL spells it in canonical form (IPv6 in brackets, no default
    /// port): the upstream's `Host` field.
    #[cfg_attr(fuzzing, visibility::make(pub))]
    pub(crate) fn authority(&self) -> Option<&str> {
        let range = self.shape.as_ref()?.authority.clone();
        self.canonical().map(|c| &c[range])
    }

    /// The origin-form request target: path and query, without the fragment.
    #[cfg_attr(fuzzing, visibility::make(pub))]
    pub(crate) fn request_target(&self) -> Option<&str> {
        let shape = self.shape.as_ref()?;
        let range = shape.path_start..shape.query_end;
        self.canonical().map(|c| &c[range])
    }

    /// Python's `urlsplit` of [`TargetUrl::normalized`] (Hermes' splitter), `None` where it
    /// raises. A URL read without the parser is split from that reading: on such a URL
    /// (no tab, newline, userinfo or non-ASCII; a valid host) both splitters cut at the same
    /// `/`, `?` and `#`, which a test holds them to.
    #[cfg_attr(fuzzing, visibility::make(pub))]
    pub(crate) fn split(&self) -> Option<SplitUrl<'_>> {
        match &self.shape {
            Some(shape) if shape.own_form => {
                let s = &self.normalized;
                let query = if s.as_bytes().get(shape.path_end) == Some(&b'?') {
                    shape.path_end + 1..shape.query_end
                } else {
                    shape.query_end..shape.query_end
                };
                let fragment = if shape.query_end < s.len() {
                    shape.query_end + 1..s.len()
                } else {
                    s.len()..s.len()
                };
                Some(SplitUrl::from_parts(
                    s,
                    [
                        0..shape.scheme_end,
                        shape.scheme_end + 3..shape.authority.end,
                        shape.path_start..shape.path_end,
                        query,
                        fragment,
                    ],
                ))
            }
            _ => url_form::urlsplit(url_form::py_strip(&self.normalized)).ok(),
        }
    }

    /// `scheme://host[:port]/path` (no userinfo, query or fragment) as one slice of the
    /// serialisation, when the URL has a host and no userinfo.
    pub(crate) fn scheme_host_path(&self) -> Option<&str> {
        let shape = self.shape.as_ref()?;
        if shape.userinfo || shape.host.is_none() {
            return None;
        }
        let end = shape.path_end;
        self.canonical().map(|c| &c[..end])
    }
}

/// The canonical host of `url` as [`canonical_host`] gives it from the WHATWG parse; a URL that
/// is its own serialisation is read without the parser ([`quick`]).
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) fn canonical_host_of(url: &str) -> Option<String> {
    match quick::read(url) {
        Some(read) => Some(read.host),
        None => Url::parse(url).ok().as_ref().and_then(canonical_host),
    }
}

/// The canonical host of a parsed URL: lowercase, trailing dots stripped, IPv6 unbracketed.
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) fn canonical_host(url: &Url) -> Option<String> {
    let host = match url.host()? {
        url::Host::Domain(d) => d.trim_end_matches('.').to_ascii_lowercase(),
        // The parser serialised the address in dotted decimal, as `Ipv4Addr`'s Display does:
        // take its text rather than format the address again.
        url::Host::Ipv4(_) => url.host_str()?.to_string(),
        // Not the serialised text: WHATWG writes an IPv4-mapped address in hex groups where
        // `Ipv6Addr` writes `::ffff:a.b.c.d`, and the gates match the latter.
        url::Host::Ipv6(ip) => ip.to_string(),
    };
    (!host.is_empty()).then_some(host)
}
