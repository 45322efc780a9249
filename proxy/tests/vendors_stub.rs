//! Every vendor client against a stub of its API on loopback: the exact request each one
//! sends, how it parses a success, and how it fails on 4xx, 5xx, a hang, malformed JSON and an
//! oversized body.
// Test-only helpers below may panic with expect(), like the tests they serve.
#![cfg(test)]

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use fleetgate_proxy::web::vendors::{
    Backend, BackendKind, Endpoint, FailureSource, KeyOrder, Page, VendorError, VendorErrorKind,
    VendorFailure, check_extract_backend, check_search_backend, search_only_error,
};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::time::Instant;

const KEY: &str = "test-key-123";
const QUERY: &str = "rust lang";

// ---------------------------------------------------------------------------------------------
// The stub server.

/// What the stub answers, one entry per request (the last one repeats).
#[derive(Clone, Debug)]
enum Reply {
    /// A status, extra headers and a body.
    Body(u16, Vec<(&'static str, String)>, Bytes),
    /// Never answer.
    Hang,
    /// A 200 whose chunked body goes on for `total` bytes.
    Endless { total: usize },
}

fn json_reply(status: u16, body: &Value) -> Reply {
    Reply::Body(
        status,
        vec![("content-type", "application/json".into())],
        body.to_string().into(),
    )
}

fn text_reply(status: u16, body: &str) -> Reply {
    Reply::Body(status, vec![], Bytes::from(body.to_string()))
}

/// One request as the stub saw it.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    path: String,
    query: Option<String>,
    headers: HeaderMap,
    body: Bytes,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("the request body must be JSON")
    }
}

struct Stub {
    base: url::Url,
    seen: Arc<Mutex<Vec<Seen>>>,
    streamed: Arc<AtomicUsize>,
}

