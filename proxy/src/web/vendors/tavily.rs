//! The `tavily` backend: Tavily's `/search` and `/extract` JSON API.
//!
//! Wire format as Hermes' Tavily provider uses it: `POST {base}/search` with
//! `{query, max_results ≤ 20, include_raw_content: false, include_images: false}` and
//! `POST {base}/extract` with `{urls, include_images: false}`. The key travels as
//! `Authorization: Bearer` (Tavily's current scheme; Hermes 0.19.0 still put it in the body
//! as `api_key`, which Tavily also accepts). Extract rows come from `results`,
//! `failed_results` (`error`, default "extraction failed") and `failed_urls`.

use serde_json::{Value, json};

use super::client::VendorErrorKind;
use super::client::{Endpoint, HttpClient, VendorError};
use super::page::{Page, VendorFailure, assign_rows, fail_all};
use super::search::{self, KeyOrder, RawHit, SearchHit};

/// Hermes 0.19.0's error when the key is missing.
pub(crate) const MISSING_KEY: &str =
    "TAVILY_API_KEY environment variable not set. Get your API key at https://app.tavily.com/home";
/// Hermes' per-row error when Tavily gives no reason.
const EXTRACTION_FAILED: &str = "extraction failed";
/// Tavily returns at most this many search results.
const MAX_RESULTS: usize = 20;
/// URLs per `/extract` call, Tavily's documented maximum.
const MAX_EXTRACT_URLS: usize = 20;
const NAME: &str = "tavily";

/// A Tavily API client.
#[derive(Clone, Debug)]
pub struct TavilyClient {
    http: HttpClient,
}

// === impl TavilyClient ===

impl TavilyClient {
    /// A client for `endpoint`.
    pub(crate) fn new(endpoint: Endpoint) -> Self {
        Self {
            http: HttpClient::new(endpoint),
        }
    }

    /// Whether the key is set.
    pub(crate) fn available(&self) -> bool {
        self.http.endpoint().key().is_some()
    }

    /// Search; rows are `{title, url, description = content, position}`.
    pub(crate) async fn search(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<Vec<SearchHit>, VendorError> {
        let headers = self.headers()?;
        let body = json!({
            "query": query,
            "max_results": limit.clamp(1, MAX_RESULTS),
            "include_raw_content": false,
            "include_images": false,
        });
        let answer = self
            .http
            .post_for_json(NAME, "Tavily search failed", "/search", &headers, &body)
            .await?;
        let rows = search::rows(answer.get("results")).iter().map(|r| RawHit {
            title: search::text(r.get("title")),
            url: search::text(r.get("url")),
            description: search::text(r.get("content")),
        });
        Ok(search::numbered(KeyOrder::TitleHit, rows, limit))
    }

    /// Extract `urls`, at most 20 per call; one result per URL in input order.
    pub(crate) async fn extract(&self, urls: &[String]) -> Vec<Result<Page, VendorFailure>> {
        let headers = match self.headers() {
            Ok(h) => h,
            Err(e) => return fail_all(urls, e),
        };
        let mut out = Vec::with_capacity(urls.len());
        for chunk in urls.chunks(MAX_EXTRACT_URLS) {
            let body = json!({ "urls": chunk, "include_images": false });
            let answer = self
                .http
                .post_for_json(NAME, "Tavily extract failed", "/extract", &headers, &body)
                .await;
            match answer {
                Ok(answer) => out.extend(assign_rows(chunk, extract_rows(&answer), |_| {
                    page_failed(EXTRACTION_FAILED)
                })),
                Err(e) => out.extend(fail_all(chunk, e)),
            }
        }
        out
    }

    fn headers(&self) -> Result<Vec<(&'static str, String)>, VendorError> {
        let key = self
            .http
            .endpoint()
            .key()
            .ok_or_else(|| VendorError::not_configured(NAME, MISSING_KEY))?;
        Ok(vec![
            ("authorization", format!("Bearer {key}")),
            ("x-client-name", "fleetgate".to_string()),
        ])
    }
}

/// Every row of an `/extract` answer, keyed by its URL.
fn extract_rows(answer: &Value) -> Vec<(String, Result<Page, VendorFailure>)> {
    let mut rows = Vec::new();
    for r in search::rows(answer.get("results")) {
        let url = search::text(r.get("url"));
        let raw = search::text(r.get("raw_content"));
        let content = if raw.is_empty() {
            search::text(r.get("content"))
        } else {
            raw
        };
        let page = Page::from_vendor(url.clone(), search::text(r.get("title")), content);
        rows.push((url, Ok(page)));
    }
    for r in search::rows(answer.get("failed_results")) {
        let reason = r
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or(EXTRACTION_FAILED);
        rows.push((search::text(r.get("url")), Err(page_failed(reason))));
    }
    for r in search::rows(answer.get("failed_urls")) {
        let url = r
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| r.to_string());
        rows.push((url, Err(page_failed(EXTRACTION_FAILED))));
    }
    rows
}

fn page_failed(reason: &str) -> VendorFailure {
    VendorFailure::Vendor(VendorError::new(NAME, VendorErrorKind::PageFailed, reason))
}
