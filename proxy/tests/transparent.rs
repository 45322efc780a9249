//! The transparent listener on loopback, without iptables: tests connect straight to it and
//! use the documented seam `OriginalDstSource::FixedForTests(addr)` to say where the
//! connection "was going". Everything after that (sniff, gates, the stub-DNS resolution,
//! dialing, splicing, refusals) is the production path.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fleetgate_e2e::dns::StubDns;
use fleetgate_proxy::api::Shared;
use fleetgate_proxy::base::shards::Shards;
use fleetgate_proxy::egress::transparent::{self, OriginalDstSource, TransparentConfig};
use fleetgate_proxy::live::runtime::Runtime;
use fleetgate_proxy::live::state::GateState;
use fleetgate_proxy::policy::Policy;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A raw TCP origin: records the first bytes of every connection, answers `ORIGIN <addr>`.
struct RawOrigin {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
    first_bytes: Arc<Mutex<Vec<Vec<u8>>>>,
    _task: tokio::task::JoinHandle<()>,
}

impl RawOrigin {
    async fn bind(addr: SocketAddr) -> Self {
        let listener = TcpListener::bind(addr).await.expect("the origin must bind");
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let first_bytes = Arc::new(Mutex::new(Vec::new()));
        let (h, f) = (hits.clone(), first_bytes.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                h.fetch_add(1, Ordering::SeqCst);
                let f = f.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 65536];
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    f.lock().unwrap().push(buf[..n].to_vec());
                    let _ = s.write_all(format!("ORIGIN {addr}").as_bytes()).await;
                    let _ = s.shutdown().await;
                });
            }
        });
        Self {
            addr,
            hits,
            first_bytes,
            _task: task,
        }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// A keep-alive HTTP/1.1 origin: records every request head it reads, answers each with
/// `200` and the body `ORIGIN <addr>`.
struct HttpOrigin {
    addr: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
    _task: tokio::task::JoinHandle<()>,
}

impl HttpOrigin {
    async fn bind(addr: SocketAddr) -> Self {
        let listener = TcpListener::bind(addr).await.expect("the origin must bind");
        let addr = listener.local_addr().unwrap();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let seen = heads.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    loop {
                        while let Some(end) = find_blank_line(&buf) {
                            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                            buf.drain(..end + 4);
                            seen.lock().unwrap().push(head);
                            let body = format!("ORIGIN {addr}");
                            let resp = format!(
                                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                                body.len()
                            );
                            if s.write_all(resp.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                        let mut chunk = [0u8; 4096];
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                });
            }
        });
        Self {
            addr,
            heads,
            _task: task,
        }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

fn find_blank_line(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n")
}

/// Send `request` on a kept-alive connection and read its response (see [`read_response`]).
async fn request(s: &mut TcpStream, request: &str) -> Option<(String, String)> {
    s.write_all(request.as_bytes()).await.unwrap();
    read_response(s).await
}

/// Connect to `gate` and have `GET <path>` for `web.example` answered `200` on the
/// connection: the kept-alive start of a test. Returns the connection and the body.
async fn kept_alive(gate: &TestGate, path: &str) -> (TcpStream, String) {
    let mut s = TcpStream::connect(gate.addr).await.unwrap();
    let first = format!("GET {path} HTTP/1.1\r\nHost: web.example\r\n\r\n");
    let (head, body) = request(&mut s, &first)
        .await
        .expect("the first request is answered");
    assert!(head.starts_with("HTTP/1.1 200 "), "{path}: {head}");
    (s, body)
}

