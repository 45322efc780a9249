//! A relay built from hyper's HTTP/1 server and client, for the forward-proxy benchmark: the
//! re-framing a library gives by construction, with no gates and no logs, to weigh against the
//! gate's own HTTP/1.1 relay. Each client connection keeps one upstream connection to the
//! address given as the first argument (as the gate does), absolute-form targets become
//! origin-form, and hop-by-hop headers are dropped. Listens on `127.0.0.1:0` and prints
//! `{"listening": "ADDR"}` once bound.

#![allow(clippy::print_stdout)]

use std::convert::Infallible;
use std::sync::Arc;

use anyhow::Context as _;
use fleetgate_e2e::farm::hyper_relay::to_upstream;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;

type Body = http_body_util::combinators::BoxBody<bytes::Bytes, hyper::Error>;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let upstream = std::env::args()
        .nth(1)
        .context("usage: bench_hyper_relay UPSTREAM_ADDR")?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    println!("{{\"listening\": \"{}\"}}", listener.local_addr()?);
    loop {
        let (client, _) = listener.accept().await?;
        let _ = client.set_nodelay(true);
        let upstream = upstream.clone();
        tokio::spawn(async move {
            let kept: Arc<Mutex<Option<SendRequest<Incoming>>>> = Arc::default();
            let service = service_fn(move |req| relay(req, upstream.clone(), kept.clone()));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(client), service)
                .await;
        });
    }
}

async fn relay(
    req: Request<Incoming>,
    upstream: String,
    kept: Arc<Mutex<Option<SendRequest<Incoming>>>>,
) -> Result<Response<Body>, Infallible> {
    let (mut parts, body) = req.into_parts();
    if !to_upstream(&mut parts) {
        return Ok(error(StatusCode::BAD_REQUEST));
    }
    let mut slot = kept.lock().await;
    let sender = match slot.take().filter(|s| !s.is_closed()) {
        Some(s) => s,
        None => match connect(&upstream).await {
            Some(s) => s,
            None => return Ok(error(StatusCode::BAD_GATEWAY)),
        },
    };
    let mut sender = sender;
    let sent = sender.send_request(Request::from_parts(parts, body)).await;
    *slot = Some(sender);
    match sent {
        Ok(resp) => Ok(resp.map(BodyExt::boxed)),
        Err(_) => Ok(error(StatusCode::BAD_GATEWAY)),
    }
}

async fn connect(upstream: &str) -> Option<SendRequest<Incoming>> {
    let stream = TcpStream::connect(upstream).await.ok()?;
    let _ = stream.set_nodelay(true);
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .ok()?;
    tokio::spawn(conn);
    Some(sender)
}

fn error(status: StatusCode) -> Response<Body> {
    let empty = http_body_util::Empty::new().map_err(|never| match never {});
    let mut resp = Response::new(empty.boxed());
    *resp.status_mut() = status;
    resp
}
