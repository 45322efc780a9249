//! The keyless tier: exa, parallel, firecrawl and keenable answering without a key, and the
//! ring that walks them.
//!
//! Each ring member has a public endpoint with its own wire format: Exa and Parallel speak MCP
//! (one `tools/call` without an initialize handshake, see [`super::mcp`]), Firecrawl its v2 REST API without `Authorization`, Keenable
//! its `/public` routes. A [`KeylessClient`] is one member on that endpoint; `web.vendors.<name>`
//! still sets its timeout and retries, and `keylessUrl` moves the endpoint (a mirror, a test
//! stub). A keyless vendor sees the agent's queries and URLs: it is called only when the policy
//! names it (as a backend with `tier: free`, or `auto` without a key) or names the ring.
//!
//! The [`Ring`] is Hermes' keyless ring, `exa, parallel, firecrawl, keenable` in that order.
//! Serving `web.backend: keyless` it starts at a per-process cursor that advances on every
//! call (spreading the free tiers' rate limits); rescuing a configured backend it is pinned and
//! starts at that backend's ring position (exa for one outside the ring), the cursor left
//! alone. Members on `tier: paid` are skipped. Search moves to the next member when the error
//! is rate-limit-ish or a vendor refusal (401, 402, 403, 5xx); extract only when every row's
//! error is rate-limit-ish. Any other failure ends the walk with that vendor's error.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use super::client::VendorErrorKind;
use super::client::{self, Endpoint, HttpClient, VendorError};
use super::firecrawl;
use super::keenable::KeenableClient;
use super::mcp;
use super::page::{Page, UrlRows, VendorFailure, assign_rows, fail_all, per_url};
use super::search::{self, KeyOrder, RawHit, SearchHit, Searched};
use crate::policy::backends::BackendKind;
use crate::policy::{VendorSettings, VendorTier};

pub(crate) use fleetgate_policy::backends::RING;

/// Exa's public MCP endpoint.
pub(crate) const EXA_MCP_URL: &str = "https://mcp.exa.ai/mcp";
/// Parallel's public MCP endpoint.
pub(crate) const PARALLEL_MCP_URL: &str = "https://search.parallel.ai/mcp";
/// Appended to the last error when every member failed over.
pub(crate) const EXHAUSTED: &str = "all keyless vendors unavailable";
/// The error when every member is on `tier: paid`.
pub(crate) const PINNED_PAID: &str = "All keyless web providers are pinned to paid tiers.";
/// Hermes' timeout for the MCP and Keenable keyless calls.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Substrings of a rate-limit-ish error (lowercased).
const RATE_LIMIT_MARKERS: [&str; 7] = [
    "rate limit",
    "rate-limit",
    "ratelimit",
    "too many requests",
    "429",
    "quota exceeded",
    "slow down",
];

/// This process's keyless session id: random hex, never persisted, never derived from an
/// identifier. Parallel receives it as `session_id`; the ring cursor starts from it.
pub(crate) fn session_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        let half = || {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u32(crate::base::clock::now_subsec_nanos());
            h.finish()
        };
        format!("{:016x}{:016x}", half(), half())
    })
}

/// The ring cursor: starts at the session id modulo the ring size, advances per unpinned walk.
fn cursor() -> &'static AtomicUsize {
    static CURSOR: OnceLock<AtomicUsize> = OnceLock::new();
    CURSOR.get_or_init(|| {
        let seed = u128::from_str_radix(session_id(), 16).unwrap_or_default();
        AtomicUsize::new((seed % RING.len() as u128) as usize)
    })
}

/// Whether a failed call's error is rate-limit-ish.
pub(crate) fn rate_limited(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    RATE_LIMIT_MARKERS.iter().any(|m| lower.contains(m))
}

