//! Cron cost per job: runs, empty runs and dollars per day, from the ledger and the agent turns.
//!
//! The computation is pure (inputs already read) so every definition is tested in memory.
//! A run is matched to its agent turn by time: the turn's session starts inside the run
//! (`claimed_at ≤ started_at ≤ finished_at`). Everything is counted over the job's covered
//! span only, so per-day figures divide like by like.

use rustc_hash::FxHashMap;

use serde::Serialize;

use super::jobs::{CronJob, Gate};
use super::ledger::{ExecStatus, Execution, Ledger};
use super::silence::is_silence;
use super::time::{DAY_SECONDS, format_iso_z};
pub use super::turns::to_nanos;
use super::turns::{AgentTurn, FinalReply};

/// The `definition` string of the cost object: every term the figures use.
pub const DEFINITION: &str = "run = terminal execution (completed, failed, unknown) claimed in \
the covered span, except failed attempts that never started; an agent turn (session \
cron_<job_id>_<ts>) without a ledger row counts as a run too. empty run = a completed run whose \
agent did not start (script gate wakeAgent=false, empty script output, monitor no_change) or \
whose final reply was empty or a silence marker ([SILENT], SILENT, NO_REPLY, NO REPLY); null for \
no_agent jobs and when state.db is unreadable. cost = actual_cost_usd, else estimated_cost_usd, of \
the run's session and its parent_session_id descendants, plus their auxiliary \
session_model_usage rows (task != ''); tokens = input + output + cache read + cache write. \
gate = no_agent | monitor | script (gates only when it prints {\"wakeAgent\": false}) | null \
(the agent runs on every fire). per day = divided by span_days, the window shortened to the \
job's created_at and to executions_coverage_from when Hermes has pruned its ledger. flags: \
frequent_without_gate = no gate and more than 24 runs/day; mostly_empty = more than 80 % empty \
runs and at least 5 runs.";

/// Runs per day above which an ungated job is flagged.
const FREQUENT_RUNS_PER_DAY: f64 = 24.0;
/// Share of empty runs above which a job is flagged.
const MOSTLY_EMPTY_SHARE: f64 = 0.8;
/// Runs needed before the empty share means anything.
const MOSTLY_EMPTY_MIN_RUNS: u64 = 5;

/// A cost flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Flag {
    /// No gate and more than 24 runs per day.
    FrequentWithoutGate,
    /// More than 80 % empty runs, at least 5 runs.
    MostlyEmpty,
}

/// `cost.sources`: which stores were readable, and from when the ledger is complete.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sources {
    /// `cron/executions.db` was read.
    pub executions: bool,
    /// `state.db` was read.
    pub state_db: bool,
    /// Oldest claim still in a pruned ledger (ISO, UTC), null when the window is covered.
    pub executions_coverage_from: Option<String>,
}

/// One job of `cost.jobs`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobCost {
    /// Job id.
    pub id: String,
    /// Job name; null for a job no longer in `jobs.json`.
    pub name: Option<String>,
    /// Enabled and not paused (false for a job no longer in `jobs.json`).
    pub enabled: bool,
    /// Schedule display; null for a job no longer in `jobs.json`.
    pub schedule: Option<String>,
    /// What can keep the agent asleep.
    pub gate: Option<Gate>,
    /// Covered span in days (3 decimals).
    pub span_days: f64,
    /// Runs in the span.
    pub runs: u64,
    /// Failed or unknown runs.
    pub runs_failed: u64,
    /// Runs whose agent started (a session exists).
    pub agent_turns: u64,
    /// Completed runs that told the user nothing.
    pub empty_runs: Option<u64>,
    /// `empty_runs / runs` (3 decimals).
    pub empty_share: Option<f64>,
    /// Runs per day (2 decimals).
    pub runs_per_day: f64,
    /// Tokens of all turns.
    pub tokens: u64,
    /// Cost in USD (4 decimals).
    pub cost_usd: f64,
    /// Cost per day in USD (4 decimals).
    pub cost_per_day_usd: f64,
    /// Cost per run in USD (4 decimals); null without runs.
    pub cost_per_run_usd: Option<f64>,
    /// Flags raised.
    pub flags: Vec<Flag>,
}

/// The `cost` object.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CostSection {
    /// The window in days.
    pub window_days: u32,
    /// Window start (ISO, UTC).
    pub since: String,
    /// Window end (ISO, UTC).
    pub until: String,
    /// Which stores were read.
    pub sources: Sources,
    /// What every figure means.
    pub definition: &'static str,
    /// Per job, in `jobs.json` order, then jobs no longer there by id.
    pub jobs: Vec<JobCost>,
    /// Sum of the jobs' cost per day (4 decimals).
    pub total_cost_per_day_usd: f64,
    /// Ids of the jobs with a flag.
    pub flagged: Vec<String>,
}

