//! The `keenable` backend: Keenable's search and fetch API, with a key or without one.
//!
//! Keyed: `POST {base}/v1/search` with `{query, max_results: 1..=20}` and `GET
//! {base}/v1/fetch?url=<u>` per URL, `Authorization: Bearer <key>`. Without a key the client
//! uses the public endpoints of Hermes' keyless tier: `POST /v1/search/public` with `{query,
//! max_results: max(1, limit)}` and `GET /v1/fetch/public?url=<u>`. Both send
//! `X-Keenable-Title: hermes-agent`; Hermes waits 30 s.
//!
//! Search rows are `{url, title, description, position}`, the description from `snippet`, else
//! `description`. A fetch answers `{url, title, content}` with markdown content; a missing field
//! reads as empty, as Hermes reads it. Failures use
//! Hermes' wording: `Keenable <search|extract> failed: <detail>` with a key, and `Keyless
//! Keenable <search|extract> failed: <detail>. Set KEENABLE_API_KEY (keenable.ai) or another
//! web backend via `hermes tools` for reliable service.` without one. A keyless vendor sees
//! the agent's queries and URLs: it is only called when the policy names it.
//!
//! `web.vendors.keenable.tier` (Hermes' `web.provider_tier.keenable`) picks the route: `auto`
//! (the default) is keyless without a key, `free` is always keyless (the key is not sent),
//! `paid` is always keyed and refuses to call without a key.

use serde_json::{Value, json};

use super::client::{self, Endpoint, HttpClient, VendorError};
use super::page::{Page, VendorFailure};
use super::search::{self, KeyOrder, RawHit, SearchHit};
use crate::policy::VendorTier;

/// The keyed search's `max_results` cap (Hermes' `SEARCH_LIMIT_CAP`).
const MAX_RESULTS: usize = 20;
const NAME: &str = "keenable";
/// The title header Hermes sends on every call.
const TITLE: (&str, &str) = ("x-keenable-title", "hermes-agent");

/// The error of a paid tier without a key.
pub const MISSING_KEY: &str = "KEENABLE_API_KEY is not set and web.vendors.keenable.tier is paid";

/// A Keenable API client.
#[derive(Clone, Debug)]
pub struct KeenableClient {
    http: HttpClient,
    tier: VendorTier,
}

impl super::page::FetchOne for KeenableClient {
    async fn fetch_one(&self, url: &str) -> Result<Page, VendorError> {
        self.fetch(url).await
    }
}

// === impl KeenableClient ===

impl KeenableClient {
    /// A client for `endpoint`; without a key it speaks to the public endpoints.
    pub fn new(endpoint: Endpoint) -> Self {
        Self {
            http: HttpClient::new(endpoint),
            tier: VendorTier::Auto,
        }
    }

    /// The same client on `tier`.
    pub fn with_tier(mut self, tier: VendorTier) -> Self {
        self.tier = tier;
        self
    }

    /// Callable keylessly, or with a key; a paid tier needs the key.
    pub fn available(&self) -> bool {
        self.tier != VendorTier::Paid || self.http.endpoint().key().is_some()
    }

    /// Whether calls go to the keyless public endpoints (Hermes' `use_keyless`): always on
    /// the free tier, never on the paid one, without a key on `auto`.
    pub fn keyless(&self) -> bool {
        match self.tier {
            VendorTier::Free => true,
            VendorTier::Paid => false,
            VendorTier::Auto => self.http.endpoint().key().is_none(),
        }
    }

    /// A paid tier without a key sends nothing.
    fn check_key(&self) -> Result<(), VendorError> {
        if self.available() {
            Ok(())
        } else {
            Err(VendorError::not_configured(NAME, MISSING_KEY))
        }
    }

    /// Search; rows are `{url, title, description, position}`.
    pub async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>, VendorError> {
        self.check_key()?;
        let (path, max) = if self.keyless() {
            ("/v1/search/public", limit.max(1))
        } else {
            ("/v1/search", limit.clamp(1, MAX_RESULTS))
        };
        let body = json!({ "query": query, "max_results": max });
        let answer = self
            .http
            .post_for_json(NAME, "search", path, &self.headers(), &body)
            .await
            .map_err(|e| self.worded(e, "search"))?;
        let rows = search::rows(answer.get("results")).iter().map(|r| RawHit {
            title: search::text(r.get("title")),
            url: search::text(r.get("url")),
            description: match search::text(r.get("snippet")) {
                snippet if !snippet.is_empty() => snippet,
                _ => search::text(r.get("description")),
            },
        });
        Ok(search::numbered(KeyOrder::WebHit, rows, limit))
    }

    /// Extract each URL with its own fetch; one result per URL in input order (a refused key
    /// is not asked again for the next URL).
    pub async fn extract(&self, urls: &[String]) -> Vec<Result<Page, VendorFailure>> {
        super::page::per_url(self, urls).await
    }

    async fn fetch(&self, url: &str) -> Result<Page, VendorError> {
        self.check_key()?;
        let path = if self.keyless() {
            "/v1/fetch/public"
        } else {
            "/v1/fetch"
        };
        let bytes = self
            .http
            .get(path, &[("url", url.to_string())], &self.headers())
            .await
            .map_err(|e| self.worded(VendorError::from_call(NAME, "extract", &e), "extract"))?;
        let answer: Value = client::parse_json(&bytes)
            .map_err(|e| self.worded(VendorError::bad_response(NAME, e), "extract"))?;
        // As Hermes reads it: a missing title or content is an empty one.
        let content = search::text(answer.get("content"));
        let final_url = match search::text(answer.get("url")) {
            found if !found.is_empty() => found,
            _ => url.to_string(),
        };
        Ok(Page::from_vendor(
            final_url,
            search::text(answer.get("title")),
            content,
        ))
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![(TITLE.0, TITLE.1.to_string())];
        // A keyless call carries no key, even when one is configured (the free tier).
        if let Some(key) = self.http.endpoint().key().filter(|_| !self.keyless()) {
            headers.push(("authorization", format!("Bearer {key}")));
        }
        headers
    }

    /// Hermes' wording of a failed call (`what` is `search` or `extract`); the error's kind and
    /// status stay as the client classified them.
    fn worded(&self, mut error: VendorError, what: &str) -> VendorError {
        let detail = error
            .message
            .strip_prefix(&format!("{what}: "))
            .unwrap_or(&error.message)
            .to_string();
        error.message = if self.keyless() {
            format!(
                "Keyless Keenable {what} failed: {detail}. Set KEENABLE_API_KEY (keenable.ai) \
                 or another web backend via `hermes tools` for reliable service."
            )
        } else {
            format!("Keenable {what} failed: {detail}")
        };
        error
    }
}
