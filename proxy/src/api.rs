//! Listeners: binding, the hyper HTTP/1 connection loop, graceful shutdown, and the api
//! listener's routes (`POST /v1/extract`).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prometheus::Registry;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::accept::Acceptor;
use crate::base::shards::Shards;
use crate::egress::forward::refusal::ProxyRefusal;
use crate::egress::relay::h1::MAX_HEAD;
use crate::egress::relay::limits::TunnelCap;
use crate::judge::metrics::ProxyMetrics;
use crate::judge::request_body::{BodyBudget, BodyHold, BodyLimits};
use crate::judge::respond::{self, ApiError, Body};
use crate::judge::telemetry::decision::DecisionLine;
use crate::live::runtime::Runtime;
use crate::live::state::GateState;
use crate::web::pipeline::{ExtractOutcome, Pipeline};
use crate::web::vendors::html::Scope as ContentScope;

/// Largest request body the api listener reads.
pub(crate) const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// The most JSON values a request body may hold. A megabyte of `[0,0,…]` is half a million
/// values and some 50 MB as a tree; the budget lets about a hundred such bodies in at once, so
/// the values are counted ([`count_values`](crate::web::vendors::client::answer_json::count_values))
/// before the tree is built. The largest real request (an extract of a few dozen URLs with
/// its options) holds some hundreds.
pub(crate) const MAX_REQUEST_VALUES: usize = 20_000;

/// The api and admin listeners' state: the gate's, and each feature's own beside it.
#[derive(Debug)]
pub struct Shared {
    /// The runtime, the gate metrics, the bound listeners: what every listener reads.
    pub gate: Arc<GateState>,
    /// Fleet report gauges (cost per day per cron job, flagged jobs).
    pub(crate) report_gauges: crate::report_gauges::ReportGauges,
    /// The cron cost figures kept between `/v1/report` calls.
    pub(crate) report_cache: crate::report::CostCache,
    /// The registry `/metrics` renders.
    pub(crate) registry: Registry,
    /// Watches: per-watch locks and metrics.
    pub(crate) watches: crate::watch::Watches,
    /// The LLM route's observations, metrics and upstream pool.
    pub(crate) llm: Arc<crate::llm::LlmState>,
}

// === impl Shared ===

impl Shared {
    /// Shared state around a first runtime, every metric registered in one registry.
    pub fn new(runtime: Arc<Runtime>) -> prometheus::Result<Arc<Self>> {
        let registry = Registry::new();
        let metrics = ProxyMetrics::register(&registry)?;
        let report_gauges = crate::report_gauges::ReportGauges::register(&registry)?;
        let watches = crate::watch::Watches::register(&registry)?;
        let llm_policy = &runtime.policy.llm;
        let spend_path = llm_policy
            .spend_file
            .clone()
            .unwrap_or_else(|| runtime.policy.store.root.join("llm").join("spend.json"));
        let (spend, _) =
            crate::llm::spend::SpendLedger::open(&spend_path, crate::base::clock::now_secs());
        let llm = crate::llm::LlmState::register(&registry, spend)?;
        Ok(Arc::new(Self {
            gate: Arc::new(GateState::new(runtime, metrics)),
            report_gauges,
            report_cache: crate::report::CostCache::new(),
            registry,
            watches,
            llm: Arc::new(llm),
        }))
    }

    /// What the LLM route reads.
    pub(crate) fn llm_context(&self) -> crate::llm::LlmContext {
        crate::llm::LlmContext {
            gate: Arc::clone(&self.gate),
            llm: Arc::clone(&self.llm),
        }
    }
}

/// The address of the client that sent a request, set by [`serve_http`] on every request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ClientAddr(pub SocketAddr);

/// The client of `req`, when it came through [`serve_http`].
pub(crate) fn client_of<B>(req: &Request<B>) -> Option<SocketAddr> {
    req.extensions().get::<ClientAddr>().map(|c| c.0)
}

/// Default concurrent connections on the api listener.
pub(crate) const DEFAULT_API_MAX_CONNECTIONS: usize = 1024;
/// Default concurrent connections on the admin listener (probes and scrapes).
pub(crate) const DEFAULT_ADMIN_MAX_CONNECTIONS: usize = 256;

