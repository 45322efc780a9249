//! Fixture of the forward-proxy tests: a stub DNS zone, a plain and a TLS loopback origin
//! (the TLS one signed by a throw-away rcgen CA), a gate with the forward proxy bound, and the
//! Debian `curl` driven through `http_proxy`/`HTTPS_PROXY` like the agent container's env.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use fleetgate_e2e::dns::{DnsReply, StubDns};
use fleetgate_e2e::gate::GateProcess;
use fleetgate_e2e::origin::{self, Origin, Reply};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The Debian curl the tests drive.
pub const CURL: &str = "/usr/bin/curl";
/// Names the TLS origin's certificate covers.
const TLS_NAMES: &[&str] = &[
    "secure.test",
    "allowed.test",
    "private.test",
    "blocked.test",
    "rebind.test",
];

/// Everything one test needs; every server stops when it drops.
pub struct Fixture {
    pub dns: StubDns,
    pub origin: Origin,
    pub tls: TlsOrigin,
    pub gate: GateProcess,
    pub proxy: SocketAddr,
    _dir: tempfile::TempDir,
}

/// Options of the gate under test.
#[derive(Default)]
pub struct GateOptions {
    pub args: Vec<String>,
    /// Extra lines under `egress:` (each indented by two spaces), e.g. `  maxTunnels: 1\n`.
    pub egress_extra: String,
    /// Ports allowed besides the fixture's own origins (for a test's own origin).
    pub ports: Vec<u16>,
}

impl Fixture {
    /// Start the zone, both origins and a gate with `options`.
    pub async fn start(options: GateOptions) -> anyhow::Result<Self> {
        let origin = origin::http1()
            .route("/", "hello from the origin")
            .route(
                "/slow",
                Reply::text("slow but complete").delay(Duration::from_millis(1500)),
            )
            .route(
                "/forged",
                Reply::text("ok").header("x-fleetgate-error", "ssrf"),
            )
            .route("/big", Reply::sized("application/octet-stream", 256 * 1024))
            .run()
            .await?;
        let dir = tempfile::tempdir().context("failed to create the test dir")?;
        let tls = TlsOrigin::start(origin.addr(), dir.path()).await?;
        let dns = zone().await?;
        // The forward port must be known before the gate starts (the policy allows it, for the
        // loop-to-self check), so it is picked free and released; another socket can take it
        // in between, and then the gate is started again on a new one.
        let mut attempt = 0;
        let gate = loop {
            attempt += 1;
            let forward_port = free_port().await?;
            let policy = policy(
                &dns,
                &[
                    &[origin.addr().port(), tls.addr.port(), forward_port][..],
                    &options.ports,
                ]
                .concat(),
                forward_port,
            )
            .replacen(
                "  resolver:\n",
                &format!("{}  resolver:\n", options.egress_extra),
                1,
            );
            let mut builder = GateProcess::builder(&policy);
            for arg in &options.args {
                builder = builder.arg(arg);
            }
            match builder.spawn().await {
                Ok(gate) => break gate,
                Err(e) if attempt < 5 && format!("{e:#}").contains("Address already in use") => {}
                Err(e) => return Err(e),
            }
        };
        let proxy = gate
            .listener("forward_proxy")
            .context("the gate must announce its forward_proxy listener")?;
        Ok(Self {
            dns,
            origin,
            tls,
            gate,
            proxy,
            _dir: dir,
        })
    }

    /// `http://{host}:{plain origin port}{path}`.
    pub fn http_url(&self, host: &str, path: &str) -> String {
        self.origin.url_with_host(host, path)
    }

    /// `https://{host}:{TLS origin port}{path}`.
    pub fn https_url(&self, host: &str, path: &str) -> String {
        format!("https://{host}:{}{path}", self.tls.addr.port())
    }

    /// Run curl through the proxy (env `http_proxy`/`HTTPS_PROXY`) with the test CA.
    pub async fn curl(&self, url: &str, extra: &[&str]) -> anyhow::Result<CurlRun> {
        curl_via(self.proxy, &self.tls.ca_path, url, extra).await
    }

