//! The real client: Hermes Agent 0.19.0 runs one non-interactive turn (`hermes -z`) with its
//! main model and its delegated sub-agent pointed at the gate's role paths
//! (`model.base_url`, `delegation.base_url`) and no key anywhere in its config or
//! environment. The gate adds the key, pins the main role's effort and tier (enforce mode),
//! and the report shows each role with what was really sent and served.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use fleetgate_e2e::gate::GateProcess;
use fleetgate_e2e::llm_stub::{StubKind, StubOptions, StubProvider};
use fleetgate_e2e::venv;
use serde_json::json;

use super::support::{GATE_KEY, Secrets, observed, policy, provider};

/// How long the Hermes turn (imports, two agents, four calls) may take.
const TURN_TIMEOUT: Duration = Duration::from_secs(240);

fn hermes_config(api: std::net::SocketAddr) -> String {
    format!(
        "model:\n  default: \"tool:delegate_task\"\n  provider: custom\n  base_url: http://{api}/llm/main/v1\n\
         delegation:\n  model: stub-sub\n  base_url: http://{api}/llm/delegation/v1\n"
    )
}

fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    let mut hits = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return hits;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            hits.extend(files_containing(&path, needle));
        } else if std::fs::read(&path)
            .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
        {
            hits.push(path.display().to_string());
        }
    }
    hits
}

#[tokio::test]
async fn hermes_runs_a_turn_and_a_delegated_sub_agent_through_their_own_role_paths() {
    let Some(python) = venv::hermes_python() else {
        return;
    };
    let hermes = python.with_file_name("hermes");
    let mut options = StubOptions::new(StubKind::OpenAi);
    options.tool_args = json!({"goal": "say hello", "context": "a fleetgate test"});
    let stub = StubProvider::start(options).await.expect("stub");
    let secrets = Secrets::new();
    let llm = format!(
        "  mode: enforce\n  providers:\n{}  roles:\n    main: stub\n    delegation: stub\n\
         \x20 pins:\n    main:\n      effort: high\n      serviceTier: priority\n",
        provider("stub", "openai", &stub.base_url(), &secrets.path("key"))
    );
    let yaml = policy(&secrets, &[stub.addr().port()], &llm);
    let gate = GateProcess::spawn(&yaml)
        .await
        .expect("the gate must start");
    let home = secrets.path("hermes-home");
    std::fs::create_dir_all(&home).expect("hermes home");
    std::fs::write(home.join("config.yaml"), hermes_config(gate.api_addr())).expect("config");
    let run = tokio::process::Command::new(&hermes)
        .args(["-z", "Delegate a hello to a sub-agent."])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", secrets.dir.path())
        .env("HERMES_HOME", &home)
        .current_dir(secrets.dir.path())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(TURN_TIMEOUT, run)
        .await
        .expect("the Hermes turn must finish in time")
        .expect("hermes must run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("stub answer"),
        "the turn must end with the stub's answer\nstdout: {stdout}\nstderr: {stderr}"
    );
    let chat: Vec<_> = stub
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .collect();
    let models: Vec<&str> = chat
        .iter()
        .filter_map(|r| r.body["model"].as_str())
        .collect();
    assert!(
        models.contains(&"tool:delegate_task") && models.contains(&"stub-sub"),
        "the main agent and the sub-agent must both call the provider: {models:?}"
    );
    for r in stub.requests() {
        let want = format!("Bearer {GATE_KEY}");
        assert_eq!(
            r.authorization.as_deref(),
            Some(want.as_str()),
            "{}: gate key",
            r.path
        );
    }
    let main_sent = chat
        .iter()
        .find(|r| r.body["model"] == "tool:delegate_task");
    let main_sent = main_sent.expect("a main call").body.clone();
    assert_eq!(
        main_sent["reasoning_effort"], "high",
        "the pin is on the wire"
    );
    assert_eq!(
        main_sent["service_tier"], "priority",
        "the pin is on the wire"
    );
    // Hermes' metadata calls (model lists, `POST /api/show`, model info) are not completions:
    // they reach the provider as Hermes sent them, without the pins.
    let metadata: Vec<_> = stub
        .requests()
        .into_iter()
        .filter(|r| !r.path.ends_with("/chat/completions"))
        .collect();
    for r in &metadata {
        assert!(
            r.body.get("reasoning_effort").is_none() && r.body.get("service_tier").is_none(),
            "{}: a metadata call must pass unchanged: {}",
            r.path,
            r.body
        );
    }
    let obs = observed(&gate).await;
    let want = [
        (
            "main",
            json!(["tool:delegate_task", "high", "priority", "priority"]),
        ),
        ("delegation", json!(["stub-sub", null, null, "default"])),
    ];
    for (role, want) in want {
        let e = &obs[role];
        let got = json!([
            e["model"],
            e["reasoning_effort"],
            e["service_tier"],
            e["response_service_tier"]
        ]);
        assert_eq!(
            got, want,
            "observed.{role} (model, effort, tier, served): {obs}"
        );
    }
    assert!(
        files_containing(&home, GATE_KEY).is_empty(),
        "the provider key must never land in Hermes' home"
    );
}
