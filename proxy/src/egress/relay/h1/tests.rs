#![allow(clippy::expect_used, clippy::unwrap_used)]

use super::*;

fn request(raw: &str) -> Result<Option<Head>, FramingError> {
    Head::parse_request(&mut BytesMut::from(raw.as_bytes()))
}

fn framing_of(raw: &str) -> Result<Framing, FramingError> {
    request(raw)
        .expect("head must parse")
        .expect("head must be complete")
        .request_framing()
}

fn response(raw: &str) -> Head {
    Head::parse_response(&mut BytesMut::from(raw.as_bytes()))
        .expect("head must parse")
        .expect("head must be complete")
}

#[test]
fn a_request_head_is_split_off_its_buffer_with_fields_in_order() {
    let mut buf = BytesMut::from(
        &b"GET http://a.test/x?y HTTP/1.1\r\nHost: a.test\r\nX-A: 1\r\nx-a: 2\r\n\r\nNEXT"[..],
    );
    let head = Head::parse_request(&mut buf)
        .expect("parses")
        .expect("complete");
    assert_eq!(head.method(), "GET");
    assert_eq!(head.target(), "http://a.test/x?y");
    assert_eq!(head.minor, 1);
    let values: Vec<&[u8]> = head.values("X-A").collect();
    assert_eq!(values, vec![&b"1"[..], &b"2"[..]]);
    assert_eq!(&buf[..], b"NEXT", "bytes past the head stay for the body");
}

#[test]
fn partial_heads_wait_and_oversized_or_malformed_heads_are_refused() {
    assert!(matches!(
        request("GET http://a/ HTTP/1.1\r\nHost: a"),
        Ok(None)
    ));
    let huge = format!("GET http://a/ HTTP/1.1\r\nX: {}", "a".repeat(MAX_HEAD + 1));
    assert!(matches!(request(&huge), Err(FramingError::HeadTooLarge)));
    // Complete but too large: refused too, however it arrived.
    let complete = format!("{huge}\r\n\r\n");
    assert!(matches!(
        request(&complete),
        Err(FramingError::HeadTooLarge)
    ));
    assert!(matches!(
        request("GET http://a/ HTTP/1.1\r\nBad Name: x\r\n\r\n"),
        Err(FramingError::Head(_))
    ));
}

#[test]
fn request_framing_refuses_every_ambiguous_form() {
    let ok = [
        ("GET / HTTP/1.1\r\n\r\n", Framing::Empty),
        (
            "POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
            Framing::Empty,
        ),
        (
            "POST / HTTP/1.1\r\nContent-Length: 12\r\n\r\n",
            Framing::Length(12),
        ),
        (
            "POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n",
            Framing::Length(5),
        ),
        (
            "POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n",
            Framing::Chunked,
        ),
    ];
    for (raw, want) in ok {
        assert_eq!(framing_of(raw).expect(raw), want, "{raw:?}");
    }
    let refused = [
        "POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        // Re-framed, the gzip coding would lose its label: refused rather than changed.
        "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: identity, chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
    ];
    for raw in refused {
        assert!(
            matches!(framing_of(raw), Err(FramingError::Framing(_))),
            "{raw:?} must be refused"
        );
    }
}

#[test]
fn response_framing_follows_rfc_9112_section_6_3() {
    let cases = [
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n",
            "GET",
            Framing::Length(3),
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n",
            "HEAD",
            Framing::Empty,
        ),
        ("HTTP/1.1 204 No Content\r\n\r\n", "GET", Framing::Empty),
        (
            "HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
            "GET",
            Framing::Empty,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 9\r\n\r\n",
            "GET",
            Framing::Chunked,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            "GET",
            Framing::UntilClose,
        ),
        ("HTTP/1.1 200 OK\r\n\r\n", "GET", Framing::UntilClose),
        (
            "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n",
            "GET",
            Framing::Empty,
        ),
    ];
    for (raw, method, want) in cases {
        let got = response(raw).response_framing(method).expect(raw);
        assert_eq!(got, want, "{raw:?} to {method}");
    }
    let layered = response("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
    assert!(
        matches!(
            layered.response_framing("GET"),
            Err(FramingError::Framing(_))
        ),
        "a coding beneath chunked cannot be restated, so it is not relayed"
    );
}

