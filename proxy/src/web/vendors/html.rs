//! HTML → markdown for the `direct` backend: title from `<title>`, then the page's main
//! content ([`main_content`]) or, when asked for, the whole page, converted with `htmd`.
//!
//! Every step is bounded, because any page an agent is pointed at reaches it: the parse is
//! linear and stops at the fetch's deadline ([`bounded::parse_document`]), the tree is never
//! deeper than [`bounded::MAX_DEPTH`] open elements, every walk of it is iterative, and the
//! subtrees handed to `htmd` are written back with their depth capped
//! ([`bounded::serialize_filtered`]). The whole conversion runs on the extraction pool
//! ([`pool`]), never on the listeners' async workers.

#[cfg(fuzzing)]
pub mod bounded;
#[cfg(not(fuzzing))]
pub(crate) mod bounded;
pub(crate) mod encoding;
pub(crate) mod main_content;
#[cfg(fuzzing)]
pub mod pool;
#[cfg(not(fuzzing))]
pub(crate) mod pool;
mod table;
pub(crate) mod tidy;

use tokio::time::Instant;

use ego_tree::NodeRef;
use scraper::{Html, Node, Selector};

pub(crate) use bounded::DeadlineExceeded;

/// What part of a page to convert.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) enum Scope {
    /// The main content: the article without navigation, footers and link lists.
    #[default]
    Main,
    /// The whole `<body>` (scripts, styles and other non-text elements still left out).
    Full,
}

impl Scope {
    /// The scope a policy's `web.onlyMainContent` names.
    pub(crate) fn from_only_main(only_main: bool) -> Self {
        if only_main { Self::Main } else { Self::Full }
    }
}

/// A converted HTML page.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) struct Converted {
    /// `<title>` text, whitespace collapsed.
    pub(crate) title: String,
    /// Markdown of the main content (or of the whole page).
    pub(crate) markdown: String,
}

/// The fuzz target reads the markdown (the fields are the crate's own).
#[cfg(fuzzing)]
impl Converted {
    /// The converted markdown.
    pub fn markdown(&self) -> &str {
        &self.markdown
    }
}

/// Convert an HTML document, or stop at `deadline`. `page_url`, where the page came from, makes
/// relative link and image targets absolute (through the document's `<base href>` when it has
/// one), as the agent needs them to follow a link.
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) fn html_to_markdown(
    html: &str,
    scope: Scope,
    page_url: Option<&str>,
    deadline: Instant,
) -> Result<Converted, DeadlineExceeded> {
    let doc = bounded::parse_document(html, deadline)?;
    let title = select_first(&doc, "title")
        .map(|t| collapse_ws(&t.text().collect::<String>()))
        .unwrap_or_default();
    let base = base_url(&doc, page_url);
    let base = base.as_ref();
    let mut markdown = String::new();
    if scope == Scope::Main {
        if let Some(selection) = main_content::select(&doc) {
            let mut fragment = String::new();
            let mut tidy = tidy::Tidy::new(
                |n: &NodeRef<'_, Node>| selection.dropped.contains(&n.id()),
                base,
            );
            for root in &selection.roots {
                if let Some(node) = doc.tree.get(*root) {
                    bounded::serialize_with(
                        &mut fragment,
                        node,
                        |n| tidy.markup(n),
                        bounded::MAX_DEPTH,
                    );
                }
            }
            markdown = to_markdown(&fragment, deadline)?;
        }
        // No prose to score (a short page, a list of links): the body without its chrome.
        if markdown.is_empty() {
            markdown = whole_body(&doc, true, true, base, deadline)?;
        }
    }
    // The whole page: asked for, or nothing else had text.
    if markdown.is_empty() {
        markdown = whole_body(&doc, false, true, base, deadline)?;
    }
    // A page of nothing but images without alternative text (or of empty links): those,
    // rather than nothing.
    if markdown.is_empty() {
        markdown = whole_body(&doc, false, false, base, deadline)?;
    }
    Ok(Converted { title, markdown })
}

