//! `CONNECT host:port`: the authority canonicalised by the WHATWG parser, the host-level
//! gates (secret in host labels, port allow-list, E2 with every answer checked, E4), the loop
//! check, the tunnel cap, a pinned connection, then `200` and a metered byte tunnel with idle,
//! lifetime and drain limits. Every refusal is answered before the tunnel opens.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use prometheus::IntGauge;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;

use super::listener::{ClientConn, Decision, Flow, ForwardProxy};
use super::refusal::ProxyRefusal;
use crate::admit::{self, Listener};
use crate::context::canonical_host;
use crate::dialer::connect_pinned;
use crate::gates::DenyReason;
use crate::metrics::ProxyMetrics;
use crate::relay::h1::Head;
use crate::relay::limits::{Effective, TunnelPermit};
use crate::relay::meter::{Activity, MeteredIo};
use crate::relay::own_dial::OwnDial;
use crate::runtime::Runtime;

/// A CONNECT target after canonicalisation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostTarget {
    /// Canonical host: lowercase, IDNA, trailing dots removed, IPv4 forms decoded, IPv6
    /// without brackets.
    pub host: String,
    /// The port, which CONNECT must name.
    pub port: u16,
}

impl std::fmt::Display for HostTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Canonicalise a CONNECT authority (`host:port`) with the WHATWG host parser, so the gates,
/// the resolver and the log all see one form (no bracket, case, dot or encoding tricks).
pub fn canonical_authority(raw: &str) -> Result<HostTarget, DenyReason> {
    let invalid = |detail: &str| DenyReason::InvalidUrl {
        detail: format!("CONNECT needs host:port; {detail}"),
    };
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(invalid("the authority is empty"));
    }
    if raw.contains(['@', '/', '?', '#', '\\']) || raw.chars().any(|c| c.is_control() || c == ' ') {
        return Err(invalid("the authority may hold only a host and a port"));
    }
    let has_port = raw.rsplit_once(':').is_some_and(|(host, port)| {
        !host.is_empty() && !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit())
    });
    if !has_port {
        return Err(invalid("the port is missing"));
    }
    let url = url::Url::parse(&format!("http://{raw}/"))
        .map_err(|e| invalid(&format!("the authority does not parse ({e})")))?;
    let host = canonical_host(&url).ok_or_else(|| invalid("the host is empty"))?;
    let port = url
        .port_or_known_default()
        .ok_or_else(|| invalid("the port is invalid"))?;
    Ok(HostTarget { host, port })
}

/// Answer one CONNECT: a refusal (the connection stays open for another request), or `200`
/// and the tunnel, which then owns the connection until it ends.
pub(super) async fn handle(proxy: &ForwardProxy, conn: &mut ClientConn, head: &Head) -> Flow {
    let started = Instant::now();
    let raw = head.target();
    let mut label = crate::gates::secret_url::redact_secrets(raw).into_owned();
    let opened = open(proxy, raw, &mut label).await;
    let mut decision = Decision::new("connect", &label, conn, started);
    match opened {
        Ok((upstream, permit, limits)) => {
            decision.upstream = upstream.peer_addr().ok();
            proxy.decide(&decision);
            // Open (and counted as such) from the 200 until it ends, whatever it carries:
            // counted before the 200 is written, so a client that reads the 200 and then the
            // metrics sees its tunnel.
            let gauge = proxy
                .gate
                .metrics
                .active_tunnels
                .with_label_values(&[proxy.listener]);
            gauge.inc();
            let active = ActiveTunnel(gauge);
            let established = conn
                .stream
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await;
            if established.is_err() {
                return Flow::Close;
            }
            match first_speaker(conn, &upstream, limits.idle).await {
                Some(Speaker::ClientHttp) => {
                    // Plain HTTP inside the tunnel: each request is gated on its own Host,
                    // like captured plain HTTP, so a tunnel to an allowed address cannot carry
                    // a request for another name (a blocklisted one sharing the address).
                    // It still counts as an open tunnel, under the cap, until the client
                    // connection ends.
                    conn.original = upstream.peer_addr().ok();
                    conn.tunnel = Some(TunnelHold {
                        _permit: permit,
                        _active: active,
                    });
                    Flow::KeepAlive
                }
                Some(Speaker::Other) => {
                    tunnel(proxy, conn, upstream, (permit, limits, active), &label).await;
                    Flow::Close
                }
                None => Flow::Close,
            }
        }
        Err(refusal) => {
            decision.refusal = Some(&refusal);
            proxy.decide(&decision);
            match refusal.write_to(&mut conn.stream, false).await {
                Ok(()) => Flow::KeepAlive,
                Err(_) => Flow::Close,
            }
        }
    }
}

