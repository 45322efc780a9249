//! The reports over a Hermes home written by the real Hermes modules, 0.19.0's and 0.20.1's
//! (one test per version: `<name>::hermes_0_19_0`, `<name>::hermes_0_20_1`).
//!
//! `tests/python/make_hermes_home.py` replays the runs of a spec with Hermes' own job store,
//! execution ledger and session database on a fake clock. Every expected figure is computed
//! here from the spec (the test author's arithmetic), never by the code under test; what
//! Hermes itself decides (effective config, pinned keys, silence) comes back from the script.
// Helpers outside #[test] functions panic on broken fixtures, exactly like the tests do.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod report_common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use fleetgate_report::{
    Flag, ManagedDir, ReportOptions, cron_cost, fleet_report, silence::is_silence, status,
};
use serde_json::{Value, json};

const NOW: f64 = 1_790_510_400.0; // 2026-09-27T12:00:00Z
const DAY: f64 = 86_400.0;
const SINCE: f64 = NOW - 7.0 * DAY;

/// Tokens and dollars of one session or auxiliary row.
#[derive(Clone, Debug, Default)]
struct Usage {
    estimated: f64,
    actual: Option<f64>,
    input: u64,
    output: u64,
    cache_read: u64,
}

impl Usage {
    fn cost(&self) -> f64 {
        self.actual.unwrap_or(self.estimated)
    }
    fn tokens(&self) -> u64 {
        self.input + self.output + self.cache_read
    }
    fn json(&self) -> Value {
        json!({"estimated": self.estimated, "actual": self.actual, "input": self.input,
               "output": self.output, "cache_read": self.cache_read})
    }
}

#[derive(Clone, Debug)]
struct Agent {
    reply: String,
    /// The author's reading of the reply: silence or not.
    silent: bool,
    tool_call_last: bool,
    usage: Usage,
    children: Vec<(Usage, Vec<(String, Usage)>)>,
    aux: Vec<(String, Usage)>,
}

#[derive(Clone, Debug)]
struct Run {
    at: f64,
    status: &'static str,
    error: Option<String>,
    agent: Option<Agent>,
}

#[derive(Clone, Debug)]
struct Job {
    key: &'static str,
    created_at: f64,
    create: Value,
    update: Value,
    pause: bool,
    runs: Vec<Run>,
}

fn usage(estimated: f64, actual: Option<f64>, input: u64, output: u64) -> Usage {
    Usage {
        estimated,
        actual,
        input,
        output,
        cache_read: input / 10,
    }
}

fn agent(reply: &str, silent: bool) -> Agent {
    Agent {
        reply: reply.to_string(),
        silent,
        tool_call_last: false,
        usage: usage(0.004, None, 1200, 80),
        children: Vec::new(),
        aux: Vec::new(),
    }
}

fn run(at: f64, status: &'static str, agent: Option<Agent>) -> Run {
    Run {
        at,
        status,
        error: (status == "failed").then(|| "RuntimeError: provider down".into()),
        agent,
    }
}

fn job(key: &'static str, age_days: f64, create: Value, runs: Vec<Run>) -> Job {
    Job {
        key,
        created_at: NOW - age_days * DAY,
        create,
        update: json!({}),
        pause: false,
        runs,
    }
}

/// Replies of the frequent ungated job: (reply, silent per the cron rule).
const INBOX_REPLIES: [(&str, bool); 26] = [
    ("[SILENT]", true),
    ("  no_reply ", true),
    ("Nothing new.\n\n[SILENT]", true),
    ("[silent] checked 4 feeds", true),
    ("SILENT", true),
    ("NO REPLY", true),
    ("[SILENT]\nall quiet", true),
    ("no   reply", true),
    ("[SILENT]", true),
    ("New mail from the bank: card expires soon", false),
    ("[SILENT]", true),
    ("SILENT", true),
    ("I considered staying [SILENT] but the CI is red", false),
    ("NO_REPLY", true),
    ("[SILENT]", true),
    ("\n\n[SILENT]\n", true),
    ("[SILENT]", true),
    ("Silent", true),
    ("Silent retry succeeded on the backup job", false),
    ("[SILENT]", true),
    ("NO_REPLY", true),
    ("[SILENT]", true),
    ("[SILENT]", true),
    ("3 new issues assigned to you", false),
    ("[SILENT]", true),
    ("nO_rEpLy", true),
];