/// What relative targets resolve against: the page's URL, or the document's first
/// `<base href>` resolved against it (an `http(s)` one only: a `<base>` naming `javascript:` or
/// `data:` would turn every link into one).
fn base_url(doc: &Html, page_url: Option<&str>) -> Option<url::Url> {
    let page = url::Url::parse(page_url?).ok()?;
    let declared = select_first(doc, "base[href]")
        .and_then(|b| b.value().attr("href"))
        .and_then(|href| page.join(href.trim()).ok())
        .filter(|b| matches!(b.scheme(), "http" | "https"));
    Some(declared.unwrap_or(page))
}

/// The `<body>` as markdown, without `nav`/`footer`/`aside`/`menu` when `without_chrome`,
/// with links and images tidied ([`tidy`], relative targets resolved against `base`) when
/// `tidied`.
fn whole_body(
    doc: &Html,
    without_chrome: bool,
    tidied: bool,
    base: Option<&url::Url>,
    deadline: Instant,
) -> Result<String, DeadlineExceeded> {
    let body = select_first(doc, "body").unwrap_or_else(|| doc.root_element());
    let mut fragment = String::new();
    let left_out = |n: &NodeRef<'_, Node>| {
        matches!(n.value(), Node::Element(el)
            if main_content::NEVER_TEXT.contains(&el.name())
                || (without_chrome && main_content::CHROME.contains(&el.name())))
    };
    if tidied {
        let mut tidy = tidy::Tidy::new(left_out, base);
        bounded::serialize_with(&mut fragment, *body, |n| tidy.markup(n), bounded::MAX_DEPTH);
    } else {
        bounded::serialize_filtered(&mut fragment, *body, left_out, bounded::MAX_DEPTH);
    }
    to_markdown(&fragment, deadline)
}

/// `htmd` over a bounded fragment; should it fail, the fragment's text.
fn to_markdown(fragment: &str, deadline: Instant) -> Result<String, DeadlineExceeded> {
    if Instant::now() >= deadline {
        return Err(DeadlineExceeded);
    }
    let converter = htmd::HtmlToMarkdown::builder()
        .options(htmd::options::Options {
            // A link whose text is its target: `<https://…>`, not the URL twice.
            link_style: htmd::options::LinkStyle::InlinedPreferAutolinks,
            ..htmd::options::Options::default()
        })
        .skip_tags(main_content::NEVER_TEXT.to_vec())
        .add_handler(vec!["table"], table::handler)
        .build();
    let markdown = converter.convert(fragment).unwrap_or_else(|_| {
        let doc = Html::parse_fragment(fragment);
        collapse_ws(&doc.root_element().text().collect::<String>())
    });
    Ok(markdown.trim().to_string())
}

fn select_first<'a>(doc: &'a Html, selector: &str) -> Option<scraper::ElementRef<'a>> {
    let sel = Selector::parse(selector).ok()?;
    doc.select(&sel).next()
}

