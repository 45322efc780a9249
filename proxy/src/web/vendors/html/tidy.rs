//! Links and images as an agent should read them: the markdown keeps every link and image that
//! says something, and leaves out what only adds tokens.
//!
//! - An image is left out when it has no alternative text (`alt` missing or empty: decorative,
//!   or nothing a text reader can use), when its alternative text is only a file name
//!   (`IMG_4173.jpg`) or says no more than the caption of its `<figure>` (the caption is
//!   kept), when it is a tracking pixel or spacer (a width or height
//!   of 2 pixels or less, a `spacer`/`blank`/`pixel`/`1x1`/`trans(parent)` file name), when it
//!   has no source but an inline `data:` URI, or when the same source was already written. A
//!   lazily loaded image (`data-src` and its kin beside a `data:` placeholder) keeps the real
//!   source.
//! - A link to a place in the same page (`#...`) that is all the text of its parent and two
//!   words or more ("Continue reading the main story", "Back to top", a table of contents'
//!   entry) is left out: it moves a reader within the page the agent already has whole. Any
//!   other link to the same page, to `javascript:`, or with an empty target is its text; a link with neither text nor a kept image is left out; a `title` that repeats
//!   the link's text is dropped.
//! - Link and image targets lose well-known tracking parameters (`utm_*`, `fbclid`, `gclid`,
//!   `mc_cid`, ...) and a `;jsessionid=` path parameter; the rest of the URL is untouched.
//! - A relative target is made absolute against the page's URL (or its `<base href>`) when
//!   the caller knows it: the agent follows links it reads. An absolute one is left as it is.
//!
//! Everything is decided per element as the bounded serializer writes it
//! ([`super::bounded::serialize_with`]); the content checks walk the element's subtree
//! iteratively.

use std::collections::HashSet;

use ego_tree::NodeRef;
use ego_tree::iter::Edge;
use scraper::Node;

use super::bounded::Markup;
use super::main_content::NEVER_TEXT;

/// Query parameters that only track the click.
const TRACKING: &[&str] = &[
    "fbclid",
    "gclid",
    "gclsrc",
    "dclid",
    "gbraid",
    "wbraid",
    "msclkid",
    "yclid",
    "igshid",
    "mc_cid",
    "mc_eid",
    "_hsenc",
    "_hsmi",
    "mkt_tok",
    "__twitter_impression",
    "oly_anon_id",
    "oly_enc_id",
    "vero_id",
    "_openstat",
];

/// Attributes that hold a lazily loaded image's real source.
const LAZY_SRC: &[&str] = &["data-src", "data-original", "data-lazy-src", "data-url"];

/// File names of spacers and tracking pixels.
const SPACER: &[&str] = &[
    "spacer",
    "blank.",
    "pixel.",
    "1x1",
    "trans.gif",
    "transparent",
    "clear.gif",
    "dot.gif",
];

/// The per-page state of the tidying (images already written).
pub(crate) struct Tidy<D> {
    /// Nodes the caller leaves out (boilerplate), consulted by the content checks.
    drop: D,
    seen_images: HashSet<String>,
    /// What relative targets are resolved against: the page's URL (or its `<base href>`).
    base: Option<url::Url>,
}

impl<D> std::fmt::Debug for Tidy<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tidy")
            .field("seen_images", &self.seen_images.len())
            .finish_non_exhaustive()
    }
}