/// Read one response with a `content-length` body off a kept-alive connection:
/// `(head, body)`, or `None` when the gate closed the connection first.
async fn read_response(s: &mut TcpStream) -> Option<(String, String)> {
    let mut buf = Vec::new();
    let end = loop {
        if let Some(end) = find_blank_line(&buf) {
            break end;
        }
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk))
            .await
            .expect("the gate must answer or close in time")
            .expect("the gate must not reset the connection");
        if n == 0 {
            assert!(buf.is_empty(), "the gate closed inside a response head");
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(buf[..end].to_vec()).unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length: ")
                .map(str::to_string)
        })
        .expect("every test response has a content-length")
        .parse()
        .unwrap();
    let mut body = buf[end + 4..].to_vec();
    while body.len() < length {
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the gate closed inside a response body");
        body.extend_from_slice(&chunk[..n]);
    }
    assert_eq!(body.len(), length, "nothing may follow a response unasked");
    Some((head, String::from_utf8(body).unwrap()))
}

/// A transparent listener over a real runtime, stopped on drop.
struct TestGate {
    addr: SocketAddr,
    gate: Arc<GateState>,
    _stop: watch::Sender<bool>,
}

impl TestGate {
    async fn start(dns: &StubDns, ports: &[u16], original: Option<SocketAddr>) -> Self {
        Self::start_with(dns, ports, original, TransparentConfig::default(), None).await
    }

    async fn start_with(
        dns: &StubDns,
        ports: &[u16],
        original: Option<SocketAddr>,
        config: TransparentConfig,
        listener: Option<TcpListener>,
    ) -> Self {
        Self::start_policy(dns, ports, original, config, listener, "").await
    }

    /// `egress` lines in `extra` are added to the test policy's `egress` block.
    async fn start_policy(
        dns: &StubDns,
        ports: &[u16],
        original: Option<SocketAddr>,
        config: TransparentConfig,
        listener: Option<TcpListener>,
        extra: &str,
    ) -> Self {
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        let yaml = format!(
            "version: v1\n\
             egress:\n{extra}  allowCIDRs: [\"127.0.0.1/32\", \"127.0.0.3/32\"]\n  ports: [{}]\n  resolver:\n    nameservers: [\"{}\"]\n    timeoutMs: 1000\n    attempts: 1\n\
             websiteBlocklist:\n  domains: [\"blocked.example\"]\n",
            ports.join(", "),
            dns.addr()
        );
        let policy = Policy::parse(yaml.as_bytes(), std::path::Path::new("."))
            .expect("the test policy must be valid");
        let gate = Shared::new(Runtime::build(policy).unwrap())
            .unwrap()
            .gate
            .clone();
        let listener = match listener {
            Some(l) => l,
            None => TcpListener::bind("127.0.0.1:0").await.unwrap(),
        };
        let addr = listener.local_addr().unwrap();
        gate.listeners
            .lock()
            .unwrap()
            .push(("transparent".into(), addr));
        let source = match original {
            Some(dst) => OriginalDstSource::FixedForTests(dst),
            None => OriginalDstSource::Kernel,
        };
        let (stop, rx) = watch::channel(false);
        tokio::spawn(transparent::serve(
            listener,
            gate.clone(),
            source,
            config,
            rx,
            // Two shards: half the connections are handed to the second one's thread.
            Arc::new(Shards::start(1).expect("a second shard")),
        ));
        Self {
            addr,
            gate,
            _stop: stop,
        }
    }

    /// `fleetgate_listener_refusals_total{listener="transparent",code}`.
    fn refusals(&self, code: &str) -> u64 {
        self.gate
            .metrics
            .listener_refusals
            .with_label_values(&["transparent", code])
            .get()
    }

    /// `fleetgate_listener_requests_total{listener="transparent",proxy_type,verdict="allow"}`.
    fn allowed(&self, proxy_type: &str) -> u64 {
        self.gate
            .metrics
            .listener_requests
            .with_label_values(&["transparent", proxy_type, "allow"])
            .get()
    }
}

fn client_hello(name: Option<&str>) -> Vec<u8> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    config.enable_sni = name.is_some();
    let server = ServerName::try_from(name.unwrap_or("unused.example").to_string()).unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), server).unwrap();
    let mut out = Vec::new();
    conn.write_tls(&mut out).unwrap();
    out
}

