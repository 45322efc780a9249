//! What the transparent listener and its connections share: the listener's label, its
//! default port, where it learns a connection's original destination, and its limits.

use std::net::SocketAddr;
use std::time::Duration;

use crate::policy::Policy;

/// The `listener` label of this listener's metrics and log lines (both address families).
pub const LISTENER: &str = "transparent";

/// The transparent port the init rules redirect to.
pub const DEFAULT_PORT: u16 = fleetgate_iptables::DEFAULT_TO_PORT;

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
    pub(crate) fn from_policy(policy: &Policy) -> Self {
        Self {
            connect_timeout: policy.fetch.connect_timeout,
            ..Self::default()
        }
    }

    /// These limits with the live policy's `egress.maxTunnels` and `egress.timeouts` over
    /// them (a field the policy leaves unset keeps this config's value); read per
    /// connection, so a reload applies to the next connection.
    pub(crate) fn under(&self, policy: &Policy) -> Self {
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
