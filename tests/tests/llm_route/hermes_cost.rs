//! The gate's dollars against Hermes' own: a real `hermes -z` turn on the OpenAI wire (chat
//! completions under 0.19.0, the responses API under 0.20.1) through the route, against a stub provider whose answers carry usage (cached tokens included).
//! Hermes records each session's `estimated_cost_usd` from its own pricing snapshot; the gate
//! counts the same calls from the provider's usage and `llm.prices`' built-in table. The two
//! must agree within 1 %.

use std::path::Path;
use std::time::Duration;

use fleetgate_e2e::gate::GateProcess;
use fleetgate_e2e::hermes_matrix;
use fleetgate_e2e::llm_stub::{StubKind, StubOptions, StubProvider};
use fleetgate_e2e::venv::Hermes;
use serde_json::json;

use super::support::{Secrets, metrics, policy, provider};

/// Hermes' recorded cost, as the fleet report adds it up: every session's actual, else
/// estimated, cost, plus its auxiliary calls' (`session_model_usage` rows with a task, where
/// the release has that table: 0.20.1's title call).
fn hermes_cost(home: &Path) -> f64 {
    let db = rusqlite::Connection::open_with_flags(
        home.join("state.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("Hermes' state.db");
    let sum = |sql: &str| db.query_row(sql, [], |r| r.get::<_, f64>(0)).unwrap_or(0.0);
    sum("SELECT COALESCE(SUM(COALESCE(actual_cost_usd, estimated_cost_usd, 0)), 0) FROM sessions")
        + sum(
            "SELECT COALESCE(SUM(COALESCE(actual_cost_usd, estimated_cost_usd, 0)), 0) \
             FROM session_model_usage WHERE task != ''",
        )
}

/// The sum of every `fleetgate_llm_cost_usd_total` series.
fn gate_cost(text: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with("fleetgate_llm_cost_usd_total{"))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .sum()
}

hermes_matrix!(the_gates_cost_of_a_hermes_turn_agrees_with_hermes_own_within_one_percent);

async fn the_gates_cost_of_a_hermes_turn_agrees_with_hermes_own_within_one_percent(
    version: Hermes,
) {
    let Some(python) = version.python() else {
        return;
    };
    let mut options = StubOptions::new(StubKind::OpenAi);
    options.usage = Some(
        json!({"prompt_tokens": 12000, "completion_tokens": 3000, "total_tokens": 15000,
        "prompt_tokens_details": {"cached_tokens": 2000}}),
    );
    let stub = StubProvider::start(options).await.expect("stub");
    let secrets = Secrets::new();
    let llm = format!(
        "  mode: enforce\n  providers:\n{}  roles:\n    main: stub\n  allowedModels: [gpt-4.1]\n",
        provider("stub", "openai", &stub.base_url(), &secrets.path("key"))
    );
    let gate = GateProcess::spawn(&policy(&secrets, &[stub.addr().port()], &llm))
        .await
        .expect("the gate must start");
    let home = secrets.path("hermes-home");
    std::fs::create_dir_all(&home).expect("hermes home");
    let config = format!(
        "model:\n  default: gpt-4.1\n  provider: openai-api\n  base_url: http://{}/llm/main/v1\n",
        gate.api_addr()
    );
    std::fs::write(home.join("config.yaml"), config).expect("config");
    // Hermes wants a key for the OpenAI provider; the gate drops it and sends its own.
    let key = [("OPENAI_API_KEY", "sk-agent-placeholder-not-a-key")];
    let out =
        super::hermes::run_turn_with(&version.cli(&python), &secrets, &home, "Say hi.", &key).await;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.contains("stub answer"),
        "{version}: {said}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let text = metrics(&gate).await;
    let (ours, theirs) = (gate_cost(&text), hermes_cost(&home));
    let completions: Vec<_> = stub
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/chat/completions") || r.path.ends_with("/responses"))
        .collect();
    let calls = completions.len();
    // The agent's own turns carry its tools; 0.20.1 also sends a session-title call (the
    // `title_generation` task, no tools) whose cost it does not record: the provider bills it
    // and the gate counts it.
    let turns = completions
        .iter()
        .filter(|r| r.body["tools"].as_array().is_some_and(|t| !t.is_empty()))
        .count();
    let per_call = (10_000.0 * 2.0 + 2_000.0 * 0.5 + 3_000.0 * 8.0) / 1e6;
    assert!(turns >= 1, "{version}: the turn reached the provider");
    assert!(
        (ours - per_call * calls as f64).abs() < 1e-9,
        "{version}: the gate counts {calls} calls at ${per_call}: {ours}\n{text}"
    );
    let recorded = per_call * turns as f64;
    println!(
        "{version}: {calls} calls ({turns} agent turns), the gate ${ours:.6} (turns ${recorded:.6}), Hermes ${theirs:.6}"
    );
    assert!(
        theirs > 0.0 && (recorded - theirs).abs() <= 0.01 * theirs,
        "{version}: the gate's ${recorded} for the agent's turns and Hermes' ${theirs} must agree within 1 % ({calls} calls, {turns} turns)"
    );
}
