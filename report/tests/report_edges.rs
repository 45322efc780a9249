//! The reports over hand-made Hermes homes: pruned ledger, older and newer schemas, corrupt
//! files, databases locked by a writer, and every failure mode of the managed config.
// Helpers outside #[test] functions panic on broken fixtures, exactly like the tests do.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod report_common;

use std::path::Path;
use std::time::Duration;

use fleetgate_report::{ManagedDir, ReportOptions, cron_cost, status, time::format_iso_z};
use rusqlite::{Connection, params};
use serde_json::{Value, json};

const NOW: f64 = 1_790_510_400.0; // 2026-09-27T12:00:00Z
const DAY: f64 = 86_400.0;
const SINCE: f64 = NOW - 7.0 * DAY;

/// The ledger as the newest Hermes creates it (handoff columns before `claimed_at`).
const LEDGER_NEW: &str = "CREATE TABLE executions (id TEXT PRIMARY KEY, job_id TEXT NOT NULL,
  source TEXT NOT NULL, process_id TEXT NOT NULL, pid INTEGER NOT NULL, process_started_at INTEGER,
  status TEXT NOT NULL, handoff_pending INTEGER NOT NULL DEFAULT 0, handoff_started_at REAL,
  claimed_at TEXT NOT NULL, started_at TEXT, finished_at TEXT, error TEXT,
  delivery_outcome TEXT, scheduled_instant TEXT)";
/// An older ledger: no `finished_at`, no `error`.
const LEDGER_OLD: &str = "CREATE TABLE executions (id TEXT PRIMARY KEY, job_id TEXT NOT NULL,
  source TEXT NOT NULL, process_id TEXT NOT NULL, pid INTEGER NOT NULL, status TEXT NOT NULL,
  claimed_at TEXT NOT NULL, started_at TEXT)";
/// A version-2 era state.db: no cost, cache, usage or `active` columns.
const STATE_OLD: &str = "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL,
  parent_session_id TEXT, started_at REAL NOT NULL, end_reason TEXT, input_tokens INTEGER DEFAULT 0,
  output_tokens INTEGER DEFAULT 0);
  CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
  role TEXT NOT NULL, content TEXT, tool_calls TEXT, timestamp REAL NOT NULL)";

fn iso(unix: f64) -> String {
    // Hermes writes its own timezone; +02:00 exercises the offset parsing.
    let shifted = format_iso_z(unix + 2.0 * 3600.0);
    format!("{}.000000+02:00", shifted.trim_end_matches('Z'))
}

fn home() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temp home must be created");
    std::fs::create_dir(dir.path().join("cron")).expect("the cron dir must be created");
    dir
}

fn options(home: &Path) -> ReportOptions {
    let mut opts = ReportOptions::new(home);
    opts.now = Some(NOW);
    opts.managed_dir = ManagedDir::Off;
    opts.busy_timeout = Duration::from_millis(300);
    opts
}

fn write_jobs(home: &Path, jobs: Value) {
    let text = serde_json::to_string_pretty(&json!({"jobs": jobs})).expect("jobs must encode");
    std::fs::write(home.join("cron/jobs.json"), text).expect("jobs.json must be written");
}

fn ledger(home: &Path, ddl: &str, rows: &[(&str, &str, f64)]) -> Connection {
    let conn = Connection::open(home.join("cron/executions.db")).expect("the ledger must open");
    conn.execute_batch(ddl)
        .expect("the ledger schema must be created");
    let cols = fleetgate_report::sqlite::columns(&conn, "executions").expect("probe");
    let has_finish = cols.contains("finished_at");
    conn.execute_batch("BEGIN").expect("a batch must start");
    for (i, (job, status, at)) in rows.iter().enumerate() {
        let id = format!("e{i:06}");
        conn.execute(
            "INSERT INTO executions (id, job_id, source, process_id, pid, status, claimed_at)
             VALUES (?1, ?2, 'builtin', 'p', 1, ?3, ?4)",
            params![id, job, status, iso(*at)],
        )
        .expect("a ledger row must be inserted");
        if has_finish {
            conn.execute(
                "UPDATE executions SET finished_at = ?1 WHERE id = ?2",
                params![iso(at + 60.0), id],
            )
            .expect("finished_at must be set");
        }
    }
    conn.execute_batch("COMMIT").expect("the batch must commit");
    conn
}

fn session(conn: &Connection, id: &str, at: f64, reply: &str) {
    conn.execute(
        "INSERT INTO sessions (id, source, started_at, input_tokens, output_tokens)
         VALUES (?1, 'cron', ?2, 100, 20)",
        params![id, at],
    )
    .expect("a session must be inserted");
    conn.execute(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?1, 'assistant', ?2, ?3)",
        params![id, reply, at + 5.0],
    )
    .expect("a message must be inserted");
}

fn session_id(job: &str, at: f64) -> String {
    let stamp = format_iso_z(at).replace(['-', ':'], "").replace('T', "_");
    format!("cron_{job}_{}", stamp.trim_end_matches('Z'))
}

