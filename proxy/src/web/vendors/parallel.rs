//! The `parallel` backend: Parallel's search and extract API (the beta surface Hermes 0.19.0
//! calls through the `parallel` SDK).
//!
//! `POST {base}/v1beta/search` with `{search_queries: [q], objective: q, mode, max_results ≤ 20}`
//! and `POST {base}/v1beta/extract` with `{urls, full_content: true}`; key in `x-api-key`,
//! beta opt-in in `parallel-beta: search-extract-2025-10-10`. Extract content is
//! `full_content`, else the excerpts joined by a blank line; `errors[]` rows carry
//! `content`, else `error_type`, else "extraction failed"; a URL absent from both gets
//! "no content returned".

use serde_json::{Value, json};

use super::client::VendorErrorKind;
use super::client::{Endpoint, HttpClient, VendorError};
use super::page::{Page, UrlRows, VendorFailure, assign_rows, fail_all};
use super::search::{self, KeyOrder, RawHit, SearchHit};

/// Hermes' error when the key is missing.
pub(crate) const MISSING_KEY: &str =
    "PARALLEL_API_KEY environment variable not set. Get your API key at https://parallel.ai";
/// The beta header value the SDK sends on search and extract.
pub(crate) const BETA_HEADER: &str = "search-extract-2025-10-10";
/// Parallel returns at most this many search results.
const MAX_RESULTS: usize = 20;
const NAME: &str = "parallel";

/// A Parallel API client.
#[derive(Clone, Debug)]
pub struct ParallelClient {
    http: HttpClient,
    mode: &'static str,
}

// === impl ParallelClient ===

impl ParallelClient {
    /// A client for `endpoint`, searching in the default `agentic` mode.
    pub(crate) fn new(endpoint: Endpoint) -> Self {
        Self {
            http: HttpClient::new(endpoint),
            mode: "agentic",
        }
    }

    /// The same client searching in `mode` (Hermes' `PARALLEL_SEARCH_MODE`).
    pub(crate) fn with_search_mode(mut self, mode: &str) -> Self {
        self.mode = search_mode(mode);
        self
    }

    /// Whether the key is set.
    pub(crate) fn available(&self) -> bool {
        self.http.endpoint().key().is_some()
    }

    /// Search; rows are `{url, title, description = excerpts, position}`.
    pub(crate) async fn search(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<Vec<SearchHit>, VendorError> {
        let headers = self.headers()?;
        let body = json!({
            "search_queries": [query],
            "objective": query,
            "mode": self.mode,
            "max_results": limit.clamp(1, MAX_RESULTS),
        });
        let answer = self
            .http
            .post_for_json(
                NAME,
                "Parallel search failed",
                "/v1beta/search",
                &headers,
                &body,
            )
            .await?;
        let rows = search::rows(answer.get("results")).iter().map(|r| RawHit {
            title: search::text(r.get("title")),
            url: search::text(r.get("url")),
            description: search::joined(r.get("excerpts"), " "),
        });
        Ok(search::numbered(KeyOrder::WebHit, rows, limit))
    }

    /// Extract `urls` in one call; one result per URL in input order.
    pub(crate) async fn extract(&self, urls: &[String]) -> Vec<Result<Page, VendorFailure>> {
        let headers = match self.headers() {
            Ok(h) => h,
            Err(e) => return fail_all(urls, e),
        };
        let body = json!({ "urls": urls, "full_content": true });
        match self
            .http
            .post_for_json(
                NAME,
                "Parallel extract failed",
                "/v1beta/extract",
                &headers,
                &body,
            )
            .await
        {
            Ok(answer) => assign_rows(urls, extract_rows(&answer), |_| {
                page_failed("no content returned")
            }),
            Err(e) => fail_all(urls, e),
        }
    }

    fn headers(&self) -> Result<Vec<(&'static str, String)>, VendorError> {
        let key = self
            .http
            .endpoint()
            .key()
            .ok_or_else(|| VendorError::not_configured(NAME, MISSING_KEY))?;
        Ok(vec![
            ("x-api-key", key.to_string()),
            ("parallel-beta", BETA_HEADER.to_string()),
        ])
    }
}

/// Hermes 0.19.0's mode rule: `fast`, `one-shot` or `agentic`; anything else is `agentic`.
pub(crate) fn search_mode(raw: &str) -> &'static str {
    match raw.trim().to_ascii_lowercase().as_str() {
        "fast" => "fast",
        "one-shot" => "one-shot",
        _ => "agentic",
    }
}

/// Every row of an extract answer, keyed by its URL (the keyed API's and the keyless
/// `web_fetch` tool's alike): content is `full_content`, else `content`, else the excerpts
/// joined by a blank line; `errors[]` rows carry `content`, else `error_type`.
pub(super) fn extract_rows(answer: &Value) -> UrlRows {
    let mut rows = Vec::new();
    for r in search::rows(answer.get("results")) {
        let url = search::text(r.get("url"));
        let content = [r.get("full_content"), r.get("content")]
            .into_iter()
            .map(search::text)
            .find(|s| !s.is_empty())
            .unwrap_or_else(|| search::joined(r.get("excerpts"), "\n\n"));
        let page = Page::from_vendor(url.clone(), search::text(r.get("title")), content);
        rows.push((url, Ok(page)));
    }
    for r in search::rows(answer.get("errors")) {
        let reason = [r.get("content"), r.get("error_type")]
            .into_iter()
            .map(search::text)
            .find(|s| !s.is_empty())
            .unwrap_or_else(|| "extraction failed".to_string());
        rows.push((search::text(r.get("url")), Err(page_failed(&reason))));
    }
    rows
}

pub(super) fn page_failed(reason: &str) -> VendorFailure {
    VendorFailure::Vendor(VendorError::new(NAME, VendorErrorKind::PageFailed, reason))
}
