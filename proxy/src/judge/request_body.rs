//! Request bodies on the api and admin listeners: read whole, under the route's size cap, an idle and a
//! total deadline, and the listener's budget of bytes all in-flight bodies may hold together.
//!
//! Without a budget, a request body costs the gate whatever the client sends before its last
//! byte: forty LLM bodies of 30 MB, each short of its last byte, would hold 1.2 GB. Each body
//! here takes its room from the listener's [`BodyBudget`] before it grows (the declared
//! `Content-Length` at once, a chunked body as its buffer grows) and gives it back when the
//! request is answered; a body that finds no room is refused with `503
//! body_budget_exhausted` and the requests already admitted go on. A body that stops sending
//! for [`BodyLimits::idle`], or is not whole after [`BodyLimits::total`], is refused with
//! `408 body_timeout` and its connection closed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use tokio::time::{Instant, timeout_at};

use crate::judge::telemetry::decision::DecisionLine;

/// Default longest pause between two pieces of a request body.
pub(crate) const DEFAULT_BODY_IDLE: Duration = Duration::from_secs(10);
/// Default longest time a request body may take in all.
pub(crate) const DEFAULT_BODY_TOTAL: Duration = Duration::from_secs(60);
/// Default bytes all in-flight request bodies of one listener may hold together: three LLM
/// bodies at `llm.maxRequestBytes`' default of 32 MiB.
pub(crate) const DEFAULT_BODY_BUDGET: usize = 96 * 1024 * 1024;

/// The deadlines of one body and the budget of all of a listener's bodies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BodyLimits {
    /// Longest pause between two pieces of a body.
    pub(crate) idle: Duration,
    /// Longest time a body may take, from when the route starts reading it.
    pub(crate) total: Duration,
    /// Bytes all in-flight bodies of the listener may hold together.
    pub(crate) budget: usize,
}

impl Default for BodyLimits {
    fn default() -> Self {
        Self {
            idle: DEFAULT_BODY_IDLE,
            total: DEFAULT_BODY_TOTAL,
            budget: DEFAULT_BODY_BUDGET,
        }
    }
}

/// The bytes a listener's in-flight request bodies hold, under [`BodyLimits::budget`]. Cloned
/// into every request of the listener (as a request extension, with the request's client).
#[derive(Clone, Debug)]
pub(crate) struct BodyBudget {
    held: Arc<AtomicUsize>,
    limits: BodyLimits,
    /// The listener's name, for the decision line of a refused body.
    listener: &'static str,
    /// The client of the request this copy went to.
    client: Option<SocketAddr>,
}

// === impl BodyBudget ===

impl BodyBudget {
    /// An empty budget of `limits.budget` bytes for listener `listener`.
    pub(crate) fn new(listener: &'static str, limits: BodyLimits) -> Self {
        Self {
            held: Arc::new(AtomicUsize::new(0)),
            limits,
            listener,
            client: None,
        }
    }

    /// This budget, for a request from `client`.
    pub(crate) fn for_client(&self, client: SocketAddr) -> Self {
        Self {
            client: Some(client),
            ..self.clone()
        }
    }

    /// Bytes held now by the listener's bodies.
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// The deadlines and the budget.
    pub(crate) fn limits(&self) -> BodyLimits {
        self.limits
    }

    /// A hold of nothing yet, growing under this budget.
    pub(crate) fn hold(&self) -> BodyHold {
        BodyHold {
            budget: self.clone(),
            bytes: 0,
        }
    }

    /// Take `n` more bytes when they fit under the budget (never waits).
    fn try_take(&self, n: usize) -> bool {
        let budget = self.limits.budget;
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(n).filter(|total| *total <= budget)
            })
            .is_ok()
    }
}

/// The bytes one body holds under its listener's budget; given back when dropped, so the
/// caller keeps it for as long as the body's bytes (or what was built from them) live.
#[derive(Debug)]
pub(crate) struct BodyHold {
    budget: BodyBudget,
    bytes: usize,
}

// === impl BodyHold ===

impl BodyHold {
    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Grow the hold to `total` bytes, or [`BodyError::OverBudget`].
    fn grow_to(&mut self, total: usize) -> Result<(), BodyError> {
        let more = total.saturating_sub(self.bytes);
        if more == 0 {
            return Ok(());
        }
        if !self.budget.try_take(more) {
            return Err(BodyError::OverBudget {
                budget: self.budget.limits.budget,
            });
        }
        self.bytes = total;
        Ok(())
    }
}

