//! Sniffer tables: real ClientHellos from rustls, hand-broken ones, and HTTP request heads.

use std::sync::Arc;

use proptest::prelude::*;
use rustls::pki_types::ServerName;

use super::*;

/// The first flight rustls sends for `name` (SNI on unless `sni` is false).
fn client_hello(name: &str, sni: bool) -> Vec<u8> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring must support the default versions")
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    config.enable_sni = sni;
    let server = ServerName::try_from(name.to_string()).expect("test name must be valid");
    let mut conn = rustls::ClientConnection::new(Arc::new(config), server)
        .expect("a client connection must start");
    let mut out = Vec::new();
    conn.write_tls(&mut out)
        .expect("the ClientHello must serialise");
    out
}

fn done(bytes: &[u8]) -> Sniffed {
    match sniff(bytes) {
        Ok(Progress::Done(s)) => s,
        other => panic!("a complete head must sniff, got {other:?}"),
    }
}

fn domain(name: &str) -> Option<TargetName> {
    Some(TargetName::Domain(name.to_string()))
}

fn tls_malformed(bytes: &[u8]) -> bool {
    matches!(
        sniff(bytes),
        Err(SniffError::Malformed {
            protocol: Protocol::Tls,
            ..
        })
    )
}

#[test]
fn rustls_client_hellos_yield_their_canonical_sni() {
    let cases = [
        ("example.com", domain("example.com")),
        ("API.Example.COM", domain("api.example.com")),
        ("xn--bcher-kva.example", domain("xn--bcher-kva.example")),
        ("a-b_c.test", domain("a-b_c.test")),
        ("localhost", domain("localhost")),
    ];
    for (name, want) in cases {
        let sniffed = done(&client_hello(name, true));
        assert_eq!(sniffed.protocol, Protocol::Tls, "{name} must sniff as TLS");
        assert_eq!(sniffed.name, want, "SNI of {name} must be canonical");
        assert_eq!(
            sniffed.raw_name.as_deref(),
            Some(name),
            "the raw SNI of {name} must keep its case"
        );
    }
}

#[test]
fn client_hellos_without_sni_have_no_name() {
    let cases = [
        ("sni switched off", client_hello("example.com", false)),
        ("IP address server name", client_hello("192.0.2.7", true)),
    ];
    for (what, bytes) in cases {
        let sniffed = done(&bytes);
        assert_eq!(sniffed.name, None, "{what} must carry no name");
    }
}

#[test]
fn every_strict_prefix_of_a_client_hello_asks_for_more() {
    let hello = client_hello("prefix.example", true);
    for cut in 0..hello.len() {
        assert_eq!(
            sniff(&hello[..cut]),
            Ok(Progress::NeedMore),
            "a ClientHello cut at {cut} of {} must ask for more bytes",
            hello.len()
        );
    }
}

#[test]
fn a_client_hello_split_across_two_records_is_reassembled() {
    let hello = client_hello("split.example", true);
    let message = &hello[5..];
    let (a, b) = message.split_at(40);
    let mut bytes = Vec::new();
    for part in [a, b] {
        bytes.extend_from_slice(&[22, 3, 1]);
        bytes.extend_from_slice(&(part.len() as u16).to_be_bytes());
        bytes.extend_from_slice(part);
    }
    assert_eq!(done(&bytes).name, domain("split.example"));
}

/// Replace the SNI host name bytes of a rustls ClientHello (same length) to forge names.
fn with_sni_bytes(name: &str, forged: &[u8]) -> Vec<u8> {
    assert_eq!(name.len(), forged.len(), "forged name must keep the length");
    let mut hello = client_hello(name, true);
    let at = hello
        .windows(name.len())
        .position(|w| w == name.as_bytes())
        .expect("the SNI must appear in the ClientHello");
    hello[at..at + name.len()].copy_from_slice(forged);
    hello
}

