//! The cron audit: jobs that escape the fleet defaults or keep failing.
//!
//! A job's model is resolved the way the cron scheduler does (job pin, then `cron.model`,
//! then the model captured at creation, then `model.default`) before it is checked against
//! `plugins.entries.fleet-policy.settings.allowed_cron_models`; no list, no check.

use serde::Serialize;
use serde_json::{Map, Value};

use super::effective::lookup;
use super::jobs::{CronJob, Gate};

/// Setting that lists the models cron jobs may use.
const ALLOWED_MODELS_KEY: &str = "plugins.entries.fleet-policy.settings.allowed_cron_models";

/// `audit`: job ids per finding, in job order.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Audit {
    /// Jobs with a per-job model or provider pin.
    pub pinned_model: Vec<String>,
    /// Jobs with a per-job reasoning effort pin.
    pub pinned_effort: Vec<String>,
    /// Jobs whose last run failed, that have a failure streak, or that cannot be scheduled.
    pub failing: Vec<String>,
    /// Jobs whose resolved model is outside `allowed_cron_models`.
    pub outside_allowed_models: Vec<String>,
}

/// Audit `jobs` against the merged config `tree`.
pub fn audit(jobs: &[CronJob], tree: &Map<String, Value>) -> Audit {
    let allowed: Option<Vec<String>> = match lookup(tree, ALLOWED_MODELS_KEY) {
        Value::Array(items) => Some(
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
        ),
        _ => None,
    };
    let mut audit = Audit::default();
    for job in jobs {
        let id = || job.id.clone();
        if job.model.is_some() || job.provider.is_some() {
            audit.pinned_model.push(id());
        }
        if job
            .reasoning_effort
            .as_deref()
            .is_some_and(|e| !e.is_empty())
        {
            audit.pinned_effort.push(id());
        }
        let failed_last = matches!(job.last_status.as_deref(), Some("error" | "blocked_config"));
        if failed_last || job.failure_streak > 0 || job.state == "error" {
            audit.failing.push(id());
        }
        if let (Some(allowed), Some(model)) = (&allowed, resolved_model(job, tree))
            && !allowed.contains(&model)
        {
            audit.outside_allowed_models.push(id());
        }
    }
    audit
}

fn resolved_model(job: &CronJob, tree: &Map<String, Value>) -> Option<String> {
    if job.gate == Some(Gate::NoAgent) {
        return None;
    }
    let configured = |key| match lookup(tree, key) {
        Value::String(s) if !s.is_empty() => Some(s),
        _ => None,
    };
    job.model
        .clone()
        .filter(|m| !m.is_empty())
        .or_else(|| configured("cron.model"))
        .or_else(|| job.model_snapshot.clone().filter(|m| !m.is_empty()))
        .or_else(|| configured("model.default"))
}