fn spec_jobs() -> Vec<Job> {
    let inbox_created = NOW - DAY;
    let inbox_runs = INBOX_REPLIES
        .iter()
        .enumerate()
        .map(|(i, (reply, silent))| {
            let at = inbox_created + 600.0 + i as f64 * 3000.0;
            run(at, "completed", Some(agent(reply, *silent)))
        })
        .collect();
    let gated_runs = (0..14)
        .map(|i| {
            let at = SINCE + 3600.0 + f64::from(i) * 40_000.0;
            let reply = match i {
                2 => Some(("[SILENT]", true)),
                5 => Some(("2 invoices are due tomorrow", false)),
                8 => Some(("[SILENT] nothing new", true)),
                11 => Some(("Payment reminder sent", false)),
                _ => None,
            };
            run(at, "completed", reply.map(|(r, s)| agent(r, s)))
        })
        .collect();
    vec![
        Job {
            pause: true,
            ..job(
                "paused",
                40.0,
                json!({"prompt": "weekly digest", "schedule": "every 1d", "name": "digest"}),
                vec![
                    run(SINCE - 5.0 * DAY, "completed", Some(agent("digest", false))),
                    run(SINCE - 4.0 * DAY, "completed", Some(agent("digest", false))),
                ],
            )
        },
        job(
            "delegator",
            30.0,
            json!({"prompt": "research", "schedule": "every 1d", "name": "research brief"}),
            delegator_runs(),
        ),
        Job {
            update: json!({"failure_streak": 2}),
            ..job(
                "failing",
                20.0,
                json!({"prompt": "sync", "schedule": "every 6h", "name": "sync"}),
                failing_runs(),
            )
        },
        job(
            "gated",
            10.0,
            json!({"prompt": "summarise", "schedule": "every 3h", "name": "inbox gate",
            "script": "check_inbox.py"}),
            gated_runs,
        ),
        job(
            "watchdog",
            8.0,
            json!({"prompt": "", "schedule": "every 1h", "name": "disk watchdog",
            "script": "disk.sh", "no_agent": true}),
            watchdog_runs(),
        ),
        Job {
            update: json!({"monitor_url": "https://status.example.org/feed", "reasoning_effort": "xhigh"}),
            ..job(
                "monitor",
                3.0,
                json!({"prompt": "what changed?", "schedule": "every 2h", "name": "status page",
                "model": "other-model", "provider": "openrouter"}),
                vec![
                    run(NOW - 2.5 * DAY, "completed", None),
                    run(NOW - 2.0 * DAY, "completed", None),
                    run(
                        NOW - 1.0 * DAY,
                        "completed",
                        Some(agent("Status page changed: API degraded", false)),
                    ),
                ],
            )
        },
        job(
            "inbox",
            1.0,
            json!({"prompt": "check my inbox", "schedule": "every 50m", "name": "inbox check"}),
            inbox_runs,
        ),
    ]
}

fn delegator_runs() -> Vec<Run> {
    let mut runs = vec![run(
        SINCE - 3600.0,
        "completed",
        Some(agent("old report", false)),
    )];
    for k in 1..=5u32 {
        let kf = f64::from(k);
        let mut a = agent(&format!("research brief #{k}"), false);
        a.usage = usage(
            0.01 * kf,
            (k % 2 == 0).then_some(0.015 * kf),
            2000 * u64::from(k),
            300,
        );
        a.children = vec![(
            usage(0.005, None, 500, 50),
            vec![("compression".into(), usage(0.0011, None, 90, 10))],
        )];
        a.aux = vec![("title_generation".into(), usage(0.0007, None, 40, 8))];
        a.tool_call_last = k == 3;
        runs.push(run(SINCE + kf * 100_000.0, "completed", Some(a)));
    }
    runs.push(run(
        NOW - 300.0,
        "running",
        Some(agent("still thinking", false)),
    ));
    runs
}