/// What the cost computation reads.
#[derive(Clone, Copy, Debug)]
pub struct CostInputs<'a> {
    /// Jobs from `jobs.json`.
    pub jobs: &'a [CronJob],
    /// The ledger, `None` when unreadable.
    pub ledger: Option<&'a Ledger>,
    /// The agent turns, `None` when `state.db` is unreadable.
    pub turns: Option<&'a [AgentTurn]>,
    /// Window start, Unix seconds.
    pub since: f64,
    /// Window end, Unix seconds.
    pub until: f64,
    /// Window length in days.
    pub days: u32,
}

/// Compute the cost object.
pub fn compute(inputs: &CostInputs<'_>) -> CostSection {
    let coverage = inputs.ledger.and_then(|l| l.coverage_from(inputs.since));
    let executions = group_executions(inputs.ledger);
    let turns = group_turns(inputs.turns);
    let window = Window::of(inputs, coverage);
    let mut totals: Vec<(String, Totals)> = Vec::new();
    let ids = inputs
        .jobs
        .iter()
        .map(|job| job.id.as_str())
        .chain(orphan_ids(inputs.jobs, &executions, &turns));
    for id in ids {
        let lo = window.span_start(inputs.jobs, id);
        let runs = job_runs(
            lo,
            inputs.until,
            executions.get(id).map_or(&[][..], Vec::as_slice),
            turns.get(id).map_or(&[][..], Vec::as_slice),
        );
        totals.push((id.to_string(), Totals::of(&runs)));
    }
    window.section(inputs.jobs, &totals)
}

/// What the per-job figures are counted over: the window, shortened per job.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Window {
    pub(crate) since: f64,
    pub(crate) until: f64,
    pub(crate) days: u32,
    pub(crate) coverage: Option<f64>,
    pub(crate) executions_read: bool,
    pub(crate) turns_read: bool,
}

impl Window {
    fn of(inputs: &CostInputs<'_>, coverage: Option<f64>) -> Self {
        Self {
            since: inputs.since,
            until: inputs.until,
            days: inputs.days,
            coverage,
            executions_read: inputs.ledger.is_some(),
            turns_read: inputs.turns.is_some(),
        }
    }

    /// Where job `id`'s span starts: the window start, moved to the job's creation and to
    /// the ledger's coverage.
    pub(crate) fn span_start(&self, jobs: &[CronJob], id: &str) -> f64 {
        let created_at = jobs.iter().find(|j| j.id == id).and_then(|j| j.created_at);
        [Some(self.since), created_at, self.coverage]
            .into_iter()
            .flatten()
            .fold(f64::MIN, f64::max)
    }

    /// The cost object from each job's totals: jobs of `jobs.json` first (in its order,
    /// listed even without runs), then the others (listed only with runs).
    pub(crate) fn section(
        &self,
        cron_jobs: &[CronJob],
        totals: &[(String, Totals)],
    ) -> CostSection {
        let mut jobs: Vec<JobCost> = Vec::new();
        for (id, tally) in totals {
            let job = cron_jobs.iter().find(|j| j.id == *id);
            if job.is_none() && tally.runs == 0 {
                continue;
            }
            let span_start = self.span_start(cron_jobs, id);
            jobs.push(job_cost(id.clone(), job, span_start, self, tally));
        }
        let total: f64 = jobs.iter().map(|j| j.cost_per_day_usd).sum();
        CostSection {
            window_days: self.days,
            since: format_iso_z(self.since),
            until: format_iso_z(self.until),
            sources: Sources {
                executions: self.executions_read,
                state_db: self.turns_read,
                executions_coverage_from: self.coverage.map(format_iso_z),
            },
            definition: DEFINITION,
            flagged: jobs
                .iter()
                .filter(|j| !j.flags.is_empty())
                .map(|j| j.id.clone())
                .collect(),
            total_cost_per_day_usd: round(total, 4),
            jobs,
        }
    }
}

type ByJob<'a, T> = FxHashMap<&'a str, Vec<&'a T>>;

pub(crate) fn group_executions(ledger: Option<&Ledger>) -> ByJob<'_, Execution> {
    group_executions_of(ledger.map_or(&[][..], |l| &l.executions))
}

