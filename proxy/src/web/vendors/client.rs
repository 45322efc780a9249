//! The shared HTTP client every vendor backend speaks through.
//!
//! One place owns the rules for talking to a vendor API: a per-attempt timeout that covers
//! the body too, bounded retries with exponential backoff on 5xx, timeouts and connection
//! errors (never on other 4xx; 429 only when the vendor says when to come back), a body cap
//! enforced while the body streams, and errors classified by source. TLS is rustls with the
//! ring provider and the bundled web PKI roots; no environment proxy, no redirects. A client
//! can be pinned to addresses a gate checked ([`HttpClient::pinned`]): it then never looks its
//! host up. The MCP client ([`super::mcp`]) speaks through this client too.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use url::Url;

pub(crate) mod answer_json;

/// Backoff before the first retry; doubled for each later one.
const BACKOFF_BASE: Duration = Duration::from_millis(200);
/// Longest backoff between two attempts.
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// A 429 is retried only when its `Retry-After` is at most this long.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
/// Characters of a vendor's error body kept in error messages.
pub(crate) const EXCERPT_CHARS: usize = 300;
/// Bytes read from an error response to build the excerpt.
const ERROR_BODY_READ: usize = 4096;
/// The `User-Agent` of every vendor call.
const USER_AGENT: &str = concat!("fleetgate/", env!("CARGO_PKG_VERSION"));

/// Where and how to call one vendor API; built by the pipeline from policy and secrets.
#[derive(Clone)]
pub struct Endpoint {
    /// The API base URL; request paths are appended to its path.
    pub base_url: Url,
    /// The credential, if any (empty or blank counts as none).
    pub api_key: Option<String>,
    /// Limit for one attempt, body included.
    pub timeout: Duration,
    /// Largest decoded response body accepted, in bytes.
    pub max_body_bytes: u64,
    /// Extra attempts after a retryable failure.
    pub retries: u32,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("base_url", &self.base_url.as_str())
            .field("api_key", &self.key().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("retries", &self.retries)
            .finish()
    }
}

// === impl Endpoint ===

impl Endpoint {
    /// Default attempt timeout: 60 s.
    pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
    /// Default body cap: 32 MiB.
    pub(crate) const DEFAULT_MAX_BODY_BYTES: u64 = 32 * 1024 * 1024;
    /// Default extra attempts: 2.
    pub(crate) const DEFAULT_RETRIES: u32 = 2;

    /// An endpoint at `base_url` with no key and the default limits.
    pub fn new(base_url: Url) -> Self {
        Self {
            base_url,
            api_key: None,
            timeout: Self::DEFAULT_TIMEOUT,
            max_body_bytes: Self::DEFAULT_MAX_BODY_BYTES,
            retries: Self::DEFAULT_RETRIES,
        }
    }

    /// The same endpoint carrying `key`.
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// The credential, trimmed; `None` when absent or blank.
    pub(crate) fn key(&self) -> Option<&str> {
        self.api_key
            .as_deref()
            .map(str::trim)
            .filter(|k| !k.is_empty())
    }

    /// `base_url` with `path` appended to its path (a base path prefix is kept); an empty
    /// `path` is the base URL itself (an MCP endpoint).
    pub(crate) fn url(&self, path: &str) -> Url {
        let mut url = self.base_url.clone();
        url.set_query(None);
        url.set_fragment(None);
        if path.is_empty() {
            return url;
        }
        let joined = format!(
            "{}/{}",
            url.path().trim_end_matches('/'),
            path.trim_start_matches('/')
        );
        url.set_path(&joined);
        url
    }
}

/// Who caused a failure: the upstream (vendor API or origin site) or the gate itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureSource {
    /// The vendor or origin refused, failed, was slow or answered something unusable.
    Vendor,
    /// The gate's own configuration or request: a missing key, a missing capability.
    Gate,
}

/// What went wrong in a call to a vendor API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VendorErrorKind {
    /// The backend lacks its credential or base URL.
    NotConfigured,
    /// The backend does not have the capability asked for.
    Unsupported,
    /// The vendor could not be reached (DNS, connect, TLS, reset).
    Unreachable,
    /// An attempt exceeded the endpoint timeout.
    Timeout,
    /// The vendor answered with an error status.
    HttpStatus,
    /// The vendor answered 429.
    RateLimited,
    /// The answer was not the JSON the vendor documents, or an error envelope.
    BadResponse,
    /// The answer exceeded the endpoint body cap.
    BodyTooLarge,
    /// The vendor reported that it could not fetch this one URL.
    PageFailed,
}

// === impl VendorErrorKind ===

