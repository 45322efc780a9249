//! A simulated fleet: thousands of gates answering `/v1/status` and `/v1/report` on their own
//! loopback addresses (one child process, one listener, the pod told apart by the address it
//! was reached on), a mocked API server listing the pods across five FleetPolicies, and the
//! controller's real reconcile computing every status. Some gates are slow (past the per-pod
//! deadline), some fail, some run a stale policy, some pods have no IP yet.
//!
//! It measures one full status cycle (every FleetPolicy reconciled at once, as the controller
//! runs them), the process's peak RSS, the requests per second the controller makes, the size
//! of the largest status, and checks each status against the sums of what the gates served,
//! computed here from the same model and not by the controller's code.
//!
//! Not part of CI (`tests/run bench` runs it); run it with
//! `cargo test --release -p fleetgate-controller --lib reconcile::tests::fleet_sim -- --ignored --nocapture`
//! (`FLEETGATE_SIM_SIZES=2000,10000` by default).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write as _};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::crd::FleetPolicy;
use crate::desired;
use crate::fixtures::fleet::FleetCluster;
use crate::fleet_poll::FleetConfig;
use crate::metrics::Metrics;
use crate::reconcile::{Context, reconcile};

/// FleetPolicies the pods are spread over (`FLEETGATE_SIM_POLICIES`, default 5); the child
/// process inherits the variable.
fn policies() -> usize {
    std::env::var("FLEETGATE_SIM_POLICIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(5)
}
const TOKEN: &str = "sim-token";
const SLOW: Duration = Duration::from_secs(3);
const PER_POD_TIMEOUT: Duration = Duration::from_secs(2);
const MODELS: [&str; 3] = ["grok-4.6", "gpt-5", "claude-sonnet-4"];
const EFFORTS: [&str; 2] = ["high", "low"];

/// What gate `i` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// The pod has no IP yet.
    Pending,
    /// Answers after [`SLOW`], past the per-pod deadline.
    Slow,
    /// `/v1/report` answers 500.
    Failing,
    /// Answers, with a stale policy hash when `stale`.
    Answers { stale: bool },
}

fn kind(i: usize) -> Kind {
    if i % 211 == 3 {
        Kind::Pending
    } else if i % 101 == 7 {
        Kind::Slow
    } else if i % 97 == 13 {
        Kind::Failing
    } else {
        Kind::Answers { stale: i % 53 == 5 }
    }
}

fn ip(i: usize) -> Ipv4Addr {
    let (a, b) = (1 + i / 250, 1 + i % 250);
    Ipv4Addr::new(
        127,
        u8::try_from(a).unwrap_or(u8::MAX),
        u8::try_from(b).unwrap_or(u8::MAX),
        1,
    )
}

fn index_of(ip: Ipv4Addr) -> Option<usize> {
    let [_, a, b, _] = ip.octets();
    Some((usize::from(a).checked_sub(1)?) * 250 + usize::from(b).checked_sub(1)?)
}

/// The block of pod indices of FleetPolicy `k` among `n` pods.
fn block(n: usize, k: usize) -> std::ops::Range<usize> {
    (k * n / policies())..((k + 1) * n / policies())
}

