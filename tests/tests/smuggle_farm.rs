//! The smuggling farm (see `fleetgate_e2e::farm`): every payload of the corpus goes through the
//! gate's forward proxy and its captured plain-HTTP path, what the gate forwarded is replayed to
//! fourteen real HTTP servers, and each must parse exactly the requests the gate logged as
//! allowed. The same payloads also go through a hyper-based relay, the reference column.
//!
//! `tests/run` installs the servers and runs a fast subset (every hand-written payload on both
//! paths, every eighth generated mutation on the forward proxy); `tests/run smuggle` sets
//! `FLEETGATE_SMUGGLE_FULL=1` and runs all of it. The report (servers with versions, corpus by
//! source, results, hyper disagreements) is printed and written to
//! `target/smuggle-farm-report.md`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::print_stdout)]

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use fleetgate_e2e::dns::StubDns;
use fleetgate_e2e::farm::corpus::{self, ALLOWED, BLOCKED, Payload, Render};
use fleetgate_e2e::farm::decisions::{Allowed, Decisions};
use fleetgate_e2e::farm::hyper_relay::HyperRelay;
use fleetgate_e2e::farm::recorder::{Recorder, Stream};
use fleetgate_e2e::farm::servers::{self, Parsed, Server, Tools};
use fleetgate_proxy::api::Shared;
use fleetgate_proxy::base::dialer::OwnListeners;
use fleetgate_proxy::base::shards::Shards;
use fleetgate_proxy::egress::forward::{self, ForwardProxy, Limits};
use fleetgate_proxy::egress::transparent::{self, OriginalDstSource, TransparentConfig};
use fleetgate_proxy::live::runtime::Runtime;
use fleetgate_proxy::policy::Policy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Which listener a payload goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Path {
    Forward,
    Transparent,
}

/// The gate in process: the forward proxy and the transparent listener over one policy.
struct FarmGate {
    forward: SocketAddr,
    transparent: SocketAddr,
    _stop: watch::Sender<bool>,
}

impl FarmGate {
    async fn start(dns: &StubDns, origin: SocketAddr) -> Self {
        let yaml = format!(
            "version: v1\n\
             fetch:\n  connectTimeoutMs: 1000\n  headerTimeoutMs: 2000\n\
             egress:\n  allowCIDRs: [\"127.0.0.1/32\"]\n  ports: [{}]\n  timeouts: {{headerSeconds: 2, idleSeconds: 2}}\n  resolver:\n    nameservers: [\"{}\"]\n    timeoutMs: 1000\n    attempts: 1\n\
             websiteBlocklist:\n  domains: [\"{BLOCKED}\"]\n",
            origin.port(),
            dns.addr()
        );
        let policy = Policy::parse(yaml.as_bytes(), std::path::Path::new("."))
            .expect("the farm policy must be valid");
        let gate = Shared::new(Runtime::build(policy).expect("runtime"))
            .expect("shared")
            .gate
            .clone();
        let fwd = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let cap = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let (forward, transparent) = (fwd.local_addr().unwrap(), cap.local_addr().unwrap());
        {
            let mut own = gate.listeners.lock().unwrap();
            own.push(("forward_proxy".into(), forward));
            own.push(("transparent".into(), transparent));
        }
        let (stop, rx) = watch::channel(false);
        let own = OwnListeners::new([forward, transparent]);
        let proxy = ForwardProxy::new(gate.clone(), Limits::default(), own, rx.clone());
        // Two shards, as a gate on two cores runs: half the connections are served on the
        // second one's thread.
        let shards = Arc::new(Shards::start(1).expect("a second shard"));
        tokio::spawn(forward::serve(proxy, fwd, shards.clone()));
        tokio::spawn(transparent::serve(
            cap,
            gate,
            OriginalDstSource::FixedForTests(origin),
            TransparentConfig::default(),
            rx,
            shards,
        ));
        Self {
            forward,
            transparent,
            _stop: stop,
        }
    }
}

