//! The JSON contract: the reports carry the seed's keys in the seed's order, and the CLI
//! prints the same report as JSON or as tables.
// Helpers outside #[test] functions panic on broken fixtures, exactly like the tests do.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::Path;

use clap::Parser;
use fleetgate_report::cli::{ReportArgs, run};
use fleetgate_report::{ManagedDir, ReportOptions, cron_cost, fleet_report, render_table, status};
use serde_json::{Value, json};

const NOW: f64 = 1_791_115_200.0; // 2026-10-04T12:00:00Z

/// `status --json` as the seed shows it (elisions filled in), with the three cron settings of
/// Hermes 0.20.1 added after the seed's eight effective keys.
const SEED_STATUS: &str = r#"{
  "plugin": "fleet-policy",
  "version": "0.2.0",
  "managed": {"dir": "/etc/hermes", "keys": 3, "sha256": "3f14", "error": null},
  "effective": {
    "model.default": "grok-4.6", "model.provider": "xai",
    "agent.reasoning_effort": "high", "agent.service_tier": "priority",
    "delegation.reasoning_effort": "", "delegation.model": "",
    "compression.threshold_tokens": 120000, "x_search.model": "grok-4.5",
    "cron.model_drift_guard": true, "cron.preflight": true, "cron.script_timeout_seconds": 3600
  },
  "observed": {
    "main": {"model": "grok-4.6", "reasoning_effort": "high", "service_tier": "priority",
             "response_service_tier": "priority", "ts": "2026-10-04T14:41:05Z"},
    "auxiliary:title_generation": {"model": "grok-4.6", "reasoning_effort": "none",
             "service_tier": null, "response_service_tier": null, "ts": "2026-10-04T14:41:05Z"}
  },
  "crons": [
    {"id": "job-pinned", "name": "pinned report", "enabled": true, "provider": "openrouter",
     "model": "other-model", "reasoning_effort": "xhigh", "last_status": "error", "failure_streak": 3}
  ]
}"#;

/// The `cost` object of `crons --cost --json` as the seed shows it.
const SEED_COST: &str = r#"{
  "window_days": 7, "since": "2026-09-27T12:00:00Z", "until": "2026-10-04T12:00:00Z",
  "sources": {"executions": true, "state_db": true, "executions_coverage_from": null},
  "definition": "run = terminal execution in the window; empty run = ...",
  "jobs": [
    {"id": "a1b2c3", "name": "inbox check", "enabled": true, "schedule": "every 15m",
     "gate": null, "span_days": 7.0, "runs": 672, "runs_failed": 3, "agent_turns": 669,
     "empty_runs": 641, "empty_share": 0.954, "runs_per_day": 96.0, "tokens": 41000000,
     "cost_usd": 112.4, "cost_per_day_usd": 16.06, "cost_per_run_usd": 0.167,
     "flags": ["frequent_without_gate", "mostly_empty"]}
  ],
  "total_cost_per_day_usd": 16.06,
  "flagged": ["a1b2c3"]
}"#;

/// Every object's keys in order, by path (arrays contribute their first element).
fn skeleton(value: &Value, path: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            let keys: Vec<&str> = map.keys().map(String::as_str).collect();
            out.push(format!("{path}: {}", keys.join(",")));
            for (key, inner) in map {
                skeleton(inner, &format!("{path}.{key}"), out);
            }
        }
        Value::Array(items) => {
            if let Some(first) = items.first() {
                skeleton(first, &format!("{path}[]"), out);
            }
        }
        _ => {}
    }
}

fn skeleton_of(value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    skeleton(value, "$", &mut out);
    out
}

fn seed_like_home(home: &Path, managed: &Path) {
    std::fs::write(
        managed.join("config.yaml"),
        "agent:\n  service_tier: priority\n  reasoning_effort: high\ncompression:\n  threshold_tokens: 120000\n",
    )
    .expect("the managed config must be written");
    std::fs::write(
        home.join("config.yaml"),
        "model:\n  default: grok-4.6\n  provider: xai\n",
    )
    .expect("the user config must be written");
    std::fs::create_dir_all(home.join("fleet-policy")).expect("the observer dir must be created");
    let seed: Value = serde_json::from_str(SEED_STATUS).expect("the seed must parse");
    std::fs::write(
        home.join("fleet-policy/observed.json"),
        seed["observed"].to_string(),
    )
    .expect("observed.json must be written");
    std::fs::create_dir_all(home.join("cron")).expect("the cron dir must be created");
    let jobs = json!({"jobs": [
        {"id": "job-pinned", "name": "pinned report", "enabled": true, "provider": "openrouter",
         "model": "other-model", "reasoning_effort": "xhigh", "last_status": "error",
         "failure_streak": 3, "schedule_display": "every 1h"},
        {"id": "a1b2c3", "name": "inbox check", "schedule_display": "every 15m"}
    ]});
    std::fs::write(home.join("cron/jobs.json"), jobs.to_string()).expect("jobs must be written");
}

