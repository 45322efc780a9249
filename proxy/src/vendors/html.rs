//! HTML → markdown for the `direct` backend: title from `<title>`, the page's main content
//! when it marks one (`<main>`, `<article>`, `role=main`), converted with `htmd`.
//!
//! Every step is bounded, because any page an agent is pointed at reaches it: the parse is
//! linear and stops at the fetch's deadline ([`bounded::parse_document`]), the tree is never
//! deeper than [`bounded::MAX_DEPTH`] open elements, and the subtree handed to `htmd` is
//! written back iteratively with its depth capped ([`bounded::serialize_capped`]). The whole
//! conversion runs on the extraction pool ([`pool`]), never on the listeners' async workers.

pub mod bounded;
pub mod pool;

use tokio::time::Instant;

use scraper::{Html, Selector};

pub use bounded::DeadlineExceeded;

/// Elements that never carry page text.
const ALWAYS_SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "iframe", "object", "embed", "head",
];
/// Page chrome, skipped when the whole body is converted.
const CHROME: &[&str] = &["nav", "footer", "aside", "form", "button"];

/// A converted HTML page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Converted {
    /// `<title>` text, whitespace collapsed.
    pub title: String,
    /// Markdown of the main content.
    pub markdown: String,
}

/// Convert an HTML document, or stop at `deadline`.
pub fn html_to_markdown(html: &str, deadline: Instant) -> Result<Converted, DeadlineExceeded> {
    let doc = bounded::parse_document(html, deadline)?;
    let title = select_first(&doc, "title")
        .map(|t| collapse_ws(&t.text().collect::<String>()))
        .unwrap_or_default();
    let main = ["main", "article", "[role=main]"]
        .iter()
        .find_map(|sel| select_first(&doc, sel));
    let (root, skip): (_, Vec<&str>) = match main {
        Some(el) => (el, ALWAYS_SKIPPED.to_vec()),
        None => (
            select_first(&doc, "body").unwrap_or_else(|| doc.root_element()),
            ALWAYS_SKIPPED.iter().chain(CHROME).copied().collect(),
        ),
    };
    let fragment = bounded::serialize_capped(root, &skip, bounded::MAX_DEPTH);
    if Instant::now() >= deadline {
        return Err(DeadlineExceeded);
    }
    let converter = htmd::HtmlToMarkdown::builder().skip_tags(skip).build();
    let markdown = converter
        .convert(&fragment)
        .unwrap_or_else(|_| collapse_ws(&doc.root_element().text().collect::<String>()));
    Ok(Converted {
        title,
        markdown: markdown.trim().to_string(),
    })
}

fn select_first<'a>(doc: &'a Html, selector: &str) -> Option<scraper::ElementRef<'a>> {
    let sel = Selector::parse(selector).ok()?;
    doc.select(&sel).next()
}

fn collapse_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod nesting;

#[cfg(test)]
mod tests {
    use super::*;

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
        let got = html_to_markdown(page, far()).expect("converted");
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
    fn a_page_without_main_converts_the_body_minus_navigation() {
        let got = html_to_markdown(
            "<body><nav>menu</nav><p>Body text</p><footer>f</footer></body>",
            far(),
        )
        .expect("converted");
        assert_eq!(got.title, "");
        assert_eq!(got.markdown, "Body text");
    }
}
