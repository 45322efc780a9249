//! Cron cost report over generated Hermes homes of 10k, 100k and 1M execution rows, side by
//! side with the same computation written plainly in Python (`tests/bench/report_python.py`).
//!
//! `cargo bench -p fleetgate-report --bench report [-- SIZES]` (SIZES like `10000,100000`).
//! Python comes from `FLEETGATE_VENV`, else `python3` on the PATH; without either only the
//! Rust figures are printed. Both sides must agree on every job's runs, turns, empty runs,
//! tokens and cost, or the bench fails. The bar: under 1 s at 100k rows.
//!
//! `cargo bench -p fleetgate-report --bench report -- realistic [SESSIONS]` measures the home
//! Hermes leaves on disk instead (`tests/bench/make_report_home.py`, built with Hermes' own
//! modules from `FLEETGATE_VENV`; 1M sessions by default, kept in `FLEETGATE_REPORT_HOME`
//! when set): its ledger pruned to 1,000 rows, a system prompt per session. The report that
//! reads only the ledger's covered span is timed against the one reading the whole window
//! and against the Python reference; all three must agree.
#![allow(clippy::print_stdout)] // printing the figures is this binary's job

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use fleetgate_report::{CostCache, CronCostReport, ManagedDir, ReportOptions, cron_cost, time};
use rusqlite::{Connection, params};
use serde_json::{Value, json};
use tokio::time::Instant;

const NOW: f64 = 1_790_510_400.0; // 2026-09-27T12:00:00Z
const WINDOW: f64 = 7.0 * time::DAY_SECONDS;
const JOBS: usize = 50;

fn main() -> Result<()> {
    let sizes: Vec<usize> = match std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-') && a != "realistic")
    {
        Some(list) => list.split(',').map(str::parse).collect::<Result<_, _>>()?,
        None => vec![10_000, 100_000, 1_000_000],
    };
    // The steady state is measured on the largest home asked for.
    if std::env::args().skip(1).any(|a| a == "realistic") {
        let sessions = std::env::args()
            .skip(1)
            .filter(|a| !a.starts_with('-') && a != "realistic")
            .find_map(|a| a.parse().ok())
            .unwrap_or(1_000_000);
        return realistic(sessions);
    }
    let steady_sizes: Vec<usize> = sizes.iter().max().copied().into_iter().collect();
    // Profiling: `FLEETGATE_REPORT_HOME=DIR` keeps the generated home in DIR (made once) and
    // runs only the Rust report, five times, so a profiler sees nothing else.
    if let Some(home) = std::env::var_os("FLEETGATE_REPORT_HOME").map(PathBuf::from) {
        let size = sizes.first().copied().unwrap_or(1_000_000);
        if !home.join("state.db").exists() {
            generate(&home, size)?;
        }
        // `FLEETGATE_REPORT_STEADY=N`: N incremental rounds instead (on a copy of the home).
        if let Some(rounds) = std::env::var("FLEETGATE_REPORT_STEADY")
            .ok()
            .and_then(|n| n.parse().ok())
        {
            let copy = tempfile::tempdir()?;
            copy_home(&home, copy.path())?;
            let steady = steady_rounds(copy.path(), rounds)?;
            let mut walls: Vec<Duration> = steady.rounds.iter().map(|t| t.wall).collect();
            walls.sort_unstable();
            println!(
                "{size:>9}  first {}  full {}  incremental median {:?}",
                steady.first,
                steady.full,
                walls[walls.len() / 2]
            );
            return Ok(());
        }
        for _ in 0..5 {
            let run = time_rust(&home)?;
            println!("{size:>9}  {}", run.timing);
        }
        return Ok(());
    }
    let python = python();
    println!("wall time (CPU time): best of 3; python excludes start-up");
    println!(
        "{:>9}  {:>9}  {:>17}  {:>17}  {:>11}",
        "rows", "sessions", "rust", "python", "ratio wall"
    );
    for size in sizes {
        let dir = tempfile::tempdir()?;
        let sessions = generate(dir.path(), size)?;
        let rust = time_rust(dir.path())?;
        let (py, ratio) = match &python {
            Some(python) => {
                let timing = time_python(python, dir.path(), &rust.report)?;
                let ratio = timing.wall.as_secs_f64() / rust.timing.wall.as_secs_f64();
                (timing.to_string(), format!("{ratio:.1}x"))
            }
            None => ("-".to_string(), "-".to_string()),
        };
        println!(
            "{size:>9}  {sessions:>9}  {:>17}  {py:>17}  {ratio:>11}",
            rust.timing.to_string()
        );
    }
    if python.is_none() {
        println!("(python side skipped: neither FLEETGATE_VENV nor python3 found)");
    }
    println!();
    println!("steady state: 100 new execution rows (with their sessions) a minute, one report");
    println!("a minute through the cache, against a full recompute of the same home");
    println!(
        "{:>9}  {:>17}  {:>17}  {:>17}  {:>17}  {:>11}",
        "rows", "first (cache)", "full", "incremental med", "incremental max", "full/med"
    );
    for size in steady_sizes {
        let dir = tempfile::tempdir()?;
        generate(dir.path(), size)?;
        let steady = steady(dir.path())?;
        let mut walls: Vec<Duration> = steady.rounds.iter().map(|t| t.wall).collect();
        walls.sort_unstable();
        let median = steady
            .rounds
            .iter()
            .find(|t| t.wall == walls[walls.len() / 2]);
        let worst = steady.rounds.iter().max_by_key(|t| t.wall);
        let (Some(median), Some(worst)) = (median, worst) else {
            bail!("no incremental round ran");
        };
        let ratio = steady.full.wall.as_secs_f64() / median.wall.as_secs_f64();
        println!(
            "{size:>9}  {:>17}  {:>17}  {:>17}  {:>17}  {:>10.0}x",
            steady.first.to_string(),
            steady.full.to_string(),
            median.to_string(),
            worst.to_string(),
            ratio
        );
    }
    Ok(())
}