#[test]
fn a_pruned_ledger_shortens_the_span_to_its_coverage() {
    let home = home();
    write_jobs(
        home.path(),
        json!([{"id": "busy", "name": "busy", "script": "gate.py",
        "created_at": "2026-01-01T00:00:00+00:00"}]),
    );
    // 1000 terminal rows, the oldest 3 days into the window: Hermes pruned the older ones.
    let coverage = SINCE + 3.0 * DAY;
    let rows: Vec<(&str, &str, f64)> = (0..1000)
        .map(|i| ("busy", "completed", coverage + f64::from(i) * 300.0))
        .collect();
    drop(ledger(home.path(), LEDGER_NEW, &rows));
    let state = Connection::open(home.path().join("state.db")).expect("state.db must open");
    state.execute_batch(STATE_OLD).expect("schema");
    // A turn before the coverage (its ledger row is gone) and one owned by a kept row.
    session(
        &state,
        &session_id("busy", SINCE + DAY),
        SINCE + DAY,
        "old news",
    );
    session(
        &state,
        &session_id("busy", coverage + 10.0),
        coverage + 10.0,
        "[SILENT]",
    );
    drop(state);
    let report = cron_cost(&options(home.path()));
    let job = &report.cost.jobs[0];
    assert_eq!(
        report.cost.sources.executions_coverage_from,
        Some(format_iso_z(coverage)),
        "coverage"
    );
    assert_eq!(
        (job.span_days, job.runs, job.agent_turns),
        (4.0, 1000, 1),
        "only the covered span"
    );
    assert_eq!(job.runs_per_day, 250.0, "1000 runs over 4 covered days");
    assert_eq!(
        job.empty_runs,
        Some(1000),
        "999 gated runs and one silent turn"
    );
    assert!(
        report.errors.is_empty(),
        "nothing failed to read: {:?}",
        report.errors
    );
}

#[test]
fn older_schemas_read_with_probed_columns() {
    let home = home();
    write_jobs(
        home.path(),
        json!([{"id": "old", "name": "old", "created_at": "2026-01-01T00:00:00Z"}]),
    );
    let at = SINCE + DAY;
    drop(ledger(
        home.path(),
        LEDGER_OLD,
        &[("old", "completed", at), ("old", "failed", at + DAY)],
    ));
    let state = Connection::open(home.path().join("state.db")).expect("state.db must open");
    state.execute_batch(STATE_OLD).expect("schema");
    session(&state, &session_id("old", at + 1.0), at + 1.0, "NO_REPLY");
    drop(state);
    let report = cron_cost(&options(home.path()));
    assert!(
        report.errors.is_empty(),
        "older schemas must read: {:?}",
        report.errors
    );
    let job = &report.cost.jobs[0];
    // Without finished_at a run is open-ended, so the turn still belongs to the first run.
    assert_eq!(
        (job.runs, job.runs_failed, job.agent_turns),
        (2, 1, 1),
        "runs from the old ledger"
    );
    assert_eq!(
        (job.empty_runs, job.tokens, job.cost_usd),
        (Some(1), 120, 0.0),
        "no cost columns"
    );
}

#[test]
fn a_corrupt_job_store_is_reported_and_the_ledger_still_counts() {
    let home = home();
    std::fs::write(
        home.path().join("cron/jobs.json"),
        b"{\"jobs\": [{\"id\": \"x\",",
    )
    .expect("write");
    drop(ledger(
        home.path(),
        LEDGER_NEW,
        &[("x", "completed", SINCE + DAY)],
    ));
    let status = status(&options(home.path()));
    assert!(
        status.crons.is_empty(),
        "no job can be listed from a corrupt store"
    );
    assert!(
        status.errors.iter().any(|e| e.contains("jobs.json")),
        "errors: {:?}",
        status.errors
    );
    let report = cron_cost(&options(home.path()));
    assert!(
        report.errors.iter().any(|e| e.contains("jobs.json")),
        "the cost report says it too"
    );
    let job = &report.cost.jobs[0];
    assert_eq!(
        (job.id.as_str(), job.name.as_deref(), job.runs),
        ("x", None, 1),
        "ledger job kept"
    );
    let encoded = serde_json::to_value(&report).expect("the report must encode");
    assert_eq!(
        encoded["errors"].as_array().map(Vec::len),
        Some(1),
        "one trailing error entry"
    );
}

#[test]
fn missing_and_foreign_stores_degrade_to_sources_false() {
    let home = home();
    let report = cron_cost(&options(home.path()));
    let sources = (report.cost.sources.executions, report.cost.sources.state_db);
    assert_eq!(sources, (false, false), "absent stores are not read");
    assert!(
        report.errors.is_empty(),
        "absent is not an error: {:?}",
        report.errors
    );
    std::fs::write(
        home.path().join("state.db"),
        b"this is not a database, just text",
    )
    .expect("w");
    std::fs::write(home.path().join("cron/executions.db"), vec![0u8; 4096]).expect("write");
    let report = cron_cost(&options(home.path()));
    assert!(
        !report.cost.sources.state_db && !report.cost.sources.executions,
        "unreadable stores"
    );
    assert_eq!(
        report.errors.len(),
        2,
        "both are named: {:?}",
        report.errors
    );
    let encoded = serde_json::to_value(status(&options(home.path()))).expect("must encode");
    assert!(
        encoded.get("errors").is_none(),
        "the status of an empty home has no error"
    );
}