fn collapse_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    mod nesting;

    fn far() -> Instant {
        Instant::now() + std::time::Duration::from_secs(60)
    }

    #[test]
    fn title_and_main_content_are_extracted_without_chrome() {
        let page = r#"<html><head><title> Example
            Domain </title><style>p{}</style></head><body>
            <nav><a href="/">Home</a></nav>
            <main><h1>Example Domain</h1><p>This domain is for <b>examples</b>.</p>
            <script>alert(1)</script><p><a href="https://iana.org/domains/example">Learn more</a></p></main>
            <footer>footer text</footer></body></html>"#;
        let got = html_to_markdown(page, Scope::Main, None, far()).expect("converted");
        assert_eq!(
            got.title, "Example Domain",
            "title must be the collapsed <title> text"
        );
        assert!(
            got.markdown.starts_with("# Example Domain"),
            "main heading must lead: {}",
            got.markdown
        );
        assert!(
            got.markdown.contains("**examples**"),
            "inline markup must convert: {}",
            got.markdown
        );
        assert!(
            got.markdown
                .contains("[Learn more](https://iana.org/domains/example)"),
            "links must be kept: {}",
            got.markdown
        );
        for absent in ["Home", "footer text", "alert(1)", "p{}"] {
            assert!(
                !got.markdown.contains(absent),
                "{absent} must not appear: {}",
                got.markdown
            );
        }
    }

    #[test]
    fn a_meta_charset_does_not_end_the_parse() {
        for page in [
            "<html><head><meta charset=\"utf-8\"></head><body><p>MARKER text here</p></body></html>",
            "<meta charset=utf-8><title>T</title><p>MARKER text here</p>",
            "<html><head><meta http-equiv=\"content-type\" content=\"text/html; charset=utf-8\">\
             <title>T</title></head><body><p>MARKER text here</p></body></html>",
        ] {
            for scope in [Scope::Main, Scope::Full] {
                let got = html_to_markdown(page, scope, None, far()).expect("converted");
                assert_eq!(got.markdown, "MARKER text here", "{scope:?} {page}");
            }
        }
        let got = html_to_markdown(
            "<meta charset=utf-8><title>Kept</title><p>x</p>",
            Scope::Main,
            None,
            far(),
        )
        .expect("converted");
        assert_eq!(got.title, "Kept");
    }

    #[test]
    fn main_content_leaves_out_boilerplate_around_the_article() {
        let links: String = (0..20)
            .map(|i| format!("<li><a href=\"/s/{i}\">Section {i}</a></li>"))
            .collect();
        let prose = "The committee met for three hours, and the minutes, published today, \
                     record a long discussion of the budget, the schedule and the staff.";
        let page = format!(
            "<html><body><div class=\"top-menu\"><ul>{links}</ul></div>\
             <div id=\"main-column\"><h1>Budget approved</h1><p>{prose}</p><p>{prose}</p>\
             <ul class=\"share-links\"><li><a href=\"/f\">Share</a></li><li><a href=\"/t\">Tweet</a></li></ul>\
             <pre><code>let x = 1;</code></pre>\
             <table><tr><th>Item</th><th>Cost</th></tr><tr><td>Staff, salaries and training</td><td>12,000</td></tr></table>\
             </div><div class=\"site-footer\">Copyright notice</div></body></html>"
        );
        let main = html_to_markdown(&page, Scope::Main, None, far()).expect("converted");
        assert!(
            main.markdown.starts_with("# Budget approved"),
            "{}",
            main.markdown
        );
        assert_eq!(
            main.markdown.matches("The committee met").count(),
            2,
            "{}",
            main.markdown
        );
        assert!(
            main.markdown.contains("let x = 1;"),
            "code is content: {}",
            main.markdown
        );
        assert!(
            main.markdown.contains("| Staff, salaries and training |"),
            "tables are content: {}",
            main.markdown
        );
        for chrome in ["Section 1", "Share", "Tweet", "Copyright"] {
            assert!(
                !main.markdown.contains(chrome),
                "{chrome}: {}",
                main.markdown
            );
        }
        let full = html_to_markdown(&page, Scope::Full, None, far()).expect("converted");
        for kept in ["Section 1", "Tweet", "Copyright", "The committee met"] {
            assert!(full.markdown.contains(kept), "{kept}: {}", full.markdown);
        }
    }

    #[test]
    fn a_small_box_whose_class_says_content_does_not_hide_the_article() {
        // A tab whose class holds "content" outscores the unmarked article in a layout table
        // while the classes are weighed, and is too small to be the content: the selection is
        // made again without class weights rather than falling back to the whole page.
        let para = "The council voted on Tuesday to keep the library open on Sundays \
                    after a campaign by readers who wrote in their hundreds to ask for it";
        let page = format!(
            "<html><body><div class=\"tabcontent\"><p>Latest: a teaser line, here.</p></div>\
             <table><tr><td><p>{para}.</p><p>{para} again.</p><p>{para} once more.</p>\
             </td></tr></table></body></html>"
        );
        let md = html_to_markdown(&page, Scope::Main, None, far())
            .expect("converted")
            .markdown;
        assert!(md.contains("once more."), "{md}");
        assert!(!md.contains("teaser"), "{md}");
    }

    #[test]
    fn links_and_images_that_say_nothing_are_left_out() {
        let prose = "The committee met for three hours, and the minutes, published today, \
                     record a long discussion of the budget, the schedule and the staff.";
        let page = format!(
            "<html><body><article><h1>Budget</h1><p>{prose}</p>\
             <p><img src=\"/chart.png\" alt=\"Budget by year\"> <img src=\"/deco.png\">\
             <img src=\"/px.gif\" alt=\"t\" width=\"1\" height=\"1\">\
             <img src=\"data:image/gif;base64,R0l\" data-src=\"/lazy.jpg\" alt=\"Lazy one\">\
             <img src=\"/chart.png\" alt=\"Budget by year\"></p>\
             <p>See <a href=\"#notes\">the notes</a>, <a href=\"javascript:void(0)\">print</a>, \
             <a href=\"https://x.org/r?utm_source=tw&amp;id=3\" title=\"the report\">the report</a> \
             and <a href=\"https://x.org/\">https://x.org/</a><a href=\"/empty\"> </a>.</p>\
             <p>{prose}</p></article></body></html>"
        );
        for scope in [Scope::Main, Scope::Full] {
            let md = html_to_markdown(&page, scope, None, far())
                .expect("converted")
                .markdown;
            assert_eq!(
                md.matches("![Budget by year](/chart.png)").count(),
                1,
                "{md}"
            );
            assert!(md.contains("![Lazy one](/lazy.jpg)"), "{md}");
            for absent in [
                "deco.png",
                "px.gif",
                "data:",
                "#notes",
                "javascript",
                "utm_",
                "/empty",
                "\"the report\"",
            ] {
                assert!(!md.contains(absent), "{absent}: {md}");
            }
            assert!(
                md.contains("See the notes, print, [the report](https://x.org/r?id=3)"),
                "{md}"
            );
            assert!(md.contains("<https://x.org/>"), "{md}");
        }
        // An alternative text that is only a file name, or that the figure's caption already
        // says, adds nothing: the image goes, the caption stays.
        let page = format!(
            "<html><body><article><p>{prose}</p>\
             <p><img src=\"/2024/IMG_4173.jpg\" alt=\"IMG_4173.JPG\"></p>\
             <figure><img src=\"/ewe.jpg\" alt=\"A ewe with her two lambs\">\
             <figcaption>A ewe with her two lambs, in spring.</figcaption></figure>\
             <figure><img src=\"/ram.jpg\" alt=\"A ram\"><figcaption>Photo: the farm</figcaption></figure>\
             <p>{prose}</p></article></body></html>"
        );
        let md = html_to_markdown(&page, Scope::Main, None, far())
            .expect("converted")
            .markdown;
        for absent in ["IMG_4173", "ewe.jpg"] {
            assert!(!md.contains(absent), "{absent}: {md}");
        }
        for kept in [
            "A ewe with her two lambs, in spring.",
            "![A ram](/ram.jpg)",
            "Photo: the farm",
        ] {
            assert!(md.contains(kept), "{kept}: {md}");
        }
        // A link within the page that is all its parent says moves the reader within what the
        // agent already has: it goes. One inside prose, or a footnote mark, is its text.
        let page = format!(
            "<html><body><article><p>{prose}</p>\
             <p><a href=\"#story-continues\">Continue reading the main story</a></p>\
             <ul><li><a href=\"#history\">1 History</a></li></ul>\
             <form><label for=\"n\">Your name</label><input id=\"n\"></form>\
             <p>As <a href=\"#notes\">the notes</a> say<sup><a href=\"#fn1\">1</a></sup>, {prose}</p>\
             </article></body></html>"
        );
        let md = html_to_markdown(&page, Scope::Main, None, far())
            .expect("converted")
            .markdown;
        for absent in ["Continue reading", "History", "Your name"] {
            assert!(!md.contains(absent), "{absent}: {md}");
        }
        assert!(md.contains("As the notes say1, "), "{md}");
        // A page of images without alternative text still converts to them.
        let got = html_to_markdown(
            "<body><img src=\"/a.png\"></body>",
            Scope::Main,
            None,
            far(),
        )
        .expect("converted");
        assert_eq!(got.markdown, "![](/a.png)");
    }

    use proptest::strategy::Strategy as _;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

        /// HTML with visible text never converts to empty output, whatever markup surrounds
        /// it: encoding indicators, chrome, unclosed and stray tags, scripts.
        #[test]
        fn visible_text_is_never_lost(
            parts in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::sample::select(vec![
                        "<div>", "</div>", "<p>", "</p>", "<span>", "</span>", "<main>", "</main>",
                        "<article>", "</article>", "<nav>", "</nav>", "<footer>", "</footer>",
                        "<aside>", "</aside>", "<section class=\"related\">", "</section>",
                        "<ul>", "</ul>", "<li>", "</li>", "<a href=\"/x\">", "</a>", "<table>",
                        "<tr>", "<td>", "</td>", "</table>", "<h1>", "</h1>", "<b>", "</b>",
                        "<meta charset=\"utf-8\">", "<meta charset=\"shift_jis\">",
                        "<meta http-equiv=\"Content-Type\" content=\"text/html; charset=gbk\">",
                        "<br>", "<img src=\"/i.png\">", "<script>var x = 1;</script>",
                        "<style>p { color: red }</style>", "<div style=\"display:none\">",
                        "<head>", "</head>", "<body>", "<html>",
                    ]).prop_map(|s: &str| s.to_string()),
                    "[a-zA-Z]{1,10}( [a-z]{1,8}){0,12}",
                ],
                1..40,
            ),
            word in "[A-Za-z]{3,10}",
            at in 0usize..40,
        ) {
            let mut parts = parts;
            let at = at.min(parts.len());
            parts.insert(at, format!(" {word} "));
            let page = parts.concat();
            for scope in [Scope::Main, Scope::Full] {
                let got = html_to_markdown(&page, scope, None, far()).expect("converted");
                proptest::prop_assert!(
                    !got.markdown.trim().is_empty(),
                    "{:?} converted to nothing: {}", scope, page
                );
            }
        }
    }

    #[test]
    fn a_page_without_main_converts_the_body_minus_navigation() {
        let got = html_to_markdown(
            "<body><nav>menu</nav><p>Body text</p><footer>f</footer></body>",
            Scope::Main,
            None,
            far(),
        )
        .expect("converted");
        assert_eq!(got.title, "");
        assert_eq!(got.markdown, "Body text");
    }

    #[test]
    fn the_same_page_converts_to_the_same_markdown_every_time() {
        // Two boxes that score alike (same length, same commas, no class) in subtrees of their
        // own: which one is the content, and so what the agent reads and the cache stores, may
        // not depend on a hash seed. The first in the document wins the tie.
        let prose = |word: &str| {
            format!(
                "<div><div><div><div><p>{word} {}</p></div></div></div></div>",
                "and the story continues with another sentence of the same length, ".repeat(6)
            )
        };
        let page = format!(
            "<html><body>{}{}</body></html>",
            prose("Alpha"),
            prose("Bravo")
        );
        for _ in 0..40 {
            let got = html_to_markdown(&page, Scope::Main, None, far()).expect("converted");
            assert!(
                got.markdown.starts_with("Alpha and the story") && !got.markdown.contains("Bravo"),
                "{}",
                got.markdown
            );
        }
    }

    #[test]
    fn tables_keep_every_cell_and_lay_out_pages_as_blocks() {
        let page = "<html><body><article><h1>Facts</h1>\
            <table><tr><th>Capital</th><td>Wellington</td></tr>\
            <tr><th>Population</th><td>5 million</td></tr><tr><td></td><td></td></tr>\
            <tr><th>Currency</th><td>New Zealand <b>dollar</b> | NZD</td></tr></table>\
            <table><caption>Cities</caption><thead><tr><th>City</th><th></th><th>People</th></tr></thead>\
            <tbody><tr><th>Auckland</th><td></td><td>1.7m</td></tr>\
            <tr><td colspan=\"2\">Wellington</td><td>0.2m</td></tr></tbody></table>\
            <table><tr><td><p>A layout cell's first paragraph.</p><p>Its second one.</p></td>\
            <td><table><tr><th>Nested</th></tr><tr><td>inner cell</td></tr></table></td></tr></table>\
            </article></body></html>";
        let got = html_to_markdown(page, Scope::Full, None, far()).expect("converted");
        let md = got.markdown;
        assert!(
            md.contains(
                "| Capital | Wellington |\n| --- | --- |\n| Population | 5 million |\n\
                 | Currency | New Zealand **dollar** \\| NZD |\n"
            ),
            "row headers are kept, empty rows left out, | escaped: {md}"
        );
        assert!(
            md.contains(
                "Cities\n\n| City | People |\n| --- | --- |\n| Auckland | 1.7m |\n| Wellington | 0.2m |"
            ),
            "the caption leads, an empty column is left out, a colspan keeps columns aligned: {md}"
        );
        assert!(
            md.contains("A layout cell's first paragraph.\n\nIts second one."),
            "a table without header cells lays the page out: {md}"
        );
        assert!(
            md.contains("Nested") && md.contains("inner cell") && !md.contains("| Nested |"),
            "a table inside a cell is laid out too: {md}"
        );
    }

    #[test]
    fn relative_targets_resolve_against_the_page_or_its_base() {
        let prose = "The guide explains, step by step, how the pieces fit together, and why.";
        let page = format!(
            "<html><body><article><h1>Guide</h1><p>{prose} See <a href=\"next.html?utm_source=x\">the next part</a>, \
             <a href=\"/docs/\">the index</a>, <a href=\"//cdn.example.net/a.pdf\">the PDF</a>, \
             <a href=\"https://other.example/x\">https://other.example/x</a>, \
             <a href=\"mailto:team@example.com\">the team</a> and <a href=\"#part-2\">part two</a>.</p>\
             <p>{prose}</p><img src=\"img/diagram.png\" alt=\"A diagram of the pieces\"></article></body></html>"
        );
        let got = html_to_markdown(
            &page,
            Scope::Main,
            Some("https://example.com/guide/part-1.html"),
            far(),
        )
        .expect("converted")
        .markdown;
        for expected in [
            "[the next part](https://example.com/guide/next.html)",
            "[the index](https://example.com/docs/)",
            "[the PDF](https://cdn.example.net/a.pdf)",
            "<https://other.example/x>",
            "[the team](mailto:team@example.com)",
            "and part two.",
            "![A diagram of the pieces](https://example.com/guide/img/diagram.png)",
        ] {
            assert!(got.contains(expected), "{expected}: {got}");
        }
        // Without a page URL (a file converted on its own), targets stay as written.
        let local = html_to_markdown(&page, Scope::Main, None, far())
            .expect("converted")
            .markdown;
        assert!(local.contains("[the next part](next.html)"), "{local}");

        // A `<base href>` moves the base; one naming a non-HTTP scheme is ignored.
        for (base, expected) in [
            (
                "/static/",
                "[the next part](https://example.com/static/next.html)",
            ),
            (
                "javascript:alert(1)//",
                "[the next part](https://example.com/guide/next.html)",
            ),
        ] {
            let with_base = page.replace(
                "<html>",
                &format!("<html><head><base href=\"{base}\"></head>"),
            );
            let got = html_to_markdown(
                &with_base,
                Scope::Main,
                Some("https://example.com/guide/part-1.html"),
                far(),
            )
            .expect("converted")
            .markdown;
            assert!(got.contains(expected), "{base}: {got}");
        }
    }
}
