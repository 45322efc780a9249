//! One transparent connection, start to end: original destination, sniff, the own-dial
//! check, then for TLS the gates, the dial and the splice; plain HTTP goes to the forward
//! proxy's request loop, which gates every request on the connection on its own `Host`. A
//! refusal is logged and counted, answered in-band for plain HTTP, and closed cleanly.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;

use super::config::{LISTENER, OriginalDstSource, TransparentConfig};
use super::decide::{self, CaptureAdmission};
use super::dial::{Dialed, dial};
use super::original_dst::original_dst;
use super::splice::{SpliceLimits, splice};
use crate::base::dialer::OwnListeners;
use crate::egress::capture_refusal::{CaptureRefusal, close_cleanly};
use crate::egress::forward::{ForwardProxy, Limits};
use crate::egress::relay::meter::{ActiveTunnel, Activity};
use crate::egress::relay::own_dial::{is_own_dial, mark_came_back};
use crate::egress::relay::sniff::{
    self, MAX_SNIFF_BYTES, Progress, Protocol, Sniffed, TargetName, protocol_of,
};
use crate::judge::gates::DenyReason;
use crate::judge::telemetry::decision::{DecisionLine, shown_sni};
use crate::live::state::GateState;

/// One accepted connection.
#[derive(Debug)]
pub(super) struct Connection {
    gate: Arc<GateState>,
    config: Arc<TransparentConfig>,
    source: OriginalDstSource,
    /// The client's address (for a redirected connection, its original source).
    peer: SocketAddr,
    started: Instant,
    shutdown: watch::Receiver<bool>,
}

/// What is known about the connection when it is decided, for the decision line.
#[derive(Clone, Copy, Debug, Default)]
struct Seen<'a> {
    /// The protocol, when the first byte announced one.
    protocol: Option<Protocol>,
    /// The complete ClientHello or request head, when it was read.
    sniffed: Option<&'a Sniffed>,
    /// The original destination, when known.
    original: Option<SocketAddr>,
}

impl Connection {
    pub(super) fn new(
        gate: Arc<GateState>,
        config: Arc<TransparentConfig>,
        source: OriginalDstSource,
        peer: SocketAddr,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        Self {
            gate,
            config,
            source,
            peer,
            started: Instant::now(),
            shutdown,
        }
    }

    pub(super) fn max_connections(&self) -> usize {
        self.config.max_connections
    }

    pub(super) async fn run(self, mut client: TcpStream) {
        let _ = client.set_nodelay(true);
        let Some(original) = self.original(&client) else {
            return self
                .refuse_unread(client, CaptureRefusal::NoOriginalDst)
                .await;
        };
        let (prefix, sniffed) = match self.read_head(&mut client).await {
            Ok(v) => v,
            Err((protocol, refusal)) => {
                let seen = Seen {
                    protocol,
                    sniffed: None,
                    original: Some(original),
                };
                return self.refuse(client, seen, refusal).await;
            }
        };
        let seen = Seen {
            protocol: Some(sniffed.protocol),
            sniffed: Some(&sniffed),
            original: Some(original),
        };
        if is_own_dial(self.peer) {
            // The capture rules sent the gate's own upstream connection back into the gate.
            mark_came_back(self.peer);
            return self.refuse(client, seen, CaptureRefusal::Loop).await;
        }
        if sniffed.protocol == Protocol::Http {
            return self.serve_http(client, original, &prefix).await;
        }
        let result = self.admit_and_dial(&sniffed, original).await;
        match result {
            Ok((admission, upstream)) => {
                self.forward(client, upstream, &prefix, seen, &admission)
                    .await
            }
            Err(refusal) => self.refuse(client, seen, refusal).await,
        }
    }

    /// Refuse before anything was read (cap reached, not redirected): log, count, close.
    pub(super) async fn refuse_unread(&self, client: TcpStream, refusal: CaptureRefusal) {
        self.refuse(client, Seen::default(), refusal).await;
    }

