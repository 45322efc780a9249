//! The cache against the full recompute: a simulated Hermes home is written event by event
//! (claims, sessions, sub-agents, compressions, late counter updates, auxiliary rows,
//! finishes, Hermes' pruning), and at every report instant both computations must agree to
//! the last figure.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, params};
use serde_json::json;

use super::*;
use crate::{ManagedDir, cron_cost, time};

const DAY: f64 = time::DAY_SECONDS;
/// 2026-09-20T12:00:00Z.
const START: f64 = 1_789_905_600.0;

const LEDGER_DDL: &str = "CREATE TABLE executions (id TEXT PRIMARY KEY, job_id TEXT NOT NULL,
  source TEXT NOT NULL, process_id TEXT NOT NULL, pid INTEGER NOT NULL, process_started_at INTEGER,
  status TEXT NOT NULL, handoff_pending INTEGER NOT NULL DEFAULT 0, handoff_started_at REAL,
  claimed_at TEXT NOT NULL, started_at TEXT, finished_at TEXT, error TEXT,
  delivery_outcome TEXT, scheduled_instant TEXT);
  CREATE INDEX idx_executions_job_claimed ON executions(job_id, claimed_at DESC, id DESC);
  CREATE INDEX idx_executions_status_claimed ON executions(status, claimed_at DESC, id DESC);";

const STATE_DDL: &str = "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL,
  model TEXT, parent_session_id TEXT, started_at REAL NOT NULL, ended_at REAL, end_reason TEXT,
  input_tokens INTEGER DEFAULT 0, output_tokens INTEGER DEFAULT 0, cache_read_tokens INTEGER DEFAULT 0,
  cache_write_tokens INTEGER DEFAULT 0, estimated_cost_usd REAL, actual_cost_usd REAL);
  CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
  role TEXT NOT NULL, content TEXT, tool_calls TEXT, timestamp REAL NOT NULL,
  active INTEGER NOT NULL DEFAULT 1);
  CREATE TABLE session_model_usage (session_id TEXT NOT NULL, model TEXT NOT NULL,
  task TEXT NOT NULL DEFAULT '', input_tokens INTEGER NOT NULL DEFAULT 0,
  output_tokens INTEGER NOT NULL DEFAULT 0, estimated_cost_usd REAL NOT NULL DEFAULT 0,
  actual_cost_usd REAL NOT NULL DEFAULT 0, first_seen REAL, last_seen REAL,
  PRIMARY KEY (session_id, model, task));
  CREATE INDEX idx_sessions_parent ON sessions(parent_session_id);
  CREATE INDEX idx_sessions_started ON sessions(started_at DESC);
  CREATE INDEX idx_messages_session ON messages(session_id, timestamp);
  CREATE INDEX idx_usage_session ON session_model_usage(session_id);";

/// The same state.db as an older Hermes wrote it: no end times, no usage table.
const OLD_STATE_DDL: &str = "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL,
  parent_session_id TEXT, started_at REAL NOT NULL, end_reason TEXT,
  input_tokens INTEGER DEFAULT 0, output_tokens INTEGER DEFAULT 0);
  CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
  role TEXT NOT NULL, content TEXT, tool_calls TEXT, timestamp REAL NOT NULL);
  CREATE INDEX idx_sessions_started ON sessions(started_at DESC);";

/// One write Hermes makes, at an instant.
#[derive(Clone, Debug)]
enum Event {
    Claim {
        exec: String,
        job: String,
    },
    Running {
        exec: String,
    },
    Session {
        id: String,
        parent: Option<String>,
        source: &'static str,
    },
    Message {
        session: String,
        role: &'static str,
        content: String,
        tools: bool,
    },
    Counters {
        session: String,
        tokens: i64,
        cost: f64,
    },
    Aux {
        session: String,
        task: &'static str,
        cost: f64,
    },
    End {
        session: String,
        reason: &'static str,
    },
    Finish {
        exec: String,
        status: &'static str,
        error: Option<&'static str>,
    },
}