    /// The value of metric `name` on the series carrying every `labels` pair (0 when absent).
    pub async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> anyhow::Result<f64> {
        let reply = fleetgate_e2e::http::get(self.gate.admin_addr(), "/metrics").await?;
        let text = reply.text();
        let wanted: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        Ok(text
            .lines()
            .filter(|line| {
                line.starts_with(&format!("{name}{{")) || line.starts_with(&format!("{name} "))
            })
            .filter(|line| wanted.iter().all(|w| line.contains(w.as_str())))
            .find_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
            .unwrap_or(0.0))
    }
}

async fn zone() -> anyhow::Result<StubDns> {
    let local: IpAddr = Ipv4Addr::LOCALHOST.into();
    StubDns::builder()
        .answer("allowed.test", [local])
        .answer("secure.test", [local])
        .answer("blocked.test", [local])
        .answer("self.test", [local])
        .answer("private.test", ["10.0.0.5".parse()?])
        .answer("metadata.test", ["169.254.169.254".parse()?])
        .name(
            "rebind.test",
            [
                DnsReply::Answer(vec![local]),
                DnsReply::Answer(vec!["10.0.0.9".parse()?]),
                DnsReply::Answer(vec![local]),
                DnsReply::Answer(vec!["10.0.0.9".parse()?]),
                DnsReply::Answer(vec![local]),
                DnsReply::Answer(vec!["10.0.0.9".parse()?]),
            ],
        )
        .start()
        .await
}

fn policy(dns: &StubDns, ports: &[u16], forward_port: u16) -> String {
    let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
    let (ports, dns) = (ports.join(", "), dns.addr());
    format!(
        r#"version: v1
store:
  root: ${{WORK_DIR}}/store
listen:
  api: 127.0.0.1:0
  admin: 127.0.0.1:0
  forwardProxy: 127.0.0.1:{forward_port}
fetch:
  connectTimeoutMs: 1000
  headerTimeoutMs: 5000
egress:
  allowCIDRs: ["127.0.0.1/32"]
  ports: [{ports}]
  resolver:
    nameservers: ["{dns}"]
    timeoutMs: 1000
    attempts: 1
websiteBlocklist:
  domains: ["blocked.test"]
"#
    )
}

/// A free loopback port (bound then released; the gate binds it right after).
pub async fn free_port() -> anyhow::Result<u16> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    Ok(l.local_addr()?.port())
}

/// What one curl run showed.
// `exit` and `stderr` are read through `Debug` in assertion messages.
#[allow(dead_code)]
#[derive(Debug)]
pub struct CurlRun {
    /// curl's exit code.
    pub exit: i32,
    /// `%{http_code}`: the final response status (0 when there was none).
    pub status: u16,
    /// `%{http_connect}`: the CONNECT response status (0 without CONNECT).
    pub connect_status: u16,
    /// Every response head curl received (CONNECT's included), as written by `-D`.
    pub headers: String,
    /// The final response body.
    pub body: String,
    /// curl's stderr.
    pub stderr: String,
}

impl CurlRun {
    /// Whether any received head carries `name: value` (case-insensitive name).
    pub fn has_header(&self, name: &str, value: &str) -> bool {
        self.headers.lines().any(|line| {
            line.split_once(':')
                .is_some_and(|(k, v)| k.trim().eq_ignore_ascii_case(name) && v.trim() == value)
        })
    }
}