fn failing_runs() -> Vec<Run> {
    let mut not_started = run(SINCE + 250_000.0, "failed", None);
    not_started.error = Some("Fire claim lost; execution was not started.".into());
    vec![
        run(
            SINCE + 50_000.0,
            "completed",
            Some(agent("synced 3 folders", false)),
        ),
        run(SINCE + 150_000.0, "failed", Some(agent("", false))),
        not_started,
        run(SINCE + 350_000.0, "failed", Some(agent("", false))),
    ]
}

fn watchdog_runs() -> Vec<Run> {
    let mut runs: Vec<Run> = (0..6)
        .map(|i| {
            run(
                SINCE + 20_000.0 + f64::from(i) * 60_000.0,
                "completed",
                None,
            )
        })
        .collect();
    runs.insert(2, run(SINCE + 70_000.0, "failed", None));
    runs
}

fn spec_json(jobs: &[Job], probe: &[&str]) -> Value {
    let jobs: Vec<Value> = jobs
        .iter()
        .map(|j| {
            let runs: Vec<Value> = j.runs.iter().map(run_json).collect();
            json!({"key": j.key, "created_at": j.created_at, "create": j.create, "update": j.update,
                   "pause": j.pause, "runs": runs})
        })
        .collect();
    json!({
        "timezone": "Europe/Berlin",
        "config": {"model": {"default": "grok-4.6", "provider": "xai"},
                   "agent": {"reasoning_effort": "high"},
                   "delegation": {"model": "grok-4.5-mini"},
                   "cron": {"model_drift_guard": "no", "preflight": true, "script_timeout_seconds": "90.7"},
                   "plugins": {"entries": {"fleet-policy": {"settings": {"allowed_cron_models": ["grok-4.6"]}}}}},
        "managed": {"agent": {"service_tier": "priority"}, "model": {"provider": "openrouter"},
                    "compression": {"threshold_tokens": 120000}, "cron": {"preflight": false}},
        "observed": observed_json(),
        "silence_probe": probe,
        "jobs": jobs,
    })
}

fn run_json(r: &Run) -> Value {
    let agent = r.agent.as_ref().map(|a| {
        let mut value = a.usage.json();
        let children: Vec<Value> = a
            .children
            .iter()
            .map(|(u, aux)| {
                let mut child = u.json();
                child["aux"] = aux.iter().map(|(t, u)| aux_json(t, u)).collect();
                child
            })
            .collect();
        value["reply"] = json!(a.reply);
        value["tool_call_last"] = json!(a.tool_call_last);
        value["children"] = Value::Array(children);
        value["aux"] = a.aux.iter().map(|(t, u)| aux_json(t, u)).collect();
        value
    });
    json!({"claimed_at": r.at, "duration": 45, "status": r.status, "error": r.error, "agent": agent})
}

fn aux_json(task: &str, u: &Usage) -> Value {
    let mut value = u.json();
    value["task"] = json!(task);
    value
}

fn observed_json() -> Value {
    json!({
        "main": {"model": "grok-4.6", "reasoning_effort": "high", "service_tier": "priority",
                 "response_service_tier": "priority", "ts": "2026-10-04T14:41:05Z"},
        "auxiliary:title_generation": {"model": "grok-4.6", "reasoning_effort": "none",
                 "service_tier": null, "response_service_tier": null, "ts": "2026-10-04T14:41:05Z"}
    })
}

/// What the author expects of one job, from the spec alone.
#[derive(Debug, PartialEq)]
struct Expected {
    span_days: f64,
    runs: u64,
    runs_failed: u64,
    agent_turns: u64,
    empty_runs: Option<u64>,
    tokens: u64,
    cost_usd: f64,
    flags: Vec<Flag>,
}