/// A cron job of the simulation.
#[derive(Clone, Debug)]
struct SimJob {
    id: String,
    every: f64,
    /// First fire.
    first: f64,
    kind: Kind,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// The agent runs on every fire.
    Agent,
    /// A script gate keeps the agent asleep three fires in four.
    Gated,
    /// No agent at all.
    NoAgent,
    /// Runs long (forty minutes), with sub-agents and a compression.
    Long,
}

/// The events of `jobs` firing from `from` to `to`, in time order.
fn schedule(jobs: &[SimJob], from: f64, to: f64, seed: u64) -> Vec<(f64, Event)> {
    let mut events = Vec::new();
    let mut rng = seed;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for job in jobs {
        let mut fire = job.first.max(from);
        let mut n = 0u64;
        while fire < to {
            n += 1;
            let r = next();
            let exec = format!("{}-{n:06}", job.id);
            let t = fire + (r % 7) as f64;
            events.push((
                t,
                Event::Claim {
                    exec: exec.clone(),
                    job: job.id.clone(),
                },
            ));
            // One fire in 29 loses its claim: a failed attempt that never started.
            if r.is_multiple_of(29) {
                events.push((
                    t + 0.2,
                    Event::Finish {
                        exec,
                        status: "failed",
                        error: Some("Fire claim lost; execution was not started."),
                    },
                ));
                fire += job.every;
                continue;
            }
            events.push((t + 0.5, Event::Running { exec: exec.clone() }));
            let agent = match job.kind {
                Kind::Agent | Kind::Long => true,
                Kind::Gated => n.is_multiple_of(4),
                Kind::NoAgent => false,
            };
            let long = job.kind == Kind::Long;
            let duration = if long { 2400.0 } else { 20.0 + (r % 40) as f64 };
            if agent {
                let session = format!("cron_{}_{}", job.id, stamp(t + 1.0));
                events.push((
                    t + 1.0,
                    Event::Session {
                        id: session.clone(),
                        parent: None,
                        source: "cron",
                    },
                ));
                events.push((
                    t + 1.5,
                    Event::Message {
                        session: session.clone(),
                        role: "user",
                        content: "check".into(),
                        tools: false,
                    },
                ));
                let mut tip = session.clone();
                if long || r % 5 == 1 {
                    let child = format!("sub_{exec}");
                    events.push((
                        t + 3.0,
                        Event::Session {
                            id: child.clone(),
                            parent: Some(session.clone()),
                            source: "subagent",
                        },
                    ));
                    events.push((
                        t + duration / 2.0,
                        Event::Counters {
                            session: child.clone(),
                            tokens: 300,
                            cost: 0.001_25,
                        },
                    ));
                    events.push((
                        t + duration / 2.0 + 1.0,
                        Event::End {
                            session: child,
                            reason: "subagent_complete",
                        },
                    ));
                }
                if long {
                    // The conversation is rotated: the tip holds the reply.
                    events.push((
                        t + duration / 3.0,
                        Event::End {
                            session: session.clone(),
                            reason: "compression",
                        },
                    ));
                    let cont = format!("cont_{exec}");
                    events.push((
                        t + duration / 3.0 + 0.5,
                        Event::Session {
                            id: cont.clone(),
                            parent: Some(session.clone()),
                            source: "cron",
                        },
                    ));
                    tip = cont;
                }
                events.push((
                    t + duration / 2.0,
                    Event::Counters {
                        session: session.clone(),
                        tokens: 1000 + (r % 500) as i64,
                        cost: 0.002 + (r % 13) as f64 * 0.000_1,
                    },
                ));
                if r.is_multiple_of(3) {
                    events.push((
                        t + duration - 2.0,
                        Event::Aux {
                            session: session.clone(),
                            task: "title_generation",
                            cost: 0.000_2,
                        },
                    ));
                }
                let reply = match r % 4 {
                    0 => "[SILENT]".to_string(),
                    1 => String::new(),
                    _ => format!("{} items changed", r % 9),
                };
                let tools = r.is_multiple_of(17);
                events.push((
                    t + duration,
                    Event::Message {
                        session: tip.clone(),
                        role: "assistant",
                        content: reply,
                        tools,
                    },
                ));
                // A run that crashes leaves its session open and its row claimed until
                // recovery marks it unknown.
                if r % 31 != 0 && !(long && n.is_multiple_of(5)) {
                    events.push((
                        t + duration + 0.5,
                        Event::End {
                            session: tip.clone(),
                            reason: "cron_complete",
                        },
                    ));
                }
                // Hermes' coalescing writer lands the last counters a few seconds late.
                events.push((
                    t + duration + 2.5,
                    Event::Counters {
                        session: tip,
                        tokens: 50,
                        cost: 0.000_5,
                    },
                ));
            }
            // Long runs crash more often: recovery marks the row unknown while the agent's
            // session still runs (and is billed) for another half hour.
            let crash = r.is_multiple_of(31) || (long && n.is_multiple_of(5));
            let (status, error) = match r % 31 {
                _ if crash => ("unknown", Some("Scheduler restarted")),
                3 | 7 => ("failed", Some("RuntimeError: boom")),
                _ => ("completed", None),
            };
            let finish_at = if status == "unknown" {
                t + 900.0
            } else {
                t + duration + 3.0
            };
            events.push((
                finish_at,
                Event::Finish {
                    exec,
                    status,
                    error,
                },
            ));
            fire += job.every;
        }
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    events
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

/// A claim text as Hermes writes it, in its timezone: +02:00, or +01:00 from `fall_back`
/// on (the end of summer time: an hour of local times comes twice).
fn claim_text(unix: f64, fall_back: Option<f64>) -> String {
    let offset = if fall_back.is_some_and(|at| unix >= at) {
        3600
    } else {
        7200
    };
    let local = time::format_local(unix.floor() as i64, offset, b'T');
    let micros = ((unix - unix.floor()) * 1e6).round() as u32;
    format!("{local}.{micros:06}+{:02}:00", offset / 3600)
}

/// How a simulated home is set up.
#[derive(Clone, Copy, Debug, Default)]
struct Setup {
    /// state.db as an older Hermes wrote it.
    old_schema: bool,
    /// Hermes prunes the ledger to its newest 1,000 terminal rows.
    prune: bool,
    /// Claims from this instant on are written at +01:00 instead of +02:00.
    fall_back: Option<f64>,
    /// No job fires before this instant (the ledger is empty until then).
    first_fire: Option<f64>,
}

/// A Hermes home being written.
struct Home {
    dir: PathBuf,
    ledger: Connection,
    state: Connection,
    old_schema: bool,
    prune: bool,
    fall_back: Option<f64>,
}

impl Home {
    fn create(dir: &Path, jobs: &[SimJob], old_schema: bool, prune: bool) -> Self {
        std::fs::create_dir_all(dir.join("cron")).expect("the home must be created");
        let listed: Vec<serde_json::Value> = jobs
            .iter()
            .map(|j| {
                let mut job = json!({"id": j.id, "name": format!("job {}", j.id),
                    "schedule_display": format!("every {}m", j.every / 60.0)});
                match j.kind {
                    Kind::Gated => job["script"] = json!("gate.py"),
                    Kind::NoAgent => {
                        job["script"] = json!("w.sh");
                        job["no_agent"] = json!(true);
                    }
                    Kind::Agent | Kind::Long => {}
                }
                if j.first > START {
                    job["created_at"] = json!(time::format_iso_z(j.first));
                }
                job
            })
            .collect();
        std::fs::write(
            dir.join("cron/jobs.json"),
            serde_json::to_vec(&json!({"jobs": listed})).expect("jobs serialize"),
        )
        .expect("jobs.json must be written");
        let ledger = Connection::open(dir.join("cron/executions.db")).expect("ledger opens");
        let state = Connection::open(dir.join("state.db")).expect("state.db opens");
        ledger.execute_batch(LEDGER_DDL).expect("ledger schema");
        state
            .execute_batch(if old_schema { OLD_STATE_DDL } else { STATE_DDL })
            .expect("state schema");
        for conn in [&ledger, &state] {
            conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF")
                .expect("pragmas");
        }
        Self {
            dir: dir.to_path_buf(),
            ledger,
            state,
            old_schema,
            prune,
            fall_back: None,
        }
    }

    fn claim_text(&self, unix: f64) -> String {
        claim_text(unix, self.fall_back)
    }

    fn apply(&self, at: f64, event: &Event) {
        let (l, s) = (&self.ledger, &self.state);
        let done = match event {
            Event::Claim { exec, job } => l.execute(
                "INSERT INTO executions (id, job_id, source, process_id, pid, status, claimed_at)
                 VALUES (?1, ?2, 'builtin', 'p', 1, 'claimed', ?3)",
                params![exec, job, self.claim_text(at)],
            ),
            Event::Running { exec } => l.execute(
                "UPDATE executions SET status = 'running', started_at = ?2 WHERE id = ?1",
                params![exec, self.claim_text(at)],
            ),
            Event::Finish { exec, status, error } => {
                let n = l.execute(
                    "UPDATE executions SET status = ?2, finished_at = ?3, error = ?4
                     WHERE id = ?1 AND status IN ('claimed', 'running')",
                    params![exec, status, self.claim_text(at), error],
                );
                if self.prune {
                    // Hermes keeps the newest 1,000 terminal rows (newer order).
                    l.execute(
                        "DELETE FROM executions WHERE id IN (SELECT id FROM executions
                         WHERE status IN ('completed','failed','unknown')
                         ORDER BY finished_at DESC, claimed_at DESC, id DESC LIMIT -1 OFFSET 1000)",
                        [],
                    )
                    .expect("prune");
                }
                n
            }
            Event::Session { id, parent, source } => s.execute(
                "INSERT INTO sessions (id, source, parent_session_id, started_at) VALUES (?1, ?2, ?3, ?4)",
                params![id, source, parent, at],
            ),
            Event::Message { session, role, content, tools } => s.execute(
                "INSERT INTO messages (session_id, role, content, tool_calls, timestamp)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![session, role, content, tools.then_some("[{\"id\": 1}]"), at],
            ),
            Event::Counters { session, tokens, .. } if self.old_schema => s.execute(
                "UPDATE sessions SET input_tokens = input_tokens + ?2 WHERE id = ?1",
                params![session, tokens],
            ),
            Event::Counters { session, tokens, cost } => s.execute(
                "UPDATE sessions SET input_tokens = input_tokens + ?2,
                 estimated_cost_usd = COALESCE(estimated_cost_usd, 0) + ?3 WHERE id = ?1",
                params![session, tokens, cost],
            ),
            Event::Aux { .. } if self.old_schema => Ok(0),
            Event::Aux { session, task, cost } => s.execute(
                "INSERT INTO session_model_usage (session_id, model, task, input_tokens,
                 estimated_cost_usd, first_seen, last_seen) VALUES (?1, 'aux', ?2, 40, ?3, ?4, ?4)
                 ON CONFLICT DO UPDATE SET estimated_cost_usd = estimated_cost_usd + excluded.estimated_cost_usd,
                 last_seen = excluded.last_seen",
                params![session, task, cost, at],
            ),
            Event::End { session, reason } if self.old_schema => s.execute(
                "UPDATE sessions SET end_reason = ?2 WHERE id = ?1",
                params![session, reason],
            ),
            Event::End { session, reason } => s.execute(
                "UPDATE sessions SET ended_at = ?2, end_reason = ?3 WHERE id = ?1",
                params![session, at, reason],
            ),
        };
        done.expect("the event must apply");
    }

    fn options(&self, now: f64) -> ReportOptions {
        let mut opts = ReportOptions::new(&self.dir);
        opts.now = Some(now);
        opts.managed_dir = ManagedDir::Off;
        opts
    }
}

