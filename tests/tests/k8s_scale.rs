//! The controller's costs on the real control plane: reconcile latency with 50 and 500
//! FleetPolicies in a namespace of 10,000 pods, and the controller's RSS. A benchmark, not a
//! test: `tests/run bench controller` runs it (`--ignored`); its figures go into
//! `docs/benchmarks.md`.
//!
//! What is real: etcd, kube-apiserver and kube-controller-manager of the pinned release; the
//! chart installed with helm; the `fleetgate-controller` binary run as the installed
//! Deployment runs it, as its ServiceAccount; 10,000 pod objects, each with a status the test
//! writes (no kubelet: the pods exist only as API objects, each given its own loopback address
//! as its IP). What is simulated: the gates. One listener on `0.0.0.0:15190` (the gates' admin
//! port) answers `/v1/status` and `/v1/report` for every pod, telling them apart by the
//! loopback address it was reached on, with the report a busy Hermes home gives (two cron jobs
//! with costs, observed model and effort).
//!
//! Measured per size: the first pass (all FleetPolicies created at once → every one has a
//! status for its generation), the re-render latency of 20 edits spread over the policies
//! (edit → the owned ConfigMap's new data; p50, p99, max), the gate scrapes per second, and
//! the controller's RSS (now and peak).
//!
//! `FLEETGATE_SCALE_PODS` (default 10000) and `FLEETGATE_SCALE_POLICIES` (default `50,500`).

#![allow(clippy::expect_used, clippy::print_stdout, clippy::panic)]

#[allow(
    dead_code,
    reason = "shared with the k8s suite, of which this binary uses a part"
)]
#[path = "k8s/replica.rs"]
mod replica;
#[allow(
    dead_code,
    reason = "shared with the k8s suite, of which this binary uses a part"
)]
#[path = "k8s/support.rs"]
mod support;

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{StreamExt as _, stream};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::{ensure_crds, eventually};

/// The gates' admin port, where the controller scrapes them.
const GATE_ADMIN_PORT: u16 = 15190;
const MODELS: [&str; 3] = ["grok-4.6", "gpt-5", "claude-sonnet-4"];
const EFFORTS: [&str; 2] = ["high", "low"];

fn env_list(name: &str, default: &str) -> Vec<usize> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

/// Pod `i`'s address: its own loopback address.
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

/// What gate `i` reports: its policy hash, the observed model and effort, two cron jobs.
fn report(i: usize) -> Value {
    let jobs = [("digest", (i % 17) as f64 * 0.37), ("inbox", 0.5)];
    json!({
        "status": {
            "managed": {"dir": "/etc/hermes", "keys": 3, "sha256": "sim", "error": null},
            "observed": {"main": {"model": MODELS[i % 3], "reasoning_effort": EFFORTS[i % 2],
                                  "service_tier": null, "ts": "2026-12-01T10:00:00Z"}},
            "crons": jobs.iter().map(|(id, _)| json!({"id": id, "name": id, "enabled": true, "model": "grok-4.6-mini"})).collect::<Vec<_>>(),
        },
        "crons": {"cost": {
            "jobs": jobs.iter().map(|(id, usd)| json!({
                "id": id, "name": format!("job {id}"), "cost_per_day_usd": usd,
                "flags": if i.is_multiple_of(7) { vec!["mostly_empty"] } else { Vec::new() },
            })).collect::<Vec<_>>(),
            "total_cost_per_day_usd": 0.0,
        }},
    })
}

/// The simulated gates: one listener for every pod's address; counts what it served.
async fn serve_gates(served: Arc<AtomicU64>) {
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::UNSPECIFIED, GATE_ADMIN_PORT))
        .await
        .unwrap_or_else(|e| panic!("the simulated gates need port {GATE_ADMIN_PORT}: {e}"));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let index = match stream.local_addr() {
            Ok(SocketAddr::V4(a)) => index_of(*a.ip()),
            _ => None,
        };
        let served = Arc::clone(&served);
        tokio::spawn(async move {
            let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                served.fetch_add(1, Ordering::Relaxed);
                let body = match (req.uri().path(), index) {
                    ("/v1/status", Some(_)) => json!({"policy": {"sha256": "sim"}}),
                    ("/v1/report", Some(i)) => report(i),
                    _ => json!("no such gate"),
                };
                async move {
                    Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from(
                        body.to_string(),
                    ))))
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn policy(ns: &str, size: usize, k: usize, char_limit: u64) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "fleetgate.dev/v1alpha1",
        "kind": "FleetPolicy",
        "metadata": {"name": format!("fleet-{size}-{k}"), "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {format!("g{size}"): format!("p{k}")}},
            "web": {"charLimit": char_limit},
        },
    }))
    .expect("a FleetPolicy")
}