/// Send `bytes` on one connection, half-close, and read until the peer closes (at most
/// `wait`). Returns the client's local address (the `client` of its decision lines).
async fn exchange(to: SocketAddr, bytes: &[u8], wait: Duration) -> String {
    let mut conn = TcpStream::connect(to).await.expect("connect");
    let client = conn.local_addr().unwrap().to_string();
    let _ = conn.write_all(bytes).await;
    let _ = conn.shutdown().await;
    let mut answers = Vec::new();
    let _ = tokio::time::timeout(wait, conn.read_to_end(&mut answers)).await;
    client
}

/// What one payload did on one path.
#[derive(Debug, Default)]
struct Outcome {
    allowed: Vec<Allowed>,
    streams: Vec<Stream>,
    /// Per server: what it parsed, when that differs from `allowed`.
    mismatches: BTreeMap<String, Vec<Parsed>>,
}

fn matches(allowed: &[Allowed], parsed: &[Parsed]) -> bool {
    allowed.len() == parsed.len()
        && allowed.iter().zip(parsed).all(|(a, p)| {
            let path = p.target.split('?').next().unwrap_or("");
            a.method == p.method && a.path == path && a.host == p.host && a.body_len == p.body_len
        })
}

async fn run_one(
    gate: SocketAddr,
    bytes: &[u8],
    recorder: &Recorder,
    decisions: &Decisions,
    servers: &[Server],
) -> Outcome {
    let (mark, decided) = (recorder.mark(), decisions.mark());
    let client = exchange(gate, bytes, Duration::from_secs(8)).await;
    let streams = recorder.since(mark, Duration::from_secs(3)).await;
    let allowed: Vec<Allowed> = decisions
        .of_client(decided, &client)
        .iter()
        .filter_map(|d| d.allowed())
        .collect();
    let replays = servers.iter().map(|server| {
        let streams = &streams;
        async move {
            let mut parsed = Vec::new();
            for s in streams {
                let wait = Duration::from_millis(1500);
                parsed.extend(server.replay(&s.bytes, s.answered, wait).await);
            }
            (server.name.clone(), parsed)
        }
    });
    let mut mismatches = BTreeMap::new();
    for (name, parsed) in futures_util::future::join_all(replays).await {
        if !matches(&allowed, &parsed) {
            mismatches.insert(name, parsed);
        }
    }
    Outcome {
        allowed,
        streams,
        mismatches,
    }
}