/// Run curl with the proxy in its env, as the agent container's env sets it.
pub async fn curl_via(
    proxy: SocketAddr,
    ca: &std::path::Path,
    url: &str,
    extra: &[&str],
) -> anyhow::Result<CurlRun> {
    let dir = tempfile::tempdir()?;
    let (head, body) = (dir.path().join("head"), dir.path().join("body"));
    let proxy_url = format!("http://{proxy}");
    let out = tokio::process::Command::new(CURL)
        .args(["-sS", "--max-time", "15", "--cacert"])
        .arg(ca)
        .arg("-D")
        .arg(&head)
        .arg("-o")
        .arg(&body)
        .args(["-w", "%{http_code} %{http_connect}"])
        .args(extra)
        .arg(url)
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .env("http_proxy", &proxy_url)
        .env("HTTPS_PROXY", &proxy_url)
        .env("https_proxy", &proxy_url)
        .kill_on_drop(true)
        .output()
        .await
        .context("failed to run curl")?;
    let written = String::from_utf8_lossy(&out.stdout).to_string();
    let mut codes = written
        .split_whitespace()
        .map(|c| c.parse::<u16>().unwrap_or(0));
    Ok(CurlRun {
        exit: out.status.code().unwrap_or(-1),
        status: codes.next().unwrap_or(0),
        connect_status: codes.next().unwrap_or(0),
        headers: std::fs::read_to_string(&head).unwrap_or_default(),
        body: std::fs::read_to_string(&body).unwrap_or_default(),
        stderr: String::from_utf8_lossy(&out.stderr).to_string(),
    })
}

/// Send `CONNECT authority` on a new connection; returns the status, the head and the stream.
pub async fn raw_connect(
    proxy: SocketAddr,
    authority: &str,
) -> anyhow::Result<(u16, String, TcpStream)> {
    let mut stream = TcpStream::connect(proxy).await?;
    let request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut byte))
            .await
            .context("the proxy did not answer the CONNECT")??;
        if n == 0 {
            break;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_string();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok((status, head, stream))
}

/// A TLS front for an origin: terminates TLS with a leaf signed by a fresh CA and relays the
/// plaintext to the origin (whose hit counters then count the HTTPS requests too). It records
/// the server name of every ClientHello that reaches it.
pub struct TlsOrigin {
    pub addr: SocketAddr,
    pub ca_path: PathBuf,
    hellos: Arc<std::sync::Mutex<Vec<Option<String>>>>,
    task: JoinHandle<()>,
}

impl Drop for TlsOrigin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsOrigin {
    async fn start(backend: SocketAddr, dir: &std::path::Path) -> anyhow::Result<Self> {
        let (ca_pem, chain, key) = test_pki()?;
        let ca_path = dir.join("ca.pem");
        std::fs::write(&ca_path, ca_pem)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        let config = Arc::new(config);
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let hellos = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = hellos.clone();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (config, seen) = (config.clone(), seen.clone());
                tokio::spawn(async move {
                    let lazy = rustls::server::Acceptor::default();
                    let Ok(start) = tokio_rustls::LazyConfigAcceptor::new(lazy, tcp).await else {
                        return;
                    };
                    let name = start.client_hello().server_name().map(str::to_string);
                    if let Ok(mut seen) = seen.lock() {
                        seen.push(name);
                    }
                    let Ok(mut tls) = start.into_stream(config).await else {
                        return;
                    };
                    let Ok(mut plain) = TcpStream::connect(backend).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        Ok(Self {
            addr,
            ca_path,
            hellos,
            task,
        })
    }

    /// The server name of every ClientHello that reached this origin, in order (`None` for a
    /// ClientHello without SNI).
    pub fn server_names(&self) -> Vec<Option<String>> {
        self.hellos.lock().map(|h| h.clone()).unwrap_or_default()
    }
}

type Pki = (
    String,
    Vec<rustls::pki_types::CertificateDer<'static>>,
    rustls::pki_types::PrivateKeyDer<'static>,
);

fn test_pki() -> anyhow::Result<Pki> {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "fleetgate test CA");
    let ca_key = rcgen::KeyPair::generate()?;
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key)?;
    let names: Vec<String> = TLS_NAMES.iter().map(|n| (*n).to_string()).collect();
    let leaf_key = rcgen::KeyPair::generate()?;
    let leaf = rcgen::CertificateParams::new(names)?.signed_by(&leaf_key, &ca)?;
    let key = rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der())
        .map_err(|e| anyhow::anyhow!("failed to load the leaf key: {e}"))?;
    Ok((ca.pem(), vec![leaf.der().clone()], key))
}

/// Wait until `cond` holds, polling; fails after `within`.
pub async fn eventually(within: Duration, mut cond: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + within;
    while !cond() {
        if tokio::time::Instant::now() > deadline {
            bail!("the condition did not hold within {within:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}
