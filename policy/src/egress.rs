//! The egress listeners' limits as policy fields: `egress.allowRawIP`, `egress.rawTunnelPorts`,
//! `egress.maxTunnels`, `egress.maxConnections` and `egress.timeouts`, read as written and
//! validated into [`EgressLimits`] with field-named errors. The listeners read them per
//! connection, so a reload applies to new connections.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Largest `egress.maxTunnels` or `egress.maxConnections` accepted.
pub const MAX_TUNNELS_CEILING: u64 = 100_000;

/// Default of `egress.timeouts.idleSeconds`: no byte either way for this long ends a tunnel.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(300);
/// Default of `egress.timeouts.tunnelMaxSeconds`: the longest life of one tunnel or exchange.
pub const DEFAULT_TUNNEL_MAX: Duration = Duration::from_secs(3600);

/// `egress.timeouts:` as written.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawEgressTimeouts {
    /// Per-address connect timeout of the egress listeners.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_seconds: Option<u64>,
    /// Time for a request head (client) and a response head (upstream).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header_seconds: Option<u64>,
    /// Idle timeout of a tunnel or relayed body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_seconds: Option<u64>,
    /// Longest life of a tunnel or relayed exchange.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tunnel_max_seconds: Option<u64>,
}

/// The validated limits of the egress listeners (forward proxy and transparent capture).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EgressLimits {
    /// Transparent capture may dial the address the agent chose when the connection names no
    /// host (no SNI, no `Host`) or names an IP literal; the address is still checked. Default
    /// off.
    pub allow_raw_ip: bool,
    /// `egress.rawTunnelPorts`: ports on which a CONNECT tunnel may carry bytes that are
    /// neither a TLS ClientHello nor an HTTP/1 request head (SSH, a database protocol, a
    /// server that speaks first). Every listed port is also on `egress.ports`. Default empty:
    /// such bytes are refused on every port.
    pub raw_tunnel_ports: Vec<u16>,
    /// Concurrent tunnels per listener; `None` keeps each listener's default.
    pub max_tunnels: Option<usize>,
    /// Concurrent client connections per listener (`egress.maxConnections`); past it a new
    /// connection is answered `503 too_many_connections` and closed. `None` keeps each
    /// listener's default (4096 for the forward proxy; transparent capture falls back to
    /// `maxTunnels`, then 4096).
    pub max_connections: Option<usize>,
    /// Connect, header, idle and lifetime limits.
    pub timeouts: EgressTimeouts,
}

