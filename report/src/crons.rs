//! `crons --cost --json`: the cron list, its audit and the cost per job, read from
//! `cron/jobs.json`, `cron/executions.db` and `state.db` (see [`read_full`]).

use serde::Serialize;

use super::audit::{self, Audit};
use super::cost::{self, CostSection};
use super::options::{CONTRACT_VERSION, PLUGIN, ReportOptions};
use super::status::{self, CronEntry};
use super::{effective, jobs, ledger, managed, sqlite, time, turns};

/// `crons --cost --json`: the cron list, its audit and the cost object.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CronCostReport {
    /// Name of the contract (`fleet-policy`).
    pub plugin: &'static str,
    /// Version of the contract.
    pub version: &'static str,
    /// Every cron job, paused ones included.
    pub crons: Vec<CronEntry>,
    /// Jobs that escape the fleet defaults or keep failing.
    pub audit: Audit,
    /// Measured cost per job.
    pub cost: CostSection,
    /// What could not be read (absent when everything was read).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// Build the cron cost report.
pub fn cron_cost(opts: &ReportOptions) -> CronCostReport {
    let until = opts.now_unix();
    let since = until - f64::from(opts.days) * time::DAY_SECONDS;
    let read = read_full(opts, since, until);
    read.report(opts, since, until)
}

/// Everything a full cost report reads, with the snapshots it read through (still open,
/// so a caller can probe the same commit).
pub(crate) struct FullRead {
    pub(crate) jobs: Vec<jobs::CronJob>,
    pub(crate) merged: effective::MergedConfig,
    pub(crate) ledger: Option<ledger::Ledger>,
    pub(crate) turns: Option<Vec<turns::AgentTurn>>,
    pub(crate) errors: Vec<String>,
    pub(crate) ledger_snapshot: Option<ledger::LedgerSnapshot>,
    pub(crate) state_snapshot: Option<turns::StateSnapshot>,
}

impl FullRead {
    /// The report from what was read.
    pub(crate) fn report(self, opts: &ReportOptions, since: f64, until: f64) -> CronCostReport {
        let cost = cost::compute(&cost::CostInputs {
            jobs: &self.jobs,
            ledger: self.ledger.as_ref(),
            turns: self.turns.as_deref(),
            since,
            until,
            days: opts.days,
        });
        self.finish(cost)
    }

    /// The report around a computed cost object.
    pub(crate) fn finish(self, cost: CostSection) -> CronCostReport {
        CronCostReport {
            plugin: PLUGIN,
            version: CONTRACT_VERSION,
            crons: self.jobs.iter().map(CronEntry::from).collect(),
            audit: audit::audit(&self.jobs, &self.merged.tree),
            cost,
            errors: self.errors,
        }
    }
}

impl FullRead {
    /// The jobs and the effective config; nothing read from the databases yet.
    pub(crate) fn jobs(opts: &ReportOptions) -> Self {
        let mut errors = Vec::new();
        let jobs = status::jobs_or_error(opts, &mut errors);
        let managed = managed::load(&opts.managed_dir);
        let merged = effective::merge_config(&opts.hermes_home, &managed.config);
        Self {
            jobs,
            merged,
            ledger: None,
            turns: None,
            errors,
            ledger_snapshot: None,
            state_snapshot: None,
        }
    }
}

/// Read the jobs, the ledger and the turns of the window `[since, until]` that the report
/// counts: when Hermes has pruned its ledger inside the window, only the turns from the
/// ledger's coverage on (no run before it is counted, see [`cost`]).
pub(crate) fn read_full(opts: &ReportOptions, since: f64, until: f64) -> FullRead {
    let mut read = FullRead::jobs(opts);
    let errors = &mut read.errors;
    let ledger_path = opts.hermes_home.join("cron").join("executions.db");
    let state_path = opts.hermes_home.join("state.db");
    let busy = opts.busy_timeout;
    let ledger = ledger::LedgerSnapshot::open(&ledger_path, busy);
    // On a busy fleet Hermes' 1,000 terminal rows span minutes of the window: the sessions
    // before them (most of `state.db`) belong to no counted run and are not read. A probe
    // that fails leaves the whole window to read; the ledger read reports the error.
    let covered = ledger
        .as_ref()
        .ok()
        .and_then(|snapshot| snapshot.coverage_from(since).ok().flatten());
    let range = turns::TurnRange::covered(since, until, covered);
    // The two databases are independent files: read them side by side.
    let (ledger, turns) = std::thread::scope(|scope| {
        let ledger = scope.spawn(move || {
            let snapshot = ledger?;
            let ledger = snapshot.window(since)?;
            Ok((ledger, snapshot))
        });
        let turns = turns::StateSnapshot::open(&state_path, busy).and_then(|snapshot| {
            let helper = (std::fs::metadata(&state_path).map_or(0, |m| m.len())
                >= turns::PARALLEL_PROBES_FILE_BYTES)
                .then(|| snapshot.helper(busy))
                .flatten();
            let turns = snapshot.turns(range, helper)?;
            Ok((turns, snapshot))
        });
        (ledger.join(), turns)
    });
    let ledger = match ledger {
        Ok(result) => readable(result, errors),
        Err(_) => {
            errors.push("failed to read cron/executions.db: the reader panicked".to_string());
            None
        }
    };
    let (turns, state_snapshot) = readable(turns, errors).unzip();
    let (mut ledger, mut ledger_snapshot) = ledger.unzip();
    // A turn in the window may belong to a run claimed before the rows read.
    if let (Some(ledger), Some(snapshot), Some(turns)) = (&mut ledger, &ledger_snapshot, &turns)
        && let Err(err) = snapshot.add_priors(ledger, &turns::job_ids(turns))
    {
        errors.push(err.to_string());
        ledger_snapshot = None;
    }
    // A ledger whose priors could not be read is as unreadable as one that failed to open.
    if ledger_snapshot.is_none() {
        ledger = None;
    }
    FullRead {
        ledger,
        turns,
        ledger_snapshot,
        state_snapshot,
        ..read
    }
}

/// A store's content, or `None` with the reason recorded (a missing file is not an error:
/// `sources.<x>: false` says it).
fn readable<T>(result: Result<T, sqlite::DbError>, errors: &mut Vec<String>) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(sqlite::DbError::Missing(_)) => None,
        Err(err) => {
            errors.push(err.to_string());
            None
        }
    }
}