impl Stub {
    /// A stub on 127.0.0.1:0 answering `script`, with `prefix` as the base URL path.
    async fn start(prefix: &str, script: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind must work");
        let addr = listener
            .local_addr()
            .expect("a bound socket has an address");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let streamed = Arc::new(AtomicUsize::new(0));
        let state = (Arc::new(script), seen.clone(), streamed.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let state = state.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let (script, seen, streamed) = state.clone();
                        async move { Ok::<_, Infallible>(answer(req, &script, &seen, &streamed).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        let base = url::Url::parse(&format!("http://{addr}{prefix}")).expect("base must parse");
        Self {
            base,
            seen,
            streamed,
        }
    }

    fn requests(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .expect("the stub lock must not be poisoned")
            .clone()
    }

    fn endpoint(&self, timeout_ms: u64, retries: u32) -> Endpoint {
        Endpoint {
            base_url: self.base.clone(),
            api_key: Some(KEY.into()),
            timeout: Duration::from_millis(timeout_ms),
            max_body_bytes: 64 * 1024,
            retries,
        }
    }
}

async fn answer(
    req: Request<Incoming>,
    script: &[Reply],
    seen: &Mutex<Vec<Seen>>,
    streamed: &Arc<AtomicUsize>,
) -> Response<BoxBody<Bytes, Infallible>> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let index = {
        let mut seen = seen.lock().expect("the stub lock must not be poisoned");
        seen.push(Seen {
            method: parts.method.to_string(),
            path: parts.uri.path().to_string(),
            query: parts.uri.query().map(str::to_string),
            headers: parts.headers,
            body,
        });
        seen.len() - 1
    };
    let reply = script[index.min(script.len() - 1)].clone();
    match reply {
        Reply::Body(status, headers, body) => {
            let mut resp = Response::new(Full::new(body).boxed());
            *resp.status_mut() = StatusCode::from_u16(status).expect("stub status must be valid");
            for (name, value) in headers {
                resp.headers_mut()
                    .insert(name, value.parse().expect("stub header must be valid"));
            }
            resp
        }
        Reply::Hang => std::future::pending().await,
        Reply::Endless { total } => {
            let streamed = streamed.clone();
            let chunks = futures_util::stream::unfold(0usize, move |sent| {
                let streamed = streamed.clone();
                async move {
                    (sent < total).then(|| {
                        streamed.fetch_add(8192, Ordering::SeqCst);
                        (
                            Ok::<_, Infallible>(Frame::data(Bytes::from(vec![b'a'; 8192]))),
                            sent + 8192,
                        )
                    })
                }
            });
            Response::new(StreamBody::new(chunks).boxed())
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Calling a backend the way the pipeline does.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Search,
    Extract,
}

const URLS: [&str; 2] = ["https://example.com/a", "https://example.com/b"];

/// Every (backend, operation) pair a vendor client serves.
const CALLS: [(BackendKind, Op); 14] = [
    (BackendKind::Firecrawl, Op::Search),
    (BackendKind::Firecrawl, Op::Extract),
    (BackendKind::Tavily, Op::Search),
    (BackendKind::Tavily, Op::Extract),
    (BackendKind::Exa, Op::Search),
    (BackendKind::Exa, Op::Extract),
    (BackendKind::Parallel, Op::Search),
    (BackendKind::Parallel, Op::Extract),
    (BackendKind::Keenable, Op::Search),
    (BackendKind::Keenable, Op::Extract),
    (BackendKind::Perplexity, Op::Search),
    (BackendKind::Searxng, Op::Search),
    (BackendKind::BraveFree, Op::Search),
    (BackendKind::Xai, Op::Search),
];

/// The base URL path each vendor is usually configured with.
fn prefix(kind: BackendKind) -> &'static str {
    match kind {
        BackendKind::Xai => "/v1",
        BackendKind::Searxng => "/searx/",
        _ => "",
    }
}

fn backend(kind: BackendKind, endpoint: Endpoint) -> Backend {
    Backend::vendor(kind, endpoint).expect("every vendor kind must build a client")
}

/// Search rows as JSON, or extract pages; a failure shared by every URL comes back as one Err.
async fn call(kind: BackendKind, op: Op, endpoint: Endpoint) -> Result<Vec<Value>, VendorFailure> {
    let backend = backend(kind, endpoint);
    match op {
        Op::Search => backend
            .search(QUERY, 5)
            .await
            .map(|searched| searched.hits.iter().map(|h| h.to_json()).collect()),
        Op::Extract => {
            let urls: Vec<String> = URLS.iter().map(|u| u.to_string()).collect();
            let results = backend.extract(&urls).await;
            assert_eq!(results.len(), urls.len(), "one result per URL");
            if let Some(Err(first)) = results.first()
                && results.iter().all(|r| r.as_ref().err() == Some(first))
            {
                return Err(first.clone());
            }
            Ok(results.iter().map(page_json).collect())
        }
    }
}

fn page_json(result: &Result<Page, VendorFailure>) -> Value {
    match result {
        Ok(p) => json!({"url": p.url, "title": p.title, "content": p.content, "status": p.status}),
        Err(e) => json!({"error": e.to_string(), "code": e.code()}),
    }
}

fn vendor_error(failure: VendorFailure) -> VendorError {
    match failure {
        VendorFailure::Vendor(e) => e,
        other => panic!("a vendor client must fail with a vendor error, got {other:?}"),
    }
}

/// A 200 body each vendor answers a success with (firecrawl extract: every scrape).
fn success_body(kind: BackendKind, op: Op) -> Value {
    match (kind, op) {
        (BackendKind::Firecrawl, Op::Search) => json!({"success": true, "data": {"web": [
            {"url": "https://r/1", "title": "One", "description": "first", "position": 1},
            {"url": "https://r/2", "title": "Two", "description": "second", "position": 2}]}}),
        (BackendKind::Firecrawl, Op::Extract) => json!({"success": true, "data": {
            "markdown": "# Page\n\nbody", "html": "<h1>Page</h1>",
            "metadata": {"title": "Page", "sourceURL": "https://example.com/final",
                         "statusCode": 200}}}),
        (BackendKind::Tavily, Op::Search) => json!({"query": QUERY, "results": [
            {"title": "One", "url": "https://r/1", "content": "first", "score": 0.9},
            {"title": "Two", "url": "https://r/2", "content": "second", "score": 0.5}]}),
        (BackendKind::Tavily, Op::Extract) => json!({
            "results": [{"url": URLS[1], "title": "B", "raw_content": "bee"}],
            "failed_results": [{"url": URLS[0], "error": "robots.txt forbids"}]}),
        (BackendKind::Exa, Op::Search) => json!({"results": [
            {"id": "1", "url": "https://r/1", "title": "One", "highlights": ["fir", "st"]},
            {"id": "2", "url": "https://r/2", "title": null, "highlights": []}]}),
        (BackendKind::Exa, Op::Extract) => json!({
            "results": [{"id": URLS[0], "url": URLS[0], "title": "A", "text": "aaa"}],
            "statuses": [{"id": URLS[0], "status": "success"},
                         {"id": URLS[1], "status": "error"}]}),
        (BackendKind::Parallel, Op::Search) => json!({"search_id": "s", "results": [
            {"url": "https://r/1", "title": "One", "excerpts": ["fir", "st"]},
            {"url": "https://r/2", "title": "Two", "excerpts": null}]}),
        (BackendKind::Parallel, Op::Extract) => json!({"extract_id": "e",
            "results": [{"url": URLS[0], "title": "A", "full_content": null,
                         "excerpts": ["one", "two"]}],
            "errors": [{"url": URLS[1], "error_type": "fetch_error", "http_status_code": 404,
                        "content": null}]}),
        (BackendKind::Keenable, Op::Search) => json!({"results": [
            {"title": "One", "url": "https://r/1", "snippet": "first"},
            {"title": "Two", "url": "https://r/2", "description": "second"}]}),
        (BackendKind::Keenable, Op::Extract) => json!({"url": "https://example.com/final",
            "title": "Page", "content": "# Page\n\nbody"}),
        (BackendKind::Perplexity, _) => json!({"id": "s", "results": [
            {"title": "One", "url": "https://r/1", "snippet": "first", "date": "2026-01-02"},
            {"title": null, "url": "https://r/2"}]}),
        (BackendKind::Searxng, _) => json!({"results": [
            {"title": "Low", "url": "https://r/low", "content": "l", "score": 0.1},
            {"title": "High", "url": "https://r/high", "content": "h", "score": "2.5"},
            {"title": null, "url": "https://r/none", "content": 7}]}),
        (BackendKind::BraveFree, _) => json!({"web": {"results": [
            {"title": "One", "url": "https://r/1", "description": "first"},
            {"title": "Two", "url": "https://r/2", "description": "second"}]}}),
        (BackendKind::Xai, _) => json!({"output": [{"type": "message", "content": [
            {"type": "output_text", "annotations": [],
             "text": "{\"results\":[{\"title\":\"One\",\"url\":\"https://r/1\",\"description\":\"first\"}]}"}]}]}),
        // DuckDuckGo answers HTML, not JSON, and the ring is its members: their own tests
        // cover them.
        (BackendKind::Direct | BackendKind::Ddgs | BackendKind::Keyless, _) => Value::Null,
    }
}

// ---------------------------------------------------------------------------------------------
// Exact requests and parsed successes, vendor by vendor.

/// Start a stub answering the vendor's success, call it, and return what it saw and gave.
async fn succeed(kind: BackendKind, op: Op) -> (Vec<Seen>, Vec<Value>) {
    let stub = Stub::start(prefix(kind), vec![json_reply(200, &success_body(kind, op))]).await;
    let out = call(kind, op, stub.endpoint(2000, 0))
        .await
        .unwrap_or_else(|e| panic!("{kind:?} {op:?} must succeed: {e}"));
    (stub.requests(), out)
}

fn assert_json_post(seen: &Seen, path: &str) {
    assert_eq!(seen.method, "POST", "{path} must be a POST");
    assert_eq!(seen.path, path);
    assert_eq!(seen.header("content-type"), Some("application/json"));
    assert!(
        seen.header("user-agent")
            .is_some_and(|ua| ua.starts_with("fleetgate/")),
        "the user agent must name the gate"
    );
}

#[tokio::test]
async fn firecrawl_scrapes_each_url_with_the_sdk_body_and_bearer_key() {
    let (seen, pages) = succeed(BackendKind::Firecrawl, Op::Extract).await;
    assert_eq!(seen.len(), 2, "one scrape per URL");
    for (request, url) in seen.iter().zip(URLS) {
        assert_json_post(request, "/v2/scrape");
        assert_eq!(request.header("authorization"), Some("Bearer test-key-123"));
        assert_eq!(
            request.json(),
            json!({"url": url, "formats": ["markdown"], "onlyMainContent": true,
                   "skipTlsVerification": true, "removeBase64Images": true, "fastMode": false,
                   "blockAds": true, "storeInCache": true, "maxAge": 14400000, "mobile": false,
                   "origin": "fleetgate"}),
            "the body must be what firecrawl-py sends"
        );
    }
    assert_eq!(
        pages[0],
        json!({"url": "https://example.com/final", "title": "Page",
               "content": "# Page\n\nbody", "status": 200}),
        "the final URL is metadata.sourceURL and the content the markdown"
    );
}

#[tokio::test]
async fn firecrawl_self_hosted_without_a_key_sends_no_authorization() {
    let kind = BackendKind::Firecrawl;
    let stub = Stub::start("", vec![json_reply(200, &success_body(kind, Op::Extract))]).await;
    let mut endpoint = stub.endpoint(2000, 0);
    endpoint.api_key = None;
    let client = backend(kind, endpoint);
    assert!(
        client.available(),
        "a self-hosted base URL makes Firecrawl available"
    );
    let results = client.extract(&[URLS[0].to_string()]).await;
    assert!(
        results[0].is_ok(),
        "the keyless scrape must succeed: {results:?}"
    );
    assert_eq!(stub.requests()[0].header("authorization"), None);
}

#[tokio::test]
async fn firecrawl_searches_v2_and_reads_data_web() {
    let (seen, hits) = succeed(BackendKind::Firecrawl, Op::Search).await;
    assert_json_post(&seen[0], "/v2/search");
    assert_eq!(seen[0].header("authorization"), Some("Bearer test-key-123"));
    assert_eq!(
        seen[0].json(),
        json!({"query": QUERY, "limit": 5, "origin": "fleetgate"})
    );
    assert_eq!(
        serde_json::to_string(&hits[1]).expect("a hit must serialize"),
        r#"{"url":"https://r/2","title":"Two","description":"second","position":2}"#
    );
}

#[tokio::test]
async fn tavily_sends_its_json_bodies_and_keeps_per_url_failures() {
    let (seen, hits) = succeed(BackendKind::Tavily, Op::Search).await;
    assert_json_post(&seen[0], "/search");
    assert_eq!(seen[0].header("authorization"), Some("Bearer test-key-123"));
    assert_eq!(seen[0].header("x-client-name"), Some("fleetgate"));
    assert_eq!(
        seen[0].json(),
        json!({"query": QUERY, "max_results": 5, "include_raw_content": false,
               "include_images": false})
    );
    assert_eq!(
        serde_json::to_string(&hits[0]).expect("a hit must serialize"),
        r#"{"title":"One","url":"https://r/1","description":"first","position":1}"#
    );

    let (seen, pages) = succeed(BackendKind::Tavily, Op::Extract).await;
    assert_json_post(&seen[0], "/extract");
    assert_eq!(
        seen[0].json(),
        json!({"urls": URLS, "include_images": false})
    );
    assert_eq!(
        pages,
        [
            json!({"error": "robots.txt forbids", "code": "vendor_page_failed"}),
            json!({"url": URLS[1], "title": "B", "content": "bee", "status": 200}),
        ],
        "rows must follow the input order, failures as values"
    );
}

#[tokio::test]
async fn exa_sends_camel_case_bodies_and_words_missing_rows_from_statuses() {
    let (seen, hits) = succeed(BackendKind::Exa, Op::Search).await;
    assert_json_post(&seen[0], "/search");
    assert_eq!(seen[0].header("x-api-key"), Some(KEY));
    assert_eq!(seen[0].header("x-exa-integration"), Some("fleetgate"));
    assert_eq!(
        seen[0].json(),
        json!({"query": QUERY, "numResults": 5, "contents": {"highlights": true}})
    );
    assert_eq!(
        hits,
        [
            json!({"url": "https://r/1", "title": "One", "description": "fir st", "position": 1}),
            json!({"url": "https://r/2", "title": "", "description": "", "position": 2}),
        ]
    );

    let (seen, pages) = succeed(BackendKind::Exa, Op::Extract).await;
    assert_json_post(&seen[0], "/contents");
    assert_eq!(seen[0].json(), json!({"urls": URLS, "text": true}));
    assert_eq!(pages[0]["content"], "aaa");
    assert_eq!(
        pages[1],
        json!({"error": "Exa fetch failed (error)", "code": "vendor_page_failed"})
    );
}

#[tokio::test]
async fn keenable_with_a_key_posts_search_and_fetches_each_url_with_its_title_header() {
    let (seen, hits) = succeed(BackendKind::Keenable, Op::Search).await;
    assert_json_post(&seen[0], "/v1/search");
    assert_eq!(seen[0].header("authorization"), Some("Bearer test-key-123"));
    assert_eq!(seen[0].header("x-keenable-title"), Some("hermes-agent"));
    assert_eq!(seen[0].json(), json!({"query": QUERY, "max_results": 5}));
    assert_eq!(
        hits,
        [
            json!({"url": "https://r/1", "title": "One", "description": "first", "position": 1}),
            json!({"url": "https://r/2", "title": "Two", "description": "second", "position": 2}),
        ],
        "the description is the snippet, else the description"
    );

    let (seen, pages) = succeed(BackendKind::Keenable, Op::Extract).await;
    assert_eq!(seen.len(), URLS.len(), "one fetch per URL");
    for (request, url) in seen.iter().zip(URLS) {
        assert_eq!(
            (request.method.as_str(), request.path.as_str()),
            ("GET", "/v1/fetch")
        );
        let query = request.query.clone().unwrap_or_default();
        let asked: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        assert_eq!(asked, [("url".to_string(), url.to_string())]);
        assert_eq!(request.header("authorization"), Some("Bearer test-key-123"));
        assert_eq!(request.header("x-keenable-title"), Some("hermes-agent"));
    }
    assert_eq!(
        pages[0],
        json!({"url": "https://example.com/final", "title": "Page",
               "content": "# Page\n\nbody", "status": 200})
    );
}

#[tokio::test]
async fn keenable_without_a_key_uses_the_public_endpoints_and_hermes_keyless_wording() {
    let stub = Stub::start(
        "",
        vec![json_reply(
            200,
            &success_body(BackendKind::Keenable, Op::Search),
        )],
    )
    .await;
    let mut endpoint = stub.endpoint(2000, 0);
    endpoint.api_key = None;
    let client = backend(BackendKind::Keenable, endpoint.clone());
    assert!(client.available(), "keyless Keenable is callable");
    let hits = client
        .search(QUERY, 30)
        .await
        .expect("a keyless search must succeed")
        .hits;
    assert_eq!(hits.len(), 2);
    let seen = stub.requests();
    assert_json_post(&seen[0], "/v1/search/public");
    assert_eq!(seen[0].header("authorization"), None, "no key is sent");
    assert_eq!(
        seen[0].json(),
        json!({"query": QUERY, "max_results": 30}),
        "the public search is not capped at 20"
    );

    let refused = Stub::start("", vec![text_reply(429, "slow down")]).await;
    let mut endpoint = refused.endpoint(2000, 0);
    endpoint.api_key = None;
    let client = backend(BackendKind::Keenable, endpoint);
    let err = vendor_error(client.search(QUERY, 5).await.expect_err("a 429 fails"));
    assert_eq!(err.status, Some(429));
    assert_eq!(
        err.message,
        "Keyless Keenable search failed: HTTP 429: slow down. Set KEENABLE_API_KEY (keenable.ai) \
         or another web backend via `hermes tools` for reliable service."
    );
    let urls: Vec<String> = URLS.iter().map(|u| u.to_string()).collect();
    let pages = client.extract(&urls).await;
    let requests = refused.requests();
    assert!(
        requests[1..].iter().all(|r| r.path == "/v1/fetch/public"),
        "keyless fetches go to the public endpoint"
    );
    for page in pages {
        let err = vendor_error(page.expect_err("every fetch was refused"));
        assert!(
            err.message
                .starts_with("Keyless Keenable extract failed: HTTP 429"),
            "{}",
            err.message
        );
    }
}

#[tokio::test]
async fn keenable_tiers_pick_the_route_free_never_sends_the_key_and_paid_needs_one() {
    use fleetgate_proxy::policy::VendorTier;
    use fleetgate_proxy::web::vendors::keenable::{KeenableClient, MISSING_KEY};
    let body = success_body(BackendKind::Keenable, Op::Search);
    let stub = Stub::start("", vec![json_reply(200, &body)]).await;
    let free = KeenableClient::new(stub.endpoint(2000, 0)).with_tier(VendorTier::Free);
    assert!(free.keyless() && free.available());
    free.search(QUERY, 5)
        .await
        .expect("a free search must succeed");
    let seen = stub.requests();
    assert_eq!(seen[0].path, "/v1/search/public");
    assert_eq!(
        seen[0].header("authorization"),
        None,
        "the free tier sends no key"
    );

    let mut keyless = stub.endpoint(2000, 0);
    keyless.api_key = None;
    let paid = KeenableClient::new(keyless).with_tier(VendorTier::Paid);
    assert!(
        !paid.available(),
        "a paid tier without a key is not callable"
    );
    let err = paid.search(QUERY, 5).await.expect_err("no key, no call");
    assert_eq!(
        (err.kind, err.message.as_str()),
        (VendorErrorKind::NotConfigured, MISSING_KEY)
    );
    let pages = paid.extract(&[URLS[0].to_string()]).await;
    assert!(pages[0].is_err());
    assert_eq!(
        stub.requests().len(),
        1,
        "the paid tier without a key sent nothing"
    );

    let keyed = KeenableClient::new(stub.endpoint(2000, 0)).with_tier(VendorTier::Paid);
    assert!(!keyed.keyless());
    keyed
        .search(QUERY, 5)
        .await
        .expect("a keyed search must succeed");
    assert_eq!(stub.requests()[1].path, "/v1/search");
}

#[tokio::test]
async fn keenable_words_a_keyed_failure_per_url_and_reads_a_missing_content_as_empty() {
    let stub = Stub::start(
        "",
        vec![
            text_reply(404, "no such page"),
            json_reply(200, &json!({"url": URLS[1], "title": "B"})),
        ],
    )
    .await;
    let urls: Vec<String> = URLS.iter().map(|u| u.to_string()).collect();
    let pages = backend(BackendKind::Keenable, stub.endpoint(2000, 0))
        .extract(&urls)
        .await;
    assert_eq!(
        pages.iter().map(page_json).collect::<Vec<_>>(),
        [
            json!({"error": "Keenable extract failed: HTTP 404: no such page",
                   "code": "vendor_http_status"}),
            json!({"url": URLS[1], "title": "B", "content": "", "status": 200}),
        ]
    );
}

#[tokio::test]
async fn perplexity_asks_for_low_context_results_and_refuses_a_row_without_a_url() {
    let (seen, hits) = succeed(BackendKind::Perplexity, Op::Search).await;
    assert_json_post(&seen[0], "/search");
    assert_eq!(seen[0].header("authorization"), Some("Bearer test-key-123"));
    assert_eq!(seen[0].header("x-pplx-integration"), Some("fleetgate"));
    assert_eq!(
        seen[0].json(),
        json!({"query": QUERY, "max_results": 5, "search_context_size": "low"})
    );
    assert_eq!(
        hits,
        [
            json!({"title": "One", "url": "https://r/1", "description": "first", "position": 1}),
            json!({"title": "", "url": "https://r/2", "description": "", "position": 2}),
        ]
    );

    for answer in [
        json!({"results": [{"title": "No link", "snippet": "s"}]}),
        json!({"results": [{"url": "", "title": "Empty link"}]}),
        json!({"results": [{"url": "https://r/1", "title": 7}]}),
        json!({"answer": "not a result list"}),
    ] {
        let stub = Stub::start("", vec![json_reply(200, &answer)]).await;
        let err = call(BackendKind::Perplexity, Op::Search, stub.endpoint(2000, 0))
            .await
            .map(|_| ())
            .expect_err("an answer that is not a result list must fail");
        assert_eq!(err.code(), "vendor_bad_response", "{answer}");
        assert!(
            err.to_string().starts_with("Perplexity search failed: "),
            "{err}"
        );
    }
    let big = Stub::start("", vec![json_reply(200, &json!({"results": []}))]).await;
    backend(BackendKind::Perplexity, big.endpoint(2000, 0))
        .search(QUERY, 50)
        .await
        .expect("an empty result list is a success");
    assert_eq!(big.requests()[0].json()["max_results"], 20, "capped at 20");
}

#[tokio::test]
async fn ddgs_gets_the_html_page_and_words_failures_as_hermes_does() {
    let page = r#"<html><body><div class="result web-result">
      <h2><a class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fr%2F1">One</a></h2>
      <a class="result__snippet">first</a></div>
      <div class="result web-result"><h2><a class="result__a" href="https://r/2">Two</a></h2></div>
      </body></html>"#;
    let stub = Stub::start("", vec![text_reply(200, page)]).await;
    let mut endpoint = stub.endpoint(2000, 0);
    endpoint.api_key = None;
    let hits = backend(BackendKind::Ddgs, endpoint)
        .search(QUERY, 1)
        .await
        .expect("a result page must give rows")
        .hits;
    let seen = stub.requests();
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path.as_str()),
        ("GET", "/html/")
    );
    assert_eq!(seen[0].query.as_deref(), Some("q=rust+lang"));
    assert_eq!(
        hits.iter().map(|h| h.to_json()).collect::<Vec<_>>(),
        [json!({"title": "One", "url": "https://r/1", "description": "first", "position": 1})],
        "cut to the limit"
    );

    let busy = Stub::start("", vec![text_reply(429, "")]).await;
    let err = call(BackendKind::Ddgs, Op::Search, busy.endpoint(2000, 0))
        .await
        .map(|_| ())
        .expect_err("a 429 fails");
    assert_eq!(err.to_string(), "DuckDuckGo search failed: HTTP 429");

    let hung = Stub::start("", vec![Reply::Hang]).await;
    let err = call(BackendKind::Ddgs, Op::Search, hung.endpoint(200, 0))
        .await
        .map(|_| ())
        .expect_err("a hung page times out");
    assert_eq!(err.code(), "vendor_timeout");
    assert!(
        err.to_string()
            .starts_with("DuckDuckGo search timed out after 30s"),
        "{err}"
    );

    let changed = Stub::start(
        "",
        vec![text_reply(200, "<html><body><p>new look</p></body></html>")],
    )
    .await;
    let err = call(BackendKind::Ddgs, Op::Search, changed.endpoint(2000, 0))
        .await
        .map(|_| ())
        .expect_err("an unknown layout fails");
    assert_eq!(err.code(), "vendor_bad_response");
}

#[tokio::test]
async fn parallel_uses_the_beta_surface_and_falls_back_to_excerpts() {
    let (seen, hits) = succeed(BackendKind::Parallel, Op::Search).await;
    assert_json_post(&seen[0], "/v1beta/search");
    assert_eq!(seen[0].header("x-api-key"), Some(KEY));
    assert_eq!(
        seen[0].header("parallel-beta"),
        Some("search-extract-2025-10-10")
    );
    assert_eq!(
        seen[0].json(),
        json!({"search_queries": [QUERY], "objective": QUERY, "mode": "agentic",
               "max_results": 5})
    );
    assert_eq!(hits[0]["description"], "fir st");
    assert_eq!(hits[1]["description"], "");

    let (seen, pages) = succeed(BackendKind::Parallel, Op::Extract).await;
    assert_json_post(&seen[0], "/v1beta/extract");
    assert_eq!(seen[0].json(), json!({"urls": URLS, "full_content": true}));
    assert_eq!(
        pages[0]["content"], "one\n\ntwo",
        "excerpts joined by a blank line"
    );
    assert_eq!(
        pages[1],
        json!({"error": "fetch_error", "code": "vendor_page_failed"})
    );
}

#[tokio::test]
async fn searxng_gets_json_under_its_base_path_and_sorts_by_score() {
    let (seen, hits) = succeed(BackendKind::Searxng, Op::Search).await;
    assert_eq!(seen[0].method, "GET");
    assert_eq!(seen[0].path, "/searx/search", "the base path must be kept");
    assert_eq!(
        seen[0].query.as_deref(),
        Some("q=rust+lang&format=json&pageno=1")
    );
    assert_eq!(seen[0].header("accept"), Some("application/json"));
    assert_eq!(
        seen[0].header("authorization"),
        None,
        "SearXNG takes no key"
    );
    assert_eq!(
        hits,
        [
            json!({"title": "High", "url": "https://r/high", "description": "h", "position": 1}),
            json!({"title": "Low", "url": "https://r/low", "description": "l", "position": 2}),
            json!({"title": "None", "url": "https://r/none", "description": "7", "position": 3}),
        ],
        "rows must be sorted by score and str()-ed like Hermes"
    );
}

#[tokio::test]
async fn brave_sends_the_subscription_token_and_a_clamped_count() {
    let kind = BackendKind::BraveFree;
    let stub = Stub::start("", vec![json_reply(200, &success_body(kind, Op::Search))]).await;
    let client = backend(kind, stub.endpoint(2000, 0));
    let hits = client
        .search(QUERY, 50)
        .await
        .expect("brave must succeed")
        .hits;
    let seen = &stub.requests()[0];
    assert_eq!(seen.method, "GET");
    assert_eq!(seen.path, "/res/v1/web/search");
    assert_eq!(
        seen.query.as_deref(),
        Some("q=rust+lang&count=20"),
        "count is capped at 20"
    );
    assert_eq!(seen.header("x-subscription-token"), Some(KEY));
    assert_eq!(seen.header("accept"), Some("application/json"));
    assert_eq!(hits.len(), 2);
    assert_eq!(hits[0].order, KeyOrder::TitleHit);
}

#[tokio::test]
async fn xai_posts_to_responses_under_v1_with_the_web_search_tool() {
    let (seen, hits) = succeed(BackendKind::Xai, Op::Search).await;
    assert_json_post(&seen[0], "/v1/responses");
    assert_eq!(seen[0].header("authorization"), Some("Bearer test-key-123"));
    let body = seen[0].json();
    assert_eq!(body["model"], "grok-build-0.1");
    assert_eq!(body["tools"], json!([{"type": "web_search"}]));
    assert_eq!(body["include"], json!(["no_inline_citations"]));
    assert_eq!(body["input"][0]["role"], "user");
    assert_eq!(
        hits,
        [json!({"title": "One", "url": "https://r/1", "description": "first", "position": 1})]
    );
}

#[tokio::test]
async fn an_xai_error_envelope_with_status_200_is_a_failure() {
    let body = json!({"error": {"code": "overloaded", "message": "model overloaded"}});
    let stub = Stub::start("/v1", vec![json_reply(200, &body)]).await;
    let err = call(BackendKind::Xai, Op::Search, stub.endpoint(2000, 0))
        .await
        .map(|_| ())
        .expect_err("an error envelope must fail the search");
    assert_eq!(err.to_string(), "xAI returned an error: model overloaded");
    assert_eq!(err.code(), "vendor_bad_response");
}

// ---------------------------------------------------------------------------------------------
// Failures, for every vendor call.

#[tokio::test]
async fn a_4xx_is_not_retried_and_names_the_status_and_a_bounded_excerpt() {
    let body = format!("{{\"error\":\"bad key\"}}{}", "x".repeat(5000));
    for (kind, op) in CALLS {
        let stub = Stub::start(prefix(kind), vec![text_reply(401, &body)]).await;
        let err = call(kind, op, stub.endpoint(2000, 3)).await.map(|_| ());
        let err = vendor_error(err.expect_err("a 401 must fail"));
        assert_eq!(
            stub.requests().len(),
            1,
            "{kind:?} {op:?}: a 401 must not be retried"
        );
        assert_eq!(
            (err.kind, err.status),
            (VendorErrorKind::HttpStatus, Some(401))
        );
        assert_eq!(err.kind.source(), FailureSource::Vendor);
        let want = match kind {
            BackendKind::Searxng => "SearXNG returned HTTP 401".to_string(),
            BackendKind::BraveFree => "Brave Search returned HTTP 401".to_string(),
            _ => format!("HTTP 401: {}", &body[..300]),
        };
        assert!(
            err.message.ends_with(&want),
            "{kind:?} {op:?}: {}",
            err.message
        );
        assert!(
            err.message.len() < 400,
            "{kind:?} {op:?}: the excerpt must be bounded"
        );
    }
}

#[tokio::test]
async fn a_500_is_retried_and_the_next_success_is_used() {
    for (kind, op) in CALLS {
        let script = vec![
            text_reply(500, "boom"),
            json_reply(200, &success_body(kind, op)),
        ];
        let stub = Stub::start(prefix(kind), script).await;
        let out = call(kind, op, stub.endpoint(2000, 2)).await;
        let out = out.unwrap_or_else(|e| panic!("{kind:?} {op:?} must recover: {e}"));
        assert!(
            !out.is_empty(),
            "{kind:?} {op:?}: the retried answer must be parsed"
        );
        // Firecrawl and Keenable fetch each URL on its own.
        let per_url = matches!(kind, BackendKind::Firecrawl | BackendKind::Keenable);
        let want = if per_url && op == Op::Extract { 3 } else { 2 };
        assert_eq!(
            stub.requests().len(),
            want,
            "{kind:?} {op:?}: one failed attempt, then success"
        );
    }
}

#[tokio::test]
async fn a_500_that_persists_fails_after_the_retry_budget() {
    let stub = Stub::start("", vec![text_reply(503, "down")]).await;
    let err = call(BackendKind::Tavily, Op::Search, stub.endpoint(2000, 2))
        .await
        .map(|_| ())
        .expect_err("a persistent 503 must fail");
    assert_eq!(stub.requests().len(), 3, "one attempt plus two retries");
    assert_eq!(err.to_string(), "Tavily search failed: HTTP 503: down");
    assert_eq!(err.code(), "vendor_http_status");
}

#[tokio::test]
async fn a_429_is_retried_only_when_retry_after_says_when() {
    let paced = Reply::Body(429, vec![("retry-after", "1".into())], Bytes::from("slow"));
    let ok = json_reply(200, &success_body(BackendKind::Exa, Op::Search));
    let stub = Stub::start("", vec![paced, ok]).await;
    let start = Instant::now();
    let hits = call(BackendKind::Exa, Op::Search, stub.endpoint(2000, 2)).await;
    assert!(hits.is_ok(), "the paced retry must succeed: {hits:?}");
    assert!(
        start.elapsed() >= Duration::from_secs(1),
        "Retry-After must be waited out"
    );
    assert_eq!(stub.requests().len(), 2);

    let stub = Stub::start("", vec![text_reply(429, "slow down")]).await;
    let err = call(BackendKind::Exa, Op::Search, stub.endpoint(2000, 2))
        .await
        .map(|_| ());
    let err = vendor_error(err.expect_err("an unpaced 429 must fail"));
    assert_eq!(
        stub.requests().len(),
        1,
        "a 429 without Retry-After must not be retried"
    );
    assert_eq!(err.kind, VendorErrorKind::RateLimited);
    assert_eq!(err.kind.code(), "vendor_rate_limited");
}

#[tokio::test]
async fn a_hung_vendor_times_out_within_the_configured_timeout() {
    let timeout = Duration::from_millis(300);
    for (kind, op) in CALLS {
        let stub = Stub::start(prefix(kind), vec![Reply::Hang]).await;
        let start = Instant::now();
        let err = call(kind, op, stub.endpoint(300, 0)).await.map(|_| ());
        let elapsed = start.elapsed();
        let err = vendor_error(err.expect_err("a hang must fail"));
        assert_eq!(
            err.kind,
            VendorErrorKind::Timeout,
            "{kind:?} {op:?}: {}",
            err.message
        );
        // Firecrawl scrapes the two URLs one after the other, each with its own timeout.
        let attempts = stub.requests().len() as u32;
        assert!(
            elapsed >= timeout * attempts && elapsed < timeout * attempts + Duration::from_secs(1),
            "{kind:?} {op:?}: {attempts} attempt(s) took {elapsed:?}"
        );
        let want = match kind {
            BackendKind::Firecrawl if op == Op::Extract => "Scrape timed out after 300ms",
            BackendKind::Searxng => "Could not reach SearXNG at http://127.0.0.1",
            BackendKind::BraveFree => "Could not reach Brave Search: timed out after 300ms",
            BackendKind::Xai => "Could not reach xAI: timed out after 300ms",
            _ => "failed: timed out after 300ms",
        };
        assert!(
            err.message.contains(want),
            "{kind:?} {op:?}: {}",
            err.message
        );
    }
}

#[tokio::test]
async fn a_timeout_is_retried_within_the_budget() {
    let ok = json_reply(200, &success_body(BackendKind::BraveFree, Op::Search));
    let stub = Stub::start("", vec![Reply::Hang, ok]).await;
    let hits = call(BackendKind::BraveFree, Op::Search, stub.endpoint(300, 1)).await;
    assert!(
        hits.is_ok(),
        "the retry after a timeout must succeed: {hits:?}"
    );
    assert_eq!(stub.requests().len(), 2);
}

#[tokio::test]
async fn malformed_json_is_a_bad_response_and_not_retried() {
    for (kind, op) in CALLS {
        let stub = Stub::start(prefix(kind), vec![text_reply(200, "{\"results\": [oops")]).await;
        let err = call(kind, op, stub.endpoint(2000, 2)).await.map(|_| ());
        let err = vendor_error(err.expect_err("malformed JSON must fail every URL alike"));
        assert_eq!(err.kind, VendorErrorKind::BadResponse, "{kind:?} {op:?}");
        let want = match kind {
            BackendKind::Searxng => "Could not parse SearXNG response as JSON",
            BackendKind::BraveFree => "Could not parse Brave Search response as JSON",
            BackendKind::Xai => "Could not parse xAI Responses API reply as JSON",
            _ => "failed: invalid JSON in the response",
        };
        assert!(
            err.message.contains(want),
            "{kind:?} {op:?}: {}",
            err.message
        );
        let per_url = matches!(kind, BackendKind::Firecrawl | BackendKind::Keenable);
        let calls = if per_url && op == Op::Extract { 2 } else { 1 };
        assert_eq!(stub.requests().len(), calls, "{kind:?} {op:?}: no retry");
    }
}

/// A vendor's success body with `extra` tiny values (`0,0,…`) in a field nobody reads: the
/// answer that costs a JSON tree dozens of times its size.
fn amplifying_body(kind: BackendKind, op: Op, extra: usize) -> Bytes {
    let mut body = success_body(kind, op);
    body["x"] = json!([]);
    let text = body.to_string();
    let mut zeros = String::with_capacity(extra * 2);
    for i in 0..extra {
        zeros.push_str(if i == 0 { "0" } else { ",0" });
    }
    Bytes::from(text.replacen("\"x\":[]", &format!("\"x\":[{zeros}]"), 1))
}

#[tokio::test]
async fn an_answer_of_many_tiny_json_values_is_a_bad_response_for_every_vendor() {
    for (kind, op) in CALLS {
        // A million values in 2 MB, under the body cap: refused before a tree is built.
        let body = amplifying_body(kind, op, 1_000_000);
        let reply = Reply::Body(200, vec![("content-type", "application/json".into())], body);
        let stub = Stub::start(prefix(kind), vec![reply]).await;
        let endpoint = Endpoint {
            max_body_bytes: 8 * 1024 * 1024,
            ..stub.endpoint(5000, 0)
        };
        let err = call(kind, op, endpoint).await.map(|_| ());
        let err = vendor_error(err.expect_err("an amplifying answer must fail"));
        assert_eq!(
            err.kind,
            VendorErrorKind::BadResponse,
            "{kind:?} {op:?}: {}",
            err.message
        );
        // The same answer without the padding is served: the bound is on the values alone.
        let plain = Reply::Body(
            200,
            vec![("content-type", "application/json".into())],
            amplifying_body(kind, op, 1000),
        );
        let stub = Stub::start(prefix(kind), vec![plain]).await;
        let endpoint = Endpoint {
            max_body_bytes: 8 * 1024 * 1024,
            ..stub.endpoint(5000, 0)
        };
        assert!(
            call(kind, op, endpoint).await.is_ok(),
            "{kind:?} {op:?}: an ordinary answer passes"
        );
    }
}

#[tokio::test]
async fn an_oversized_body_hits_the_cap_while_streaming() {
    let total = 256 * 1024 * 1024;
    for (kind, op) in CALLS {
        let stub = Stub::start(prefix(kind), vec![Reply::Endless { total }]).await;
        let err = call(kind, op, stub.endpoint(5000, 2)).await.map(|_| ());
        let err = vendor_error(err.expect_err("an endless body must fail"));
        assert_eq!(
            err.kind,
            VendorErrorKind::BodyTooLarge,
            "{kind:?} {op:?}: {}",
            err.message
        );
        assert!(
            err.message.contains("65536-byte limit"),
            "{kind:?} {op:?}: {}",
            err.message
        );
        let streamed = stub.streamed.load(Ordering::SeqCst);
        assert!(
            streamed < total / 4,
            "{kind:?} {op:?}: the client must stop reading at the cap ({streamed} bytes sent)"
        );
    }
}

#[tokio::test]
async fn a_declared_length_over_the_cap_fails_before_reading() {
    let big = Bytes::from(vec![b'{'; 100 * 1024]);
    let stub = Stub::start("", vec![Reply::Body(200, vec![], big)]).await;
    let err = call(BackendKind::Tavily, Op::Extract, stub.endpoint(2000, 0))
        .await
        .map(|_| ());
    let err = vendor_error(err.expect_err("a declared oversize must fail"));
    assert_eq!(err.kind, VendorErrorKind::BodyTooLarge);
}

#[tokio::test]
async fn gzip_bodies_are_decoded_and_the_cap_counts_decoded_bytes() {
    use std::io::Write;
    let gzip = |text: &str| {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(text.as_bytes()).expect("gzip must encode");
        Bytes::from(gz.finish().expect("gzip must finish"))
    };
    let headers = vec![("content-encoding", "gzip".to_string())];
    let body = success_body(BackendKind::BraveFree, Op::Search).to_string();
    let stub = Stub::start("", vec![Reply::Body(200, headers.clone(), gzip(&body))]).await;
    let hits = call(BackendKind::BraveFree, Op::Search, stub.endpoint(2000, 0)).await;
    assert_eq!(
        hits.map(|h| h.len()).ok(),
        Some(2),
        "a gzip answer must be decoded"
    );

    let bomb = format!("{{\"web\": \"{}\"}}", "a".repeat(1024 * 1024));
    let stub = Stub::start("", vec![Reply::Body(200, headers, gzip(&bomb))]).await;
    let err = call(BackendKind::BraveFree, Op::Search, stub.endpoint(2000, 0))
        .await
        .map(|_| ());
    let err = vendor_error(err.expect_err("a decoded body over the cap must fail"));
    assert_eq!(err.kind, VendorErrorKind::BodyTooLarge);
}

#[tokio::test]
async fn an_unreachable_vendor_is_named_and_classified() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind must work");
    let addr = listener
        .local_addr()
        .expect("a bound socket has an address");
    drop(listener);
    let base = url::Url::parse(&format!("http://{addr}/")).expect("base must parse");
    let mut endpoint = Endpoint::new(base).with_key(KEY);
    endpoint.retries = 0;
    let err = call(BackendKind::Searxng, Op::Search, endpoint)
        .await
        .map(|_| ());
    let err = vendor_error(err.expect_err("a closed port must fail"));
    assert_eq!(err.kind, VendorErrorKind::Unreachable);
    assert!(
        err.message
            .starts_with(&format!("Could not reach SearXNG at http://{addr}: ")),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn firecrawl_reuses_an_account_wide_failure_for_the_remaining_urls() {
    let stub = Stub::start(
        "",
        vec![text_reply(402, "{\"error\":\"Payment required\"}")],
    )
    .await;
    let urls: Vec<String> = URLS.iter().map(|u| u.to_string()).collect();
    let results = backend(BackendKind::Firecrawl, stub.endpoint(2000, 0))
        .extract(&urls)
        .await;
    assert_eq!(
        stub.requests().len(),
        1,
        "a 402 must not be repeated for the next URL"
    );
    assert!(
        results
            .iter()
            .all(|r| r.as_ref().err().map(VendorFailure::code) == Some("vendor_http_status"))
    );
}

#[tokio::test]
async fn a_firecrawl_scrape_refusal_stays_with_its_url() {
    let refused = json_reply(
        200,
        &json!({"success": false, "error": "Website not supported"}),
    );
    let ok = json_reply(200, &success_body(BackendKind::Firecrawl, Op::Extract));
    let stub = Stub::start("", vec![refused, ok]).await;
    let urls: Vec<String> = URLS.iter().map(|u| u.to_string()).collect();
    let results = backend(BackendKind::Firecrawl, stub.endpoint(2000, 0))
        .extract(&urls)
        .await;
    assert_eq!(page_json(&results[0])["error"], "Website not supported");
    assert!(results[1].is_ok(), "the next URL must still be scraped");
}

// ---------------------------------------------------------------------------------------------
// Credentials, capabilities and policy names.

#[tokio::test]
async fn a_missing_key_is_the_gates_fault_and_sends_nothing() {
    let cases = [
        (
            BackendKind::Firecrawl,
            "Web tools are not configured. Set FIRECRAWL_API_KEY",
        ),
        (
            BackendKind::Tavily,
            "TAVILY_API_KEY environment variable not set.",
        ),
        (
            BackendKind::Exa,
            "EXA_API_KEY environment variable not set.",
        ),
        (
            BackendKind::Parallel,
            "PARALLEL_API_KEY environment variable not set.",
        ),
        (BackendKind::BraveFree, "BRAVE_SEARCH_API_KEY is not set"),
        (BackendKind::Xai, "No xAI credentials found."),
    ];
    for (kind, want) in cases {
        let endpoint = fleetgate_proxy::web::vendors::default_endpoint(kind)
            .expect("keyed vendors have a public base URL");
        let client = backend(kind, endpoint);
        assert!(
            !client.available(),
            "{kind:?} without a key must be unavailable"
        );
        let err = vendor_error(
            client
                .search(QUERY, 5)
                .await
                .expect_err("no key, no search"),
        );
        assert_eq!(err.kind, VendorErrorKind::NotConfigured, "{kind:?}");
        assert_eq!(err.kind.source(), FailureSource::Gate, "{kind:?}");
        assert!(err.message.starts_with(want), "{kind:?}: {}", err.message);
    }
}

#[tokio::test]
async fn search_only_backends_refuse_extract_with_hermes_typed_error() {
    let stub = Stub::start("", vec![text_reply(500, "must not be called")]).await;
    let urls: Vec<String> = URLS.iter().map(|u| u.to_string()).collect();
    for kind in [
        BackendKind::Perplexity,
        BackendKind::Ddgs,
        BackendKind::Searxng,
        BackendKind::BraveFree,
        BackendKind::Xai,
    ] {
        let results = backend(kind, stub.endpoint(2000, 0)).extract(&urls).await;
        for result in results {
            let err = vendor_error(result.expect_err("a search-only backend cannot extract"));
            assert_eq!(err.kind, VendorErrorKind::Unsupported);
            assert_eq!(err.message, search_only_error(kind.display_name()));
        }
    }
    assert!(stub.requests().is_empty(), "no vendor call may be made");
    assert_eq!(
        search_only_error("Brave Search (Free)"),
        "Brave Search (Free) is a search-only backend and cannot extract URL content. \
         Set web.extract_backend to firecrawl, tavily, exa, or parallel."
    );
}

#[test]
fn policy_names_follow_the_capability_table() {
    for kind in BackendKind::ALL {
        let caps = kind.capabilities();
        assert_eq!(
            check_extract_backend(kind.name()).is_ok(),
            caps.extract,
            "{kind:?} extract"
        );
        assert_eq!(
            check_search_backend(kind.name()).is_ok(),
            caps.search,
            "{kind:?} search"
        );
        assert_eq!(BackendKind::from_name(kind.name()), Some(kind));
    }
    let err = check_extract_backend("brave-free").expect_err("brave-free cannot extract");
    assert_eq!(
        err,
        format!("'brave-free': {}", search_only_error("Brave Search (Free)")),
        "the typed search-only text must be given at policy load"
    );
    let err = check_extract_backend("bing").expect_err("unknown names must be refused");
    assert!(err.contains("unknown extract backend 'bing'"), "{err}");
    let err = check_search_backend("direct").expect_err("direct cannot search");
    assert!(err.contains("cannot search"), "{err}");
}

#[test]
fn display_names_and_key_orders_match_hermes() {
    let cases = [
        (BackendKind::Firecrawl, "Firecrawl", KeyOrder::WebHit),
        (BackendKind::Tavily, "Tavily", KeyOrder::TitleHit),
        (BackendKind::Exa, "Exa", KeyOrder::WebHit),
        (BackendKind::Parallel, "Parallel", KeyOrder::WebHit),
        (BackendKind::Keenable, "Keenable", KeyOrder::WebHit),
        (BackendKind::Perplexity, "Perplexity", KeyOrder::TitleHit),
        (BackendKind::Ddgs, "DuckDuckGo (ddgs)", KeyOrder::TitleHit),
        (BackendKind::Searxng, "SearXNG", KeyOrder::TitleHit),
        (
            BackendKind::BraveFree,
            "Brave Search (Free)",
            KeyOrder::TitleHit,
        ),
        (
            BackendKind::Xai,
            "xAI Web Search (Grok)",
            KeyOrder::TitleHit,
        ),
    ];
    for (kind, display, order) in cases {
        assert_eq!(
            (kind.display_name(), kind.key_order()),
            (display, order),
            "{kind:?}"
        );
    }
}

#[test]
fn vendor_codes_are_listed_and_classified() {
    for kind in VendorErrorKind::ALL {
        let failure = VendorFailure::Vendor(VendorError::new("tavily", kind, "x"));
        assert!(
            VendorFailure::ALL_CODES.contains(&failure.code()),
            "{kind:?}"
        );
        assert_eq!(failure.failure_source(), kind.source(), "{kind:?}");
    }
}
