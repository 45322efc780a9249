//! Hermes Agent's own cron (0.19.0's and 0.20.1's scheduler, `hermes_cron.py`) through the
//! route's `cron` role, against a stub provider whose answers carry usage: what the gate
//! counts per call agrees with the fleet report's cost of the job (computed from Hermes'
//! records), and a pod budget reached in the middle of a run refuses the run's next call in
//! the provider's 429 shape, Hermes records the run as failed, and `/v1/status` and the
//! budget gauges say so. In observe mode the same run is not refused and is counted.

use std::path::{Path, PathBuf};
use std::time::Duration;

use fleetgate_e2e::gate::GateProcess;
use fleetgate_e2e::hermes_matrix;
use fleetgate_e2e::http;
use fleetgate_e2e::llm_stub::{StubKind, StubOptions, StubProvider};
use fleetgate_e2e::venv::{self, Hermes};
use serde_json::{Value, json};

use super::support::{Secrets, last_json_line, metrics, policy, provider, report};

/// Hermes wants a key for the OpenAI provider; the gate drops it and sends its own.
const AGENT_KEY: (&str, &str) = ("OPENAI_API_KEY", "sk-agent-placeholder-not-a-key");

fn driver() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/llm_route/hermes_cron.py");
    std::fs::read_to_string(path).expect("the cron driver must read")
}

async fn run(python: &Path, args: &[&str]) -> Value {
    let out = venv::run_python(python, &driver(), args, &[AGENT_KEY])
        .await
        .expect("the cron driver must run");
    last_json_line(&out)
}

/// 12,000 prompt tokens (2,000 cached) and 3,000 completion tokens per call: $0.045 at
/// gpt-4.1's list prices.
fn usage() -> Value {
    json!({"prompt_tokens": 12000, "completion_tokens": 3000, "total_tokens": 15000,
        "prompt_tokens_details": {"cached_tokens": 2000}})
}
const PER_CALL: f64 = (10_000.0 * 2.0 + 2_000.0 * 0.5 + 3_000.0 * 8.0) / 1e6;

/// A gate in `mode` whose `cron` role goes to `stub`, with `extra` appended to `llm:`.
async fn gate(secrets: &Secrets, stub: &StubProvider, mode: &str, extra: &str) -> GateProcess {
    let llm = format!(
        "  mode: {mode}\n  providers:\n{}  roles:\n    cron: stub\n  allowedModels: [gpt-4.1]\n{extra}",
        provider("stub", "openai", &stub.base_url(), &secrets.path("key"))
    );
    GateProcess::spawn(&policy(secrets, &[stub.addr().port()], &llm))
        .await
        .expect("the gate must start")
}

async fn home(python: &Path, secrets: &Secrets, gate: &GateProcess, provider: &str) -> PathBuf {
    let home = secrets.home();
    let base = format!("http://{}/llm/cron/v1", gate.api_addr());
    let home_s = home.to_str().expect("utf-8 path");
    let setup = run(python, &["setup", home_s, &base, provider]).await;
    assert!(setup["job_id"].is_string(), "setup: {setup}");
    home
}

/// The sum of the `fleetgate_llm_cost_usd_total` series of `role`.
fn gate_cost(text: &str, role: &str) -> f64 {
    let label = format!("role=\"{role}\"");
    text.lines()
        .filter(|l| l.starts_with("fleetgate_llm_cost_usd_total{") && l.contains(&label))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .sum()
}

hermes_matrix!(hermes_cron_ticks_cost_at_the_gate_what_the_fleet_report_says);

