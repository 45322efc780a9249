//! The state every listener reads: the runtime a reload swaps whole, the gate's metrics, and
//! where each listener is bound (for the loop check and `/v1/status`).
//!
//! Features keep their own state beside it — the LLM route's [`crate::llm::LlmState`], the
//! watches' [`crate::watch::Watches`], the report's cache — and the composition root
//! ([`crate::app`]) hands each listener this and its own, nothing more.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use arc_swap::ArcSwap;

use crate::base::dialer::OwnListeners;
use crate::judge::metrics::ProxyMetrics;
use crate::live::runtime::Runtime;

/// The runtime, the gate metrics and the bound listeners.
#[derive(Debug)]
pub struct GateState {
    /// The current runtime; a reload swaps it whole.
    pub(crate) runtime: ArcSwap<Runtime>,
    /// The gate metrics.
    pub metrics: ProxyMetrics,
    /// Where each listener is bound, by name.
    pub listeners: Mutex<Vec<(String, SocketAddr)>>,
}

// === impl GateState ===

impl GateState {
    /// State around a first runtime, its gauges set.
    pub(crate) fn new(runtime: Arc<Runtime>, metrics: ProxyMetrics) -> Self {
        metrics.blocklist_rules.set(runtime.blocklist.len() as i64);
        metrics
            .policy_loaded_at
            .set(crate::base::clock::now_secs_i64());
        Self {
            runtime: ArcSwap::new(runtime),
            metrics,
            listeners: Mutex::new(Vec::new()),
        }
    }

    /// Record that listener `name` is bound at `addr`.
    pub(crate) fn bound(&self, name: &str, addr: SocketAddr) {
        self.bound_listeners().push((name.to_string(), addr));
    }

    /// Every listener of this gate as bound now, for the loop check.
    pub(crate) fn own_listeners(&self) -> OwnListeners {
        OwnListeners::new(self.bound_listeners().iter().map(|(_, a)| *a))
    }

    /// The bound listeners; a panic elsewhere while holding the lock does not hide them from
    /// the loop check (the list is only ever appended to, so it stays whole).
    pub(crate) fn bound_listeners(&self) -> MutexGuard<'_, Vec<(String, SocketAddr)>> {
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}
