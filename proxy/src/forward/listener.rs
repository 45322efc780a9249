//! The forward-proxy listener: accepts client connections, reads HTTP/1.1 request heads,
//! sends `CONNECT` to the tunnel path and absolute-form requests to the HTTP relay, writes the
//! one `egress.decision` line per request, and drains on shutdown.
//!
//! The transparent listener hands its plain-HTTP connections to the same request loop
//! ([`serve_captured`]): each request on a captured connection is gated like an absolute-form
//! one, its URL built from its own `Host` header on the original destination's port.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::BytesMut;
use prometheus::IntCounter;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::{Instant, timeout_at};

use super::http::Upstream;
use super::refusal::ProxyRefusal;
use crate::accept::Acceptor;
use crate::dialer::OwnListeners;
use crate::relay::h1::{FramingError, Head};
use crate::relay::limits::{Inflight, Limits, TunnelCap, TunnelPermit};
use crate::state::GateState;
use crate::telemetry::decision::DecisionLine;

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
    pub bytes_in: IntCounter,
    /// `fleetgate_listener_bytes_total{direction="out"}`.
    pub bytes_out: IntCounter,
    allowed_http: IntCounter,
    allowed_connect: IntCounter,
}

/// One client connection: its socket, what was read past the last message, the upstream
/// connection kept for its next request, and, for a captured connection, where it was going.
#[derive(Debug)]
pub(super) struct ClientConn {
    pub stream: TcpStream,
    pub buf: BytesMut,
    pub peer: SocketAddr,
    pub upstream: Option<Upstream>,
    /// The original destination of a connection the transparent listener captured (or of a
    /// CONNECT tunnel that carries plain HTTP): its requests are origin-form and go to this
    /// port. `None` on the forward proxy.
    pub original: Option<SocketAddr>,
    /// The tunnel a CONNECT opened when it carries plain HTTP through the relay.
    pub tunnel: Option<super::connect::TunnelHold>,
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
    pub proxy_type: &'static str,
    /// The redacted URL (`http`) or the canonical `host:port` (`connect`); formatted only
    /// when the line is written.
    pub target: &'a (dyn std::fmt::Display + Sync),
    /// The client's address.
    pub client: SocketAddr,
    /// When the request arrived.
    pub started: Instant,
    /// The refusal, or `None` when the request was relayed.
    pub refusal: Option<&'a ProxyRefusal>,
    /// The checked address the gate dialled.
    pub upstream: Option<SocketAddr>,
    /// The upstream status (`http` only).
    pub upstream_status: Option<u16>,
    /// A captured connection's original destination.
    pub original: Option<SocketAddr>,
    /// The request method (`http`; `None` when the head could not be read).
    pub method: Option<&'a str>,
    /// Request body bytes relayed to the upstream (`http`, once relayed).
    pub request_bytes: Option<u64>,
    /// The server name of the TLS ClientHello a tunnel carried, as logged
    /// (`telemetry::decision::shown_sni`).
    pub sni: Option<&'a str>,
}

// === impl Decision ===

