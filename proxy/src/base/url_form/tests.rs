//! Unit tests of the URL forms: normalisation, unquote, strip, IDNA, Python splitting.

use std::borrow::Cow;

use proptest::prelude::*;

use super::split::UrlSplitError;
use super::*;

// Expected values below were produced by Hermes 0.19.0's `normalize_url_for_request`,
// Python 3.11's `unquote` and its `idna` codec.

#[test]
fn normalization_matches_hermes_on_the_spec_examples() {
    let cases = [
        (
            "https://x.com/a b/é%41[x]|",
            "https://x.com/a%20b/%C3%A9%41%5Bx%5D%7C",
        ),
        ("  https://  docs.example/a  ", "https://docs.example/a"),
        ("https://\t docs.example/", "https://docs.example/"),
        ("https://\u{3000}x.com/", "https://x.com/"),
        ("HTTPS://Example.com/", "https://Example.com/"),
        ("https://wttr.in/Köln", "https://wttr.in/K%C3%B6ln"),
        ("https://köln.de/", "https://xn--kln-sna.de/"),
        (
            "https://bücher.example:8080/x",
            "https://xn--bcher-kva.example:8080/x",
        ),
        ("https://例え.jp/", "https://xn--r8jz45g.jp/"),
        ("https://straße.de/", "https://strasse.de/"),
        ("https://x.com/ａ", "https://x.com/%EF%BD%81"),
        ("https://x.com/%zz%41", "https://x.com/%zz%41"),
        ("https://x.com/a?b=c?d&e=f'g", "https://x.com/a?b=c?d&e=f'g"),
        (
            "https://x.com/\"<>`{}^\\",
            "https://x.com/%22%3C%3E%60%7B%7D%5E%5C",
        ),
        ("https://x.com?q=a b#f g", "https://x.com?q=a%20b#f%20g"),
        ("\u{1}https://x/ y", "https://x/%20y"),
        ("https://x.com/\u{3000}", "https://x.com/"),
    ];
    for (input, want) in cases {
        assert_eq!(
            normalize_url_for_request(input),
            want,
            "normalising {input:?} must match Hermes"
        );
    }
}

#[test]
fn normalization_keeps_python_splitting_quirks() {
    let cases = [
        ("empty input stays empty", "", ""),
        (
            "an empty query marker is dropped",
            "https://x.com/?",
            "https://x.com/",
        ),
        (
            "an empty fragment marker is dropped",
            "https://x.com/#",
            "https://x.com/",
        ),
        (
            "a netloc-less http URL gains an empty authority",
            "http:foo",
            "http:///foo",
        ),
        (
            "an empty authority before a path collapses",
            "http:////x/a",
            "http://x/a",
        ),
        (
            "tabs and newlines vanish anywhere",
            "https://a\nb.com/p\tq",
            "https://ab.com/pq",
        ),
        (
            "a mixed-case IDN host is left as typed",
            "https://Köln.de/",
            "https://Köln.de/",
        ),
        (
            "only the first host occurrence is encoded",
            "https://ö@ö/",
            "https://xn--nda@ö/",
        ),
        (
            "userinfo is not escaped",
            "https://user:pa ss@x.com/",
            "https://user:pa ss@x.com/",
        ),
        (
            "a bracketed IPv6 host passes",
            "https://[::1]:80/a",
            "https://[::1]:80/a",
        ),
        (
            "an IPv6 zone passes",
            "https://[fe80::1%25eth0]/",
            "https://[fe80::1%25eth0]/",
        ),
        (
            "an IPvFuture host passes",
            "https://[v1.x]/",
            "https://[v1.x]/",
        ),
    ];
    for (name, input, want) in cases {
        assert_eq!(normalize_url_for_request(input), want, "{name}");
    }
}

#[test]
fn unparseable_and_non_http_urls_come_back_stripped_and_unchanged() {
    let cases = [
        ("ftp://x/a b", "ftp://x/a b"),
        ("mailto:a b", "mailto:a b"),
        ("not a url", "not a url"),
        ("  javascript:alert(1) ", "javascript:alert(1)"),
        ("https://[1.2.3.4]/", "https://[1.2.3.4]/"),
        ("https://[::1/", "https://[::1/"),
        ("https://[v1]/", "https://[v1]/"),
        (
            "https://exa\u{2100}mple.com/ a",
            "https://exa\u{2100}mple.com/ a",
        ),
    ];
    for (input, want) in cases {
        assert_eq!(
            normalize_url_for_request(input),
            want,
            "{input:?} must stay unchanged"
        );
    }
}

