//! The `firecrawl` backend: Firecrawl's v2 `/scrape` and `/search` API.
//!
//! The request bodies are the ones the `firecrawl-py` 4.x SDK sends for Hermes' calls
//! (`scrape(url, formats=["markdown"])`, `search(query, limit)`), confirmed by capturing the
//! installed SDK against a loopback server: the SDK's scrape defaults are sent explicitly and
//! `Authorization: Bearer <key>` only when a key is set (self-hosted instances may run without
//! one). One scrape per URL, in order. The page's final URL is `metadata.sourceURL`; the
//! pipeline re-gates it.

use serde_json::{Value, json};

use super::client::VendorErrorKind;
use super::client::{self, CallError, Endpoint, HttpClient, VendorError};
use super::page::{Page, VendorFailure};
use super::search::{self, KeyOrder, RawHit, SearchHit};

/// Hermes' error when neither a key nor a self-hosted URL is set.
pub(crate) const NOT_CONFIGURED: &str = "Web tools are not configured. Set FIRECRAWL_API_KEY for cloud \
     Firecrawl or set FIRECRAWL_API_URL for a self-hosted Firecrawl instance.";
/// The SDK refuses limits above this.
const MAX_RESULTS: usize = 100;
/// Sent as the SDK sends its own `python-sdk@<version>` tag.
const ORIGIN: &str = "fleetgate";
const NAME: &str = "firecrawl";

/// A Firecrawl API client.
#[derive(Clone, Debug)]
pub struct FirecrawlClient {
    http: HttpClient,
}

impl super::page::FetchOne for FirecrawlClient {
    async fn fetch_one(&self, url: &str) -> Result<Page, VendorError> {
        self.scrape(url).await
    }
}

// === impl FirecrawlClient ===

impl FirecrawlClient {
    /// A client for `endpoint` (cloud or self-hosted).
    pub(crate) fn new(endpoint: Endpoint) -> Self {
        Self {
            http: HttpClient::new(endpoint),
        }
    }

    /// Whether a key is set or the base URL points at a self-hosted instance.
    pub(crate) fn available(&self) -> bool {
        let endpoint = self.http.endpoint();
        endpoint.key().is_some() || !is_cloud(&endpoint.base_url)
    }

