#![allow(clippy::expect_used, clippy::unwrap_used)]

use super::*;

/// Decode `body` in one piece: the re-encoded output and where the body ended.
fn decode_all(body: &[u8], encode: Encode) -> Result<(Vec<u8>, Decoded), FramingError> {
    let mut out = Vec::new();
    let decoded = ChunkedDecoder::default().decode(body, &mut out, encode)?;
    Ok((out, decoded))
}

#[test]
fn a_body_is_reencoded_canonically_with_extensions_and_trailers_dropped() {
    let body = b"5;ext=1;q=\"a b\\\"c\"\r\nhello\r\n010\r\n0123456789abcdef\r\n000;last\r\nX-Sum: 1\r\nHost: evil.test\r\n\r\n";
    let mut with_next = body.to_vec();
    with_next.extend_from_slice(b"GET /next");
    let (out, decoded) = decode_all(&with_next, Encode::Chunked).expect("valid body");
    assert_eq!(
        String::from_utf8_lossy(&out),
        "5\r\nhello\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n",
        "sizes are restated in lower-case hex without padding; extensions and trailers never cross"
    );
    assert_eq!(
        decoded.consumed,
        body.len(),
        "the next message is left alone"
    );
    assert_eq!(decoded.data, 21);
    assert!(decoded.done);
    let (identity, _) = decode_all(body, Encode::Identity).expect("valid body");
    assert_eq!(identity, b"hello0123456789abcdef");
}

#[test]
fn every_split_of_the_input_decodes_to_the_same_data() {
    let body = b"5;ext=1\r\nhello\r\n10\r\n0123456789abcdef\r\n0\r\nX-Sum: 1\r\n\r\n";
    for cut in 0..body.len() {
        let mut dec = ChunkedDecoder::default();
        let mut out = Vec::new();
        let first = dec
            .decode(&body[..cut], &mut out, Encode::Identity)
            .expect("valid prefix");
        assert!(!first.done, "no end inside the first {cut} bytes");
        assert_eq!(first.consumed, cut, "a prefix is consumed whole");
        let rest = dec
            .decode(&body[cut..], &mut out, Encode::Identity)
            .expect("valid rest");
        assert!(rest.done, "cut at {cut}");
        assert_eq!(rest.consumed, body.len() - cut);
        assert_eq!(out, b"hello0123456789abcdef", "cut at {cut}");
    }
    // Byte by byte, re-encoded: every data byte becomes its own canonical chunk.
    let mut dec = ChunkedDecoder::default();
    let mut out = Vec::new();
    let mut done = false;
    for b in body {
        done = dec
            .decode(std::slice::from_ref(b), &mut out, Encode::Chunked)
            .expect("valid")
            .done;
    }
    assert!(done);
    assert!(out.starts_with(b"1\r\nh\r\n1\r\ne\r\n"));
    assert!(out.ends_with(b"1\r\nf\r\n0\r\n\r\n"));
}

#[test]
fn size_lines_outside_rfc_9112_are_refused() {
    let bad: &[(&str, &[u8])] = &[
        ("empty size line", b"\r\n"),
        ("not hex", b"zz\r\n"),
        ("space inside the size", b"1 0\r\nx\r\n0\r\n\r\n"),
        (
            "whitespace around an extension",
            b"1 ; a = b\r\nx\r\n0\r\n\r\n",
        ),
        ("garbage after a space", b"2 erfrferferf\r\nxx\r\n0\r\n\r\n"),
        ("tab after the size", b"1\t\r\nx\r\n"),
        ("0x prefix", b"0x1\r\nx\r\n"),
        ("plus sign", b"+1\r\nx\r\n"),
        ("minus sign", b"-0\r\n\r\n"),
        ("17 hex digits", b"11111111111111111\r\n"),
        ("empty extension name", b"1;\r\nx\r\n"),
        ("empty extension value", b"1;a=\r\nx\r\n"),
        ("two semicolons", b"1;;a\r\nx\r\n"),
        ("unterminated quote", b"1;a=\"x\r\nx\r\n"),
        ("text after a quoted value", b"1;a=\"x\"y\r\nx\r\n"),
        ("bare LF after the size", b"5\nhello\r\n"),
        ("bare CR after the size", b"5\rhello\r\n"),
        ("data longer than its size", b"5\r\nhelloXX"),
        ("bare LF after the data", b"1\r\nx\n0\r\n\r\n"),
        (
            "a request line as a trailer",
            b"0\r\nGET /x HTTP/1.1\r\n\r\n",
        ),
        ("space before a trailer colon", b"0\r\nX : 1\r\n\r\n"),
        ("trailer without a colon", b"0\r\nX\r\n\r\n"),
        ("bare LF in the trailers", b"0\r\nX: 1\n\r\n"),
        ("obs-fold in the trailers", b"0\r\nX: 1\r\n  2\r\n\r\n"),
        ("NUL in a trailer value", b"0\r\nX: a\x00b\r\n\r\n"),
        ("bare LF at the end", b"0\r\n\n"),
    ];
    for (name, raw) in bad {
        let got = decode_all(raw, Encode::Chunked);
        assert!(
            matches!(got, Err(FramingError::Chunked(_))),
            "{name} ({:?}) must be refused, got {got:?}",
            String::from_utf8_lossy(raw)
        );
    }
    let long_ext = format!("1;{}", "e".repeat(MAX_CHUNK_META + 1));
    assert!(matches!(
        decode_all(long_ext.as_bytes(), Encode::Chunked),
        Err(FramingError::Chunked(_))
    ));
    let long_trailers = format!("0\r\n{}", "X: y\r\n".repeat(MAX_CHUNK_META / 6 + 1));
    assert!(matches!(
        decode_all(long_trailers.as_bytes(), Encode::Chunked),
        Err(FramingError::Chunked(_))
    ));
}

#[test]
fn the_trailer_smuggle_reaches_nobody() {
    // A trailer section shaped as a second request, and its well-formed `X:` variant: the
    // first is refused by the trailer grammar, the second parsed and dropped.
    let smuggle = b"0\r\nGET /x?token=abc HTTP/1.1\r\nHost: blocked.example\r\n\r\n";
    assert!(decode_all(smuggle, Encode::Chunked).is_err());
    let variant = b"0\r\nX:GET /x?token=abc HTTP/1.1\r\nHost: blocked.example\r\n\r\n";
    let (out, decoded) = decode_all(variant, Encode::Chunked).expect("well-formed trailers");
    assert_eq!(out, b"0\r\n\r\n");
    assert_eq!(decoded.consumed, variant.len());
}

#[test]
fn leading_zeros_and_upper_case_hex_are_read_as_numbers() {
    let (out, d) = decode_all(b"000A\r\n0123456789\r\n0\r\n\r\n", Encode::Chunked).expect("valid");
    assert_eq!(out, b"a\r\n0123456789\r\n0\r\n\r\n");
    assert_eq!(d.data, 10);
}
