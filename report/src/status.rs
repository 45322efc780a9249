//! The status report: managed-scope state, effective config, observed tiers and cron jobs.

use serde::Serialize;

use super::effective::{Effective, effective, merge_config};
use super::jobs::{CronJob, load_jobs};
use super::managed::{ManagedState, load as load_managed};
use super::observed::Observed;
use super::options::{CONTRACT_VERSION, PLUGIN, ReportOptions};

/// `status --json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatusReport {
    /// Name of the contract (`fleet-policy`).
    pub plugin: &'static str,
    /// Version of the contract.
    pub version: &'static str,
    /// The managed scope.
    pub managed: ManagedState,
    /// The effective keys ([`super::effective::EFFECTIVE_KEYS`]).
    pub effective: Effective,
    /// Last observed request per role.
    pub observed: Observed,
    /// Every cron job, paused ones included.
    pub crons: Vec<CronEntry>,
    /// What could not be read (absent when everything was read).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// One job of `crons`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CronEntry {
    /// Job id.
    pub id: String,
    /// Job name.
    pub name: String,
    /// Enabled and not paused.
    pub enabled: bool,
    /// Per-job provider pin, null when unpinned.
    pub provider: Option<String>,
    /// Per-job model pin, null when unpinned.
    pub model: Option<String>,
    /// Per-job effort pin, null when unpinned.
    pub reasoning_effort: Option<String>,
    /// Outcome of the last run.
    pub last_status: Option<String>,
    /// Consecutive agent failures.
    pub failure_streak: i64,
}

impl From<&CronJob> for CronEntry {
    fn from(job: &CronJob) -> Self {
        Self {
            id: job.id.clone(),
            name: job.name.clone(),
            enabled: job.enabled,
            provider: job.provider.clone(),
            model: job.model.clone(),
            reasoning_effort: job.reasoning_effort.clone(),
            last_status: job.last_status.clone(),
            failure_streak: job.failure_streak,
        }
    }
}

/// Jobs from `jobs.json`, or none plus the error text.
pub(super) fn jobs_or_error(opts: &ReportOptions, errors: &mut Vec<String>) -> Vec<CronJob> {
    load_jobs(&opts.hermes_home).unwrap_or_else(|err| {
        errors.push(err.to_string());
        Vec::new()
    })
}

/// Build the status report.
pub fn status(opts: &ReportOptions) -> StatusReport {
    let mut errors = Vec::new();
    let managed = load_managed(&opts.managed_dir);
    let merged = merge_config(&opts.hermes_home, &managed.config);
    errors.extend(merged.user_error);
    let observed = Observed::load(&opts.hermes_home).unwrap_or_else(|err| {
        errors.push(err.to_string());
        Observed::default()
    });
    let crons = jobs_or_error(opts, &mut errors)
        .iter()
        .map(CronEntry::from)
        .collect();
    StatusReport {
        plugin: PLUGIN,
        version: CONTRACT_VERSION,
        managed: managed.state,
        effective: effective(&merged.tree),
        observed,
        crons,
        errors,
    }
}
