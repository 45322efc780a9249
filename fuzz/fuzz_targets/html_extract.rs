//! The extractor on generated nesting and arbitrary markup: never panics, never overflows a
//! stack (it runs on a thread with the extraction pool's stack) and builds no tree deeper
//! than twice the cap.
#![no_main]

use std::time::Duration;

use tokio::time::Instant;

use fleetgate_proxy::vendors::html::{Scope, bounded, html_to_markdown, pool};
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

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
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
            html_to_markdown(&html, Scope::Main, deadline).expect("within a minute")
        })
        .expect("thread")
        .join()
        .expect("the extractor must not panic");
    assert!(converted.markdown.len() <= page.len() * 4, "bounded output");
});