fn jobs() -> Vec<SimJob> {
    let job = |id: &str, every: f64, first: f64, kind| SimJob {
        id: id.to_string(),
        every,
        first,
        kind,
    };
    vec![
        job("a1b2c3d4e5f6", 900.0, START, Kind::Agent),
        job("b2c3d4e5f6a1", 1800.0, START + 77.0, Kind::Gated),
        job("c3d4e5f6a1b2", 1200.0, START + 33.0, Kind::NoAgent),
        job("d4e5f6a1b2c3", 3600.0, START + 301.0, Kind::Long),
        // Created in the middle of the week: its span starts there.
        job("e5f6a1b2c3d4", 600.0, START + 3.3 * DAY, Kind::Agent),
    ]
}

/// A job that ran and was then deleted from `jobs.json`: its runs are listed after the others.
fn gone_job() -> SimJob {
    SimJob {
        id: "f6a1b2c3d4e5".into(),
        every: 2700.0,
        first: START + 1000.0,
        kind: Kind::Agent,
    }
}

/// Write a week of history, then report every `step` seconds for `hours`, through one
/// cache and in full; returns the cache's counters. `between` runs before each report.
fn simulate(
    dir: &Path,
    old_schema: bool,
    prune: bool,
    hours: f64,
    step: f64,
    between: impl FnMut(&mut Home, f64, usize),
) -> Counters {
    let setup = Setup {
        old_schema,
        prune,
        ..Setup::default()
    };
    simulate_home(dir, setup, hours, step, between)
}

