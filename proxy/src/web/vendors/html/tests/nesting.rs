//! Deeply nested pages: every element that nests, at 2,500, 10,000 and 100,000 levels, closed
//! and unclosed, converts on the extraction pool's stack with its text kept, in a tree no
//! deeper than the cap.

use std::time::Duration;

use tokio::time::Instant;

use crate::web::vendors::html::bounded::{self, MAX_DEPTH};
use crate::web::vendors::html::{html_to_markdown, pool};

/// One nesting level: its opening and closing markup.
struct Level {
    name: &'static str,
    open: &'static str,
    close: &'static str,
}

const LEVELS: &[Level] = &[
    Level {
        name: "div",
        open: "<div>",
        close: "</div>",
    },
    Level {
        name: "table",
        open: "<table><tr><td>",
        close: "</td></tr></table>",
    },
    Level {
        name: "ul",
        open: "<ul><li>",
        close: "</li></ul>",
    },
    Level {
        name: "ol",
        open: "<ol><li>",
        close: "</li></ol>",
    },
    Level {
        name: "dl",
        open: "<dl><dd>",
        close: "</dd></dl>",
    },
    Level {
        name: "blockquote",
        open: "<blockquote>",
        close: "</blockquote>",
    },
    Level {
        name: "section",
        open: "<section>",
        close: "</section>",
    },
    Level {
        name: "b",
        open: "<b>",
        close: "</b>",
    },
    Level {
        name: "i",
        open: "<i>",
        close: "</i>",
    },
    Level {
        name: "em",
        open: "<em>",
        close: "</em>",
    },
    Level {
        name: "strong",
        open: "<strong>",
        close: "</strong>",
    },
    Level {
        name: "span",
        open: "<span>",
        close: "</span>",
    },
    Level {
        name: "a",
        open: "<a href=\"/x\">",
        close: "</a>",
    },
    Level {
        name: "code",
        open: "<code>",
        close: "</code>",
    },
    Level {
        name: "font",
        open: "<font color=red>",
        close: "</font>",
    },
    Level {
        name: "sub",
        open: "<sub>",
        close: "</sub>",
    },
    Level {
        name: "mixed",
        open: "<div><b><ul><li><blockquote><span>",
        close: "</span></blockquote></li></ul></b></div>",
    },
];

const DEPTHS: &[usize] = &[2_500, 10_000, 100_000];

fn page(level: &Level, depth: usize, closed: bool) -> String {
    let mut html = String::with_capacity(depth * (level.open.len() + level.close.len()) + 128);
    html.push_str("<html><head><title>Deep</title></head><body><p>head text</p>");
    for _ in 0..depth {
        html.push_str(level.open);
    }
    html.push_str("innermost words");
    if closed {
        for _ in 0..depth {
            html.push_str(level.close);
        }
        html.push_str("<p>tail text</p>");
    }
    html.push_str("</body></html>");
    html
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(600)
}

#[tokio::test]
async fn every_nesting_element_converts_on_the_pool_at_any_depth() {
    for level in LEVELS {
        for &depth in DEPTHS {
            for closed in [true, false] {
                let html = page(level, depth, closed);
                let case = format!("{} x {depth} (closed: {closed})", level.name);
                let converted =
                    pool::run(move || html_to_markdown(&html, super::Scope::Main, None, far()))
                        .await
                        .unwrap_or_else(|e| panic!("{case}: the pool lost the job: {e}"))
                        .unwrap_or_else(|_| panic!("{case}: ran past a 600 s deadline"));
                assert_eq!(converted.title, "Deep", "{case}");
                for text in ["head text", "innermost words"] {
                    assert!(
                        converted.markdown.contains(text),
                        "{case}: {text:?} lost from {:.200}",
                        converted.markdown
                    );
                }
                if closed {
                    assert!(
                        converted.markdown.contains("tail text"),
                        "{case}: the text after the nest was lost"
                    );
                }
            }
        }
    }
}

#[test]
fn the_parsed_tree_is_never_deeper_than_twice_the_cap() {
    for level in LEVELS {
        let html = page(level, 10_000, true);
        let doc = bounded::parse_document(&html, far()).expect("within the deadline");
        let depth = bounded::max_element_depth(doc.root_element());
        assert!(
            depth <= 2 * MAX_DEPTH,
            "{}: tree depth {depth} exceeds {}",
            level.name,
            2 * MAX_DEPTH
        );
        // `<a>` never nests in a parsed tree (the parser closes the open one).
        if level.name != "a" {
            assert!(
                depth >= MAX_DEPTH / 2,
                "{}: the cap cut the page too early (depth {depth})",
                level.name
            );
        }
    }
}

#[test]
fn a_shallow_page_keeps_all_its_markup() {
    // 60 levels, as deep as real pages go: nothing is dropped.
    let html = page(&LEVELS[0], 60, true);
    let doc = bounded::parse_document(&html, far()).expect("within the deadline");
    // html > body > 60 divs.
    assert_eq!(bounded::max_element_depth(doc.root_element()), 62);
}

#[test]
fn a_passed_deadline_stops_the_parse() {
    let html = page(&LEVELS[0], 100_000, true);
    let past = Instant::now() - Duration::from_millis(1);
    assert!(bounded::parse_document(&html, past).is_err());
    assert!(html_to_markdown(&html, super::Scope::Main, None, past).is_err());
}

#[test]
fn the_capped_serialization_drops_skipped_subtrees_and_deep_markup() {
    let doc = bounded::parse_document(
        "<body><div><script>alert(1)</script><p>a &amp; b<span title='x\"y'>c</span></p></div></body>",
        far(),
    )
    .expect("parsed");
    let body = doc
        .select(&scraper::Selector::parse("body").expect("selector"))
        .next()
        .expect("body");
    assert_eq!(
        bounded::serialize_capped(body, &["script"], 8),
        "<body><div><p>a &amp; b<span title=\"x&quot;y\">c</span></p></div></body>"
    );
    assert_eq!(
        bounded::serialize_capped(body, &["script"], 2),
        "<body><div>a &amp; bc</div></body>"
    );
}

#[test]
fn a_script_or_style_past_the_cap_stays_out_of_the_text() {
    let mut html = "<div>".repeat(2_000);
    html.push_str("<script>var from_script = 1; if (a < b) { x(\"<p>\") }</script>");
    html.push_str("<style>p { color: from_style }</style><textarea><b>typed</b></textarea>visible");
    let converted = std::thread::Builder::new()
        .stack_size(pool::STACK_BYTES)
        .spawn(move || html_to_markdown(&html, super::Scope::Main, None, far()))
        .expect("thread")
        .join()
        .expect("no panic")
        .expect("within the deadline");
    assert!(
        converted.markdown.contains("visible"),
        "{}",
        converted.markdown
    );
    for absent in ["from_script", "from_style"] {
        assert!(
            !converted.markdown.contains(absent),
            "{absent} leaked: {}",
            converted.markdown
        );
    }
}
