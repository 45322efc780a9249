//! The cron execution ledger (`cron/executions.db`): one row per run attempt.
//!
//! Hermes keeps only the newest 1000 terminal rows across all jobs, so the ledger is a rolling
//! window; [`Ledger::coverage_from`] says from when it is complete. Failed rows whose error
//! says the execution never started (a lost fire claim, a dispatch failure) are attempts, not
//! runs: no agent, no session, no cost.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;

use super::sqlite::{DbError, column_or, columns, open_read_only, str_at, text_at};
use super::time::{DAY_SECONDS, format_date, parse_iso};

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
}

/// The rows of the ledger near the window, and what is known about pruning.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ledger {
    /// Attempts claimed from two days before the window start on.
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
        let oldest = self.oldest_terminal?;
        (self.terminal_rows >= MAX_TERMINAL_EXECUTIONS && oldest > since).then_some(oldest)
    }
}

/// Read the ledger at `path`, keeping attempts claimed since `since` minus two days (a run
/// claimed before the window can still own a session that starts inside it).
pub fn read_ledger(path: &Path, since: f64, busy: Duration) -> Result<Ledger, DbError> {
    let (conn, _) = open_read_only(path, busy)?;
    let err = |e| DbError::sqlite(path, e);
    // Rows and pruning statistics from one snapshot.
    let _snapshot = conn.unchecked_transaction().map_err(err)?;
    let cols = columns(&conn, "executions").map_err(err)?;
    for needed in ["job_id", "status", "claimed_at"] {
        if !cols.contains(needed) {
            return Err(err(rusqlite::Error::InvalidColumnName(format!(
                "executions.{needed}"
            ))));
        }
    }
    let executions = read_rows(&conn, &cols, since).map_err(err)?;
    let (terminal_rows, oldest) = conn
        .query_row(
            "SELECT COUNT(*), MIN(claimed_at) FROM executions \
             WHERE status IN ('completed','failed','unknown')",
            [],
            |row| Ok((row.get::<_, i64>(0)?, row.get::<_, Option<String>>(1)?)),
        )
        .map_err(err)?;
    Ok(Ledger {
        executions,
        terminal_rows: u64::try_from(terminal_rows).unwrap_or(0),
        oldest_terminal: oldest.as_deref().and_then(parse_iso),
    })
}

fn read_rows(
    conn: &Connection,
    cols: &HashSet<String>,
    since: f64,
) -> rusqlite::Result<Vec<Execution>> {
    // ISO strings in any offset sort like instants to within a day, so a date two days
    // early is a safe index-friendly lower bound; the exact cut happens after parsing.
    let sql = format!(
        "SELECT e.job_id, e.status, e.claimed_at, {}, {} FROM executions e \
         WHERE e.claimed_at >= ?1",
        column_or(cols, "e", "finished_at", "NULL"),
        column_or(cols, "e", "error", "NULL"),
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query([format_date(since - 2.0 * DAY_SECONDS)])?;
    let mut executions = Vec::new();
    while let Some(row) = rows.next()? {
        let (Some(status), Some(claimed)) = (str_at(row, 1)?, str_at(row, 2)?) else {
            continue;
        };
        let Some(mut execution) = execution(status, claimed, str_at(row, 3)?, str_at(row, 4)?)
        else {
            continue;
        };
        let Some(job_id) = text_at(row, 0)? else {
            continue;
        };
        execution.job_id = job_id;
        executions.push(execution);
    }
    Ok(executions)
}

/// An execution from its status, timestamps and error (the job id is filled in by the caller).
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
    })
}