/// [`simulate`] with every part of the setup.
fn simulate_home(
    dir: &Path,
    setup: Setup,
    hours: f64,
    step: f64,
    mut between: impl FnMut(&mut Home, f64, usize),
) -> Counters {
    let delay = |mut job: SimJob| {
        job.first = job.first.max(setup.first_fire.unwrap_or(f64::MIN));
        job
    };
    let listed: Vec<SimJob> = jobs().into_iter().map(delay).collect();
    let mut all = listed.clone();
    all.push(delay(gone_job()));
    let end = START + 7.0 * DAY + hours * 3600.0;
    let events = schedule(&all, START, end, 0x9e37_79b9_7f4a_7c15);
    let mut home = Home::create(dir, &listed, setup.old_schema, setup.prune);
    home.fall_back = setup.fall_back;
    let cache = CostCache::new();
    let mut next = 0;
    let mut now = START + 7.0 * DAY;
    let mut report = 0;
    while now <= end {
        home.ledger.execute_batch("BEGIN").expect("begin");
        home.state.execute_batch("BEGIN").expect("begin");
        while next < events.len() && events[next].0 <= now {
            home.apply(events[next].0, &events[next].1);
            next += 1;
        }
        home.ledger.execute_batch("COMMIT").expect("commit");
        home.state.execute_batch("COMMIT").expect("commit");
        between(&mut home, now, report);
        let opts = home.options(now);
        let cached = cache.cron_cost(&opts);
        let full = cron_cost(&opts);
        assert!(
            cached.errors.is_empty(),
            "report {report}: {:?}",
            cached.errors
        );
        assert_eq!(
            serde_json::to_value(&cached).expect("serializes"),
            serde_json::to_value(&full).expect("serializes"),
            "report {report} at {} must equal the full recompute ({:?})",
            time::format_iso_z(now),
            cache.counters()
        );
        now += step;
        report += 1;
    }
    cache.counters()
}

