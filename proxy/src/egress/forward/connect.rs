//! `CONNECT host:port`: the authority canonicalised by the WHATWG parser, the host-level
//! gates (secret in host labels, port allow-list, E2 with every answer checked, E4), the loop
//! check, the tunnel cap, a pinned connection, then `200`. The tunnel's first bytes are judged
//! once, by the sniffer transparent capture uses: a TLS ClientHello whose server name passes
//! `admit::sni` becomes a metered byte tunnel (idle, lifetime and drain limits), an HTTP/1
//! request head goes to the relay, and anything else is refused unless the port is one of
//! `egress.rawTunnelPorts`. A refusal of the target is answered before the tunnel opens; a
//! refusal of what it carries closes it (with a JSON answer when the bytes started like HTTP).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;

use super::proxy::{ClientConn, Decision, Flow, ForwardProxy, TunnelHold};
use super::refusal::ProxyRefusal;
use crate::base::dialer::connect_pinned;
use crate::base::target_url::canonical_host;
use crate::egress::capture_refusal::close_cleanly;
use crate::egress::relay::h1::Head;
use crate::egress::relay::limits::{Effective, TunnelPermit};
use crate::egress::relay::meter::ActiveTunnel;
use crate::egress::relay::meter::{Activity, Direction};
use crate::egress::relay::own_dial::OwnDial;
use crate::egress::relay::sniff::Sniffed;
use crate::egress::relay::zero_copy;
use crate::judge::admit::{self, Listener, Named};
use crate::judge::gates::DenyReason;
use crate::judge::metrics::ProxyMetrics;
use crate::judge::telemetry::decision::shown_sni;
use crate::live::runtime::Runtime;
use first_bytes::Carried;

mod first_bytes;

/// A CONNECT target after canonicalisation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HostTarget {
    /// Canonical host: lowercase, IDNA, trailing dots removed, IPv4 forms decoded, IPv6
    /// without brackets.
    pub(crate) host: String,
    /// The port, which CONNECT must name.
    pub(crate) port: u16,
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
pub(crate) fn canonical_authority(raw: &str) -> Result<HostTarget, DenyReason> {
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
/// and the tunnel. The decision line is written once the tunnel's first bytes are judged, so
/// it carries the ClientHello's server name and the verdict on what the tunnel carries.
pub(super) async fn handle(proxy: &ForwardProxy, conn: &mut ClientConn, head: Head) -> Flow {
    let started = Instant::now();
    // The head shares the connection's read buffer; an idle tunnel keeps neither.
    let raw = head.target().to_owned();
    drop(head);
    let raw = raw.as_str();
    let mut label = crate::judge::gates::secret_url::redact_secrets(raw).into_owned();
    // Boxed: the gates' and the dial's state is large and over before the tunnel opens, so it
    // takes no room in the connection's task for as long as the tunnel lives.
    let opened = Box::pin(open(proxy, raw, &mut label)).await;
    let line = Line {
        label: &label,
        client: conn.peer,
        started,
        upstream: None,
    };
    match opened {
        Ok(opened) => {
            let line = Line {
                upstream: opened.upstream.peer_addr().ok(),
                ..line
            };
            establish(proxy, conn, opened, raw_host(raw), line).await
        }
        Err(refusal) => {
            line.write(proxy, Some(&refusal), None);
            match refusal.write_to(&mut conn.stream, false).await {
                Ok(()) => Flow::KeepAlive,
                Err(_) => Flow::Close,
            }
        }
    }
}

/// A tunnel the gates allowed and the gate dialled.
struct Opened {
    /// The policy the CONNECT was judged under; what the tunnel carries is judged under it too.
    rt: Arc<Runtime>,
    target: HostTarget,
    upstream: TcpStream,
    permit: TunnelPermit,
    limits: Effective,
}

/// The fields of a CONNECT's decision line known before its first bytes.
#[derive(Clone, Copy)]
struct Line<'a> {
    /// The redacted canonical `host:port`.
    label: &'a str,
    client: SocketAddr,
    started: Instant,
    upstream: Option<SocketAddr>,
}

impl Line<'_> {
    /// Write the CONNECT's one `egress.decision` line and count it.
    fn write(&self, proxy: &ForwardProxy, refusal: Option<&ProxyRefusal>, sni: Option<&str>) {
        proxy.decide(&Decision {
            proxy_type: "connect",
            target: &self.label,
            client: self.client,
            started: self.started,
            refusal,
            upstream: self.upstream,
            upstream_status: None,
            original: None,
            method: None,
            request_bytes: None,
            sni,
        });
    }
}