    /// The original destination, or `None` when the connection was not redirected.
    fn original(&self, client: &TcpStream) -> Option<SocketAddr> {
        match self.source {
            OriginalDstSource::FixedForTests(addr) => Some(addr),
            OriginalDstSource::Kernel => match original_dst(client) {
                // conntrack names the listener itself when nothing redirected the connection.
                Ok(dst) if client.local_addr().is_ok_and(|l| l == dst) => None,
                Ok(dst) => Some(dst),
                Err(e) => {
                    tracing::debug!(error = %e, listener = LISTENER, "no original destination");
                    None
                }
            },
        }
    }

    /// Read until the ClientHello or request head is complete; the bytes read are replayed
    /// upstream. A refusal carries the protocol when it was recognised.
    async fn read_head(
        &self,
        client: &mut TcpStream,
    ) -> Result<(Vec<u8>, Sniffed), (Option<Protocol>, CaptureRefusal)> {
        let mut buf = Vec::with_capacity(2048);
        let deadline = Instant::now() + self.config.sniff_timeout;
        loop {
            match sniff::sniff(&buf) {
                Ok(Progress::Done(sniffed)) => return Ok((buf, sniffed)),
                Ok(Progress::NeedMore) => {}
                Err(e) => return Err((protocol_of(&buf), CaptureRefusal::Sniff(e))),
            }
            let mut chunk = [0u8; 4096];
            let room = (MAX_SNIFF_BYTES - buf.len()).min(chunk.len());
            let read = tokio::time::timeout_at(deadline, client.read(&mut chunk[..room])).await;
            match read {
                Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                // EOF, a socket error or the deadline: the head never completed.
                _ => return Err((protocol_of(&buf), CaptureRefusal::SniffTimeout)),
            }
        }
    }

    async fn admit_and_dial(
        &self,
        sniffed: &Sniffed,
        original: SocketAddr,
    ) -> Result<(CaptureAdmission, Dialed), CaptureRefusal> {
        let rt = self.gate.runtime.load_full();
        let allow_raw_ip = rt.policy.egress.limits.allow_raw_ip;
        let admission =
            decide::admit(&rt, &self.gate.metrics, sniffed, original, allow_raw_ip).await?;
        let upstream = dial(
            &admission,
            &self.own_listeners(),
            self.config.connect_timeout,
        )
        .await?;
        Ok((admission, upstream))
    }

    /// Plain HTTP: every request on the connection goes through the forward proxy's relay,
    /// gated on its own `Host` (a kept-alive connection cannot switch to a host the gates
    /// refuse, nor carry a secret in a later URL), with its strict framing and hop-by-hop
    /// handling; one decision line per request under this listener's label.
    async fn serve_http(&self, client: TcpStream, original: SocketAddr, prefix: &[u8]) {
        let limits = Limits {
            max_tunnels: None,
            idle_timeout: Some(self.config.idle_timeout),
            max_lifetime: Some(self.config.total_timeout),
            drain_timeout: self.config.drain_timeout,
        };
        let proxy = ForwardProxy::for_listener(
            LISTENER,
            Arc::clone(&self.gate),
            limits,
            self.own_listeners(),
            self.shutdown.clone(),
        );
        let m = &self.gate.metrics;
        let _active = ActiveTunnel::enter(m.active_tunnels.with_label_values(&[LISTENER]));
        crate::egress::forward::listener::serve_captured(
            &proxy, client, self.peer, original, prefix,
        )
        .await;
    }

    /// Every listener of this gate, read per connection (listeners bound later count too).
    fn own_listeners(&self) -> OwnListeners {
        self.gate.own_listeners()
    }

    async fn forward(
        &self,
        client: TcpStream,
        mut upstream: Dialed,
        prefix: &[u8],
        seen: Seen<'_>,
        admission: &CaptureAdmission,
    ) {
        let upstream_addr = upstream.stream.peer_addr().ok();
        self.decide(seen, None, Some(admission), upstream_addr);
        let m = &self.gate.metrics;
        let _active = ActiveTunnel::enter(m.active_tunnels.with_label_values(&[LISTENER]));
        let activity = Activity::new(
            m.listener_bytes.with_label_values(&[LISTENER, "in"]),
            m.listener_bytes.with_label_values(&[LISTENER, "out"]),
        );
        let limits = SpliceLimits {
            idle: self.config.idle_timeout,
            total: self.config.total_timeout,
        };
        let ended = splice(client, &mut upstream.stream, prefix, &activity, limits).await;
        let (bytes_in, bytes_out) = activity.bytes();
        let duration_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        tracing::debug!(
            target: "egress.tunnel",
            listener = LISTENER, host = %admission.host, ended = ended.code(), bytes_in, bytes_out,
            duration_ms, "tunnel closed"
        );
    }