#[test]
fn keep_alive_follows_the_version_and_connection_tokens() {
    let cases = [
        ("GET / HTTP/1.1\r\n\r\n", true),
        ("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n", false),
        ("GET / HTTP/1.0\r\n\r\n", false),
        ("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true),
        ("GET / HTTP/1.1\r\nConnection: x-hop, close\r\n\r\n", false),
    ];
    for (raw, want) in cases {
        let head = request(raw).expect("parses").expect("complete");
        assert_eq!(head.keep_alive(&head.connection_tokens()), want, "{raw:?}");
    }
    let head = request("GET / HTTP/1.1\r\nConnection: X-Secret-Hop , keep-alive\r\n\r\n")
        .expect("parses")
        .expect("complete");
    let tokens = head.connection_tokens();
    assert!(is_hop_by_hop(b"x-secret-hop", &tokens));
    assert!(is_hop_by_hop(b"Proxy-Authorization", &tokens));
    assert!(!is_hop_by_hop(b"authorization", &tokens));
}

#[tokio::test]
async fn relay_body_stops_at_the_message_end_and_sends_the_head_first() {
    let counter = IntCounter::new("t", "t").expect("counter");
    let clock = Clock {
        idle: Duration::from_secs(5),
        deadline: Instant::now() + Duration::from_secs(5),
    };
    // Part of the body is buffered, the rest arrives from the source; bytes of the next
    // message stay in the buffer.
    let mut buf = BytesMut::from(&b"03;x=y\r\nabc"[..]);
    let mut src: &[u8] = b"\r\n0\r\nX-T: 1\r\n\r\nNEXT";
    let mut dst = Vec::new();
    let mut meter = BodyMeter {
        counter: &counter,
        bytes: 0,
    };
    let ended = relay_body(
        &mut src,
        &mut buf,
        &mut dst,
        Outgoing {
            head: b"HEAD\r\n\r\n".to_vec(),
            framing: Framing::Chunked,
            encode: Encode::Chunked,
        },
        clock,
        &mut meter,
    )
    .await
    .expect("relayed");
    assert!(ended, "a chunked body ends at a boundary");
    assert_eq!(
        dst, b"HEAD\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        "re-framed: the extension and the trailer never cross"
    );
    assert_eq!(&buf[..], b"NEXT");
    assert_eq!(meter.bytes, 3, "the meter counts body data");
    assert_eq!(counter.get(), 3);

    // A length body cut short by the sender's close is an error, not a short success.
    let mut buf = BytesMut::new();
    let mut src: &[u8] = b"abc";
    let mut dst = Vec::new();
    let cut = relay_body(
        &mut src,
        &mut buf,
        &mut dst,
        Outgoing {
            head: Vec::new(),
            framing: Framing::Length(10),
            encode: Encode::Chunked,
        },
        clock,
        &mut meter,
    )
    .await;
    assert!(matches!(cut, Err(FramingError::Truncated)));

    // Until-close bodies end with the close.
    let mut buf = BytesMut::new();
    let mut src: &[u8] = b"all of it";
    let mut dst = Vec::new();
    let ended = relay_body(
        &mut src,
        &mut buf,
        &mut dst,
        Outgoing {
            head: b"H\r\n\r\n".to_vec(),
            framing: Framing::UntilClose,
            encode: Encode::Chunked,
        },
        clock,
        &mut meter,
    )
    .await
    .expect("relayed");
    assert!(!ended);
    assert_eq!(dst, b"H\r\n\r\nall of it");
}

#[tokio::test(start_paused = true)]
async fn relay_body_gives_up_after_the_idle_limit() {
    let counter = IntCounter::new("t", "t").expect("counter");
    let clock = Clock {
        idle: Duration::from_secs(2),
        deadline: Instant::now() + Duration::from_secs(60),
    };
    let (mut src, _keep_open) = tokio::io::duplex(64);
    let mut buf = BytesMut::new();
    let mut dst = Vec::new();
    let mut meter = BodyMeter {
        counter: &counter,
        bytes: 0,
    };
    let stalled = relay_body(
        &mut src,
        &mut buf,
        &mut dst,
        Outgoing {
            head: Vec::new(),
            framing: Framing::Length(5),
            encode: Encode::Chunked,
        },
        clock,
        &mut meter,
    )
    .await;
    assert!(matches!(stalled, Err(FramingError::Idle(_))), "{stalled:?}");
}

#[test]
fn hop_by_hop_headers_and_proxy_credentials_never_cross() {
    let mut h = http::HeaderMap::new();
    for (k, v) in [
        ("connection", "keep-alive, X-Secret-Hop"),
        ("x-secret-hop", "1"),
        ("keep-alive", "timeout=5"),
        ("proxy-connection", "keep-alive"),
        ("proxy-authorization", "Basic dTpw"),
        ("te", "trailers"),
        ("trailer", "x-sum"),
        ("upgrade", "websocket"),
        ("accept", "text/html"),
        ("authorization", "Bearer end-to-end"),
    ] {
        h.append(
            HeaderName::from_static(k),
            http::HeaderValue::from_str(v).expect("test header value"),
        );
    }
    strip_hop_by_hop(&mut h);
    let mut left: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
    left.sort_unstable();
    assert_eq!(
        left,
        vec!["accept", "authorization"],
        "only end-to-end headers may remain"
    );
}
