//! Fleet scraping (I/O): `GET /v1/status` and `GET /v1/report` from the gate of every
//! selected pod, with bounded concurrency and a deadline per pod.
//!
//! Feeds [`crate::fleet::Aggregator`]. One slow or hanging pod costs at most its own deadline
//! and never holds the others: every pod runs in its own future, at most
//! [`ScrapeConfig::concurrency`] at a time, each wrapped in [`ScrapeConfig::per_pod_timeout`].
//! Plain HTTP/1.1 to the pod IP on the admin port; the report carries the bearer token the
//! chart's Secret holds.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use crate::fleet::{GateSnapshot, PodScrape, ScrapeFailure};

/// The gate's admin port.
pub const ADMIN_PORT: u16 = 15190;
/// Default deadline of one pod.
pub const DEFAULT_PER_POD_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest answer read from a gate.
pub const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;
/// Pods per scrape slot: a FleetPolicy selecting many pods scrapes more at once, so the pods
/// that hang until their deadline (each holding a slot that long) cost the cycle about one
/// deadline rather than one per slot's worth of them.
pub const PODS_PER_SLOT: usize = 16;
/// Most pods one FleetPolicy scrapes at once, however large.
pub const MAX_CONCURRENCY: usize = 128;
/// Most scrapes in flight in one controller process, over every FleetPolicy.
pub const MAX_IN_FLIGHT: usize = 256;

/// One pod to scrape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScrapeTarget {
    /// Pod name.
    pub pod: String,
    /// Admin address (pod IP, admin port); `None` while the pod has no IP.
    pub addr: Option<SocketAddr>,
}

/// How to scrape.
#[derive(Clone, Debug)]
pub struct ScrapeConfig {
    /// Bearer token of `/v1/report`.
    pub token: String,
    /// Deadline of one pod (both requests). Default 5 s.
    pub per_pod_timeout: Duration,
    /// Pods scraped at once, at least. Default 8; a FleetPolicy selecting more than
    /// `PODS_PER_SLOT × concurrency` pods scrapes one per [`PODS_PER_SLOT`] at once, up to
    /// [`MAX_CONCURRENCY`] (see [`ScrapeConfig::width`]).
    pub concurrency: usize,
    /// Report window (`?days=`); `None` keeps the gate's.
    pub days: Option<u32>,
    /// Scrapes in flight across every FleetPolicy of the process (each pod takes a permit
    /// before its deadline starts); `None`: only the per-FleetPolicy width bounds them.
    pub in_flight: Option<Arc<Semaphore>>,
}

// === impl ScrapeConfig ===

impl ScrapeConfig {
    /// Defaults with `token`.
    pub fn new(token: impl Into<String>) -> Self {
        Self {
            token: token.into(),
            per_pod_timeout: DEFAULT_PER_POD_TIMEOUT,
            concurrency: 8,
            days: None,
            in_flight: None,
        }
    }
}

// === impl ScrapeConfig (width) ===

impl ScrapeConfig {
    /// Pods scraped at once for `targets` pods: the configured concurrency, raised to one per
    /// [`PODS_PER_SLOT`] pods, capped at [`MAX_CONCURRENCY`] (or the configured value if higher).
    pub fn width(&self, targets: usize) -> usize {
        let floor = self.concurrency.max(1);
        floor.max(targets.div_ceil(PODS_PER_SLOT).min(MAX_CONCURRENCY))
    }
}

/// Scrape every target; the answers come back in target order.
pub async fn scrape_all(targets: &[ScrapeTarget], cfg: &ScrapeConfig) -> Vec<PodScrape> {
    let mut results: Vec<(usize, PodScrape)> = scrape_each(targets, cfg).collect().await;
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, s)| s).collect()
}