/// Incremental rounds and the full recompute of the state they end at.
struct Steady {
    /// The first report through an empty cache (a full read that also fills it).
    first: Timing,
    rounds: Vec<Timing>,
    full: Timing,
}

/// Report once to fill a cache, then six times a minute apart with 100 new execution rows
/// (and their sessions) each minute; then recompute the last state in full. Both must agree.
fn steady(home: &Path) -> Result<Steady> {
    steady_rounds(home, 6)
}

fn copy_home(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to.join("cron"))?;
    for file in ["state.db", "cron/executions.db", "cron/jobs.json"] {
        std::fs::copy(from.join(file), to.join(file))?;
    }
    Ok(())
}

fn steady_rounds(home: &Path, count: usize) -> Result<Steady> {
    let cache = CostCache::new();
    // Warm the page cache as the plain rounds do, so both firsts read from memory.
    cron_cost(&options_at(home, NOW));
    let (started, cpu) = (Instant::now(), process_cpu());
    cache.cron_cost(&options_at(home, NOW));
    let first = Timing {
        wall: started.elapsed(),
        cpu: process_cpu().saturating_sub(cpu),
    };
    let mut rounds = Vec::new();
    let mut now = NOW;
    let mut report = None;
    for round in 0..count {
        now += 60.0;
        append(home, now - 60.0, round)?;
        let (started, cpu) = (Instant::now(), process_cpu());
        report = Some(cache.cron_cost(&options_at(home, now)));
        rounds.push(Timing {
            wall: started.elapsed(),
            cpu: process_cpu().saturating_sub(cpu),
        });
    }
    let (started, cpu) = (Instant::now(), process_cpu());
    let full = cron_cost(&options_at(home, now));
    let full_timing = Timing {
        wall: started.elapsed(),
        cpu: process_cpu().saturating_sub(cpu),
    };
    let counted = cache.counters();
    if counted.incremental != count as u64 {
        bail!("the steady-state rounds must come from the cache: {counted:?}");
    }
    if report.map(|r| r.cost) != Some(full.cost) {
        bail!("the incremental report differs from the full recompute");
    }
    Ok(Steady {
        first,
        rounds,
        full: full_timing,
    })
}

