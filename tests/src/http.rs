//! Minimal HTTP/1.1 client for tests: one request per fresh loopback connection, the whole
//! response body collected, so tests can talk to the gate's listeners and to origins.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http::header::{CONTENT_TYPE, HOST};
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Upper bound for one request, so a broken server fails the test instead of hanging it.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A complete response.
#[derive(Clone, Debug)]
pub struct HttpReply {
    /// The status code.
    pub status: StatusCode,
    /// The response headers.
    pub headers: HeaderMap,
    /// The whole body, as received (not decoded).
    pub body: Bytes,
}

// === impl HttpReply ===

impl HttpReply {
    /// The body parsed as JSON.
    pub fn json(&self) -> anyhow::Result<serde_json::Value> {
        serde_json::from_slice(&self.body).with_context(|| {
            format!(
                "failed to parse the {} response body as JSON: {}",
                self.status,
                self.text()
            )
        })
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The first value of header `name`, if present and valid UTF-8.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }
}

/// `GET target` on `addr`. `target` is a path (`/v1/status`) or, to use `addr` as a forward
/// proxy, an absolute URL (`http://origin.test:8080/`).
pub async fn get(addr: SocketAddr, target: &str) -> anyhow::Result<HttpReply> {
    let request = Request::get(target)
        .body(Bytes::new())
        .context("failed to build the GET request")?;
    send(addr, request).await
}

/// `POST target` on `addr` with `body` as `application/json`.
pub async fn post_json(
    addr: SocketAddr,
    target: &str,
    body: &serde_json::Value,
) -> anyhow::Result<HttpReply> {
    let request = Request::builder()
        .method(Method::POST)
        .uri(target)
        .header(CONTENT_TYPE, "application/json")
        .body(Bytes::from(body.to_string()))
        .context("failed to build the POST request")?;
    send(addr, request).await
}

/// Sends `request` over a new connection to `addr` and collects the response, within
/// [`REQUEST_TIMEOUT`]. A missing `Host` header is filled from the URL's authority, else `addr`.
pub async fn send(addr: SocketAddr, mut request: Request<Bytes>) -> anyhow::Result<HttpReply> {
    if !request.headers().contains_key(HOST) {
        let host = request
            .uri()
            .authority()
            .map_or_else(|| addr.to_string(), ToString::to_string);
        let host = HeaderValue::from_str(&host).context("failed to build the Host header")?;
        request.headers_mut().insert(HOST, host);
    }
    tokio::time::timeout(REQUEST_TIMEOUT, exchange(addr, request))
        .await
        .with_context(|| {
            format!("failed to get a response from {addr} within {REQUEST_TIMEOUT:?}")
        })?
}

async fn exchange(addr: SocketAddr, request: Request<Bytes>) -> anyhow::Result<HttpReply> {
    let stream = TcpStream::connect(addr)
        .await
        .with_context(|| format!("failed to connect to {addr}"))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .context("failed the HTTP/1.1 handshake")?;
    // The connection is driven in this future rather than a spawned task, so a caller's
    // timeout tears it down too; it ends once `sender` drops at the end of the exchange.
    let exchange = async move {
        let response = sender
            .send_request(request.map(Full::new))
            .await
            .context("failed to send the request")?;
        let (parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .context("failed to read the response body")?
            .to_bytes();
        Ok(HttpReply {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    };
    let (result, _connection_end) = tokio::join!(exchange, connection);
    result
}
