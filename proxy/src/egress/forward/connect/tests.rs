use super::*;

#[test]
fn connect_authorities_are_canonicalised_by_the_whatwg_parser() {
    let cases = [
        (
            "Example.COM:443",
            "example.com",
            443,
            "mixed case is lowered",
        ),
        (
            "example.com.:443",
            "example.com",
            443,
            "a trailing dot is dropped",
        ),
        (
            "ex%61mple.com:8443",
            "example.com",
            8443,
            "percent-encoded host bytes are decoded",
        ),
        (
            "0x7f.1:80",
            "127.0.0.1",
            80,
            "short hex IPv4 forms are decoded",
        ),
        (
            "2130706433:443",
            "127.0.0.1",
            443,
            "a decimal dword is an IPv4 address",
        ),
        ("[::1]:443", "::1", 443, "IPv6 loses its brackets"),
        (
            "[::ffff:7f00:1]:443",
            "::ffff:127.0.0.1",
            443,
            "mapped IPv6 stays IPv6 for E2",
        ),
        (
            "xn--bcher-kva.example:443",
            "xn--bcher-kva.example",
            443,
            "punycode stays",
        ),
        (
            "EXAMPLE.com:80",
            "example.com",
            80,
            "the default port is kept as the target",
        ),
    ];
    for (raw, host, port, why) in cases {
        let got = canonical_authority(raw)
            .unwrap_or_else(|e| panic!("{raw} must canonicalise ({why}): {e}"));
        assert_eq!(
            got,
            HostTarget {
                host: host.into(),
                port
            },
            "{raw}: {why}"
        );
    }
}

#[test]
fn malformed_or_smuggling_authorities_are_refused_before_any_gate() {
    let cases = [
        (
            "[example.com]:443",
            "a bracketed name (smokescreen CVE-2022-29188)",
        ),
        ("example.com", "no port"),
        ("example.com:", "an empty port"),
        ("example.com:https", "a named port"),
        ("example.com:70000", "a port past 65535"),
        ("user@example.com:443", "userinfo"),
        ("example.com:443/path", "a path"),
        ("example.com\\@evil:443", "a backslash"),
        ("exa mple.com:443", "a space"),
        ("::1:443", "bare IPv6 without brackets"),
        ("425.510.425.510:443", "an invalid numeric host"),
        (":443", "no host"),
        ("", "nothing"),
    ];
    for (raw, why) in cases {
        let err = canonical_authority(raw).expect_err(&format!("{raw:?} must be refused: {why}"));
        assert_eq!(err.code(), "invalid_url", "{raw:?}: {why}");
    }
}

#[test]
fn the_log_label_brackets_ipv6_hosts() {
    let v6 = HostTarget {
        host: "::1".into(),
        port: 443,
    };
    assert_eq!(v6.to_string(), "[::1]:443");
    let name = HostTarget {
        host: "example.com".into(),
        port: 8443,
    };
    assert_eq!(name.to_string(), "example.com:8443");
}