#[test]
fn incremental_reports_equal_full_recomputes_while_a_home_grows() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let counters = simulate(dir.path(), false, false, 14.0, 420.0, |_, _, _| {});
    // 14 h of reports every 7 min: the first one and the periodic ones are full.
    assert!(counters.incremental >= 100, "{counters:?}");
    assert!(counters.full <= 5, "{counters:?}");
    assert_eq!(counters.mismatches, 0, "{counters:?}");
}

#[test]
fn a_ledger_hermes_prunes_to_its_newest_thousand_rows_reads_the_same() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let counters = simulate(dir.path(), false, true, 6.0, 300.0, |home, _, report| {
        if report == 0 {
            let kept: i64 = home
                .ledger
                .query_row(
                    "SELECT COUNT(*) FROM executions WHERE status != 'claimed'",
                    [],
                    |r| r.get(0),
                )
                .expect("count");
            assert!(kept <= 1001, "the ledger must be pruned: {kept} rows");
        }
    });
    assert!(counters.incremental >= 50, "{counters:?}");
    assert_eq!(counters.mismatches, 0, "{counters:?}");
}

#[test]
fn a_vacuumed_state_db_is_noticed_and_read_again() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let counters = simulate(dir.path(), false, false, 3.0, 600.0, |home, _, report| {
        if report == 6 {
            // Some early sessions pruned and the file vacuumed: row ids are renumbered.
            home.state
                .execute(
                    "DELETE FROM sessions WHERE started_at < ?1 AND rowid % 3 = 0",
                    [START + 0.5 * DAY],
                )
                .expect("prune sessions");
            home.state.execute_batch("VACUUM").expect("vacuum");
        }
    });
    // The report after the VACUUM was recomputed in full.
    assert!(counters.full >= 2, "{counters:?}");
    assert!(counters.incremental >= 10, "{counters:?}");
}