/// `(VmRSS, VmHWM)` of a process, in MiB.
fn rss_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(0.0, |kib| kib / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "an index into a short list"
    )]
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// Creates `n` pods labelled for every policy size, then writes each one's status (Running,
/// its loopback address).
async fn create_pods(pods: &Api<Pod>, n: usize, sizes: &[usize]) -> Duration {
    let started = Instant::now();
    stream::iter(0..n)
        .for_each_concurrent(32, |i| {
            let pods = pods.clone();
            let mut labels = json!({"app": "hermes"});
            for size in sizes {
                labels[format!("g{size}")] = json!(format!("p{}", i % size));
            }
            async move {
                let pod: Pod = serde_json::from_value(json!({
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": format!("agent-{i}"), "labels": labels},
                    "spec": {"containers": [{"name": "hermes", "image": "localhost/hermes-agent:0.19.0"}]},
                }))
                .expect("a pod");
                pods.create(&PostParams::default(), &pod)
                    .await
                    .unwrap_or_else(|e| panic!("pod {i}: {e}"));
                let address = ip(i).to_string();
                let status = json!({"status": {
                    "phase": "Running",
                    "podIP": address,
                    "podIPs": [{"ip": address}],
                    "conditions": [{"type": "Ready", "status": "True"}],
                }});
                pods.patch_status(
                    &format!("agent-{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(&status),
                )
                .await
                .unwrap_or_else(|e| panic!("pod {i} status: {e}"));
            }
        })
        .await;
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: tests/run bench controller"]
async fn controller_costs_with_many_fleet_policies_and_pods_on_the_real_api_server() {
    let n = env_list("FLEETGATE_SCALE_PODS", "10000")
        .first()
        .copied()
        .unwrap_or(10_000);
    let sizes = env_list("FLEETGATE_SCALE_POLICIES", "50,500");
    let served = Arc::new(AtomicU64::new(0));
    tokio::spawn(serve_gates(Arc::clone(&served)));
    let _ = ensure_crds();
    let client = support::client().await;
    let ns = support::namespace(&client, "scale").await;
    support::install_chart(&ns, &[]);
    let controller = replica::start_as_installed(&ns, "controller-0");
    let pid = controller.pid();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (idle, _) = rss_mib(pid);

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let took = create_pods(&pods, n, &sizes).await;
    println!("{n} pods created with their status in {took:.1?}");
    // The controller's pod cache catches up with every pod.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (with_pods, _) = rss_mib(pid);
    println!(
        "controller RSS: {idle:.1} MiB idle, {with_pods:.1} MiB with {n} pods and no FleetPolicy"
    );

    let fps = support::fleet_policies(&client, &ns);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let apply = PatchParams::apply("fleetgate-scale").force();
    let mut rows = Vec::new();
    for &size in &sizes {
        let before = served.load(Ordering::Relaxed);
        let started = Instant::now();
        stream::iter(0..size)
            .for_each_concurrent(16, |k| {
                let fps = fps.clone();
                let apply = apply.clone();
                let ns = ns.clone();
                async move {
                    fps.patch(
                        &format!("fleet-{size}-{k}"),
                        &apply,
                        &Patch::Apply(&policy(&ns, size, k, 4000)),
                    )
                    .await
                    .unwrap_or_else(|e| panic!("FleetPolicy {k}: {e}"));
                }
            })
            .await;
        let prefix = format!("fleet-{size}-");
        eventually(
            Duration::from_secs(900),
            "every FleetPolicy has a status for its generation",
            || async {
                let list = fps.list(&ListParams::default()).await.ok()?;
                let done = list
                    .items
                    .iter()
                    .filter(|fp| {
                        fp.metadata
                            .name
                            .as_deref()
                            .is_some_and(|n| n.starts_with(&prefix))
                    })
                    .filter(|fp| {
                        fp.data["status"]["observedGeneration"].as_i64() == fp.metadata.generation
                            && fp.data["status"]["pods"]["selected"].as_u64().is_some()
                    })
                    .count();
                (done == size).then_some(())
            },
        )
        .await;
        let first_pass = started.elapsed();
        let scrapes = served.load(Ordering::Relaxed) - before;

        let mut latencies = Vec::new();
        for e in 0..20_usize {
            let k = e * size / 20;
            let name = format!("fleet-{size}-{k}");
            let cm_name = format!("{name}-managed");
            let last = cms.get(&cm_name).await.ok().and_then(|c| c.data);
            let sent = Instant::now();
            fps.patch(
                &name,
                &apply,
                &Patch::Apply(&policy(&ns, size, k, 5000 + e as u64)),
            )
            .await
            .expect("an edit must be accepted");
            eventually(Duration::from_secs(120), "the re-render", || async {
                let now = cms.get(&cm_name).await.ok()?.data;
                (now != last).then_some(())
            })
            .await;
            latencies.push(sent.elapsed());
        }
        latencies.sort();
        let (rss, peak) = rss_mib(pid);
        let selected: u64 = fps
            .list(&ListParams::default())
            .await
            .expect("a list")
            .items
            .iter()
            .filter(|fp| {
                fp.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with(&prefix))
            })
            .filter_map(|fp| fp.data["status"]["pods"]["selected"].as_u64())
            .sum();
        let row = format!(
            "| {size} | {n} | {selected} | {:.1} s | {} scrapes ({:.0}/s) | {:.0?} | {:.0?} | {:.0?} | {rss:.1} MiB | {peak:.1} MiB |",
            first_pass.as_secs_f64(),
            scrapes,
            scrapes as f64 / first_pass.as_secs_f64(),
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99),
            latencies[latencies.len() - 1],
        );
        println!("{row}");
        assert_eq!(
            selected, n as u64,
            "together the {size} FleetPolicies select every pod once"
        );
        rows.push(row);
        for k in 0..size {
            let _ = fps
                .delete(&format!("fleet-{size}-{k}"), &DeleteParams::default())
                .await;
        }
    }
    println!(
        "\n| FleetPolicies | pods | selected | first pass | gate scrapes in it | edit p50 | edit p99 | edit max | RSS after | peak RSS |\n|---|---|---|---|---|---|---|---|---|---|"
    );
    for row in rows {
        println!("{row}");
    }
    println!(
        "controller RSS idle {idle:.1} MiB, with {n} pods and no FleetPolicy {with_pods:.1} MiB"
    );
    assert!(
        controller.running(),
        "the controller must have lived through it"
    );
}
