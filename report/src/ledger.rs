//! The cron execution ledger (`cron/executions.db`): one row per run attempt.
//!
//! Hermes keeps only the newest 1000 terminal rows across all jobs, so the ledger is a rolling
//! window; [`Ledger::coverage_from`] says from when it is complete. Failed rows whose error
//! says the execution never started (a lost fire claim, a dispatch failure) are attempts, not
//! runs: no agent, no session, no cost.

use std::cell::RefCell;
use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;

use super::sqlite::{DbError, column_or, columns, open_read_only, str_at, text_at};
use super::time::{DAY_SECONDS, format_date, format_local, offset_seconds, parse_iso, stamp_shape};

/// Terminal rows Hermes keeps before pruning the oldest.
pub const MAX_TERMINAL_EXECUTIONS: u64 = 1000;

/// Error texts (exact or prefix) of failed rows whose execution never started.
const NOT_STARTED: [&str; 7] = [
    "Fire claim lost; execution was not started.",
    "Dispatch claim rejected; execution was not started.",
    "Executor dispatch failed: ",
    "Fire claim ownership could not be validated before execution started.",
    "Fire claim ownership lost before execution started.",
    "Fire claim heartbeat could not be started; execution was not run.",
    "Restart-safe cron worker dispatch failed: ",
];

/// Status of an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecStatus {
    /// Claimed, not yet running.
    Claimed,
    /// Running.
    Running,
    /// Finished successfully.
    Completed,
    /// Finished with an error.
    Failed,
    /// Owner died before a terminal state.
    Unknown,
}

impl ExecStatus {
    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "claimed" => Self::Claimed,
            "running" => Self::Running,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "unknown" => Self::Unknown,
            _ => return None,
        })
    }

    /// Completed, failed or unknown.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Unknown)
    }
}

/// One attempt.
#[derive(Clone, Debug, PartialEq)]
pub struct Execution {
    /// The job.
    pub job_id: String,
    /// Its status.
    pub status: ExecStatus,
    /// Claim time, Unix seconds.
    pub claimed_at: f64,
    /// Terminal time, Unix seconds.
    pub finished_at: Option<f64>,
    /// A failed attempt that never started an execution.
    pub not_started: bool,
    /// Row id: the insertion order, which breaks ties between equal claim times.
    pub seq: i64,
}

/// The rows of the ledger near the window, and what is known about pruning.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ledger {
    /// Attempts claimed from two days before the window start on, and for each job with
    /// agent turns its last attempt claimed before that (it may own a turn in the window).
    pub executions: Vec<Execution>,
    /// Terminal rows in the whole ledger.
    pub terminal_rows: u64,
    /// Claim time of the oldest terminal row (Hermes prunes oldest-claimed first).
    pub oldest_terminal: Option<f64>,
}

impl Ledger {
    /// When Hermes has pruned rows that fall inside the window, the instant from which the
    /// ledger is complete; `None` when it covers the whole window.
    pub fn coverage_from(&self, since: f64) -> Option<f64> {
        coverage_from(self.terminal_rows, self.oldest_terminal, since)
    }
}

/// [`Ledger::coverage_from`] from its two figures.
pub fn coverage_from(terminal_rows: u64, oldest_terminal: Option<f64>, since: f64) -> Option<f64> {
    let oldest = oldest_terminal?;
    (terminal_rows >= MAX_TERMINAL_EXECUTIONS && oldest > since).then_some(oldest)
}

/// Read the ledger at `path`, keeping attempts claimed since `since` minus two days (a run
/// claimed before the window can still own a session that starts inside it), and for each
/// of `turn_jobs` the last attempt claimed before those.
pub fn read_ledger(
    path: &Path,
    since: f64,
    turn_jobs: &[&str],
    busy: Duration,
) -> Result<Ledger, DbError> {
    let snapshot = LedgerSnapshot::open(path, busy)?;
    let mut ledger = snapshot.window(since)?;
    snapshot.add_priors(&mut ledger, turn_jobs)?;
    Ok(ledger)
}

/// One read snapshot of the ledger: every query through it sees the same commit.
pub struct LedgerSnapshot {
    conn: Connection,
    cols: HashSet<String>,
    path: std::path::PathBuf,
    /// The text bound the rows read start at (priors are claimed before it).
    floor: RefCell<Option<String>>,
    /// The shapes of every claim text read so far.
    shapes: RefCell<Shapes>,
}

impl std::fmt::Debug for LedgerSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerSnapshot")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// The distinct shapes ([`stamp_shape`]) of claim texts, an irregular text as `(0, "")`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shapes(pub Vec<(u8, String)>);