fn round(x: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    (x * scale).round() / scale
}

fn expected(job: &Job) -> Expected {
    let start = SINCE.max(job.created_at);
    let counted: Vec<&Run> = job
        .runs
        .iter()
        .filter(|r| r.status != "running" && r.at >= start && r.at <= NOW)
        .filter(|r| {
            !r.error
                .as_deref()
                .is_some_and(|e| e.starts_with("Fire claim lost"))
        })
        .collect();
    let no_agent = job.create["no_agent"] == json!(true);
    let empty = counted
        .iter()
        .filter(|r| r.status == "completed" && r.agent.as_ref().is_none_or(|a| a.silent))
        .count() as u64;
    let agents = || counted.iter().filter_map(|r| r.agent.as_ref());
    let lineage = |a: &Agent| {
        let mut parts = vec![a.usage.clone()];
        parts.extend(a.aux.iter().map(|(_, u)| u.clone()));
        for (child, aux) in &a.children {
            parts.push(child.clone());
            parts.extend(aux.iter().map(|(_, u)| u.clone()));
        }
        parts
    };
    let runs = counted.len() as u64;
    let span_days = (NOW - start) / DAY;
    let gated = job.create.get("script").is_some() || job.update.get("monitor_url").is_some();
    let mut flags = Vec::new();
    if !gated && runs as f64 / span_days > 24.0 {
        flags.push(Flag::FrequentWithoutGate);
    }
    if !no_agent && runs >= 5 && empty as f64 / runs as f64 > 0.8 {
        flags.push(Flag::MostlyEmpty);
    }
    Expected {
        span_days: round(span_days, 3),
        runs,
        runs_failed: counted.iter().filter(|r| r.status == "failed").count() as u64,
        agent_turns: agents().count() as u64,
        empty_runs: (!no_agent).then_some(empty),
        tokens: agents().flat_map(lineage).map(|u| u.tokens()).sum(),
        cost_usd: round(agents().flat_map(lineage).map(|u| u.cost()).sum(), 4),
        flags,
    }
}

/// Strings classified by Hermes' own cron silence function and by the report's.
const SILENCE_PROBE: [&str; 22] = [
    "[SILENT]",
    "SILENT",
    "NO_REPLY",
    "NO REPLY",
    "no   reply",
    "  [silent]\n",
    "NO-REPLY",
    "[SILENT",
    "",
    "  \n ",
    "2 deals filtered\n\n[SILENT]",
    "[SILENT]\nmore",
    "a\nSILENT\nb",
    "[SILENT] No changes",
    "SILENT retry succeeded",
    "mid [SILENT] sentence",
    ".NO_REPLY",
    "x\r\n\r\nNO REPLY\r\n",
    "x\u{2028}SILENT",
    "\u{a0}SILENT\u{a0}",
    "*NO_REPLY*",
    "Silent.",
];

fn make_home(python: &Path, dir: &Path, jobs: &[Job]) -> Value {
    let spec_path = dir.join("spec.json");
    let spec = spec_json(jobs, &SILENCE_PROBE);
    std::fs::write(
        &spec_path,
        serde_json::to_vec(&spec).expect("the spec must encode"),
    )
    .expect("the spec must be written");
    let script = report_common::repo_root().join("tests/python/make_hermes_home.py");
    let output = Command::new(python)
        .arg(&script)
        .arg(dir.join("home"))
        .arg(&spec_path)
        .env_remove("HERMES_HOME")
        .env_remove("PYTEST_CURRENT_TEST")
        // The venv sealed as Hermes' image seals it: no package installed from PyPI on the way.
        .env("HERMES_DISABLE_LAZY_INSTALLS", "1")
        .output()
        .expect("the fixture writer must start");
    assert!(
        output.status.success(),
        "the fixture writer must succeed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("the fixture writer must print JSON")
}

fn options(dir: &Path) -> ReportOptions {
    let mut opts = ReportOptions::new(dir.join("home"));
    opts.now = Some(NOW);
    opts.managed_dir = ManagedDir::At(dir.join("home-managed"));
    opts
}

/// One test per pinned Hermes from `fn name(version: &str)`.
macro_rules! per_hermes {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[test]
            fn hermes_0_19_0() {
                super::$name("0.19.0")
            }
            #[test]
            fn hermes_0_20_1() {
                super::$name("0.20.1")
            }
        }
    )+};
}

