//! The extractor on generated nesting and arbitrary markup: never panics, never overflows a
//! stack (it runs on a thread with the extraction pool's stack) and builds no tree deeper
//! than twice the cap. And on content: HTML with visible text never converts to empty, in
//! either scope (main content or the whole page), whatever markup surrounds the text:
//! the property the proptest `visible_text_is_never_lost` (proxy/src/web/vendors/html.rs) checks,
//! with its vocabulary, here driven by the fuzzer.
#![no_main]

use std::time::Duration;

use tokio::time::Instant;

use fleetgate_proxy::web::vendors::html::{Scope, bounded, html_to_markdown, pool};
use libfuzzer_sys::fuzz_target;

/// Opening and closing markup of every element that nests, plus misnested and unclosed forms.
const LEVELS: &[(&str, &str)] = &[
    ("<div>", "</div>"),
    ("<table><tr><td>", "</td></tr></table>"),
    ("<ul><li>", "</li></ul>"),
    ("<ol><li>", ""),
    ("<blockquote>", "</blockquote>"),
    ("<b>", "</b>"),
    ("<i><b>", "</i></b>"),
    ("<a href=x>", "</a>"),
    ("<p>", ""),
    ("<select><option>", "</select>"),
    ("<svg><g>", "</g></svg>"),
    ("<font>", "</font>"),
];

/// The proptest's markup vocabulary: encoding indicators, chrome, unclosed and stray tags,
/// scripts, hidden boxes.
const MARKUP: &[&str] = &[
    "<div>",
    "</div>",
    "<p>",
    "</p>",
    "<span>",
    "</span>",
    "<main>",
    "</main>",
    "<article>",
    "</article>",
    "<nav>",
    "</nav>",
    "<footer>",
    "</footer>",
    "<aside>",
    "</aside>",
    "<section class=\"related\">",
    "</section>",
    "<ul>",
    "</ul>",
    "<li>",
    "</li>",
    "<a href=\"/x\">",
    "</a>",
    "<table>",
    "<tr>",
    "<td>",
    "</td>",
    "</table>",
    "<h1>",
    "</h1>",
    "<b>",
    "</b>",
    "<meta charset=\"utf-8\">",
    "<meta charset=\"shift_jis\">",
    "<meta http-equiv=\"Content-Type\" content=\"text/html; charset=gbk\">",
    "<br>",
    "<img src=\"/i.png\">",
    "<script>var x = 1;</script>",
    "<style>p { color: red }</style>",
    "<div style=\"display:none\">",
    "<head>",
    "</head>",
    "<body>",
    "<html>",
];

/// Words placed between the markup (a byte past the markup picks one).
const WORDS: &[&str] = &[
    "alpha",
    "Beta gamma",
    "delta, epsilon and zeta",
    "The committee met for three hours, and the minutes record a long discussion.",
    "x",
];

/// A page of the proptest's vocabulary, one token per byte, with a visible word inserted at
/// the place the first byte names; it must never convert to empty.
fn visible_text_is_never_lost(data: &[u8]) {
    let Some((&at, tokens)) = data.split_first() else {
        return;
    };
    let mut parts: Vec<&str> = tokens
        .iter()
        .take(64)
        .map(|&b| {
            let b = usize::from(b);
            MARKUP
                .get(b)
                .copied()
                .unwrap_or_else(|| WORDS[(b - MARKUP.len()) % WORDS.len()])
        })
        .collect();
    let at = usize::from(at).min(parts.len());
    parts.insert(at, " needle ");
    let page = parts.concat();
    let converted = std::thread::Builder::new()
        .stack_size(pool::STACK_BYTES)
        .spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            [Scope::Main, Scope::Full].map(|scope| {
                (
                    scope,
                    html_to_markdown(
                        &page,
                        scope,
                        Some("https://example.com/dir/page.html"),
                        deadline,
                    )
                    .expect("within a minute"),
                    page.clone(),
                )
            })
        })
        .expect("thread")
        .join()
        .expect("the extractor must not panic");
    for (scope, got, page) in converted {
        assert!(
            !got.markdown().trim().is_empty(),
            "{scope:?} converted to nothing: {page}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    // One input in four is a page of the proptest's vocabulary (the content assertion); the
    // rest are deep nests.
    if data[0] & 0x60 == 0x60 {
        visible_text_is_never_lost(&data[1..]);
        return;
    }
    // Three bytes pick the element, the depth (up to ~65k) and whether it closes; the rest is
    // arbitrary markup placed inside the nest.
    let (open, close) = LEVELS[usize::from(data[0]) % LEVELS.len()];
    let depth = usize::from(u16::from_le_bytes([data[1], data[2]]));
    let closed = data[0] & 0x80 != 0;
    let inner = String::from_utf8_lossy(&data[3..]);
    let mut page = String::from("<html><body>");
    page.push_str(&open.repeat(depth));
    page.push_str("needle words ");
    page.push_str(&inner);
    if closed {
        page.push_str(&close.repeat(depth));
    }
    let html = page.clone();
    let converted = std::thread::Builder::new()
        .stack_size(pool::STACK_BYTES)
        .spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            let doc = bounded::parse_document(&html, deadline).expect("within a minute");
            let depth = bounded::max_element_depth(doc.root_element());
            assert!(depth <= 2 * bounded::MAX_DEPTH + 8, "tree depth {depth}");
            html_to_markdown(&html, Scope::Main, None, deadline).expect("within a minute")
        })
        .expect("thread")
        .join()
        .expect("the extractor must not panic");
    assert!(converted.markdown().len() <= page.len() * 4, "bounded output");
    // The needle is visible unless the nest is one whose text is never shown.
    if !open.starts_with("<select") && !open.starts_with("<svg") {
        assert!(
            !converted.markdown().trim().is_empty(),
            "visible text converted to nothing: {open} x {depth}"
        );
    }
});
