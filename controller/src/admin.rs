//! The controller's admin listener: `/live`, `/ready` and `/metrics` (Prometheus text).
//!
//! Read-only; it runs beside the controller loop so probes and scrapes never wait on it.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use fleetgate_proxy::accept::Acceptor;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prometheus::{Encoder, IntCounterVec, Registry, TextEncoder};
use tokio::net::TcpListener;
use tracing::debug;

#[cfg(test)]
mod tests;

/// What the admin endpoints read.
#[derive(Clone, Debug, Default)]
pub struct AdminState {
    /// The registry `/metrics` renders.
    pub registry: Registry,
    /// Set once the controller has checked the CRD and started watching.
    pub ready: Arc<AtomicBool>,
    /// Where failed accepts are counted (`fleetgate_controller_accept_errors_total`).
    pub accept_errors: Option<IntCounterVec>,
}

/// Serve the admin endpoints on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, state: AdminState) {
    let mut acceptor = Acceptor::new("admin", state.accept_errors.clone());
    loop {
        let (stream, _) = acceptor.accept(&listener).await;
        let state = state.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(route(&state, &req)) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                debug!(error = %e, "admin.connection_failed");
            }
        });
    }
}

/// The admin router.
pub fn route(state: &AdminState, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    match (req.method().as_str(), req.uri().path()) {
        ("GET", "/live") => text(StatusCode::OK, "live\n".into()),
        ("GET", "/ready") if state.ready.load(Ordering::Relaxed) => {
            text(StatusCode::OK, "ready\n".into())
        }
        ("GET", "/ready") => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: the controller has not started\n".into(),
        ),
        ("GET", "/metrics") => {
            let mut buf = Vec::new();
            match TextEncoder::new().encode(&state.registry.gather(), &mut buf) {
                Ok(()) => text(StatusCode::OK, buf),
                Err(e) => text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("failed to encode metrics: {e}\n").into_bytes(),
                ),
            }
        }
        (_, path) => text(
            StatusCode::NOT_FOUND,
            format!("no admin endpoint {path}\n").into_bytes(),
        ),
    }
}

fn text(status: StatusCode, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    resp
}