/// `egress.timeouts`, validated; each `None` keeps the listener's own default (connect and
/// header follow `fetch.connectTimeoutMs` / `fetch.headerTimeoutMs`, idle [`DEFAULT_IDLE`],
/// lifetime [`DEFAULT_TUNNEL_MAX`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EgressTimeouts {
    /// `connectSeconds`: per-address connect timeout.
    pub connect: Option<Duration>,
    /// `headerSeconds`: request head from the client (the transparent sniff too) and
    /// response head from the upstream.
    pub header: Option<Duration>,
    /// `idleSeconds`: no byte either way for this long ends a tunnel or relayed body.
    pub idle: Option<Duration>,
    /// `tunnelMaxSeconds`: longest life of a tunnel or relayed exchange.
    pub tunnel_max: Option<Duration>,
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::{Policy, PolicyError};

    fn parse(egress: &str) -> Result<Policy, PolicyError> {
        let yaml = format!("version: v1\negress:\n{egress}");
        Policy::parse(yaml.as_bytes(), Path::new("."))
    }

    #[test]
    fn limit_fields_are_read_and_default_when_absent() {
        let p = parse("  allowRawIP: true\n  maxTunnels: 7\n  maxConnections: 9\n  timeouts: {connectSeconds: 2, headerSeconds: 3, idleSeconds: 4, tunnelMaxSeconds: 5}\n")
            .expect("a policy with every limit field must load");
        let l = &p.egress.limits;
        assert!(l.allow_raw_ip, "allowRawIP must be read");
        assert_eq!(l.max_tunnels, Some(7), "maxTunnels must be read");
        assert_eq!(l.max_connections, Some(9), "maxConnections must be read");
        let t = l.timeouts;
        let got = [t.connect, t.header, t.idle, t.tunnel_max];
        let want = [2, 3, 4, 5].map(|s| Some(std::time::Duration::from_secs(s)));
        assert_eq!(got, want, "each timeout must be read in seconds");

        let d = parse("  ports: [80]\n").expect("a policy without limit fields must load");
        let l = &d.egress.limits;
        assert!(!l.allow_raw_ip, "raw-IP egress must be off by default");
        assert_eq!(l.max_tunnels, None, "no cap set means listener defaults");
        assert_eq!(
            l.max_connections, None,
            "no cap set means listener defaults"
        );
        assert_eq!(
            l.timeouts,
            super::EgressTimeouts::default(),
            "unset timeouts keep the listeners' defaults"
        );
    }

    #[test]
    fn out_of_range_limits_are_refused_with_their_field_names() {
        let cases = [
            ("  maxTunnels: 0\n", "egress.maxTunnels"),
            ("  maxTunnels: 1000000\n", "egress.maxTunnels"),
            ("  maxConnections: 0\n", "egress.maxConnections"),
            (
                "  timeouts: {connectSeconds: 0}\n",
                "egress.timeouts.connectSeconds",
            ),
            (
                "  timeouts: {headerSeconds: 601}\n",
                "egress.timeouts.headerSeconds",
            ),
            (
                "  timeouts: {idleSeconds: 0}\n",
                "egress.timeouts.idleSeconds",
            ),
            (
                "  timeouts: {tunnelMaxSeconds: 99999999}\n",
                "egress.timeouts.tunnelMaxSeconds",
            ),
        ];
        for (yaml, field) in cases {
            let err = parse(yaml).expect_err("an out-of-range limit must refuse the policy");
            let fields: Vec<&str> = err.errors.iter().map(|e| e.field.as_str()).collect();
            assert_eq!(fields, vec![field], "{yaml} must name only {field}");
        }
    }

    #[test]
    fn raw_tunnel_ports_are_read_and_empty_by_default() {
        let p = parse("  ports: [80, 443, 22]\n  rawTunnelPorts: [22]\n")
            .expect("a raw tunnel port on the port list must load");
        assert_eq!(p.egress.limits.raw_tunnel_ports, vec![22]);
        let d = parse("  ports: [80, 443, 22]\n").expect("no raw ports must load");
        assert!(
            d.egress.limits.raw_tunnel_ports.is_empty(),
            "raw protocols must be refused on every port by default"
        );
    }

    #[test]
    fn raw_tunnel_ports_off_the_port_list_twice_or_zero_are_refused_by_index() {
        let cases = [
            (
                "  rawTunnelPorts: [22]\n",
                "egress.rawTunnelPorts[0]",
                "egress.ports",
            ),
            (
                "  ports: [80, 22]\n  rawTunnelPorts: [22, 22]\n",
                "egress.rawTunnelPorts[1]",
                "twice",
            ),
            (
                "  ports: [80, 22]\n  rawTunnelPorts: [22, 0]\n",
                "egress.rawTunnelPorts[1]",
                "port 0",
            ),
        ];
        for (yaml, field, says) in cases {
            let err = parse(yaml).expect_err("a bad raw tunnel port must refuse the policy");
            let fields: Vec<&str> = err.errors.iter().map(|e| e.field.as_str()).collect();
            assert_eq!(fields, vec![field], "{yaml} must name only {field}");
            assert!(
                err.errors[0].message.contains(says),
                "{yaml}: the message must say why: {err}"
            );
        }
    }

    #[test]
    fn unknown_timeout_keys_are_refused() {
        let err = parse("  timeouts: {idleSecs: 4}\n")
            .expect_err("a misspelt timeout key must refuse the policy");
        assert!(
            err.to_string().contains("idleSecs"),
            "the error must name the unknown key: {err}"
        );
    }
}
