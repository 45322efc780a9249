//! A minimal loopback HTTP/1.1 origin for the benchmarks: `200 text/plain` with
//! `hello, world\n` (or the contents of the file given as the second argument, served as
//! `text/markdown`) to every request, keep-alive, on `127.0.0.1:0` (or the address given as the
//! first argument). Prints `{"listening": "ADDR"}` once bound.

#![allow(clippy::print_stdout)]

use std::convert::Infallible;

use bytes::Bytes;
use http::{Response, header};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".into());
    let (body, content_type): (Bytes, &'static str) = match std::env::args().nth(2) {
        Some(path) => (Bytes::from(std::fs::read(path)?), "text/markdown"),
        None => (Bytes::from_static(b"hello, world\n"), "text/plain"),
    };
    let listener = TcpListener::bind(&addr).await?;
    println!("{{\"listening\": \"{}\"}}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let body = body.clone();
        tokio::spawn(async move {
            let service = service_fn(move |_req| {
                let body = body.clone();
                async move {
                    let mut resp = Response::new(Full::new(body));
                    resp.headers_mut().insert(
                        header::CONTENT_TYPE,
                        header::HeaderValue::from_static(content_type),
                    );
                    Ok::<_, Infallible>(resp)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
