//! Fleet status (pure): what the selected pods' gates answered → pod counts, observed tiers
//! with drift against the pins, cron cost per job, and the `Propagated` / `Drift` verdicts.
//!
//! Sits between the scraper ([`crate::gate_poll`], I/O) and the status writer. The gate's report
//! JSON (`GET /v1/report`, the fleet-policy contract) is read through small tolerant views, so
//! a gate of a newer version with extra keys still counts. Everything is sorted, and costs are
//! rounded to the cent, so the same answers always give the same status and a steady fleet
//! causes no status writes.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::crd::{CronJobCost, EgressMode, ObservedTier, PodCounts};

#[cfg(test)]
mod tests;

/// What one gate answered.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GateSnapshot {
    /// `policy.sha256` of `GET /v1/status`: the policy file the gate runs.
    pub policy_sha256: Option<String>,
    /// `GET /v1/report`.
    pub report: ReportView,
    /// `GET /v1/status`'s LLM spend today; `None` from a gate that reports none.
    pub llm_spend: Option<crate::budgets::GateSpend>,
}

/// Why a pod did not answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScrapeFailure {
    /// The pod has no IP yet.
    #[error("failed to scrape: the pod has no IP yet")]
    NoAddress,
    /// No answer within the per-pod deadline.
    #[error("failed to scrape: no answer within the deadline")]
    Timeout,
    /// The connection failed.
    #[error("failed to connect to the gate admin port: {0}")]
    Unreachable(String),
    /// The gate refused the bearer token.
    #[error("failed to scrape: the gate refused the report token")]
    Unauthorized,
    /// The answer was not the expected JSON.
    #[error("failed to read the gate's answer: {0}")]
    BadResponse(String),
}

/// One pod's scrape.
#[derive(Clone, Debug, PartialEq)]
pub struct PodScrape {
    /// Pod name.
    pub pod: String,
    /// The answer, or why there is none.
    pub outcome: Result<GateSnapshot, ScrapeFailure>,
}

/// `GET /v1/report`, only the keys the controller reads.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ReportView {
    /// The status report.
    pub status: StatusView,
    /// The cron cost report.
    pub crons: CronsView,
}

/// `status` of the report.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct StatusView {
    /// The managed scope the agent sees.
    pub managed: ManagedView,
    /// Observed tiers per role.
    pub observed: BTreeMap<String, RoleView>,
    /// Cron jobs with their configured model.
    pub crons: Vec<CronView>,
}

/// `status.managed`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ManagedView {
    /// sha256 of the managed `config.yaml` the agent reads.
    pub sha256: Option<String>,
    /// Why the agent cannot apply it.
    pub error: Option<String>,
}

/// `status.observed.<role>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(default)]
pub struct RoleView {
    /// Model on the wire.
    pub model: Option<String>,
    /// Reasoning effort on the wire.
    pub reasoning_effort: Option<String>,
    /// Service tier requested.
    pub service_tier: Option<String>,
}

/// `status.crons[]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct CronView {
    /// Job id.
    pub id: String,
    /// Model the job pins, if any.
    pub model: Option<String>,
}

/// `crons` of the report.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct CronsView {
    /// The cost section.
    pub cost: CostView,
}

/// `crons.cost`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct CostView {
    /// Per-job costs.
    pub jobs: Vec<JobView>,
}

/// `crons.cost.jobs[]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct JobView {
    /// Job id.
    pub id: String,
    /// Job name.
    pub name: Option<String>,
    /// USD per day over the window.
    pub cost_per_day_usd: f64,
    /// Flags (`frequent_without_gate`, `mostly_empty`).
    pub flags: Vec<String>,
}

/// What the controller pins for one role (from the managed config).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RolePins {
    /// Pinned model.
    pub model: Option<String>,
    /// Pinned reasoning effort.
    pub reasoning_effort: Option<String>,
    /// Pinned service tier.
    pub service_tier: Option<String>,
}

/// What the fleet should run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Expected {
    /// sha256 of the rendered `policy.yaml`.
    pub policy_sha256: String,
    /// sha256 of the rendered `config.yaml`.
    pub managed_sha256: String,
    /// Pins per role (`main`, `delegation`).
    pub pins: BTreeMap<String, RolePins>,
    /// `spec.cron.allowedModels`; empty allows any.
    pub allowed_models: Vec<String>,
    /// `spec.cron.maxCostPerJobPerDay`: a job costing more per day is flagged.
    pub max_cost_per_job_per_day: Option<f64>,
}