/// `200`, then judge the first bytes: TLS whose server name passes goes through as bytes,
/// HTTP goes to the relay (every request gated on its own `Host`, so a tunnel to an allowed
/// address cannot carry a request for another name sharing it), raw bytes only on a
/// raw-protocol port; anything else is refused and the connection closed.
async fn establish(
    proxy: &ForwardProxy,
    conn: &mut ClientConn,
    opened: Opened,
    raw_host: &str,
    line: Line<'_>,
) -> Flow {
    let Opened {
        rt,
        target,
        upstream,
        permit,
        limits,
    } = opened;
    // Open (and counted as such) from the 200 until it ends, whatever it carries: counted
    // before the 200 is written, so a client that reads the 200 and then the metrics sees its
    // tunnel.
    let gauge = proxy
        .gate
        .metrics
        .active_tunnels
        .with_label_values(&[proxy.listener]);
    let active = ActiveTunnel::enter(gauge);
    let established = conn
        .stream
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await;
    if conn.buf.is_empty() {
        // Release the read buffer while the tunnel waits for its first bytes.
        conn.buf = bytes::BytesMut::new();
    }
    if established.is_err() {
        line.write(proxy, None, None);
        return Flow::Close;
    }
    // The first message is a request head of sorts: the head timeout bounds it, and so does
    // the idle timeout when it is shorter.
    let deadline = Instant::now() + limits.header.min(limits.idle);
    let raw_allowed = rt
        .policy
        .egress
        .limits
        .raw_tunnel_ports
        .contains(&target.port);
    let carried = match first_bytes::judge(conn, &upstream, deadline, raw_allowed).await {
        Ok(carried) => carried,
        Err(refused) => return Box::pin(refuse_first_bytes(proxy, conn, line, refused)).await,
    };
    let sni = match &carried {
        Carried::Tls(sniffed) => {
            let target = Named {
                raw: raw_host,
                host: &target.host,
            };
            let dialled = line.upstream.map(|a| a.ip());
            // Boxed, like `open`: one judgement per tunnel, never held while it idles.
            Box::pin(judge_sni(proxy, &rt, sniffed, target, dialled)).await
        }
        _ => JudgedSni::default(),
    };
    line.write(proxy, sni.refusal.as_ref(), sni.shown.as_deref());
    match (carried, sni.refusal) {
        (_, Some(_)) => {
            close_cleanly(&mut conn.stream).await;
            Flow::Close
        }
        (Carried::Http, None) => {
            // Still an open tunnel, under the cap, until the client connection ends.
            conn.original = upstream.peer_addr().ok();
            conn.tunnel = Some(TunnelHold {
                _permit: permit,
                _active: active,
            });
            Flow::KeepAlive
        }
        (Carried::Tls(_) | Carried::Raw, None) => {
            let hold = (permit, limits, active);
            // Boxed: a byte tunnel's state is taken when its first bytes are judged, not
            // reserved in every connection's task from the start.
            Box::pin(tunnel(proxy, conn, upstream, hold, line.label)).await;
            Flow::Close
        }
        (Carried::Nothing, None) => Flow::Close,
    }
}

/// Bytes that are neither a ClientHello nor a request head the relay accepts: the decision
/// line, an HTTP answer when they started like HTTP, then a clean close.
async fn refuse_first_bytes(
    proxy: &ForwardProxy,
    conn: &mut ClientConn,
    line: Line<'_>,
    (protocol, refusal): first_bytes::Refused,
) -> Flow {
    let answer = match refusal.answers(protocol) {
        true => refusal.response_bytes().await,
        false => Vec::new(),
    };
    line.write(proxy, Some(&ProxyRefusal::Capture(refusal)), None);
    let _ = conn.stream.write_all(&answer).await;
    close_cleanly(&mut conn.stream).await;
    Flow::Close
}

/// The server name of a tunnel's ClientHello as judged, and as the decision line shows it.
#[derive(Debug, Default)]
struct JudgedSni {
    shown: Option<String>,
    refusal: Option<ProxyRefusal>,
}