/// 100 execution rows claimed in the minute from `from`, with the sessions, messages and
/// usage rows the generator writes for them.
fn append(home: &Path, from: f64, round: usize) -> Result<()> {
    let ledger = Connection::open(home.join("cron/executions.db"))?;
    let state = Connection::open(home.join("state.db"))?;
    ledger.execute_batch("BEGIN")?;
    state.execute_batch("BEGIN")?;
    for k in 0..100 {
        let i = 1_000_000_000 + round * 100 + k;
        let j = k % JOBS;
        let at = (from + k as f64 * 0.5).floor();
        ledger.execute(
            "INSERT INTO executions (id, job_id, source, process_id, pid, status, claimed_at,
             started_at, finished_at) VALUES (?1, ?2, 'builtin', 'p', 1, 'completed', ?3, ?3, ?4)",
            params![format!("{i:032x}"), job_id(j), iso(at), iso(at + 20.0)],
        )?;
        if j.is_multiple_of(10) {
            continue;
        }
        let id = format!("cron_{}_{}", job_id(j), stamp(at + 1.0));
        state.execute(
            "INSERT OR IGNORE INTO sessions (id, source, started_at, ended_at, input_tokens,
             output_tokens, estimated_cost_usd) VALUES (?1, 'cron', ?2, ?3, 1500, 120, 0.003)",
            params![id, at + 1.0, at + 10.0],
        )?;
        state.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?1, 'assistant', 'ok', ?2)",
            params![id, at + 10.0],
        )?;
    }
    ledger.execute_batch("COMMIT")?;
    state.execute_batch("COMMIT")?;
    Ok(())
}

/// Wall and CPU time of one measurement.
#[derive(Clone, Copy, Debug)]
struct Timing {
    wall: Duration,
    cpu: Duration,
}

impl std::fmt::Display for Timing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.3} s ({:.2} s)",
            self.wall.as_secs_f64(),
            self.cpu.as_secs_f64()
        )
    }
}

/// CPU time of this process so far (user + system, all threads), from /proc on Linux.
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i)?.parse::<u64>().ok())
        .sum();
    Duration::from_millis(ticks * 10)
}

struct RustRun {
    timing: Timing,
    report: CronCostReport,
}

fn python() -> Option<PathBuf> {
    if let Some(venv) = std::env::var_os("FLEETGATE_VENV") {
        return Some(PathBuf::from(venv).join("bin").join("python"));
    }
    let found = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    found.then(|| PathBuf::from("python3"))
}

fn options(home: &Path) -> ReportOptions {
    options_at(home, NOW)
}

fn options_at(home: &Path, now: f64) -> ReportOptions {
    let mut opts = ReportOptions::new(home);
    opts.now = Some(now);
    opts.managed_dir = ManagedDir::Off;
    opts
}

/// Best of three runs of the Rust report (one past 500k rows), and its result.
fn time_rust(home: &Path) -> Result<RustRun> {
    let mut best = Timing {
        wall: Duration::MAX,
        cpu: Duration::MAX,
    };
    let mut report = cron_cost(&options(home));
    // Best of three at every size: on this machine one round of a million rows moves by
    // half a second from run to run.
    let rounds = 3;
    for _ in 0..rounds {
        let (started, cpu) = (Instant::now(), process_cpu());
        report = cron_cost(&options(home));
        let wall = started.elapsed();
        if wall < best.wall {
            best = Timing {
                wall,
                cpu: process_cpu().saturating_sub(cpu),
            };
        }
    }
    if !report.errors.is_empty() {
        bail!(
            "the report failed to read the generated home: {:?}",
            report.errors
        );
    }
    Ok(RustRun {
        timing: best,
        report,
    })
}

