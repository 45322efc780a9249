//! The controller's admin listener: `/live`, `/ready` and `/metrics` (Prometheus text).
//!
//! Read-only; it runs beside the controller loop so probes and scrapes never wait on it.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use fleetgate_accept::Acceptor;
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
    /// When the API server last answered (Unix seconds), kept by [`probe_api_server`]; with
    /// it, `/ready` also needs an answer within [`API_FRESHNESS`].
    pub api_answered_at: Option<Arc<AtomicI64>>,
    /// What must have synced before `/ready` (the reconciler's and the webhook's FleetPolicy
    /// reflectors), each with the name `/ready` gives while it has not.
    pub synced: Vec<(&'static str, Arc<AtomicBool>)>,
}

/// How recent the API server's last answer must be for `/ready`.
pub const API_FRESHNESS: Duration = Duration::from_secs(30);
/// How often [`probe_api_server`] asks.
pub const API_PROBE_INTERVAL: Duration = Duration::from_secs(10);

/// Ask the API server for its version every [`API_PROBE_INTERVAL`] and record when it
/// answered; runs until the task is dropped.
pub async fn probe_api_server(client: kube::Client, answered_at: Arc<AtomicI64>) {
    loop {
        match client.apiserver_version().await {
            Ok(_) => answered_at.store(unix_now(), Ordering::Relaxed),
            Err(e) => debug!(error = %e, "admin.api_server_unanswered"),
        }
        tokio::time::sleep(API_PROBE_INTERVAL).await;
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Why the controller is not ready, or `None` when it is.
fn not_ready(state: &AdminState) -> Option<String> {
    if !state.ready.load(Ordering::Relaxed) {
        return Some("not ready: the controller has not started\n".into());
    }
    if let Some((what, _)) = state
        .synced
        .iter()
        .find(|(_, f)| !f.load(Ordering::Relaxed))
    {
        return Some(format!("not ready: {what} has not synced\n"));
    }
    let answered = state.api_answered_at.as_ref()?.load(Ordering::Relaxed);
    let quiet = unix_now().saturating_sub(answered);
    (quiet > API_FRESHNESS.as_secs() as i64).then(|| match answered {
        0 => "not ready: the API server has not answered yet\n".to_string(),
        _ => format!("not ready: the API server has not answered for {quiet} s\n"),
    })
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
        ("GET", "/ready") => match not_ready(state) {
            None => text(StatusCode::OK, "ready\n".into()),
            Some(why) => text(StatusCode::SERVICE_UNAVAILABLE, why.into_bytes()),
        },
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
