//! The transparent listener's connection loop: accept, original destination, sniff, decide,
//! dial the checked address, splice; refusals closed cleanly or answered with a 403.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

use super::decide::{self, Admission, Refused};
use super::dial::{Dialed, dial, is_own_dial};
use super::original_dst::original_dst;
use super::refusal::Refusal;
use super::sniff::{self, MAX_SNIFF_BYTES, Progress, Protocol, Sniffed};
use super::splice::{SpliceLimits, splice};
use crate::policy::Policy;
use crate::server::Shared;

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
    /// Concurrent connections; the next one is refused (`too_many_connections`).
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

/// Bind `listen.transparent` ([`bind`]), record the listeners in `shared.listeners` (the loop
/// check reads them) and spawn their accept loops with the kernel's original destination.
/// Returns each listener's name, address and task, for the listening line and the drain.
pub async fn spawn(
    addr: SocketAddr,
    shared: &Arc<Shared>,
    shutdown: &watch::Receiver<bool>,
) -> std::io::Result<Vec<(&'static str, SocketAddr, JoinHandle<()>)>> {
    let config = TransparentConfig::from_policy(&shared.runtime.load().policy);
    let mut started = Vec::new();
    for (name, listener) in bind(addr).await? {
        let local = listener.local_addr()?;
        if let Ok(mut own) = shared.listeners.lock() {
            own.push((name.to_string(), local));
        }
        let source = OriginalDstSource::Kernel;
        let task = serve(
            listener,
            Arc::clone(shared),
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
    shared: Arc<Shared>,
    source: OriginalDstSource,
    config: TransparentConfig,
    mut shutdown: watch::Receiver<bool>,
) {
    let config = Arc::new(config);
    let permits = Arc::new(Semaphore::new(config.max_connections));
    let mut tasks = JoinSet::new();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "failed to accept a transparent connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            _ = shutdown.changed() => break,
        };
        let conn = Connection {
            shared: Arc::clone(&shared),
            config: Arc::clone(&config),
            source,
            peer,
            started: Instant::now(),
        };
        match Arc::clone(&permits).try_acquire_owned() {
            Ok(permit) => {
                tasks.spawn(async move {
                    conn.run(stream).await;
                    drop(permit);
                });
            }
            Err(_) => {
                tasks.spawn(async move {
                    let refused = ("transparent", Refusal::Overloaded);
                    conn.refuse(stream, Seen::default(), refused).await
                });
            }
        }
    }
    let drain = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(config.drain_timeout, drain)
        .await
        .is_err()
    {
        tracing::info!("transparent listener: drain deadline reached, cutting connections");
    }
}

/// One accepted connection.
struct Connection {
    shared: Arc<Shared>,
    config: Arc<TransparentConfig>,
    source: OriginalDstSource,
    /// The client's address (for a redirected connection, its original source).
    peer: SocketAddr,
    started: Instant,
}

impl Connection {
    async fn run(self, mut client: TcpStream) {
        let _active = ActiveGuard::new(&self.shared.metrics.transparent_active);
        let _ = client.set_nodelay(true);
        let Some(original) = self.original(&client) else {
            let refused = ("transparent", Refusal::NoOriginalDst);
            return self.refuse(client, Seen::default(), refused).await;
        };
        let (prefix, sniffed) = match self.read_head(&mut client).await {
            Ok(v) => v,
            Err((protocol, refusal)) => {
                let refused = ("transparent", refusal);
                let seen = Seen {
                    protocol,
                    sniffed: None,
                    original: Some(original),
                };
                return self.refuse(client, seen, refused).await;
            }
        };
        let result = if is_own_dial(self.peer) {
            // The capture rules sent the gate's own upstream connection back into the gate.
            Err(("transparent", Refusal::Loop))
        } else {
            self.admit_and_dial(&sniffed, original).await
        };
        match result {
            Ok((admission, upstream)) => {
                self.forward(client, upstream, &prefix, &sniffed, &admission, original)
                    .await
            }
            Err(refused) => {
                let seen = Seen {
                    protocol: Some(sniffed.protocol),
                    sniffed: Some(&sniffed),
                    original: Some(original),
                };
                self.refuse(client, seen, refused).await
            }
        }
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
                    tracing::debug!(error = %e, "transparent connection without original destination");
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
    ) -> Result<(Vec<u8>, Sniffed), (Option<Protocol>, Refusal)> {
        let mut buf = Vec::with_capacity(2048);
        let deadline = Instant::now() + self.config.sniff_timeout;
        loop {
            match sniff::sniff(&buf) {
                Ok(Progress::Done(sniffed)) => return Ok((buf, sniffed)),
                Ok(Progress::NeedMore) => {}
                Err(e) => return Err((protocol_of(&buf), Refusal::Sniff(e))),
            }
            let mut chunk = [0u8; 4096];
            let room = (MAX_SNIFF_BYTES - buf.len()).min(chunk.len());
            let read = tokio::time::timeout_at(deadline, client.read(&mut chunk[..room])).await;
            match read {
                Ok(Ok(0)) | Ok(Err(_)) => return Err((protocol_of(&buf), Refusal::SniffTimeout)),
                Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
                Err(_) => return Err((protocol_of(&buf), Refusal::SniffTimeout)),
            }
        }
    }

    async fn admit_and_dial(
        &self,
        sniffed: &Sniffed,
        original: SocketAddr,
    ) -> Result<(Admission, Dialed), Refused> {
        let rt = self.shared.runtime.load_full();
        let allow_raw_ip = decide::raw_ip_allowed(&rt.policy);
        let admission =
            decide::admit(&rt, &self.shared.metrics, sniffed, original, allow_raw_ip).await?;
        let own = self.own_listeners();
        let upstream = dial(&admission, &own, self.config.connect_timeout).await?;
        Ok((admission, upstream))
    }