/// A verdict for one condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Condition status.
    pub ok: bool,
    /// CamelCase reason.
    pub reason: &'static str,
    /// Human message, naming pods.
    pub message: String,
}

/// The fleet part of the status.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetView {
    /// Selected / reporting / current.
    pub pods: PodCounts,
    /// Observed combinations per role with drift.
    pub observed_tiers: Vec<ObservedTier>,
    /// Cron jobs per pod, bounded to [`MAX_LISTED_JOBS`] (flagged first, then costliest).
    pub cron_jobs: Vec<CronJobCost>,
    /// Cron jobs over every answering pod.
    pub cron_job_count: u32,
    /// Sum of every job's cost per day, rounded to the cent.
    pub total_cost_per_day: f64,
    /// Flagged cron jobs.
    pub flagged: u32,
    /// `Propagated`: every selected pod reports the current hashes.
    pub propagated: Verdict,
    /// `Drift`: True when an observed value differs from a pin.
    pub drift: Verdict,
    /// The answering gates' LLM spend today, summed per role; `None` when none reports one.
    pub llm_spend: Option<crate::budgets::NamespaceSpend>,
}

/// Most cron jobs a status lists; the totals cover them all.
pub const MAX_LISTED_JOBS: usize = 200;
/// Most pod names an observed tier lists; `podCount` counts them all.
pub const MAX_LISTED_PODS: usize = 20;

/// Flag added to a cron job whose model is outside `spec.cron.allowedModels`.
pub const MODEL_NOT_ALLOWED: &str = "model_not_allowed";
/// Flag added to a cron job costing more per day than `spec.cron.maxCostPerJobPerDay`.
pub const OVER_COST_CEILING: &str = "over_cost_ceiling";

/// The pins of a managed config: `main` from `model.default`, `agent.reasoning_effort` and
/// `agent.service_tier`; `delegation` from `delegation.model` and
/// `delegation.reasoning_effort`. Empty strings pin nothing.
pub fn pins_from_managed(managed: Option<&Map<String, Value>>) -> BTreeMap<String, RolePins> {
    let get = |path: &[&str]| -> Option<String> {
        let mut v = managed?.get(path[0])?;
        for key in &path[1..] {
            v = v.get(key)?;
        }
        v.as_str().filter(|s| !s.is_empty()).map(str::to_string)
    };
    let main_model = get(&["model", "default"]).or_else(|| get(&["model"]));
    let roles = [
        (
            "main",
            RolePins {
                model: main_model,
                reasoning_effort: get(&["agent", "reasoning_effort"]),
                service_tier: get(&["agent", "service_tier"]),
            },
        ),
        (
            "delegation",
            RolePins {
                model: get(&["delegation", "model"]),
                reasoning_effort: get(&["delegation", "reasoning_effort"]),
                service_tier: None,
            },
        ),
    ];
    roles
        .into_iter()
        .filter(|(_, p)| *p != RolePins::default())
        .map(|(r, p)| (r.to_string(), p))
        .collect()
}

/// Aggregate the scrapes of the `selected` pods against what they should run.
pub fn aggregate(selected: usize, scrapes: &[PodScrape], expected: &Expected) -> FleetView {
    let mut view = Aggregator::new(selected, expected);
    for s in scrapes {
        view.add(s);
    }
    view.finish()
}

/// [`aggregate`] one scrape at a time: a poll folds each pod's answer in as it lands and drops
/// it, so it holds the aggregate rather than every gate's report until the last one answers.
/// The view does not depend on the order the scrapes come in: what the status lists is put
/// in pod order by [`Aggregator::finish`].
#[derive(Debug)]
pub struct Aggregator<'a> {
    expected: &'a Expected,
    selected: usize,
    reporting: usize,
    /// Pods answering with another policy or managed config.
    behind: Vec<String>,
    /// Pods not answering.
    silent: Vec<String>,
    /// Observed combination per role → the pods reporting it.
    tiers: BTreeMap<(String, RoleView), Vec<String>>,
    /// Every cron job of every answering pod.
    jobs: Vec<CronJobCost>,
    /// The answering pods' LLM spend.
    spend: Vec<(String, crate::budgets::GateSpend)>,
}

impl<'a> Aggregator<'a> {
    /// An empty aggregate of the `selected` pods against `expected`.
    pub fn new(selected: usize, expected: &'a Expected) -> Self {
        Self {
            expected,
            selected,
            reporting: 0,
            behind: Vec::new(),
            silent: Vec::new(),
            tiers: BTreeMap::new(),
            jobs: Vec::new(),
            spend: Vec::new(),
        }
    }