#[test]
fn broken_client_hellos_are_malformed_not_misread() {
    let hello = client_hello("broken.example", true);
    let mut not_client_hello = hello.clone();
    not_client_hello[5] = 2; // ServerHello
    let mut bad_version = hello.clone();
    bad_version[1] = 2;
    let mut short_message = hello.clone();
    // Claim a handshake body 3 bytes shorter than it is: fields run past the message end.
    let body = u32::from_be_bytes([0, hello[6], hello[7], hello[8]]) - 3;
    short_message[6..9].copy_from_slice(&body.to_be_bytes()[1..]);
    let mut alert_inside = hello[..5 + 10].to_vec();
    alert_inside[3..5].copy_from_slice(&10u16.to_be_bytes());
    alert_inside.extend_from_slice(&[21, 3, 3, 0, 2, 2, 40]);
    let cases: [(&str, Vec<u8>); 6] = [
        ("not a ClientHello", not_client_hello),
        ("record version 2.x", bad_version),
        ("handshake length cut short", short_message),
        ("an alert record inside the handshake", alert_inside),
        (
            "a non-ASCII SNI",
            with_sni_bytes("caf.example", "caf\u{e9}xample".as_bytes()),
        ),
        (
            "an SNI with a slash",
            with_sni_bytes("evil.example", b"evil/example"),
        ),
    ];
    for (what, bytes) in cases {
        assert!(
            tls_malformed(&bytes),
            "{what} must be malformed, got {:?}",
            sniff(&bytes)
        );
    }
}

#[test]
fn an_invalid_punycode_sni_is_refused() {
    let bytes = with_sni_bytes("xn--aaaaaaa.example", b"xn--ab--cd0.example");
    assert!(
        tls_malformed(&bytes),
        "invalid A-label must be malformed: {:?}",
        sniff(&bytes)
    );
}

#[test]
fn oversized_handshakes_are_refused_early() {
    // A ClientHello header announcing 100 000 bytes: refused before they arrive.
    let mut huge = vec![22, 3, 1, 0x40, 0x00, 1];
    huge.extend_from_slice(&100_000u32.to_be_bytes()[1..]);
    assert_eq!(sniff(&huge), Err(SniffError::TooLarge(Protocol::Tls)));
    let oversized_record = [22, 3, 1, 0x40, 0x01];
    assert!(
        tls_malformed(&oversized_record),
        "a record over 16384 bytes must be malformed"
    );
}

#[test]
fn garbage_is_unrecognised() {
    let cases: [&[u8]; 4] = [
        b"\x00\x01\x02\x03",
        b"SSH-2.0-OpenSSH_9.2\r\n",
        b"\x80\x2e\x01\x03\x01", // SSLv2-compatible hello
        b"get / HTTP/1.1\r\n\r\n",
    ];
    for bytes in cases {
        assert_eq!(
            sniff(bytes),
            Err(SniffError::Unrecognised),
            "{bytes:?} must be unrecognised"
        );
    }
}

#[test]
fn any_byte_before_the_method_or_inside_the_method_token_is_unrecognised() {
    let request = b"GET /x HTTP/1.1\r\nHost: a.example\r\n\r\n";
    // SP, HT, VT, FF, the C0 separators Python's str.split() takes for whitespace, CR, LF,
    // NUL, DEL and bytes past ASCII: decided on the first byte, whatever follows.
    let leads = [
        b' ', b'\t', 0x0b, 0x0c, 0x1c, 0x1d, 0x1e, 0x1f, b'\r', b'\n', 0x00, 0x7f, 0x80, 0xff,
    ];
    for lead in leads {
        let bytes = [&[lead][..], &request[..]].concat();
        assert_eq!(
            sniff(&bytes),
            Err(SniffError::Unrecognised),
            "a leading {lead:#04x} must be unrecognised"
        );
        assert_eq!(
            sniff(&[lead]),
            Err(SniffError::Unrecognised),
            "{lead:#04x} alone must decide"
        );
    }
    let heads: [&[u8]; 6] = [
        b"\r\nGET /x HTTP/1.1\r\nHost: a.example\r\n\r\n",
        b"GET\t/x HTTP/1.1\r\nHost: a.example\r\n\r\n",
        b"GET\x0b/x HTTP/1.1\r\nHost: a.example\r\n\r\n",
        b"GET\x1c/x HTTP/1.1\r\nHost: a.example\r\n\r\n",
        b"Get /x HTTP/1.1\r\nHost: a.example\r\n\r\n",
        b"GET\t",
    ];
    for head in heads {
        assert_eq!(
            sniff(head),
            Err(SniffError::Unrecognised),
            "{:?} must be unrecognised",
            String::from_utf8_lossy(head)
        );
    }
}