    /// Search; rows are `{url, title, description, position}`.
    pub(crate) async fn search(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<Vec<SearchHit>, VendorError> {
        let headers = self.headers()?;
        let body = json!({
            "query": query,
            "limit": limit.clamp(1, MAX_RESULTS),
            "origin": ORIGIN,
        });
        let answer = self
            .http
            .post_for_json(
                NAME,
                "Firecrawl search failed",
                "/v2/search",
                &headers,
                &body,
            )
            .await?;
        if answer.get("success").and_then(Value::as_bool) == Some(false) {
            let reason = vendor_error_text(&answer);
            return Err(VendorError::bad_response(
                NAME,
                format!("Firecrawl search failed: {reason}"),
            ));
        }
        let rows = search_rows(&answer).iter().map(search_row);
        Ok(search::numbered(KeyOrder::WebHit, rows, limit))
    }

    /// Scrape each URL in turn; one result per URL in input order.
    ///
    /// A failure that cannot differ per URL (no credential, 401, 402, vendor unreachable)
    /// is reused for the remaining URLs instead of calling again.
    pub(crate) async fn extract(&self, urls: &[String]) -> Vec<Result<Page, VendorFailure>> {
        super::page::per_url(self, urls).await
    }

    async fn scrape(&self, url: &str) -> Result<Page, VendorError> {
        let headers = self.headers()?;
        let body = scrape_body(url);
        let bytes = self
            .http
            .post_json("/v2/scrape", &headers, &body)
            .await
            .map_err(|e| self.scrape_error(&e))?;
        let answer = client::parse_json(&bytes).map_err(|e| {
            VendorError::bad_response(NAME, format!("Firecrawl scrape failed: {e}"))
        })?;
        if answer.get("success").and_then(Value::as_bool) == Some(false) {
            return Err(VendorError::new(
                NAME,
                VendorErrorKind::PageFailed,
                vendor_error_text(&answer),
            ));
        }
        Ok(page(url, &answer))
    }

    fn scrape_error(&self, err: &CallError) -> VendorError {
        match err {
            CallError::Timeout(limit) => VendorError::new(
                NAME,
                VendorErrorKind::Timeout,
                format!(
                    "Scrape timed out after {} — page may be too large or unresponsive. \
                     Try browser_navigate instead.",
                    client::seconds(*limit)
                ),
            ),
            other => VendorError::from_call(NAME, "Firecrawl scrape failed", other),
        }
    }

    fn headers(&self) -> Result<Vec<(&'static str, String)>, VendorError> {
        if !self.available() {
            return Err(VendorError::not_configured(NAME, NOT_CONFIGURED));
        }
        Ok(self
            .http
            .endpoint()
            .key()
            .map(|key| vec![("authorization", format!("Bearer {key}"))])
            .unwrap_or_default())
    }
}

/// The `/v2/scrape` body `firecrawl-py` sends for `scrape(url, formats=["markdown"])`.
pub(crate) fn scrape_body(url: &str) -> Value {
    json!({
        "url": url.trim(),
        "formats": ["markdown"],
        "onlyMainContent": true,
        "skipTlsVerification": true,
        "removeBase64Images": true,
        "fastMode": false,
        "blockAds": true,
        "storeInCache": true,
        "maxAge": 14_400_000,
        "mobile": false,
        "origin": ORIGIN,
    })
}

fn is_cloud(base: &url::Url) -> bool {
    base.host_str() == Some("api.firecrawl.dev")
}

/// Firecrawl's own error text from a `success: false` body.
pub(super) fn vendor_error_text(answer: &Value) -> String {
    answer
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or("Unknown error occurred")
        .to_string()
}

/// The page of a scrape answer: `data` (or the top level) with `markdown` and `metadata`.
pub(super) fn page(requested: &str, answer: &Value) -> Page {
    let data = answer
        .get("data")
        .filter(|d| d.is_object())
        .unwrap_or(answer);
    let meta = data.get("metadata");
    let field = |name: &str| meta.and_then(|m| m.get(name));
    let title = match field("title") {
        Some(Value::Array(items)) => search::text(items.first()),
        other => search::text(other),
    };
    let source = search::text(field("sourceURL"));
    Page {
        url: if source.is_empty() {
            requested.to_string()
        } else {
            source
        },
        title,
        content: search::text(data.get("markdown")),
        status: field("statusCode")
            .and_then(Value::as_u64)
            .and_then(|s| u16::try_from(s).ok())
            .unwrap_or(200),
        content_type: field("contentType")
            .and_then(Value::as_str)
            .map(str::to_string),
        textual: true,
        via: None,
        hops: Vec::new(),
    }
}

/// Search rows from `data` (a list), `data.web`, `data.results`, `web` or `results`.
pub(super) fn search_rows(answer: &Value) -> &[Value] {
    let data = answer.get("data");
    if let Some(Value::Array(rows)) = data {
        return rows;
    }
    [
        data.and_then(|d| d.get("web")),
        data.and_then(|d| d.get("results")),
        answer.get("web"),
        answer.get("results"),
    ]
    .into_iter()
    .map(search::rows)
    .find(|rows| !rows.is_empty())
    .unwrap_or_default()
}

/// A web result, or a scraped document whose fields sit in `metadata`.
pub(super) fn search_row(row: &Value) -> RawHit {
    let meta = row.get("metadata");
    let pick = |key: &str, meta_key: &str| {
        let direct = search::text(row.get(key));
        if direct.is_empty() {
            search::text(meta.and_then(|m| m.get(meta_key)))
        } else {
            direct
        }
    };
    RawHit {
        title: pick("title", "title"),
        url: pick("url", "sourceURL"),
        description: pick("description", "description"),
    }
}
