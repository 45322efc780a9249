use url::Position;

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
        ("http://[::ffff:127.0.0.1]/", Some("::ffff:127.0.0.1")),
        ("http://example.com/", Some("example.com")),
        ("http://93.184.215.14/", Some("93.184.215.14")),
        ("not a url", None),
    ];
    for (input, want) in cases {
        let t = TargetUrl::new(input);
        assert_eq!(t.host.as_deref(), want, "host of {input} must be canonical");
    }
}

/// Hosts, ports, paths, queries and fragments that each probe one rule of the parser: case,
/// IDNA, numbers the IPv4 parser rewrites, default and zero-led ports, dot segments in every
/// spelling, bytes it percent-encodes, userinfo, IPv6 spellings.
const SCHEMES: [&str; 6] = [
    "http://", "https://", "HTTP://", "ftp://", "http:/", "ws://",
];
const HOSTS: [&str; 45] = [
    "example.com",
    "a.b-c.d",
    "EXAMPLE.com",
    "xn--nxasmq6b.com",
    "xn--a.com",
    "1.2.3.4",
    "01.2.3.4",
    "1.2.3",
    "1.2.3.4.5",
    "256.1.1.1",
    "0x7f.0.0.1",
    "example.0x1",
    "example.0x",
    "example.0xg",
    "example.123",
    "123.example",
    "127.0.0.1",
    "0.0.0.0",
    "255.255.255.255",
    "1.2.3.04",
    "a..b",
    ".a",
    "a.",
    "-a-.com",
    "ab--cd.com",
    "ex_ample.com",
    "",
    "u@h.com",
    "u:p@h.com",
    ":@h.com",
    "a%41.com",
    "[::1]",
    "[2001:db8::1]",
    "[2001:DB8::1]",
    "[::ffff:1.2.3.4]",
    "[::ffff:102:304]",
    "[0:0:0:0:0:0:0:1]",
    "[1:0:0:2:0:0:0:3]",
    "[1:0:0:2::3]",
    "[1::2:0:0:3]",
    "[1:0::]",
    "[::]",
    "[1:2:3:4:5:6:7:8]",
    "[1::2:3:4:5:6:7]",
    "[fe80::1%25eth0]",
];
const PORTS: [&str; 11] = [
    "", ":80", ":443", ":8080", ":0", ":080", ":65535", ":65536", ":", ":99999", ":1",
];
const PATHS: [&str; 26] = [
    "", "/", "/a/b", "/./a", "/a/..", "/a/../b", "/%2e/x", "/.%2E/x", "/%2E%2e", "/a b", "/a\\b",
    "/a%zz", "/a%", "/\u{e9}", "/a'b", "/a|b", "/a^b", "/a[b]", "/~x_y", "/a;b=c,d", "/...", "/.a",
    "/a/./", "/a\"b", "/a{b}", "//a",
];
const QUERIES: [&str; 12] = [
    "",
    "?",
    "?a=b",
    "?a='b'",
    "?a=b?c",
    "?x=%20",
    "?a b",
    "?a|b",
    "?a\"b",
    "?a`b",
    "?a\\b",
    "?q=rust+proxy&page=1",
];
const FRAGMENTS: [&str; 10] = [
    "", "#", "#f", "#a#b", "#a'b", "#a`b", "#a b", "#a?b", "#a\"b", "#/cb?x=1",
];

/// The quick reading of `url` against the `url` crate's parse: where it reads a URL, every
/// fact must be the parser's. Returns whether it read it.
fn agrees_with_the_parser(url: &str) -> bool {
    let Some(read) = quick::read(url) else {
        return false;
    };
    let parsed = Url::parse(url)
        .unwrap_or_else(|e| panic!("{url:?}: read quickly, but the parser refuses it: {e}"));
    assert_eq!(parsed.as_str(), url, "{url:?} is not its own serialisation");
    let mut want = shape_of(&parsed);
    want.own_form = true;
    assert_eq!(read.shape, want, "{url:?}: shape");
    assert_eq!(
        Some(read.host),
        canonical_host(&parsed),
        "{url:?}: canonical host"
    );
    assert_eq!(
        canonical_host_of(url),
        canonical_host(&parsed),
        "{url:?}: canonical host without the parse"
    );
    // Python's splitter cuts the same URL at the same places.
    let target = TargetUrl {
        raw: url.into(),
        normalized: url.into(),
        host: None,
        shape: Some(read.shape),
        parsed: OnceLock::new(),
    };
    let ours = target.split().expect("split from the reading");
    let python = url_form::urlsplit(url).expect("Python's split");
    let parts = |s: &SplitUrl<'_>| {
        [s.scheme(), s.netloc(), s.path(), s.query(), s.fragment()].map(str::to_string)
    };
    assert_eq!(parts(&ours), parts(&python), "{url:?}: split");
    true
}