    /// Fold in one pod's scrape.
    pub fn add(&mut self, scrape: &PodScrape) {
        let pod = scrape.pod.as_str();
        let g = match &scrape.outcome {
            Ok(g) => g,
            Err(_) => {
                self.silent.push(pod.to_string());
                return;
            }
        };
        self.reporting += 1;
        if !is_current(g, self.expected) {
            self.behind.push(pod.to_string());
        }
        for (role, seen) in &g.report.status.observed {
            self.tiers
                .entry((role.clone(), seen.clone()))
                .or_default()
                .push(pod.to_string());
        }
        self.jobs.extend(cron_jobs(pod, g, self.expected));
        if let Some(spend) = &g.llm_spend {
            self.spend.push((pod.to_string(), spend.clone()));
        }
    }

    /// The view: the pods named, tiers and jobs in pod order, as if every scrape had been
    /// sorted by pod first.
    pub fn finish(self) -> FleetView {
        let Self {
            expected,
            selected,
            reporting,
            mut behind,
            mut silent,
            mut tiers,
            mut jobs,
            mut spend,
        } = self;
        behind.sort();
        silent.sort();
        for pods in tiers.values_mut() {
            pods.sort();
        }
        // Stable: one pod's jobs keep their report order, as they came in together.
        jobs.sort_by(|a, b| (&a.pod, &a.job).cmp(&(&b.pod, &b.job)));
        // Summed in pod order, so the float sum is the same whatever order the gates answered.
        spend.sort_by(|a, b| a.0.cmp(&b.0));
        let pods = PodCounts {
            selected: count(selected),
            reporting: count(reporting),
            current: count(reporting - behind.len()),
        };
        let observed_tiers = observed_tiers(tiers, &expected.pins);
        let total: f64 = jobs.iter().map(|j| j.cost_per_day).sum();
        let flagged = count(jobs.iter().filter(|j| !j.flags.is_empty()).count());
        let cron_job_count = count(jobs.len());
        let behind: Vec<&str> = behind.iter().map(String::as_str).collect();
        let silent: Vec<&str> = silent.iter().map(String::as_str).collect();
        FleetView {
            flagged,
            cron_job_count,
            cron_jobs: listed(jobs),
            total_cost_per_day: cents(total),
            propagated: propagated(selected, &silent, &behind),
            drift: drift(&observed_tiers),
            pods,
            observed_tiers,
            llm_spend: crate::budgets::sum(spend.iter().map(|(_, s)| s)),
        }
    }
}

/// The jobs a status lists: the flagged ones first, then the costliest, at most
/// [`MAX_LISTED_JOBS`], shown in pod and job order.
fn listed(mut jobs: Vec<CronJobCost>) -> Vec<CronJobCost> {
    if jobs.len() <= MAX_LISTED_JOBS {
        // Kept in the poll state until the next poll: no spare capacity.
        jobs.shrink_to_fit();
        return jobs;
    }
    jobs.sort_by(|a, b| {
        // Flagged (non-empty flags) first, then by cost, highest first.
        a.flags
            .is_empty()
            .cmp(&b.flags.is_empty())
            .then(b.cost_per_day.total_cmp(&a.cost_per_day))
            .then_with(|| (&a.pod, &a.job).cmp(&(&b.pod, &b.job)))
    });
    jobs.truncate(MAX_LISTED_JOBS);
    jobs.sort_by(|a, b| (&a.pod, &a.job).cmp(&(&b.pod, &b.job)));
    jobs
}