    fn own_listeners(&self) -> Vec<SocketAddr> {
        self.shared
            .listeners
            .lock()
            .map(|l| l.iter().map(|(_, a)| *a).collect())
            .unwrap_or_default()
    }

    async fn forward(
        &self,
        mut client: TcpStream,
        mut upstream: Dialed,
        prefix: &[u8],
        sniffed: &Sniffed,
        admission: &Admission,
        original: SocketAddr,
    ) {
        self.log(
            "transparent",
            "allow",
            "ok",
            sniffed,
            Some(original),
            Some(admission),
        );
        self.count("ok");
        let _ = upstream.stream.set_nodelay(true);
        if let Err(e) = upstream.stream.write_all(prefix).await {
            tracing::debug!(error = %e, "failed to replay the first bytes upstream");
            let _ = client.shutdown().await;
            return;
        }
        let limits = SpliceLimits {
            idle: self.config.idle_timeout,
            total: self.config.total_timeout,
        };
        let outcome = splice(client, &mut upstream.stream, limits).await;
        let bytes = &self.shared.metrics.transparent_bytes;
        let up = outcome.upstream_bytes + prefix.len() as u64;
        bytes.with_label_values(&["upstream"]).inc_by(up);
        bytes
            .with_label_values(&["downstream"])
            .inc_by(outcome.downstream_bytes);
        tracing::debug!(
            host = %admission.host, upstream_bytes = up, downstream_bytes = outcome.downstream_bytes,
            end = outcome.end.code(), "transparent connection ended"
        );
    }

    /// Log, count, answer HTTP in-band, then close cleanly.
    async fn refuse(&self, mut client: TcpStream, seen: Seen<'_>, (gate, refusal): Refused) {
        let unnamed = Sniffed {
            protocol: seen.protocol.unwrap_or(Protocol::Tls),
            raw_name: None,
            name: None,
            port: None,
            path: None,
        };
        let sniffed = seen.sniffed.unwrap_or(&unnamed);
        self.log(gate, "deny", refusal.code(), sniffed, seen.original, None);
        self.count(refusal.code());
        if refusal.answers(seen.protocol) {
            let _ = client.write_all(&refusal.response_bytes().await).await;
        }
        close_cleanly(client).await;
    }

    fn count(&self, outcome: &str) {
        self.shared
            .metrics
            .transparent_connections
            .with_label_values(&[outcome])
            .inc();
    }

    /// The canonical `egress.decision` line, plus `listener` and `original_dst`.
    fn log(
        &self,
        gate: &str,
        verdict: &str,
        reason: &str,
        sniffed: &Sniffed,
        original: Option<SocketAddr>,
        admission: Option<&Admission>,
    ) {
        let url = log_url(sniffed, original, admission);
        let duration_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        let original_dst = original.map(|a| a.to_string());
        let (vendor, upstream_status): (Option<&str>, Option<u16>) = (None, None);
        let (cache, listener) = ("bypass", "transparent");
        if verdict == "deny" {
            tracing::warn!(
                target: "egress.decision",
                gate, verdict, reason, url, vendor, upstream_status, duration_ms, cache,
                listener, original_dst, "egress.decision"
            );
        } else {
            tracing::info!(
                target: "egress.decision",
                gate, verdict, reason, url, vendor, upstream_status, duration_ms, cache,
                listener, original_dst, "egress.decision"
            );
        }
    }
}

/// What is known about a connection when it is refused, for the decision line.
#[derive(Clone, Copy, Debug, Default)]
struct Seen<'a> {
    /// The protocol, when the first byte announced one.
    protocol: Option<Protocol>,
    /// The complete ClientHello or request head, when it was read.
    sniffed: Option<&'a Sniffed>,
    /// The original destination, when known.
    original: Option<SocketAddr>,
}

/// Counts a connection in `fleetgate_transparent_active_connections` while it lives, even
/// when the drain deadline aborts its task.
struct ActiveGuard(prometheus::IntGauge);

impl ActiveGuard {
    fn new(gauge: &prometheus::IntGauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The protocol the first byte announces, when there is one.
fn protocol_of(buf: &[u8]) -> Option<Protocol> {
    match buf.first() {
        Some(22) => Some(Protocol::Tls),
        Some(b) if b.is_ascii_uppercase() => Some(Protocol::Http),
        _ => None,
    }
}

/// `tls://host:port` or `http://host:port/path` (query dropped), for the decision line.
fn log_url(
    sniffed: &Sniffed,
    original: Option<SocketAddr>,
    admission: Option<&Admission>,
) -> String {
    let host = admission
        .map(|a| a.host.clone())
        .unwrap_or_else(|| match &sniffed.name {
            Some(sniff::TargetName::Domain(d)) => d.clone(),
            Some(sniff::TargetName::Ip(ip)) => ip.to_string(),
            None => original.map(|o| o.ip().to_string()).unwrap_or_default(),
        });
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    let port = original
        .map(|o| format!(":{}", o.port()))
        .unwrap_or_default();
    match (sniffed.protocol, &sniffed.path) {
        (Protocol::Http, Some(path)) => {
            crate::telemetry::redact_url(&format!("http://{host}{port}{path}"))
        }
        (Protocol::Http, None) => format!("http://{host}{port}"),
        (Protocol::Tls, _) => format!("tls://{host}{port}"),
    }
}

/// FIN, then read (and drop) what the client still sends for a moment, so unread bytes in
/// the receive queue do not turn the close into a reset.
async fn close_cleanly(mut stream: TcpStream) {
    let _ = stream.shutdown().await;
    let drain = async {
        let mut sink = [0u8; 4096];
        let mut total = 0usize;
        while total < 256 * 1024 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), drain).await;
}
