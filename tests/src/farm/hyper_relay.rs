//! The reference column of the farm: a relay built from hyper's HTTP/1 server and client, which
//! re-frame by construction (hyper parses each request into a head and a body stream and writes
//! a new message). It runs no gates and sends every request it accepts to one upstream, keeping
//! method, path and query, and `Host`. The farm sends it the same payloads as the gate to show
//! where the gate's own HTTP/1.1 parser and hyper's disagree about what to accept.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

type Body = BoxBody<Bytes, hyper::Error>;

/// A running hyper relay; stops when dropped.
#[derive(Debug)]
pub struct HyperRelay {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

// === impl HyperRelay ===

impl HyperRelay {
    /// Start on a loopback port, relaying to `upstream`.
    pub async fn start(upstream: SocketAddr) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let service = service_fn(move |req| relay(req, upstream));
                    // The farm half-closes after its payload: requests already sent still
                    // get their answers.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .half_close(true)
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Self { addr, task })
    }

    /// Where the relay listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for HyperRelay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn status(code: StatusCode) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::new()).map_err(|n| match n {}).boxed());
    *resp.status_mut() = code;
    resp
}

/// Make a received request head fit to send on: an absolute-form target becomes origin-form
/// (`Host` stays as the client sent it) and hop-by-hop headers are dropped. `false` when the
/// target has no origin form.
pub fn to_upstream(parts: &mut http::request::Parts) -> bool {
    let origin_form = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let Ok(uri) = origin_form.parse() else {
        return false;
    };
    parts.uri = uri;
    for hop in [
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "te",
        "trailer",
        "upgrade",
    ] {
        parts.headers.remove(hop);
    }
    true
}

async fn relay(req: Request<Incoming>, upstream: SocketAddr) -> Result<Response<Body>, Infallible> {
    let (mut parts, body) = req.into_parts();
    if !to_upstream(&mut parts) {
        return Ok(status(StatusCode::BAD_REQUEST));
    }
    let Ok(stream) = TcpStream::connect(upstream).await else {
        return Ok(status(StatusCode::BAD_GATEWAY));
    };
    let Ok((mut sender, conn)) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    else {
        return Ok(status(StatusCode::BAD_GATEWAY));
    };
    tokio::spawn(conn);
    match sender.send_request(Request::from_parts(parts, body)).await {
        Ok(resp) => Ok(resp.map(BodyExt::boxed)),
        Err(_) => Ok(status(StatusCode::BAD_GATEWAY)),
    }
}