/// Who spoke first in a new tunnel, and what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Speaker {
    /// The client, with bytes shaped like an HTTP/1 request line.
    ClientHttp,
    /// The client with anything else (a TLS ClientHello), or the upstream (a protocol whose
    /// server speaks first, such as SSH): tunnelled as bytes.
    Other,
}

/// Wait for the first bytes of a new tunnel (from the client, into `conn.buf`, or from the
/// upstream, left unread); `None` when the client left or nothing came within `idle`. HTTP
/// servers never speak first, so a client that waits for the upstream is not sending HTTP.
async fn first_speaker(
    conn: &mut ClientConn,
    upstream: &TcpStream,
    idle: Duration,
) -> Option<Speaker> {
    use tokio::io::AsyncReadExt;
    let until = Instant::now() + idle;
    loop {
        if let Some(http) = looks_like_http(&conn.buf) {
            return Some(if http {
                Speaker::ClientHttp
            } else {
                Speaker::Other
            });
        }
        conn.buf.reserve(1024);
        tokio::select! {
            read = conn.stream.read_buf(&mut conn.buf) => match read {
                Ok(n) if n > 0 => {}
                _ => return None,
            },
            ready = upstream.readable(), if conn.buf.is_empty() => {
                return ready.ok().map(|()| Speaker::Other);
            }
            _ = tokio::time::sleep_until(until) => return None,
        }
    }
}

/// Whether `buf` starts like an HTTP/1 request line (after optional empty lines): letters,
/// then a space. `None` while too few bytes have arrived to tell.
fn looks_like_http(buf: &[u8]) -> Option<bool> {
    const LONGEST_METHOD: usize = 16;
    let start = buf.iter().position(|b| !matches!(b, b'\r' | b'\n'))?;
    let rest = &buf[start..];
    match rest.iter().position(|b| !b.is_ascii_alphabetic()) {
        Some(at) => Some(at > 0 && rest[at] == b' '),
        None if rest.len() > LONGEST_METHOD => Some(false),
        None => None,
    }
}

/// Cap, canonical authority, host gates, loop check, pinned dial. `label` becomes the
/// canonical `host:port` once known.
async fn open(
    proxy: &ForwardProxy,
    raw: &str,
    label: &mut String,
) -> Result<(TcpStream, TunnelPermit, Effective), ProxyRefusal> {
    let rt = proxy.gate.runtime.load_full();
    let limits = proxy.limits.effective(&rt.policy);
    let permit =
        proxy
            .tunnels
            .try_acquire(limits.max_tunnels)
            .ok_or(ProxyRefusal::TooManyTunnels {
                limit: limits.max_tunnels,
            })?;
    let target = canonical_authority(raw).map_err(ProxyRefusal::Gate)?;
    *label = crate::gates::secret_url::redact_secrets(&target.to_string()).into_owned();
    let addrs = check_host_target(&rt, &proxy.gate.metrics, raw, &target)
        .await
        .map_err(ProxyRefusal::Gate)?;
    admit::no_loop(&proxy.gate.metrics, &proxy.own, &addrs, target.port)
        .map_err(|r| ProxyRefusal::Gate(r.reason))?;
    let stream = connect_pinned(&addrs, target.port, limits.connect)
        .await
        .map_err(ProxyRefusal::Connect)?;
    Ok((stream, permit, limits))
}

