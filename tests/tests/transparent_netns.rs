//! Transparent capture in a real kernel (root only): two network namespaces joined by a veth
//! pair, the rules from `fleetgate-proxy init-iptables` applied in the "pod" namespace, the
//! gate running there as uid 15000 and curl as uid 1000.
//!
//! ```text
//!  fgtp-pod-<pid>  192.0.2.1 / 2001:db8::1          fgtp-rem-<pid>  192.0.2.10 / 2001:db8::10
//!   curl (uid 1000) ─► nat OUTPUT ─► :15182 gate (uid 15000) ─── veth ───► origin :80, TLS recorder :443
//!   stub DNS on the pod's 127.0.0.1
//! ```
//!
//! Shows: the client's TCP lands on the gate (v4 and v6), the gate's own traffic is exempt and
//! reaches the origin (no loop), blocked names and raw IPs are refused, an SNI/destination
//! mismatch dials the SNI name's checked address, re-applying the rules is idempotent and
//! `--cleanup` removes them. A root process that keeps SETUID walks out as the gate's uid (what
//! admission refuses in a cluster); the identities admission lets in (uid 1000; root without
//! SETUID/SETGID and with no_new_privs) stay captured and cannot become the gate. UDP leaves
//! the pod only as the gate's or as DNS to the name servers (`--dns-servers`); any other
//! datagram is refused on the spot. A root process that keeps the runtime's NET_RAW writes a
//! frame on a packet socket under every rule (what admission refuses); without NET_RAW it
//! cannot open one. Skipped with a message when not root or when the tools are missing,
//! unless `FLEETGATE_REQUIRE_NETNS=1`. Namespaces are deleted even on panic.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::print_stdout)]

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fleetgate_e2e::dns::StubDns;
use fleetgate_e2e::gate::{GateProcess, gate_binary};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const GATE_UID: &str = "15000";
const AGENT_UID: &str = "1000";
const ORIGIN_V4: &str = "192.0.2.10";
/// The system's Python (readable by every uid, unlike a per-user install), for the UDP and
/// packet-socket senders.
const PYTHON: &str = "/usr/bin/python3";

/// Two namespaces and their veth pair; everything is deleted on drop, panics included.
struct Netns {
    pod: String,
    remote: String,
}

impl Netns {
    fn create() -> Result<Self, String> {
        let pid = std::process::id();
        let ns = Self {
            pod: format!("fgtp-pod-{pid}"),
            remote: format!("fgtp-rem-{pid}"),
        };
        for name in [&ns.pod, &ns.remote] {
            let _ = run("ip", &["netns", "del", name]);
            let out = run("ip", &["netns", "add", name])?;
            if !out.status.success() {
                return Err(format!("`ip netns add` failed: {}", text(&out.stderr)));
            }
        }
        Ok(ns)
    }

    /// veth, addresses (IPv6 without duplicate address detection), loopbacks up.
    fn wire(&self) {
        let (a, b) = (
            format!("fgtp{}a", std::process::id()),
            format!("fgtp{}b", std::process::id()),
        );
        must(
            "ip",
            &[
                "link",
                "add",
                &a,
                "netns",
                &self.pod,
                "type",
                "veth",
                "peer",
                "name",
                &b,
                "netns",
                &self.remote,
            ],
        );
        for (ns, dev, v4, v6) in [
            (&self.pod, &a, "192.0.2.1/24", "2001:db8::1/64"),
            (&self.remote, &b, "192.0.2.10/24", "2001:db8::10/64"),
        ] {
            self.exec(ns, &["ip", "link", "set", "lo", "up"]);
            self.exec(ns, &["ip", "addr", "add", v4, "dev", dev]);
            self.exec(ns, &["ip", "-6", "addr", "add", v6, "dev", dev, "nodad"]);
            self.exec(ns, &["ip", "link", "set", dev, "up"]);
        }
    }

    fn exec(&self, ns: &str, args: &[&str]) -> Output {
        let mut all = vec!["netns", "exec", ns];
        all.extend_from_slice(args);
        let out = run("ip", &all).expect("ip must run");
        assert!(
            out.status.success(),
            "`{}` in {ns} failed: {}",
            args.join(" "),
            text(&out.stderr)
        );
        out
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for name in [&self.pod, &self.remote] {
            if let Ok(out) = run("ip", &["netns", "pids", name]) {
                for pid in text(&out.stdout).split_whitespace() {
                    let _ = run("kill", &["-KILL", pid]);
                }
            }
            let _ = run("ip", &["netns", "del", name]);
        }
    }
}

