//! The admin listener: `/live`, `/ready`, `/metrics`, `/v1/status`.
//!
//! It binds the pod IP (probes and the controller reach it); nothing on it mutates state.

use std::sync::Arc;

use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use prometheus::{Encoder, TextEncoder};
use serde_json::json;

use crate::api::Shared;
use crate::judge::respond::{self, ApiError, Body};

/// The admin router.
pub(crate) async fn admin(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    if req.method() != Method::GET {
        return respond::api_error(&ApiError::MethodNotAllowed);
    }
    if req.uri().path() == "/v1/report" {
        return report(&shared, &req).await;
    }
    match req.uri().path() {
        "/live" => respond::text(StatusCode::OK, "text/plain", "live\n"),
        "/ready" => ready(&shared).await,
        "/metrics" => metrics(&shared),
        "/v1/status" => status(&shared),
        other => respond::api_error(&ApiError::NotFound(other.to_string())),
    }
}

/// How long the store root's write probe may take before the gate is not ready.
const READY_PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Ready when a policy is loaded and the store root is writable. The probe writes on a
/// blocking thread: a volume that hangs makes the gate not ready, it does not stop the
/// listeners that share this thread.
async fn ready(shared: &Shared) -> Response<Body> {
    let rt = shared.gate.runtime.load_full();
    let root = rt.policy.store.root.clone();
    let probe_root = root.clone();
    let probe = tokio::task::spawn_blocking(move || {
        std::fs::create_dir_all(&probe_root).and_then(|_| tempfile_probe(&probe_root))
    });
    let probe = match tokio::time::timeout(READY_PROBE_TIMEOUT, probe).await {
        Ok(Ok(done)) => done,
        Ok(Err(e)) => Err(std::io::Error::other(e.to_string())),
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer within {} s", READY_PROBE_TIMEOUT.as_secs()),
        )),
    };
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
    shared.gate.metrics.sync_log_drops();
    let mut buf = Vec::new();
    match TextEncoder::new().encode(&shared.registry.gather(), &mut buf) {
        Ok(()) => respond::text(StatusCode::OK, "text/plain; version=0.0.4", buf),
        Err(e) => respond::api_error(&ApiError::Internal(e.to_string())),
    }
}

fn status(shared: &Shared) -> Response<Body> {
    let rt = shared.gate.runtime.load();
    let loaded_at = crate::base::clock::unix_secs(rt.loaded_at);
    let listeners: serde_json::Map<String, serde_json::Value> = shared
        .gate
        .bound_listeners()
        .iter()
        .map(|(k, v)| (k.clone(), json!(v.to_string())))
        .collect();
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
                "rescue": rt.web.backends.rescue.iter().map(|b| b.name()).collect::<Vec<_>>(),
                "available": backend_availability(&rt),
            },
            "cache": rt.web.cache.status(),
            "blocklist": {
                "enabled": rt.policy.blocklist.enabled,
                "rules": rt.blocklist.len(),
            },
            "listeners": listeners,
            // This pod's LLM spend today (UTC day), per budget role: what the controller sums
            // against a namespace budget.
            "llm": {"spend": shared.llm.spend.snapshot(crate::base::clock::now_secs())},
        }),
    )
}

/// `GET /v1/report[?days=N]`: the fleet report of the mounted Hermes home, behind the bearer
/// token of `report.tokenFile`. Without a token or a Hermes home configured the endpoint is off.
async fn report(shared: &Arc<Shared>, req: &Request<Incoming>) -> Response<Body> {
    let rt = shared.gate.runtime.load_full();
    let cfg = &rt.policy.report;
    let (Some(token_file), Some(home)) = (&cfg.token_file, &cfg.hermes_home) else {
        return respond::api_error(&ApiError::Disabled(
            "the report endpoint is off: set report.tokenFile and report.hermesHome in the policy"
                .into(),
        ));
    };
    let expected = match crate::policy::file::read_regular_to_string(token_file) {
        Ok(t) if !t.trim().is_empty() => t.trim().to_string(),
        Ok(_) | Err(_) => {
            return respond::api_error(&ApiError::Internal(format!(
                "failed to read the report token file {}",
                token_file.display()
            )));
        }
    };
    let presented = req
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if !constant_time_eq(presented.trim().as_bytes(), expected.as_bytes()) {
        return respond::api_error(&ApiError::Unauthorized);
    }
    let mut opts = crate::report::ReportOptions::new(home);
    opts.days = query_days(req.uri().query()).unwrap_or(cfg.days);
    if let Some(dir) = &cfg.managed_dir {
        opts.managed_dir = crate::report::ManagedDir::At(dir.clone());
    }
    // SQLite reads block: keep them off the async workers. The cost figures come from the
    // cache kept between calls (only what is new is read).
    let worker = Arc::clone(shared);
    let computed = tokio::task::spawn_blocking(move || {
        let before = worker.report_cache.counters();
        let report = crate::report::fleet_report_cached(&opts, &worker.report_cache);
        (report, before, worker.report_cache.counters())
    })
    .await;
    match computed {
        Ok((mut report, before, after)) => {
            shared.report_gauges.observe(&report.crons.cost);
            shared.report_gauges.observe_computation(before, after);
            // The gate's own wire observations (LLM route) join the observer's file.
            report
                .status
                .observed
                .merge(shared.llm.observations.observed());
            match serde_json::to_value(&report) {
                Ok(v) => respond::json(StatusCode::OK, &v),
                Err(e) => respond::api_error(&ApiError::Internal(e.to_string())),
            }
        }
        Err(e) => respond::api_error(&ApiError::Internal(format!("report task failed: {e}"))),
    }
}

fn query_days(query: Option<&str>) -> Option<u32> {
    query?
        .split('&')
        .find_map(|kv| kv.strip_prefix("days="))
        .and_then(|v| v.parse().ok())
        .filter(|d| (1..=3650).contains(d))
}

/// Compare secrets without an early exit on the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Each configured backend with whether it can be called now (credential present) and whether
/// it is called without a key (a third party then reads the agent's URLs and queries).
fn backend_availability(rt: &crate::live::runtime::Runtime) -> serde_json::Value {
    let b = &rt.web.backends;
    let all = std::iter::once(&b.extract)
        .chain(b.search.iter())
        .chain(b.rescue.iter());
    let mut out = serde_json::Map::new();
    for backend in all {
        out.insert(
            backend.name().to_string(),
            json!({
                "available": backend.available(),
                "keyless": backend.keyless(),
                "extract": backend.capabilities().extract,
                "search": backend.capabilities().search,
            }),
        );
    }
    serde_json::Value::Object(out)
}