/// What the claim texts read have in common.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimTexts {
    /// No claim text was read.
    None,
    /// Every text has one separator and a regular offset.
    Shaped(ClaimShape),
    /// A text is not a full timestamp, or two separators are mixed: text order says nothing.
    Irregular,
}

/// How claim texts are written: one date/time separator, UTC offsets between two bounds
/// (two after a daylight-saving change). Texts of one offset sort like their instants;
/// across offsets a text is off by at most the spread, so a range of instants is read
/// through the text index widened by it and then filtered by instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimShape {
    /// The date/time separator (`T` or a space).
    pub sep: u8,
    /// The smallest offset seen, seconds east of UTC.
    pub min_offset: i64,
    /// The largest offset seen.
    pub max_offset: i64,
}

impl Shapes {
    /// Record the shape of `text`.
    pub fn note(&mut self, text: &str) {
        let shape = stamp_shape(text).unwrap_or((0, ""));
        if !self
            .0
            .iter()
            .any(|(sep, off)| *sep == shape.0 && off == shape.1)
        {
            self.0.push((shape.0, shape.1.to_string()));
        }
    }

    /// What every text recorded has in common.
    pub fn claims(&self) -> ClaimTexts {
        let mut found = ClaimTexts::None;
        for (sep, offset) in &self.0 {
            let Some(offset) = offset_seconds(offset).filter(|_| *sep != 0) else {
                return ClaimTexts::Irregular;
            };
            let one = ClaimShape {
                sep: *sep,
                min_offset: offset,
                max_offset: offset,
            };
            found = match found {
                ClaimTexts::None => ClaimTexts::Shaped(one),
                ClaimTexts::Shaped(seen) => match seen.merge(one) {
                    Some(merged) => ClaimTexts::Shaped(merged),
                    None => return ClaimTexts::Irregular,
                },
                ClaimTexts::Irregular => return ClaimTexts::Irregular,
            };
        }
        found
    }
}

impl ClaimShape {
    /// The shape texts of both have; `None` when their separators differ.
    pub fn merge(self, other: Self) -> Option<Self> {
        (self.sep == other.sep).then(|| Self {
            sep: self.sep,
            min_offset: self.min_offset.min(other.min_offset),
            max_offset: self.max_offset.max(other.max_offset),
        })
    }

    /// A text at or below the claim text of every instant from `unix` on.
    pub fn from_text(&self, unix: i64) -> String {
        format_local(unix, self.min_offset, self.sep)
    }

    /// A text above the claim text of every instant before `unix`.
    pub fn before_text(&self, unix: i64) -> String {
        format_local(unix, self.max_offset, self.sep)
    }

    /// Whether texts of different offsets are mixed (text order is then not time order).
    pub fn mixed(&self) -> bool {
        self.min_offset != self.max_offset
    }
}

impl LedgerSnapshot {
    /// Open `path` read-only and begin a read transaction.
    pub fn open(path: &Path, busy: Duration) -> Result<Self, DbError> {
        let (conn, _) = open_read_only(path, busy)?;
        let err = |e| DbError::sqlite(path, e);
        conn.execute_batch("BEGIN").map_err(err)?;
        let cols = columns(&conn, "executions").map_err(err)?;
        for needed in ["job_id", "status", "claimed_at"] {
            if !cols.contains(needed) {
                return Err(err(rusqlite::Error::InvalidColumnName(format!(
                    "executions.{needed}"
                ))));
            }
        }
        Ok(Self {
            conn,
            cols,
            path: path.to_path_buf(),
            floor: RefCell::new(None),
            shapes: RefCell::new(Shapes::default()),
        })
    }

    fn err(&self, e: rusqlite::Error) -> DbError {
        DbError::sqlite(&self.path, e)
    }

    /// The connection (for the caller's own probes in the same snapshot).
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    /// The rows a full report reads: claimed from two days before `since` on, and the
    /// pruning statistics.
    pub fn window(&self, since: f64) -> Result<Ledger, DbError> {
        // ISO strings in any offset sort like instants to within a day, so a date two days
        // early is a safe index-friendly lower bound.
        let floor = format_date(since - 2.0 * DAY_SECONDS);
        let executions = self.rows(&floor, None, false)?;
        let (terminal_rows, oldest) = self
            .conn
            .query_row(
                "SELECT COUNT(*), MIN(claimed_at) FROM executions \
                 WHERE status IN ('completed','failed','unknown')",
                [],
                |row| Ok((row.get::<_, i64>(0)?, row.get::<_, Option<String>>(1)?)),
            )
            .map_err(|e| self.err(e))?;
        *self.floor.borrow_mut() = Some(floor);
        Ok(Ledger {
            executions,
            terminal_rows: u64::try_from(terminal_rows).unwrap_or(0),
            oldest_terminal: oldest.as_deref().and_then(parse_iso),
        })
    }

