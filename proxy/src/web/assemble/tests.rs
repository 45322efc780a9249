//! Tests of the E7 entry points: the char-limit clamp and the per-row assembly order.

use serde_json::{Value, json};

use super::*;

#[test]
fn char_limit_follows_python_int_and_clamps() {
    let cases: &[(&str, Option<Value>, usize)] = &[
        ("absent takes the default", None, 15_000),
        ("null takes the default", Some(Value::Null), 15_000),
        ("below the floor clamps up", Some(json!(1999)), 2_000),
        ("the floor itself is kept", Some(json!(2000)), 2_000),
        (
            "a value inside the range is kept",
            Some(json!(40_000)),
            40_000,
        ),
        (
            "above the ceiling clamps down",
            Some(json!(500_001)),
            500_000,
        ),
        ("a float truncates toward zero", Some(json!(2.9)), 2_000),
        ("a float in range truncates", Some(json!(3000.99)), 3_000),
        ("true is one, clamped up", Some(json!(true)), 2_000),
        ("false is zero, clamped up", Some(json!(false)), 2_000),
        (
            "a non-numeric string takes the default",
            Some(json!("abc")),
            15_000,
        ),
        ("a negative number clamps up", Some(json!(-5)), 2_000),
        (
            "a numeric string is that number",
            Some(json!("3000")),
            3_000,
        ),
        (
            "surrounding whitespace is ignored",
            Some(json!(" 4000\n")),
            4_000,
        ),
        (
            "an integral float string is coerced",
            Some(json!("2500.0")),
            2_500,
        ),
        ("an exponent string is coerced", Some(json!("3e3")), 3_000),
        (
            "digit underscores are accepted",
            Some(json!("10_000")),
            10_000,
        ),
        (
            "a fractional string takes the default",
            Some(json!("2500.5")),
            15_000,
        ),
        (
            "infinity as a string takes the default",
            Some(json!("inf")),
            15_000,
        ),
        (
            "a misplaced underscore takes the default",
            Some(json!("_100")),
            15_000,
        ),
        (
            "a huge integer string clamps down",
            Some(json!("9".repeat(400))),
            500_000,
        ),
        (
            "a huge negative integer clamps up",
            Some(json!(format!("-{}", "9".repeat(40)))),
            2_000,
        ),
        ("an array takes the default", Some(json!([3000])), 15_000),
        (
            "an object takes the default",
            Some(json!({"n": 3000})),
            15_000,
        ),
        ("u64 beyond i64 clamps down", Some(json!(u64::MAX)), 500_000),
    ];
    for (name, value, want) in cases {
        let got = clamp_char_limit(value.as_ref(), DEFAULT_CHAR_LIMIT);
        assert_eq!(
            got, *want,
            "{name}: the clamped limit must match Python's int()"
        );
    }
}

#[test]
fn an_absent_limit_uses_the_configured_default_clamped() {
    assert_eq!(
        clamp_char_limit(None, 40_000),
        40_000,
        "a configured default must be used"
    );
    assert_eq!(
        clamp_char_limit(None, 10),
        2_000,
        "a tiny configured default must be clamped"
    );
    assert_eq!(
        clamp_char_limit(None, 10_000_000),
        500_000,
        "a huge one must be clamped"
    );
}

#[test]
fn a_binary_page_is_refused_with_hermes_message_and_no_content() {
    let page = "\u{89}PNG\r\n\u{1a}\n\0\0\0\rIHDR plus the rest of the image";
    let err = assemble_page(page, 2_000, "https://e.com/a.png", None)
        .expect_err("a PNG payload must be refused");
    assert_eq!(
        err,
        "URL returned binary content (PNG image data), not a page. Download it with the terminal \
         (curl -L -o) and use read_file (SQLite/Office/PDF auto-extract) or terminal utilities on the file.",
        "the refusal must be Hermes' message word for word"
    );
}

#[test]
fn images_are_replaced_before_the_page_is_measured() {
    // 3,000 characters of base64 would overflow a 2,000 budget; the placeholder does not.
    let page = format!(
        "intro ![logo](data:image/png;base64,{}) outro",
        "A".repeat(3_000)
    );
    let out = assemble_page(&page, 2_000, "https://e.com/", None)
        .expect("a text page must pass")
        .content;
    assert_eq!(
        out, "intro [IMAGE: logo] outro",
        "the image must be replaced and nothing cut"
    );
}

#[test]
fn a_long_page_is_truncated_after_the_image_pass() {
    let page = format!("data:image/gif;base64,AAAA {}", "x".repeat(5_000));
    let out = assemble_page(&page, 2_000, "https://e.com/", None)
        .expect("a text page must pass")
        .content;
    assert!(
        out.starts_with("[IMAGE] xxx"),
        "the image must be replaced in the head: {out:.40}"
    );
    assert!(out.contains("[TRUNCATED]"), "the page must be truncated");
    assert!(
        out.contains("of 5,008 total clean characters."),
        "the total counts the cleaned text"
    );
}

#[test]
fn an_empty_page_stays_empty() {
    let out = assemble_page("", 2_000, "https://e.com/", None)
        .expect("an empty page must pass")
        .content;
    assert_eq!(out, "", "an empty page must come back empty");
}