/// Scrape every target; each answer (with its target's index) as it lands, so a caller can
/// fold it in and drop it rather than hold every gate's answer until the last one.
pub fn scrape_each(
    targets: &[ScrapeTarget],
    cfg: &ScrapeConfig,
) -> impl futures_util::Stream<Item = (usize, PodScrape)> + Send + 'static {
    let width = cfg.width(targets.len());
    // Owned inputs per future: the stream must be `Send` for the controller's spawned task.
    let jobs: Vec<(usize, ScrapeTarget, ScrapeConfig)> = targets
        .iter()
        .enumerate()
        .map(|(i, t)| (i, t.clone(), cfg.clone()))
        .collect();
    futures_util::stream::iter(jobs)
        .map(|(i, t, cfg)| async move {
            let outcome = match t.addr {
                None => Err(ScrapeFailure::NoAddress),
                Some(addr) => {
                    // Waiting for a permit is the controller's queue, not the gate's slowness.
                    let _permit = match &cfg.in_flight {
                        Some(limit) => limit.clone().acquire_owned().await.ok(),
                        None => None,
                    };
                    tokio::time::timeout(cfg.per_pod_timeout, scrape_one(addr, &cfg))
                        .await
                        .unwrap_or(Err(ScrapeFailure::Timeout))
                }
            };
            (
                i,
                PodScrape {
                    pod: t.pod,
                    outcome,
                },
            )
        })
        .buffer_unordered(width)
}

/// Both requests to one gate.
pub async fn scrape_one(
    addr: SocketAddr,
    cfg: &ScrapeConfig,
) -> Result<GateSnapshot, ScrapeFailure> {
    let status: serde_json::Value = get_json(addr, "/v1/status", None).await?;
    let path = match cfg.days {
        Some(d) => format!("/v1/report?days={d}"),
        None => "/v1/report".to_string(),
    };
    let report = get_json(addr, &path, Some(&cfg.token)).await?;
    Ok(GateSnapshot {
        policy_sha256: status
            .pointer("/policy/sha256")
            .and_then(|v| v.as_str())
            .map(str::to_string),
        llm_spend: crate::budgets::from_status(&status),
        report,
    })
}

async fn get_json<T: serde::de::DeserializeOwned>(
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
) -> Result<T, ScrapeFailure> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|e| ScrapeFailure::Unreachable(e.to_string()))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| ScrapeFailure::Unreachable(e.to_string()))?;
    // The connection's driver ends with this future, however the scrape ends (a deadline
    // included): no task outlives the scrape of its pod.
    let driver = AbortOnDrop(tokio::spawn(conn));
    let mut req = Request::get(path).header(http::header::HOST, addr.to_string());
    if let Some(t) = token {
        req = req.header(http::header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let req = req
        .body(Empty::<Bytes>::new())
        .map_err(|e| ScrapeFailure::BadResponse(e.to_string()))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| ScrapeFailure::Unreachable(e.to_string()))?;
    let status = resp.status();
    let body = Limited::new(resp.into_body(), MAX_ANSWER_BYTES)
        .collect()
        .await
        .map_err(|e| ScrapeFailure::BadResponse(format!("failed to read {path}: {e}")))?
        .to_bytes();
    drop(driver);
    match status {
        StatusCode::OK => serde_json::from_slice(&body).map_err(|e| {
            ScrapeFailure::BadResponse(format!("{path} is not the expected JSON: {e}"))
        }),
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Err(ScrapeFailure::Unauthorized),
        other => Err(ScrapeFailure::BadResponse(format!(
            "{path} answered {other}"
        ))),
    }
}

/// Aborts the task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Stable snake_case code of a failure (logs, metric labels).
pub fn failure_code(f: &ScrapeFailure) -> &'static str {
    match f {
        ScrapeFailure::NoAddress => "no_address",
        ScrapeFailure::Timeout => "timeout",
        ScrapeFailure::Unreachable(_) => "unreachable",
        ScrapeFailure::Unauthorized => "unauthorized",
        ScrapeFailure::BadResponse(_) => "bad_response",
    }
}
