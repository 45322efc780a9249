//! HTML → markdown for the `direct` backend: title from `<title>`, the page's main content
//! when it marks one (`<main>`, `<article>`, `role=main`), converted with `htmd`.

use scraper::{Html, Selector};

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

/// Convert an HTML document.
pub fn html_to_markdown(html: &str) -> Converted {
    let doc = Html::parse_document(html);
    let title = select_first(&doc, "title")
        .map(|t| collapse_ws(&t.text().collect::<String>()))
        .unwrap_or_default();
    let main = ["main", "article", "[role=main]"]
        .iter()
        .find_map(|sel| select_first(&doc, sel));
    let (fragment, skip): (String, Vec<&str>) = match main {
        Some(el) => (el.html(), ALWAYS_SKIPPED.to_vec()),
        None => {
            let body = select_first(&doc, "body")
                .map(|b| b.html())
                .unwrap_or_else(|| html.to_string());
            (body, ALWAYS_SKIPPED.iter().chain(CHROME).copied().collect())
        }
    };
    let converter = htmd::HtmlToMarkdown::builder().skip_tags(skip).build();
    let markdown = converter
        .convert(&fragment)
        .unwrap_or_else(|_| collapse_ws(&doc.root_element().text().collect::<String>()));
    Converted {
        title,
        markdown: markdown.trim().to_string(),
    }
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

    #[test]
    fn title_and_main_content_are_extracted_without_chrome() {
        let page = r#"<html><head><title> Example
            Domain </title><style>p{}</style></head><body>
            <nav><a href="/">Home</a></nav>
            <main><h1>Example Domain</h1><p>This domain is for <b>examples</b>.</p>
            <script>alert(1)</script><p><a href="https://iana.org/domains/example">Learn more</a></p></main>
            <footer>footer text</footer></body></html>"#;
        let got = html_to_markdown(page);
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
        let got =
            html_to_markdown("<body><nav>menu</nav><p>Body text</p><footer>f</footer></body>");
        assert_eq!(got.title, "");
        assert_eq!(got.markdown, "Body text");
    }
}
