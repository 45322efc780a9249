//! Fleet scraping against real gate processes on loopback, serving real reports from fixture
//! Hermes homes; one "pod" accepts connections and never answers.
//!
//! Real-server twin: `tests/tests/k8s/fleet.rs` has the installed controller scrape real gates
//! on the pod IPs kube-apiserver stores and write the FleetPolicy's status; the cases here
//! keep the hanging pod and the failure codes.
#![allow(clippy::expect_used)]

use std::time::Duration;

use fleetgate_controller::fleet::{self, Expected, ScrapeFailure};
use fleetgate_controller::gate_poll::{ScrapeConfig, ScrapeTarget, scrape_all};
use fleetgate_e2e::gate::GateProcess;
use serde_json::json;
use sha2::{Digest, Sha256};

const TOKEN: &str = "fleet-report-token";
const MANAGED: &str = "model:\n  default: grok-4.6\nagent:\n  reasoning_effort: high\n";

/// A Hermes home whose main role was observed at `effort`, with one cron job.
fn hermes_home(root: &std::path::Path, effort: &str) {
    std::fs::create_dir_all(root.join("cron")).expect("the home must be writable");
    std::fs::create_dir_all(root.join("fleet-policy")).expect("the home must be writable");
    std::fs::write(root.join("config.yaml"), "model:\n  default: grok-4.6\n")
        .expect("config.yaml must be written");
    let jobs = json!({"jobs": [{"id": "a1b2c3", "name": "inbox check", "enabled": true, "model": "grok-4.6", "schedule_display": "every 15m"}]});
    std::fs::write(root.join("cron/jobs.json"), jobs.to_string())
        .expect("jobs.json must be written");
    let observed = json!({"main": {"model": "grok-4.6", "reasoning_effort": effort, "service_tier": null, "ts": 1795000000.0}});
    std::fs::write(
        root.join("fleet-policy/observed.json"),
        observed.to_string(),
    )
    .expect("observed.json must be written");
}

/// A gate reporting on its own home and managed dir.
async fn gate(dir: &std::path::Path, name: &str, effort: &str) -> GateProcess {
    let home = dir.join(name).join("hermes");
    let managed = dir.join(name).join("managed");
    hermes_home(&home, effort);
    std::fs::create_dir_all(&managed).expect("the managed dir must be writable");
    std::fs::write(managed.join("config.yaml"), MANAGED)
        .expect("the managed config must be written");
    let token = dir.join(name).join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).expect("the token must be written");
    let policy = format!(
        "version: v1\nlisten:\n  api: 127.0.0.1:0\n  admin: 127.0.0.1:0\nstore:\n  root: ${{WORK_DIR}}/volume\n\
         report:\n  hermesHome: {}\n  tokenFile: {}\n  managedDir: {}\n",
        home.display(),
        token.display(),
        managed.display()
    );
    GateProcess::spawn(&policy)
        .await
        .expect("the gate must start")
}

async fn policy_sha(gate: &GateProcess) -> String {
    let bytes = std::fs::read(gate.policy_path()).expect("the gate's policy file must be readable");
    hex::encode(Sha256::digest(&bytes))
}

#[tokio::test]
async fn scraping_real_gates_completes_despite_a_hanging_pod() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let a = gate(dir.path(), "agent-a", "high").await;
    let b = gate(dir.path(), "agent-b", "low").await;
    // A pod that accepts the connection and never answers.
    let hanging = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("port 0 must bind");
    let hanging_addr = hanging
        .local_addr()
        .expect("a bound listener has an address");
    let _held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((s, _)) = hanging.accept().await {
            open.push(s);
        }
    });

    let targets = vec![
        ScrapeTarget {
            pod: "agent-a".into(),
            addr: Some(a.admin_addr()),
        },
        ScrapeTarget {
            pod: "agent-hang".into(),
            addr: Some(hanging_addr),
        },
        ScrapeTarget {
            pod: "agent-b".into(),
            addr: Some(b.admin_addr()),
        },
        ScrapeTarget {
            pod: "agent-pending".into(),
            addr: None,
        },
    ];
    let mut cfg = ScrapeConfig::new(TOKEN);
    cfg.per_pod_timeout = Duration::from_millis(1500);
    cfg.concurrency = 2;
    let started = tokio::time::Instant::now();
    let scrapes = scrape_all(&targets, &cfg).await;
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(4),
        "one hanging pod must cost only its own deadline, took {took:?}"
    );

    let outcomes: Vec<(&str, Option<&ScrapeFailure>)> = scrapes
        .iter()
        .map(|s| (s.pod.as_str(), s.outcome.as_ref().err()))
        .collect();
    assert_eq!(
        outcomes,
        vec![
            ("agent-a", None),
            ("agent-hang", Some(&ScrapeFailure::Timeout)),
            ("agent-b", None),
            ("agent-pending", Some(&ScrapeFailure::NoAddress))
        ],
        "the gates must answer, the hanging pod must time out, the pending pod must be skipped"
    );

    let expected = Expected {
        policy_sha256: policy_sha(&a).await,
        managed_sha256: hex::encode(Sha256::digest(MANAGED.as_bytes())),
        pins: fleet::pins_from_managed(
            json!({"model": {"default": "grok-4.6"}, "agent": {"reasoning_effort": "high"}})
                .as_object(),
        ),
        allowed_models: vec!["grok-4.6-mini".into()],
        max_cost_per_job_per_day: None,
    };
    let view = fleet::aggregate(targets.len(), &scrapes, &expected);
    assert_eq!(
        (view.pods.selected, view.pods.reporting),
        (4, 2),
        "two of four pods must report"
    );
    assert_eq!(
        view.pods.current, 1,
        "only agent-a runs the expected policy file (agent-b's differs by its paths)"
    );
    assert!(
        view.drift.ok,
        "agent-b's observed effort must drift from the pin"
    );
    assert!(
        view.drift.message.contains("main on agent-b"),
        "the drift must name role and pod: {}",
        view.drift.message
    );
    let jobs: Vec<(&str, &str, bool)> = view
        .cron_jobs
        .iter()
        .map(|j| {
            (
                j.pod.as_str(),
                j.job.as_str(),
                j.flags.contains(&fleet::MODEL_NOT_ALLOWED.to_string()),
            )
        })
        .collect();
    assert_eq!(
        jobs,
        vec![("agent-a", "a1b2c3", true), ("agent-b", "a1b2c3", true)],
        "each pod's cron job must be listed and flagged off the allowed models"
    );
}