fn run(cmd: &str, args: &[&str]) -> Result<Output, String> {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("failed to run {cmd}: {e}"))
}

fn must(cmd: &str, args: &[&str]) -> Output {
    let out = run(cmd, args).expect("the command must start");
    assert!(
        out.status.success(),
        "`{cmd} {}` failed: {}",
        args.join(" "),
        text(&out.stderr)
    );
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Why this test cannot run here, if it cannot.
fn missing_prerequisite() -> Option<String> {
    let uid = run("id", &["-u"]).map(|o| text(&o.stdout).trim().to_string());
    if uid.as_deref() != Ok("0") {
        return Some("not root".into());
    }
    let tools = ["ip", "setpriv", "curl"];
    for tool in tools {
        if run("sh", &["-c", &format!("command -v {tool}")]).map(|o| o.status.success()) != Ok(true)
        {
            return Some(format!("`{tool}` is not installed"));
        }
    }
    if !Path::new(PYTHON).exists() {
        return Some(format!("{PYTHON} is not installed"));
    }
    let iptables = [
        "iptables-nft-restore",
        "iptables-restore",
        "iptables-legacy-restore",
    ];
    let found = iptables.iter().any(|t| {
        ["/usr/sbin", "/sbin", "/usr/bin"]
            .iter()
            .any(|d| Path::new(d).join(t).exists())
    });
    (!found).then(|| "iptables is not installed (apt-get install iptables)".into())
}

/// Run `f` on a thread inside network namespace `ns` (sockets made there belong to it).
fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let path = PathBuf::from("/run/netns").join(ns);
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("the namespace file must open");
        nix::sched::setns(file, nix::sched::CloneFlags::CLONE_NEWNET)
            .expect("setns must work as root");
        f()
    })
}

/// The stub DNS server on the pod namespace's loopback, served by its own thread.
struct PodDns {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl PodDns {
    fn start(ns: &str) -> Self {
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        in_netns(ns, move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let dns = StubDns::builder()
                    .answer("allowed.test", [ORIGIN_V4.parse().unwrap()])
                    .answer("blocked.test", [ORIGIN_V4.parse().unwrap()])
                    .answer("metadata.test", ["169.254.169.254".parse().unwrap()])
                    .answer("private.test", ["10.0.0.5".parse().unwrap()])
                    .start()
                    .await
                    .expect("the stub DNS must start");
                addr_tx.send(dns.addr()).unwrap();
                let _ = stopped.await;
            });
        });
        let addr = addr_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the DNS address");
        Self {
            addr,
            stop: Some(stop),
        }
    }
}

impl Drop for PodDns {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Listeners bound inside the remote namespace: an HTTP origin (:80) and a TLS recorder (:443).
struct Remote {
    http_hits: Arc<AtomicUsize>,
    tls_hellos: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Remote {
    async fn start(ns: &str) -> Self {
        let bind = |port: u16| {
            let l = std::net::TcpListener::bind((ORIGIN_V4, port))
                .expect("the remote listener must bind");
            l.set_nonblocking(true).unwrap();
            l
        };
        let (http, tls) = in_netns(ns, move || (bind(80), bind(443))).join().unwrap();
        let remote = Self {
            http_hits: Arc::default(),
            tls_hellos: Arc::default(),
        };
        let (hits, hellos) = (remote.http_hits.clone(), remote.tls_hellos.clone());
        let http = TcpListener::from_std(http).unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = http.accept().await {
                hits.fetch_add(1, Ordering::SeqCst);
                let mut buf = vec![0u8; 8192];
                let _ = s.read(&mut buf).await;
                let body = "hello from the remote origin";
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(reply.as_bytes()).await;
            }
        });
        let tls = TcpListener::from_std(tls).unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = tls.accept().await {
                let mut buf = vec![0u8; 8192];
                let n = s.read(&mut buf).await.unwrap_or(0);
                hellos.lock().unwrap().push(buf[..n].to_vec());
            }
        });
        remote
    }
}

