//! The `searxng` backend: an operator-hosted SearXNG instance's JSON search (search only).
//!
//! `GET {base}/search?q=<q>&format=json&pageno=1` with `Accept: application/json`. Rows are
//! sorted by `score` (descending, stable, missing = 0), cut to the limit and stringified like
//! Hermes' `str()`; errors use Hermes' wording. The base URL is operator config and is not
//! SSRF-checked, as in Hermes.

use serde_json::Value;

use super::client::VendorErrorKind;
use super::client::{self, CallError, Endpoint, HttpClient, VendorError};
use super::search::{self, KeyOrder, RawHit, SearchHit};

const NAME: &str = "searxng";

/// A SearXNG client; it exists only when a base URL is configured.
#[derive(Clone, Debug)]
pub struct SearxngClient {
    http: HttpClient,
}

// === impl SearxngClient ===

impl SearxngClient {
    /// A client for the instance at `endpoint.base_url`.
    pub(crate) fn new(endpoint: Endpoint) -> Self {
        Self {
            http: HttpClient::new(endpoint),
        }
    }

    /// Search; rows are `{title, url, description = content, position}`.
    pub(crate) async fn search(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<Vec<SearchHit>, VendorError> {
        let query = [
            ("q", query.to_string()),
            ("format", "json".to_string()),
            ("pageno", "1".to_string()),
        ];
        let headers = [("accept", "application/json".to_string())];
        let bytes = self
            .http
            .get("/search", &query, &headers)
            .await
            .map_err(|e| self.call_error(&e))?;
        let answer = client::parse_json(&bytes).map_err(|_| {
            VendorError::bad_response(NAME, "Could not parse SearXNG response as JSON")
        })?;
        let mut rows: Vec<&Value> = search::rows(answer.get("results")).iter().collect();
        // A stable sort keeps the engine's order among equal scores, like Python's sorted().
        rows.sort_by(|a, b| score(b).total_cmp(&score(a)));
        let rows = rows.into_iter().map(|r| RawHit {
            title: search::py_str(r.get("title")),
            url: search::py_str(r.get("url")),
            description: search::py_str(r.get("content")),
        });
        Ok(search::numbered(KeyOrder::TitleHit, rows, limit))
    }

    fn call_error(&self, err: &CallError) -> VendorError {
        match err {
            CallError::Status { status, .. } => VendorError {
                backend: NAME,
                kind: err.kind(),
                status: Some(*status),
                message: format!("SearXNG returned HTTP {status}"),
            },
            CallError::TooLarge(_) => VendorError::new(
                NAME,
                VendorErrorKind::BodyTooLarge,
                format!("SearXNG returned an oversized response: {}", err.detail()),
            ),
            _ => VendorError::new(
                NAME,
                err.kind(),
                format!(
                    "Could not reach SearXNG at {}: {}",
                    self.base(),
                    err.detail()
                ),
            ),
        }
    }

    /// The base URL as Hermes prints it: no trailing `/`, and no credentials.
    fn base(&self) -> String {
        let mut base = self.http.endpoint().base_url.clone();
        let _ = base.set_username("");
        let _ = base.set_password(None);
        base.as_str().trim_end_matches('/').to_string()
    }
}

/// `float(row.get("score", 0))`; a score that does not parse counts as 0.
fn score(row: &Value) -> f64 {
    match row.get("score") {
        Some(Value::Number(n)) => n.as_f64().unwrap_or(0.0),
        Some(Value::String(s)) => s.trim().parse().unwrap_or(0.0),
        _ => 0.0,
    }
}
