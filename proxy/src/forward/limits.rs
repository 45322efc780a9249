//! Limits and lifecycle of the egress listeners: the tunnel cap, the idle and lifetime
//! timeouts of a tunnel, and the in-flight tracker that a graceful drain waits on.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// Default cap on concurrent CONNECT tunnels per listener (until the policy gains
/// `egress.maxTunnels`); past it a CONNECT gets `429` + `Retry-After: 1`, `too_many_tunnels`.
pub const DEFAULT_MAX_TUNNELS: usize = 1024;
/// Default idle timeout of a tunnel or a relayed body: no byte in either direction for this
/// long ends it. Bumped on every read and write.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// Default longest life of one tunnel or one relayed HTTP exchange.
pub const DEFAULT_MAX_LIFETIME: Duration = Duration::from_secs(3600);
/// Default time a SIGTERM drain waits for in-flight requests and tunnels.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The listener-level limits (connect and header timeouts come from the live policy's
/// `fetch.*`, read per request).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Concurrent CONNECT tunnels; `0` refuses every CONNECT.
    pub max_tunnels: usize,
    /// Idle timeout of a tunnel or relayed body.
    pub idle_timeout: Duration,
    /// Longest life of a tunnel or relayed exchange.
    pub max_lifetime: Duration,
    /// How long a drain waits before cutting what is still open.
    pub drain_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_tunnels: DEFAULT_MAX_TUNNELS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_lifetime: DEFAULT_MAX_LIFETIME,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
        }
    }
}

/// The concurrent-tunnel cap: a permit is held for the life of a tunnel.
#[derive(Clone, Debug)]
pub struct TunnelCap {
    permits: Arc<Semaphore>,
}

// === impl TunnelCap ===

impl TunnelCap {
    /// A cap of `max` tunnels.
    pub fn new(max: usize) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(max.min(Semaphore::MAX_PERMITS))),
        }
    }

    /// A permit, or `None` when the cap is reached (never waits).
    pub fn try_acquire(&self) -> Option<OwnedSemaphorePermit> {
        self.permits.clone().try_acquire_owned().ok()
    }
}

/// Counts in-flight work (connections, tunnels) so a drain can wait for it to finish.
#[derive(Clone, Debug, Default)]
pub struct Inflight {
    inner: Arc<InflightInner>,
}

#[derive(Debug, Default)]
struct InflightInner {
    count: AtomicUsize,
    idle: Notify,
}

/// Held while one unit of work is in flight; dropping it ends the unit.
#[derive(Debug)]
pub struct InflightGuard {
    inner: Arc<InflightInner>,
}

// === impl Inflight ===

impl Inflight {
    /// Start one unit of work.
    pub fn enter(&self) -> InflightGuard {
        self.inner.count.fetch_add(1, Ordering::SeqCst);
        InflightGuard {
            inner: self.inner.clone(),
        }
    }

    /// Units in flight now.
    pub fn count(&self) -> usize {
        self.inner.count.load(Ordering::SeqCst)
    }

    /// Wait until nothing is in flight.
    pub async fn wait_idle(&self) {
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
mod tests {
    use super::*;

    #[test]
    fn the_tunnel_cap_refuses_past_its_size_and_frees_on_drop() {
        let cap = TunnelCap::new(2);
        let first = cap.try_acquire().expect("first permit must be granted");
        let _second = cap.try_acquire().expect("second permit must be granted");
        assert!(
            cap.try_acquire().is_none(),
            "a third tunnel must be refused"
        );
        drop(first);
        assert!(
            cap.try_acquire().is_some(),
            "a closed tunnel must free its permit"
        );
        assert!(
            TunnelCap::new(0).try_acquire().is_none(),
            "a zero cap must refuse every tunnel"
        );
    }

    #[tokio::test]
    async fn a_drain_waits_until_the_last_guard_drops() {
        let inflight = Inflight::default();
        let a = inflight.enter();
        let b = inflight.enter();
        let waiter = tokio::spawn({
            let inflight = inflight.clone();
            async move { inflight.wait_idle().await }
        });
        drop(a);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "one unit is still in flight");
        drop(b);
        tokio::time::timeout(Duration::from_secs(2), waiter)
            .await
            .expect("the drain must end once nothing is in flight")
            .expect("the waiter must not panic");
    }
}