/// A copy of the gate binary in `dir`, readable by every uid.
fn gate_copy(dir: &Path) -> PathBuf {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.join("fleetgate-proxy");
    std::fs::copy(gate_binary().expect("the gate binary must build"), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// A wrapper that starts the gate copy in `ns` as `uid`, with its work dir opened to that uid
/// (the harness makes it 0700 for root).
fn gate_launcher(ns: &str, dir: &Path, uid: &str) -> PathBuf {
    let bin = dir.join("fleetgate-proxy");
    let wrapper = dir.join(format!("gate-in-netns-{uid}.sh"));
    let script = format!(
        "#!/bin/sh\n# args: serve --policy <file>\nchmod -R a+rwX \"$(dirname \"$3\")\"\n\
         exec ip netns exec {ns} setpriv --reuid={uid} --regid={uid} --clear-groups {} \"$@\"\n",
        bin.display()
    );
    std::fs::write(&wrapper, script).unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrapper
}

fn policy(dns: SocketAddr) -> String {
    format!(
        "version: v1\n\
         listen:\n  api: 127.0.0.1:0\n  admin: 127.0.0.1:0\n  transparent: 127.0.0.1:15182\n\
         egress:\n  allowCIDRs: [\"192.0.2.0/24\"]\n  ports: [80, 443]\n  resolver:\n    nameservers: [\"{dns}\"]\n    timeoutMs: 1000\n    attempts: 1\n\
         websiteBlocklist:\n  domains: [\"blocked.test\"]\n\
         store:\n  root: ${{WORK_DIR}}/store\n"
    )
}

/// curl in `ns` as `uid`: (exit code, headers and body).
async fn curl(ns: &str, uid: &str, args: &[&str]) -> (i32, String) {
    let reuid = format!("--reuid={uid}");
    let regid = format!("--regid={uid}");
    let mut all = vec![
        "netns",
        "exec",
        ns,
        "setpriv",
        &reuid,
        &regid,
        "--clear-groups",
    ];
    all.extend_from_slice(&["curl", "-q", "-sS", "-m", "8", "-D", "-"]);
    all.extend_from_slice(args);
    let out = tokio::process::Command::new("ip")
        .args(&all)
        .output()
        .await
        .expect("curl must start");
    (out.status.code().unwrap_or(-1), text(&out.stdout))
}

/// `init-iptables` in the pod namespace (as root, like the init container): its JSON lines.
fn init_iptables(ns: &Netns, bin: &Path, extra: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec![bin.to_str().unwrap(), "init-iptables"];
    args.extend_from_slice(extra);
    let out = ns.exec(&ns.pod, &args);
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn saved_nat(ns: &Netns, applied: &[serde_json::Value], family: usize) -> String {
    let restore = applied[family]["tool"].as_str().unwrap();
    let save = restore.replace("-restore", "-save");
    text(&ns.exec(&ns.pod, &[&save, "-t", "nat"]).stdout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn captured_tcp_lands_on_the_gate_and_only_the_gate_leaves() {
    if let Some(why) = missing_prerequisite() {
        assert!(
            std::env::var_os("FLEETGATE_REQUIRE_NETNS").is_none(),
            "FLEETGATE_REQUIRE_NETNS=1 but {why}"
        );
        println!(
            "skipped: the network-namespace test needs root, ip, setpriv, curl and iptables ({why})"
        );
        return;
    }
    let ns = match Netns::create() {
        Ok(ns) => ns,
        Err(why) => {
            assert!(
                std::env::var_os("FLEETGATE_REQUIRE_NETNS").is_none(),
                "{why}"
            );
            println!("skipped: cannot create network namespaces here ({why})");
            return;
        }
    };
    ns.wire();
    let dir = tempfile::tempdir().unwrap();
    let bin = gate_copy(dir.path());
    let launcher = gate_launcher(&ns.pod, dir.path(), GATE_UID);

    // Apply twice: the second run must leave exactly one jump. The remote end stands for the
    // pod's name server.
    let dns_servers = ["--dns-servers", "192.0.2.10,2001:db8::10"];
    let first = init_iptables(&ns, &bin, &dns_servers);
    let applied = init_iptables(&ns, &bin, &dns_servers);
    assert_eq!(
        first.len(),
        2,
        "IPv4 and IPv6 rules must be applied: {first:?}"
    );
    for family in [0, 1] {
        let saved = saved_nat(&ns, &applied, family);
        let jumps = saved
            .lines()
            .filter(|l| l.starts_with("-A OUTPUT") && l.contains("-j FLEETGATE_OUTPUT"))
            .count();
        assert_eq!(jumps, 1, "re-applying must keep one jump:\n{saved}");
        let udp_jumps = saved
            .lines()
            .filter(|l| l.starts_with("-A OUTPUT") && l.contains("-j FLEETGATE_UDP"))
            .count();
        assert_eq!(udp_jumps, 1, "re-applying must keep one UDP jump:\n{saved}");
        assert_eq!(
            saved.matches("--uid-owner 15000").count(),
            2,
            "chains must be flushed, not doubled (one exemption per chain):\n{saved}"
        );
    }

    let dns = PodDns::start(&ns.pod);
    let remote = Remote::start(&ns.remote).await;
    let gate = GateProcess::builder(&policy(dns.addr))
        .binary(&launcher)
        .spawn()
        .await
        .expect("the gate must start in the pod namespace as uid 15000");
    assert!(
        gate.listener("transparent_v6").is_some(),
        "the gate must also listen on [::1]:15182"
    );

    check_allowed_http_lands_on_the_gate_and_reaches_the_origin(&ns, &gate, &remote).await;
    check_refusals(&ns, &gate, &remote).await;
    check_the_admission_table(&ns, &gate, &remote).await;
    check_tls_is_dialed_by_sni_name(&ns, &gate, &remote).await;
    check_ipv6_is_captured(&ns, &gate, &remote).await;
    check_gate_uid_is_exempt(&ns, &gate, &remote).await;
    check_who_can_send_as_the_gate(&ns, &remote).await;
    check_udp_leaves_only_as_dns_or_the_gate(&ns).await;
    check_a_packet_socket_needs_net_raw(&ns).await;

    drop(gate);
    check_a_gate_whose_uid_is_not_exempt_refuses_the_loop(&ns, dir.path(), dns.addr, &remote).await;
    let cleaned = init_iptables(&ns, &bin, &["--cleanup"]);
    for family in [0, 1] {
        let saved = saved_nat(&ns, &cleaned, family);
        assert!(
            !saved.contains("FLEETGATE"),
            "--cleanup must remove every rule and chain:\n{saved}"
        );
    }
}

async fn decision(gate: &GateProcess, url_part: &str) -> serde_json::Value {
    let part = url_part.to_string();
    gate.wait_for_json_log(
        move |l| {
            l["message"] == "egress.decision"
                && l["listener"] == "transparent"
                && l["url"].as_str().is_some_and(|u| u.contains(&part))
        },
        Duration::from_secs(10),
    )
    .await
    .expect("the gate must log a decision for the captured connection")
}

async fn check_allowed_http_lands_on_the_gate_and_reaches_the_origin(
    ns: &Netns,
    gate: &GateProcess,
    remote: &Remote,
) {
    let (code, out) = curl(
        &ns.pod,
        AGENT_UID,
        &[
            "--resolve",
            "allowed.test:80:192.0.2.10",
            "http://allowed.test/page",
        ],
    )
    .await;
    assert_eq!(code, 0, "curl through the capture must succeed: {out}");
    assert!(
        out.contains("hello from the remote origin"),
        "the origin's body must come back: {out}"
    );
    let line = decision(gate, "http://allowed.test/page").await;
    assert_eq!(line["verdict"], "allow");
    assert_eq!(
        line["original_dst"], "192.0.2.10:80",
        "the gate must read SO_ORIGINAL_DST"
    );
    assert_eq!(
        remote.http_hits.load(Ordering::SeqCst),
        1,
        "the gate's own connection reached the origin once (no loop)"
    );
}

async fn check_refusals(ns: &Netns, gate: &GateProcess, remote: &Remote) {
    let cases = [
        (
            "a blocklisted name",
            vec![
                "--resolve",
                "blocked.test:80:192.0.2.10",
                "http://blocked.test/",
            ],
            "blocked_by_policy",
        ),
        ("a raw IP", vec!["http://192.0.2.10/"], "no_target_name"),
    ];
    for (what, args, code) in cases {
        let (_, out) = curl(&ns.pod, AGENT_UID, &args).await;
        assert!(
            out.starts_with("HTTP/1.1 403"),
            "{what} must be refused by the gate: {out}"
        );
        assert!(
            out.contains(&format!("x-fleetgate-error: {code}")),
            "{what}: {out}"
        );
    }
    assert_eq!(
        remote.http_hits.load(Ordering::SeqCst),
        1,
        "refused requests must not reach the origin"
    );
    let line = decision(gate, "blocked.test").await;
    assert_eq!(
        (line["verdict"].as_str(), line["reason"].as_str()),
        (Some("deny"), Some("blocked_by_policy"))
    );
}

/// The targets of the forward proxy's and the extract API's admission table, captured: each
/// gets the code those listeners give, one decision line with the other listeners' fields,
/// and no byte reaches the origin. (A loop to the gate's own listener is the last check of
/// this file; CONNECT's `secret_in_host` is a CONNECT row: a captured HTTP request has a URL.)
async fn check_the_admission_table(ns: &Netns, gate: &GateProcess, remote: &Remote) {
    let hits = remote.http_hits.load(Ordering::SeqCst);
    let secret = "sk-abcdefghijklmnopqrstuvwxyz012345";
    let cases = [
        (
            "metadata.test",
            80,
            "/latest".to_string(),
            "ip_cloud_metadata",
        ),
        ("private.test", 80, "/".to_string(), "ip_private_range"),
        ("nowhere.test", 80, "/".to_string(), "dns_failure"),
        (
            "blocked.test",
            80,
            "/table".to_string(),
            "blocked_by_policy",
        ),
        ("allowed.test", 80, format!("/?q={secret}"), "secret_in_url"),
        (
            "AKIAABCDEFGHIJKLMNOP.allowed.test",
            80,
            "/".to_string(),
            "secret_in_url",
        ),
        ("allowed.test", 8080, "/".to_string(), "port_not_allowed"),
    ];
    let mut fields: Option<Vec<String>> = None;
    for (host, port, path, code) in cases {
        let resolve = format!("{host}:{port}:{ORIGIN_V4}");
        let url = format!("http://{host}:{port}{path}");
        let before = gate.json_logs().len();
        let (_, out) = curl(&ns.pod, AGENT_UID, &["--resolve", &resolve, &url]).await;
        assert!(out.starts_with("HTTP/1.1 403"), "{url}: {out}");
        assert!(
            out.contains(&format!("x-fleetgate-error: {code}")),
            "{url} must be refused with {code}: {out}"
        );
        assert!(
            !out.contains(secret),
            "a refused secret is never repeated: {out}"
        );
        // The line is written off the request path: wait for it.
        let mut lines = Vec::new();
        for _ in 0..200 {
            lines = gate.json_logs()[before..]
                .iter()
                .filter(|l| l["message"] == "egress.decision" && l["reason"] == code)
                .cloned()
                .collect::<Vec<serde_json::Value>>();
            if !lines.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(lines.len(), 1, "{url}: one decision line");
        let line = &lines[0];
        assert_eq!(line["listener"], "transparent", "{line}");
        assert_eq!(line["verdict"], "deny", "{line}");
        assert!(
            !line.to_string().contains(secret),
            "the decision line never repeats the secret: {line}"
        );
        let keys: Vec<String> = line
            .as_object()
            .map(|o| o.keys().cloned().collect::<Vec<String>>())
            .unwrap_or_default()
            .into_iter()
            .filter(|k: &String| !matches!(k.as_str(), "timestamp" | "fields" | "span"))
            .collect();
        match &fields {
            None => fields = Some(keys),
            Some(first) => assert_eq!(&keys, first, "{url}: the same fields on every line"),
        }
    }
    assert_eq!(
        remote.http_hits.load(Ordering::SeqCst),
        hits,
        "no refused request reaches the origin"
    );
}

async fn check_tls_is_dialed_by_sni_name(ns: &Netns, gate: &GateProcess, remote: &Remote) {
    // The agent's "DNS" says 192.0.2.99, a host that does not exist; SNI says allowed.test.
    let _ = curl(
        &ns.pod,
        AGENT_UID,
        &[
            "-k",
            "--resolve",
            "allowed.test:443:192.0.2.99",
            "https://allowed.test/",
        ],
    )
    .await;
    let _ = curl(
        &ns.pod,
        AGENT_UID,
        &[
            "-k",
            "--resolve",
            "blocked.test:443:192.0.2.10",
            "https://blocked.test/",
        ],
    )
    .await;
    let hellos = remote.tls_hellos.lock().unwrap().clone();
    assert_eq!(
        hellos.len(),
        1,
        "only the allowed SNI may reach the TLS port"
    );
    let sni = b"allowed.test";
    assert!(
        hellos[0].windows(sni.len()).any(|w| w == sni),
        "the replayed ClientHello must carry the SNI"
    );
    let line = decision(gate, "tls://allowed.test:443").await;
    assert_eq!(
        line["original_dst"], "192.0.2.99:443",
        "the original destination is logged, not dialed"
    );
}

async fn check_ipv6_is_captured(ns: &Netns, gate: &GateProcess, remote: &Remote) {
    let before = remote.http_hits.load(Ordering::SeqCst);
    let (code, out) = curl(
        &ns.pod,
        AGENT_UID,
        &["-g", "-H", "Host: allowed.test", "http://[2001:db8::10]/v6"],
    )
    .await;
    assert_eq!(code, 0, "IPv6 TCP must be captured too: {out}");
    assert!(out.contains("hello from the remote origin"), "{out}");
    let line = decision(gate, "http://allowed.test/v6").await;
    assert_eq!(
        line["original_dst"], "[2001:db8::10]:80",
        "IP6T_SO_ORIGINAL_DST must be read"
    );
    assert_eq!(remote.http_hits.load(Ordering::SeqCst), before + 1);
}

async fn check_a_gate_whose_uid_is_not_exempt_refuses_the_loop(
    ns: &Netns,
    dir: &Path,
    dns: SocketAddr,
    remote: &Remote,
) {
    let wrong_uid = gate_launcher(&ns.pod, dir, "15001");
    let gate = GateProcess::builder(&policy(dns))
        .binary(&wrong_uid)
        .spawn()
        .await
        .expect("the misconfigured gate must start");
    let before = remote.http_hits.load(Ordering::SeqCst);
    let (_, out) = curl(
        &ns.pod,
        AGENT_UID,
        &[
            "--resolve",
            "allowed.test:80:192.0.2.10",
            "http://allowed.test/loop",
        ],
    )
    .await;
    assert!(
        out.contains("x-fleetgate-error: proxy_loop"),
        "the gate's own connection came back and must be refused: {out}"
    );
    assert!(
        out.contains("came back into this gate"),
        "the request that dialled the looped connection says so: {out}"
    );
    assert_eq!(
        remote.http_hits.load(Ordering::SeqCst),
        before,
        "a looping gate must not reach the origin"
    );
    drop(gate);
}

async fn check_gate_uid_is_exempt(ns: &Netns, gate: &GateProcess, remote: &Remote) {
    let before = remote.http_hits.load(Ordering::SeqCst);
    let (code, out) = curl(&ns.pod, GATE_UID, &["http://192.0.2.10/direct"]).await;
    assert_eq!(
        code, 0,
        "the gate uid must reach the origin directly: {out}"
    );
    assert!(
        !out.contains("x-fleetgate-error"),
        "the gate uid's traffic must bypass the capture: {out}"
    );
    assert_eq!(remote.http_hits.load(Ordering::SeqCst), before + 1);
    let logs = gate.stderr_log();
    assert!(
        !logs.contains("/direct"),
        "the exempt request must never reach the transparent listener"
    );
}

/// `command` in `ns` as root, through `setpriv` with `restrict` (the container's security
/// context): exit code, stdout, stderr.
async fn as_root(ns: &str, restrict: &[&str], command: &[&str]) -> (i32, String, String) {
    let mut all = vec!["netns", "exec", ns, "setpriv"];
    all.extend_from_slice(restrict);
    all.push("--");
    all.extend_from_slice(command);
    let out = tokio::process::Command::new("ip")
        .args(&all)
        .output()
        .await
        .expect("setpriv must start");
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

/// Who can send as the gate (docs/kubernetes.md, "Who may send as the gate"): a root process
/// that keeps SETUID switches to the gate's uid and reaches a blocklisted name past the gate,
/// which is why admission refuses it; the identities admission lets in stay captured. uid 0
/// without SETUID/SETGID (bounding and inheritable sets, as `capabilities.drop` leaves them)
/// and with no_new_privs (`allowPrivilegeEscalation: false`) is refused by the gate and cannot
/// become the gate; neither can uid 1000.
async fn check_who_can_send_as_the_gate(ns: &Netns, remote: &Remote) {
    let curl_blocked = [
        "curl",
        "-q",
        "-sS",
        "-m",
        "8",
        "-D",
        "-",
        "--resolve",
        "blocked.test:80:192.0.2.10",
        "http://blocked.test/as-the-gate",
    ];
    let become_gate = [
        "setpriv",
        "--reuid=15000",
        "--regid=15000",
        "--clear-groups",
    ];
    let switched: Vec<&str> = become_gate.iter().chain(&curl_blocked).copied().collect();

    // Root with the runtime's capabilities: setuid(15000), then out past the capture.
    let before = remote.http_hits.load(Ordering::SeqCst);
    let (code, out, err) = as_root(&ns.pod, &[], &switched).await;
    assert_eq!(
        code, 0,
        "root keeping SETUID must become the gate: {out}{err}"
    );
    assert!(
        !out.contains("x-fleetgate-error") && out.contains("hello from the remote origin"),
        "as the gate's uid the blocklisted name is not captured: {out}"
    );
    assert_eq!(
        remote.http_hits.load(Ordering::SeqCst),
        before + 1,
        "root switched to the gate's uid reaches the origin: this is what admission refuses"
    );

    // Root as admission admits it: no SETUID/SETGID, no privilege escalation.
    let admitted = [
        "--bounding-set=-setuid,-setgid",
        "--inh-caps=-setuid,-setgid",
        "--no-new-privs",
    ];
    let (_, out, err) = as_root(&ns.pod, &admitted, &curl_blocked).await;
    assert!(
        out.starts_with("HTTP/1.1 403") && out.contains("x-fleetgate-error: blocked_by_policy"),
        "root without SETUID/SETGID is captured and refused: {out}{err}"
    );
    let (code, out, err) = as_root(&ns.pod, &admitted, &switched).await;
    assert!(
        code != 0 && out.is_empty() && err.contains("setresuid"),
        "root without SETUID/SETGID must not become the gate (exit {code}): {out}{err}"
    );

    // uid 1000, as the example agents run: no capability to switch with.
    let (code, out, err) = as_root(
        &ns.pod,
        &["--reuid=1000", "--regid=1000", "--clear-groups"],
        &switched,
    )
    .await;
    assert!(
        code != 0 && out.is_empty() && err.contains("setresuid"),
        "uid 1000 must not become the gate (exit {code}): {out}{err}"
    );
    assert_eq!(
        remote.http_hits.load(Ordering::SeqCst),
        before + 1,
        "nothing but the switched root process reached the origin"
    );
}

/// A UDP receiver in the remote namespace on `ports` of both its addresses: the payloads that
/// arrived.
fn udp_receiver(ns: &str, ports: &[u16]) -> Arc<Mutex<Vec<String>>> {
    let got: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut sockets = Vec::new();
    for port in ports {
        for host in [ORIGIN_V4, "2001:db8::10"] {
            let addr = SocketAddr::new(host.parse().unwrap(), *port);
            let socket = in_netns(ns, move || {
                std::net::UdpSocket::bind(addr).expect("the remote UDP socket must bind")
            })
            .join()
            .unwrap();
            sockets.push(socket);
        }
    }
    for socket in sockets {
        let got = got.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while let Ok(n) = socket.recv(&mut buf) {
                got.lock().unwrap().push(text(&buf[..n]));
            }
        });
    }
    got
}

/// Sends one datagram (`argv`: host port payload) from a connected UDP socket and waits a
/// second for an answer: prints `refused` (the capture's refusal), `timeout` (it left and
/// nobody answered) or an error name.
const UDP_SEND: &str = r#"
import socket, sys
host, port, payload = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1.0)
s.connect((host, port))
try:
    s.send(payload)
    s.recv(100)
    print("answered")
except ConnectionRefusedError:
    print("refused")
except socket.timeout:
    print("timeout")
except OSError as e:
    print(type(e).__name__, e.errno)
"#;

/// Writes one IPv4/UDP packet (`argv`: device, next-hop MAC, source, destination, port,
/// payload) on a packet socket (`AF_PACKET`): below netfilter, so no iptables rule sees it.
/// Prints `sent`, or `EPERM` when the process lacks NET_RAW.
const PACKET_SEND: &str = r#"
import socket, struct, sys
dev, mac, src, dst, port, payload = sys.argv[1:7]
data = payload.encode()
udp = struct.pack("!HHHH", 40000, int(port), 8 + len(data), 0) + data
ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                 socket.inet_aton(src), socket.inet_aton(dst))
words = struct.unpack("!10H", ip)
total = sum(words)
total = (total >> 16) + (total & 0xFFFF)
total += total >> 16
ip = ip[:10] + struct.pack("!H", ~total & 0xFFFF) + ip[12:]
try:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x0800))
except PermissionError:
    print("EPERM")
    sys.exit(3)
s.sendto(ip + udp, (dev, 0x0800, 0, 0, bytes.fromhex(mac.replace(":", ""))))
print("sent")
"#;

/// UDP out of the pod: the gate's uid and DNS to the name servers leave; any other datagram of
/// any other uid (QUIC to a blocklisted site, a tunnel) is refused at once, over both families.
async fn check_udp_leaves_only_as_dns_or_the_gate(ns: &Netns) {
    let got = udp_receiver(&ns.remote, &[53, 9999]);
    let send = |uid: &'static str, host: &'static str, port: &'static str, tag: &'static str| {
        let pod = ns.pod.clone();
        async move {
            let (_, out, err) = as_root(
                &pod,
                &[
                    &format!("--reuid={uid}"),
                    &format!("--regid={uid}"),
                    "--clear-groups",
                ],
                &[PYTHON, "-c", UDP_SEND, host, port, tag],
            )
            .await;
            format!("{}{}", out.trim(), err.trim())
        }
    };
    let quic = send(AGENT_UID, ORIGIN_V4, "9999", "agent-udp-v4").await;
    assert_eq!(quic, "refused", "the agent's datagram must be refused");
    let quic6 = send(AGENT_UID, "2001:db8::10", "9999", "agent-udp-v6").await;
    assert_eq!(
        quic6, "refused",
        "the agent's IPv6 datagram must be refused"
    );
    let dns = send(AGENT_UID, ORIGIN_V4, "53", "agent-dns-v4").await;
    assert_eq!(
        dns, "timeout",
        "DNS to the name server leaves (nobody answers)"
    );
    let dns_elsewhere = send(AGENT_UID, "192.0.2.99", "53", "agent-dns-elsewhere").await;
    assert_eq!(
        dns_elsewhere, "refused",
        "port 53 to another address is refused"
    );
    let gate = send(GATE_UID, ORIGIN_V4, "9999", "gate-udp-v4").await;
    assert_eq!(gate, "timeout", "the gate's datagram leaves");
    let mut arrived = Vec::new();
    for _ in 0..50 {
        arrived = got.lock().unwrap().clone();
        if arrived.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    arrived.sort();
    assert_eq!(
        arrived,
        ["agent-dns-v4", "gate-udp-v4"],
        "only the DNS datagram and the gate's arrived"
    );
}

/// A packet socket writes under the capture: root keeping the runtime's NET_RAW (even without
/// SETUID/SETGID and with no_new_privs) gets a datagram to the remote end that no rule saw,
/// which is why admission makes root drop NET_RAW; without it the socket cannot be opened.
async fn check_a_packet_socket_needs_net_raw(ns: &Netns) {
    let got = udp_receiver(&ns.remote, &[9998]);
    let pid = std::process::id();
    let (dev, peer) = (format!("fgtp{pid}a"), format!("fgtp{pid}b"));
    let mac = text(
        &ns.exec(
            &ns.remote,
            &["cat", &format!("/sys/class/net/{peer}/address")],
        )
        .stdout,
    );
    let mac = mac.trim().to_string();
    let raw = |restrict: &'static [&'static str], tag: &'static str| {
        let (pod, dev, mac) = (ns.pod.clone(), dev.clone(), mac.clone());
        async move {
            let command = [
                PYTHON,
                "-c",
                PACKET_SEND,
                &dev,
                &mac,
                "192.0.2.1",
                ORIGIN_V4,
                "9998",
                tag,
            ];
            let (code, out, err) = as_root(&pod, restrict, &command).await;
            (code, format!("{}{}", out.trim(), err.trim()))
        }
    };
    let keeps = raw(
        &[
            "--bounding-set=-setuid,-setgid",
            "--inh-caps=-setuid,-setgid",
            "--no-new-privs",
        ],
        "raw-keeps-net-raw",
    )
    .await;
    assert_eq!(keeps, (0, "sent".to_string()), "root keeping NET_RAW");
    let dropped = raw(
        &[
            "--bounding-set=-setuid,-setgid,-net_raw",
            "--inh-caps=-setuid,-setgid,-net_raw",
            "--no-new-privs",
        ],
        "raw-without-net-raw",
    )
    .await;
    assert_eq!(dropped, (3, "EPERM".to_string()), "root without NET_RAW");
    let agent = raw(
        &["--reuid=1000", "--regid=1000", "--clear-groups"],
        "raw-agent",
    )
    .await;
    assert_eq!(agent, (3, "EPERM".to_string()), "uid 1000");
    let mut arrived = Vec::new();
    for _ in 0..50 {
        arrived = got.lock().unwrap().clone();
        if !arrived.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        *got.lock().unwrap(),
        ["raw-keeps-net-raw"],
        "the frame written with NET_RAW passed under the capture; nothing else arrived ({arrived:?})"
    );
}
