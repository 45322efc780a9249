//! The fast writer against serde_json itself: every byte value, every position in a word,
//! and pages of mixed text.

use super::*;

fn ours(s: &str) -> String {
    let mut out = Vec::new();
    write_str(&mut out, s);
    String::from_utf8(out).expect("the literal is UTF-8")
}

fn theirs(s: &str) -> String {
    serde_json::to_string(s).expect("a str serializes")
}

#[test]
fn every_ascii_byte_at_every_word_position_escapes_as_serde_json_does() {
    for b in 0u8..0x80 {
        for pad in 0..17 {
            let s = format!(
                "{}{}{}",
                "a".repeat(pad),
                char::from(b),
                "z".repeat(17 - pad)
            );
            assert_eq!(ours(&s), theirs(&s), "byte {b:#04x} after {pad} bytes");
        }
    }
}

#[test]
fn tricky_strings_escape_as_serde_json_does() {
    let cases = [
        "",
        "\"",
        "\\",
        "quotes \" and backslash \\ and slash / and 'single'",
        "controls \u{0}\u{1}\u{8}\u{9}\u{a}\u{b}\u{c}\u{d}\u{1b}\u{1f} and DEL \u{7f}",
        "non-ASCII: é ü 中文 🦀 \u{feff} and the separators \u{2028} \u{2029}",
        "\u{2028}\u{2029}\u{2028}\u{2029}\"\u{1}",
        "a lone <script>\"</script> and &amp;\r\n\r\n",
    ];
    for s in cases {
        assert_eq!(ours(s), theirs(s), "{s:?}");
        let long = s.repeat(37);
        assert_eq!(ours(&long), theirs(&long), "{s:?} repeated");
    }
}

#[test]
fn the_word_test_misses_no_byte_that_needs_an_escape() {
    for b in 0u8..=255 {
        for pos in 0..8 {
            let mut w = [b'a'; 8];
            w[pos] = b;
            let needs = b < 0x20 || b == b'"' || b == b'\\';
            assert_eq!(
                needs_escape(u64::from_le_bytes(w)),
                needs,
                "byte {b:#04x} at {pos}"
            );
        }
    }
}