    /// [`Ledger::coverage_from`] without reading the rows: the oldest terminal claim (one
    /// index probe per status) and whether Hermes' limit of terminal rows is reached.
    pub fn coverage_from(&self, since: f64) -> Result<Option<f64>, DbError> {
        let Some(oldest) = self.oldest_terminal()? else {
            return Ok(None);
        };
        // Counting stops at the limit: only whether it is reached matters here.
        let reached = self.count(
            "rowid IN (SELECT rowid FROM executions \
             WHERE status IN ('completed','failed','unknown') LIMIT ?1)",
            &[&(MAX_TERMINAL_EXECUTIONS as i64)],
        )?;
        Ok(coverage_from(reached, parse_iso(&oldest), since))
    }

    /// Add, for each job of `jobs`, its last attempt claimed before the rows read.
    pub fn add_priors(&self, ledger: &mut Ledger, jobs: &[&str]) -> Result<(), DbError> {
        let Some(floor) = self.floor.borrow().clone() else {
            return Ok(());
        };
        let shape = match self.shapes().claims() {
            ClaimTexts::Shaped(shape) => Some(shape),
            ClaimTexts::None | ClaimTexts::Irregular => None,
        };
        let priors = self.priors(jobs, &floor, shape)?;
        ledger.executions.extend(priors);
        Ok(())
    }

    /// Rows claimed (as text) in `[lo, hi)`, `hi` open-ended when `None`, in any order;
    /// `short` when the range holds a small part of the ledger.
    pub fn rows(&self, lo: &str, hi: Option<&str>, short: bool) -> Result<Vec<Execution>, DbError> {
        let upper = if hi.is_some() {
            " AND e.claimed_at < ?2"
        } else {
            ""
        };
        // A short range names every status so SQLite range-scans the (status, claimed_at)
        // index (a row with another status is not an execution the report reads anyway); a
        // whole window is read faster by one pass over the table.
        let statuses = if short {
            "e.status IN ('claimed','running','completed','failed','unknown') AND "
        } else {
            ""
        };
        let sql = format!(
            "{} WHERE {statuses}e.claimed_at >= ?1{upper}",
            self.select()
        );
        let mut stmt = self.conn.prepare(&sql).map_err(|e| self.err(e))?;
        let rows = match hi {
            Some(hi) => stmt.query(rusqlite::params![lo, hi]),
            None => stmt.query([lo]),
        };
        collect(rows, &mut self.shapes.borrow_mut()).map_err(|e| self.err(e))
    }

    /// For each job of `jobs`, its last attempt claimed (as text) before `before`, the
    /// latest instant when the texts mix offsets (`shape`).
    ///
    /// The last text `r` is not always the latest instant then, but the latest one is no
    /// earlier than `r`'s, so its text is at least `r`'s instant written with the smallest
    /// offset: the rows from there to `before` are read and the latest taken.
    pub fn priors(
        &self,
        jobs: &[&str],
        before: &str,
        shape: Option<ClaimShape>,
    ) -> Result<Vec<Execution>, DbError> {
        let sql = format!(
            "{} WHERE e.job_id = ?1 AND e.claimed_at < ?2 \
             ORDER BY e.claimed_at DESC, e.rowid DESC LIMIT 1",
            self.select()
        );
        let near = format!(
            "{} WHERE e.job_id = ?1 AND e.claimed_at >= ?2 AND e.claimed_at < ?3",
            self.select()
        );
        let mut stmt = self.conn.prepare(&sql).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for job in jobs {
            let rows = stmt.query(rusqlite::params![job, before]);
            let found = collect(rows, &mut self.shapes.borrow_mut()).map_err(|e| self.err(e))?;
            let (Some(shape), Some(last)) = (shape.filter(ClaimShape::mixed), found.first()) else {
                out.extend(found);
                continue;
            };
            let from = shape.from_text(last.claimed_at.floor() as i64);
            let mut near = self.conn.prepare_cached(&near).map_err(|e| self.err(e))?;
            let rows = near.query(rusqlite::params![job, from, before]);
            let candidates =
                collect(rows, &mut self.shapes.borrow_mut()).map_err(|e| self.err(e))?;
            let latest = candidates.into_iter().max_by(|a, b| {
                a.claimed_at
                    .total_cmp(&b.claimed_at)
                    .then(a.seq.cmp(&b.seq))
            });
            out.extend(latest);
        }
        Ok(out)
    }