/// Whether a failed search's error is a vendor refusal: an optional `Keyless <Word> search
/// failed:` prefix, then `http`, `http status`, `status`, `status code`, `client error` or
/// `error code`, an optional `:`, `=` or `'`, then 401, 402, 403 or a 5xx status.
pub(crate) fn vendor_refusal(message: &str) -> bool {
    let lower = message.trim_start().to_ascii_lowercase();
    let mut rest = lower.as_str();
    if let Some(after) = rest.strip_prefix("keyless ")
        && let Some((word, tail)) = after.split_once(' ')
        && !word.is_empty()
        && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && let Some(tail) = tail.strip_prefix("search failed:")
    {
        rest = tail.trim_start();
    }
    let Some(after) = [
        "http status",
        "status code",
        "client error",
        "error code",
        "http",
        "status",
    ]
    .iter()
    .find_map(|w| rest.strip_prefix(w)) else {
        return false;
    };
    let after = after.trim_start();
    let after = after
        .strip_prefix([':', '=', '\''])
        .unwrap_or(after)
        .trim_start();
    let digits: String = after.chars().take(3).collect();
    let boundary = after
        .chars()
        .nth(3)
        .is_none_or(|c| !c.is_ascii_alphanumeric());
    boundary
        && (matches!(digits.as_str(), "401" | "402" | "403")
            || (digits.len() == 3
                && digits.starts_with('5')
                && digits.chars().all(|c| c.is_ascii_digit())))
}

/// Whether a failed search moves the walk to the next member.
fn search_fails_over(error: &VendorError) -> bool {
    rate_limited(&error.message) || vendor_refusal(&error.message)
}

/// Whether a failed extract moves the walk on: every row failed, each rate-limit-ish.
fn extract_fails_over(rows: &[Result<Page, VendorFailure>]) -> bool {
    !rows.is_empty()
        && rows
            .iter()
            .all(|r| matches!(r, Err(f) if rate_limited(&f.to_string())))
}

/// One ring member called without a key.
#[derive(Clone, Debug)]
pub struct KeylessClient {
    kind: BackendKind,
    route: KeylessRoute,
}

#[derive(Clone, Debug)]
enum KeylessRoute {
    /// Exa or Parallel over MCP.
    Mcp(HttpClient),
    /// Firecrawl's REST API without a key.
    Firecrawl(HttpClient),
    /// Keenable's `/public` routes.
    Keenable(KeenableClient),
}

// === impl KeylessClient ===

impl KeylessClient {
    /// Member `kind` on its keyless endpoint; `config` is its `web.vendors.<name>` entry.
    pub(crate) fn new(kind: BackendKind, config: Option<&VendorSettings>) -> Option<Self> {
        let configured = config.and_then(|c| c.keyless_url.clone());
        let (default, timeout) = match kind {
            BackendKind::Exa => (EXA_MCP_URL, TIMEOUT),
            BackendKind::Parallel => (PARALLEL_MCP_URL, TIMEOUT),
            BackendKind::Firecrawl => (
                kind.default_base_url().unwrap_or_default(),
                kind.default_timeout(),
            ),
            BackendKind::Keenable => (kind.default_base_url().unwrap_or_default(), TIMEOUT),
            _ => return None,
        };
        // Keenable's public routes sit beside its keyed ones, on the configured base URL.
        let base = configured
            .or_else(|| {
                (kind == BackendKind::Keenable)
                    .then(|| config.and_then(|c| c.base_url.clone()))
                    .flatten()
            })
            .or_else(|| url::Url::parse(default).ok())?;
        let mut endpoint = Endpoint::new(base);
        endpoint.timeout = config.and_then(|c| c.timeout).unwrap_or(timeout);
        if let Some(c) = config {
            endpoint.max_body_bytes = c.max_body_bytes.unwrap_or(endpoint.max_body_bytes);
            endpoint.retries = c.retries.unwrap_or(endpoint.retries);
        }
        let route = match kind {
            BackendKind::Exa | BackendKind::Parallel => {
                KeylessRoute::Mcp(HttpClient::new(endpoint))
            }
            BackendKind::Firecrawl => KeylessRoute::Firecrawl(HttpClient::new(endpoint)),
            _ => KeylessRoute::Keenable(KeenableClient::new(endpoint).with_tier(VendorTier::Free)),
        };
        Some(Self { kind, route })
    }

    /// Which vendor this is.
    pub(crate) fn kind(&self) -> BackendKind {
        self.kind
    }