/// Executions by job, each list in claim order (row order breaks ties).
pub(crate) fn group_executions_of(executions: &[Execution]) -> ByJob<'_, Execution> {
    let mut by_job: ByJob<'_, Execution> = FxHashMap::default();
    for execution in executions {
        by_job
            .entry(execution.job_id.as_str())
            .or_default()
            .push(execution);
    }
    for list in by_job.values_mut() {
        list.sort_by(|a, b| {
            a.claimed_at
                .total_cmp(&b.claimed_at)
                .then(a.seq.cmp(&b.seq))
        });
    }
    by_job
}

pub(crate) fn group_turns(turns: Option<&[AgentTurn]>) -> ByJob<'_, AgentTurn> {
    let mut by_job: ByJob<'_, AgentTurn> = FxHashMap::default();
    for turn in turns.unwrap_or_default() {
        by_job.entry(turn.job_id.as_str()).or_default().push(turn);
    }
    by_job
}

/// Job ids with executions or turns that `jobs.json` no longer lists, sorted.
pub(crate) fn orphan_ids<'a>(
    jobs: &[CronJob],
    executions: &ByJob<'a, Execution>,
    turns: &ByJob<'a, AgentTurn>,
) -> Vec<&'a str> {
    let mut ids: Vec<&str> = executions
        .keys()
        .chain(turns.keys())
        .copied()
        .filter(|id| jobs.iter().all(|job| job.id != *id))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// One run of a job: where it is anchored in time and what it cost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunRecord {
    /// The execution's claim, or the turn's start for a run without a ledger row.
    pub anchor: f64,
    /// Failed or unknown.
    pub failed: bool,
    /// Agent turns attached.
    pub turns: u64,
    /// Tokens of those turns.
    pub tokens: u64,
    /// Their cost in nano-dollars (integers, so sums do not depend on their order).
    pub cost_nanos: i64,
    /// A completed run that told the user nothing.
    pub empty: bool,
}

/// The sums of a job's runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Runs.
    pub runs: u64,
    /// Failed or unknown runs.
    pub failed: u64,
    /// Agent turns.
    pub turns: u64,
    /// Empty runs.
    pub empty: u64,
    /// Tokens.
    pub tokens: u64,
    /// Cost in nano-dollars.
    pub cost_nanos: i64,
}

impl Totals {
    /// The totals of `runs`.
    pub fn of(runs: &[RunRecord]) -> Self {
        let mut totals = Self::default();
        for run in runs {
            totals.add_run(run);
        }
        totals
    }

    /// Count one run.
    pub fn add_run(&mut self, run: &RunRecord) {
        self.runs += 1;
        self.failed += u64::from(run.failed);
        self.turns += run.turns;
        self.empty += u64::from(run.empty);
        self.tokens += run.tokens;
        self.cost_nanos += run.cost_nanos;
    }

    /// Take away totals added before.
    pub fn sub(&mut self, other: &Self) {
        self.runs -= other.runs;
        self.failed -= other.failed;
        self.turns -= other.turns;
        self.empty -= other.empty;
        self.tokens -= other.tokens;
        self.cost_nanos -= other.cost_nanos;
    }

    /// Add other totals.
    pub fn add(&mut self, other: &Self) {
        self.runs += other.runs;
        self.failed += other.failed;
        self.turns += other.turns;
        self.empty += other.empty;
        self.tokens += other.tokens;
        self.cost_nanos += other.cost_nanos;
    }
}

/// One run being tallied.
#[derive(Debug, Default)]
struct Run {
    anchor: f64,
    failed: bool,
    turns: u64,
    /// Start of the latest turn attached, and whether its reply said nothing (decided when
    /// the turn is attached, while it is in cache).
    latest: Option<(f64, bool)>,
    cost_nanos: i64,
    tokens: u64,
}

impl Run {
    fn attach(&mut self, turn: &AgentTurn) {
        self.turns += 1;
        self.cost_nanos += turn.cost_nanos;
        self.tokens += turn.tokens;
        if self.latest.is_none_or(|(at, _)| at <= turn.started_at) {
            let silent = match &turn.reply {
                FinalReply::Empty => true,
                FinalReply::Text(reply) => is_silence(reply),
                FinalReply::Interrupted | FinalReply::Unknown => false,
            };
            self.latest = Some((turn.started_at, silent));
        }
    }

    /// A completed run that told the user nothing.
    fn is_empty(&self) -> bool {
        !self.failed && self.latest.is_none_or(|(_, silent)| silent)
    }

    fn record(&self) -> RunRecord {
        RunRecord {
            anchor: self.anchor,
            failed: self.failed,
            turns: self.turns,
            tokens: self.tokens,
            cost_nanos: self.cost_nanos,
            empty: self.is_empty(),
        }
    }
}

