//! Typed facts gathered about one request target, shared by every gate.
//!
//! A [`TargetUrl`] is built once per URL: the caller's string, Hermes' normalised form and the
//! one WHATWG parse that policy, DNS, dialing, logs and cache keys all use (no parser
//! differentials between the check and the fetch).

use url::Url;

use crate::url_form;

/// One URL under decision.
#[derive(Clone, Debug)]
pub struct TargetUrl {
    /// The caller's string, surrounding whitespace stripped.
    pub raw: String,
    /// Hermes' request form (`normalize_url_for_request`): IDNA host, percent-encoded path.
    pub normalized: String,
    /// The WHATWG parse of `normalized`; `None` when it does not parse.
    pub parsed: Option<Url>,
    /// Canonical host: lowercase, trailing dots removed, IPv6 without brackets.
    pub host: Option<String>,
}

// === impl TargetUrl ===

impl TargetUrl {
    /// Build the target from a caller-supplied URL string.
    pub fn new(raw: &str) -> Self {
        let raw = raw.trim().to_string();
        let normalized = url_form::normalize_url_for_request(&raw);
        let parsed = Url::parse(&normalized).ok();
        let host = parsed.as_ref().and_then(canonical_host);
        Self {
            raw,
            normalized,
            parsed,
            host,
        }
    }

    /// The lowercase scheme, when the URL parses.
    pub fn scheme(&self) -> Option<&str> {
        self.parsed.as_ref().map(Url::scheme)
    }

    /// The port the URL targets (explicit or the scheme's default).
    pub fn port(&self) -> Option<u16> {
        self.parsed.as_ref().and_then(Url::port_or_known_default)
    }
}

/// The canonical host of a parsed URL: lowercase, trailing dots stripped, IPv6 unbracketed.
pub fn canonical_host(url: &Url) -> Option<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_is_canonical_for_mixed_case_trailing_dot_and_ipv6() {
        let cases = [
            ("https://Example.COM./a", Some("example.com")),
            ("http://[::1]:8080/", Some("::1")),
            ("http://0x7f.1/", Some("127.0.0.1")),
            ("http://2130706433/", Some("127.0.0.1")),
            ("http://0300.0250.1.1/", Some("192.168.1.1")),
            ("http://[::ffff:7f00:1]/", Some("::ffff:127.0.0.1")),
            ("not a url", None),
        ];
        for (input, want) in cases {
            let t = TargetUrl::new(input);
            assert_eq!(t.host.as_deref(), want, "host of {input} must be canonical");
        }
    }
}