#[test]
fn a_schema_from_an_older_hermes_reads_the_same() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let counters = simulate(dir.path(), true, false, 2.0, 600.0, |_, _, _| {});
    // Without end times nothing settles: each report is a full one, and nothing is kept.
    assert_eq!(counters.incremental, 0, "{counters:?}");
    assert_eq!(counters.full, 13, "{counters:?}");
}

#[test]
fn a_home_replaced_under_the_gate_is_read_afresh() {
    let root = tempfile::tempdir().expect("a temp dir");
    let live = root.path().join("home");
    let replaced = std::cell::Cell::new(false);
    let counters = simulate(&live, false, false, 3.0, 600.0, |home, now, report| {
        if report == 8 {
            // A restore: another home (fewer jobs, other history) moved into place.
            let other = root.path().join("other");
            let events = schedule(&jobs()[..2], START + DAY, now, 7);
            let fresh = Home::create(&other, &jobs()[..2], false, false);
            for (at, event) in &events {
                fresh.apply(*at, event);
            }
            drop(fresh);
            let old = root.path().join("old");
            std::fs::rename(&live, &old).expect("move the old home away");
            std::fs::rename(&other, &live).expect("move the new home in");
            home.ledger = Connection::open(live.join("cron/executions.db")).expect("reopen");
            home.state = Connection::open(live.join("state.db")).expect("reopen");
            replaced.set(true);
        }
    });
    assert!(replaced.get());
    assert!(counters.full >= 2, "{counters:?}");
}

#[test]
fn a_cache_for_one_home_does_not_answer_for_another() {
    let root = tempfile::tempdir().expect("a temp dir");
    let mut all = jobs();
    all.push(gone_job());
    let now = START + 7.0 * DAY;
    let cache = CostCache::new();
    for (name, seed) in [("one", 1), ("two", 2)] {
        let home = Home::create(&root.path().join(name), &jobs(), false, false);
        for (at, event) in schedule(&all, START, now, seed) {
            home.apply(at, &event);
        }
        let opts = home.options(now);
        assert_eq!(
            serde_json::to_value(cache.cron_cost(&opts)).expect("serializes"),
            serde_json::to_value(cron_cost(&opts)).expect("serializes"),
            "{name}"
        );
    }
    assert_eq!(cache.counters().full, 2);
}