/// `admit::sni` on a ClientHello's server name. A ClientHello without one goes to the CONNECT
/// target the gates already judged: the server then picks its default site, on an address
/// the gates checked.
async fn judge_sni(
    proxy: &ForwardProxy,
    rt: &Runtime,
    sniffed: &Sniffed,
    target: Named<'_>,
    dialled: Option<IpAddr>,
) -> JudgedSni {
    let Some(name) = &sniffed.name else {
        return JudgedSni::default();
    };
    let host = name.to_string();
    let named = Named {
        raw: sniffed.raw_name.as_deref().unwrap_or(&host),
        host: &host,
    };
    // An unknown dialled address matches no name's answers.
    let dialled = dialled.unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
    let judged = admit::sni(rt, &proxy.gate.metrics, named, target, dialled).await;
    let (reported, refusal) = match judged {
        Ok(admission) => (admission.reported, None),
        Err(r) => (Vec::new(), Some(r.reason)),
    };
    log_reported(&reported);
    let secret = reported
        .iter()
        .map(|(_, reason)| reason)
        .chain(&refusal)
        .find_map(|reason| match reason {
            DenyReason::SecretInHost { rule } => Some(rule.as_str()),
            _ => None,
        });
    JudgedSni {
        shown: Some(shown_sni(&host, secret)),
        refusal: refusal.map(ProxyRefusal::Gate),
    }
}

/// Cap, canonical authority, host gates, loop check, pinned dial. `label` becomes the
/// canonical `host:port` once known.
async fn open(proxy: &ForwardProxy, raw: &str, label: &mut String) -> Result<Opened, ProxyRefusal> {
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
    *label = crate::judge::gates::secret_url::redact_secrets(&target.to_string()).into_owned();
    let addrs = check_host_target(&rt, &proxy.gate.metrics, raw, &target)
        .await
        .map_err(|reason| {
            // A secret judged in the host itself: the line names the rule, never the name (a
            // case-sensitive token survives no redaction of its lowercased form).
            if let DenyReason::SecretInHost { rule } = &reason {
                *label = format!("[redacted:{rule}]:{}", target.port);
            }
            ProxyRefusal::Gate(reason)
        })?;
    admit::no_loop(&proxy.gate.metrics, &proxy.own, &addrs, target.port)
        .map_err(|r| ProxyRefusal::Gate(r.reason))?;
    let upstream = connect_pinned(&addrs, target.port, limits.connect)
        .await
        .map_err(ProxyRefusal::Connect)?;
    Ok(Opened {
        rt,
        target,
        upstream,
        permit,
        limits,
    })
}

/// `admit`'s CONNECT row on an authority (secret in host labels on the raw and the canonical
/// name, the port list, E2, E4); the checked addresses to dial. A secret rule in report mode
/// is logged here, since the tunnel's own line comes later.
pub(crate) async fn check_host_target(
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
    log_reported(&admission.reported);
    Ok(admission.addrs)
}

/// Gates in report mode that would have refused, logged here since the tunnel's own line
/// comes later.
fn log_reported(reported: &[(&'static str, DenyReason)]) {
    for (gate, reason) in reported {
        tracing::warn!(
            target: "egress.decision",
            gate, verdict = "report", reason = reason.code(),
            rule = reason.rule().unwrap_or_default(), "egress.decision"
        );
    }
}

/// The host of a raw `host:port` authority as the client wrote it (brackets kept off).
fn raw_host(raw: &str) -> &str {
    let host = raw.rsplit_once(':').map_or(raw, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// Run one tunnel over the client connection: bytes the client sent past the CONNECT head
/// (an eager TLS ClientHello) go first, then both ways until it ends, spliced in the kernel
/// ([`zero_copy`]).
async fn tunnel(
    proxy: &ForwardProxy,
    conn: &mut ClientConn,
    mut upstream: TcpStream,
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
    let early = std::mem::take(&mut conn.buf);
    let (ended, moved) = if !early.is_empty() && upstream.write_all(&early).await.is_err() {
        ("reset", None)
    } else {
        activity.record(Direction::In, early.len());
        relay(
            &conn.stream,
            &upstream,
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
        relay = moved.map_or("none", zero_copy::Moved::as_str),
        "tunnel closed"
    );
}

/// Move bytes both ways until either side closes, the tunnel idles out, its lifetime ends,
/// or a drain's deadline passes. Returns why it ended, and how the bytes moved when the
/// relay itself ended.
async fn relay(
    client: &TcpStream,
    upstream: &TcpStream,
    activity: &Arc<Activity>,
    limits: Effective,
    shutdown: watch::Receiver<bool>,
) -> (&'static str, Option<zero_copy::Moved>) {
    tokio::select! {
        moved = zero_copy::relay(client, upstream, activity) => match moved {
            Ok(how) => ("closed", Some(how)),
            Err(_) => ("reset", None),
        },
        _ = activity.idle_expired(limits.idle) => ("idle_timeout", None),
        _ = tokio::time::sleep(limits.lifetime) => ("lifetime", None),
        _ = drain_deadline(shutdown, limits.drain) => ("drain", None),
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