/// Run the Python side (it times its own computation, without interpreter start-up) and
/// check it computed the same figures.
fn time_python(python: &Path, home: &Path, rust: &CronCostReport) -> Result<Timing> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/bench/report_python.py");
    let output = Command::new(python)
        .arg(&script)
        .arg(home)
        .arg(NOW.to_string())
        .arg("7")
        .output()
        .context("failed to start the python side")?;
    if !output.status.success() {
        bail!(
            "the python side failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let result: Value = serde_json::from_slice(&output.stdout)?;
    for job in &rust.cost.jobs {
        let theirs = &result["jobs"][&job.id];
        let ours = json!({"runs": job.runs, "runs_failed": job.runs_failed,
            "agent_turns": job.agent_turns, "empty_runs": job.empty_runs, "tokens": job.tokens});
        let same_counts = ["runs", "runs_failed", "agent_turns", "empty_runs", "tokens"]
            .iter()
            .all(|k| theirs[*k] == ours[*k]);
        let cost = theirs["cost_usd"].as_f64().unwrap_or(f64::NAN);
        if !same_counts || (cost - job.cost_usd).abs() > 1e-3 {
            bail!(
                "python and rust disagree on job {}: {theirs} vs {ours} cost {}",
                job.id,
                job.cost_usd
            );
        }
    }
    let seconds = |key: &str| {
        result[key]
            .as_f64()
            .map(Duration::from_secs_f64)
            .context("the python side must report its time")
    };
    Ok(Timing {
        wall: seconds("elapsed_s")?,
        cpu: seconds("cpu_s")?,
    })
}

/// Write a home with `rows` executions spread over the window across 50 jobs; returns the
/// number of agent sessions written.
fn generate(home: &Path, rows: usize) -> Result<usize> {
    std::fs::create_dir_all(home.join("cron"))?;
    let jobs: Vec<Value> = (0..JOBS)
        .map(|j| match j % 10 {
            0 => json!({"id": job_id(j), "name": format!("watchdog {j}"), "no_agent": true, "script": "w.sh"}),
            1 | 2 => json!({"id": job_id(j), "name": format!("gated {j}"), "script": "gate.py"}),
            _ => json!({"id": job_id(j), "name": format!("job {j}"), "schedule_display": "every 5m"}),
        })
        .collect();
    std::fs::write(
        home.join("cron/jobs.json"),
        serde_json::to_vec(&json!({"jobs": jobs}))?,
    )?;
    let ledger = Connection::open(home.join("cron/executions.db"))?;
    let state = Connection::open(home.join("state.db"))?;
    ledger.execute_batch(LEDGER_DDL)?;
    state.execute_batch(STATE_DDL)?;
    ledger.execute_batch("PRAGMA synchronous=OFF; BEGIN")?;
    state.execute_batch("PRAGMA synchronous=OFF; BEGIN")?;
    let sessions = fill(&ledger, &state, rows)?;
    ledger.execute_batch("COMMIT")?;
    state.execute_batch("COMMIT")?;
    Ok(sessions)
}

fn job_id(j: usize) -> String {
    format!("{:012x}", 0xa1b2_c3d4_0000_usize + j)
}

fn fill(ledger: &Connection, state: &Connection, rows: usize) -> Result<usize> {
    let mut exec = ledger.prepare(
        "INSERT INTO executions (id, job_id, source, process_id, pid, status, claimed_at, started_at,
         finished_at, error) VALUES (?1, ?2, 'builtin', 'p', 1, ?3, ?4, ?4, ?5, ?6)",
    )?;
    // Sessions end as Hermes ends them (end_session), nine seconds after they start.
    let mut session = state.prepare(
        "INSERT INTO sessions (id, source, parent_session_id, started_at, ended_at, input_tokens,
         output_tokens, cache_read_tokens, estimated_cost_usd, actual_cost_usd)
         VALUES (?1, ?2, ?3, ?4, ?4 + 9, ?5, ?6, ?7, ?8, ?9)",
    )?;
    let mut message = state.prepare(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?1, ?2, ?3, ?4)",
    )?;
    let mut usage = state.prepare(
        "INSERT INTO session_model_usage (session_id, model, task, input_tokens, output_tokens,
         estimated_cost_usd, first_seen, last_seen) VALUES (?1, 'm', ?2, ?3, ?4, ?5, ?6, ?6)",
    )?;
    let per_job = rows.div_ceil(JOBS);
    let interval = (WINDOW - 120.0) / per_job as f64;
    let mut sessions = 0;
    for i in 0..rows {
        let (j, k) = (i % JOBS, i / JOBS);
        let at = (NOW - WINDOW + 60.0 + k as f64 * interval + j as f64).floor();
        let status = match i % 100 {
            0..=89 => "completed",
            90..=96 => "failed",
            _ => "unknown",
        };
        let error = (status != "completed").then_some("RuntimeError: boom");
        exec.execute(params![
            format!("{i:032x}"),
            job_id(j),
            status,
            iso(at),
            iso(at + 20.0),
            error
        ])?;
        let runs_agent = match j % 10 {
            0 => false,
            1 | 2 => k % 4 == 0,
            _ => true,
        };
        if !runs_agent {
            continue;
        }
        sessions += 1;
        let id = format!("cron_{}_{}", job_id(j), stamp(at + 1.0));
        let actual = (i % 3 == 0).then_some(0.002);
        session.execute(params![
            id,
            "cron",
            None::<String>,
            at + 1.0,
            1500,
            120,
            300,
            0.003,
            actual
        ])?;
        let reply = if i % 2 == 0 {
            "[SILENT]"
        } else {
            "Two new items need your attention."
        };
        message.execute(params![id, "user", "check", at + 1.0])?;
        message.execute(params![id, "assistant", reply, at + 10.0])?;
        usage.execute(params![id, "", 1500, 120, 0.003, at + 9.0])?;
        if i % 10 == 1 {
            let child = format!("delegate_{i:016x}");
            session.execute(params![
                child,
                "subagent",
                id,
                at + 3.0,
                400,
                40,
                0,
                0.001,
                None::<f64>
            ])?;
        }
        if i % 5 == 2 {
            usage.execute(params![id, "title_generation", 50, 10, 0.0002, at + 8.0])?;
        }
    }
    Ok(sessions)
}