    /// Terminal rows claimed in the instants `[lo, hi)`, their texts written as `shape`.
    pub fn terminal_between(&self, lo: i64, hi: i64, shape: ClaimShape) -> Result<u64, DbError> {
        let (lo_text, hi_text) = (shape.from_text(lo), shape.before_text(hi));
        let condition =
            "status IN ('completed','failed','unknown') AND claimed_at >= ?1 AND claimed_at < ?2";
        if !shape.mixed() {
            return self.count(condition, &[&lo_text, &hi_text]);
        }
        // Mixed offsets: the text range holds a little more; count by instant.
        let sql = format!("SELECT claimed_at FROM executions WHERE {condition}");
        let mut stmt = self.conn.prepare(&sql).map_err(|e| self.err(e))?;
        let mut rows = stmt
            .query(rusqlite::params![lo_text, hi_text])
            .map_err(|e| self.err(e))?;
        let mut found = 0;
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            let claimed = str_at(row, 0).map_err(|e| self.err(e))?;
            let at = claimed.and_then(parse_iso);
            found += u64::from(at.is_some_and(|t| t >= lo as f64 && t < hi as f64));
        }
        Ok(found)
    }

    /// The claim text of the oldest terminal row, one index probe per terminal status.
    pub fn oldest_terminal(&self) -> Result<Option<String>, DbError> {
        let mut oldest: Option<String> = None;
        for status in ["completed", "failed", "unknown"] {
            let found: Option<String> = self
                .conn
                .query_row(
                    "SELECT MIN(claimed_at) FROM executions WHERE status = ?1",
                    [status],
                    |row| row.get(0),
                )
                .map_err(|e| self.err(e))?;
            if let Some(found) = found
                && oldest.as_ref().is_none_or(|o| found < *o)
            {
                oldest = Some(found);
            }
        }
        Ok(oldest)
    }

    /// Terminal rows, counted (one index range per terminal status).
    pub fn terminal_count(&self) -> Result<u64, DbError> {
        self.count("status IN ('completed','failed','unknown')", &[])
    }

    /// Rows matching `condition` (an SQL expression over `executions` with `?` parameters).
    pub fn count(&self, condition: &str, params: &[&dyn rusqlite::ToSql]) -> Result<u64, DbError> {
        let sql = format!("SELECT COUNT(*) FROM executions WHERE {condition}");
        self.conn
            .query_row(&sql, params, |row| row.get::<_, i64>(0))
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(|e| self.err(e))
    }

    fn select(&self) -> String {
        format!(
            "SELECT e.job_id, e.status, e.claimed_at, {}, {}, e.rowid FROM executions e",
            column_or(&self.cols, "e", "finished_at", "NULL"),
            column_or(&self.cols, "e", "error", "NULL"),
        )
    }

    /// The shapes of every claim text read through this snapshot.
    pub fn shapes(&self) -> Shapes {
        self.shapes.borrow().clone()
    }
}

fn collect(
    rows: rusqlite::Result<rusqlite::Rows<'_>>,
    shapes: &mut Shapes,
) -> rusqlite::Result<Vec<Execution>> {
    let mut rows = rows?;
    let mut executions = Vec::new();
    while let Some(row) = rows.next()? {
        let (Some(status), Some(claimed)) = (str_at(row, 1)?, str_at(row, 2)?) else {
            continue;
        };
        shapes.note(claimed);
        let Some(mut execution) = execution(status, claimed, str_at(row, 3)?, str_at(row, 4)?)
        else {
            continue;
        };
        let Some(job_id) = text_at(row, 0)? else {
            continue;
        };
        execution.job_id = job_id;
        execution.seq = row.get(5)?;
        executions.push(execution);
    }
    Ok(executions)
}

/// An execution from its status, timestamps and error (the job id and row id are filled in
/// by the caller).
fn execution(
    status: &str,
    claimed: &str,
    finished: Option<&str>,
    error: Option<&str>,
) -> Option<Execution> {
    let status = ExecStatus::parse(status)?;
    let not_started = status == ExecStatus::Failed
        && error.is_some_and(|e| NOT_STARTED.iter().any(|p| e.starts_with(p)));
    Some(Execution {
        job_id: String::new(),
        status,
        claimed_at: parse_iso(claimed)?,
        finished_at: finished.and_then(parse_iso),
        not_started,
        seq: 0,
    })
}
