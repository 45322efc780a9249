//! Watches against a real MCP server: the Python `mcp` SDK's streamable-HTTP server (from the
//! venv) serves items from a file the test edits, and the real gate runs the watch on
//! `/v1/watch/<name>`: baseline, new ids, dry run, source failures, restarts, corrupt state,
//! the `watch` subcommand and the metrics. `watch_mcp/hermes_cron.rs` then drives Hermes'
//! own cron tick with the one-line curl script.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use fleetgate_e2e::gate::GateProcess;
use fleetgate_e2e::http;
use fleetgate_e2e::venv;
use tokio::io::AsyncBufReadExt as _;
use tokio::process::{Child, Command};

#[path = "watch_mcp/hermes_cron.rs"]
mod hermes_cron;

const NO_WAKE: &str = "{\"wakeAgent\": false}\n";

/// The MCP server process; killed on drop.
struct McpServer {
    child: Child,
    port: u16,
    items: PathBuf,
}

impl McpServer {
    async fn start(python: &Path, items: &Path) -> McpServer {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/watch_mcp/mcp_server.py");
        let mut child = Command::new(python)
            .arg(script)
            .arg(items)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("the MCP server must start");
        let stdout = child
            .stdout
            .take()
            .expect("the MCP server stdout must be piped");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("the MCP server must print its port within 60 s")
            .expect("the MCP server stdout must be readable")
            .expect("the MCP server must print a line");
        let v: serde_json::Value =
            serde_json::from_str(&first).expect("the port line must be JSON");
        McpServer {
            child,
            port: v["port"].as_u64().expect("the port must be a number") as u16,
            items: items.to_path_buf(),
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn set_items(&self, ids: &[u32]) {
        write_items(&self.items, ids);
    }

    fn set_failing(&self, failing: bool) {
        let marker = self.items.with_extension("json.fail");
        if failing {
            std::fs::write(&marker, "").expect("the fail marker must be written");
        } else {
            let _ = std::fs::remove_file(&marker);
        }
    }

    async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// The tool's answer: a provider-style envelope, items nested under `data.messages`.
fn write_items(path: &Path, ids: &[u32]) {
    let messages: Vec<serde_json::Value> = ids
        .iter()
        .map(|id| {
            serde_json::json!({"messageId": format!("m{id}"), "subject": format!("Subject {id}"),
                               "from": {"name": format!("Sender {id}")}, "fetchedAt": "now"})
        })
        .collect();
    let body =
        serde_json::json!({"successful": true, "error": null, "data": {"messages": messages}});
    std::fs::write(path, body.to_string()).expect("the items file must be written");
}

/// A gate policy with one watch `inbox` on `server_url`, state under `store`.
fn policy(server_url: &str, port: u16, store: &Path) -> String {
    format!(
        "version: v1\nlisten: {{api: '127.0.0.1:0', admin: '127.0.0.1:0'}}\n\
         store: {{root: '{}'}}\n\
         egress: {{allowCIDRs: ['127.0.0.1/32'], ports: [{port}]}}\n\
         watches:\n  - name: inbox\n    serverUrl: '{server_url}'\n    tool: list_items\n\
         \x20   arguments: {{folder: inbox}}\n    idField: messageId\n\
         \x20   showFields: [from.name, subject]\n    maxNew: 2\n    timeoutSeconds: 20\n",
        store.display()
    )
}

/// A temp dir with the store path and an MCP server listing items `ids`.
async fn inbox(python: &Path, ids: &[u32]) -> (tempfile::TempDir, PathBuf, McpServer) {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let store = dir.path().join("store");
    let items = dir.path().join("items.json");
    write_items(&items, ids);
    let server = McpServer::start(python, &items).await;
    (dir, store, server)
}

async fn watch(gate: &GateProcess, query: &str) -> http::HttpReply {
    http::get(gate.api_addr(), &format!("/v1/watch/inbox{query}"))
        .await
        .expect("the watch route must answer")
}

fn state_bytes(store: &Path) -> Option<Vec<u8>> {
    std::fs::read(store.join("watch/inbox.json")).ok()
}

#[tokio::test]
async fn a_watch_reports_only_new_ids_and_keeps_its_state_through_errors_and_restarts() {
    let Some(python) = venv::hermes_python() else {
        return;
    };
    let (_dir, store, server) = inbox(&python, &[1, 2]).await;
    let policy_yaml = policy(&server.url(), server.port, &store);
    let gate = GateProcess::spawn(&policy_yaml)
        .await
        .expect("the gate must start");

    let first = watch(&gate, "").await;
    assert_eq!(
        (first.status.as_u16(), first.text().as_str()),
        (200, NO_WAKE),
        "the first run is a baseline"
    );
    assert!(
        state_bytes(&store).is_some(),
        "the baseline must be written"
    );
    let same = watch(&gate, "").await;
    assert_eq!(
        same.text(),
        NO_WAKE,
        "unchanged items must not wake the agent"
    );

    server.set_items(&[3, 1, 2]);
    let new = watch(&gate, "").await;
    assert_eq!(
        (new.status.as_u16(), new.text().as_str()),
        (200, "Sender 3 | Subject 3\n"),
        "exactly the new item"
    );
    assert_eq!(
        watch(&gate, "").await.text(),
        NO_WAKE,
        "a reported id is not reported twice"
    );

    server.set_items(&[4, 5, 6, 3]);
    let before = state_bytes(&store);
    let dry = watch(&gate, "?dry_run=1").await;
    assert_eq!(
        dry.text(),
        "Sender 4 | Subject 4\nSender 5 | Subject 5\n… and 1 more\n",
        "a dry run shows maxNew lines and the count"
    );
    assert_eq!(state_bytes(&store), before, "a dry run must not write");

    server.set_failing(true);
    let failed = watch(&gate, "").await;
    assert_eq!(
        failed.status.as_u16(),
        502,
        "an isError result must be a non-2xx: {}",
        failed.text()
    );
    assert_eq!(
        failed.header("x-fleetgate-error"),
        Some("watch_source_failed")
    );
    assert!(
        failed.text().contains("upstream unavailable"),
        "the tool's message must be shown"
    );
    assert_eq!(
        failed.text().lines().count(),
        1,
        "the error must be one line"
    );
    assert_eq!(
        state_bytes(&store),
        before,
        "a failure must leave the state unchanged"
    );
    server.set_failing(false);

    drop(gate);
    let gate = GateProcess::spawn(&policy_yaml)
        .await
        .expect("the gate must restart");
    let after_restart = watch(&gate, "").await;
    assert_eq!(
        after_restart.text(),
        "Sender 4 | Subject 4\nSender 5 | Subject 5\n… and 1 more\n",
        "after a restart only the ids the old gate never recorded are new"
    );
    let metrics = http::get(gate.admin_addr(), "/metrics")
        .await
        .expect("metrics must answer")
        .text();
    assert!(
        metrics.contains("fleetgate_watch_runs_total{result=\"new_items\",watch=\"inbox\"} 1"),
        "runs must be counted per watch and result:\n{metrics}"
    );
    assert!(
        metrics.contains("fleetgate_watch_new_items_total{watch=\"inbox\"} 3"),
        "new items must be counted"
    );

    let kept = state_bytes(&store);
    let items_path = server.items.clone();
    server.stop().await;
    let down = watch(&gate, "").await;
    assert_eq!(
        down.status.as_u16(),
        502,
        "a server that is down must be a non-2xx: {}",
        down.text()
    );
    assert_eq!(
        state_bytes(&store),
        kept,
        "a transport failure must leave the state unchanged"
    );

    std::fs::write(store.join("watch/inbox.json"), "{ not json").expect("state must be writable");
    let server = McpServer::start(&python, &items_path).await;
    let gate = GateProcess::spawn(&policy(&server.url(), server.port, &store))
        .await
        .expect("the gate must start");
    let corrupt = watch(&gate, "").await;
    assert_eq!(
        corrupt.status.as_u16(),
        500,
        "a corrupt state must be an error: {}",
        corrupt.text()
    );
    assert_eq!(corrupt.header("x-fleetgate-error"), Some("watch_state"));
    let unknown = http::get(gate.api_addr(), "/v1/watch/nope")
        .await
        .expect("the route must answer");
    assert_eq!(unknown.status.as_u16(), 404, "an unknown watch must be 404");
}

#[tokio::test]
async fn the_watch_subcommand_prints_the_same_output_and_exit_codes() {
    let Some(python) = venv::hermes_python() else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let store = dir.path().join("store");
    let items = dir.path().join("items.json");
    write_items(&items, &[1]);
    let server = McpServer::start(&python, &items).await;
    let policy_file = dir.path().join("policy.yaml");
    std::fs::write(&policy_file, policy(&server.url(), server.port, &store))
        .expect("policy must be written");
    let p = policy_file.to_str().expect("utf-8 path");
    let run = |args: Vec<&'static str>| {
        let mut all = vec!["watch", "--policy", p];
        all.extend(args);
        async move {
            GateProcess::run_cli(&all)
                .await
                .expect("the subcommand must run")
        }
    };
    let baseline = run(vec!["inbox"]).await;
    assert_eq!(
        (
            baseline.status.code(),
            String::from_utf8_lossy(&baseline.stdout).to_string()
        ),
        (Some(0), NO_WAKE.to_string())
    );
    server.set_items(&[1, 2]);
    let dry = run(vec!["inbox", "--dry-run"]).await;
    assert_eq!(
        String::from_utf8_lossy(&dry.stdout),
        "Sender 2 | Subject 2\n",
        "the dry run shows the new item"
    );
    let real = run(vec!["inbox"]).await;
    assert_eq!(
        String::from_utf8_lossy(&real.stdout),
        "Sender 2 | Subject 2\n",
        "the dry run did not record it"
    );
    server.set_failing(true);
    assert_eq!(
        run(vec!["inbox"]).await.status.code(),
        Some(1),
        "a failing source exits 1"
    );
    assert_eq!(
        run(vec!["other"]).await.status.code(),
        Some(2),
        "an unknown watch exits 2"
    );
    std::fs::write(&policy_file, "version: v1\nwatch: {pinnedServerUrl: 'http://127.0.0.1:1/mcp'}\nwatches:\n  - {name: inbox, serverUrl: 'http://evil.example/mcp', tool: t, idField: id}\n")
        .expect("policy must be written");
    let pinned = run(vec!["inbox"]).await;
    assert_eq!(
        pinned.status.code(),
        Some(2),
        "a watch off the pinned endpoint is a config error"
    );
    assert!(
        String::from_utf8_lossy(&pinned.stderr).contains("watches[0].serverUrl"),
        "the error must name the field"
    );
}

#[tokio::test]
async fn dry_runs_count_on_their_own_and_move_no_run_or_item_counter() {
    let Some(python) = venv::hermes_python() else {
        return;
    };
    let (_dir, store, server) = inbox(&python, &[1, 2]).await;
    let gate = GateProcess::spawn(&policy(&server.url(), server.port, &store))
        .await
        .expect("the gate must start");
    let metric = |text: &str, series: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0.0)
    };
    let scrape = || async {
        http::get(gate.admin_addr(), "/metrics")
            .await
            .expect("metrics must answer")
            .text()
    };
    // A dry run on a fresh watch: no baseline is recorded or counted.
    watch(&gate, "?dry_run=1").await;
    let text = scrape().await;
    assert_eq!(
        metric(
            &text,
            r#"fleetgate_watch_runs_total{result="baseline",watch="inbox"}"#
        ),
        0.0,
        "a dry run is not a run:\n{text}"
    );
    assert_eq!(
        metric(
            &text,
            r#"fleetgate_watch_dry_runs_total{result="baseline",watch="inbox"}"#
        ),
        1.0,
        "dry runs count on their own:\n{text}"
    );
    assert!(state_bytes(&store).is_none(), "a dry run writes no state");
    watch(&gate, "").await;
    // One new item, seen by two dry runs and then a real run: counted once.
    server.set_items(&[3, 1, 2]);
    watch(&gate, "?dry_run=1").await;
    watch(&gate, "?dry_run=1").await;
    let real = watch(&gate, "").await;
    assert_eq!(
        real.text(),
        "Sender 3 | Subject 3\n",
        "the real run reports it"
    );
    let text = scrape().await;
    for (series, want) in [
        (r#"fleetgate_watch_new_items_total{watch="inbox"}"#, 1.0),
        (
            r#"fleetgate_watch_runs_total{result="baseline",watch="inbox"}"#,
            1.0,
        ),
        (
            r#"fleetgate_watch_runs_total{result="new_items",watch="inbox"}"#,
            1.0,
        ),
        (
            r#"fleetgate_watch_dry_runs_total{result="new_items",watch="inbox"}"#,
            2.0,
        ),
    ] {
        assert_eq!(metric(&text, series), want, "{series}:\n{text}");
    }
    server.stop().await;
}