impl Drop for BodyHold {
    fn drop(&mut self) {
        self.budget.held.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// Why a request body was not read whole.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    /// The body is over the route's cap.
    #[error("request body larger than {0} bytes")]
    TooLarge(usize),
    /// The listener's bodies already hold their budget.
    #[error(
        "the gate holds its limit of {budget} bytes of request bodies in flight; retry shortly"
    )]
    OverBudget {
        /// The listener's budget.
        budget: usize,
    },
    /// No piece of the body arrived for the idle deadline.
    #[error("the request body stalled: nothing arrived for {} ms", .0.as_millis())]
    Idle(Duration),
    /// The body was not whole by the total deadline.
    #[error("the request body was not complete within {} ms", .0.as_millis())]
    Total(Duration),
    /// The connection failed while the body was read.
    #[error("failed to read the body: {0}")]
    Read(String),
}

// === impl BodyError ===

impl BodyError {
    /// Stable code (the answer's `code`, the decision line's `reason`).
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::TooLarge(_) => "payload_too_large",
            Self::OverBudget { .. } => "body_budget_exhausted",
            Self::Idle(_) | Self::Total(_) => "body_timeout",
            Self::Read(_) => "invalid_request",
        }
    }

    /// The decision line's `gate`: which bound refused the body.
    pub(crate) fn gate(&self) -> &'static str {
        match self {
            Self::TooLarge(_) => "body_size",
            Self::OverBudget { .. } => "body_budget",
            Self::Idle(_) | Self::Total(_) => "body_deadline",
            Self::Read(_) => "body_read",
        }
    }
}

/// Read the body of the request whose head is `parts` ([`read_body`] under the budget of its
/// listener, set by `api::serve_http`; a request that did not come through it gets a budget
/// of its own with the default limits). A body refused for its size, the budget or a deadline
/// writes one decision line (`proxy_type` as given, the path as the URL, secrets redacted).
pub(crate) async fn read_for<B>(
    parts: &http::request::Parts,
    body: B,
    cap: usize,
    proxy_type: &'static str,
) -> Result<(Bytes, BodyHold), BodyError>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let started = Instant::now();
    let budget = parts
        .extensions
        .get::<BodyBudget>()
        .cloned()
        .unwrap_or_else(|| BodyBudget::new("api", BodyLimits::default()));
    let read = read_body(body, cap, &budget).await;
    if let Err(e) = &read {
        tracing::debug!(listener = budget.listener, error = %e, "request body refused");
        if !matches!(e, BodyError::Read(_)) {
            let path = crate::judge::gates::secret_url::redact_secrets(parts.uri.path());
            DecisionLine {
                listener: budget.listener,
                proxy_type,
                method: Some(parts.method.as_str()),
                gate: e.gate(),
                verdict: "deny",
                reason: e.code(),
                url: &path,
                client: budget.client,
                vendor: None,
                upstream: None,
                upstream_status: None,
                request_bytes: None,
                cache: "bypass",
                original_dst: None,
                started,
            }
            .write();
        }
    }
    read
}

/// Read `body` whole: at most `cap` bytes, under `budget`'s deadlines, its bytes held in a
/// [`BodyHold`] of `budget` (returned with them). A body that declares its length takes that
/// room at once, so one that can never fit is refused before a byte is read; one that does
/// not grows its hold with its buffer (doubling, up to `cap`).
pub(crate) async fn read_body<B>(
    mut body: B,
    cap: usize,
    budget: &BodyBudget,
) -> Result<(Bytes, BodyHold), BodyError>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let limits = budget.limits();
    let mut hold = budget.hold();
    let declared = body.size_hint().exact();
    if let Some(n) = declared {
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        if n > cap {
            return Err(BodyError::TooLarge(cap));
        }
        hold.grow_to(n)?;
    } else if !body.is_end_stream() && budget.held() >= limits.budget {
        return Err(BodyError::OverBudget {
            budget: limits.budget,
        });
    }
    let mut buf: Vec<u8> = Vec::with_capacity(hold.bytes());
    let until = Instant::now() + limits.total;
    loop {
        let next = (Instant::now() + limits.idle).min(until);
        let frame = match timeout_at(next, body.frame()).await {
            Ok(Some(Ok(frame))) => frame,
            Ok(Some(Err(e))) => return Err(BodyError::Read(e.to_string())),
            Ok(None) => break,
            Err(_) if next >= until => return Err(BodyError::Total(limits.total)),
            Err(_) => return Err(BodyError::Idle(limits.idle)),
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers: nothing to keep
        };
        let need = buf.len().saturating_add(data.len());
        if need > cap {
            return Err(BodyError::TooLarge(cap));
        }
        if need > buf.capacity() {
            let grown = need.max(buf.capacity().saturating_mul(2)).min(cap);
            hold.grow_to(grown)?;
            buf.reserve_exact(grown - buf.len());
        }
        buf.extend_from_slice(&data);
    }
    Ok((Bytes::from(buf), hold))
}

#[cfg(test)]
mod tests;