impl VendorErrorKind {
    /// Every kind, for code tables and tests.
    pub const ALL: [Self; 9] = [
        Self::NotConfigured,
        Self::Unsupported,
        Self::Unreachable,
        Self::Timeout,
        Self::HttpStatus,
        Self::RateLimited,
        Self::BadResponse,
        Self::BodyTooLarge,
        Self::PageFailed,
    ];

    /// Stable snake_case code.
    pub fn code(self) -> &'static str {
        match self {
            Self::NotConfigured => "vendor_not_configured",
            Self::Unsupported => "vendor_capability_missing",
            Self::Unreachable => "vendor_unreachable",
            Self::Timeout => "vendor_timeout",
            Self::HttpStatus => "vendor_http_status",
            Self::RateLimited => "vendor_rate_limited",
            Self::BadResponse => "vendor_bad_response",
            Self::BodyTooLarge => "vendor_body_too_large",
            Self::PageFailed => "vendor_page_failed",
        }
    }

    /// Who caused a failure of this kind.
    pub fn source(self) -> FailureSource {
        match self {
            Self::NotConfigured | Self::Unsupported => FailureSource::Gate,
            _ => FailureSource::Vendor,
        }
    }
}

/// A failed vendor call, with the message the agent sees.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct VendorError {
    /// Backend policy name (`tavily`, `brave-free`, ...).
    pub(crate) backend: &'static str,
    /// What went wrong.
    pub kind: VendorErrorKind,
    /// The vendor's HTTP status, when it answered with one.
    pub status: Option<u16>,
    /// The message, in the vendor's wording where Hermes has one.
    pub message: String,
}

// === impl VendorError ===

impl VendorError {
    /// A failure of `kind` for `backend`.
    pub fn new(backend: &'static str, kind: VendorErrorKind, message: impl Into<String>) -> Self {
        Self {
            backend,
            kind,
            status: None,
            message: message.into(),
        }
    }

    /// The backend named lacks its credential or base URL.
    pub(crate) fn not_configured(backend: &'static str, message: impl Into<String>) -> Self {
        Self::new(backend, VendorErrorKind::NotConfigured, message)
    }

    /// Classify a transport-level failure; `what` prefixes the detail, e.g. `Tavily search failed`.
    pub(crate) fn from_call(backend: &'static str, what: &str, err: &CallError) -> Self {
        Self {
            backend,
            kind: err.kind(),
            status: err.status(),
            message: format!("{what}: {}", err.detail()),
        }
    }

    /// The vendor answered 2xx with a body we cannot use.
    pub(crate) fn bad_response(backend: &'static str, message: impl Into<String>) -> Self {
        Self::new(backend, VendorErrorKind::BadResponse, message)
    }
}

/// How one HTTP exchange with a vendor failed, before a backend words it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CallError {
    /// A non-2xx status, with a bounded excerpt of the body.
    Status {
        status: u16,
        excerpt: String,
        retry_after: Option<Duration>,
    },
    /// The attempt timeout elapsed.
    Timeout(Duration),
    /// DNS, connect, TLS or a broken connection.
    Transport { detail: String, retryable: bool },
    /// The body passed the cap while streaming.
    TooLarge(u64),
    /// The gate could not build or send the request at all.
    Request(String),
}

// === impl CallError ===

impl CallError {
    pub(crate) fn kind(&self) -> VendorErrorKind {
        match self {
            Self::Status { status: 429, .. } => VendorErrorKind::RateLimited,
            Self::Status { .. } => VendorErrorKind::HttpStatus,
            Self::Timeout(_) => VendorErrorKind::Timeout,
            Self::Transport { .. } | Self::Request(_) => VendorErrorKind::Unreachable,
            Self::TooLarge(_) => VendorErrorKind::BodyTooLarge,
        }
    }