fn options(home: &Path, managed: &Path) -> ReportOptions {
    let mut opts = ReportOptions::new(home);
    opts.now = Some(NOW);
    opts.managed_dir = ManagedDir::At(managed.to_path_buf());
    opts
}

#[test]
fn the_status_report_has_the_seed_keys_in_the_seed_order_and_values() {
    let (home, managed) = (
        tempfile::tempdir().expect("home"),
        tempfile::tempdir().expect("dir"),
    );
    seed_like_home(home.path(), managed.path());
    let ours = serde_json::to_value(status(&options(home.path(), managed.path()))).expect("encode");
    let seed: Value = serde_json::from_str(SEED_STATUS).expect("the seed must parse");
    assert_eq!(
        skeleton_of(&ours),
        skeleton_of(&seed),
        "keys and their order must match the seed"
    );
    for key in ["plugin", "version", "effective", "observed"] {
        assert_eq!(
            ours[key], seed[key],
            "{key} must carry the seed's values for the seed's home"
        );
    }
    assert_eq!(
        ours["crons"][0], seed["crons"][0],
        "the pinned job must read as in the seed"
    );
    assert_eq!(ours["managed"]["keys"], 3, "three keys are pinned");
}

#[test]
fn the_cron_cost_report_has_the_seed_keys_in_the_seed_order() {
    let (home, managed) = (
        tempfile::tempdir().expect("home"),
        tempfile::tempdir().expect("dir"),
    );
    seed_like_home(home.path(), managed.path());
    let ours =
        serde_json::to_value(cron_cost(&options(home.path(), managed.path()))).expect("encode");
    let top: Vec<&str> = ours
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        top,
        ["plugin", "version", "crons", "audit", "cost"],
        "the four keys then cost"
    );
    let mut cost = ours["cost"].clone();
    // Jobs without runs carry nulls where the seed has numbers; the keys are what matters.
    cost["jobs"] = json!([cost["jobs"][1].clone()]);
    let seed: Value = serde_json::from_str(SEED_COST).expect("the seed must parse");
    assert_eq!(
        skeleton_of(&cost),
        skeleton_of(&seed),
        "cost keys and order must match the seed"
    );
    assert_eq!(
        (cost["since"].as_str(), cost["until"].as_str()),
        (Some("2026-09-27T12:00:00Z"), Some("2026-10-04T12:00:00Z")),
        "the window of the seed's example"
    );
    assert_eq!(
        ours["cost"]["jobs"][1]["empty_runs"],
        Value::Null,
        "no state.db, unknown empties"
    );
}

#[test]
fn the_cli_prints_json_or_tables_for_the_same_report() {
    let (home, managed) = (
        tempfile::tempdir().expect("home"),
        tempfile::tempdir().expect("dir"),
    );
    seed_like_home(home.path(), managed.path());
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        report: ReportArgs,
    }
    let home_arg = home.path().to_string_lossy().into_owned();
    let managed_arg = managed.path().to_string_lossy().into_owned();
    let args = [
        "report",
        "--hermes-home",
        &home_arg,
        "--managed-dir",
        &managed_arg,
        "--days",
        "3",
        "--json",
    ];
    let cli = Cli::try_parse_from(args).expect("the arguments must parse");
    assert_eq!(cli.report.days, 3, "--days must be read");
    let printed: Value = serde_json::from_str(&run(&cli.report).expect("the report must run"))
        .expect("--json must print JSON");
    assert_eq!(
        printed["crons"]["cost"]["window_days"], 3,
        "the window follows --days"
    );
    assert_eq!(
        printed["status"]["managed"]["keys"], 3,
        "the managed dir follows --managed-dir"
    );
    let table = render_table(&fleet_report(&options(home.path(), managed.path())));
    for needle in [
        "Managed scope:",
        "model.default",
        "grok-4.6",
        "auxiliary:title_generation",
        "inbox check",
        "Total: $",
    ] {
        assert!(
            table.contains(needle),
            "the table must show {needle:?}:\n{table}"
        );
    }
    assert!(
        Cli::try_parse_from(["report", "--days", "0", "--hermes-home", "/x"]).is_err(),
        "days > 0"
    );
    let missing = ReportArgs {
        hermes_home: home.path().join("nope"),
        days: 7,
        json: false,
        managed_dir: None,
    };
    assert!(
        run(&missing).is_err(),
        "a missing home is an error, not an empty report"
    );
}