per_hermes!(
    reports_over_a_home_written_by_hermes_match_the_spec,
    silence_matching_agrees_with_hermes_for_every_probe,
);

/// Keys of `effective` a release has no setting for, so its oracle leaves them out.
fn unknown_to(version: &str) -> &'static [&'static str] {
    match version {
        "0.19.0" => &["cron.model_drift_guard", "cron.preflight"],
        _ => &[],
    }
}

fn reports_over_a_home_written_by_hermes_match_the_spec(version: &str) {
    let Some(python) = report_common::hermes_python(version) else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let jobs = spec_jobs();
    let hermes = make_home(&python, dir.path(), &jobs);
    let opts = options(dir.path());
    let before = report_common::snapshot(&dir.path().join("home"));
    let report = cron_cost(&opts);
    assert!(
        report.errors.is_empty(),
        "every store must read: {:?}",
        report.errors
    );
    assert!(
        report.cost.sources.executions && report.cost.sources.state_db,
        "both stores read"
    );
    assert_eq!(
        report.cost.sources.executions_coverage_from, None,
        "the ledger is not pruned"
    );
    let mut total = 0.0;
    for job in &jobs {
        let id = hermes["ids"][job.key]
            .as_str()
            .expect("Hermes must report the job id");
        let got = report
            .cost
            .jobs
            .iter()
            .find(|j| j.id == id)
            .expect("every job must be listed");
        let want = expected(job);
        let got_view = Expected {
            span_days: got.span_days,
            runs: got.runs,
            runs_failed: got.runs_failed,
            agent_turns: got.agent_turns,
            empty_runs: got.empty_runs,
            tokens: got.tokens,
            cost_usd: got.cost_usd,
            flags: got.flags.clone(),
        };
        assert_eq!(got_view, want, "job {} must match the spec", job.key);
        let per_day = want.cost_usd / want.span_days;
        assert!(
            (got.cost_per_day_usd - per_day).abs() < 1e-3,
            "{}: cost per day",
            job.key
        );
        total += got.cost_per_day_usd;
    }
    assert_eq!(
        report.cost.jobs.len(),
        jobs.len(),
        "no job may appear twice or from nowhere"
    );
    assert!(
        (report.cost.total_cost_per_day_usd - total).abs() < 1e-3,
        "the total sums the jobs"
    );
    let flagged: Vec<&str> = jobs
        .iter()
        .filter(|j| !expected(j).flags.is_empty())
        .map(|j| hermes["ids"][j.key].as_str().expect("id"))
        .collect();
    let mut got_flagged: Vec<&str> = report.cost.flagged.iter().map(String::as_str).collect();
    got_flagged.sort_unstable_by_key(|id| flagged.iter().position(|f| f == id));
    assert_eq!(
        got_flagged, flagged,
        "flagged must list exactly the flagged jobs"
    );
    assert_eq!(
        (report.cost.since.as_str(), report.cost.until.as_str()),
        ("2026-09-20T12:00:00Z", "2026-09-27T12:00:00Z"),
        "the window is the last seven days"
    );
    report_common::assert_unchanged(&before, &report_common::snapshot(&dir.path().join("home")));
    check_status_and_audit(&opts, &jobs, &hermes, version);
}

