use super::*;

#[test]
fn body_kinds_follow_content_type_then_sniffing() {
    let cases: &[(Option<&str>, &[u8], BodyKind)] = &[
        (Some("text/html; charset=utf-8"), b"x", BodyKind::Html),
        (Some("application/xhtml+xml"), b"x", BodyKind::Html),
        (Some("text/markdown"), b"# t", BodyKind::Text),
        (Some("application/json"), b"{}", BodyKind::Text),
        (Some("application/ld+json"), b"{}", BodyKind::Text),
        (Some("image/png"), b"\x89PNG", BodyKind::Binary),
        (Some("application/pdf"), b"%PDF", BodyKind::Binary),
        (None, b"<!DOCTYPE html><p>x", BodyKind::Html),
        // Leading whitespace of any length, then a tag the sniffing algorithm names.
        (
            None,
            b"\n\t\t\n   <!DOCTYPE HTML PUBLIC \"-//W3C//DTD HTML 4.01//EN\">",
            BodyKind::Html,
        ),
        (None, b"  <div class=x>words</div>", BodyKind::Html),
        (None, b"<!-- generated --><p>x</p>", BodyKind::Html),
        (None, b"<abbr>not a listed start</abbr>", BodyKind::Text),
        (None, b"plain words", BodyKind::Text),
        (None, b"\x00\x01\x02", BodyKind::Binary),
    ];
    for (ct, body, want) in cases {
        assert_eq!(BodyKind::of(*ct, body), *want, "kind of {ct:?} / {body:?}");
    }
}

#[test]
fn text_is_decoded_with_the_declared_or_meta_charset() {
    let latin1 = b"caf\xe9";
    assert_eq!(
        decode_text(Some("text/plain; charset=ISO-8859-1"), latin1, false),
        "café"
    );
    let html = b"<meta charset=\"windows-1252\"><p>caf\xe9</p>";
    assert!(decode_text(Some("text/html"), html, true).contains("café"));
    assert_eq!(decode_text(None, "naïve".as_bytes(), false), "naïve");
}

#[test]
fn gzip_and_brotli_bodies_are_decoded_and_capped() {
    use std::io::Write;
    let original = "hello ".repeat(1000);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(original.as_bytes()).unwrap();
    let gz = Bytes::from(gz.finish().unwrap());
    let mut headers = http::HeaderMap::new();
    headers.insert(header::CONTENT_ENCODING, "gzip".parse().unwrap());
    let decoded = decode_content_encoding(&headers, gz.clone(), 1 << 20).expect("gzip must decode");
    assert_eq!(decoded, original.as_bytes());
    let capped = decode_content_encoding(&headers, gz, 100);
    assert_eq!(
        capped,
        Err(VendorFailure::BodyTooLarge { limit: 100 }),
        "a zip bomb must hit the cap"
    );

    let mut br = Vec::new();
    {
        let mut w = brotli::CompressorWriter::new(&mut br, 4096, 5, 22);
        w.write_all(original.as_bytes()).unwrap();
    }
    headers.insert(header::CONTENT_ENCODING, "br".parse().unwrap());
    let decoded =
        decode_content_encoding(&headers, Bytes::from(br), 1 << 20).expect("br must decode");
    assert_eq!(decoded, original.as_bytes());

    headers.insert(header::CONTENT_ENCODING, "zstd".parse().unwrap());
    assert!(matches!(
        decode_content_encoding(&headers, Bytes::from_static(b"x"), 10),
        Err(VendorFailure::Protocol(_))
    ));
}

#[test]
fn markdown_titles_come_from_the_first_heading() {
    assert_eq!(markdown_title("intro\n# The Title\n## sub"), "The Title");
    assert_eq!(markdown_title("no heading"), "");
}