#[test]
fn a_corrupt_observer_file_is_reported_and_the_rest_of_the_status_stands() {
    let home = home();
    std::fs::create_dir(home.path().join("fleet-policy")).expect("the observer dir");
    std::fs::write(
        home.path().join("fleet-policy/observed.json"),
        b"{\"main\": ",
    )
    .expect("w");
    write_jobs(home.path(), json!([{"id": "a", "name": "a"}]));
    let report = status(&options(home.path()));
    assert!(
        report.observed.is_empty(),
        "nothing can be observed from a corrupt file"
    );
    assert!(
        report.errors.iter().any(|e| e.contains("observed.json")),
        "{:?}",
        report.errors
    );
    assert_eq!(report.crons.len(), 1, "the jobs are still listed");
}

#[test]
fn a_writer_holding_a_wal_transaction_does_not_block_the_report() {
    let home = home();
    write_jobs(
        home.path(),
        json!([{"id": "w", "name": "w", "created_at": "2026-01-01T00:00:00Z"}]),
    );
    let conn = ledger(home.path(), LEDGER_NEW, &[("w", "completed", SINCE + DAY)]);
    conn.pragma_update(None, "journal_mode", "wal")
        .expect("WAL must be enabled");
    conn.execute_batch("BEGIN IMMEDIATE")
        .expect("the writer must take the write lock");
    conn.execute(
        "INSERT INTO executions (id, job_id, source, process_id, pid, status, claimed_at)
         VALUES ('uncommitted', 'w', 'builtin', 'p', 1, 'completed', ?1)",
        [iso(SINCE + 2.0 * DAY)],
    )
    .expect("the writer must write");
    let before = report_common::snapshot(home.path());
    let started = tokio::time::Instant::now();
    let report = cron_cost(&options(home.path()));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "a WAL reader must not wait"
    );
    assert!(
        report.cost.sources.executions,
        "the ledger must be read: {:?}",
        report.errors
    );
    assert_eq!(
        report.cost.jobs[0].runs, 1,
        "only the committed run is visible"
    );
    report_common::assert_unchanged(&before, &report_common::snapshot(home.path()));
    conn.execute_batch("COMMIT")
        .expect("the writer must commit");
}

#[test]
fn an_exclusive_lock_on_a_rollback_journal_degrades_within_the_busy_timeout() {
    let home = home();
    write_jobs(
        home.path(),
        json!([{"id": "l", "name": "l", "created_at": "2026-01-01T00:00:00Z"}]),
    );
    let conn = ledger(home.path(), LEDGER_NEW, &[("l", "completed", SINCE + DAY)]);
    conn.execute_batch("BEGIN EXCLUSIVE; UPDATE executions SET pid = 2")
        .expect("must lock");
    let started = tokio::time::Instant::now();
    let report = cron_cost(&options(home.path()));
    let waited = started.elapsed();
    assert!(
        !report.cost.sources.executions,
        "a locked ledger cannot be read"
    );
    assert!(
        report.errors.iter().any(|e| e.contains("executions.db")),
        "named: {:?}",
        report.errors
    );
    assert!(
        waited >= Duration::from_millis(250),
        "the busy timeout must be honoured: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(3),
        "and the report must not hang: {waited:?}"
    );
    assert_eq!(report.cost.jobs[0].runs, 0, "the job is still listed");
    conn.execute_batch("ROLLBACK")
        .expect("the writer must roll back");
}

#[test]
fn every_managed_failure_mode_is_named_and_the_overlay_is_dropped() {
    let cases: [(&str, &[u8], &str); 5] = [
        ("empty", b"", "empty"),
        (
            "not UTF-8",
            b"agent:\n  service_tier: \xc3\x28\n",
            "not_utf8",
        ),
        ("YAML error", b"agent: {service_tier: fast\n", "yaml_error"),
        ("not a mapping", b"- agent\n", "not_a_mapping"),
        ("a bare number", b"42\n", "not_a_mapping"),
    ];
    for (why, bytes, code) in cases {
        let home = home();
        std::fs::write(
            home.path().join("config.yaml"),
            "agent:\n  service_tier: fast\n",
        )
        .expect("w");
        let managed = tempfile::tempdir().expect("a managed dir must be created");
        std::fs::write(managed.path().join("config.yaml"), bytes).expect("managed config");
        let mut opts = options(home.path());
        opts.managed_dir = ManagedDir::At(managed.path().to_path_buf());
        let report = status(&opts);
        let error = report.managed.error.clone().unwrap_or_default();
        assert!(
            error.starts_with(code),
            "{why}: must report {code}, got {error:?}"
        );
        assert_eq!(report.managed.keys, 0, "{why}: nothing is pinned");
        let tier = report
            .effective
            .0
            .iter()
            .find(|(k, _)| *k == "agent.service_tier");
        assert_eq!(
            tier.map(|(_, v)| v.clone()),
            Some(json!("fast")),
            "{why}: user value stands"
        );
    }
}