fn check_status_and_audit(opts: &ReportOptions, jobs: &[Job], hermes: &Value, version: &str) {
    let report = status(opts);
    assert!(
        report.errors.is_empty(),
        "the status must read everything: {:?}",
        report.errors
    );
    let mut effective = serde_json::to_value(&report.effective).expect("effective must encode");
    let shown = effective.as_object_mut().expect("effective is an object");
    for key in unknown_to(version) {
        assert!(
            shown.remove(*key).is_some() && hermes["effective"].get(*key).is_none(),
            "Hermes {version} has no {key}; the report shows how 0.20.1 reads it"
        );
    }
    assert_eq!(
        effective, hermes["effective"],
        "effective must equal what Hermes {version} reads"
    );
    assert_eq!(
        (
            &effective["cron.script_timeout_seconds"],
            effective.get("cron.model_drift_guard"),
            effective.get("cron.preflight")
        ),
        (
            &json!(90),
            (version != "0.19.0").then_some(&json!(true)),
            (version != "0.19.0").then_some(&json!(false))
        ),
        "the cron settings the spec writes, as Hermes {version} reads them"
    );
    assert_eq!(
        report.managed.keys as u64, hermes["managed_keys"],
        "pinned keys as Hermes counts"
    );
    assert!(
        report.managed.error.is_none() && report.managed.sha256.is_some(),
        "managed applies"
    );
    let observed = serde_json::to_value(&report.observed).expect("observed must encode");
    assert_eq!(
        observed,
        observed_json(),
        "observed roles must come back unchanged"
    );
    let id = |key: &str| hermes["ids"][key].as_str().expect("id").to_string();
    let mut by_creation: Vec<&Job> = jobs.iter().collect();
    by_creation.sort_by(|a, b| a.created_at.total_cmp(&b.created_at));
    let want_ids: Vec<String> = by_creation.iter().map(|j| id(j.key)).collect();
    let got_ids: Vec<String> = report.crons.iter().map(|c| c.id.clone()).collect();
    assert_eq!(
        got_ids, want_ids,
        "crons must list every job in store order"
    );
    let cron = |key: &str| {
        report
            .crons
            .iter()
            .find(|c| c.id == id(key))
            .expect("listed")
    };
    assert!(
        !cron("paused").enabled && cron("inbox").enabled,
        "a paused job is not enabled"
    );
    let monitor = cron("monitor");
    assert_eq!(
        (
            monitor.provider.as_deref(),
            monitor.model.as_deref(),
            monitor.reasoning_effort.as_deref()
        ),
        (Some("openrouter"), Some("other-model"), Some("xhigh")),
        "per-job pins are shown"
    );
    let failing = cron("failing");
    assert_eq!(
        (failing.last_status.as_deref(), failing.failure_streak),
        (Some("error"), 2),
        "failing"
    );
    let audit = cron_cost(opts).audit;
    assert_eq!(
        audit.pinned_model,
        [id("monitor")],
        "only the monitor job pins a model"
    );
    assert_eq!(
        audit.pinned_effort,
        [id("monitor")],
        "only the monitor job pins an effort"
    );
    assert_eq!(
        audit.failing,
        [id("failing")],
        "only the failing job failed last"
    );
    assert_eq!(
        audit.outside_allowed_models,
        [id("monitor")],
        "other-model is not allowed"
    );
}

fn silence_matching_agrees_with_hermes_for_every_probe(version: &str) {
    let Some(python) = report_common::hermes_python(version) else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let hermes = make_home(&python, dir.path(), &[]);
    let verdicts = hermes["silence"]
        .as_array()
        .expect("Hermes must classify the probe");
    let mut disagreements = BTreeMap::new();
    for (text, verdict) in SILENCE_PROBE.iter().zip(verdicts) {
        if Some(is_silence(text)) != verdict.as_bool() {
            disagreements.insert(*text, verdict.clone());
        }
    }
    assert_eq!(
        verdicts.len(),
        SILENCE_PROBE.len(),
        "every probe must be classified"
    );
    assert!(
        disagreements.is_empty(),
        "Hermes disagrees on {disagreements:?}"
    );
    let report = fleet_report(&options(dir.path()));
    assert!(
        report.crons.cost.jobs.is_empty(),
        "a home without jobs reports no job"
    );
}