impl<D: Fn(&NodeRef<'_, Node>) -> bool> Tidy<D> {
    /// `base`: the URL relative link and image targets are resolved against (none: they are
    /// written as they are).
    pub(crate) fn new(drop: D, base: Option<&url::Url>) -> Self {
        Self {
            drop,
            seen_images: HashSet::new(),
            base: base.cloned(),
        }
    }

    /// `target` made absolute against the base, when it is relative and resolves; otherwise
    /// as it is (an absolute URL is never rewritten, so a link whose text is its URL stays an
    /// autolink).
    fn resolve(&self, target: String) -> String {
        let Some(base) = &self.base else {
            return target;
        };
        match url::Url::parse(&target) {
            Err(url::ParseError::RelativeUrlWithoutBase) => base
                .join(&target)
                .map_or(target, |resolved| resolved.to_string()),
            _ => target,
        }
    }

    /// What to write for `node`.
    pub(crate) fn markup(&mut self, node: &NodeRef<'_, Node>) -> Markup {
        if (self.drop)(node) {
            return Markup::Drop;
        }
        let Node::Element(el) = node.value() else {
            return Markup::Keep;
        };
        match el.name() {
            "img" if el.attr("alt").is_some_and(|alt| captioned(node, alt)) => Markup::Drop,
            "img" => match image_source(el) {
                Some(src) if self.seen_images.insert(src.clone()) => {
                    let mut attrs = vec![("src", self.resolve(src))];
                    if let Some(alt) = el.attr("alt") {
                        attrs.push(("alt", alt.to_string()));
                    }
                    if let Some(title) = el.attr("title").filter(|t| !same_text(t, el.attr("alt")))
                    {
                        attrs.push(("title", title.to_string()));
                    }
                    Markup::Attrs(attrs)
                }
                _ => Markup::Drop,
            },
            "a" => {
                let Some(href) = el.attr("href") else {
                    return Markup::Keep;
                };
                let href = href.trim();
                if !self.has_content(node) {
                    return Markup::Drop;
                }
                let lower = href.to_ascii_lowercase();
                if href.starts_with('#') && is_skip_link(node) {
                    return Markup::Drop;
                }
                if href.is_empty() || href.starts_with('#') || lower.starts_with("javascript:") {
                    return Markup::Unwrap;
                }
                let mut attrs = vec![("href", self.resolve(untracked(href)))];
                if let Some(title) = el.attr("title") {
                    let text = node_text(node);
                    if !same_text(title, Some(&text)) {
                        attrs.push(("title", title.to_string()));
                    }
                }
                Markup::Attrs(attrs)
            }
            "li" if !self.has_content(node) => Markup::Drop,
            _ => Markup::Keep,
        }
    }

    /// Whether `node` holds visible text or an image that would be kept.
    fn has_content(&self, node: &NodeRef<'_, Node>) -> bool {
        let mut skipping = None;
        for edge in node.traverse() {
            match edge {
                Edge::Open(n) => {
                    if skipping.is_some() {
                        continue;
                    }
                    match n.value() {
                        Node::Text(t) if !t.trim().is_empty() => return true,
                        Node::Element(el) => {
                            if n.id() != node.id()
                                && ((self.drop)(&n) || NEVER_TEXT.contains(&el.name()))
                            {
                                skipping = Some(n.id());
                            } else if el.name() == "img" && image_source(el).is_some() {
                                return true;
                            }
                        }
                        _ => {}
                    }
                }
                Edge::Close(n) => {
                    if skipping == Some(n.id()) {
                        skipping = None;
                    }
                }
            }
        }
        false
    }
}

/// The source an image is written with, or `None` when it is left out.
fn image_source(el: &scraper::node::Element) -> Option<String> {
    if el
        .attr("alt")
        .is_none_or(|a| a.trim().is_empty() || is_file_name(a))
    {
        return None;
    }
    if ["width", "height"]
        .iter()
        .any(|d| el.attr(d).and_then(pixels).is_some_and(|px| px <= 2))
    {
        return None;
    }
    let src = el.attr("src").map(str::trim).unwrap_or("");
    let src = if src.is_empty() || src.starts_with("data:") {
        LAZY_SRC
            .iter()
            .filter_map(|a| el.attr(a))
            .map(str::trim)
            .find(|s| !s.is_empty() && !s.starts_with("data:"))?
    } else {
        src
    };
    let file = src
        .split(['?', '#'])
        .next()
        .unwrap_or(src)
        .rsplit('/')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    if SPACER.iter().any(|s| file.contains(s)) {
        return None;
    }
    Some(untracked(src))
}

