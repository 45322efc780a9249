//! The real clients: Hermes Agent 0.19.0 and 0.20.1 (one test per version) run one
//! non-interactive turn (`hermes -z`, `hermesx -z`) with the main model and the delegated
//! sub-agent pointed at the gate's role paths (`model.base_url`, `delegation.base_url`) and no
//! key anywhere in their config or environment. The gate adds the key, pins the main role's
//! effort and tier (enforce mode), and the report shows each role with what was really sent
//! and served. A refused turn counts once per turn under both versions, however many
//! requests each sends for it; Hermes' own `x_search` tool, which asks xAI to search X
//! itself, and a Hermes turn on xAI responses declaring xAI's native web search are refused or
//! observed as provider-side tools.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use fleetgate_e2e::gate::GateProcess;
use fleetgate_e2e::hermes_matrix;
use fleetgate_e2e::llm_stub::{StubKind, StubOptions, StubProvider};
use fleetgate_e2e::venv::{self, Hermes};
use serde_json::{Value, json};

use super::support::{GATE_KEY, Secrets, metrics, observed, policy, provider};

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

/// `<cli> -z <prompt>` with `home` as `HERMES_HOME`, nothing else from this environment.
async fn run_turn(cli: &Path, secrets: &Secrets, home: &Path, prompt: &str) -> Output {
    run_turn_with(cli, secrets, home, prompt, &[]).await
}

/// [`run_turn`] with `env` added.
pub(super) async fn run_turn_with(
    cli: &Path,
    secrets: &Secrets,
    home: &Path,
    prompt: &str,
    env: &[(&str, &str)],
) -> Output {
    let run = tokio::process::Command::new(cli)
        .args(["-z", prompt])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", secrets.dir.path())
        .env("HERMES_HOME", home)
        .envs(venv::HERMES_ENV)
        .envs(env.iter().copied())
        .current_dir(secrets.dir.path())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(TURN_TIMEOUT, run)
        .await
        .expect("the Hermes turn must finish in time")
        .expect("hermes must run")
}

hermes_matrix!(hermes_runs_a_turn_and_a_delegated_sub_agent_through_their_own_role_paths);