#[test]
fn the_quick_reading_agrees_with_the_parser_on_every_url_it_reads() {
    let mut read = 0;
    let mut total = 0;
    for scheme in SCHEMES {
        for host in HOSTS {
            for port in PORTS {
                for path in ["/p", "", "/a/b?c#d"] {
                    total += 1;
                    read += usize::from(agrees_with_the_parser(&format!(
                        "{scheme}{host}{port}{path}"
                    )));
                }
            }
        }
    }
    for host in ["example.com", "10.0.0.1", "[2001:db8::7]"] {
        for path in PATHS {
            for query in QUERIES {
                for fragment in FRAGMENTS {
                    total += 1;
                    read += usize::from(agrees_with_the_parser(&format!(
                        "https://{host}{path}{query}{fragment}"
                    )));
                }
            }
        }
    }
    // A deterministic mix of every list (a linear congruential walk).
    let mut state = 0x2545_f491_u64;
    let mut pick = |n: usize| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize % n
    };
    for _ in 0..20_000 {
        let url = format!(
            "{}{}{}{}{}{}{}",
            SCHEMES[pick(SCHEMES.len())],
            HOSTS[pick(HOSTS.len())],
            PORTS[pick(PORTS.len())],
            PATHS[pick(PATHS.len())],
            PATHS[pick(PATHS.len())],
            QUERIES[pick(QUERIES.len())],
            FRAGMENTS[pick(FRAGMENTS.len())],
        );
        total += 1;
        read += usize::from(agrees_with_the_parser(&url));
    }
    // Both sides must be exercised: the lists hold URLs of each kind.
    assert!(
        read > 1_000 && read < total / 2,
        "read quickly {read} of {total}"
    );
}

#[test]
fn the_quick_reading_takes_the_urls_agents_fetch_and_leaves_the_rest_to_the_parser() {
    let quick = [
        "https://docs.fleet.test/guide",
        "http://93.184.215.14/articles/1/index.html?q=rust+proxy&page=1",
        "http://127.0.0.1:8080/admin",
        "http://[2606:4700:4700::1111]/dns-query?name=example",
        "https://185.199.1.2/a%20b/%C3%A9?x=1#frag",
    ];
    // Hermes' form drops an empty query or fragment; the parser keeps them.
    for url in ["https://example.com/?", "https://example.com/#"] {
        assert!(agrees_with_the_parser(url), "{url} must be read quickly");
    }
    for url in quick {
        assert!(agrees_with_the_parser(url), "{url} must be read quickly");
        let t = TargetUrl::new(url);
        assert_eq!(t.canonical(), Some(url));
        assert!(t.parsed.get().is_none(), "{url}: parsed before any use");
        assert_eq!(t.parsed().map(Url::as_str), Some(url));
    }
    let parsed = [
        "https://Example.com/",
        "https://example.com",
        "http://example.com:80/",
        "http://u:p@example.com/",
        "http://0x7f.0.0.1/",
        "http://1.2.3/",
        "http://[::FFFF:1.2.3.4]/",
        "http://example.com/a/../b",
        "http://xn--nxasmq6b.com/",
        "https://example.com/?a='b'",
    ];
    for url in parsed {
        assert!(quick::read(url).is_none(), "{url} must go to the parser");
        let t = TargetUrl::new(url);
        assert!(t.parsed.get().is_some(), "{url}: parsed at construction");
    }
}

#[test]
fn facts_read_from_the_parse_match_the_url_crate() {
    let t = TargetUrl::new("http://u:p@Example.COM:8080/a/b?token=x#frag");
    assert!(t.has_userinfo());
    assert_eq!(t.scheme(), Some("http"));
    assert_eq!(t.port(), Some(8080));
    assert_eq!(t.authority(), Some("example.com:8080"));
    assert_eq!(t.request_target(), Some("/a/b?token=x"));
    assert_eq!(t.scheme_host_path(), None);
    assert_eq!(t.host_kind(), Some(HostKind::Domain));
    let t = TargetUrl::new("https://[::1]/x?y#z");
    assert_eq!(t.authority(), Some("[::1]"));
    assert_eq!(t.request_target(), Some("/x?y"));
    assert_eq!(t.scheme_host_path(), Some("https://[::1]/x"));
    assert_eq!(t.port(), Some(443));
    assert_eq!(
        t.host_kind(),
        Some(HostKind::Ip("::1".parse().expect("literal")))
    );
    let t = TargetUrl::new("mailto:someone@example.com");
    assert_eq!(t.scheme(), Some("mailto"));
    assert_eq!(t.host_kind(), None);
    let t = TargetUrl::new("not a url");
    assert_eq!(t.scheme(), None);
    assert_eq!(t.canonical(), None);
}