fn iso(unix: f64) -> String {
    format!(
        "{}.000000+00:00",
        time::format_iso_z(unix).trim_end_matches('Z')
    )
}

fn stamp(unix: f64) -> String {
    let iso = time::format_iso_z(unix);
    format!(
        "{}{}{}_{}{}{}",
        &iso[0..4],
        &iso[5..7],
        &iso[8..10],
        &iso[11..13],
        &iso[14..16],
        &iso[17..19]
    )
}

/// The ledger as Hermes creates it, with its indexes.
const LEDGER_DDL: &str = "CREATE TABLE executions (id TEXT PRIMARY KEY, job_id TEXT NOT NULL,
  source TEXT NOT NULL, process_id TEXT NOT NULL, pid INTEGER NOT NULL, process_started_at INTEGER,
  status TEXT NOT NULL, claimed_at TEXT NOT NULL, started_at TEXT, finished_at TEXT, error TEXT);
  CREATE INDEX idx_executions_job_claimed ON executions(job_id, claimed_at DESC, id DESC);
  CREATE INDEX idx_executions_status_claimed ON executions(status, claimed_at DESC, id DESC);";

/// The parts of Hermes' state.db the report reads, with Hermes' indexes.
const STATE_DDL: &str = "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL,
  model TEXT, parent_session_id TEXT, started_at REAL NOT NULL, ended_at REAL, end_reason TEXT,
  input_tokens INTEGER DEFAULT 0, output_tokens INTEGER DEFAULT 0, cache_read_tokens INTEGER DEFAULT 0,
  cache_write_tokens INTEGER DEFAULT 0, estimated_cost_usd REAL, actual_cost_usd REAL);
  CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
  role TEXT NOT NULL, content TEXT, tool_calls TEXT, timestamp REAL NOT NULL,
  active INTEGER NOT NULL DEFAULT 1);
  CREATE TABLE session_model_usage (session_id TEXT NOT NULL, model TEXT NOT NULL,
  billing_provider TEXT NOT NULL DEFAULT '', billing_base_url TEXT NOT NULL DEFAULT '',
  billing_mode TEXT NOT NULL DEFAULT '', task TEXT NOT NULL DEFAULT '',
  input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,
  cache_read_tokens INTEGER NOT NULL DEFAULT 0, cache_write_tokens INTEGER NOT NULL DEFAULT 0,
  estimated_cost_usd REAL NOT NULL DEFAULT 0, actual_cost_usd REAL NOT NULL DEFAULT 0,
  first_seen REAL, last_seen REAL,
  PRIMARY KEY (session_id, model, billing_provider, billing_base_url, billing_mode, task));
  CREATE INDEX idx_sessions_source ON sessions(source);
  CREATE INDEX idx_sessions_parent ON sessions(parent_session_id);
  CREATE INDEX idx_sessions_started ON sessions(started_at DESC);
  CREATE INDEX idx_messages_session ON messages(session_id, timestamp);
  CREATE INDEX idx_session_model_usage_session ON session_model_usage(session_id);";

