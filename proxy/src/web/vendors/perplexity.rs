//! The `perplexity` backend: Perplexity's Search API (search only here).
//!
//! `POST {base}/search` with `{query, max_results: 1..=20, search_context_size: "low"}` (the
//! low context keeps `snippet` at description length), `Authorization: Bearer <key>` and an
//! `X-Pplx-Integration` tag. The answer must be `{results: [{url, title?, snippet?}]}` with a
//! non-empty `url` in every row, as Hermes' provider validates it: a row without one makes the
//! whole answer a bad response, never a row with an empty link. Rows are `{title, url,
//! description, position}`. Failures read `Perplexity search failed: <detail>`.

use serde_json::{Value, json};

use super::client::{Endpoint, HttpClient, VendorError};
use super::search::{self, KeyOrder, RawHit, SearchHit};

/// Hermes' error when the key is missing.
pub(crate) const MISSING_KEY: &str =
    "PERPLEXITY_API_KEY is not set. Get a key at https://www.perplexity.ai/account/api";
/// The Search API's cap on `max_results`.
const MAX_RESULTS: usize = 20;
const NAME: &str = "perplexity";

/// A Perplexity Search API client.
#[derive(Clone, Debug)]
pub struct PerplexityClient {
    http: HttpClient,
}

// === impl PerplexityClient ===

impl PerplexityClient {
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

    /// Search; rows are `{title, url, description = snippet, position}`.
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
        let headers = [
            ("authorization", format!("Bearer {key}")),
            ("x-pplx-integration", "fleetgate".to_string()),
        ];
        let body = json!({
            "query": query,
            "max_results": limit.clamp(1, MAX_RESULTS),
            "search_context_size": "low",
        });
        let answer = self
            .http
            .post_for_json(NAME, "Perplexity search failed", "/search", &headers, &body)
            .await?;
        let rows = validated(&answer)?;
        Ok(search::numbered(KeyOrder::TitleHit, rows, limit))
    }
}

/// The rows of a Search API answer, or why the answer is not one.
fn validated(answer: &Value) -> Result<Vec<RawHit>, VendorError> {
    let bad = |why: &str| {
        VendorError::bad_response(
            NAME,
            format!("Perplexity search failed: the answer is not a result list ({why})"),
        )
    };
    let results = answer
        .get("results")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no results array"))?;
    let optional = |row: &Value, key: &str| match row.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(_) => Err(bad(&format!("{key} is not text"))),
    };
    results
        .iter()
        .map(|row| {
            let url = match row.get("url") {
                Some(Value::String(url)) if !url.is_empty() => url.clone(),
                _ => return Err(bad("a row has no url")),
            };
            Ok(RawHit {
                title: optional(row, "title")?,
                url,
                description: optional(row, "snippet")?,
            })
        })
        .collect()
}
