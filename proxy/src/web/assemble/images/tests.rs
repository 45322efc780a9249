//! Tests of the three base64 image passes, checked case by case against Hermes' results.

use std::borrow::Cow;

use super::*;

#[test]
fn the_three_passes_replace_what_hermes_replaces() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "seed 8: alt text kept",
            "![x](data:image/png;base64,AAAA)",
            "[IMAGE: x]",
        ),
        (
            "seed 8: blank alt",
            "![](data:image/png;base64,AAAA)",
            "[IMAGE]",
        ),
        (
            "alt of spaces is blank",
            "![ \t ](data:image/png;base64,AAAA)",
            "[IMAGE]",
        ),
        (
            "alt is stripped",
            "![  a cat \n](data:image/png;base64,AAAA)",
            "[IMAGE: a cat]",
        ),
        (
            "whitespace after the parenthesis",
            "![x](  \n data:image/png;base64,AA==)",
            "[IMAGE: x]",
        ),
        (
            "whitespace inside the payload",
            "![x](data:image/png;base64,AA AA\nBB==)",
            "[IMAGE: x]",
        ),
        (
            "svg+xml is a type",
            "![s](data:image/svg+xml;base64,PHN2Zz4=)",
            "[IMAGE: s]",
        ),
        (
            "pass 2: parenthesised",
            "see (data:image/jpeg;base64,/9j/4A==) here",
            "see [IMAGE] here",
        ),
        (
            "pass 2: whitespace inside",
            "( data:image/jpeg;base64,/9j/ 4A==)",
            "[IMAGE]",
        ),
        (
            "pass 3: bare",
            "src=data:image/gif;base64,R0lGOD=\"",
            "src=[IMAGE]\"",
        ),
        (
            "pass 3 stops at whitespace",
            "data:image/gif;base64,AB CD",
            "[IMAGE] CD",
        ),
        (
            "pass 1 without ) falls to pass 3",
            "![x](data:image/png;base64,AAAA",
            "![x]([IMAGE]",
        ),
        (
            "alt may hold brackets and parens",
            "![a [b (c)](data:image/png;base64,QQ)",
            "[IMAGE: a [b (c)]",
        ),
        (
            "a ] inside alt starts the alt later",
            "![a] ![b](data:image/png;base64,QQ)",
            "![a] [IMAGE: b]",
        ),
        (
            "two images in a row",
            "![a](data:image/png;base64,QQ)![b](data:image/png;base64,QQ)",
            "[IMAGE: a][IMAGE: b]",
        ),
        (
            "an empty type is not a match",
            "data:image/;base64,AAAA",
            "data:image/;base64,AAAA",
        ),
        (
            "an empty payload is not a match",
            "data:image/png;base64,",
            "data:image/png;base64,",
        ),
        (
            "non-base64 data uri is untouched",
            "![x](data:image/svg+xml,%3Csvg%3E)",
            "![x](data:image/svg+xml,%3Csvg%3E)",
        ),
        (
            "matching is case-sensitive",
            "![x](DATA:IMAGE/png;base64,AAAA)",
            "![x](DATA:IMAGE/png;base64,AAAA)",
        ),
        (
            "Base64 in caps is not the marker",
            "data:image/png;BASE64,AAAA",
            "data:image/png;BASE64,AAAA",
        ),
        (
            "the type may span a newline",
            "data:image/p\nng;base64,AA",
            "[IMAGE]",
        ),
        (
            "python whitespace includes U+001C",
            "![x](\u{1c}data:image/png;base64,AA)",
            "[IMAGE: x]",
        ),
        (
            "python whitespace includes U+3000",
            "![\u{3000}x\u{3000}](data:image/png;base64,A\u{3000}A)",
            "[IMAGE: x]",
        ),
        (
            "zero-width space is not whitespace",
            "(\u{200b}data:image/png;base64,AA)",
            "(\u{200b}[IMAGE])",
        ),
    ];
    for (name, input, want) in cases {
        assert_eq!(convert_base64_images_to_links(input), *want, "{name}");
    }
}

#[test]
fn http_image_links_are_left_exactly_as_they_are() {
    for input in [
        "![x](https://a/b.png)",
        "![logo](http://example.com/logo.svg \"title\")",
        "<img src=\"https://cdn.example/x.jpg\">",
    ] {
        let out = convert_base64_images_to_links(input);
        assert!(
            matches!(out, Cow::Borrowed(_)),
            "{input} must be borrowed, untouched"
        );
        assert_eq!(out, input, "{input} must be unchanged");
    }
}

#[test]
fn text_with_the_literal_but_no_match_is_returned_unchanged() {
    let input = "talk about data:image/ urls without payloads";
    assert_eq!(
        convert_base64_images_to_links(input),
        input,
        "no match must change nothing"
    );
}

#[test]
fn many_occurrences_sharing_one_long_payload_stay_linear() {
    // Each "![](data:image/" shares the one distant ';' and the one long payload, which has no
    // closing parenthesis; a naive matcher rescans the payload per occurrence.
    let n = 20_000;
    let mut page = "![](data:image/".repeat(n);
    page.push_str("png;base64,");
    page.push_str(&"A".repeat(200_000));
    let started = tokio::time::Instant::now();
    let out = convert_base64_images_to_links(&page);
    let elapsed = started.elapsed();
    // Passes 1 and 2 find no closing parenthesis; pass 3 takes everything from the first
    // literal through the end of the payload.
    assert_eq!(out, "![]([IMAGE]", "the bare pass must take the whole run");
    assert!(
        elapsed.as_millis() < 2_000,
        "the passes must stay linear, took {elapsed:?}"
    );
}

#[test]
fn the_python_whitespace_set_is_exactly_isspace() {
    let expected: Vec<u32> = vec![
        0x9, 0xa, 0xb, 0xc, 0xd, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001,
        0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029,
        0x202f, 0x205f, 0x3000,
    ];
    let got: Vec<u32> = (0..=0x10ffff_u32)
        .filter_map(char::from_u32)
        .filter(|&c| is_python_space(c))
        .map(u32::from)
        .collect();
    assert_eq!(
        got, expected,
        "the set must equal Python's str.isspace() code points"
    );
}