/// The bounds of one HTTP listener (api, admin): the connection cap and its request bodies'
/// deadlines and budget. The head is bounded as on the egress listeners: at most
/// [`MAX_HEAD`] bytes, within the egress header timeout (`egress.timeouts.headerSeconds`,
/// else `fetch.headerTimeoutMs`), read per connection so a reload applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ListenerLimits {
    /// The `listener` label of its metrics and decision lines.
    pub(crate) name: &'static str,
    /// Concurrent connections; past it a new one gets `503 too_many_connections` and is closed.
    pub(crate) max_connections: usize,
    /// Request bodies' deadlines and the listener's budget for them.
    pub(crate) bodies: BodyLimits,
}

// === impl ListenerLimits ===

impl ListenerLimits {
    /// The api listener's defaults.
    pub(crate) fn api() -> Self {
        Self {
            name: "api",
            max_connections: DEFAULT_API_MAX_CONNECTIONS,
            bodies: BodyLimits::default(),
        }
    }

    /// The admin listener's defaults.
    pub(crate) fn admin() -> Self {
        Self {
            name: "admin",
            max_connections: DEFAULT_ADMIN_MAX_CONNECTIONS,
            bodies: BodyLimits::default(),
        }
    }
}

/// Accept HTTP/1 connections on `listener` until `shutdown` flips, serving `handler`, each
/// connection on the least loaded of `shards`, under `limits`: at most
/// `limits.max_connections` at once (the next one is answered `503 too_many_connections`
/// with a decision line and closed), each request head at most [`MAX_HEAD`] bytes (`431`
/// past it) within the header timeout, and every request body under the listener's
/// [`BodyBudget`].
pub(crate) async fn serve_http<H, F, B>(
    listener: TcpListener,
    mut acceptor: Acceptor,
    handler: H,
    mut shutdown: watch::Receiver<bool>,
    shards: Arc<Shards>,
    gate: Arc<GateState>,
    limits: ListenerLimits,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let open = TunnelCap::default();
    let bodies = BodyBudget::new(limits.name, limits.bodies);
    let accepted_total = gate
        .metrics
        .listener_connections
        .with_label_values(&[limits.name]);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = acceptor.accept(&listener) => accepted,
            _ = shutdown.changed() => break,
        };
        accepted_total.inc();
        let Some(permit) = open.try_acquire(limits.max_connections) else {
            tokio::spawn(refuse_connection(stream, peer, limits));
            continue;
        };
        let _ = stream.set_nodelay(true);
        let header_timeout = crate::egress::relay::limits::Limits::default()
            .effective(&gate.runtime.load().policy)
            .header;
        let handler = handler.clone();
        let bodies = bodies.clone();
        let mut conn_shutdown = shutdown.clone();
        shards.spawn(stream, move |stream| async move {
            let _permit = permit;
            let service = service_fn(move |mut req: Request<Incoming>| {
                req.extensions_mut().insert(ClientAddr(peer));
                req.extensions_mut().insert(bodies.for_client(peer));
                let handler = handler.clone();
                async move { Ok::<_, Infallible>(handler(req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(header_timeout)
                .max_buf_size(MAX_HEAD)
                .max_header_size(MAX_HEAD)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                res = conn.as_mut() => {
                    if let Err(e) = res {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                }
                _ = conn_shutdown.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
}

/// Answer a connection past the cap with `503 too_many_connections` (`Retry-After: 1`) and
/// close it without reading its request: one decision line.
async fn refuse_connection(mut stream: TcpStream, peer: SocketAddr, limits: ListenerLimits) {
    use tokio::io::AsyncWriteExt;
    let refusal = ProxyRefusal::TooManyConnections {
        limit: limits.max_connections,
    };
    DecisionLine {
        listener: limits.name,
        proxy_type: "unknown",
        method: None,
        gate: refusal.gate(),
        verdict: refusal.verdict(),
        reason: refusal.code(),
        url: &"",
        client: Some(peer),
        vendor: None,
        upstream: None,
        upstream_status: None,
        request_bytes: None,
        cache: "bypass",
        original_dst: None,
        started: Instant::now(),
    }
    .write();
    let write = refusal.write_to(&mut stream, true);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), write).await;
    let _ = stream.shutdown().await;
}

/// The api listener: the LLM route (`/llm/...`, streamed) or the web routes of [`api`].
pub(crate) async fn api_or_llm(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Response<crate::llm::LlmBody> {
    if req.uri().path().starts_with(crate::llm::PREFIX) {
        return crate::llm::handle(shared.llm_context(), req).await;
    }
    api(shared, req)
        .await
        .map(|b| b.map_err(|never| match never {}).boxed())
}

/// A route of the api listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ApiRoute {
    /// `POST /v1/extract`.
    Extract,
    /// `POST /v2/scrape`, `/v1/scrape`.
    FirecrawlScrape,
    /// `POST /tavily/extract`.
    TavilyExtract,
    /// `POST /v1/search`, `/v2/search`, `/tavily/search`, in their shapes.
    Search(crate::web::vendor_fronts::search::SearchShape),
    /// `GET /searxng/search`.
    SearxngSearch,
    /// `GET|POST /v1/watch/<name>`.
    Watch,
    /// A known path with the wrong method.
    MethodNotAllowed,
    /// Anything else.
    NotFound,
}

// === impl ApiRoute ===

impl ApiRoute {
    fn of(method: &Method, path: &str) -> Self {
        use crate::web::vendor_fronts::search::SearchShape;
        match (method, path) {
            (&Method::POST, "/v1/extract") => Self::Extract,
            (&Method::POST, "/v2/scrape" | "/v1/scrape") => Self::FirecrawlScrape,
            (&Method::POST, "/tavily/extract") => Self::TavilyExtract,
            (&Method::POST, "/v1/search") => Self::Search(SearchShape::Native),
            (&Method::POST, "/v2/search") => Self::Search(SearchShape::FirecrawlV2),
            (&Method::POST, "/tavily/search") => Self::Search(SearchShape::Tavily),
            (&Method::GET, "/searxng/search") => Self::SearxngSearch,
            (&Method::GET | &Method::POST, p) if p.starts_with(crate::watch::route::PREFIX) => {
                Self::Watch
            }
            (
                _,
                "/v1/extract" | "/v2/scrape" | "/v1/scrape" | "/tavily/extract" | "/v1/search"
                | "/v2/search" | "/tavily/search" | "/searxng/search",
            ) => Self::MethodNotAllowed,
            _ => Self::NotFound,
        }
    }

    /// The `route` label of `fleetgate_http_request_duration_seconds`.
    fn label(self) -> &'static str {
        use crate::web::vendor_fronts::search::SearchShape;
        match self {
            Self::Extract => "extract",
            Self::FirecrawlScrape => "firecrawl_scrape",
            Self::TavilyExtract => "tavily_extract",
            Self::Search(SearchShape::Native) => "search",
            Self::Search(SearchShape::FirecrawlV2) => "firecrawl_search",
            Self::Search(SearchShape::Tavily) => "tavily_search",
            Self::Search(SearchShape::Searxng) | Self::SearxngSearch => "searxng_search",
            Self::Watch => "watch",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::NotFound => "not_found",
        }
    }
}

/// The api listener's router.
pub(crate) async fn api(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let started = Instant::now();
    let route = ApiRoute::of(req.method(), req.uri().path());
    let resp = match route {
        ApiRoute::Extract => extract(&shared, req).await,
        ApiRoute::FirecrawlScrape => firecrawl_scrape(&shared, req).await,
        ApiRoute::TavilyExtract => tavily_extract(&shared, req).await,
        ApiRoute::Search(shape) => search(&shared, req, shape).await,
        ApiRoute::SearxngSearch => searxng_search(&shared, req).await,
        ApiRoute::Watch => crate::watch::route::handle(&shared.gate, &shared.watches, req).await,
        ApiRoute::MethodNotAllowed => respond::api_error(&ApiError::MethodNotAllowed),
        ApiRoute::NotFound => respond::api_error(&ApiError::NotFound(req.uri().path().to_string())),
    };
    shared
        .gate
        .metrics
        .request_duration
        .with_label_values(&[route.label()])
        .observe(started.elapsed().as_secs_f64());
    resp
}

/// The extract pipeline for one client's URLs, on the gate's current runtime: what every
/// extract front (`/v1/extract`, Firecrawl's scrape, Tavily's extract) runs.
async fn run_extract(
    shared: &Shared,
    client: Option<SocketAddr>,
    urls: &Value,
    char_limit: Option<&Value>,
    scope: Option<ContentScope>,
) -> ExtractOutcome {
    let runtime = shared.gate.runtime.load_full();
    let own = shared.gate.own_listeners();
    Pipeline::new(&runtime.rules, &runtime.web, &shared.gate.metrics)
        .for_client(client)
        .with_own(&own)
        .with_scope(scope)
        .extract(urls, char_limit)
        .await
}

async fn extract(shared: &Shared, req: Request<Incoming>) -> Response<Body> {
    let client = client_of(&req);
    let (body, _hold) = match read_json(req).await {
        Ok(read) => read,
        Err(e) => return respond::api_error(&e),
    };
    let Some(urls) = body.get("urls") else {
        return respond::api_error(&ApiError::InvalidRequest(
            "the body needs a `urls` list".into(),
        ));
    };
    let scope = match body.get("only_main_content") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(only_main)) => Some(ContentScope::from_only_main(*only_main)),
        Some(_) => {
            return respond::api_error(&ApiError::InvalidRequest(
                "`only_main_content` must be true or false".into(),
            ));
        }
    };
    match run_extract(shared, client, urls, body.get("char_limit"), scope).await {
        ExtractOutcome::Refused(reason) => respond::extract_refusal(&reason),
        ExtractOutcome::Rows(rows) if rows.is_empty() => respond::json(
            StatusCode::OK,
            &json!({"error": "Content was inaccessible or not found"}),
        ),
        ExtractOutcome::Rows(rows) => {
            let body = crate::web::pipeline::Results { results: &rows };
            respond::json_bytes(StatusCode::OK, body.to_json())
        }
    }
}

async fn firecrawl_scrape(shared: &Shared, req: Request<Incoming>) -> Response<Body> {
    let client = client_of(&req);
    let parsed = read_json(req).await.and_then(|(body, hold)| {
        crate::web::vendor_fronts::firecrawl::parse_scrape(&body).map(|p| (p, hold))
    });
    let ((urls, limit, scope), _hold) = match parsed {
        Ok(v) => v,
        Err(e) => return respond::api_error(&e),
    };
    let outcome = run_extract(shared, client, &urls, limit.as_ref(), scope).await;
    crate::web::vendor_fronts::firecrawl::scrape_response(outcome)
}

async fn tavily_extract(shared: &Shared, req: Request<Incoming>) -> Response<Body> {
    let client = client_of(&req);
    let ((urls, scope), _hold) = match read_json(req).await.and_then(|(b, hold)| {
        crate::web::vendor_fronts::tavily::parse_extract(&b).map(|u| (u, hold))
    }) {
        Ok(v) => v,
        Err(e) => return respond::api_error(&e),
    };
    let outcome = run_extract(shared, client, &urls, None, scope).await;
    crate::web::vendor_fronts::tavily::extract_response(outcome)
}

async fn search(
    shared: &Shared,
    req: Request<Incoming>,
    shape: crate::web::vendor_fronts::search::SearchShape,
) -> Response<Body> {
    let ((query, limit), _hold) = match read_json(req)
        .await
        .and_then(|(b, hold)| crate::web::vendor_fronts::search::parse_body(&b).map(|q| (q, hold)))
    {
        Ok(v) => v,
        Err(e) => return respond::api_error(&e),
    };
    let runtime = shared.gate.runtime.load_full();
    let outcome = Pipeline::new(&runtime.rules, &runtime.web, &shared.gate.metrics)
        .search(&query, limit.as_ref())
        .await;
    crate::web::vendor_fronts::search::respond(shape, &query, outcome)
}

async fn searxng_search(shared: &Shared, req: Request<Incoming>) -> Response<Body> {
    let query = match crate::web::vendor_fronts::search::parse_searxng_query(req.uri().query()) {
        Ok(q) => q,
        Err(e) => return respond::api_error(&e),
    };
    let runtime = shared.gate.runtime.load_full();
    // SearXNG has no limit parameter; Hermes cuts the rows itself, so serve a full bucket.
    let limit = Value::from(crate::web::cache::memo::bucket(20));
    let outcome = Pipeline::new(&runtime.rules, &runtime.web, &shared.gate.metrics)
        .search(&query, Some(&limit))
        .await;
    crate::web::vendor_fronts::search::respond(
        crate::web::vendor_fronts::search::SearchShape::Searxng,
        &query,
        outcome,
    )
}

/// Read a JSON body of at most [`MAX_REQUEST_BYTES`], under the listener's body deadlines and
/// budget; the hold keeps the body's room taken until the caller drops it (when the request
/// is answered).
pub(crate) async fn read_json(req: Request<Incoming>) -> Result<(Value, BodyHold), ApiError> {
    let (parts, body) = req.into_parts();
    let (bytes, hold) =
        crate::judge::request_body::read_for(&parts, body, MAX_REQUEST_BYTES, "api").await?;
    let invalid = |e: String| ApiError::InvalidRequest(format!("the body is not valid JSON: {e}"));
    crate::web::vendors::client::answer_json::count_values(&bytes, MAX_REQUEST_VALUES).map_err(
        |e| match e.starts_with("more than") {
            true => ApiError::InvalidRequest(format!("the body holds {e}")),
            false => invalid(e),
        },
    )?;
    let value = serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
    Ok((value, hold))
}
