//! Hermes Agent's own cron tick, 0.19.0's and 0.20.1's (`hermes_matrix!`), with the one-line
//! watch script (`curl -sf http://127.0.0.1:<port>/v1/watch/inbox`): the baseline and an
//! unchanged tick never reach the stub LLM; a new item wakes the agent with its line in the
//! prompt. The MCP server runs in the 0.19.0 venv either way.

use std::path::Path;

use fleetgate_e2e::gate::GateProcess;
use fleetgate_e2e::hermes_matrix;
use fleetgate_e2e::venv::{self, Hermes};

use super::{McpServer, policy, write_items};

fn driver() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/watch_mcp/hermes_cron.py")
        .display()
        .to_string()
}

async fn tick(python: &Path, home: &str) -> serde_json::Value {
    let out = venv::run_python(
        python,
        &std::fs::read_to_string(driver()).expect("driver must read"),
        &["tick", home],
        &[],
    )
    .await
    .expect("the cron tick must run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| {
        panic!(
            "the tick must print JSON ({e}):\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

hermes_matrix!(hermes_cron_wakes_the_agent_only_for_new_items);

async fn hermes_cron_wakes_the_agent_only_for_new_items(version: Hermes) {
    let (Some(sdk), Some(python)) = (venv::hermes_python(), version.python()) else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let items = dir.path().join("items.json");
    write_items(&items, &[1, 2]);
    let server = McpServer::start(&sdk, &items).await;
    let gate = GateProcess::spawn(&policy(
        &server.url(),
        server.port,
        &dir.path().join("store"),
    ))
    .await
    .expect("the gate must start");
    let home = dir.path().join("home");
    let home = home.to_str().expect("utf-8 path");
    let url = format!("http://{}/v1/watch/inbox", gate.api_addr());
    let script = std::fs::read_to_string(driver()).expect("driver must read");
    let setup = venv::run_python(&python, &script, &["setup", home, &url], &[])
        .await
        .expect("the Hermes home must be set up");
    assert!(
        setup.status.success(),
        "{version}: setup must succeed: {}",
        String::from_utf8_lossy(&setup.stderr)
    );

    let baseline = tick(&python, home).await;
    assert_eq!(
        (baseline["ran"].as_i64(), baseline["llm_requests"].as_i64()),
        (Some(1), Some(0)),
        "{version}: the baseline tick must not wake the agent"
    );
    let unchanged = tick(&python, home).await;
    assert_eq!(
        unchanged["llm_requests"], 0,
        "an unchanged tick must not wake the agent"
    );

    server.set_items(&[7, 1, 2]);
    let woke = tick(&python, home).await;
    assert!(
        woke["llm_requests"].as_i64() > Some(0),
        "{version}: a new item must wake the agent: {woke}"
    );
    let log = std::fs::read_to_string(dir.path().join("llm_requests.jsonl"))
        .expect("the stub LLM log must exist");
    let prompt = log
        .lines()
        .find(|l| l.contains("chat/completions"))
        .expect("a chat completion must reach the stub LLM");
    assert!(
        prompt.contains("Sender 7 | Subject 7"),
        "the item line must be in the prompt"
    );
    assert!(
        !prompt.contains("Subject 1"),
        "seen items must not be in the prompt"
    );
}