/// Job costs in cents: `digest` and `inbox` (flagged `mostly_empty` on every seventh pod).
fn jobs(i: usize) -> [(&'static str, u64, bool); 2] {
    [
        ("digest", (i % 17) as u64 * 37, false),
        ("inbox", 50, i.is_multiple_of(7)),
    ]
}

fn report(i: usize, managed_sha: &str) -> Value {
    let jobs = jobs(i);
    json!({
        "status": {
            "managed": {"dir": "/etc/hermes", "keys": 3, "sha256": managed_sha, "error": null},
            "observed": {"main": {"model": MODELS[i % 3], "reasoning_effort": EFFORTS[i % 2],
                                  "service_tier": null, "ts": "2026-12-01T10:00:00Z"}},
            "crons": jobs.iter().map(|(id, _, _)| json!({"id": id, "name": id, "enabled": true, "model": "grok-4.6-mini"})).collect::<Vec<_>>(),
        },
        "crons": {"cost": {
            "jobs": jobs.iter().map(|(id, cents, flagged)| json!({
                "id": id, "name": format!("job {id}"), "cost_per_day_usd": *cents as f64 / 100.0,
                "flags": if *flagged { vec!["mostly_empty"] } else { Vec::new() },
            })).collect::<Vec<_>>(),
            "total_cost_per_day_usd": 0.0,
        }},
    })
}

// === the gates' process ===

/// The child process: serves every simulated gate until its stdin closes.
#[test]
#[ignore = "started by the fleet simulation"]
fn sim_gate_server() {
    let Ok(spec) = std::env::var("FLEETGATE_SIM_HASHES") else {
        return;
    };
    // `policy:managed` per FleetPolicy, in block order.
    let hashes: Vec<(String, String)> = spec
        .split(',')
        .filter_map(|h| h.split_once(':'))
        .map(|(p, m)| (p.to_string(), m.to_string()))
        .collect();
    let n: usize = std::env::var("FLEETGATE_SIM_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        // All addresses, so every 127.a.b.1 reaches it; anything not on loopback is dropped.
        let listener = tokio::net::TcpListener::bind("0.0.0.0:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("an address").port();
        println!("SIM_PORT={port}");
        let _ = std::io::stdout().flush();
        let served = Arc::new(AtomicU64::new(0));
        let hashes = Arc::new(hashes);
        tokio::spawn(async move {
            loop {
                let Ok((stream, peer)) = listener.accept().await else {
                    continue;
                };
                let local = stream.local_addr().ok();
                let (Some(SocketAddr::V4(local)), true) = (local, peer.ip().is_loopback()) else {
                    continue;
                };
                let (served, hashes) = (served.clone(), hashes.clone());
                tokio::spawn(async move {
                    let index = index_of(*local.ip());
                    let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let (served, hashes) = (served.clone(), hashes.clone());
                        async move {
                            Ok::<_, std::convert::Infallible>(
                                answer(req.uri().path(), index, n, &hashes, &served).await,
                            )
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        // Until the parent closes stdin.
        tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {
                line.clear();
            }
        })
        .await
        .ok();
    });
}

async fn answer(
    path: &str,
    index: Option<usize>,
    n: usize,
    hashes: &[(String, String)],
    served: &AtomicU64,
) -> hyper::Response<Full<Bytes>> {
    let respond = |code: u16, body: Value| {
        let mut r = hyper::Response::new(Full::new(Bytes::from(body.to_string())));
        *r.status_mut() = hyper::StatusCode::from_u16(code).unwrap_or_default();
        r
    };
    if path == "/sim/served" {
        return respond(200, json!(served.load(Ordering::Relaxed)));
    }
    served.fetch_add(1, Ordering::Relaxed);
    let Some(i) = index.filter(|i| *i < n) else {
        return respond(404, json!("no such gate"));
    };
    let k = (0..policies())
        .find(|k| block(n, *k).contains(&i))
        .unwrap_or(0);
    let (policy, managed) = hashes.get(k).cloned().unwrap_or_default();
    match (kind(i), path) {
        (Kind::Slow, _) => {
            tokio::time::sleep(SLOW).await;
            respond(503, json!("slow"))
        }
        (Kind::Failing, "/v1/report") => respond(500, json!("failing")),
        (Kind::Answers { .. } | Kind::Failing, "/v1/status") => {
            let sha = match kind(i) {
                Kind::Answers { stale: true } => "stale".to_string(),
                _ => policy,
            };
            respond(200, json!({"policy": {"sha256": sha}}))
        }
        (Kind::Answers { .. }, "/v1/report") => respond(200, report(i, &managed)),
        _ => respond(404, json!("no such path")),
    }
}

// === the controller's side ===

struct Gates {
    child: Child,
    port: u16,
}

impl Drop for Gates {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_gates(n: usize, hashes: &[(String, String)]) -> Gates {
    let spec: Vec<String> = hashes.iter().map(|(p, m)| format!("{p}:{m}")).collect();
    let mut child = Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--ignored", "--exact", &gate_server_test(), "--nocapture"])
        .env("FLEETGATE_SIM_HASHES", spec.join(","))
        .env("FLEETGATE_SIM_PODS", n.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the gates' process must start");
    let stdout = child.stdout.take().expect("its stdout");
    let mut port = 0;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("a line");
        if let Some(p) = line.strip_prefix("SIM_PORT=") {
            port = p.trim().parse().expect("a port");
            break;
        }
    }
    assert!(port > 0, "the gates' process must print its port");
    Gates { child, port }
}

/// The name the test harness knows [`sim_gate_server`] by (`reconcile::tests::fleet_sim::…`),
/// from this module's path, so the child process is found wherever the module sits.
fn gate_server_test() -> String {
    let module = module_path!();
    let module = module.split_once("::").map_or(module, |(_, m)| m);
    format!("{module}::sim_gate_server")
}

/// Poll `fp`'s fleet now, in this task, for its current rendering (what a due poll does in
/// the background).
async fn poll_now(fp: &FleetPolicy, ctx: &Context) {
    let Some(cfg) = ctx.fleet.clone() else {
        return;
    };
    let spent = ctx.polls().exhausted_for(&fp.key());
    let Ok(d) = desired::render_with_budgets(fp, None, spent.as_ref()) else {
        return;
    };
    ctx.polls()
        .poll_now(&ctx.client, &ctx.metrics, &cfg, fp, &d)
        .await;
}

async fn served(port: u16) -> u64 {
    let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let req = hyper::Request::get("/sim/served")
        .header("host", "sim")
        .body(http_body_util::Empty::<Bytes>::new())
        .expect("a request");
    let resp = sender.send_request(req).await.expect("an answer");
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .expect("a body")
        .to_bytes();
    serde_json::from_slice(&body).expect("a count")
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// What the status of FleetPolicy `k` must say, from the model.
struct Want {
    selected: u32,
    reporting: u32,
    current: u32,
    cost: f64,
    flagged: u32,
    tiers: BTreeMap<(String, String), usize>,
}

fn want(n: usize, k: usize) -> Want {
    let mut w = Want {
        selected: 0,
        reporting: 0,
        current: 0,
        cost: 0.0,
        flagged: 0,
        tiers: BTreeMap::new(),
    };
    let mut cents = 0;
    for i in block(n, k) {
        w.selected += 1;
        let Kind::Answers { stale } = kind(i) else {
            continue;
        };
        w.reporting += 1;
        w.current += u32::from(!stale);
        for (_, c, flagged) in jobs(i) {
            cents += c;
            w.flagged += u32::from(flagged);
        }
        *w.tiers
            .entry((MODELS[i % 3].to_string(), EFFORTS[i % 2].to_string()))
            .or_default() += 1;
    }
    w.cost = cents as f64 / 100.0;
    w
}

fn check(status: &Value, w: &Want, ns: &str) {
    let pods = &status["pods"];
    assert_eq!(pods["selected"], w.selected, "{ns}: selected");
    assert_eq!(pods["reporting"], w.reporting, "{ns}: reporting");
    assert_eq!(pods["current"], w.current, "{ns}: current");
    let cost = status["totalCostPerDay"].as_f64().unwrap_or(-1.0);
    assert!(
        (cost - w.cost).abs() < 0.005,
        "{ns}: cost {cost} != {}",
        w.cost
    );
    assert_eq!(status["flagged"], w.flagged, "{ns}: flagged");
    let mut tiers: BTreeMap<(String, String), usize> = BTreeMap::new();
    for t in status["observedTiers"].as_array().into_iter().flatten() {
        let key = (
            t["model"].as_str().unwrap_or_default().to_string(),
            t["reasoningEffort"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
        let listed = t["pods"].as_array().map_or(0, Vec::len);
        let counted = t["podCount"].as_u64().unwrap_or(0) as usize;
        assert!(
            listed <= 20 && listed <= counted,
            "{ns}: a tier lists at most 20 of its pods"
        );
        *tiers.entry(key).or_default() += counted;
    }
    assert_eq!(tiers, w.tiers, "{ns}: observed tiers");
}

/// One row of the table.
struct Row {
    pods: usize,
    cycle: Duration,
    rss_mib: f64,
    api_requests: u64,
    gate_requests: u64,
    status_bytes: usize,
}

async fn run(n: usize) -> Row {
    let policies: Vec<FleetPolicy> = (0..self::policies())
        .map(|k| {
            let mut fp = FleetPolicy::test();
            fp.metadata.namespace = Some(format!("team-{k}"));
            fp.metadata.uid = Some(format!("uid-{k}"));
            fp
        })
        .collect();
    let hashes: Vec<(String, String)> = policies
        .iter()
        .map(|fp| {
            let d = desired::render(fp).expect("the test policy renders");
            (d.policy_sha256, d.managed_sha256)
        })
        .collect();
    let gates = start_gates(n, &hashes);
    let cluster = FleetCluster::with_policies(policies.clone());
    for k in 0..policies.len() {
        let ns = format!("team-{k}");
        let pods: Vec<Value> = block(n, k)
            .map(|i| {
                let ip = (kind(i) != Kind::Pending).then(|| ip(i).to_string());
                json!({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": format!("agent-{i}"), "namespace": ns,
                                    "labels": {"app": "hermes"}},
                       "status": {"podIP": ip}})
            })
            .collect();
        cluster.put_pods(&ns, pods);
        cluster.put_secret(&ns, "report-token", &[("token", TOKEN)]);
    }
    let metrics = Metrics::unregistered().expect("metrics");
    let ctx = Arc::new(
        Context::new(cluster.client(), metrics, None).with_fleet(FleetConfig {
            token_secret: "report-token".into(),
            token_key: "token".into(),
            admin_port: gates.port,
            per_pod_timeout: PER_POD_TIMEOUT,
            concurrency: 8,
        }),
    );
    // The first cycle applies the ConfigMaps; the second is the steady state measured.
    let mut last = Duration::ZERO;
    let (mut api, mut scraped) = (0, 0);
    for _ in 0..2 {
        let (api0, scraped0) = (cluster.requests(), served(gates.port).await);
        let start = Instant::now();
        // A status cycle: every poll, then every reconcile writing its view.
        let polls = policies.iter().map(|fp| poll_now(fp, &ctx));
        futures_util::future::join_all(polls).await;
        let cycles = policies
            .iter()
            .map(|fp| reconcile(Arc::new(fp.clone()), ctx.clone()));
        for done in futures_util::future::join_all(cycles).await {
            done.expect("every reconcile must succeed");
        }
        last = start.elapsed();
        api = cluster.requests() - api0;
        scraped = served(gates.port).await - scraped0 - 1;
    }
    let mut status_bytes = 0;
    for k in 0..policies.len() {
        let ns = format!("team-{k}");
        let status = cluster.last_status(&ns, "fleet").expect("a status");
        status_bytes = status_bytes.max(status.to_string().len());
        check(&status, &want(n, k), &ns);
    }
    drop(gates);
    Row {
        pods: n,
        cycle: last,
        rss_mib: peak_rss_mib(),
        api_requests: api,
        gate_requests: scraped,
        status_bytes,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the fleet simulation: cargo test --release -p fleetgate-controller --lib reconcile::tests::fleet_sim -- --ignored --nocapture"]
async fn a_simulated_fleet_reports_what_its_gates_served() {
    let sizes: Vec<usize> = std::env::var("FLEETGATE_SIM_SIZES")
        .unwrap_or_else(|_| "2000,10000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    println!("{} FleetPolicies", policies());
    println!(
        "{:>7}  {:>9}  {:>13}  {:>9}  {:>10}  {:>10}  {:>13}",
        "pods", "cycle s", "peak RSS MiB", "API req", "gate req", "req/s", "status bytes"
    );
    for n in sizes {
        let row = run(n).await;
        let total = row.api_requests + row.gate_requests;
        println!(
            "{:>7}  {:>9.2}  {:>13.1}  {:>9}  {:>10}  {:>10.0}  {:>13}",
            row.pods,
            row.cycle.as_secs_f64(),
            row.rss_mib,
            row.api_requests,
            row.gate_requests,
            total as f64 / row.cycle.as_secs_f64(),
            row.status_bytes
        );
    }
}
