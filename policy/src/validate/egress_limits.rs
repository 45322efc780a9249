//! The limit fields of `egress:` and `egress.rawTunnelPorts`, validated into the types of
//! [`crate::egress`].

use std::time::Duration;

use super::Validator;
use crate::egress::{EgressLimits, EgressTimeouts, MAX_TUNNELS_CEILING, RawEgressTimeouts};

impl Validator<'_> {
    /// Validate the limit fields of `egress:`; every problem names its field.
    pub(super) fn egress_limits(
        &mut self,
        allow_raw_ip: Option<bool>,
        [max_tunnels, max_connections]: [Option<u64>; 2],
        timeouts: Option<RawEgressTimeouts>,
    ) -> EgressLimits {
        let mut cap = |field: &str, n: Option<u64>, defaults: &str| {
            let n = n?;
            if (1..=MAX_TUNNELS_CEILING).contains(&n) {
                return usize::try_from(n).ok();
            }
            self.err(
                format!("egress.{field}"),
                format!("{n} is out of range; set 1..{MAX_TUNNELS_CEILING} ({defaults})"),
            );
            None
        };
        let max_tunnels = cap(
            "maxTunnels",
            max_tunnels,
            "default 1024 for the forward proxy, 4096 for transparent capture",
        );
        let max_connections = cap("maxConnections", max_connections, "default 4096");
        let raw = timeouts.unwrap_or_default();
        let mut secs = |field: &str, v: Option<u64>, max: u64| {
            let v = v?;
            if (1..=max).contains(&v) {
                return Some(Duration::from_secs(v));
            }
            self.err(
                format!("egress.timeouts.{field}"),
                format!("{v} is out of range; set 1..{max} seconds"),
            );
            None
        };
        let timeouts = EgressTimeouts {
            connect: secs("connectSeconds", raw.connect_seconds, 300),
            header: secs("headerSeconds", raw.header_seconds, 600),
            idle: secs("idleSeconds", raw.idle_seconds, 86_400),
            tunnel_max: secs("tunnelMaxSeconds", raw.tunnel_max_seconds, 7 * 86_400),
        };
        EgressLimits {
            allow_raw_ip: allow_raw_ip.unwrap_or(false),
            raw_tunnel_ports: Vec::new(),
            max_tunnels,
            max_connections,
            timeouts,
        }
    }
}

impl Validator<'_> {
    /// Validate `egress.rawTunnelPorts` against the port allow-list `ports`: each port once,
    /// between 1 and 65535, and on `egress.ports` (a raw port the port list refuses would
    /// never be reached, and a typo would silently open nothing).
    pub(super) fn raw_tunnel_ports(&mut self, raw: Vec<u16>, ports: &[u16]) -> Vec<u16> {
        let mut valid = Vec::with_capacity(raw.len());
        for (i, port) in raw.into_iter().enumerate() {
            let field = format!("egress.rawTunnelPorts[{i}]");
            if port == 0 {
                self.err(
                    field,
                    "port 0 is not a port; list ports between 1 and 65535",
                );
            } else if valid.contains(&port) {
                self.err(field, format!("port {port} is listed twice; list it once"));
            } else if !ports.contains(&port) {
                self.err(
                    field,
                    format!(
                        "port {port} is not on egress.ports; add it there too, or remove it here"
                    ),
                );
            } else {
                valid.push(port);
            }
        }
        valid
    }
}
