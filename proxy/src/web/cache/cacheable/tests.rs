//! Tests of the never-cache rules and exempt-host matching.

use super::*;

fn exempt(patterns: &[&str]) -> ExemptHosts {
    ExemptHosts::new(&patterns.iter().map(|p| p.to_string()).collect::<Vec<_>>())
}

#[test]
fn never_cache_table() {
    let none = ExemptHosts::default();
    let cases: &[(&str, &str, Result<(), NoCacheReason>)] = &[
        ("a public name", "https://example.com/a", Ok(())),
        ("a public ipv4 literal", "http://93.184.216.34/", Ok(())),
        ("a public ipv6 literal", "http://[2606:4700::1]/", Ok(())),
        (
            "no host",
            "file:///etc/passwd",
            Err(NoCacheReason::InvalidUrl),
        ),
        ("not a url", "not a url", Err(NoCacheReason::InvalidUrl)),
        (
            "localhost",
            "http://localhost:8080/",
            Err(NoCacheReason::LocalHost),
        ),
        (
            "localhost with a trailing dot and mixed case",
            "http://LocalHost./",
            Err(NoCacheReason::LocalHost),
        ),
        (
            "a subdomain of localhost",
            "http://app.localhost/",
            Err(NoCacheReason::LocalHost),
        ),
        (
            "an mdns name",
            "http://printer.local/",
            Err(NoCacheReason::LocalHost),
        ),
        (
            "a single-label intranet name",
            "http://intranet/wiki",
            Err(NoCacheReason::SingleLabelHost),
        ),
        (
            "loopback v4",
            "http://127.0.0.1/",
            Err(NoCacheReason::PrivateAddress),
        ),
        (
            "a hex-encoded loopback the url parser canonicalises",
            "http://0x7f.1/",
            Err(NoCacheReason::PrivateAddress),
        ),
        (
            "rfc1918 10/8",
            "http://10.1.2.3/",
            Err(NoCacheReason::PrivateAddress),
        ),
        (
            "rfc1918 upper edge of 172.16/12",
            "http://172.31.255.255/",
            Err(NoCacheReason::PrivateAddress),
        ),
        ("just past 172.16/12", "http://172.32.0.1/", Ok(())),
        (
            "cloud metadata",
            "http://169.254.169.254/latest",
            Err(NoCacheReason::PrivateAddress),
        ),
        (
            "cgnat (stricter than hermes)",
            "http://100.64.0.1/",
            Err(NoCacheReason::PrivateAddress),
        ),
        ("just below cgnat", "http://100.63.255.255/", Ok(())),
        (
            "unspecified",
            "http://0.0.0.0/",
            Err(NoCacheReason::PrivateAddress),
        ),
        (
            "reserved 240/4",
            "http://240.0.0.1/",
            Err(NoCacheReason::PrivateAddress),
        ),
        (
            "documentation 203.0.113/24",
            "http://203.0.113.9/",
            Err(NoCacheReason::PrivateAddress),
        ),
        (
            "loopback v6",
            "http://[::1]/",
            Err(NoCacheReason::PrivateAddress),
        ),
        (
            "ipv4-mapped v6",
            "http://[::ffff:8.8.8.8]/",
            Err(NoCacheReason::PrivateAddress),
        ),
        (
            "unique local v6",
            "http://[fd00::1]/",
            Err(NoCacheReason::PrivateAddress),
        ),
        (
            "link-local v6",
            "http://[fe80::1]/",
            Err(NoCacheReason::PrivateAddress),
        ),
        (
            "documentation v6",
            "http://[2001:db8::1]/",
            Err(NoCacheReason::PrivateAddress),
        ),
        (
            "6to4 v6 (stricter than hermes)",
            "http://[2002:a00:1::1]/",
            Err(NoCacheReason::PrivateAddress),
        ),
    ];
    for (name, url, want) in cases {
        assert_eq!(
            check_url(url, &none),
            *want,
            "{name}: {url} must be classified as {want:?}"
        );
    }
}

#[test]
fn exempt_host_matching_table() {
    let cases: &[(&str, &[&str], &str, bool)] = &[
        ("an exact pattern matches", &["x.com"], "x.com", true),
        (
            "an exact pattern matches subdomains",
            &["x.com"],
            "api.x.com",
            true,
        ),
        (
            "a star pattern also matches the bare domain",
            &["*.x.com"],
            "x.com",
            true,
        ),
        (
            "a star pattern matches deep subdomains",
            &["*.x.com"],
            "a.b.x.com",
            true,
        ),
        (
            "a suffix that is not a label boundary does not match",
            &["x.com"],
            "notx.com",
            false,
        ),
        (
            "a parent does not match a more specific pattern",
            &["api.x.com"],
            "x.com",
            false,
        ),
        (
            "patterns are case-insensitive and dot-stripped",
            &[" .X.COM. "],
            "www.x.com",
            true,
        ),
        (
            "an empty pattern matches nothing",
            &["", "*."],
            "x.com",
            false,
        ),
        (
            "an international pattern matches the punycode host",
            &["bücher.de"],
            "www.xn--bcher-kva.de",
            true,
        ),
        (
            "any of several patterns matches",
            &["a.org", "b.org"],
            "b.org",
            true,
        ),
    ];
    for (name, patterns, host, want) in cases {
        assert_eq!(
            exempt(patterns).matches(host),
            *want,
            "{name}: {patterns:?} against {host} must be {want}"
        );
    }
}

#[test]
fn exempt_hosts_refuse_through_check_url() {
    let rules = exempt(&["*.example.org"]);
    assert_eq!(
        check_url("https://docs.example.org/x", &rules),
        Err(NoCacheReason::ExemptHost),
        "an exempt subdomain must be refused with exempt_host"
    );
    assert_eq!(
        check_url("https://example.com/x", &rules),
        Ok(()),
        "a host outside the exempt list must stay cacheable"
    );
}