/// What `TargetUrl` answers about `s` against what the `url` crate's parse of Hermes' form of
/// `s` says, whichever way the target was read.
fn facts_agree(s: &str) {
    assert_eq!(
        canonical_host_of(s),
        Url::parse(s).ok().as_ref().and_then(canonical_host),
        "{s:?}: canonical host of the string as given"
    );
    let t = TargetUrl::new(s);
    let parsed = Url::parse(&t.normalized).ok();
    assert_eq!(t.canonical(), parsed.as_ref().map(Url::as_str), "{s:?}");
    let Some(url) = parsed else {
        assert_eq!(t.scheme(), None);
        assert_eq!(t.host, None);
        return;
    };
    assert_eq!(t.scheme(), Some(url.scheme()), "{s:?}");
    assert_eq!(t.port(), url.port_or_known_default(), "{s:?}");
    assert_eq!(t.host, canonical_host(&url), "{s:?}");
    let mut want = shape_of(&url);
    want.own_form = t.shape.as_ref().is_some_and(|shape| shape.own_form);
    assert_eq!(t.shape.as_ref(), Some(&want), "{s:?}");
    assert_eq!(
        t.authority(),
        Some(&url[Position::BeforeHost..Position::AfterPort]),
        "{s:?}"
    );
    assert_eq!(
        t.request_target(),
        Some(&url[Position::BeforePath..Position::AfterQuery]),
        "{s:?}"
    );
    let python = url_form::urlsplit(url_form::py_strip(&t.normalized)).ok();
    let parts = |p: &SplitUrl<'_>| {
        [p.scheme(), p.netloc(), p.path(), p.query(), p.fragment()].map(str::to_string)
    };
    assert_eq!(
        t.split().as_ref().map(parts),
        python.as_ref().map(parts),
        "{s:?}: split"
    );
}

#[test]
fn facts_agree_on_urls_found_by_the_fuzzer_and_other_corners() {
    for s in [
        // A host-less URL whose path starts `//`: the parser writes `/.` before it, so the
        // request target does not start where the port ends.
        "httpshttps:/.//http..0Ex/b?/%1C=x",
        "web+x:/.//a/b?c#d",
        "web+x://h//a",
        "mailto:someone@example.com",
        "data:text/plain,hi",
        "http://u:@example.com/",
        "http://:@example.com/",
    ] {
        facts_agree(s);
    }
}

/// URLs most of which the quick reading takes, and many one rule away from it.
fn urls() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let scheme = prop_oneof![
        8 => Just("http://"),
        8 => Just("https://"),
        1 => Just("HTTP://"),
        1 => Just("ftp://"),
        1 => Just("http:/"),
    ];
    let host = prop_oneof![
        6 => "[a-z0-9]{1,8}(\\.[a-z0-9-]{1,8}){0,3}",
        2 => "[a-zA-Z0-9.\\-_@%:]{0,12}",
        1 => "(xn--|0x)?[a-z0-9]{0,5}(\\.(xn--|0x)?[a-z0-9]{0,4}){0,2}",
        2 => "[0-9]{1,3}(\\.[0-9]{1,4}){0,4}",
        2 => "\\[[0-9a-fA-F:.]{0,14}\\]",
    ];
    let port = prop_oneof![
        6 => Just(String::new()),
        2 => "(:[1-9][0-9]{0,4})",
        1 => "(:[0-9]{0,6})",
    ];
    let path = prop_oneof![
        1 => Just(String::new()),
        8 => "(/([a-z0-9]{1,5}|\\.|\\.\\.|%2e|%2E|%[0-9a-fA-F]{0,2}|[';=&~|^{}\"`\\\\ ]|\u{e9})){0,5}",
    ];
    let query = prop_oneof![5 => Just(String::new()), 3 => "\\?[a-z0-9=&'%+?]{0,8}"];
    let fragment = prop_oneof![5 => Just(String::new()), 2 => "#[a-z0-9#?'`]{0,6}"];
    (scheme, host, port, path, query, fragment)
        .prop_map(|(a, b, c, d, e, f)| format!("{a}{b}{c}{d}{e}{f}"))
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(2_000))]
    #[test]
    fn every_url_gets_the_parsers_facts(s in urls()) {
        facts_agree(&s);
    }
}
