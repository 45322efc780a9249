//! Tests of head/tail truncation: seeds, snapping thresholds, code points, footers, properties.

use std::path::Path;

use proptest::prelude::*;

use super::*;

const NOT_STORED_FOOTER: &str = "\n\n──────── [TRUNCATED] ────────\nShowing {H} chars (head) + {T} chars (tail) of {N} total clean characters.\nFull text could not be stored; re-run web_extract on a more specific URL or use browser_navigate for the complete page.\n─────────────────────────────";

fn footer_without_store(head: &str, tail: &str, total: &str) -> String {
    NOT_STORED_FOOTER
        .replace("{H}", head)
        .replace("{T}", tail)
        .replace("{N}", total)
}

/// Head and tail of a model text, split on the marker and the footer.
fn parts(out: &str) -> (&str, &str) {
    let (head, rest) = out
        .split_once(MIDDLE_MARKER)
        .expect("the marker must be present");
    let tail_end = rest
        .rfind("\n\n──────── [TRUNCATED]")
        .expect("the footer must be present");
    (head, &rest[..tail_end])
}

#[test]
fn seed_7_a_single_line_page_splits_1500_and_500() {
    let page: String = (0..10_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let out = truncate_and_store(&page, 2_000, "https://e.com/", None);
    let want = format!(
        "{}{MIDDLE_MARKER}{}{}",
        &page[..1_500],
        &page[9_500..],
        footer_without_store("1,500", "500", "10,000")
    );
    assert_eq!(
        out, want,
        "seed 7 must be head 1500 + tail 500 with the not-stored footer"
    );
}

#[test]
fn seed_7_with_a_store_names_the_file_and_offset_2() {
    let root = tempfile::tempdir().expect("a temp dir must be creatable");
    let store = Store::new(root.path(), Some(Path::new("/agent/cache")));
    let page = "z".repeat(10_000);
    let out = truncate_and_store(&page, 2_000, "https://e.com/p", Some(&store));
    let path = store.agent_visible(
        &store
            .dir()
            .join(Store::file_name("https://e.com/p").expect("name")),
    );
    let path = path.to_string_lossy();
    let want_footer = format!(
        "\n\n──────── [TRUNCATED] ────────\nShowing 1,500 chars (head) + 500 chars (tail) of 10,000 total clean characters.\nFull text saved to: {path}\nTo read the omitted middle: read_file path=\"{path}\" offset=2 limit=200  (the file is the complete page; raise/lower offset to page through it).\n─────────────────────────────"
    );
    assert!(
        path.starts_with("/agent/cache/store/e.com-"),
        "the footer path must be agent-visible"
    );
    assert!(
        out.ends_with(&want_footer),
        "the stored footer must be exact:\n{out}"
    );
    let stored = std::fs::read_to_string(
        store
            .dir()
            .join(Store::file_name("https://e.com/p").expect("name")),
    )
    .expect("the full text must be stored");
    assert_eq!(stored, page, "the store must hold the complete page");
}

#[test]
fn a_page_within_the_budget_is_returned_borrowed() {
    for page in ["short", &"é".repeat(2_000)] {
        let out = truncate_and_store(page, 2_000, "https://e.com/", None);
        assert!(
            matches!(out, Cow::Borrowed(_)),
            "a fitting page must be borrowed"
        );
        assert_eq!(out, page, "a fitting page must be unchanged");
    }
}

#[test]
fn head_and_tail_snap_at_the_half_budget_thresholds() {
    // limit 2000: head budget 1500 (snaps when the newline index > 750), tail budget 500
    // (snaps when the newline index < 250).
    let cases: &[(&str, usize, usize, usize, usize)] = &[
        // (name, head newline index, tail newline index, head chars, tail chars)
        (
            "newlines exactly at the thresholds do not snap the head",
            750,
            250,
            1_500,
            500,
        ),
        ("one past the head threshold snaps", 751, 250, 751, 500),
        ("one before the tail threshold snaps", 750, 249, 1_500, 250),
        ("both snap", 1_000, 0, 1_000, 499),
        (
            "a newline at the head's last character snaps",
            1_499,
            499,
            1_499,
            500,
        ),
    ];
    for (name, head_nl, tail_nl, head_chars, tail_chars) in cases {
        let mut page: Vec<char> = vec!['a'; 10_000];
        page[*head_nl] = '\n';
        page[9_500 + tail_nl] = '\n';
        let page: String = page.into_iter().collect();
        let out = truncate_and_store(&page, 2_000, "https://e.com/", None);
        let (head, tail) = parts(&out);
        assert_eq!(head.chars().count(), *head_chars, "{name}: head length");
        assert_eq!(tail.chars().count(), *tail_chars, "{name}: tail length");
        let shown = format!(
            "Showing {} chars (head) + {} chars (tail)",
            thousands(*head_chars),
            thousands(*tail_chars)
        );
        assert!(
            out.contains(&shown),
            "{name}: the footer must report the snapped sizes"
        );
    }
}

#[test]
fn the_read_offset_counts_head_lines_plus_two() {
    let root = tempfile::tempdir().expect("a temp dir must be creatable");
    let store = Store::new(root.path(), None);
    let page = "line of text\n".repeat(1_000); // 13,000 characters, 1,000 lines
    let out = truncate_and_store(&page, 2_000, "https://e.com/", Some(&store));
    let (head, _) = parts(&out);
    // The head snaps back to the newline at index 1,494: 114 full lines plus a 115th.
    assert_eq!(
        head.matches('\n').count(),
        114,
        "the head must hold 115 lines"
    );
    assert!(
        out.contains(" offset=116 limit=200  (the file"),
        "offset must be 114 + 2:\n{out}"
    );
}

#[test]
fn multibyte_text_is_measured_in_code_points() {
    // 4-byte, 3-byte and 2-byte characters: every cut must land on a character boundary.
    let page: String = "😀€é".chars().cycle().take(9_999).collect();
    let out = truncate_and_store(&page, 2_000, "https://e.com/", None);
    let (head, tail) = parts(&out);
    assert_eq!(
        head,
        page.chars().take(1_500).collect::<String>(),
        "the head must be 1,500 characters"
    );
    assert_eq!(
        tail,
        page.chars().skip(9_499).collect::<String>(),
        "the tail must be 500 characters"
    );
    assert!(
        out.contains("of 9,999 total clean characters."),
        "the total must count characters"
    );
}

#[test]
fn stats_report_original_and_sent_characters() {
    let page = "ß".repeat(5_000);
    let (out, stats) = truncate_with_stats(&page, 2_000, "https://e.com/", None);
    let stats = stats.expect("a truncated page must have stats");
    assert_eq!(
        stats.original_chars, 5_000,
        "original size must be characters of the page"
    );
    assert_eq!(
        stats.sent_chars,
        out.chars().count(),
        "sent size must be characters of the output"
    );
    assert!(
        truncate_with_stats("small", 2_000, "u", None).1.is_none(),
        "no stats without a cut"
    );
}

#[test]
fn a_failed_store_uses_the_not_stored_footer() {
    let root = tempfile::tempdir().expect("a temp dir must be creatable");
    // A regular file where the store directory should be makes every write fail.
    std::fs::write(root.path().join("store"), "not a dir").expect("the blocker must be writable");
    let store = Store::new(root.path(), None);
    let page = "q".repeat(3_000);
    let out = truncate_and_store(&page, 2_000, "https://e.com/", Some(&store));
    assert!(
        out.ends_with(&footer_without_store("1,500", "500", "3,000")),
        "the fallback footer:\n{out}"
    );
}

#[test]
fn thousands_separators_match_python() {
    let cases = [
        (0, "0"),
        (999, "999"),
        (1_000, "1,000"),
        (12_345, "12,345"),
        (1_234_567, "1,234,567"),
    ];
    for (n, want) in cases {
        assert_eq!(thousands(n), want, "{n} must format like Python's {{:,}}");
    }
}

#[test]
fn char_offset_walks_agree_with_char_indices() {
    let s: String = "aé€😀\n".chars().cycle().take(500).collect();
    let total = s.chars().count();
    for n in [0, 1, 2, 3, 63, 64, 65, 200, total - 1, total, total + 5] {
        let forward = s.char_indices().nth(n).map_or(s.len(), |(i, _)| i);
        assert_eq!(advance_chars(&s, 0, n), forward, "advance by {n}");
        let backward = if n >= total {
            0
        } else {
            s.char_indices().nth(total - n).map_or(s.len(), |(i, _)| i)
        };
        assert_eq!(retreat_chars(&s, n), backward, "retreat by {n}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn truncation_keeps_a_prefix_and_a_suffix_within_the_budget(
        page in "(\\PC|\n){0,400}",
        limit in 1usize..300,
    ) {
        let out = truncate_and_store(&page, limit, "https://e.com/", None);
        if page.chars().count() <= limit {
            prop_assert_eq!(out.as_ref(), page.as_str(), "a fitting page must be unchanged");
        } else {
            let (head, tail) = parts(&out);
            prop_assert!(page.starts_with(head), "the head must be a prefix of the page");
            prop_assert!(page.ends_with(tail), "the tail must be a suffix of the page");
            prop_assert!(head.chars().count() + tail.chars().count() <= limit, "head + tail within the limit");
            let footer_len = out.chars().count() - head.chars().count() - tail.chars().count();
            prop_assert!(out.chars().count() <= limit + footer_len, "output within limit + footer");
        }
    }

    #[test]
    fn truncation_never_panics_on_arbitrary_unicode(page in "\\PC{0,600}", limit in 0usize..700) {
        let _ = truncate_and_store(&page, limit, "https://e.com/", None);
    }
}
