//! Fleet scraping against real gate processes on loopback, serving real reports from fixture
//! Hermes homes; one "pod" accepts connections and never answers.
#![allow(clippy::expect_used)]

use std::time::Duration;

use fleetgate_controller::fleet::{self, Expected, ScrapeFailure};
use fleetgate_controller::scrape::{ScrapeConfig, ScrapeTarget, scrape_all};
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
