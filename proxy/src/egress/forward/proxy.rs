//! What the forward proxy's listener, HTTP relay and tunnel path share: the proxy itself
//! ([`ForwardProxy`]), one client connection's state ([`ClientConn`], with the upstream kept
//! between requests and the tunnel a CONNECT holds), what a connection does next ([`Flow`]),
//! and one request's decision ([`Decision`]) with the `egress.decision` line it writes.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::BytesMut;
use prometheus::IntCounter;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;

use super::refusal::ProxyRefusal;
use crate::base::dialer::OwnListeners;
use crate::egress::relay::limits::{Inflight, Limits, TunnelCap, TunnelPermit};
use crate::egress::relay::meter::ActiveTunnel;
use crate::egress::relay::own_dial::OwnDial;
use crate::judge::telemetry::decision::DecisionLine;
use crate::live::state::GateState;

/// The listener label of the forward proxy in metrics and logs.
pub const LISTENER: &str = "forward_proxy";

/// Everything the forward proxy's connections share.
#[derive(Debug)]
pub struct ForwardProxy {
    /// The `listener` label of its metrics and decision lines.
    pub(super) listener: &'static str,
    pub(super) gate: Arc<GateState>,
    pub(super) limits: Limits,
    pub(super) own: OwnListeners,
    pub(super) tunnels: TunnelCap,
    /// Open client connections, under `egress.maxConnections`.
    pub(super) connections: TunnelCap,
    pub(super) inflight: Inflight,
    pub(super) shutdown: watch::Receiver<bool>,
    pub(super) counters: Counters,
}

/// The hot-path series of this listener, looked up once (labels are fixed per listener).
#[derive(Debug)]
pub(super) struct Counters {
    /// `fleetgate_listener_bytes_total{direction="in"}`.
    pub(crate) bytes_in: IntCounter,
    /// `fleetgate_listener_bytes_total{direction="out"}`.
    pub(crate) bytes_out: IntCounter,
    allowed_http: IntCounter,
    allowed_connect: IntCounter,
}

/// One client connection: its socket, what was read past the last message, the upstream
/// connection kept for its next request, and, for a captured connection, where it was going.
#[derive(Debug)]
pub(super) struct ClientConn {
    pub(crate) stream: TcpStream,
    pub(crate) buf: BytesMut,
    pub(crate) peer: SocketAddr,
    pub(crate) upstream: Option<Upstream>,
    /// The original destination of a connection the transparent listener captured (or of a
    /// CONNECT tunnel that carries plain HTTP): its requests are origin-form and go to this
    /// port. `None` on the forward proxy.
    pub(crate) original: Option<SocketAddr>,
    /// The tunnel a CONNECT opened when it carries plain HTTP through the relay.
    pub(crate) tunnel: Option<TunnelHold>,
}

/// What a connection does after answering a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flow {
    /// Read the next request.
    KeepAlive,
    /// Close the connection.
    Close,
}

/// One request's decision, for the canonical log line and the listener metrics.
pub(super) struct Decision<'a> {
    /// `http` or `connect`.
    pub(crate) proxy_type: &'static str,
    /// The redacted URL (`http`) or the canonical `host:port` (`connect`); formatted only
    /// when the line is written.
    pub(crate) target: &'a (dyn std::fmt::Display + Sync),
    /// The client's address.
    pub(crate) client: SocketAddr,
    /// When the request arrived.
    pub(crate) started: Instant,
    /// The refusal, or `None` when the request was relayed.
    pub(crate) refusal: Option<&'a ProxyRefusal>,
    /// The checked address the gate dialled.
    pub(crate) upstream: Option<SocketAddr>,
    /// The upstream status (`http` only).
    pub(crate) upstream_status: Option<u16>,
    /// A captured connection's original destination.
    pub(crate) original: Option<SocketAddr>,
    /// The request method (`http`; `None` when the head could not be read).
    pub(crate) method: Option<&'a str>,
    /// Request body bytes relayed to the upstream (`http`, once relayed).
    pub(crate) request_bytes: Option<u64>,
    /// The server name of the TLS ClientHello a tunnel carried, as logged
    /// (`telemetry::decision::shown_sni`).
    pub(crate) sni: Option<&'a str>,
}

/// The upstream connection a client connection keeps between its requests.
#[derive(Debug)]
pub(super) struct Upstream {
    pub(crate) stream: TcpStream,
    pub(crate) addr: SocketAddr,
    pub(crate) buf: BytesMut,
    /// Known as the gate's own while it lives: if capture rules send it back into the gate
    /// (the gate's uid not exempt), the transparent listener refuses it as a loop.
    pub(crate) own: OwnDial,
}

