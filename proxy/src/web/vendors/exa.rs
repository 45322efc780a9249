//! The `exa` backend: Exa's `/search` and `/contents` JSON API.
//!
//! Wire format of the `exa-py` SDK calls Hermes makes: `POST {base}/search` with
//! `{query, numResults, contents: {highlights: true}}` and `POST {base}/contents` with
//! `{urls, text: true}`, key in `x-api-key`, plus an `x-exa-integration` tag. Search rows take
//! their description from the highlights joined by spaces. Every requested URL gets exactly
//! one row: its result, else `Exa fetch failed (<status>)` from `statuses`, else
//! `Exa could not fetch <url>`.

use serde_json::{Value, json};

use super::client::VendorErrorKind;
use super::client::{Endpoint, HttpClient, VendorError};
use super::page::{Page, VendorFailure, assign_rows, fail_all, same_url};
use super::search::{self, KeyOrder, RawHit, SearchHit};

/// Hermes' error when the key is missing.
pub(crate) const MISSING_KEY: &str =
    "EXA_API_KEY environment variable not set. Get your API key at https://exa.ai";
/// Exa returns at most this many search results.
const MAX_RESULTS: usize = 100;
const NAME: &str = "exa";

/// An Exa API client.
#[derive(Clone, Debug)]
pub struct ExaClient {
    http: HttpClient,
}

// === impl ExaClient ===

impl ExaClient {
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

    /// Search; rows are `{url, title, description = highlights, position}`.
    pub(crate) async fn search(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<Vec<SearchHit>, VendorError> {
        let headers = self.headers()?;
        let body = json!({
            "query": query,
            "numResults": limit.clamp(1, MAX_RESULTS),
            "contents": { "highlights": true },
        });
        let answer = self
            .http
            .post_for_json(NAME, "Exa search failed", "/search", &headers, &body)
            .await?;
        let rows = search::rows(answer.get("results")).iter().map(|r| RawHit {
            title: search::text(r.get("title")),
            url: search::text(r.get("url")),
            description: search::joined(r.get("highlights"), " "),
        });
        Ok(search::numbered(KeyOrder::WebHit, rows, limit))
    }

    /// Extract `urls` in one `/contents` call; one result per URL in input order.
    pub(crate) async fn extract(&self, urls: &[String]) -> Vec<Result<Page, VendorFailure>> {
        let headers = match self.headers() {
            Ok(h) => h,
            Err(e) => return fail_all(urls, e),
        };
        let body = json!({ "urls": urls, "text": true });
        let answer = match self
            .http
            .post_for_json(NAME, "Exa extract failed", "/contents", &headers, &body)
            .await
        {
            Ok(answer) => answer,
            Err(e) => return fail_all(urls, e),
        };
        let rows = search::rows(answer.get("results"))
            .iter()
            .map(|r| {
                let url = search::text(r.get("url"));
                let page = Page::from_vendor(
                    url.clone(),
                    search::text(r.get("title")),
                    search::text(r.get("text")),
                );
                (url, Ok(page))
            })
            .collect();
        let statuses = search::rows(answer.get("statuses"));
        assign_rows(urls, rows, |url| missing(url, statuses))
    }

    fn headers(&self) -> Result<Vec<(&'static str, String)>, VendorError> {
        let key = self
            .http
            .endpoint()
            .key()
            .ok_or_else(|| VendorError::not_configured(NAME, MISSING_KEY))?;
        Ok(vec![
            ("x-api-key", key.to_string()),
            ("x-exa-integration", "fleetgate".to_string()),
        ])
    }
}

/// The row of a URL Exa returned no result for.
fn missing(url: &str, statuses: &[Value]) -> VendorFailure {
    let status = statuses
        .iter()
        .find(|s| {
            s.get("id")
                .and_then(Value::as_str)
                .is_some_and(|id| same_url(url, id))
        })
        .and_then(|s| s.get("status"))
        .and_then(Value::as_str);
    let message = match status {
        Some(status) => format!("Exa fetch failed ({status})"),
        None => format!("Exa could not fetch {url}"),
    };
    VendorFailure::Vendor(VendorError::new(NAME, VendorErrorKind::PageFailed, message))
}
