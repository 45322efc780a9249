//! The `brave-free` backend: Brave Search's web search API (search only).
//!
//! `GET {base}/res/v1/web/search?q=<q>&count=<1..=20>` with `X-Subscription-Token: <key>` and
//! `Accept: application/json`; rows from `web.results[]`, cut to the limit; errors use
//! Hermes' wording.

use super::client::VendorErrorKind;
use super::client::{self, CallError, Endpoint, HttpClient, VendorError};
use super::search::{self, KeyOrder, RawHit, SearchHit};

/// Hermes' error when the key is missing.
pub(crate) const MISSING_KEY: &str = "BRAVE_SEARCH_API_KEY is not set";
/// Brave's `count` maximum.
const MAX_COUNT: usize = 20;
const NAME: &str = "brave-free";

/// A Brave Search API client.
#[derive(Clone, Debug)]
pub struct BraveFreeClient {
    http: HttpClient,
}

// === impl BraveFreeClient ===

impl BraveFreeClient {
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

    /// Search; rows are `{title, url, description, position}`.
    pub(crate) async fn search(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<Vec<SearchHit>, VendorError> {
        let key = self
            .http
            .endpoint()
            .key()
            .ok_or_else(|| VendorError::not_configured(NAME, MISSING_KEY))?;
        let query = [
            ("q", query.to_string()),
            ("count", limit.clamp(1, MAX_COUNT).to_string()),
        ];
        let headers = [
            ("x-subscription-token", key.to_string()),
            ("accept", "application/json".to_string()),
        ];
        let bytes = self
            .http
            .get("/res/v1/web/search", &query, &headers)
            .await
            .map_err(|e| call_error(&e))?;
        let answer = client::parse_json(&bytes).map_err(|_| {
            VendorError::bad_response(NAME, "Could not parse Brave Search response as JSON")
        })?;
        let web = answer.get("web");
        let rows = search::rows(web.and_then(|w| w.get("results")))
            .iter()
            .map(|r| RawHit {
                title: search::text(r.get("title")),
                url: search::text(r.get("url")),
                description: search::text(r.get("description")),
            });
        Ok(search::numbered(KeyOrder::TitleHit, rows, limit))
    }
}

fn call_error(err: &CallError) -> VendorError {
    match err {
        CallError::Status { status, .. } => VendorError {
            backend: NAME,
            kind: err.kind(),
            status: Some(*status),
            message: format!("Brave Search returned HTTP {status}"),
        },
        CallError::TooLarge(_) => VendorError::new(
            NAME,
            VendorErrorKind::BodyTooLarge,
            format!(
                "Brave Search returned an oversized response: {}",
                err.detail()
            ),
        ),
        _ => VendorError::new(
            NAME,
            err.kind(),
            format!("Could not reach Brave Search: {}", err.detail()),
        ),
    }
}