#[test]
fn unquote_matches_python() {
    let cases = [
        ("%41%42", "AB"),
        ("a+b", "a+b"),
        ("%E2%82", "\u{fffd}"),
        ("%C3%A9", "é"),
        ("%c3%a9", "é"),
        ("%zz", "%zz"),
        ("%4", "%4"),
        ("%", "%"),
        ("%C3é%A9", "\u{fffd}é\u{fffd}"),
        ("%2573", "%73"),
        ("%F0%9F%98%80", "😀"),
        ("%ED%A0%80", "\u{fffd}\u{fffd}\u{fffd}"),
        ("%C0%80", "\u{fffd}\u{fffd}"),
        ("%F4%90%80%80", "\u{fffd}\u{fffd}\u{fffd}\u{fffd}"),
        ("%E2%28%A1", "\u{fffd}(\u{fffd}"),
    ];
    for (input, want) in cases {
        assert_eq!(unquote(input), want, "unquote({input:?}) must match Python");
    }
}

#[test]
fn unquote_plus_turns_plus_into_space_before_decoding() {
    assert_eq!(
        unquote_plus("a+b%2B"),
        "a b+",
        "plus must become a space, %2B a plus"
    );
    assert!(
        matches!(unquote_plus("ab"), Cow::Borrowed("ab")),
        "plain text must borrow"
    );
}

#[test]
fn python_strip_also_removes_information_separators() {
    let cases = [
        ("\u{1c} a \u{1f}", "a"),
        ("\u{3000}x\u{85}", "x"),
        ("\u{1}x", "\u{1}x"),
    ];
    for (input, want) in cases {
        assert_eq!(py_strip(input), want, "strip({input:?}) must match Python");
    }
}

#[test]
fn host_encoding_matches_the_python_idna_codec() {
    let cases: [(&str, Option<&str>); 15] = [
        ("köln.de", Some("xn--kln-sna.de")),
        ("example.com", Some("example.com")),
        ("a..b", None),
        ("ö..b", None),
        ("ö.", Some("xn--nda.")),
        ("ö\u{3002}b", Some("xn--nda.b")),
        ("\u{200d}ö", Some("xn--nda")),
        ("ς", Some("xn--4xa")),
        ("straße", Some("strasse")),
        ("xn--ö", None),
        ("☃.net", Some("xn--n3h.net")),
        ("💩.la", Some("xn--ls8h.la")),
        ("ab\u{a0}ö", Some("xn--ab -una")),
        ("é\u{301}", Some("xn--9ca68h")),
        ("ÖL", Some("xn--l-0ga")),
    ];
    for (host, want) in cases {
        assert_eq!(
            idna_encode_host(host).as_deref(),
            want,
            "idna({host:?}) must match Python"
        );
    }
    let long = "a".repeat(64);
    assert_eq!(
        idna_encode_host(&long),
        None,
        "a 64-byte label must be refused"
    );
    assert_eq!(
        idna_encode_host(&format!("ö.{long}")),
        None,
        "a long ASCII label must be refused"
    );
}

#[test]
fn urlsplit_reports_python_components_and_errors() {
    let parts = urlsplit("HTTP://u@Host:8/p;x?q=1#f?g").expect("a plain URL must split");
    assert_eq!(
        (
            parts.scheme(),
            parts.netloc(),
            parts.path(),
            parts.query(),
            parts.fragment()
        ),
        ("HTTP", "u@Host:8", "/p;x", "q=1", "f?g"),
        "components must follow Python urlsplit"
    );
    assert_eq!(
        parts.hostname().as_deref(),
        Some("host"),
        "hostname must be lowercased"
    );
    let errors = [
        ("https://[::1/", UrlSplitError::UnbalancedBrackets),
        ("https://[1.2.3.4]/", UrlSplitError::InvalidBracketedHost),
        ("https://[::1::2]/", UrlSplitError::InvalidBracketedHost),
        ("https://[fe80::1%]/", UrlSplitError::InvalidBracketedHost),
        ("https://a\u{ff0f}b/", UrlSplitError::NfkcNetloc),
    ];
    for (input, want) in errors {
        assert_eq!(
            urlsplit(input).err(),
            Some(want),
            "{input:?} must raise like Python"
        );
    }
}

fn http_url() -> impl Strategy<Value = String> {
    let scheme = prop::sample::select(vec!["http", "https", "HTTP", "Https"]);
    let gap = prop::sample::select(vec!["", " ", "\t", "\u{3000}"]);
    let host = prop::sample::select(vec![
        "example.com",
        "köln.de",
        "例え.jp",
        "bücher.example:8080",
        "[::1]",
        "Ex-Ample.org.",
    ]);
    (
        scheme,
        gap,
        host,
        ".*",
        prop::option::of(".*"),
        prop::option::of(".*"),
    )
        .prop_map(|(scheme, gap, host, path, query, fragment)| {
            let mut url = format!("{scheme}://{gap}{host}/{path}");
            if let Some(q) = query {
                url.push('?');
                url.push_str(&q);
            }
            if let Some(f) = fragment {
                url.push('#');
                url.push_str(&f);
            }
            url
        })
}