fn is_current(g: &GateSnapshot, expected: &Expected) -> bool {
    g.policy_sha256.as_deref() == Some(expected.policy_sha256.as_str())
        && g.report.status.managed.sha256.as_deref() == Some(expected.managed_sha256.as_str())
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn cents(usd: f64) -> f64 {
    (usd * 100.0).round() / 100.0
}

/// Pods named in a message, at most five then "and N more".
fn name_pods(pods: &[&str]) -> String {
    let shown: Vec<&str> = pods.iter().take(5).copied().collect();
    match pods.len().saturating_sub(5) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

/// The pods, of `(name, egress-mode annotation)`, injected with less capture than `want`.
/// Capture is fixed when a pod is created, so raising a FleetPolicy's mode (or a baseline's
/// floor) reaches a running pod only when it restarts. Pods without the annotation were not
/// injected by this controller version and are not judged.
pub fn injected_below(pods: &[(String, Option<String>)], want: EgressMode) -> Vec<String> {
    pods.iter()
        .filter(|(_, mode)| {
            mode.as_deref()
                .and_then(EgressMode::from_name)
                .is_some_and(|m| m.strength() < want.strength())
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// `view` with `Propagated=False` (reason `CaptureBelowPolicy`) when pods run with less capture
/// than `want`; that outranks every other propagation verdict, since such a pod is not gated
/// as its policy says.
pub fn check_capture(view: &mut FleetView, below: &[String], want: EgressMode) {
    if below.is_empty() {
        return;
    }
    let names: Vec<&str> = below.iter().map(String::as_str).collect();
    view.propagated = Verdict {
        ok: false,
        reason: "CaptureBelowPolicy",
        message: format!(
            "injected with less egress capture than {} (restart them to apply it): {}",
            want.name(),
            name_pods(&names)
        ),
    };
}

fn propagated(selected: usize, silent: &[&str], behind: &[&str]) -> Verdict {
    if selected == 0 {
        return Verdict {
            ok: true,
            reason: "NoPods",
            message: "no pod matches spec.selector".into(),
        };
    }
    if !behind.is_empty() {
        return Verdict {
            ok: false,
            reason: "PodsBehind",
            message: format!(
                "not on the current policy or managed config: {}",
                name_pods(behind)
            ),
        };
    }
    if !silent.is_empty() {
        return Verdict {
            ok: false,
            reason: "PodsNotReporting",
            message: format!("no report from: {}", name_pods(silent)),
        };
    }
    Verdict {
        ok: true,
        reason: "AllCurrent",
        message: format!("all {selected} pods run the current policy and managed config"),
    }
}

fn differs(pinned: &Option<String>, seen: &Option<String>) -> bool {
    match (pinned, seen) {
        (Some(p), Some(s)) => {
            p != s && !s.ends_with(&format!("/{p}")) && !p.ends_with(&format!("/{s}"))
        }
        _ => false,
    }
}

fn observed_tiers(
    groups: BTreeMap<(String, RoleView), Vec<String>>,
    pins: &BTreeMap<String, RolePins>,
) -> Vec<ObservedTier> {
    groups
        .into_iter()
        .map(|((role, seen), pods)| {
            let pin = pins.get(&role).cloned().unwrap_or_default();
            let drift = differs(&pin.model, &seen.model)
                || differs(&pin.reasoning_effort, &seen.reasoning_effort)
                || differs(&pin.service_tier, &seen.service_tier);
            ObservedTier {
                role,
                model: seen.model,
                reasoning_effort: seen.reasoning_effort,
                service_tier: seen.service_tier,
                drift,
                pod_count: count(pods.len()),
                pods: pods.into_iter().take(MAX_LISTED_PODS).collect(),
            }
        })
        .collect()
}

fn drift(tiers: &[ObservedTier]) -> Verdict {
    let drifting: Vec<String> = tiers
        .iter()
        .filter(|t| t.drift)
        .map(|t| format!("{} on {}", t.role, t.pods.join(", ")))
        .collect();
    if drifting.is_empty() {
        return Verdict {
            ok: false,
            reason: "NoDrift",
            message: "every observed value matches its pin".into(),
        };
    }
    Verdict {
        ok: true,
        reason: "ObservedDiffersFromPins",
        message: format!(
            "observed model / effort / tier differs from the pins: {}",
            drifting.join("; ")
        ),
    }
}

/// The cron jobs of `pod`'s report, in report order, flagged against `expected`.
fn cron_jobs<'g>(
    pod: &'g str,
    g: &'g GateSnapshot,
    expected: &'g Expected,
) -> impl Iterator<Item = CronJobCost> + 'g {
    let allowed = &expected.allowed_models;
    let models: BTreeMap<&str, Option<&String>> = g
        .report
        .status
        .crons
        .iter()
        .map(|c| (c.id.as_str(), c.model.as_ref()))
        .collect();
    g.report.crons.cost.jobs.iter().map(move |job| {
        let mut flags = job.flags.clone();
        let model = models.get(job.id.as_str()).copied().flatten();
        if !allowed.is_empty() && model.is_some_and(|m| !allowed.contains(m)) {
            flags.push(MODEL_NOT_ALLOWED.to_string());
        }
        if expected
            .max_cost_per_job_per_day
            .is_some_and(|ceiling| job.cost_per_day_usd > ceiling)
        {
            flags.push(OVER_COST_CEILING.to_string());
        }
        CronJobCost {
            pod: pod.to_string(),
            job: job.id.clone(),
            name: job.name.clone(),
            cost_per_day: cents(job.cost_per_day_usd),
            flags,
        }
    })
}
