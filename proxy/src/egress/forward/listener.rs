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
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::{Instant, timeout_at};

use super::proxy::{ClientConn, Decision, Flow, ForwardProxy, LISTENER};
use super::refusal::ProxyRefusal;
use crate::accept::Acceptor;
use crate::base::shards::Shards;
use crate::egress::relay::h1::{FramingError, Head};
use crate::egress::relay::limits::TunnelPermit;

/// Accept connections on `listener` until shutdown, then wait for in-flight requests and
/// tunnels up to the drain timeout.
pub async fn serve(proxy: Arc<ForwardProxy>, listener: TcpListener, shards: Arc<Shards>) {
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
            Some(permit) => {
                let proxy = proxy.clone();
                shards.spawn(stream, move |stream| {
                    serve_connection(proxy, stream, peer, permit)
                });
            }
            None => {
                tokio::spawn(refuse_connection(proxy.clone(), stream, peer, cap));
            }
        }
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
pub(crate) async fn serve_captured(
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