/// Send `bytes`, then read until the gate closes. A reset fails the test: refusals must be
/// a clean close.
async fn exchange(gate: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(gate)
        .await
        .expect("the listener must accept");
    s.write_all(bytes).await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut got))
        .await
        .expect("the gate must close the connection in time")
        .expect("the gate must close cleanly (FIN), not reset");
    got
}

async fn dns() -> StubDns {
    StubDns::builder()
        .answer("tls.example", ["127.0.0.1".parse().unwrap()])
        .answer("web.example", ["127.0.0.1".parse().unwrap()])
        .answer("other.example", ["127.0.0.3".parse().unwrap()])
        .answer("internal.example", ["10.1.2.3".parse().unwrap()])
        .answer("blocked.example", ["127.0.0.1".parse().unwrap()])
        .start()
        .await
        .unwrap()
}

#[tokio::test]
async fn an_allowed_sni_is_spliced_to_the_names_checked_address_with_the_hello_replayed() {
    let dns = dns().await;
    let origin = RawOrigin::bind("127.0.0.1:0".parse().unwrap()).await;
    let gate = TestGate::start(&dns, &[origin.addr.port()], Some(origin.addr)).await;
    let hello = client_hello(Some("tls.example"));
    let reply = exchange(gate.addr, &hello).await;
    assert_eq!(
        reply,
        format!("ORIGIN {}", origin.addr).as_bytes(),
        "the origin's reply must come back"
    );
    assert_eq!(
        origin.first_bytes.lock().unwrap()[0],
        hello,
        "the ClientHello must reach the origin unchanged"
    );
    assert_eq!(gate.allowed("tls"), 1);
    // Bytes are counted as they move, so the totals are final once the client saw EOF.
    let bytes = |dir: &str| {
        let m = &gate.gate.metrics.listener_bytes;
        m.with_label_values(&["transparent", dir]).get()
    };
    assert_eq!(
        bytes("in"),
        hello.len() as u64,
        "replayed bytes count as upstream bytes"
    );
    assert_eq!(
        bytes("out"),
        reply.len() as u64,
        "the reply counts as downstream bytes"
    );
}

#[tokio::test]
async fn an_sni_destination_mismatch_dials_the_sni_names_address_not_the_original() {
    let dns = dns().await;
    let origin = RawOrigin::bind("127.0.0.1:0".parse().unwrap()).await;
    let decoy_addr = SocketAddr::from(([127, 0, 0, 2], origin.addr.port()));
    let decoy = RawOrigin::bind(decoy_addr).await;
    // The agent connected to 127.0.0.2 (its own DNS), claiming SNI tls.example.
    let gate = TestGate::start(&dns, &[origin.addr.port()], Some(decoy.addr)).await;
    let reply = exchange(gate.addr, &client_hello(Some("tls.example"))).await;
    assert_eq!(reply, format!("ORIGIN {}", origin.addr).as_bytes());
    assert_eq!(
        (origin.hits(), decoy.hits()),
        (1, 0),
        "only tls.example's checked address is dialed"
    );
}

#[tokio::test]
async fn refused_tls_connections_are_closed_cleanly_without_a_byte() {
    let dns = dns().await;
    let origin = RawOrigin::bind("127.0.0.1:0".parse().unwrap()).await;
    let port = origin.addr.port();
    let cases = [
        (
            "a name resolving to 10.x",
            client_hello(Some("internal.example")),
            "ip_private_range",
        ),
        ("no SNI", client_hello(None), "no_target_name"),
        (
            "a blocklisted name",
            client_hello(Some("blocked.example")),
            "blocked_by_policy",
        ),
        (
            "bytes that are neither TLS nor HTTP",
            b"\x00\x01garbage".to_vec(),
            "unrecognised_protocol",
        ),
    ];
    for (what, bytes, code) in cases {
        let gate = TestGate::start(&dns, &[port], Some(origin.addr)).await;
        let reply = exchange(gate.addr, &bytes).await;
        assert!(
            reply.is_empty(),
            "{what}: a TLS refusal sends nothing, got {reply:?}"
        );
        assert_eq!(gate.refusals(code), 1, "{what} must be counted as {code}");
    }
    assert_eq!(
        origin.hits(),
        0,
        "no refused connection may reach the origin"
    );
}