    /// Log, count, answer HTTP in-band, then close cleanly.
    async fn refuse(&self, mut client: TcpStream, seen: Seen<'_>, refusal: CaptureRefusal) {
        self.decide(seen, Some(&refusal), None, None);
        if refusal.answers(seen.protocol) {
            let _ = client.write_all(&refusal.response_bytes().await).await;
        }
        close_cleanly(&mut client).await;
    }

    /// The canonical `egress.decision` line (the forward proxy's fields, plus `original_dst`)
    /// and the listener metrics.
    fn decide(
        &self,
        seen: Seen<'_>,
        refusal: Option<&CaptureRefusal>,
        admission: Option<&CaptureAdmission>,
        upstream: Option<SocketAddr>,
    ) {
        let (gate, verdict, reason) = match refusal {
            None => (LISTENER, "allow", "ok"),
            Some(r) => (r.gate(), r.verdict(), r.code()),
        };
        let proxy_type = match seen.protocol {
            Some(Protocol::Tls) => "tls",
            Some(Protocol::Http) => "http",
            None => "unknown",
        };
        let m = &self.gate.metrics;
        let labels = [LISTENER, proxy_type, verdict];
        m.listener_requests.with_label_values(&labels).inc();
        if let Some(r) = refusal {
            m.listener_refusals
                .with_label_values(&[LISTENER, r.code()])
                .inc();
        }
        let url = log_url(seen, admission);
        let sni = tls_name(seen, refusal);
        DecisionLine {
            listener: LISTENER,
            proxy_type,
            method: None,
            gate,
            verdict,
            reason,
            url: &url,
            client: Some(self.peer),
            vendor: None,
            upstream,
            upstream_status: None,
            request_bytes: None,
            cache: "bypass",
            original_dst: seen.original,
            started: self.started,
        }
        .write_with_sni(sni.as_deref());
    }
}

/// The `sni` field: a ClientHello's server name, when one was read.
fn tls_name(seen: Seen<'_>, refusal: Option<&CaptureRefusal>) -> Option<String> {
    let sniffed = seen.sniffed.filter(|s| s.protocol == Protocol::Tls)?;
    let rule = match refusal {
        Some(CaptureRefusal::Gate(reason @ DenyReason::SecretInHost { .. })) => reason.rule(),
        _ => None,
    };
    let name = sniffed.name.as_ref()?.to_string();
    Some(shown_sni(&name, rule))
}

/// `tls://host:port` or `http://host[:port]/path` (query dropped), for the decision line.
fn log_url(seen: Seen<'_>, admission: Option<&CaptureAdmission>) -> String {
    let name = seen.sniffed.and_then(|s| s.name.as_ref());
    let host = match (admission, name) {
        (Some(a), _) => a.host.clone(),
        (None, Some(TargetName::Domain(d))) => d.clone(),
        (None, Some(TargetName::Ip(ip))) => ip.to_string(),
        (None, None) => seen
            .original
            .map(|o| o.ip().to_string())
            .unwrap_or_default(),
    };
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    let port = seen
        .original
        .map(|o| format!(":{}", o.port()))
        .unwrap_or_default();
    let path = seen.sniffed.and_then(|s| s.path.as_deref());
    match (seen.protocol, path) {
        (Some(Protocol::Http), Some(path)) => {
            crate::judge::telemetry::redact_url(&format!("http://{host}{port}{path}"))
        }
        (Some(Protocol::Http), None) => {
            crate::judge::gates::secret_url::redact_secrets(&format!("http://{host}{port}"))
                .into_owned()
        }
        _ => crate::judge::gates::secret_url::redact_secrets(&format!("tls://{host}{port}"))
            .into_owned(),
    }
}
