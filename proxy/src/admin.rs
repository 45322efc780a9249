//! The admin listener: `/live`, `/ready`, `/metrics`, `/v1/status`.
//!
//! It binds the pod IP (probes and the controller reach it); nothing on it mutates state.

use std::sync::Arc;

use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use prometheus::{Encoder, TextEncoder};
use serde_json::json;

use crate::respond::{self, ApiError, Body};
use crate::server::Shared;

/// The admin router.
pub async fn admin(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    if req.method() != Method::GET {
        return respond::api_error(&ApiError::MethodNotAllowed);
    }
    match req.uri().path() {
        "/live" => respond::text(StatusCode::OK, "text/plain", "live\n"),
        "/ready" => ready(&shared),
        "/metrics" => metrics(&shared),
        "/v1/status" => status(&shared),
        other => respond::api_error(&ApiError::NotFound(other.to_string())),
    }
}

/// Ready when a policy is loaded and the store root is writable.
fn ready(shared: &Shared) -> Response<Body> {
    let rt = shared.runtime.load();
    let root = &rt.policy.store.root;
    let probe = std::fs::create_dir_all(root).and_then(|_| tempfile_probe(root));
    match probe {
        Ok(()) => respond::text(StatusCode::OK, "text/plain", "ready\n"),
        Err(e) => respond::text(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            format!(
                "not ready: store root {} is not writable: {e}\n",
                root.display()
            ),
        ),
    }
}

fn tempfile_probe(root: &std::path::Path) -> std::io::Result<()> {
    let path = root.join(format!(".ready-probe-{}", std::process::id()));
    std::fs::write(&path, b"")?;
    std::fs::remove_file(&path)
}

fn metrics(shared: &Shared) -> Response<Body> {
    let mut buf = Vec::new();
    match TextEncoder::new().encode(&shared.registry.gather(), &mut buf) {
        Ok(()) => respond::text(StatusCode::OK, "text/plain; version=0.0.4", buf),
        Err(e) => respond::api_error(&ApiError::Internal(e.to_string())),
    }
}

fn status(shared: &Shared) -> Response<Body> {
    let rt = shared.runtime.load();
    let loaded_at = rt
        .loaded_at
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let listeners: serde_json::Map<String, serde_json::Value> = shared
        .listeners
        .lock()
        .map(|l| {
            l.iter()
                .map(|(k, v)| (k.clone(), json!(v.to_string())))
                .collect()
        })
        .unwrap_or_default();
    respond::json(
        StatusCode::OK,
        &json!({
            "version": env!("CARGO_PKG_VERSION"),
            "policy": {
                "sha256": rt.policy.sha256,
                "loaded_at": loaded_at,
                "warnings": rt.warnings,
            },
            "backends": {
                "extract": rt.policy.web.extract_backend,
                "search": rt.policy.web.search_backend,
            },
            "blocklist": {
                "enabled": rt.policy.blocklist.enabled,
                "rules": rt.blocklist.len(),
            },
            "listeners": listeners,
        }),
    )
}