impl<'a> Decision<'a> {
    /// A decision about a request that was never read (no target, method or client yet).
    fn unread(started: Instant) -> Self {
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
    pub fn new(
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
    pub fn for_listener(
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
    pub fn inflight(&self) -> usize {
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

/// Accept connections on `listener` until shutdown, then wait for in-flight requests and
/// tunnels up to the drain timeout.
pub async fn serve(proxy: Arc<ForwardProxy>, listener: TcpListener) {
    let mut shutdown = proxy.shutdown.clone();
    let metrics = &proxy.gate.metrics;
    let mut acceptor = Acceptor::new(LISTENER, Some(metrics.accept_errors.clone()));
    let accepted_total = metrics.listener_connections.with_label_values(&[LISTENER]);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = acceptor.accept(&listener) => accepted,
            _ = stopped(&mut shutdown) => break,
        };
        accepted_total.inc();
        let cap = proxy
            .limits
            .effective(&proxy.gate.runtime.load().policy)
            .max_connections;
        match proxy.connections.try_acquire(cap) {
            Some(permit) => tokio::spawn(serve_connection(proxy.clone(), stream, peer, permit)),
            None => tokio::spawn(refuse_connection(proxy.clone(), stream, peer, cap)),
        };
    }
    drop(listener);
    let waiting = proxy.inflight();
    tracing::info!(
        listener = LISTENER,
        in_flight = waiting,
        "draining the forward proxy"
    );
    let drained = tokio::time::timeout(proxy.limits.drain_timeout, proxy.inflight.wait_idle());
    if drained.await.is_err() {
        tracing::warn!(
            listener = LISTENER,
            in_flight = proxy.inflight(),
            "drain deadline reached; cutting what is still open"
        );
    }
}

async fn serve_connection(
    proxy: Arc<ForwardProxy>,
    stream: TcpStream,
    peer: SocketAddr,
    _permit: TunnelPermit,
) {
    let _busy = proxy.inflight.enter();
    let _ = stream.set_nodelay(true);
    let conn = ClientConn {
        stream,
        buf: BytesMut::with_capacity(8 * 1024),
        peer,
        upstream: None,
        original: None,
        tunnel: None,
    };
    serve_client(&proxy, conn).await;
}

/// Answer a connection past the connection cap with `503 too_many_connections` and close it,
/// without reading its request: one decision line and one refusal count.
async fn refuse_connection(
    proxy: Arc<ForwardProxy>,
    mut stream: TcpStream,
    peer: SocketAddr,
    limit: usize,
) {
    use tokio::io::AsyncWriteExt;
    let refusal = ProxyRefusal::TooManyConnections { limit };
    let mut decision = Decision {
        client: peer,
        ..Decision::unread(Instant::now())
    };
    decision.refusal = Some(&refusal);
    proxy.decide(&decision);
    let _ = refusal.write_to(&mut stream, true).await;
    let _ = stream.shutdown().await;
}

/// Serve the plain-HTTP requests of a connection the transparent listener captured: `prefix`
/// holds the bytes it already read (the first request head, and whatever followed), and
/// every request, the first included, is gated on its own `Host` header and dialled on
/// `original`'s port. A refused request closes the connection: the client believes it talks
/// to the origin and has no reason to expect a gate's answer to be followed by more.
pub async fn serve_captured(
    proxy: &ForwardProxy,
    stream: TcpStream,
    peer: SocketAddr,
    original: SocketAddr,
    prefix: &[u8],
) {
    let mut buf = BytesMut::with_capacity(prefix.len().max(8 * 1024));
    buf.extend_from_slice(prefix);
    let conn = ClientConn {
        stream,
        buf,
        peer,
        upstream: None,
        original: Some(original),
        tunnel: None,
    };
    serve_client(proxy, conn).await;
}

/// Read and answer requests until the client or a response ends the connection.
async fn serve_client(proxy: &ForwardProxy, mut conn: ClientConn) {
    let listener = proxy.listener;
    let peer = conn.peer;
    let header_timeout = proxy
        .limits
        .effective(&proxy.gate.runtime.load().policy)
        .header;
    let mut shutdown = proxy.shutdown.clone();
    loop {
        // An idle connection closes at once on shutdown; a request being read is answered.
        let idle = conn.buf.is_empty();
        let head = tokio::select! {
            biased;
            head = read_head(&mut conn, header_timeout) => head,
            _ = stopped(&mut shutdown), if idle => return,
        };
        let head = match head {
            Ok(Some(head)) => head,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!(error = %e, listener, client = %peer, "unreadable request head");
                // A client that went quiet or away is not answered; anything else is a
                // refused request, logged and counted like every other refusal.
                if !matches!(e, FramingError::Idle(_) | FramingError::Io(_)) {
                    Box::pin(refuse_head(proxy, &mut conn, e)).await;
                }
                return;
            }
        };
        // A captured connection never tunnels: its CONNECT is an origin-form mistake.
        // Both handlers are boxed: the task is allocated at the size of its largest state for
        // as long as the connection lives, and an exchange's state (gates, dial, body relay) or
        // a tunnel's is several times what a connection holds between requests. A tunnel's
        // own large, short-lived states (the gates, the dial, the SNI judgement) are boxed
        // inside it in turn, so a tunnel that idles holds little more than its sockets.
        let flow = if head.method() == "CONNECT" && conn.original.is_none() {
            Box::pin(super::connect::handle(proxy, &mut conn, head)).await
        } else {
            Box::pin(super::http::handle(proxy, &mut conn, &head)).await
        };
        if flow == Flow::Close || proxy.stopping() {
            return;
        }
    }
}

/// Refuse a request head that could not be read (boxed by its caller: a rare state that
/// would otherwise take room in every connection's task).
async fn refuse_head(proxy: &ForwardProxy, conn: &mut ClientConn, e: FramingError) {
    let refusal = ProxyRefusal::BadRequest(e.to_string());
    let mut decision = Decision::new("http", &"", conn, Instant::now());
    decision.refusal = Some(&refusal);
    proxy.decide(&decision);
    let _ = refusal.write_to(&mut conn.stream, true).await;
}

/// The next request head, `None` when the client closed between requests. The header
/// timeout runs from when the connection starts waiting for it.
async fn read_head(
    conn: &mut ClientConn,
    header_timeout: std::time::Duration,
) -> Result<Option<Head>, FramingError> {
    let until = Instant::now() + header_timeout;
    loop {
        if !conn.buf.is_empty()
            && let Some(head) = Head::parse_request(&mut conn.buf)?
        {
            return Ok(Some(head));
        }
        conn.buf.reserve(8 * 1024);
        let n = timeout_at(until, conn.stream.read_buf(&mut conn.buf))
            .await
            .map_err(|_| FramingError::Idle(header_timeout))??;
        if n == 0 {
            return if conn.buf.is_empty() {
                Ok(None)
            } else {
                Err(FramingError::Truncated)
            };
        }
    }
}

/// Resolves once shutdown begins (or its sender is gone).
pub(super) async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

#[cfg(test)]
mod tests;