/// The report on a home as Hermes leaves it (see the module docs).
fn realistic(sessions: usize) -> Result<()> {
    let Some(venv) = std::env::var_os("FLEETGATE_VENV").map(PathBuf::from) else {
        println!("realistic home skipped: FLEETGATE_VENV not set (tests/run venv prints it)");
        return Ok(());
    };
    let python = venv.join("bin").join("python");
    let scratch = tempfile::tempdir()?;
    let home = std::env::var_os("FLEETGATE_REPORT_HOME")
        .map_or_else(|| scratch.path().join("home"), PathBuf::from);
    if !home.join("state.db").exists() {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/bench/make_report_home.py");
        let output = Command::new(&python)
            .arg(&script)
            .arg(&home)
            .arg(sessions.to_string())
            .arg(NOW.to_string())
            .output()
            .context("failed to start the home builder")?;
        if !output.status.success() {
            bail!(
                "the home builder failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
    let state_bytes = std::fs::metadata(home.join("state.db"))?.len();
    // Warm the page cache as a gate that reports every minute finds it.
    let covered = cron_cost(&options(&home));
    if !covered.errors.is_empty() {
        bail!("the report failed to read the home: {:?}", covered.errors);
    }
    let whole = best_of(3, || whole_window_cost(&home))?;
    let full = best_of(3, || Ok(cron_cost(&options(&home)).cost))?;
    let first = best_of(3, || Ok(CostCache::new().cron_cost(&options(&home)).cost))?;
    if whole.1 != full.1 || first.1 != full.1 {
        bail!("the covered-span report differs from the whole-window one");
    }
    let py = time_python(&python, &home, &covered)?;
    let coverage = full.1.sources.executions_coverage_from.clone();
    println!(
        "home as Hermes leaves it: {sessions} sessions asked, state.db {:.1} GB, ledger covered from {}",
        state_bytes as f64 / 1e9,
        coverage.as_deref().unwrap_or("the window start")
    );
    println!("wall time (CPU time): best of 3; python excludes start-up");
    let ratio = |t: &Timing| t.wall.as_secs_f64() / full.0.wall.as_secs_f64();
    println!(
        "  whole window read (the report before #34)  {:>17}  {:>6.1}x",
        whole.0.to_string(),
        ratio(&whole.0)
    );
    println!(
        "  covered span read (full report)             {:>17}",
        full.0.to_string()
    );
    println!(
        "  first report through the cache              {:>17}",
        first.0.to_string()
    );
    println!(
        "  plain Python reference                      {:>17}  {:>6.1}x",
        py.to_string(),
        ratio(&py)
    );
    println!("  figures: identical in all four");
    Ok(())
}

/// The cost object as the report computed it before it read only the covered span: every
/// session of the window, the auxiliary usage table scanned.
fn whole_window_cost(home: &Path) -> Result<fleetgate_report::CostSection> {
    use fleetgate_report::{cost, jobs, ledger, turns};
    let since = NOW - WINDOW;
    let busy = Duration::from_secs(5);
    let jobs = jobs::load_jobs(home)?;
    let turns = turns::read_turns(&home.join("state.db"), since, NOW, busy)?;
    let ledger = ledger::read_ledger(
        &home.join("cron/executions.db"),
        since,
        &turns::job_ids(&turns),
        busy,
    )?;
    Ok(cost::compute(&cost::CostInputs {
        jobs: &jobs,
        ledger: Some(&ledger),
        turns: Some(&turns),
        since,
        until: NOW,
        days: 7,
    }))
}

/// The best of `rounds` timed calls, with the last result.
fn best_of<T>(rounds: usize, mut f: impl FnMut() -> Result<T>) -> Result<(Timing, T)> {
    let mut best: Option<Timing> = None;
    let mut last = None;
    for _ in 0..rounds {
        let (started, cpu) = (Instant::now(), process_cpu());
        let value = f()?;
        let timing = Timing {
            wall: started.elapsed(),
            cpu: process_cpu().saturating_sub(cpu),
        };
        if best.is_none_or(|b| timing.wall < b.wall) {
            best = Some(timing);
        }
        last = Some(value);
    }
    match (best, last) {
        (Some(best), Some(last)) => Ok((best, last)),
        _ => bail!("no round ran"),
    }
}