/// Requests a relay framed and sent on, by what reached the recorder.
fn forwarded(streams: &[Stream]) -> usize {
    streams.iter().map(|s| s.answered).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_farm_server_parses_exactly_the_requests_the_gate_allowed() {
    let decisions = Decisions::install();
    let work = tempfile::tempdir().expect("work dir");
    let Some(tools) = Tools::from_env(work.path()) else {
        assert!(
            std::env::var_os("FLEETGATE_REQUIRE_FARM").is_none(),
            "FLEETGATE_REQUIRE_FARM is set but FLEETGATE_FARM_VENV / FLEETGATE_FARM_GO are not"
        );
        eprintln!("skipped: the farm's servers are not installed (run tests/run)");
        return;
    };
    let full = std::env::var_os("FLEETGATE_SMUGGLE_FULL").is_some();
    let servers = servers::start_all(&tools)
        .await
        .expect("every farm server must start");
    let recorder = Recorder::start().await.expect("recorder");
    let dns = StubDns::builder()
        .answer(ALLOWED, [IpAddr::V4(Ipv4Addr::LOCALHOST)])
        .answer(BLOCKED, [IpAddr::V4(Ipv4Addr::LOCALHOST)])
        .start()
        .await
        .expect("dns");
    let gate = FarmGate::start(&dns, recorder.addr()).await;
    let hyper = HyperRelay::start(recorder.addr())
        .await
        .expect("hyper relay");
    let corpus_file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("smuggle/corpus.txt");
    let payloads = corpus::load(&corpus_file).expect("the corpus must load");
    let mut generated_seen = 0usize;
    let chosen: Vec<(Arc<Payload>, Vec<Path>)> = payloads
        .into_iter()
        .filter_map(|p| {
            let generated = p.source == "smuggler";
            if generated {
                generated_seen += 1;
            }
            let paths = match (full, generated) {
                (true, _) | (false, false) => vec![Path::Forward, Path::Transparent],
                (false, true) if generated_seen % 8 == 1 => vec![Path::Forward],
                (false, true) => return None,
            };
            Some((Arc::new(p), paths))
        })
        .collect();
    let port = recorder.addr().port();

    let mut failures = Vec::new();
    let mut by_source: BTreeMap<(String, Path), (usize, usize, usize)> = BTreeMap::new();
    let mut per_server: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut hyper_disagrees = Vec::new();
    for (payload, paths) in &chosen {
        for path in paths {
            let render = Render {
                absolute: *path == Path::Forward,
                port,
            };
            let bytes = payload.render(&render);
            let to = match path {
                Path::Forward => gate.forward,
                Path::Transparent => gate.transparent,
            };
            let out = run_one(to, &bytes, &recorder, &decisions, &servers).await;
            let entry = by_source
                .entry((payload.source.clone(), *path))
                .or_default();
            entry.0 += 1;
            if out.allowed.is_empty() {
                entry.1 += 1;
            } else {
                entry.2 += 1;
            }
            for server in &servers {
                let e = per_server.entry(server.name.clone()).or_default();
                e.0 += out.allowed.len();
                e.1 += usize::from(out.mismatches.contains_key(&server.name));
            }
            if forwarded(&out.streams) != out.allowed.len() || !out.mismatches.is_empty() {
                failures.push(format!(
                    "{} ({path:?}): gate allowed {:?}; recorder answered {}; mismatches {:?}",
                    payload.id,
                    out.allowed,
                    forwarded(&out.streams),
                    out.mismatches
                ));
            }
            if *path == Path::Forward {
                let mark = recorder.mark();
                // hyper holds a half-closed connection open while a body is unfinished.
                exchange(hyper.addr(), &bytes, Duration::from_millis(500)).await;
                let hyper_sent = forwarded(&recorder.since(mark, Duration::from_secs(3)).await);
                let gate_framed = out.allowed.len();
                if hyper_sent != gate_framed {
                    hyper_disagrees.push((payload.id.clone(), gate_framed, hyper_sent));
                }
            }
        }
    }

    let report = render_report(
        &servers,
        &by_source,
        &per_server,
        &hyper_disagrees,
        &failures,
        full,
    );
    println!("{report}");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let _ = std::fs::write(target.join("smuggle-farm-report.md"), &report);
    assert!(
        failures.is_empty(),
        "{} payload runs where a server parsed other than what the gate allowed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn render_report(
    servers: &[Server],
    by_source: &BTreeMap<(String, Path), (usize, usize, usize)>,
    per_server: &BTreeMap<String, (usize, usize)>,
    hyper: &[(String, usize, usize)],
    failures: &[String],
    full: bool,
) -> String {
    let mut r = format!(
        "# Smuggling farm ({})\n\n| server | version | requests parsed as the gate allowed | payload runs mismatched |\n| --- | --- | --- | --- |\n",
        if full { "full corpus" } else { "fast subset" }
    );
    for s in servers {
        let (n, bad) = per_server.get(&s.name).copied().unwrap_or_default();
        r.push_str(&format!("| {} | {} | {n} | {bad} |\n", s.name, s.version));
    }
    r.push_str("\n| source | path | payload runs | nothing forwarded | forwarded re-framed |\n| --- | --- | --- | --- | --- |\n");
    for ((source, path), (runs, refused, fwd)) in by_source {
        r.push_str(&format!(
            "| {source} | {path:?} | {runs} | {refused} | {fwd} |\n"
        ));
    }
    r.push_str(&format!(
        "\nFailures: {}\n\nWhere hyper's relay (no gates) framed a different number of requests than the gate allowed ({} payloads; the gate also refuses blocked and secret-bearing targets, which hyper relays):\n\n| payload | gate allowed | hyper forwarded |\n| --- | --- | --- |\n",
        failures.len(),
        hyper.len()
    ));
    for (id, gate, hyper) in hyper {
        r.push_str(&format!("| {id} | {gate} | {hyper} |\n"));
    }
    r
}
