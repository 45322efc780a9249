//! Loopback HTTP/1.1 origin servers: per-path scripted replies ([`Reply`]), hit counters and the
//! recorded requests, so tests can check what the gate fetched and how it handled the answer.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use fleetgate_e2e::origin::{self, Reply};
//! let origin = origin::http1()
//!     .route("/", "ok")
//!     .route("/page", Reply::html("<h1>hi</h1>").gzip())
//!     .route("/slow", Reply::hang())
//!     .run()
//!     .await?;
//! let url = origin.url("/page");
//! assert_eq!(origin.hits("/page"), 0);
//! # Ok(()) }
//! ```

mod reply;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use anyhow::Context as _;
use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, Uri};
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use crate::background::BackgroundTasks;

use reply::ScriptedBody;
pub use reply::{FILLER_BYTE, Reply};

/// Starts configuring an HTTP/1.1 origin.
pub fn http1() -> OriginBuilder {
    OriginBuilder::default()
}

/// Configures an [`Origin`] before it starts; see [`http1`].
#[derive(Debug, Default)]
pub struct OriginBuilder {
    routes: HashMap<String, Reply>,
}

/// A running origin on `127.0.0.1`; stops (closing every connection) on drop.
///
/// Requests are routed by path alone (the query string is ignored); a path without a route
/// gets `404 text/plain`. Every request is counted and recorded, routed or not.
#[derive(Debug)]
pub struct Origin {
    addr: SocketAddr,
    state: Arc<State>,
    _tasks: BackgroundTasks,
}

/// One request as the origin received it.
#[derive(Clone, Debug)]
pub struct SeenRequest {
    /// The request method.
    pub method: Method,
    /// The request target as sent (origin-form `/path?query`, or absolute-form from a proxy).
    pub uri: Uri,
    /// The request headers as received (`Host` included).
    pub headers: HeaderMap,
    /// The complete request body.
    pub body: Bytes,
}

/// Routes and the request log, shared by every connection.
#[derive(Debug, Default)]
struct State {
    routes: Mutex<HashMap<String, Reply>>,
    log: Mutex<RequestLog>,
}

#[derive(Debug, Default)]
struct RequestLog {
    hits: HashMap<String, usize>,
    requests: Vec<SeenRequest>,
}

// === impl OriginBuilder ===

impl OriginBuilder {
    /// Answers requests for `path` with `reply` (a `&str` becomes a plain-text `200`).
    pub fn route(mut self, path: &str, reply: impl Into<Reply>) -> Self {
        self.routes.insert(path.to_owned(), reply.into());
        self
    }

    /// Binds `127.0.0.1:0` and starts serving.
    pub async fn run(self) -> anyhow::Result<Origin> {
        self.run_on(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
            .await
    }

    /// Binds `addr` (e.g. port 80 of a bridge address pods reach the host on) and starts
    /// serving.
    pub async fn run_on(self, addr: SocketAddr) -> anyhow::Result<Origin> {
        let listener = TcpListener::bind(addr)
            .await
            .context("failed to bind the origin listener")?;
        let addr = listener
            .local_addr()
            .context("failed to read the origin address")?;
        let state = Arc::new(State {
            routes: Mutex::new(self.routes),
            log: Mutex::default(),
        });
        let mut tasks = BackgroundTasks::default();
        tasks.spawn(accept_loop(listener, Arc::clone(&state)));
        Ok(Origin {
            addr,
            state,
            _tasks: tasks,
        })
    }
}

// === impl Origin ===

impl Origin {
    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT{path}`; `path` starts with `/`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// `http://{host}:PORT{path}`: the origin under a name (for example one the stub DNS
    /// resolves to `127.0.0.1`).
    pub fn url_with_host(&self, host: &str, path: &str) -> String {
        format!("http://{host}:{}{path}", self.addr.port())
    }

    /// How many requests arrived for `path` (counted when the headers arrive, so a request to a
    /// hanging route counts too).
    pub fn hits(&self, path: &str) -> usize {
        lock(&self.state.log).hits.get(path).copied().unwrap_or(0)
    }

    /// How many requests arrived in total, over all paths.
    pub fn total_hits(&self) -> usize {
        lock(&self.state.log).hits.values().sum()
    }

    /// The most recent request whose body has been read, on any path.
    pub fn last_request(&self) -> Option<SeenRequest> {
        lock(&self.state.log).requests.last().cloned()
    }

    /// Every request whose body has been read, oldest first.
    pub fn requests(&self) -> Vec<SeenRequest> {
        lock(&self.state.log).requests.clone()
    }

    /// Replaces (or adds) the reply for `path` while the origin runs.
    pub fn set_route(&self, path: &str, reply: impl Into<Reply>) {
        lock(&self.state.routes).insert(path.to_owned(), reply.into());
    }
}

// === impl SeenRequest ===

impl SeenRequest {
    /// The first value of header `name`, if present and valid UTF-8.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking test thread must not take the server down with a poisoned lock.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    // Owning the connections here means aborting this task closes them all.
    let mut connections = JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        while connections.try_join_next().is_some() {}
        connections.spawn(serve_connection(stream, Arc::clone(&state)));
    }
}

async fn serve_connection(stream: TcpStream, state: Arc<State>) {
    let service = service_fn(move |request| {
        let state = Arc::clone(&state);
        async move { Ok::<_, Infallible>(handle(&state, request).await) }
    });
    // Connection errors (client gone, truncated bodies by design) end only this connection.
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

async fn handle(state: &State, request: Request<Incoming>) -> Response<ScriptedBody> {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    *lock(&state.log).hits.entry(path.clone()).or_default() += 1;
    let reply = lock(&state.routes).get(&path).cloned();
    let body = body
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .unwrap_or_default();
    lock(&state.log).requests.push(SeenRequest {
        method: parts.method,
        uri: parts.uri,
        headers: parts.headers,
        body,
    });
    let reply = reply.unwrap_or_else(|| {
        Reply::new(
            404,
            "text/plain; charset=utf-8",
            format!("no route for {path}"),
        )
    });
    reply.render().await
}