/// URLs over every byte class a normalising step treats apart: scheme case, hosts with and
/// without IDNA, ports, userinfo, brackets, `?` and `#` in any place, empty parts, bytes
/// `quote` escapes, escapes, whitespace and non-ASCII.
fn request_form_candidate() -> impl Strategy<Value = String> {
    let scheme = prop::sample::select(vec![
        "http://",
        "https://",
        "HTTP://",
        "http:/",
        "ftp://",
        "http:///",
        "https:// ",
    ]);
    let host = prop::sample::select(vec![
        "",
        "x",
        "Example.COM",
        "a.b.",
        "u:p@h",
        "h:80",
        "h:x",
        "[::1]",
        "[::1",
        "köln.de",
        "?",
        "#",
        "/",
        "%41",
        "a..b",
    ]);
    let part = "[éa-zA-Z0-9_.~/%:@!$&'()*+,;=?#\\ \"<>`{}|^\\[\\]\t-]{0,12}";
    (
        scheme,
        host,
        part,
        prop::option::of(part),
        prop::option::of(part),
    )
        .prop_map(|(scheme, host, path, query, fragment)| {
            let mut url = format!("{scheme}{host}{path}");
            if let Some(q) = query {
                url.push('?');
                url.push_str(&q);
            }
            if let Some(f) = fragment {
                url.push('#');
                url.push_str(&f);
            }
            url
        })
}

#[test]
fn the_request_form_shortcut_takes_plain_urls_and_leaves_the_rest_to_every_step() {
    let cases = [
        (
            "https://93.184.1.1/articles/1/index.html?q=rust+proxy&page=1",
            true,
        ),
        ("http://example.com", true),
        ("https://x.com/a?b=c?d&e=f'g#frag?x", true),
        ("https://x.com/%zz%41", true),
        ("HTTPS://x.com/", false),
        ("https://x.com/?", false),
        ("https://x.com/#", false),
        ("https://x.com/?#f", false),
        ("https://x.com/a#b#c", false),
        ("https://x.com/a b", false),
        ("https://köln.de/", false),
        ("http://[::1]:8080/dns-query?name=x", true),
        ("http://[::1/", true),
        ("http://x/[a]", false),
        ("http://x?[a]", false),
        ("http:///x", false),
        ("ftp://x.com/", false),
    ];
    for (url, shortcut) in cases {
        assert_eq!(is_request_form(url), shortcut, "{url:?}");
        assert_eq!(
            normalize_url_for_request(url),
            normalize_in_full(url),
            "{url:?} must normalise as every step does"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn a_url_the_shortcut_takes_is_its_own_normal_form(url in request_form_candidate()) {
        if is_request_form(&url) {
            prop_assert_eq!(normalize_in_full(&url), url.clone(), "{:?} must not change", url);
        }
    }
}

proptest! {
    #[test]
    fn normalization_is_idempotent_on_http_urls(url in http_url()) {
        let once = normalize_url_for_request(&url);
        let twice = normalize_url_for_request(&once);
        prop_assert_eq!(&twice, &once, "normalising {:?} twice must change nothing", url);
        prop_assert!(once.is_ascii(), "a lowercase-host http URL must normalise to ASCII: {:?}", once);
    }

    #[test]
    fn unquote_borrows_when_there_is_no_percent(s in "[^%]*") {
        let out = unquote(&s);
        prop_assert!(matches!(out, Cow::Borrowed(b) if b == s), "no % must mean a borrow");
    }

    #[test]
    fn unquote_inverts_uppercase_percent_encoding(s in ".*") {
        let mut encoded = String::new();
        for b in s.as_bytes() {
            encoded.push_str(&format!("%{b:02X}"));
        }
        prop_assert_eq!(unquote(&encoded), s.as_str(), "decoding must invert encoding");
    }
}

#[test]
fn the_quote_tables_keep_exactly_the_unreserved_bytes_and_hermes_safe_sets() {
    // Python's `quote` always keeps `A-Za-z0-9_.-~`; Hermes adds these safe sets.
    let path_safe = b"/%:@!$&'()*+,;=";
    let query_safe = b"/%:@!$&'()*+,;=?";
    for b in 0..=255u8 {
        let unreserved = b.is_ascii_alphanumeric() || b"_.-~".contains(&b);
        assert_eq!(
            super::quote::PATH_KEEPS[usize::from(b)],
            unreserved || path_safe.contains(&b),
            "path, byte {b:#04x}"
        );
        assert_eq!(
            super::quote::QUERY_KEEPS[usize::from(b)],
            unreserved || query_safe.contains(&b),
            "query, byte {b:#04x}"
        );
    }
}