    /// Search; rows are `{url, title, description, position}`.
    pub(crate) async fn search(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<Vec<SearchHit>, VendorError> {
        match &self.route {
            KeylessRoute::Keenable(k) => k.search(query, limit).await,
            KeylessRoute::Firecrawl(http) => {
                let body = json!({ "query": query, "limit": limit.max(1) });
                let answer = http
                    .post_for_json(self.name(), "search", "/v2/search", &[], &body)
                    .await
                    .map_err(|e| self.worded(e, "search", true))?;
                if answer.get("success").and_then(Value::as_bool) == Some(false) {
                    let reason = firecrawl::vendor_error_text(&answer);
                    return Err(self.worded(
                        VendorError::bad_response(self.name(), reason),
                        "search",
                        true,
                    ));
                }
                let rows = firecrawl::search_rows(&answer)
                    .iter()
                    .map(firecrawl::search_row);
                Ok(search::numbered(KeyOrder::WebHit, rows, limit))
            }
            KeylessRoute::Mcp(http) if self.kind == BackendKind::Exa => {
                let args = json!({ "query": query, "numResults": limit.max(1) });
                let text = self.tool(http, "web_search_exa", args, "search").await?;
                Ok(search::numbered(KeyOrder::WebHit, exa_blocks(&text), limit))
            }
            KeylessRoute::Mcp(http) => {
                let args = json!({
                    "objective": query,
                    "search_queries": [query],
                    "session_id": session_id(),
                });
                let text = self.tool(http, "web_search", args, "search").await?;
                let rows = parallel_search_rows(&text).map_err(|e| {
                    VendorError::bad_response(
                        self.name(),
                        format!("Keyless Parallel search returned an unexpected payload: {e}"),
                    )
                })?;
                Ok(search::numbered(KeyOrder::WebHit, rows, limit))
            }
        }
    }

    /// Extract `urls`; one result per URL in input order.
    pub(crate) async fn extract(&self, urls: &[String]) -> Vec<Result<Page, VendorFailure>> {
        match &self.route {
            KeylessRoute::Keenable(k) => k.extract(urls).await,
            KeylessRoute::Mcp(http) if self.kind == BackendKind::Parallel => {
                let args = json!({
                    "urls": urls,
                    "objective": "Full page content",
                    "session_id": session_id(),
                });
                match self.tool(http, "web_fetch", args, "extract").await {
                    Ok(text) => match parallel_extract_rows(&text) {
                        Ok(rows) => assign_rows(urls, rows, |_| {
                            super::parallel::page_failed("no content returned")
                        }),
                        Err(e) => fail_all(
                            urls,
                            self.worded(VendorError::bad_response(self.name(), e), "extract", true),
                        ),
                    },
                    Err(e) => fail_all(urls, e),
                }
            }
            KeylessRoute::Mcp(_) | KeylessRoute::Firecrawl(_) => per_url(self, urls).await,
        }
    }

    fn name(&self) -> &'static str {
        self.kind.name()
    }

    /// One MCP tool call, its failure in Hermes' keyless wording.
    async fn tool(
        &self,
        http: &HttpClient,
        tool: &str,
        arguments: Value,
        what: &str,
    ) -> Result<String, VendorError> {
        mcp::call_tool(http, tool, arguments).await.map_err(|e| {
            let error = match &e {
                mcp::McpError::Call(call) => VendorError {
                    message: e.detail(),
                    ..VendorError::from_call(self.name(), what, call)
                },
                mcp::McpError::Tool(message) => {
                    let kind = if rate_limited(message) {
                        VendorErrorKind::RateLimited
                    } else {
                        VendorErrorKind::BadResponse
                    };
                    VendorError::new(self.name(), kind, message.clone())
                }
            };
            self.worded(error, what, true)
        })
    }

    /// Hermes' keyless wording: `Keyless <Vendor> <what> failed: <detail>. Set <ENV> (<site>)
    /// [or another web backend via `hermes tools`] for reliable service.`
    fn worded(&self, mut error: VendorError, what: &str, whole_call: bool) -> VendorError {
        let detail = error
            .message
            .strip_prefix(&format!("{what}: "))
            .unwrap_or(&error.message)
            .to_string();
        let env = self.kind.key_env().unwrap_or_default();
        let site = match self.kind {
            BackendKind::Exa => "exa.ai",
            BackendKind::Parallel => "parallel.ai",
            BackendKind::Firecrawl => "firecrawl.dev",
            _ => "keenable.ai",
        };
        let other = if whole_call {
            " or another web backend via `hermes tools`"
        } else {
            ""
        };
        error.message = format!(
            "Keyless {} {what} failed: {detail}. Set {env} ({site}){other} for reliable service.",
            self.kind.display_name()
        );
        error
    }
}

