//! The fleet report on the admin listener: bearer token from a file, off without one, the
//! report of the mounted Hermes home, and the cost gauges it feeds.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use ::http::Request;
use bytes::Bytes;
use fleetgate_e2e::gate::GateProcess;
use fleetgate_e2e::http;
use serde_json::{Value, json};

fn hermes_home(root: &std::path::Path) {
    std::fs::create_dir_all(root.join("cron")).unwrap();
    std::fs::create_dir_all(root.join("fleet-policy")).unwrap();
    std::fs::write(
        root.join("config.yaml"),
        "model:\n  default: grok-4.6\n  provider: xai\n",
    )
    .unwrap();
    std::fs::write(
        root.join("cron/jobs.json"),
        json!({"jobs": [{"id": "a1b2c3", "name": "inbox check", "enabled": true, "schedule_display": "every 15m"}]})
            .to_string(),
    )
    .unwrap();
    std::fs::write(
        root.join("fleet-policy/observed.json"),
        json!({"main": {"model": "grok-4.6", "reasoning_effort": "high", "service_tier": "priority",
                         "response_service_tier": "priority", "ts": 1795000000.0}})
        .to_string(),
    )
    .unwrap();
}

async fn get_with_token(gate: &GateProcess, path: &str, token: Option<&str>) -> http::HttpReply {
    let mut req = Request::get(path);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    http::send(gate.admin_addr(), req.body(Bytes::new()).unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn the_report_endpoint_needs_the_token_and_serves_the_mounted_home() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hermes");
    let managed = dir.path().join("managed");
    std::fs::create_dir_all(&managed).unwrap();
    std::fs::write(
        managed.join("config.yaml"),
        "agent:\n  reasoning_effort: high\n",
    )
    .unwrap();
    hermes_home(&home);
    std::fs::write(dir.path().join("token"), "s3cret-token\n").unwrap();
    let policy = format!(
        "version: v1\nlisten:\n  api: 127.0.0.1:0\n  admin: 127.0.0.1:0\nstore:\n  root: ${{WORK_DIR}}/volume\n\
         report:\n  hermesHome: {}\n  tokenFile: {}\n  managedDir: {}\n  days: 3\n",
        home.display(),
        dir.path().join("token").display(),
        managed.display()
    );
    let gate = GateProcess::spawn(&policy).await.unwrap();

    let anonymous = get_with_token(&gate, "/v1/report", None).await;
    assert_eq!(anonymous.status.as_u16(), 401);
    assert_eq!(anonymous.header("x-fleetgate-error"), Some("unauthorized"));
    let wrong = get_with_token(&gate, "/v1/report", Some("s3cret-tokem")).await;
    assert_eq!(wrong.status.as_u16(), 401, "a wrong token must be refused");

    let ok = get_with_token(&gate, "/v1/report?days=5", Some("s3cret-token")).await;
    assert_eq!(ok.status.as_u16(), 200, "{}", ok.text());
    let body: Value = ok.json().unwrap();
    assert_eq!(body["status"]["managed"]["keys"], 1, "{body}");
    assert_eq!(body["status"]["observed"]["main"]["model"], "grok-4.6");
    assert_eq!(body["status"]["crons"][0]["id"], "a1b2c3");
    assert_eq!(
        body["crons"]["cost"]["window_days"], 5,
        "?days must override the policy's 3"
    );
    let before = snapshot(&home);
    let _ = get_with_token(&gate, "/v1/report", Some("s3cret-token")).await;
    assert_eq!(
        snapshot(&home),
        before,
        "the report must never write to the Hermes home"
    );
}

#[tokio::test]
async fn without_a_token_file_the_report_endpoint_is_off() {
    let gate = GateProcess::spawn(
        "version: v1\nlisten:\n  api: 127.0.0.1:0\n  admin: 127.0.0.1:0\nstore:\n  root: ${WORK_DIR}/volume\n",
    )
    .await
    .unwrap();
    let reply = get_with_token(&gate, "/v1/report", Some("anything")).await;
    assert_eq!(reply.status.as_u16(), 404);
    assert_eq!(reply.header("x-fleetgate-error"), Some("endpoint_disabled"));
}

#[tokio::test]
async fn the_report_cli_prints_json_for_a_home() {
    let dir = tempfile::tempdir().unwrap();
    hermes_home(dir.path());
    let out = GateProcess::run_cli(&[
        "report",
        "--hermes-home",
        dir.path().to_str().unwrap(),
        "--days",
        "2",
        "--json",
        "--managed-dir",
        dir.path().join("none").to_str().unwrap(),
    ])
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("the CLI prints JSON");
    assert_eq!(v["crons"]["cost"]["window_days"], 2);
    assert_eq!(v["status"]["crons"][0]["name"], "inbox check");
}

fn snapshot(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}