/// `admit`'s CONNECT row on an authority (secret in host labels on the raw and the canonical
/// name, the port list, E2, E4); the checked addresses to dial. A secret rule in report mode
/// is logged here, since the tunnel's own line comes later.
pub async fn check_host_target(
    rt: &Runtime,
    metrics: &ProxyMetrics,
    raw: &str,
    target: &HostTarget,
) -> Result<Vec<IpAddr>, DenyReason> {
    let raw_host = raw_host(raw);
    let admission = admit::host(
        rt,
        metrics,
        Listener::Connect,
        raw_host,
        &target.host,
        target.port,
    )
    .await
    .map_err(|r| r.reason)?;
    for (gate, reason) in &admission.reported {
        tracing::warn!(
            target: "egress.decision",
            gate, verdict = "report", reason = reason.code(),
            rule = reason.rule().unwrap_or_default(), "egress.decision"
        );
    }
    Ok(admission.addrs)
}

/// The host of a raw `host:port` authority as the client wrote it (brackets kept off).
fn raw_host(raw: &str) -> &str {
    let host = raw.rsplit_once(':').map_or(raw, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// Decrements the active-tunnel gauge however the tunnel task ends.
#[derive(Debug)]
struct ActiveTunnel(IntGauge);

/// A tunnel's place under the cap and in the gauge, held by a client connection whose tunnel
/// carries plain HTTP through the relay.
#[derive(Debug)]
pub(super) struct TunnelHold {
    _permit: TunnelPermit,
    _active: ActiveTunnel,
}

impl Drop for ActiveTunnel {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Run one tunnel over the client connection: bytes the client sent past the CONNECT head
/// (an eager TLS ClientHello) go first, then both ways until it ends.
async fn tunnel(
    proxy: &ForwardProxy,
    conn: &mut ClientConn,
    upstream: TcpStream,
    (permit, limits, active): (TunnelPermit, Effective, ActiveTunnel),
    label: &str,
) {
    let (_permit, _active) = (permit, active);
    let _own = OwnDial::register(&upstream);
    let activity = Activity::new(
        proxy.counters.bytes_in.clone(),
        proxy.counters.bytes_out.clone(),
    );
    let started = Instant::now();
    let mut upstream = MeteredIo::new(upstream, activity.clone());
    let early = std::mem::take(&mut conn.buf);
    let ended = if !early.is_empty() && upstream.write_all(&early).await.is_err() {
        "reset"
    } else {
        relay(
            &mut conn.stream,
            &mut upstream,
            &activity,
            limits,
            proxy.shutdown.clone(),
        )
        .await
    };
    let (bytes_in, bytes_out) = activity.bytes();
    let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    tracing::debug!(
        target: "egress.tunnel",
        listener = proxy.listener, url = %label, ended, bytes_in, bytes_out, duration_ms,
        "tunnel closed"
    );
}

/// Copy both ways until either side closes, the tunnel idles out, its lifetime ends, or a
/// drain's deadline passes. Returns why it ended.
async fn relay(
    client: &mut TcpStream,
    upstream: &mut MeteredIo<TcpStream>,
    activity: &Arc<Activity>,
    limits: Effective,
    shutdown: watch::Receiver<bool>,
) -> &'static str {
    tokio::select! {
        copied = tokio::io::copy_bidirectional(client, upstream) => match copied {
            Ok(_) => "closed",
            Err(_) => "reset",
        },
        _ = activity.idle_expired(limits.idle) => "idle_timeout",
        _ = tokio::time::sleep(limits.lifetime) => "lifetime",
        _ = drain_deadline(shutdown, limits.drain) => "drain",
    }
}

/// Resolves `grace` after shutdown begins; never when it does not.
async fn drain_deadline(mut shutdown: watch::Receiver<bool>, grace: Duration) {
    if shutdown.wait_for(|stop| *stop).await.is_err() {
        return std::future::pending::<()>().await;
    }
    tokio::time::sleep(grace).await;
}

#[cfg(test)]
mod tests;