async fn hermes_cron_ticks_cost_at_the_gate_what_the_fleet_report_says(version: Hermes) {
    let Some(python) = version.python() else {
        return;
    };
    let mut options = StubOptions::new(StubKind::OpenAi);
    options.usage = Some(usage());
    let stub = StubProvider::start(options).await.expect("stub");
    let secrets = Secrets::new();
    let gate = gate(&secrets, &stub, "enforce", "").await;
    let home = home(&python, &secrets, &gate, "openai-api").await;
    let home_s = home.to_str().expect("utf-8 path");
    for n in 0..2 {
        let t = run(&python, &["tick", home_s]).await;
        assert_eq!(
            (t["ran"].as_i64(), t["last_status"].as_str()),
            (Some(1), Some("ok")),
            "{version}: tick {n}: {t}"
        );
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let text = metrics(&gate).await;
    let seen: Vec<_> = stub
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/chat/completions") || r.path.ends_with("/responses"))
        .collect();
    let calls = seen.len();
    let streamed = seen
        .iter()
        .filter(|r| r.body["stream"] == json!(true))
        .count();
    let ours = gate_cost(&text, "cron");
    let body = report(&gate).await;
    let job = &body["crons"]["cost"]["jobs"][0];
    println!("{version}: {calls} calls ({streamed} streamed), gate ${ours:.6}, report {job}");
    let theirs = job["cost_usd"].as_f64().expect("the report prices the job");
    assert!(
        (ours - PER_CALL * calls as f64).abs() < 1e-9,
        "{version}: the gate counts {calls} calls at ${PER_CALL}: {ours}\n{text}"
    );
    assert!(
        theirs > 0.0 && (ours - theirs).abs() <= 0.01 * theirs,
        "{version}: the gate's ${ours} and the report's ${theirs} must agree within 1 %: {job}"
    );
}

/// A metric's value (0 when absent).
fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// One cron run of four calls (three `todo` tool calls, then the answer) at $0.045 each,
/// against a pod budget of $0.08 for `cron` in `mode`: calls one and two go through ($0.09
/// spent), the third is over budget.
async fn budget_run(version: Hermes, mode: &str) -> (Value, StubProvider, GateProcess, Secrets) {
    let python = version.python().expect("the venv");
    let mut options = StubOptions::new(StubKind::OpenAi);
    options.usage = Some(usage());
    options.tool_turns = Some(("todo".into(), 3));
    options.tool_args =
        json!({"todos": [{"id": "1", "content": "check the queue", "status": "pending"}]});
    let stub = StubProvider::start(options).await.expect("stub");
    let secrets = Secrets::new();
    let budgets = "  budgets:\n    pod:\n      cron:\n        dailyUsd: 0.08\n";
    let gate = gate(&secrets, &stub, mode, budgets).await;
    // `custom`: the chat completions wire on both releases, where the stub scripts tool calls.
    let home = home(&python, &secrets, &gate, "custom").await;
    let tick = run(&python, &["tick", home.to_str().expect("utf-8 path")]).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    (tick, stub, gate, secrets)
}

fn chat_calls(stub: &StubProvider) -> usize {
    stub.requests()
        .iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .count()
}

async fn spend_status(gate: &GateProcess) -> Value {
    let status = http::get(gate.admin_addr(), "/v1/status")
        .await
        .expect("status must answer");
    status.json().expect("status JSON")["llm"]["spend"].clone()
}

/// What the two budget alerts evaluate, read off the gate's `/metrics`: spend over the pod
/// budget (`FleetgateLlmBudgetNearlySpent`, ≥ 0.8) and the refused or would-be-refused
/// attempts (`FleetgateLlmBudgetExceeded`, > 0 within 10 minutes).
fn alert_inputs(text: &str, action: &str) -> (f64, f64) {
    let spent = value(text, r#"fleetgate_llm_spend_usd{role="cron"}"#);
    let budget = value(text, r#"fleetgate_llm_budget_usd{role="cron",scope="pod"}"#);
    let attempts = value(
        text,
        &format!(
            r#"fleetgate_llm_refusal_attempts_total{{action="{action}",code="llm_budget_exceeded",role="cron"}}"#
        ),
    );
    (if budget > 0.0 { spent / budget } else { 0.0 }, attempts)
}

hermes_matrix!(a_cron_run_that_reaches_its_budget_midway_is_refused_and_recorded_as_failed);

async fn a_cron_run_that_reaches_its_budget_midway_is_refused_and_recorded_as_failed(
    version: Hermes,
) {
    if version.python().is_none() {
        return;
    }
    let t0 = tokio::time::Instant::now();
    let (tick, stub, gate, _secrets) = budget_run(version, "enforce").await;
    let took = t0.elapsed();
    let text = metrics(&gate).await;
    println!("{version}: enforce: the run took {took:?}: {tick}");
    assert_eq!(
        chat_calls(&stub),
        2,
        "{version}: the calls after the budget was reached never reached the provider"
    );
    assert_eq!(tick["ran"], 1, "{version}: {tick}");
    assert_eq!(
        tick["last_status"], "error",
        "{version}: Hermes records the refused run as failed: {tick}"
    );
    let error = tick["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("daily pod budget of role 'cron'") && error.contains("00:00 UTC"),
        "{version}: Hermes records the gate's message: {error}"
    );
    let (share, attempts) = alert_inputs(&text, "refused");
    assert!(
        share >= 1.0 && attempts >= 1.0,
        "{version}: both budget alerts' inputs fire (spent/budget {share}, refused attempts {attempts}):\n{text}"
    );
    let spend = spend_status(&gate).await;
    let cron = &spend["roles"]["cron"];
    assert!(
        (cron["usd"].as_f64().unwrap_or(0.0) - 2.0 * PER_CALL).abs() < 1e-9 && cron["calls"] == 2,
        "{version}: /v1/status shows the two answered calls: {spend}"
    );
    let job = report(&gate).await["crons"]["cost"]["jobs"][0].clone();
    assert_eq!(
        job["runs_failed"], 1,
        "{version}: the report counts the failed run: {job}"
    );
}

hermes_matrix!(in_observe_mode_the_same_cron_run_goes_through_and_is_counted);

async fn in_observe_mode_the_same_cron_run_goes_through_and_is_counted(version: Hermes) {
    if version.python().is_none() {
        return;
    }
    let (tick, stub, gate, _secrets) = budget_run(version, "observe").await;
    let text = metrics(&gate).await;
    assert_eq!(
        (tick["ran"].as_i64(), tick["last_status"].as_str()),
        (Some(1), Some("ok")),
        "{version}: observe mode refuses nothing: {tick}"
    );
    assert_eq!(
        chat_calls(&stub),
        4,
        "{version}: every call reached the provider"
    );
    let (share, attempts) = alert_inputs(&text, "would_refuse");
    assert!(
        (share - 4.0 * PER_CALL / 0.08).abs() < 1e-6 && attempts == 2.0,
        "{version}: all four calls are counted and the two over budget would have been refused (spent/budget {share}, attempts {attempts}):\n{text}"
    );
    assert!(
        (gate_cost(&text, "cron") - 4.0 * PER_CALL).abs() < 1e-9,
        "{version}: the gate counts four calls:\n{text}"
    );
}
