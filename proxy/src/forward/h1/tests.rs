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
        (
            "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
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
    assert!(is_hop_by_hop("x-secret-hop", &tokens));
    assert!(is_hop_by_hop("Proxy-Authorization", &tokens));
    assert!(!is_hop_by_hop("authorization", &tokens));
}

#[test]
fn the_chunked_scanner_finds_the_end_across_any_split() {
    let body = b"5;ext=1\r\nhello\r\n10\r\n0123456789abcdef\r\n0\r\nX-Sum: 1\r\n\r\n";
    let mut with_next = body.to_vec();
    with_next.extend_from_slice(b"GET /next");
    // One buffer: the end is found exactly, the next message is left alone.
    let mut s = ChunkedScanner::default();
    assert_eq!(s.scan(&with_next).expect("valid"), Some(body.len()));
    // Every two-way split gives the same end.
    for cut in 0..body.len() {
        let mut s = ChunkedScanner::default();
        let first = s.scan(&body[..cut]).expect("valid prefix");
        assert_eq!(first, None, "no end inside the first {cut} bytes");
        let rest = s.scan(&with_next[cut..]).expect("valid rest");
        assert_eq!(rest, Some(body.len() - cut), "cut at {cut}");
    }
    // Byte by byte.
    let mut s = ChunkedScanner::default();
    let mut end = None;
    for (i, b) in body.iter().enumerate() {
        if let Some(n) = s.scan(std::slice::from_ref(b)).expect("valid") {
            end = Some(i + n);
        }
    }
    assert_eq!(end, Some(body.len()));
}

#[test]
fn malformed_chunked_bodies_are_refused() {
    let bad: [&[u8]; 6] = [
        b"\r\n",
        b"zz\r\n",
        b"5\r\nhelloXX",
        b"5\nhello\r\n",
        b"11111111111111111\r\n",
        b"0\r\nX\n",
    ];
    for raw in bad {
        let mut s = ChunkedScanner::default();
        assert!(
            matches!(s.scan(raw), Err(FramingError::Chunked(_))),
            "{:?} must be refused",
            String::from_utf8_lossy(raw)
        );
    }
    let mut s = ChunkedScanner::default();
    let long_ext = format!("1;{}", "e".repeat(MAX_CHUNK_META + 1));
    assert!(matches!(
        s.scan(long_ext.as_bytes()),
        Err(FramingError::Chunked(_))
    ));
}

#[test]
fn decimal_digits_without_allocation() {
    for n in [0u64, 7, 10, 200, 65_535, u64::MAX] {
        assert_eq!(itoa_u64(n, &mut [0u8; 20]), n.to_string().as_bytes());
    }
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
    let mut buf = BytesMut::from(&b"3\r\nabc"[..]);
    let mut src: &[u8] = b"\r\n0\r\n\r\nNEXT";
    let mut dst = Vec::new();
    let mut meter = BodyMeter {
        counter: &counter,
        bytes: 0,
    };
    let ended = relay_body(
        &mut src,
        &mut buf,
        &mut dst,
        b"HEAD\r\n\r\n".to_vec(),
        Framing::Chunked,
        clock,
        &mut meter,
    )
    .await
    .expect("relayed");
    assert!(ended, "a chunked body ends at a boundary");
    assert_eq!(dst, b"HEAD\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
    assert_eq!(&buf[..], b"NEXT");
    assert_eq!(meter.bytes, 13);
    assert_eq!(counter.get(), 13);

    // A length body cut short by the sender's close is an error, not a short success.
    let mut buf = BytesMut::new();
    let mut src: &[u8] = b"abc";
    let mut dst = Vec::new();
    let cut = relay_body(
        &mut src,
        &mut buf,
        &mut dst,
        Vec::new(),
        Framing::Length(10),
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
        b"H\r\n\r\n".to_vec(),
        Framing::UntilClose,
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
        Vec::new(),
        Framing::Length(5),
        clock,
        &mut meter,
    )
    .await;
    assert!(matches!(stalled, Err(FramingError::Idle(_))), "{stalled:?}");
}
