use super::is_silence;

/// (reply, is silence, why) — the matching rules, one row per rule and edge.
pub(crate) const CASES: &[(&str, bool, &str)] = &[
    ("[SILENT]", true, "the bracketed marker alone"),
    ("SILENT", true, "the bare marker"),
    ("NO_REPLY", true, "the underscore marker"),
    ("NO REPLY", true, "the spaced marker"),
    (
        "no   reply",
        true,
        "case and inner whitespace runs are canonicalised",
    ),
    (
        "  [silent]\n",
        true,
        "surrounding whitespace is trimmed and case ignored",
    ),
    ("\tNo_Reply\t", true, "tabs count as whitespace"),
    ("NO-REPLY", false, "a hyphen is not the marker"),
    ("NOREPLY", false, "a missing separator is not the marker"),
    ("[SILENT", false, "an unclosed bracket is not the marker"),
    ("", false, "an empty reply is not silence"),
    ("   \n\t ", false, "a blank reply is not silence"),
    (
        "2 deals filtered\n\n[SILENT]",
        true,
        "the marker on the last non-blank line",
    ),
    (
        "[SILENT]\nnothing changed since yesterday",
        true,
        "the marker on the first line",
    ),
    (
        "line one\nSILENT\nline three",
        false,
        "a marker on a middle line is content",
    ),
    (
        "[SILENT] No changes detected",
        true,
        "the bracketed marker as a same-line prefix",
    ),
    (
        "[silent] nothing new",
        true,
        "the bracketed prefix ignores case",
    ),
    (
        "SILENT retry succeeded",
        false,
        "a bare-word prefix is content",
    ),
    (
        "NO_REPLY needed here",
        false,
        "a bare marker prefix is content",
    ),
    (
        "I considered staying [SILENT] but here is the summary",
        false,
        "a marker mid-sentence",
    ),
    (
        ".NO_REPLY",
        false,
        "edge punctuation is not stripped by the cron rule",
    ),
    (
        "report\r\n\r\nNO REPLY\r\n",
        true,
        "CRLF line breaks split lines",
    ),
    (
        "report\u{2028}SILENT",
        true,
        "a Unicode line separator splits lines",
    ),
    ("\u{a0}SILENT\u{a0}", true, "a no-break space is whitespace"),
    (
        "[\u{17f}ilent] nothing new",
        true,
        "a long s upper-cases to S, as in Python's str.upper",
    ),
    (
        "\u{17f}ILENT",
        true,
        "a marker reached only by upper-casing a non-ASCII letter",
    ),
    (
        "N O R E P L Y x",
        false,
        "more non-space characters than any marker",
    ),
    (
        "[SILENT\u{df}] x",
        false,
        "a sharp s upper-cases to two letters after the marker's eighth character",
    ),
];

#[test]
fn silence_matching_follows_the_cron_rules() {
    for (reply, want, why) in CASES {
        assert_eq!(
            is_silence(reply),
            *want,
            "{why}: {reply:?} must give {want}"
        );
    }
}
