//! Limits and lifecycle of the egress listeners: the tunnel cap, the idle and lifetime
//! timeouts of a tunnel, and the in-flight tracker that a graceful drain waits on.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use crate::policy::Policy;
use crate::policy::egress::{DEFAULT_IDLE, DEFAULT_TUNNEL_MAX};

/// Default cap on concurrent CONNECT tunnels per listener when neither `egress.maxTunnels`
/// nor `--max-tunnels` sets one; past it a CONNECT gets `429` + `Retry-After: 1`,
/// `too_many_tunnels`.
pub(crate) const DEFAULT_MAX_TUNNELS: usize = 1024;
/// Default cap on concurrent client connections per listener when `egress.maxConnections`
/// sets none; past it a new connection is answered `503 too_many_connections` and closed.
pub(crate) const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// Default time a SIGTERM drain waits for in-flight requests and tunnels.
pub(crate) const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The listener-level limits set on the command line. Each `Some` overrides the policy's
/// `egress.*` field; `None` follows the live policy, read per request (so reloads apply).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `--max-tunnels`: concurrent CONNECT tunnels; `0` refuses every CONNECT.
    pub(crate) max_tunnels: Option<usize>,
    /// `--tunnel-idle-timeout-ms`: idle timeout of a tunnel or relayed body.
    pub(crate) idle_timeout: Option<Duration>,
    /// Longest life of a tunnel or relayed exchange.
    pub(crate) max_lifetime: Option<Duration>,
    /// How long a drain waits before cutting what is still open.
    pub(crate) drain_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_tunnels: None,
            idle_timeout: None,
            max_lifetime: None,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
        }
    }
}

/// The limits in force for one request: command-line overrides, else the policy's
/// `egress.*`, else `fetch.*` (connect and header) or the defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Effective {
    /// Concurrent tunnels.
    pub(crate) max_tunnels: usize,
    /// Concurrent client connections.
    pub(crate) max_connections: usize,
    /// Per-address connect timeout.
    pub(crate) connect: Duration,
    /// Request and response head timeout.
    pub(crate) header: Duration,
    /// Idle timeout of a tunnel or relayed body.
    pub(crate) idle: Duration,
    /// Longest life of a tunnel or relayed exchange.
    pub(crate) lifetime: Duration,
    /// Drain deadline.
    pub(crate) drain: Duration,
}

// === impl Limits ===

impl Limits {
    /// The limits in force under `policy`.
    pub(crate) fn effective(&self, policy: &Policy) -> Effective {
        let egress = &policy.egress.limits;
        let t = egress.timeouts;
        Effective {
            max_tunnels: self
                .max_tunnels
                .or(egress.max_tunnels)
                .unwrap_or(DEFAULT_MAX_TUNNELS),
            max_connections: egress.max_connections.unwrap_or(DEFAULT_MAX_CONNECTIONS),
            connect: t.connect.unwrap_or(policy.fetch.connect_timeout),
            header: t.header.unwrap_or(policy.fetch.header_timeout),
            idle: self.idle_timeout.or(t.idle).unwrap_or(DEFAULT_IDLE),
            lifetime: self
                .max_lifetime
                .or(t.tunnel_max)
                .unwrap_or(DEFAULT_TUNNEL_MAX),
            drain: self.drain_timeout,
        }
    }
}

/// A concurrency cap (tunnels, client connections): a permit is held for the life of one. The
/// cap is passed per acquisition, so a policy reload changes it for new ones without cutting
/// open ones.
#[derive(Clone, Debug, Default)]
pub(crate) struct TunnelCap {
    open: Arc<AtomicUsize>,
}

/// One open tunnel's place under the cap; dropping it frees the place.
#[derive(Debug)]
pub(crate) struct TunnelPermit {
    open: Arc<AtomicUsize>,
}

// === impl TunnelCap ===

impl TunnelCap {
    /// A permit when fewer than `max` tunnels are open, else `None` (never waits).
    pub(crate) fn try_acquire(&self, max: usize) -> Option<TunnelPermit> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()?;
        Some(TunnelPermit {
            open: self.open.clone(),
        })
    }

    /// Tunnels open now.
    #[cfg(test)]
    pub(crate) fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }
}

impl Drop for TunnelPermit {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Counts in-flight work (connections, tunnels) so a drain can wait for it to finish.
#[derive(Clone, Debug, Default)]
pub(crate) struct Inflight {
    inner: Arc<InflightInner>,
}

#[derive(Debug, Default)]
struct InflightInner {
    count: AtomicUsize,
    idle: Notify,
}

/// Held while one unit of work is in flight; dropping it ends the unit.
#[derive(Debug)]
pub(crate) struct InflightGuard {
    inner: Arc<InflightInner>,
}

// === impl Inflight ===

impl Inflight {
    /// Start one unit of work.
    pub(crate) fn enter(&self) -> InflightGuard {
        self.inner.count.fetch_add(1, Ordering::SeqCst);
        InflightGuard {
            inner: self.inner.clone(),
        }
    }

    /// Units in flight now.
    pub(crate) fn count(&self) -> usize {
        self.inner.count.load(Ordering::SeqCst)
    }

    /// Wait until nothing is in flight.
    pub(crate) async fn wait_idle(&self) {
        loop {
            let notified = self.inner.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.count() == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        if self.inner.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.inner.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests;