#[tokio::test]
async fn a_wrong_token_is_reported_as_unauthorized() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let a = gate(dir.path(), "agent-a", "high").await;
    let targets = [ScrapeTarget {
        pod: "agent-a".into(),
        addr: Some(a.admin_addr()),
    }];
    let scrapes = scrape_all(&targets, &ScrapeConfig::new("not-the-token")).await;
    assert_eq!(
        scrapes[0].outcome,
        Err(ScrapeFailure::Unauthorized),
        "a refused token must be named, not hidden"
    );
}

#[tokio::test]
async fn many_hanging_pods_are_waited_for_side_by_side_not_one_slot_at_a_time() {
    // Every pod accepts and never answers; the server counts connections open at once.
    let (addr, open, peak) = hanging_pods().await;
    let targets: Vec<ScrapeTarget> = (0..64)
        .map(|i| ScrapeTarget {
            pod: format!("agent-{i}"),
            addr: Some(addr),
        })
        .collect();
    let mut cfg = ScrapeConfig::new(TOKEN);
    cfg.per_pod_timeout = Duration::from_millis(100);
    cfg.concurrency = 1;
    let scrapes = scrape_all(&targets, &cfg).await;
    assert!(
        scrapes
            .iter()
            .all(|s| s.outcome == Err(ScrapeFailure::Timeout)),
        "every hanging pod times out"
    );
    assert_eq!(cfg.width(64), 4, "one slot per 16 pods");
    // Four at a time; a closed connection may still be counted for a moment while the next
    // round connects, so the peak can read a little higher, never the 64 of a leak.
    let seen = peak.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        (4..=8).contains(&seen),
        "the 64 pods must be waited for four at a time though the configured concurrency is 1, saw {seen} open at once"
    );
    // And a scrape cut by its deadline closes its connection.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while open.load(std::sync::atomic::Ordering::SeqCst) > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} connections to hanging pods stay open after their deadline",
            open.load(std::sync::atomic::Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn the_scrape_width_grows_with_the_fleet_and_stays_bounded() {
    let cfg = |c| {
        let mut cfg = ScrapeConfig::new(TOKEN);
        cfg.concurrency = c;
        cfg
    };
    for (concurrency, pods, width) in [
        (8, 100, 8),
        (8, 2000, 125),
        (8, 10_000, 128),
        (8, 1_000_000, 128),
        (200, 10, 200),
        (0, 0, 1),
    ] {
        assert_eq!(
            cfg(concurrency).width(pods),
            width,
            "concurrency {concurrency}, {pods} pods"
        );
    }
}

#[tokio::test]
async fn scrapes_of_several_fleet_policies_share_one_bound() {
    use std::sync::Arc;
    let (addr, _open, peak) = hanging_pods().await;
    let targets: Vec<ScrapeTarget> = (0..8)
        .map(|i| ScrapeTarget {
            pod: format!("agent-{i}"),
            addr: Some(addr),
        })
        .collect();
    let mut cfg = ScrapeConfig::new(TOKEN);
    cfg.per_pod_timeout = Duration::from_millis(100);
    cfg.in_flight = Some(Arc::new(tokio::sync::Semaphore::new(1)));
    // Two FleetPolicies scraping 8 pods each: 16 at once without the shared bound.
    let (a, b) = tokio::join!(scrape_all(&targets, &cfg), scrape_all(&targets, &cfg));
    assert_eq!(a.len() + b.len(), 16);
    let seen = peak.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        seen <= 2,
        "one scrape in flight at a time (a closing one may still be counted), saw {seen}"
    );
}

/// A listener whose connections are accepted and never answered, with the number open now and
/// the most open at once.
async fn hanging_pods() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::AsyncReadExt;
    let hanging = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("port 0 must bind");
    let addr = hanging.local_addr().expect("an address");
    let (open, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (o, p) = (open.clone(), peak.clone());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = hanging.accept().await {
            let now = o.fetch_add(1, Ordering::SeqCst) + 1;
            p.fetch_max(now, Ordering::SeqCst);
            let o = o.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while s.read(&mut buf).await.is_ok_and(|n| n > 0) {}
                o.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (addr, open, peak)
}