/// Whether the in-page link `node` is all the text of its parent element and at least two
/// words (a footnote mark such as `1` stays, as its text).
fn is_skip_link(node: &NodeRef<'_, Node>) -> bool {
    let text = node_text(node);
    if text.split_whitespace().nth(1).is_none() {
        return false;
    }
    node.parent()
        .is_some_and(|p| p.value().is_element() && same_words(&node_text(&p), &text))
}

fn same_words(a: &str, b: &str) -> bool {
    a.split_whitespace().eq(b.split_whitespace())
}

/// Image file extensions an alternative text that is only a file name ends with.
const IMAGE_EXTENSIONS: &[&str] = &[
    ".jpg", ".jpeg", ".png", ".gif", ".webp", ".svg", ".bmp", ".avif", ".tif", ".tiff",
];

/// Whether an alternative text is only a file name (one word with an image extension).
fn is_file_name(alt: &str) -> bool {
    let alt = alt.trim().to_ascii_lowercase();
    !alt.contains(char::is_whitespace) && IMAGE_EXTENSIONS.iter().any(|e| alt.ends_with(e))
}

/// Whether the image `node` sits in a `<figure>` (at most a few levels up) whose
/// `<figcaption>` already says what `alt` says.
fn captioned(node: &NodeRef<'_, Node>, alt: &str) -> bool {
    let Some(figure) = node
        .ancestors()
        .take(4)
        .find(|a| matches!(a.value(), Node::Element(el) if el.name() == "figure"))
    else {
        return false;
    };
    figure.children().any(|c| {
        matches!(c.value(), Node::Element(el) if el.name() == "figcaption")
            && same_text(alt, Some(&node_text(&c)))
    })
}

/// A dimension attribute in pixels (`1`, `1px`), when it is one.
fn pixels(value: &str) -> Option<u32> {
    let v = value.trim();
    let v = v.strip_suffix("px").unwrap_or(v);
    v.parse().ok()
}

/// Whether a `title` says no more than `text` (the same words, or a part of them).
fn same_text(title: &str, text: Option<&str>) -> bool {
    let norm = |s: &str| {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    };
    let title = norm(title);
    let text = norm(text.unwrap_or(""));
    title.is_empty() || (!text.is_empty() && text.contains(&title))
}

fn node_text(node: &NodeRef<'_, Node>) -> String {
    node.descendants()
        .filter_map(|n| match n.value() {
            Node::Text(t) => Some(&**t),
            _ => None,
        })
        .collect()
}

/// `url` without tracking query parameters and `;jsessionid=`.
pub(crate) fn untracked(url: &str) -> String {
    let (rest, fragment) = match url.find('#') {
        Some(i) => (&url[..i], &url[i..]),
        None => (url, ""),
    };
    let (path, query) = match rest.find('?') {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let path = match path.to_ascii_lowercase().find(";jsessionid=") {
        Some(i) => &path[..i],
        None => path,
    };
    let mut out = String::with_capacity(url.len());
    out.push_str(path);
    if let Some(query) = query {
        let kept: Vec<&str> = query
            .split('&')
            .filter(|p| {
                let key = p.split('=').next().unwrap_or("").to_ascii_lowercase();
                !p.is_empty() && !key.starts_with("utm_") && !TRACKING.contains(&key.as_str())
            })
            .collect();
        if !kept.is_empty() {
            out.push('?');
            out.push_str(&kept.join("&"));
        }
    }
    out.push_str(fragment);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracking_parameters_are_stripped_and_the_rest_kept() {
        for (url, want) in [
            (
                "https://x.org/a?utm_source=tw&id=3&fbclid=Z#top",
                "https://x.org/a?id=3#top",
            ),
            (
                "https://x.org/a?utm_source=tw&utm_medium=s",
                "https://x.org/a",
            ),
            ("/a;jsessionid=ABC?menu=2", "/a?menu=2"),
            (
                "https://x.org/a?q=utm_source",
                "https://x.org/a?q=utm_source",
            ),
            ("https://x.org/", "https://x.org/"),
        ] {
            assert_eq!(untracked(url), want, "{url}");
        }
    }
}