async fn hermes_runs_a_turn_and_a_delegated_sub_agent_through_their_own_role_paths(
    version: Hermes,
) {
    let Some(python) = version.python() else {
        return;
    };
    let hermes = version.cli(&python);
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
    let out = run_turn(&hermes, &secrets, &home, "Delegate a hello to a sub-agent.").await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("stub answer"),
        "{version}: the turn must end with the stub's answer\nstdout: {stdout}\nstderr: {stderr}"
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

/// The value of the series `series` (its whole name with labels) on `/metrics`, 0 if absent.
fn series(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// What one refused turn left on the gate.
#[derive(Debug)]
struct RefusedTurn {
    /// `status.observed.main.gate.refused`.
    turns: u64,
    /// `status.observed.main.gate.refused_attempts`.
    attempts: u64,
    /// `fleetgate_llm_refusals_total` of the refusal.
    turns_metric: f64,
    /// `fleetgate_llm_refusal_attempts_total` of the refusal.
    attempts_metric: f64,
    /// `llm.refusal` lines, and those saying `retry_of_refusal: true`.
    lines: usize,
    retry_lines: usize,
}

/// One `-z` turn of `version` whose model the fleet policy does not allow (enforce mode).
async fn one_refused_turn(version: Hermes, python: &Path) -> RefusedTurn {
    let stub = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let secrets = Secrets::new();
    let llm = format!(
        "  mode: enforce\n  providers:\n{}  roles:\n    main: stub\n  allowedModels: [approved-model]\n",
        provider("stub", "openai", &stub.base_url(), &secrets.path("key"))
    );
    let gate = GateProcess::spawn(&policy(&secrets, &[stub.addr().port()], &llm))
        .await
        .expect("the gate must start");
    let home = secrets.path("hermes-home");
    std::fs::create_dir_all(&home).expect("hermes home");
    let config = format!(
        "model:\n  default: stub-model\n  provider: custom\n  base_url: http://{}/llm/main/v1\n",
        gate.api_addr()
    );
    std::fs::write(home.join("config.yaml"), config).expect("config");
    let out = run_turn(&version.cli(python), &secrets, &home, "Say hi.").await;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("model 'stub-model' is not allowed by the fleet policy"),
        "{version} must show the gate's refusal: {said}"
    );
    let completions = stub
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .count();
    assert_eq!(
        completions, 0,
        "{version}: no refused completion reaches the provider"
    );
    let obs = observed(&gate).await;
    let counters = &obs["main"]["gate"];
    let text = metrics(&gate).await;
    let labels = r#"{action="refused",code="llm_model_not_allowed",role="main"}"#;
    let attempts_metric = series(
        &text,
        &format!("fleetgate_llm_refusal_attempts_total{labels}"),
    );
    // Log lines reach the harness through a pipe: wait for one per attempt.
    let refusal_lines = || {
        gate.json_logs()
            .into_iter()
            .filter(|l| l["event"] == "llm.refusal")
            .collect::<Vec<Value>>()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while (refusal_lines().len() as f64) < attempts_metric && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let lines = refusal_lines();
    RefusedTurn {
        turns: counters["refused"].as_u64().unwrap_or(u64::MAX),
        attempts: counters["refused_attempts"].as_u64().unwrap_or(u64::MAX),
        turns_metric: series(&text, &format!("fleetgate_llm_refusals_total{labels}")),
        attempts_metric,
        lines: lines.len(),
        retry_lines: lines
            .iter()
            .filter(|l| l["retry_of_refusal"] == true)
            .count(),
    }
}

/// The same refused turn under both versions: Hermes 0.20.1 sends two completions for it
/// (the turn's own and its session-title call, both with the user's message), 0.19.0 one; the
/// per-turn figures the report and `/metrics` show are the same.
#[tokio::test]
async fn a_refused_turn_counts_once_per_turn_under_hermes_0_19_0_and_0_20_1() {
    let mut figures = Vec::new();
    for version in Hermes::ALL {
        let Some(python) = version.python() else {
            return;
        };
        figures.push((version, one_refused_turn(version, &python).await));
    }
    for (version, f) in &figures {
        println!("{version}: {f:?}");
        assert_eq!(
            (f.turns, f.turns_metric),
            (1, 1.0),
            "{version}: one refused turn in the report and the metric: {f:?}"
        );
        assert_eq!(
            f.attempts as f64, f.attempts_metric,
            "{version}: the report and the metric count the same attempts: {f:?}"
        );
        assert_eq!(
            (f.lines as u64, f.retry_lines as u64),
            (f.attempts, f.attempts - 1),
            "{version}: one llm.refusal line per attempt, every one after the first marked retry_of_refusal: {f:?}"
        );
    }
    let attempts: Vec<u64> = figures.iter().map(|(_, f)| f.attempts).collect();
    assert_eq!(
        attempts,
        [1, 2],
        "0.19.0 sends the turn once, 0.20.1 also its title call: {figures:?}"
    );
}

/// Hermes' own `x_search` tool (`tools/x_search_tool.py`) with `XAI_BASE_URL` at the gate's
/// main role and a placeholder `XAI_API_KEY`: its parsed JSON result.
async fn hermes_x_search(python: &Path, gate: &GateProcess, home: &Path) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/hermes_x_search.py");
    let out = venv::run_python(
        python,
        &std::fs::read_to_string(script).expect("the driver must read"),
        &["fleet gate news"],
        &[
            ("HERMES_HOME", home.to_str().expect("a UTF-8 path")),
            ("HOME", home.to_str().expect("a UTF-8 path")),
            ("XAI_API_KEY", "agent-placeholder-key"),
            (
                "XAI_BASE_URL",
                &format!("http://{}/llm/main/v1", gate.api_addr()),
            ),
        ],
    )
    .await
    .expect("python must run");
    super::support::last_json_line(&out)
}

/// A gate with one xAI-kind stub serving `main` under `tools_yaml` (an `llm.providerTools`
/// section, or nothing), enforce mode; the stub, the secrets and the gate.
async fn x_search_gate(tools_yaml: &str) -> (StubProvider, Secrets, GateProcess, PathBuf) {
    let stub = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let secrets = Secrets::new();
    let llm = format!(
        "  mode: enforce\n  providers:\n{}  roles:\n    main: xai\n{tools_yaml}",
        provider("xai", "xai", &stub.base_url(), &secrets.path("key"))
    );
    let gate = GateProcess::spawn(&policy(&secrets, &[stub.addr().port()], &llm))
        .await
        .expect("the gate must start");
    let home = secrets.path("hermes-home");
    std::fs::create_dir_all(&home).expect("hermes home");
    (stub, secrets, gate, home)
}

hermes_matrix!(hermes_x_search_is_refused_or_observed_as_a_provider_side_tool);

async fn hermes_x_search_is_refused_or_observed_as_a_provider_side_tool(version: Hermes) {
    let Some(python) = version.python() else {
        return;
    };
    // Refused: the provider would search X itself.
    let (stub, _secrets, gate, home) = x_search_gate("  providerTools:\n    main: refuse\n").await;
    let refused = hermes_x_search(&python, &gate, &home).await;
    let error = refused["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("provider-side tool 'x_search' is not allowed for role 'main'"),
        "{version}: Hermes must show the refusal naming the tool: {refused}"
    );
    assert!(
        stub.requests().is_empty(),
        "{version}: nothing reaches the provider: {:?}",
        stub.requests()
    );
    let text = metrics(&gate).await;
    for (want, value) in [
        (
            r#"fleetgate_llm_provider_tools_total{action="refused",role="main",tool="x_search"}"#,
            1.0,
        ),
        (
            r#"fleetgate_llm_refusals_total{action="refused",code="llm_provider_tool_not_allowed",role="main"}"#,
            1.0,
        ),
    ] {
        assert_eq!(series(&text, want), value, "{version}: {want}\n{text}");
    }
    drop(gate);

    // Observed (the default): relayed as Hermes sent it, counted and logged.
    let (stub, _secrets, gate, home) = x_search_gate("").await;
    let observed_run = hermes_x_search(&python, &gate, &home).await;
    assert_eq!(
        observed_run["success"], true,
        "{version}: observe mode relays x_search: {observed_run}"
    );
    let seen = stub.requests();
    let sent = seen
        .iter()
        .find(|r| r.path == "/v1/responses")
        .unwrap_or_else(|| panic!("{version}: x_search must reach the provider: {seen:?}"));
    assert_eq!(
        sent.body["tools"],
        json!([{"type": "x_search"}]),
        "{version}: the request as Hermes built it"
    );
    assert_eq!(
        sent.authorization.as_deref(),
        Some(format!("Bearer {GATE_KEY}").as_str()),
        "{version}: the gate's key, not Hermes' placeholder"
    );
    let text = metrics(&gate).await;
    let want =
        r#"fleetgate_llm_provider_tools_total{action="observed",role="main",tool="x_search"}"#;
    assert_eq!(series(&text, want), 1.0, "{version}: {want}\n{text}");
    let line = gate
        .wait_for_json_log(
            |l| l["event"] == "llm.provider_tool" && l["tool"] == "x_search",
            Duration::from_secs(5),
        )
        .await
        .unwrap_or_else(|e| panic!("{version}: the observed tool must be logged: {e}"));
    assert_eq!(line["action"], "observed", "{line}");
}

/// `<cli> -z <prompt>` on xAI responses (`model.provider: xai`, `XAI_BASE_URL` at the gate's main
/// role, a placeholder `XAI_API_KEY`) with `web.search_backend: xai`: Hermes declares xAI's
/// native `{"type": "web_search"}` in place of its own web_search function.
async fn xai_turn(version: Hermes, python: &Path, gate: &GateProcess, secrets: &Secrets) -> Output {
    let home = secrets.path("hermes-home");
    std::fs::create_dir_all(&home).expect("hermes home");
    std::fs::write(
        home.join("config.yaml"),
        "model:\n  default: grok-4\n  provider: xai\nweb:\n  search_backend: xai\n",
    )
    .expect("config");
    let run = tokio::process::Command::new(version.cli(python))
        .args(["-z", "What is new on the web about fleetgate?"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", secrets.dir.path())
        .env("HERMES_HOME", &home)
        .env("XAI_API_KEY", "agent-placeholder-key")
        .env(
            "XAI_BASE_URL",
            format!("http://{}/llm/main/v1", gate.api_addr()),
        )
        .envs(venv::HERMES_ENV)
        .current_dir(secrets.dir.path())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(TURN_TIMEOUT, run)
        .await
        .expect("the Hermes turn must finish in time")
        .expect("hermes must run")
}

hermes_matrix!(a_hermes_turn_with_xai_native_web_search_is_refused_or_observed);

async fn a_hermes_turn_with_xai_native_web_search_is_refused_or_observed(version: Hermes) {
    let Some(python) = version.python() else {
        return;
    };
    let with_search = |r: &fleetgate_e2e::llm_stub::SeenRequest| {
        r.path.ends_with("/responses")
            && r.body["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["type"] == "web_search"))
    };
    // Refused: the turn ends with the gate's refusal naming the tool.
    let (stub, secrets, gate, _) = x_search_gate("  providerTools:\n    main: refuse\n").await;
    let out = xai_turn(version, &python, &gate, &secrets).await;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("provider-side tool 'web_search' is not allowed for role 'main'"),
        "{version} must show the refusal naming the tool: {said}"
    );
    assert!(
        !stub.requests().iter().any(with_search),
        "{version}: the turn with the native search never reaches the provider"
    );
    let text = metrics(&gate).await;
    let refused =
        r#"fleetgate_llm_provider_tools_total{action="refused",role="main",tool="web_search"}"#;
    assert!(
        series(&text, refused) >= 1.0,
        "{version}: {refused}\n{text}"
    );
    drop(gate);

    // Observed: relayed as Hermes built it, counted.
    let (stub, secrets, gate, _) = x_search_gate("").await;
    xai_turn(version, &python, &gate, &secrets).await;
    let seen = stub.requests();
    let sent = seen
        .iter()
        .find(|r| with_search(r))
        .unwrap_or_else(|| panic!("{version}: the turn must reach the provider: {seen:?}"));
    let tools: Vec<&Value> = sent.body["tools"]
        .as_array()
        .map(|t| t.iter().filter(|t| t["type"] != "function").collect())
        .unwrap_or_default();
    assert_eq!(
        tools,
        [&json!({"type": "web_search"})],
        "{version}: xAI's native search, as Hermes declares it"
    );
    let text = metrics(&gate).await;
    let observed =
        r#"fleetgate_llm_provider_tools_total{action="observed",role="main",tool="web_search"}"#;
    assert!(
        series(&text, observed) >= 1.0,
        "{version}: {observed}\n{text}"
    );
}
