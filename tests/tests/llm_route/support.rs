//! Shared setup of the LLM route tests: a key file, a report token and an empty Hermes home,
//! the gate policy pointing roles at stub providers, and the report / metrics readers.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use ::http::Request;
use bytes::Bytes;
use fleetgate_e2e::gate::GateProcess;
use fleetgate_e2e::http;
use serde_json::Value;
use tempfile::TempDir;

/// The provider key only the gate holds.
pub const GATE_KEY: &str = "sk-gate-only-0123456789";
/// The report token.
pub const TOKEN: &str = "report-token-llm";

/// Files the gate reads: key, token, Hermes home.
pub struct Secrets {
    pub dir: TempDir,
}

impl Secrets {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("a temp dir must be created");
        std::fs::write(dir.path().join("key"), format!("{GATE_KEY}\n")).expect("key file");
        std::fs::write(dir.path().join("token"), TOKEN).expect("token file");
        std::fs::create_dir_all(dir.path().join("home")).expect("hermes home");
        Self { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn home(&self) -> PathBuf {
        self.path("home")
    }
}

/// A policy whose `llm:` section is `llm_yaml` (indented by the caller), with loopback
/// providers allowed and the report on.
pub fn policy(secrets: &Secrets, ports: &[u16], llm_yaml: &str) -> String {
    let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
    format!(
        "version: v1\nlisten:\n  api: 127.0.0.1:0\n  admin: 127.0.0.1:0\n\
         egress:\n  allowCIDRs: [\"127.0.0.1/32\"]\n  ports: [{}]\n\
         store:\n  root: ${{WORK_DIR}}/volume\n\
         report:\n  hermesHome: {}\n  tokenFile: {}\n  managedDir: {}\n\
         llm:\n{llm_yaml}",
        ports.join(", "),
        secrets.home().display(),
        secrets.path("token").display(),
        secrets.path("managed").display(),
    )
}

/// One provider entry of `llm.providers`.
pub fn provider(name: &str, kind: &str, base: &str, key: &Path) -> String {
    format!(
        "    {name}:\n      kind: {kind}\n      baseUrl: {base}\n      keyFile: {}\n",
        key.display()
    )
}

/// `/v1/report`, with the report token.
pub async fn report(gate: &GateProcess) -> Value {
    let req = Request::get("/v1/report")
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(Bytes::new())
        .expect("report request");
    let reply = http::send(gate.admin_addr(), req)
        .await
        .expect("report must answer");
    assert_eq!(reply.status, 200, "report: {}", reply.text());
    reply.json().expect("report JSON")
}

/// `/v1/report`'s `status.observed`.
pub async fn observed(gate: &GateProcess) -> Value {
    report(gate).await["status"]["observed"].clone()
}

/// The JSON line a Python driver prints last.
pub fn last_json_line(out: &std::process::Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| {
        panic!(
            "the driver must print JSON ({e}):\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// `/metrics` text.
pub async fn metrics(gate: &GateProcess) -> String {
    http::get(gate.admin_addr(), "/metrics")
        .await
        .expect("metrics must answer")
        .text()
}

/// POST `body` to `path` on the api listener with an agent-side key header.
pub async fn call(
    api: SocketAddr,
    path: &str,
    body: &Value,
    agent_key: (&str, &str),
) -> http::HttpReply {
    let req = Request::post(path)
        .header("content-type", "application/json")
        .header(agent_key.0, agent_key.1)
        .body(Bytes::from(body.to_string()))
        .expect("request");
    http::send(api, req).await.expect("the gate must answer")
}

/// POST a raw `body` to `path` on the gate's api listener, with an agent-side key header.
pub async fn post(gate: &GateProcess, path: &str, body: impl Into<Bytes>) -> http::HttpReply {
    let req = Request::post(path)
        .header("content-type", "application/json")
        .header("authorization", "Bearer agent")
        .body(body.into())
        .expect("request");
    http::send(gate.api_addr(), req)
        .await
        .expect("the gate must answer")
}