#[test]
fn a_request_line_the_relay_would_not_accept_is_refused_as_soon_as_it_ends() {
    let lines: [&[u8]; 8] = [
        b"FETCH /x HTTP/1.1\r\n",
        b"TRACE /x HTTP/1.1\r\n",
        b"GET  /x HTTP/1.1\r\n",
        b"GET /x\x1cHTTP/1.1\r\n",
        b"GET /x HTTP/1.1 \r\n",
        b"GET /x\r\n",
        b"SET key value\r\n",
        b"GET /x HTTP/1.1\n",
    ];
    for line in lines {
        let got = sniff(line);
        assert!(
            matches!(
                got,
                Err(SniffError::Malformed {
                    protocol: Protocol::Http,
                    ..
                })
            ),
            "{:?} must be refused before the head ends, got {got:?}",
            String::from_utf8_lossy(line)
        );
    }
    for method in crate::egress::relay::h1::METHODS {
        let line = format!("{method} /x HTTP/1.1\r\n");
        assert_eq!(
            sniff(line.as_bytes()),
            Ok(Progress::NeedMore),
            "{line:?} must wait for the rest of its head"
        );
    }
}

#[test]
fn http_heads_yield_host_port_and_path() {
    let cases: [(&str, Option<TargetName>, Option<u16>, &str); 8] = [
        (
            "GET /a?b=1 HTTP/1.1\r\nHost: Example.COM\r\n\r\n",
            domain("example.com"),
            None,
            "/a?b=1",
        ),
        (
            "GET / HTTP/1.1\r\nhost:  example.com:8080 \r\n\r\n",
            domain("example.com"),
            Some(8080),
            "/",
        ),
        (
            "GET http://abs.example:81/p HTTP/1.1\r\n\r\n",
            domain("abs.example"),
            Some(81),
            "/p",
        ),
        (
            "GET http://abs.example HTTP/1.1\r\nHost: abs.example\r\n\r\n",
            domain("abs.example"),
            None,
            "/",
        ),
        (
            "OPTIONS * HTTP/1.1\r\nHost: o.example\r\n\r\n",
            domain("o.example"),
            None,
            "/",
        ),
        ("GET / HTTP/1.0\r\n\r\n", None, None, "/"),
        (
            "GET / HTTP/1.1\r\nHost: [2001:db8::1]:8443\r\n\r\n",
            Some(TargetName::Ip("2001:db8::1".parse().unwrap())),
            Some(8443),
            "/",
        ),
        (
            "GET / HTTP/1.1\r\nHost: 0x7f.1\r\n\r\n",
            Some(TargetName::Ip("127.0.0.1".parse().unwrap())),
            None,
            "/",
        ),
    ];
    for (head, name, port, path) in cases {
        let sniffed = done(head.as_bytes());
        assert_eq!(
            sniffed.protocol,
            Protocol::Http,
            "{head:?} must sniff as HTTP"
        );
        assert_eq!(sniffed.name, name, "name of {head:?}");
        assert_eq!(sniffed.port, port, "port of {head:?}");
        assert_eq!(sniffed.path.as_deref(), Some(path), "path of {head:?}");
    }
}