impl Upstream {
    /// Whether the upstream closed (or sent unasked bytes) while the connection sat idle;
    /// costs a syscall only when the socket reported readiness.
    pub(crate) fn looks_closed(&self) -> bool {
        let mut probe = [0u8; 1];
        !matches!(self.stream.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }
}

/// A tunnel's place under the cap and in the gauge, held by a client connection whose tunnel
/// carries plain HTTP through the relay.
#[derive(Debug)]
pub(super) struct TunnelHold {
    pub(crate) _permit: TunnelPermit,
    pub(crate) _active: ActiveTunnel,
}

// === impl Decision ===

impl<'a> Decision<'a> {
    /// A decision about a request that was never read (no target, method or client yet).
    pub(super) fn unread(started: Instant) -> Self {
        Self {
            proxy_type: "http",
            target: &"",
            client: SocketAddr::from(([0, 0, 0, 0], 0)),
            started,
            refusal: None,
            upstream: None,
            upstream_status: None,
            original: None,
            method: None,
            request_bytes: None,
            sni: None,
        }
    }

    /// A decision about one request of `conn`, to be filled in as the request goes.
    pub(crate) fn new(
        proxy_type: &'static str,
        target: &'a (dyn std::fmt::Display + Sync),
        conn: &ClientConn,
        started: Instant,
    ) -> Self {
        Self {
            proxy_type,
            target,
            client: conn.peer,
            original: conn.original,
            ..Self::unread(started)
        }
    }
}

// === impl ForwardProxy ===

impl ForwardProxy {
    /// The proxy over `gate`, refusing loops into `own`, stopping when `shutdown` flips.
    pub fn new(
        gate: Arc<GateState>,
        limits: Limits,
        own: OwnListeners,
        shutdown: watch::Receiver<bool>,
    ) -> Arc<Self> {
        Self::for_listener(LISTENER, gate, limits, own, shutdown)
    }

    /// The same request loop counted and logged under another listener's label (the
    /// transparent listener's captured plain HTTP).
    pub(crate) fn for_listener(
        listener: &'static str,
        gate: Arc<GateState>,
        limits: Limits,
        own: OwnListeners,
        shutdown: watch::Receiver<bool>,
    ) -> Arc<Self> {
        let m = &gate.metrics;
        let counters = Counters {
            bytes_in: m.listener_bytes.with_label_values(&[listener, "in"]),
            bytes_out: m.listener_bytes.with_label_values(&[listener, "out"]),
            allowed_http: m
                .listener_requests
                .with_label_values(&[listener, "http", "allow"]),
            allowed_connect: m
                .listener_requests
                .with_label_values(&[listener, "connect", "allow"]),
        };
        Arc::new(Self {
            listener,
            counters,
            gate,
            limits,
            own,
            tunnels: TunnelCap::default(),
            connections: TunnelCap::default(),
            inflight: Inflight::default(),
            shutdown,
        })
    }

    /// Requests and tunnels in flight now.
    pub(crate) fn inflight(&self) -> usize {
        self.inflight.count()
    }

    /// Whether shutdown has begun.
    pub(super) fn stopping(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Write the canonical `egress.decision` line and count the request.
    pub(super) fn decide(&self, d: &Decision<'_>) {
        let (gate, verdict, reason) = match d.refusal {
            None => ("forward", "allow", "ok"),
            Some(r) => (r.gate(), r.verdict(), r.code()),
        };
        let m = &self.gate.metrics;
        match (d.refusal, d.proxy_type) {
            (None, "http") => self.counters.allowed_http.inc(),
            (None, _) => self.counters.allowed_connect.inc(),
            (Some(r), proxy_type) => {
                m.listener_requests
                    .with_label_values(&[self.listener, proxy_type, verdict])
                    .inc();
                m.listener_refusals
                    .with_label_values(&[self.listener, r.code()])
                    .inc();
            }
        }
        self.log_decision(d, (gate, verdict, reason));
    }

    /// The `egress.decision` line of one request.
    fn log_decision(&self, d: &Decision<'_>, (gate, verdict, reason): (&str, &str, &str)) {
        DecisionLine {
            listener: self.listener,
            proxy_type: d.proxy_type,
            method: d.method,
            gate,
            verdict,
            reason,
            url: d.target,
            client: Some(d.client),
            vendor: None,
            upstream: d.upstream,
            upstream_status: d.upstream_status,
            request_bytes: d.request_bytes,
            cache: "bypass",
            original_dst: d.original,
            started: d.started,
        }
        .write_with_sni(d.sni);
    }
}