    pub(crate) fn status(&self) -> Option<u16> {
        match self {
            Self::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The failure in words, without a vendor prefix.
    pub(crate) fn detail(&self) -> String {
        match self {
            Self::Status {
                status, excerpt, ..
            } if excerpt.is_empty() => format!("HTTP {status}"),
            Self::Status {
                status, excerpt, ..
            } => format!("HTTP {status}: {excerpt}"),
            Self::Timeout(limit) => format!("timed out after {}", seconds(*limit)),
            Self::Transport { detail, .. } | Self::Request(detail) => detail.clone(),
            Self::TooLarge(limit) => {
                format!("the response is larger than the {limit}-byte limit")
            }
        }
    }
}

/// Parse a vendor's JSON answer; the error reads "invalid JSON in the response: ...". The
/// values are counted first ([`answer_json`]): an answer of more than
/// [`answer_json::MAX_ANSWER_VALUES`] is refused before a tree of it is built.
pub(crate) fn parse_json(bytes: &[u8]) -> Result<serde_json::Value, String> {
    answer_json::count_values(bytes, answer_json::MAX_ANSWER_VALUES).map_err(|e| {
        let holds = if e.starts_with("more than") {
            "the answer holds "
        } else {
            ""
        };
        format!("invalid JSON in the response: {holds}{e}")
    })?;
    serde_json::from_slice(bytes).map_err(|e| format!("invalid JSON in the response: {e}"))
}

/// A duration as Hermes words timeouts: whole seconds, or milliseconds below one second.
pub(crate) fn seconds(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// At most [`EXCERPT_CHARS`] characters of an error body, lossily decoded and trimmed.
pub(crate) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    text.trim().chars().take(EXCERPT_CHARS).collect()
}

/// A 2xx answer: its headers and its (decoded) body.
#[derive(Clone, Debug)]
pub(crate) struct Answer {
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: Bytes,
}

/// Whether a body read so far holds what the caller waits for, given the body and the length
/// it had before the last chunk; `true` ends the read there (an event stream a server keeps
/// open after its answer).
pub(crate) type Enough<'a> = &'a (dyn Fn(&[u8], usize) -> bool + Sync);

/// Reads every body to its end.
fn to_the_end(_: &[u8], _: usize) -> bool {
    false
}

/// The HTTP client of one vendor endpoint.
#[derive(Clone, Debug)]
pub(crate) struct HttpClient {
    http: Result<reqwest::Client, String>,
    endpoint: Endpoint,
}

// === impl HttpClient ===

impl HttpClient {
    pub(crate) fn new(endpoint: Endpoint) -> Self {
        Self {
            http: build_client(&endpoint, None),
            endpoint,
        }
    }

    /// A client whose connections to `host` go only to `addrs` (the addresses a gate checked),
    /// with no lookup of its own.
    pub(crate) fn pinned(endpoint: Endpoint, host: &str, addrs: &[SocketAddr]) -> Self {
        Self {
            http: build_client(&endpoint, Some((host, addrs))),
            endpoint,
        }
    }

    pub(crate) fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// POST `body` as JSON to `path`; the 2xx body, or why not.
    pub(crate) async fn post_json(
        &self,
        path: &str,
        headers: &[(&str, String)],
        body: &serde_json::Value,
    ) -> Result<Bytes, CallError> {
        let url = self.endpoint.url(path);
        let answer = self.post_json_to(&url, headers, body, &to_the_end).await?;
        Ok(answer.body)
    }

    /// POST `body` as JSON to `url` as given (its query kept); the 2xx answer, its body read
    /// until `enough` says so or to its end.
    pub(crate) async fn post_json_to(
        &self,
        url: &Url,
        headers: &[(&str, String)],
        body: &serde_json::Value,
        enough: Enough<'_>,
    ) -> Result<Answer, CallError> {
        self.send(
            |http| {
                let mut req = http.post(url.clone()).json(body);
                for (name, value) in headers {
                    req = req.header(*name, value);
                }
                req
            },
            enough,
        )
        .await
    }

    /// DELETE `url` as given; the 2xx answer (its body not waited for), or why not.
    pub(crate) async fn delete(
        &self,
        url: &Url,
        headers: &[(&str, String)],
    ) -> Result<Answer, CallError> {
        self.send(
            |http| {
                let mut req = http.delete(url.clone());
                for (name, value) in headers {
                    req = req.header(*name, value);
                }
                req
            },
            &|_, _| true,
        )
        .await
    }

    /// GET `path?query`; the 2xx body, or why not.
    pub(crate) async fn get(
        &self,
        path: &str,
        query: &[(&str, String)],
        headers: &[(&str, String)],
    ) -> Result<Bytes, CallError> {
        let mut url = self.endpoint.url(path);
        url.query_pairs_mut()
            .extend_pairs(query.iter().map(|(k, v)| (*k, v.as_str())));
        let answer = self
            .send(
                |http| {
                    let mut req = http.get(url.clone());
                    for (name, value) in headers {
                        req = req.header(*name, value);
                    }
                    req
                },
                &to_the_end,
            )
            .await?;
        Ok(answer.body)
    }

    /// POST JSON and parse the JSON answer; failures worded as `{what}: {detail}`.
    pub(crate) async fn post_for_json(
        &self,
        backend: &'static str,
        what: &str,
        path: &str,
        headers: &[(&str, String)],
        body: &serde_json::Value,
    ) -> Result<serde_json::Value, VendorError> {
        let bytes = self
            .post_json(path, headers, body)
            .await
            .map_err(|e| VendorError::from_call(backend, what, &e))?;
        parse_json(&bytes).map_err(|e| VendorError::bad_response(backend, format!("{what}: {e}")))
    }

    async fn send<F>(&self, build: F, enough: Enough<'_>) -> Result<Answer, CallError>
    where
        F: Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    {
        let http = self
            .http
            .as_ref()
            .map_err(|e| CallError::Request(e.clone()))?;
        let limit = self.endpoint.timeout;
        let cap = self.endpoint.max_body_bytes;
        with_retries(self.endpoint.retries, || {
            let request = build(http);
            async move {
                match tokio::time::timeout(limit, exchange(request, cap, enough)).await {
                    Ok(result) => result,
                    Err(_) => Err(CallError::Timeout(limit)),
                }
            }
        })
        .await
    }
}

fn build_client(
    endpoint: &Endpoint,
    pin: Option<(&str, &[SocketAddr])>,
) -> Result<reqwest::Client, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("failed to configure TLS: {e}"))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let mut builder = reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .user_agent(USER_AGENT)
        // Vendor calls go straight to the vendor: the gate is the egress control itself.
        .no_proxy()
        // A redirecting vendor API is an error to report, not a hop to follow with our key.
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(endpoint.timeout.min(Duration::from_secs(10)));
    if let Some((host, addrs)) = pin {
        builder = builder.resolve_to_addrs(host, addrs);
    }
    builder
        .build()
        .map_err(|e| format!("failed to build the HTTP client: {}", error_chain(&e)))
}

/// Run `attempt` until it succeeds, fails for good, or `retries` extra attempts are spent.
pub(crate) async fn with_retries<T, F, Fut>(retries: u32, mut attempt: F) -> Result<T, CallError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, CallError>>,
{
    let mut done = 0;
    loop {
        let result = attempt().await;
        let delay = match &result {
            Err(err) => retry_delay(err, done, retries),
            Ok(_) => None,
        };
        match delay {
            Some(delay) => {
                tracing::debug!(attempt = done + 1, ?delay, "retrying a vendor call");
                tokio::time::sleep(delay).await;
                done += 1;
            }
            None => return result,
        }
    }
}

/// How long to wait before retrying after `err`, or `None` to give up.
pub(crate) fn retry_delay(err: &CallError, done: u32, retries: u32) -> Option<Duration> {
    if done >= retries {
        return None;
    }
    match err {
        CallError::Status { status, .. } if *status >= 500 => Some(backoff(done)),
        CallError::Status {
            status: 429,
            retry_after: Some(wait),
            ..
        } if *wait <= MAX_RETRY_AFTER => Some(*wait),
        CallError::Timeout(_) => Some(backoff(done)),
        CallError::Transport {
            retryable: true, ..
        } => Some(backoff(done)),
        _ => None,
    }
}

/// The wait before retry number `done + 1`.
pub(crate) fn backoff(done: u32) -> Duration {
    BACKOFF_BASE
        .saturating_mul(2u32.saturating_pow(done))
        .min(BACKOFF_MAX)
}

/// One attempt: send, then read a 2xx body under `cap` (until `enough`), or a bounded error
/// excerpt.
async fn exchange(
    request: reqwest::RequestBuilder,
    cap: u64,
    enough: Enough<'_>,
) -> Result<Answer, CallError> {
    let mut response = request.send().await.map_err(transport)?;
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        let retry_after = retry_after(response.headers());
        let head = read_head(&mut response, ERROR_BODY_READ).await;
        return Err(CallError::Status {
            status,
            excerpt: excerpt(&head),
            retry_after,
        });
    }
    if response.content_length().is_some_and(|len| len > cap) {
        return Err(CallError::TooLarge(cap));
    }
    let headers = std::mem::take(response.headers_mut());
    let mut body = BytesMut::new();
    while let Some(chunk) = response.chunk().await.map_err(transport)? {
        if (body.len() + chunk.len()) as u64 > cap {
            return Err(CallError::TooLarge(cap));
        }
        let before = body.len();
        body.extend_from_slice(&chunk);
        if enough(&body, before) {
            break;
        }
    }
    Ok(Answer {
        headers,
        body: body.freeze(),
    })
}

/// Up to `limit` bytes of a body; a read error just ends it.
async fn read_head(response: &mut reqwest::Response, limit: usize) -> Vec<u8> {
    let mut head = Vec::new();
    while head.len() < limit {
        match response.chunk().await {
            Ok(Some(chunk)) => head.extend_from_slice(&chunk),
            _ => break,
        }
    }
    head.truncate(limit);
    head
}

/// `Retry-After` in delta-seconds; HTTP dates are not honoured.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

fn transport(err: reqwest::Error) -> CallError {
    let err = err.without_url();
    if err.is_timeout() {
        // reqwest's own connect timeout; the attempt timeout is enforced outside.
        return CallError::Transport {
            detail: error_chain(&err),
            retryable: true,
        };
    }
    CallError::Transport {
        retryable: !(err.is_decode() || err.is_builder() || err.is_redirect()),
        detail: error_chain(&err),
    }
}

/// An error and its sources, joined by `: `.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests;