impl super::page::FetchOne for KeylessClient {
    async fn fetch_one(&self, url: &str) -> Result<Page, VendorError> {
        match &self.route {
            KeylessRoute::Mcp(http) => {
                let args = json!({ "urls": [url] });
                let text = self.tool(http, "web_fetch_exa", args, "extract").await;
                let text = text.map_err(|mut e| {
                    // A per-URL failure names the key, not another backend.
                    e.message = e
                        .message
                        .replace(" or another web backend via `hermes tools`", "");
                    e
                })?;
                Ok(Page::from_vendor(url.to_string(), exa_title(&text), text))
            }
            KeylessRoute::Firecrawl(http) => {
                let body = json!({ "url": url.trim(), "formats": ["markdown"] });
                let bytes = http
                    .post_json("/v2/scrape", &[], &body)
                    .await
                    .map_err(|e| {
                        self.worded(
                            VendorError::from_call(self.name(), "extract", &e),
                            "extract",
                            false,
                        )
                    })?;
                let answer = client::parse_json(&bytes).map_err(|e| {
                    self.worded(VendorError::bad_response(self.name(), e), "extract", false)
                })?;
                if answer.get("success").and_then(Value::as_bool) == Some(false) {
                    let reason = firecrawl::vendor_error_text(&answer);
                    return Err(self.worded(
                        VendorError::new(self.name(), VendorErrorKind::PageFailed, reason),
                        "extract",
                        false,
                    ));
                }
                Ok(firecrawl::page(url, &answer))
            }
            KeylessRoute::Keenable(k) => super::page::FetchOne::fetch_one(k, url).await,
        }
    }
}

/// Exa's keyless search text: blocks split by `\n---\n`, each with `Title:`, `URL:`,
/// `Published:`, `Author:` and `Highlights:` lines; the highlight lines (the rest of the
/// block) joined by spaces are the description. A block without a URL is skipped.
fn exa_blocks(text: &str) -> Vec<RawHit> {
    let mut hits = Vec::new();
    for block in text.split("\n---\n") {
        let mut hit = RawHit::default();
        let mut highlights: Vec<&str> = Vec::new();
        let mut in_highlights = false;
        for line in block.lines() {
            let line = line.trim();
            if let Some(v) = line.strip_prefix("Title:") {
                hit.title = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("URL:") {
                hit.url = v.trim().to_string();
            } else if line.starts_with("Published:") || line.starts_with("Author:") {
            } else if let Some(v) = line.strip_prefix("Highlights:") {
                in_highlights = true;
                highlights.extend(Some(v.trim()).filter(|v| !v.is_empty()));
            } else if in_highlights && !line.is_empty() {
                highlights.push(line);
            }
        }
        if !hit.url.is_empty() {
            hit.description = highlights.join(" ");
            hits.push(hit);
        }
    }
    hits
}

/// The title of an Exa keyless fetch: the first `# ` or `Title:` line.
fn exa_title(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix("# ").or_else(|| l.strip_prefix("Title:")))
        .map(|t| t.trim().to_string())
        .unwrap_or_default()
}

/// Parallel's keyless search text: JSON `{"results": [{url, title, excerpts[]}]}`.
fn parallel_search_rows(text: &str) -> Result<Vec<RawHit>, String> {
    let answer: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let results = answer
        .get("results")
        .and_then(Value::as_array)
        .ok_or("no results list")?;
    Ok(results
        .iter()
        .map(|r| RawHit {
            title: search::text(r.get("title")),
            url: search::text(r.get("url")),
            description: search::joined(r.get("excerpts"), " "),
        })
        .collect())
}

/// Parallel's keyless fetch text: the JSON of its keyed extract answer.
fn parallel_extract_rows(text: &str) -> Result<UrlRows, String> {
    let answer: Value =
        serde_json::from_str(text).map_err(|e| format!("unexpected payload: {e}"))?;
    if !answer.is_object() {
        return Err("unexpected payload: not an object".into());
    }
    Ok(super::parallel::extract_rows(&answer))
}

/// Where a walk of the ring starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Start {
    /// At the cursor, which then advances (the ring serving `web.backend: keyless`).
    Cursor,
    /// Pinned at a member's ring position (the first member for a backend outside the ring).
    At(BackendKind),
    /// Pinned at a member already tried keylessly in this call, which is skipped.
    After(BackendKind),
}