#[tokio::test]
async fn plain_http_is_gated_by_its_host_header() {
    let dns = dns().await;
    let origin = HttpOrigin::bind("127.0.0.1:0".parse().unwrap()).await;
    let port = origin.addr.port();
    let gate = TestGate::start(&dns, &[port], Some(origin.addr)).await;
    let request =
        b"GET /page HTTP/1.1\r\nHost: web.example\r\nConnection: close\r\nX-Kept: 1\r\n\r\n";
    let reply = String::from_utf8(exchange(gate.addr, request).await).unwrap();
    let (head, body) = reply.split_once("\r\n\r\n").expect("a full HTTP response");
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert!(head.contains("connection: close"), "{head}");
    assert_eq!(body, format!("ORIGIN {}", origin.addr));
    let heads = origin.heads();
    assert_eq!(heads.len(), 1, "{heads:?}");
    let seen: Vec<&str> = heads[0].split("\r\n").collect();
    assert_eq!(seen[0], "GET /page HTTP/1.1");
    assert!(
        seen.contains(&format!("host: web.example:{port}").as_str()),
        "the checked URL's authority must be the Host: {seen:?}"
    );
    assert!(
        seen.contains(&"X-Kept: 1"),
        "end-to-end headers pass: {seen:?}"
    );
    assert!(
        !seen
            .iter()
            .any(|l| l.to_ascii_lowercase().starts_with("connection")),
        "hop-by-hop headers stay on the client's hop: {seen:?}"
    );
    assert_eq!(gate.allowed("http"), 1);
}

