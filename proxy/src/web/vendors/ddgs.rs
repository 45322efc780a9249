//! The `ddgs` backend: keyless search through DuckDuckGo's HTML endpoint (search only).
//!
//! `GET {base}/html/?q=<query>` and the result page parsed with the HTML parser the gate
//! already uses. Each organic result is a `.result` block holding `a.result__a` (title, and
//! the link, usually wrapped as `//duckduckgo.com/l/?uddg=<target>`) and `.result__snippet`;
//! ads (`.result--ad`) are skipped. Rows are `{title, url, description, position}`, at most
//! `max(1, limit)`.
//!
//! The page is bounded like every vendor body (1 MiB here). A page with neither results nor
//! DuckDuckGo's "no results" block means the layout changed (or a challenge page came back):
//! that is `vendor_bad_response`, never rows guessed from an unknown page. Failures read as
//! Hermes words them: `DuckDuckGo search failed: <detail>`, and a timeout `DuckDuckGo search
//! timed out after 30s — DuckDuckGo may be rate-limiting or slow. …`. DuckDuckGo sees the
//! agent's queries: the gate only calls it when the policy names `ddgs`.

use scraper::{ElementRef, Selector};

use super::client::VendorErrorKind;
use super::client::{CallError, Endpoint, HttpClient, VendorError};
use super::search::{self, KeyOrder, RawHit, SearchHit};

/// A result page is a few dozen KiB; more is not one.
pub(crate) const MAX_BODY_BYTES: u64 = 1024 * 1024;
const NAME: &str = "ddgs";
/// Hermes' timeout text.
const TIMED_OUT: &str = "DuckDuckGo search timed out after 30s — DuckDuckGo may be \
rate-limiting or slow. Try again later or switch to a different search provider.";

/// A DuckDuckGo HTML search client.
#[derive(Clone, Debug)]
pub struct DdgsClient {
    http: HttpClient,
}

// === impl DdgsClient ===

impl DdgsClient {
    /// A client for `endpoint`; its body limit is at most [`MAX_BODY_BYTES`].
    pub(crate) fn new(mut endpoint: Endpoint) -> Self {
        endpoint.max_body_bytes = endpoint.max_body_bytes.min(MAX_BODY_BYTES);
        Self {
            http: HttpClient::new(endpoint),
        }
    }

    /// Always callable: there is no key.
    pub(crate) fn available(&self) -> bool {
        true
    }

    /// Search; rows are `{title, url, description, position}`.
    pub(crate) async fn search(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<Vec<SearchHit>, VendorError> {
        let headers = [("accept", "text/html".to_string())];
        let bytes = self
            .http
            .get("/html/", &[("q", query.to_string())], &headers)
            .await
            .map_err(|e| call_error(&e))?;
        let page = String::from_utf8_lossy(&bytes).into_owned();
        // Parsed on the extraction pool, like every page, never on the listeners' workers.
        let rows = super::html::pool::run(move || parse(&page))
            .await
            .map_err(|e| e.to_string())
            .and_then(|parsed| parsed)
            .map_err(|why| {
                VendorError::bad_response(NAME, format!("DuckDuckGo search failed: {why}"))
            })?;
        let limit = limit.max(1);
        Ok(search::numbered(KeyOrder::TitleHit, rows, limit))
    }
}

/// Time a result page may take to parse.
const PARSE_BUDGET: std::time::Duration = std::time::Duration::from_secs(5);

/// The organic results of a DuckDuckGo HTML page, or why the page is not a result page.
pub(crate) fn parse(page: &str) -> Result<Vec<RawHit>, String> {
    let deadline = tokio::time::Instant::now() + PARSE_BUDGET;
    let doc = super::html::bounded::parse_document(page, deadline)
        .map_err(|_| format!("the result page took over {PARSE_BUDGET:?} to parse"))?;
    let result = selector(".result")?;
    let (title, snippet) = (selector("a.result__a")?, selector(".result__snippet")?);
    let mut blocks = 0;
    let mut rows = Vec::new();
    for block in doc.select(&result) {
        if has_class(block, "result--ad") || has_class(block, "result--no-result") {
            continue;
        }
        blocks += 1;
        let Some(link) = block.select(&title).next() else {
            continue;
        };
        let Some(url) = link.value().attr("href").and_then(target) else {
            continue;
        };
        rows.push(RawHit {
            title: text_of(link),
            url,
            description: block
                .select(&snippet)
                .next()
                .map(text_of)
                .unwrap_or_default(),
        });
    }
    if !rows.is_empty() {
        return Ok(rows);
    }
    let empty = doc
        .select(&selector(".no-results, .result--no-result")?)
        .next();
    match (blocks, empty) {
        (0, Some(_)) => Ok(Vec::new()),
        (0, None) => {
            Err("the page is not a DuckDuckGo result page (its layout may have changed)".into())
        }
        _ => Err("the results on the page have no links (its layout may have changed)".into()),
    }
}

/// The target of a result link: DuckDuckGo's redirect unwrapped, made absolute.
fn target(href: &str) -> Option<String> {
    let absolute = match href {
        h if h.starts_with("//") => format!("https:{h}"),
        h if h.starts_with('/') => format!("https://duckduckgo.com{h}"),
        h => h.to_string(),
    };
    let url = url::Url::parse(&absolute).ok()?;
    let redirect = url
        .host_str()
        .is_some_and(|h| h.ends_with("duckduckgo.com"))
        && url.path().starts_with("/l/");
    let found = if redirect {
        url.query_pairs()
            .find(|(k, _)| k == "uddg")
            .map(|(_, v)| v.into_owned())?
    } else {
        absolute
    };
    let parsed = url::Url::parse(&found).ok()?;
    matches!(parsed.scheme(), "http" | "https").then_some(found)
}

fn selector(css: &str) -> Result<Selector, String> {
    Selector::parse(css).map_err(|e| format!("bad selector {css}: {e}"))
}

fn has_class(element: ElementRef<'_>, class: &str) -> bool {
    element.value().classes().any(|c| c == class)
}

fn text_of(element: ElementRef<'_>) -> String {
    element
        .text()
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn call_error(err: &CallError) -> VendorError {
    match err {
        CallError::Timeout(_) => VendorError::new(NAME, VendorErrorKind::Timeout, TIMED_OUT),
        _ => VendorError::from_call(NAME, "DuckDuckGo search failed", err),
    }
}

#[cfg(test)]
mod tests;