/// The runs of one job anchored in `[lo, hi]`: the executions' runs in claim order, then
/// the turns without one.
///
/// `execs` (in claim order) must hold every execution of the job claimed from `lo` on and
/// the last one claimed before it; `turns` every turn of the job that such a run can own or
/// that starts in `[lo, hi]`. A turn belongs to the execution whose `[claimed_at,
/// finished_at]` holds its start; one no execution owns is a run of its own.
pub fn job_runs(lo: f64, hi: f64, execs: &[&Execution], turns: &[&AgentTurn]) -> Vec<RunRecord> {
    let in_span = |t: f64| t >= lo && t <= hi;
    let mut runs = Vec::new();
    // Index of each execution's run, when the execution counts as one.
    let run_of: Vec<Option<usize>> = execs
        .iter()
        .map(|e| {
            let counts = e.status.is_terminal() && !e.not_started && in_span(e.claimed_at);
            counts.then(|| {
                let failed = matches!(e.status, ExecStatus::Failed | ExecStatus::Unknown);
                runs.push(Run {
                    anchor: e.claimed_at,
                    failed,
                    ..Run::default()
                });
                runs.len() - 1
            })
        })
        .collect();
    // Claim times side by side: the owner search touches one contiguous array.
    let claims: Vec<f64> = execs.iter().map(|e| e.claimed_at).collect();
    for turn in turns {
        match owning_execution(execs, &claims, turn.started_at) {
            Some(index) => {
                if let Some(run) = run_of[index] {
                    runs[run].attach(turn);
                }
            }
            None if in_span(turn.started_at) => {
                let mut run = Run {
                    anchor: turn.started_at,
                    ..Run::default()
                };
                run.attach(turn);
                runs.push(run);
            }
            None => {}
        }
    }
    runs.iter().map(Run::record).collect()
}

/// The execution whose `[claimed_at, finished_at]` holds `started_at` (runs of one job do not
/// overlap, so only the last claim at or before it can).
fn owning_execution(execs: &[&Execution], claims: &[f64], started_at: f64) -> Option<usize> {
    let index = claims
        .partition_point(|claimed| *claimed <= started_at)
        .checked_sub(1)?;
    let end = execs[index].finished_at.unwrap_or(f64::INFINITY);
    (started_at <= end).then_some(index)
}

fn job_cost(
    id: String,
    job: Option<&CronJob>,
    span_start: f64,
    window: &Window,
    tally: &Totals,
) -> JobCost {
    let gate = job.and_then(|j| j.gate);
    let span_days = (window.until - span_start).max(0.0) / DAY_SECONDS;
    let per_day = |x: f64| if span_days > 0.0 { x / span_days } else { 0.0 };
    let runs = tally.runs;
    let cost = tally.cost_nanos as f64 / 1e9;
    let measurable = window.turns_read && gate != Some(Gate::NoAgent);
    let empty_runs = measurable.then_some(tally.empty);
    let empty_share = empty_runs
        .filter(|_| runs > 0)
        .map(|e| e as f64 / runs as f64);
    let runs_per_day = per_day(runs as f64);
    let mut flags = Vec::new();
    if job.is_some() && gate.is_none() && runs_per_day > FREQUENT_RUNS_PER_DAY {
        flags.push(Flag::FrequentWithoutGate);
    }
    if job.is_some()
        && runs >= MOSTLY_EMPTY_MIN_RUNS
        && empty_share.is_some_and(|s| s > MOSTLY_EMPTY_SHARE)
    {
        flags.push(Flag::MostlyEmpty);
    }
    JobCost {
        id,
        name: job.map(|j| j.name.clone()),
        enabled: job.is_some_and(|j| j.enabled),
        schedule: job.map(|j| j.schedule.clone()),
        gate,
        span_days: round(span_days, 3),
        runs,
        runs_failed: tally.failed,
        agent_turns: tally.turns,
        empty_runs,
        empty_share: empty_share.map(|s| round(s, 3)),
        runs_per_day: round(runs_per_day, 2),
        tokens: tally.tokens,
        cost_usd: round(cost, 4),
        cost_per_day_usd: round(per_day(cost), 4),
        cost_per_run_usd: (runs > 0).then(|| round(cost / runs as f64, 4)),
        flags,
    }
}

/// Round to `places` decimals.
pub fn round(value: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    // `+ 0.0` turns a negative zero (an empty sum is -0.0) into 0: reports print `0`.
    (value * scale).round() / scale + 0.0
}

#[cfg(test)]
mod tests;