#[tokio::test]
async fn every_request_on_a_kept_alive_connection_is_gated_on_its_own_host() {
    let dns = dns().await;
    let origin = HttpOrigin::bind("127.0.0.1:0".parse().unwrap()).await;
    let port = origin.addr.port();
    let other = HttpOrigin::bind(SocketAddr::from(([127, 0, 0, 3], port))).await;
    let gate = TestGate::start(&dns, &[port], Some(origin.addr)).await;
    let (mut s, body) = kept_alive(&gate, "/a").await;
    assert_eq!(body, format!("ORIGIN {}", origin.addr));
    // Same connection, another allowed name: that name's checked address is dialled.
    let (head, body) = request(&mut s, "GET /b HTTP/1.1\r\nHost: other.example\r\n\r\n")
        .await
        .expect("the second request is answered");
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert_eq!(body, format!("ORIGIN {}", other.addr));
    // Same connection, a secret in a later URL: refused, and the connection ends.
    let (head, _) = request(
        &mut s,
        "GET /c?token=abc123 HTTP/1.1\r\nHost: web.example\r\n\r\n",
    )
    .await
    .expect("the refusal is answered");
    assert!(head.starts_with("HTTP/1.1 403 "), "{head}");
    assert!(
        head.contains("x-fleetgate-error: sensitive_query_param"),
        "{head}"
    );
    assert!(head.contains("connection: close"), "{head}");
    assert!(
        read_response(&mut s).await.is_none(),
        "a refusal closes the connection"
    );
    let paths = |o: &HttpOrigin| -> Vec<String> {
        o.heads()
            .iter()
            .map(|h| h.lines().next().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(paths(&origin), ["GET /a HTTP/1.1"]);
    assert_eq!(paths(&other), ["GET /b HTTP/1.1"]);
    assert_eq!(gate.allowed("http"), 2);
    assert_eq!(gate.refusals("sensitive_query_param"), 1);
}

#[tokio::test]
async fn a_kept_alive_connection_cannot_switch_to_a_host_the_gates_refuse() {
    let dns = dns().await;
    let origin = HttpOrigin::bind("127.0.0.1:0".parse().unwrap()).await;
    let port = origin.addr.port();
    let cases = [
        (
            "a blocklisted name",
            "blocked.example",
            "403",
            "blocked_by_policy",
        ),
        (
            "a name resolving to 10.x",
            "internal.example",
            "403",
            "ip_private_range",
        ),
        ("an IP literal", "127.0.0.1", "403", "no_target_name"),
        (
            "a malformed Host",
            "web.example:0",
            "400",
            "sniff_malformed",
        ),
    ];
    for (what, host, status, code) in cases {
        let gate = TestGate::start(&dns, &[port], Some(origin.addr)).await;
        let (mut s, _) = kept_alive(&gate, "/first").await;
        let second = format!("GET /second HTTP/1.1\r\nHost: {host}\r\n\r\n");
        let (head, _) = request(&mut s, &second)
            .await
            .expect("the refusal is answered");
        assert!(
            head.starts_with(&format!("HTTP/1.1 {status} ")),
            "{what}: {head}"
        );
        assert!(
            head.contains(&format!("x-fleetgate-error: {code}")),
            "{what}: {head}"
        );
        assert!(
            read_response(&mut s).await.is_none(),
            "{what}: the connection ends"
        );
        assert_eq!(gate.refusals(code), 1, "{what}");
    }
    assert!(
        origin.heads().iter().all(|h| h.starts_with("GET /first ")),
        "no refused request may reach the origin: {:?}",
        origin.heads()
    );
}

#[tokio::test]
async fn with_raw_ip_egress_a_request_without_a_name_goes_to_the_checked_original_address() {
    let dns = dns().await;
    let origin = HttpOrigin::bind("127.0.0.1:0".parse().unwrap()).await;
    let port = origin.addr.port();
    let raw_ip = "  allowRawIP: true\n";
    let cases = [
        ("no Host", "GET /raw HTTP/1.0\r\n\r\n"),
        (
            "an IP-literal Host naming another address",
            "GET /raw HTTP/1.0\r\nHost: 127.0.0.3\r\n\r\n",
        ),
    ];
    for (what, request) in cases {
        let config = TransparentConfig::default();
        let gate =
            TestGate::start_policy(&dns, &[port], Some(origin.addr), config, None, raw_ip).await;
        let reply = String::from_utf8(exchange(gate.addr, request.as_bytes()).await).unwrap();
        assert!(reply.starts_with("HTTP/1.1 200 "), "{what}: {reply}");
        assert!(
            reply.ends_with(&format!("ORIGIN {}", origin.addr)),
            "{what}: {reply}"
        );
    }
    let heads = origin.heads();
    assert_eq!(heads.len(), 2, "{heads:?}");
    for head in &heads {
        assert!(head.starts_with("GET /raw HTTP/1.0\r\n"), "{head}");
        assert!(
            head.contains(&format!("host: 127.0.0.1:{port}")),
            "the original address is the authority: {head}"
        );
    }
    // The original address still goes through the address table.
    let private = SocketAddr::from(([10, 1, 2, 3], port));
    let config = TransparentConfig::default();
    let gate = TestGate::start_policy(&dns, &[port], Some(private), config, None, raw_ip).await;
    let reply = String::from_utf8(exchange(gate.addr, b"GET / HTTP/1.0\r\n\r\n").await).unwrap();
    assert!(reply.starts_with("HTTP/1.1 403 "), "{reply}");
    assert!(
        reply.contains("x-fleetgate-error: ip_private_range"),
        "{reply}"
    );
}

#[tokio::test]
async fn refused_plain_http_gets_a_json_403_with_the_code_header() {
    let dns = dns().await;
    let origin = RawOrigin::bind("127.0.0.1:0".parse().unwrap()).await;
    let cases = [
        (
            "a name resolving to 10.x",
            "GET / HTTP/1.1\r\nHost: internal.example\r\n\r\n",
            "403",
            "ip_private_range",
        ),
        ("no Host", "GET / HTTP/1.0\r\n\r\n", "403", "no_target_name"),
        (
            "a raw IP Host",
            "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
            "403",
            "no_target_name",
        ),
        (
            "a token in the URL",
            "GET /?token=abc123 HTTP/1.1\r\nHost: web.example\r\n\r\n",
            "403",
            "sensitive_query_param",
        ),
        (
            "two Host headers",
            "GET / HTTP/1.1\r\nHost: web.example\r\nHost: internal.example\r\n\r\n",
            "400",
            "sniff_malformed",
        ),
    ];
    for (what, request, status, code) in cases {
        let gate = TestGate::start(&dns, &[origin.addr.port()], Some(origin.addr)).await;
        let reply = String::from_utf8(exchange(gate.addr, request.as_bytes()).await).unwrap();
        let (head, body) = reply.split_once("\r\n\r\n").expect("a full HTTP response");
        assert!(
            head.starts_with(&format!("HTTP/1.1 {status} ")),
            "{what}: {head}"
        );
        assert!(
            head.contains(&format!("x-fleetgate-error: {code}")),
            "{what}: {head}"
        );
        let json: serde_json::Value = serde_json::from_str(body).expect("a JSON body");
        assert_eq!(json["error"]["code"], code, "{what}");
        assert!(
            json["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{what}"
        );
    }
    assert_eq!(origin.hits(), 0, "no refused request may reach the origin");
}

#[tokio::test]
async fn a_connection_that_was_not_redirected_is_refused_in_production_mode() {
    let dns = dns().await;
    let gate = TestGate::start(&dns, &[443], None).await;
    let reply = exchange(gate.addr, &client_hello(Some("tls.example"))).await;
    assert!(reply.is_empty());
    assert_eq!(
        gate.refusals("no_original_dst"),
        1,
        "the kernel seam must refuse a direct connection"
    );
}

#[tokio::test]
async fn a_target_that_is_the_gates_own_listener_is_a_loop() {
    let dns = StubDns::builder()
        .answer("loop.example", ["127.0.0.1".parse().unwrap()])
        .start()
        .await
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let own = listener.local_addr().unwrap();
    let config = TransparentConfig::default();
    let gate = TestGate::start_with(&dns, &[own.port()], Some(own), config, Some(listener)).await;
    let reply = exchange(gate.addr, &client_hello(Some("loop.example"))).await;
    assert!(reply.is_empty());
    assert_eq!(gate.refusals("proxy_loop"), 1);
}

#[tokio::test]
async fn a_slow_head_times_out_and_the_connection_cap_refuses_the_next_client() {
    let dns = dns().await;
    let origin = RawOrigin::bind("127.0.0.1:0".parse().unwrap()).await;
    let config = TransparentConfig {
        sniff_timeout: Duration::from_millis(400),
        max_connections: 1,
        ..TransparentConfig::default()
    };
    let gate =
        TestGate::start_with(&dns, &[origin.addr.port()], Some(origin.addr), config, None).await;
    let mut slow = TcpStream::connect(gate.addr).await.unwrap();
    slow.write_all(b"GET / HT").await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let second = exchange(gate.addr, b"GET / HTTP/1.1\r\nHost: web.example\r\n\r\n").await;
    assert!(
        second.is_empty(),
        "over the cap, a connection is closed without an answer"
    );
    assert_eq!(gate.refusals("too_many_tunnels"), 1);
    let mut reply = Vec::new();
    slow.read_to_end(&mut reply).await.unwrap();
    let reply = String::from_utf8(reply).unwrap();
    assert!(
        reply.starts_with("HTTP/1.1 408 "),
        "a half-sent HTTP head gets a 408: {reply}"
    );
    assert!(
        reply.contains("x-fleetgate-error: sniff_timeout"),
        "{reply}"
    );
}