#[test]
fn bad_http_heads_are_malformed() {
    let cases = [
        (
            "two Host headers",
            "GET / HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n",
        ),
        (
            "Host differs from the absolute target",
            "GET http://a.example/ HTTP/1.1\r\nHost: b.example\r\n\r\n",
        ),
        (
            "userinfo in Host",
            "GET / HTTP/1.1\r\nHost: user@a.example\r\n\r\n",
        ),
        (
            "percent in Host",
            "GET / HTTP/1.1\r\nHost: a%2eexample\r\n\r\n",
        ),
        (
            "space before the colon",
            "GET / HTTP/1.1\r\nHost : a.example\r\n\r\n",
        ),
        (
            "folded header",
            "GET / HTTP/1.1\r\nX: 1\r\n Host: a.example\r\n\r\n",
        ),
        (
            "bare LF in the request line",
            "GET /\n HTTP/1.1\r\nHost: a.example\r\n\r\n",
        ),
        ("HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
        (
            "CONNECT",
            "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n",
        ),
        (
            "https absolute form",
            "GET https://a.example/ HTTP/1.1\r\n\r\n",
        ),
        (
            "invalid IPv4 number",
            "GET / HTTP/1.1\r\nHost: 425.510.425.510\r\n\r\n",
        ),
        (
            "port out of range",
            "GET / HTTP/1.1\r\nHost: a.example:70000\r\n\r\n",
        ),
        (
            "unbracketed IPv6",
            "GET / HTTP/1.1\r\nHost: 2001:db8::1\r\n\r\n",
        ),
    ];
    for (what, head) in cases {
        let got = sniff(head.as_bytes());
        assert!(
            matches!(
                got,
                Err(SniffError::Malformed {
                    protocol: Protocol::Http,
                    ..
                })
            ),
            "{what} must be malformed HTTP, got {got:?}"
        );
    }
    let utf8 = "GET / HTTP/1.1\r\nHost: b\u{fc}cher.example\r\n\r\n";
    assert!(
        matches!(sniff(utf8.as_bytes()), Err(SniffError::Malformed { .. })),
        "a raw UTF-8 Host must be malformed (clients send A-labels)"
    );
}

#[test]
fn a_label_that_is_not_punycode_is_malformed() {
    for host in ["xn--.example", "xn--a.example", "xn--ab--cd0-.example"] {
        let head = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
        let got = sniff(head.as_bytes());
        assert!(
            matches!(got, Err(SniffError::Malformed { .. })),
            "{host} must be malformed, got {got:?}"
        );
    }
    let head = "GET / HTTP/1.1\r\nHost: xn--bcher-kva.example\r\n\r\n";
    assert!(matches!(sniff(head.as_bytes()), Ok(Progress::Done(_))));
}

#[test]
fn http_heads_ask_for_more_until_the_blank_line_and_stop_at_the_cap() {
    let head = b"GET / HTTP/1.1\r\nHost: slow.example\r\n\r\n";
    for cut in 1..head.len() {
        assert_eq!(
            sniff(&head[..cut]),
            Ok(Progress::NeedMore),
            "cut at {cut} must ask for more"
        );
    }
    let mut endless = b"GET / HTTP/1.1\r\n".to_vec();
    while endless.len() < MAX_SNIFF_BYTES {
        endless.extend_from_slice(b"X-Pad: aaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    }
    assert_eq!(sniff(&endless), Err(SniffError::TooLarge(Protocol::Http)));
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = sniff(&bytes);
    }

    #[test]
    fn a_complete_head_arriving_in_pieces_is_never_refused_before_it_ends(
        method in proptest::sample::select(crate::egress::relay::h1::METHODS),
        path in "/[a-z0-9/?=&%.-]{0,40}",
        // A label that starts with "xn--" must be valid Punycode (an A-label) and is refused
        // otherwise (see `a_label_that_is_not_punycode_is_malformed`), so the labels here never
        // start with an "x".
        host in "[a-wyz0-9][a-z0-9-]{0,11}\\.example",
        cut in 0usize..400,
    ) {
        let head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nX-A: b\r\n\r\n");
        prop_assert!(matches!(sniff(head.as_bytes()), Ok(Progress::Done(_))));
        let cut = cut % head.len();
        prop_assert_eq!(sniff(&head.as_bytes()[..cut]), Ok(Progress::NeedMore));
    }

    #[test]
    fn mutated_client_hellos_never_panic(at in 0usize..400, byte in any::<u8>()) {
        let mut hello = client_hello("mutate.example", true);
        if let Some(b) = hello.get_mut(at) {
            *b = byte;
        }
        let _ = sniff(&hello);
    }
}