/// The keyless ring.
#[derive(Clone, Debug)]
pub struct Ring {
    /// Every member in ring order, with its tier.
    members: Vec<(KeylessClient, VendorTier)>,
}

// === impl Ring ===

impl Ring {
    /// The ring with each member's `web.vendors.<name>` settings.
    pub(crate) fn new(settings: &[VendorSettings]) -> Self {
        let members = RING
            .iter()
            .filter_map(|kind| {
                let config = settings.iter().find(|s| s.name == kind.name());
                let client = KeylessClient::new(*kind, config)?;
                Some((client, config.map(|c| c.tier).unwrap_or_default()))
            })
            .collect();
        Self { members }
    }

    /// The walk from `start`; members on `tier: paid` dropped.
    pub(crate) fn order(&self, start: Start) -> Result<Vec<&KeylessClient>, VendorError> {
        let n = self.members.len().max(1);
        let position = |kind| {
            self.members
                .iter()
                .position(|(c, _)| c.kind == kind)
                .unwrap_or(0)
        };
        let (first, skip) = match start {
            Start::Cursor => (cursor().fetch_add(1, Ordering::Relaxed) % n, None),
            Start::At(kind) => (position(kind), None),
            Start::After(kind) => (position(kind), Some(kind)),
        };
        let order: Vec<&KeylessClient> = (0..self.members.len())
            .map(|i| &self.members[(first + i) % n])
            .filter(|(c, tier)| *tier != VendorTier::Paid && Some(c.kind) != skip)
            .map(|(c, _)| c)
            .collect();
        if order.is_empty() {
            return Err(VendorError::not_configured("keyless", PINNED_PAID));
        }
        Ok(order)
    }

    /// Search along the walk; the member that served, or the last error (with the exhaustion
    /// marker when every member failed over).
    pub(crate) async fn search(
        &self,
        start: Start,
        query: &str,
        limit: usize,
    ) -> Result<Searched, VendorFailure> {
        let order = self.order(start).map_err(VendorFailure::Vendor)?;
        let mut last = None;
        for (i, member) in order.iter().enumerate() {
            match member.search(query, limit).await {
                Ok(hits) => {
                    return Ok(Searched {
                        hits,
                        served_by: member.kind,
                    });
                }
                Err(e) if search_fails_over(&e) => {
                    if let Some(next) = order.get(i + 1) {
                        tracing::info!(
                            "keyless {} search unavailable; failing over to {}",
                            member.name(),
                            next.name()
                        );
                    }
                    last = Some(e);
                }
                Err(e) => return Err(VendorFailure::Vendor(e)),
            }
        }
        let mut error = last.unwrap_or_else(|| VendorError::not_configured("keyless", PINNED_PAID));
        error.message = exhausted(&error.message, &order);
        Err(VendorFailure::Vendor(error))
    }

    /// Extract along the walk; moves on only when every row is rate-limit-ish. Pages carry
    /// the member that served them in [`Page::via`].
    pub(crate) async fn extract(
        &self,
        start: Start,
        urls: &[String],
    ) -> Vec<Result<Page, VendorFailure>> {
        let order = match self.order(start) {
            Ok(order) => order,
            Err(e) => return fail_all(urls, e),
        };
        let mut rows = Vec::new();
        for (i, member) in order.iter().enumerate() {
            rows = member.extract(urls).await;
            if !extract_fails_over(&rows) {
                for page in rows.iter_mut().flatten() {
                    page.via = Some(member.kind);
                }
                return rows;
            }
            if let Some(next) = order.get(i + 1) {
                tracing::info!(
                    "keyless {} extract unavailable; failing over to {}",
                    member.name(),
                    next.name()
                );
            }
        }
        for row in &mut rows {
            if let Err(VendorFailure::Vendor(e)) = row {
                e.message = exhausted(&e.message, &order);
            }
        }
        rows
    }
}

/// `error (all keyless vendors unavailable: exa, parallel, ...)`.
fn exhausted(error: &str, order: &[&KeylessClient]) -> String {
    let names: Vec<&str> = order.iter().map(|c| c.name()).collect();
    format!("{error} ({EXHAUSTED}: {})", names.join(", "))
}

#[cfg(test)]
mod tests;