#[test]
fn a_daylight_saving_change_inside_the_window_keeps_the_cache() {
    let dir = tempfile::tempdir().expect("a temp dir");
    // Summer time ended two hours before the first report: the window holds claims at
    // +02:00 and +01:00, and the hour after the change repeats local times.
    let setup = Setup {
        fall_back: Some(START + 7.0 * DAY - 2.0 * 3600.0),
        ..Setup::default()
    };
    let counters = simulate_home(dir.path(), setup, 6.0, 600.0, |_, _, _| {});
    assert!(counters.incremental >= 30, "{counters:?}");
    assert!(counters.full <= 2, "{counters:?}");
    assert_eq!(counters.mismatches, 0, "{counters:?}");
}

#[test]
fn a_daylight_saving_change_between_reports_keeps_the_cache() {
    let dir = tempfile::tempdir().expect("a temp dir");
    // Summer time ends an hour after the first report: new claims change offset under the
    // cache. (Unpruned: on a pruned ledger, pruning alone already sends some reports back to
    // a full recompute; the pruned case with mixed offsets is the figures test below.)
    let setup = Setup {
        fall_back: Some(START + 7.0 * DAY + 3600.0),
        ..Setup::default()
    };
    let counters = simulate_home(dir.path(), setup, 6.0, 600.0, |_, _, _| {});
    assert!(counters.incremental >= 30, "{counters:?}");
    assert!(counters.full <= 2, "{counters:?}");
    assert_eq!(counters.mismatches, 0, "{counters:?}");
}

#[test]
fn an_empty_ledger_keeps_the_cache_until_its_first_rows_and_after() {
    let dir = tempfile::tempdir().expect("a temp dir");
    // A new home: the jobs exist, none has fired yet; the first fires two hours in.
    let setup = Setup {
        first_fire: Some(START + 7.0 * DAY + 2.0 * 3600.0),
        ..Setup::default()
    };
    let counters = simulate_home(dir.path(), setup, 5.0, 600.0, |home, _, report| {
        if report == 0 {
            let rows: i64 = home
                .ledger
                .query_row("SELECT COUNT(*) FROM executions", [], |r| r.get(0))
                .expect("count");
            assert_eq!(rows, 0, "the ledger must start empty");
        }
    });
    assert_eq!(counters.full, 1, "{counters:?}");
    assert!(counters.incremental >= 29, "{counters:?}");
}

#[test]
fn a_pruned_ledger_reads_only_its_covered_span_with_the_whole_window_figures() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let setup = Setup {
        prune: true,
        fall_back: Some(START + 7.0 * DAY - 2.0 * 3600.0),
        ..Setup::default()
    };
    let mut checked = 0;
    simulate_home(dir.path(), setup, 2.0, 1800.0, |home, now, _| {
        let opts = home.options(now);
        let since = now - 7.0 * DAY;
        // The report as it was computed before it read only the covered span: every turn
        // of the window and the whole ledger near it.
        let turns = super::super::turns::read_turns(
            &home.dir.join("state.db"),
            since,
            now,
            opts.busy_timeout,
        )
        .expect("state.db must read");
        let ledger = super::super::ledger::read_ledger(
            &home.dir.join("cron/executions.db"),
            since,
            &job_ids(&turns),
            opts.busy_timeout,
        )
        .expect("the ledger must read");
        assert!(
            ledger.coverage_from(since).is_some(),
            "the pruned ledger must cover only part of the window"
        );
        let read = FullRead::jobs(&opts);
        let whole = super::super::cost::compute(&super::super::cost::CostInputs {
            jobs: &read.jobs,
            ledger: Some(&ledger),
            turns: Some(&turns),
            since,
            until: now,
            days: opts.days,
        });
        assert_eq!(
            cron_cost(&opts).cost,
            whole,
            "reading the covered span must give the whole window's figures"
        );
        checked += 1;
    });
    assert_eq!(checked, 5);
}
