//! The transparent listener: its limits, binding (IPv4 and the IPv6 twin), and the accept
//! loop with the connection cap and the drain; each connection is handled by `connection`.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use super::connection::Connection;
use crate::accept::Acceptor;
use crate::policy::Policy;
use crate::relay::capture::Refusal;
use crate::relay::limits::TunnelCap;
use crate::state::GateState;

/// The `listener` label of this listener's metrics and log lines (both address families).
pub const LISTENER: &str = "transparent";

/// The transparent port the init rules redirect to.
pub const DEFAULT_PORT: u16 = 15182;

/// Where the listener learns a connection's original destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OriginalDstSource {
    /// Production: `SO_ORIGINAL_DST` / `IP6T_SO_ORIGINAL_DST`. A connection without a NAT
    /// record, or whose record names the listener itself, is refused (`no_original_dst`).
    Kernel,
    /// Test seam, for tests that connect straight to the listener without iptables: every
    /// connection is treated as if it had been redirected from this address. `serve` in the
    /// command line never builds it; the gate logic is the same for both sources.
    FixedForTests(SocketAddr),
}

/// Limits of the transparent listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransparentConfig {
    /// How long the client may take to send a complete ClientHello or request head.
    pub sniff_timeout: Duration,
    /// How long one connect attempt to a checked address may take.
    pub connect_timeout: Duration,
    /// Cut a spliced connection after this long without a byte either way.
    pub idle_timeout: Duration,
    /// Cut a spliced connection after this long in all.
    pub total_timeout: Duration,
    /// Concurrent connections; the next one is refused (`too_many_tunnels`).
    pub max_connections: usize,
    /// On shutdown, how long in-flight connections may finish before they are cut.
    pub drain_timeout: Duration,
}

impl Default for TransparentConfig {
    fn default() -> Self {
        Self {
            sniff_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            total_timeout: Duration::from_secs(3600),
            max_connections: 4096,
            drain_timeout: Duration::from_secs(8),
        }
    }
}

// === impl TransparentConfig ===

impl TransparentConfig {
    /// Defaults, with the connect timeout of `fetch.connectTimeoutMs`.
    pub fn from_policy(policy: &Policy) -> Self {
        Self {
            connect_timeout: policy.fetch.connect_timeout,
            ..Self::default()
        }
    }

    /// These limits with the live policy's `egress.maxTunnels` and `egress.timeouts` over
    /// them (a field the policy leaves unset keeps this config's value); read per
    /// connection, so a reload applies to the next connection.
    pub fn under(&self, policy: &Policy) -> Self {
        let egress = &policy.egress.limits;
        let t = egress.timeouts;
        Self {
            sniff_timeout: t.header.unwrap_or(self.sniff_timeout),
            connect_timeout: t.connect.unwrap_or(self.connect_timeout),
            idle_timeout: t.idle.unwrap_or(self.idle_timeout),
            total_timeout: t.tunnel_max.unwrap_or(self.total_timeout),
            max_connections: egress
                .max_connections
                .or(egress.max_tunnels)
                .unwrap_or(self.max_connections),
            drain_timeout: self.drain_timeout,
        }
    }
}

/// Bind the transparent listener on `addr`, named `transparent`. When `addr` is
/// `127.0.0.1`, also `[::1]` on the same port (`transparent_v6`), where ip6tables' REDIRECT
/// sends local IPv6 traffic; a host without IPv6 only gets a warning.
pub async fn bind(addr: SocketAddr) -> std::io::Result<Vec<(&'static str, TcpListener)>> {
    let v4 = TcpListener::bind(addr).await?;
    let port = v4.local_addr()?.port();
    let mut out = vec![("transparent", v4)];
    if addr.ip() == IpAddr::from([127, 0, 0, 1]) {
        match TcpListener::bind((Ipv6Addr::LOCALHOST, port)).await {
            Ok(v6) => out.push(("transparent_v6", v6)),
            Err(e) => tracing::warn!(error = %e, port, "no IPv6 transparent listener on [::1]"),
        }
    }
    Ok(out)
}

/// Bind `listen.transparent` ([`bind`]), record the listeners in `gate.listeners` (the loop
/// check reads them) and spawn their accept loops with the kernel's original destination.
/// Returns each listener's name, address and task, for the listening line and the drain.
pub async fn spawn(
    addr: SocketAddr,
    gate: &Arc<GateState>,
    shutdown: &watch::Receiver<bool>,
) -> std::io::Result<Vec<(&'static str, SocketAddr, JoinHandle<()>)>> {
    let config = TransparentConfig::from_policy(&gate.runtime.load().policy);
    let mut started = Vec::new();
    for (name, listener) in bind(addr).await? {
        let local = listener.local_addr()?;
        gate.bound(name, local);
        let source = OriginalDstSource::Kernel;
        let task = serve(
            listener,
            Arc::clone(gate),
            source,
            config.clone(),
            shutdown.clone(),
        );
        started.push((name, local, tokio::spawn(task)));
    }
    Ok(started)
}

/// Accept connections until `shutdown` flips, then let in-flight ones finish for
/// [`TransparentConfig::drain_timeout`].
pub async fn serve(
    listener: TcpListener,
    gate: Arc<GateState>,
    source: OriginalDstSource,
    config: TransparentConfig,
    mut shutdown: watch::Receiver<bool>,
) {
    let open = TunnelCap::default();
    let accepted_total = gate
        .metrics
        .listener_connections
        .with_label_values(&[LISTENER]);
    let mut acceptor = Acceptor::new(LISTENER, Some(gate.metrics.accept_errors.clone()));
    let mut tasks = JoinSet::new();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = acceptor.accept(&listener) => accepted,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            _ = shutdown.changed() => break,
        };
        accepted_total.inc();
        let live = Arc::new(config.under(&gate.runtime.load().policy));
        let cap = live.max_connections;
        let conn = Connection::new(Arc::clone(&gate), live, source, peer, shutdown.clone());
        match open.try_acquire(cap) {
            Some(permit) => tasks.spawn(async move {
                conn.run(stream).await;
                drop(permit);
            }),
            None => tasks.spawn(async move {
                let refusal = Refusal::Overloaded(conn.max_connections());
                conn.refuse_unread(stream, refusal).await
            }),
        };
    }
    drop(listener);
    let drain = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(config.drain_timeout, drain)
        .await
        .is_err()
    {
        tracing::warn!(
            listener = LISTENER,
            "drain deadline reached; cutting what is still open"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_limits_override_only_the_fields_they_set() {
        let base = TransparentConfig {
            sniff_timeout: Duration::from_millis(100),
            ..TransparentConfig::default()
        };
        let unset = Policy::parse(b"version: v1\n", std::path::Path::new("."))
            .expect("empty policy must load");
        assert_eq!(
            base.under(&unset),
            base,
            "a policy without egress limits must keep the listener's config"
        );
        let set = Policy::parse(
            b"version: v1\negress:\n  maxTunnels: 3\n  timeouts: {headerSeconds: 2, idleSeconds: 7}\n",
            std::path::Path::new("."),
        )
        .expect("test policy must load");
        let live = base.under(&set);
        assert_eq!(live.max_connections, 3, "maxTunnels caps connections");
        assert_eq!(
            live.sniff_timeout,
            Duration::from_secs(2),
            "headerSeconds bounds the sniff"
        );
        assert_eq!(
            live.idle_timeout,
            Duration::from_secs(7),
            "idleSeconds applies"
        );
        assert_eq!(
            live.total_timeout, base.total_timeout,
            "an unset lifetime keeps the config's"
        );
    }
}
