//! Listeners: binding, the hyper HTTP/1 connection loop, graceful shutdown, and the api
//! listener's routes (`POST /v1/extract`).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prometheus::Registry;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::accept::Acceptor;
use crate::metrics::ProxyMetrics;
use crate::pipeline::{ExtractOutcome, Pipeline};
use crate::respond::{self, ApiError, Body};
use crate::runtime::Runtime;
use crate::shards::Shards;
use crate::state::GateState;
use crate::vendors::html::Scope as ContentScope;

/// Largest request body the api listener reads.
pub const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// The api and admin listeners' state: the gate's, and each feature's own beside it.
#[derive(Debug)]
pub struct Shared {
    /// The runtime, the gate metrics, the bound listeners: what every listener reads.
    pub gate: Arc<GateState>,
    /// Fleet report gauges (cost per day per cron job, flagged jobs).
    pub report_gauges: crate::report_gauges::ReportGauges,
    /// The cron cost figures kept between `/v1/report` calls.
    pub report_cache: crate::report::CostCache,
    /// The registry `/metrics` renders.
    pub registry: Registry,
    /// Watches: per-watch locks and metrics.
    pub watches: crate::watch::Watches,
    /// The LLM route's observations, metrics and upstream pool.
    pub llm: Arc<crate::llm::LlmState>,
}

// === impl Shared ===

impl Shared {
    /// Shared state around a first runtime, every metric registered in one registry.
    pub fn new(runtime: Arc<Runtime>) -> prometheus::Result<Arc<Self>> {
        let registry = Registry::new();
        let metrics = ProxyMetrics::register(&registry)?;
        let report_gauges = crate::report_gauges::ReportGauges::register(&registry)?;
        let watches = crate::watch::Watches::register(&registry)?;
        let llm = crate::llm::LlmState::register(&registry)?;
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
    pub fn llm_context(&self) -> crate::llm::LlmContext {
        crate::llm::LlmContext {
            gate: Arc::clone(&self.gate),
            llm: Arc::clone(&self.llm),
        }
    }
}

/// The address of the client that sent a request, set by [`serve_http`] on every request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientAddr(pub SocketAddr);

/// The client of `req`, when it came through [`serve_http`].
pub fn client_of<B>(req: &Request<B>) -> Option<SocketAddr> {
    req.extensions().get::<ClientAddr>().map(|c| c.0)
}

/// Accept HTTP/1 connections on `listener` until `shutdown` flips, serving `handler`, each
/// connection on the least loaded of `shards`.
pub async fn serve_http<H, F, B>(
    listener: TcpListener,
    mut acceptor: Acceptor,
    handler: H,
    mut shutdown: watch::Receiver<bool>,
    shards: Arc<Shards>,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    loop {
        let (stream, peer) = tokio::select! {
            accepted = acceptor.accept(&listener) => accepted,
            _ = shutdown.changed() => break,
        };
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        let mut conn_shutdown = shutdown.clone();
        shards.spawn(stream, move |stream| async move {
            let service = service_fn(move |mut req: Request<Incoming>| {
                req.extensions_mut().insert(ClientAddr(peer));
                let handler = handler.clone();
                async move { Ok::<_, Infallible>(handler(req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(std::time::Duration::from_secs(30))
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

/// The api listener: the LLM route (`/llm/...`, streamed) or the web routes of [`api`].
pub async fn api_or_llm(
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
    Search(crate::vendor_fronts::search::SearchShape),
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
        use crate::vendor_fronts::search::SearchShape;
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
        use crate::vendor_fronts::search::SearchShape;
        match self {
            Self::Extract => "extract",
            Self::FirecrawlScrape => "firecrawl_scrape",
            Self::TavilyExtract => "tavily_extract",
            Self::Search(SearchShape::Native) => "search",
            Self::Search(SearchShape::FirecrawlV2 | SearchShape::FirecrawlV1) => "firecrawl_search",
            Self::Search(SearchShape::Tavily) => "tavily_search",
            Self::Search(SearchShape::Searxng) | Self::SearxngSearch => "searxng_search",
            Self::Watch => "watch",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::NotFound => "not_found",
        }
    }
}

/// The api listener's router.
pub async fn api(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
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
    Pipeline::new(&runtime, &shared.gate.metrics)
        .for_client(client)
        .with_own(&own)
        .with_scope(scope)
        .extract(urls, char_limit)
        .await
}

async fn extract(shared: &Shared, req: Request<Incoming>) -> Response<Body> {
    let client = client_of(&req);
    let body = match read_json(req).await {
        Ok(v) => v,
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
            let body = crate::pipeline::Results { results: &rows };
            respond::json_bytes(StatusCode::OK, body.to_json())
        }
    }
}

async fn firecrawl_scrape(shared: &Shared, req: Request<Incoming>) -> Response<Body> {
    let client = client_of(&req);
    let parsed = read_json(req)
        .await
        .and_then(|body| crate::vendor_fronts::firecrawl::parse_scrape(&body));
    let (urls, limit, scope) = match parsed {
        Ok(v) => v,
        Err(e) => return respond::api_error(&e),
    };
    let outcome = run_extract(shared, client, &urls, limit.as_ref(), scope).await;
    crate::vendor_fronts::firecrawl::scrape_response(outcome)
}

async fn tavily_extract(shared: &Shared, req: Request<Incoming>) -> Response<Body> {
    let client = client_of(&req);
    let (urls, scope) = match read_json(req)
        .await
        .and_then(|b| crate::vendor_fronts::tavily::parse_extract(&b))
    {
        Ok(v) => v,
        Err(e) => return respond::api_error(&e),
    };
    let outcome = run_extract(shared, client, &urls, None, scope).await;
    crate::vendor_fronts::tavily::extract_response(outcome)
}

async fn search(
    shared: &Shared,
    req: Request<Incoming>,
    shape: crate::vendor_fronts::search::SearchShape,
) -> Response<Body> {
    let (query, limit) = match read_json(req)
        .await
        .and_then(|b| crate::vendor_fronts::search::parse_body(&b))
    {
        Ok(v) => v,
        Err(e) => return respond::api_error(&e),
    };
    let runtime = shared.gate.runtime.load_full();
    let outcome = Pipeline::new(&runtime, &shared.gate.metrics)
        .search(&query, limit.as_ref())
        .await;
    crate::vendor_fronts::search::respond(shape, &query, outcome)
}

async fn searxng_search(shared: &Shared, req: Request<Incoming>) -> Response<Body> {
    let query = match crate::vendor_fronts::search::parse_searxng_query(req.uri().query()) {
        Ok(q) => q,
        Err(e) => return respond::api_error(&e),
    };
    let runtime = shared.gate.runtime.load_full();
    // SearXNG has no limit parameter; Hermes cuts the rows itself, so serve a full bucket.
    let limit = Value::from(crate::cache::memo::bucket(20));
    let outcome = Pipeline::new(&runtime, &shared.gate.metrics)
        .search(&query, Some(&limit))
        .await;
    crate::vendor_fronts::search::respond(
        crate::vendor_fronts::search::SearchShape::Searxng,
        &query,
        outcome,
    )
}

/// Read a JSON body of at most [`MAX_REQUEST_BYTES`].
pub async fn read_json(req: Request<Incoming>) -> Result<Value, ApiError> {
    let bytes: Bytes = Limited::new(req.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await
        .map_err(|e| {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                ApiError::PayloadTooLarge(MAX_REQUEST_BYTES)
            } else {
                ApiError::InvalidRequest(format!("failed to read the body: {e}"))
            }
        })?
        .to_bytes();
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::InvalidRequest(format!("the body is not valid JSON: {e}")))
}
