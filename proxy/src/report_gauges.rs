//! Report gauges: cost per day, runs, empty-run share and flags per cron job, refreshed from a
//! cost report.

use prometheus::{GaugeVec, IntCounter, IntCounterVec, IntGaugeVec, Opts, Registry};

use fleetgate_report::cost::{CostSection, Flag};
use fleetgate_report::incremental::Counters;

/// The report's gauges.
#[derive(Clone, Debug)]
pub(crate) struct ReportGauges {
    cost_per_day: GaugeVec,
    flagged: IntGaugeVec,
    runs: IntGaugeVec,
    empty_share: GaugeVec,
    computations: IntCounterVec,
    mismatches: IntCounter,
}

impl ReportGauges {
    /// Create the gauges and register them in `registry`.
    pub(crate) fn register(registry: &Registry) -> prometheus::Result<Self> {
        let cost_per_day = GaugeVec::new(
            Opts::new(
                "fleetgate_report_cron_cost_per_day_usd",
                "Measured cost per day of a cron job, in USD, over the report window.",
            ),
            &["job"],
        )?;
        let flagged = IntGaugeVec::new(
            Opts::new(
                "fleetgate_report_cron_flagged",
                "1 when a cron job carries the flag (frequent_without_gate, mostly_empty).",
            ),
            &["job", "flag"],
        )?;
        let runs = IntGaugeVec::new(
            Opts::new(
                "fleetgate_report_cron_runs",
                "Runs of a cron job over the report window.",
            ),
            &["job"],
        )?;
        let empty_share = GaugeVec::new(
            Opts::new(
                "fleetgate_report_cron_empty_run_share",
                "Share of a cron job's runs that ended without a reply (0..1), when known.",
            ),
            &["job"],
        )?;
        let computations = IntCounterVec::new(
            Opts::new(
                "fleetgate_report_cost_computations_total",
                "Cron cost reports computed, by how: full (everything read) or incremental \
                 (only what is new read).",
            ),
            &["how"],
        )?;
        let mismatches = IntCounter::new(
            "fleetgate_report_cost_mismatches_total",
            "Periodic full recomputes whose figures differed from the incremental ones.",
        )?;
        registry.register(Box::new(computations.clone()))?;
        registry.register(Box::new(mismatches.clone()))?;
        registry.register(Box::new(cost_per_day.clone()))?;
        registry.register(Box::new(flagged.clone()))?;
        registry.register(Box::new(runs.clone()))?;
        registry.register(Box::new(empty_share.clone()))?;
        Ok(Self {
            cost_per_day,
            flagged,
            runs,
            empty_share,
            computations,
            mismatches,
        })
    }

    /// Count what a report call computed, from the cache's counters before and after it.
    pub(crate) fn observe_computation(&self, before: Counters, after: Counters) {
        for (how, then, now) in [
            ("full", before.full, after.full),
            ("incremental", before.incremental, after.incremental),
        ] {
            self.computations
                .with_label_values(&[how])
                .inc_by(now.saturating_sub(then));
        }
        self.mismatches
            .inc_by(after.mismatches.saturating_sub(before.mismatches));
    }

    /// Replace every value with those of `cost` (jobs that disappeared are dropped). Job ids
    /// come from `cron/jobs.json`, which the agent can write: only the first
    /// [`MAX_JOB_SERIES`] ids shaped like Hermes' own ([`job_label`]) get series of their own;
    /// the others add up under `job="other"`.
    pub(crate) fn observe(&self, cost: &CostSection) {
        self.cost_per_day.reset();
        self.flagged.reset();
        self.runs.reset();
        self.empty_share.reset();
        let mut labelled = 0;
        for job in &cost.jobs {
            let own = (labelled < MAX_JOB_SERIES)
                .then(|| job_label(&job.id))
                .flatten();
            labelled += usize::from(own.is_some());
            let id = own.unwrap_or(OTHER_JOB);
            self.cost_per_day
                .with_label_values(&[id])
                .add(job.cost_per_day_usd);
            self.runs
                .with_label_values(&[id])
                .add(i64::try_from(job.runs).unwrap_or(i64::MAX));
            if let (Some(share), Some(_)) = (job.empty_share, own) {
                self.empty_share.with_label_values(&[id]).set(share);
            }
            for flag in [Flag::FrequentWithoutGate, Flag::MostlyEmpty] {
                let name = match flag {
                    Flag::FrequentWithoutGate => "frequent_without_gate",
                    Flag::MostlyEmpty => "mostly_empty",
                };
                let gauge = self.flagged.with_label_values(&[id, name]);
                if job.flags.contains(&flag) {
                    gauge.set(1);
                }
            }
        }
    }
}

/// Jobs with series of their own; the rest count under `job="other"`.
pub(crate) const MAX_JOB_SERIES: usize = 200;

/// The label of jobs that get no series of their own.
const OTHER_JOB: &str = "other";

/// A job id fit for a label: 1 to 64 of `[A-Za-z0-9_-]` (Hermes' ids are 12 hex digits) and no
/// secret rule matching it; `None` otherwise.
pub(crate) fn job_label(id: &str) -> Option<&str> {
    let shaped = (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    let secret = || crate::judge::gates::secret_url::secret_in_text(id, &[]).is_some();
    (shaped && id != OTHER_JOB && !secret()).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::cost::{CostInputs, compute};
    use crate::report::jobs::CronJob;
    use crate::report::turns::{AgentTurn, FinalReply};

    fn gauge(registry: &Registry, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let family = registry.gather().into_iter().find(|f| f.name() == name)?;
        let has = |m: &prometheus::proto::Metric, (k, v): &(&str, &str)| {
            m.get_label()
                .iter()
                .any(|l| l.name() == *k && l.value() == *v)
        };
        let metric = family
            .get_metric()
            .iter()
            .find(|m| labels.iter().all(|l| has(m, l)))?;
        Some(metric.get_gauge().get_value())
    }

    fn noisy_job() -> CronJob {
        CronJob {
            id: "noisy".into(),
            name: "noisy".into(),
            enabled: true,
            schedule: "every 30m".into(),
            provider: None,
            model: None,
            model_snapshot: None,
            reasoning_effort: None,
            last_status: None,
            failure_streak: 0,
            state: "scheduled".into(),
            created_at: None,
            gate: None,
        }
    }

    #[test]
    fn gauges_follow_the_latest_cost_report() {
        let registry = Registry::new();
        let gauges = ReportGauges::register(&registry).expect("the gauges must register");
        let turns: Vec<AgentTurn> = (0..30)
            .map(|i| AgentTurn {
                job_id: "noisy".into(),
                session_id: format!("s{i}"),
                started_at: 100.0 + f64::from(i),
                cost_nanos: 70_000_000,
                tokens: 1,
                reply: FinalReply::Text("[SILENT]".into()),
                settled_at: None,
                last_start: 100.0 + f64::from(i),
            })
            .collect();
        let jobs = [noisy_job()];
        let day = CostInputs {
            jobs: &jobs,
            ledger: None,
            turns: Some(&turns),
            since: 0.0,
            until: 86_400.0,
            days: 1,
        };
        gauges.observe(&compute(&day));
        let per_day = gauge(
            &registry,
            "fleetgate_report_cron_cost_per_day_usd",
            &[("job", "noisy")],
        );
        assert_eq!(per_day, Some(2.1), "30 runs at 0.07 in one day");
        let runs = gauge(&registry, "fleetgate_report_cron_runs", &[("job", "noisy")]);
        assert_eq!(runs, Some(30.0), "30 runs in the window");
        let share = gauge(
            &registry,
            "fleetgate_report_cron_empty_run_share",
            &[("job", "noisy")],
        );
        assert_eq!(share, Some(1.0), "every run ended silent");
        for flag in ["frequent_without_gate", "mostly_empty"] {
            let labels = [("job", "noisy"), ("flag", flag)];
            assert_eq!(
                gauge(&registry, "fleetgate_report_cron_flagged", &labels),
                Some(1.0),
                "{flag}"
            );
        }
        gauges.observe(&compute(&CostInputs {
            jobs: &[],
            turns: Some(&[]),
            ..day
        }));
        let gone = gauge(
            &registry,
            "fleetgate_report_cron_cost_per_day_usd",
            &[("job", "noisy")],
        );
        assert_eq!(gone, None, "a job no longer reported is dropped");
    }

    #[test]
    fn agent_written_job_ids_never_grow_the_label_set_past_its_bound() {
        let registry = Registry::new();
        let gauges = ReportGauges::register(&registry).expect("the gauges must register");
        let token = format!("ghp_{}", "a1B2".repeat(9));
        let mut ids = vec![
            "x".repeat(4096),
            token.clone(),
            "has space".into(),
            "other".into(),
        ];
        ids.extend((0..250).map(|i| format!("{i:012x}")));
        let jobs: Vec<CronJob> = ids
            .iter()
            .map(|id| CronJob {
                id: id.clone(),
                ..noisy_job()
            })
            .collect();
        gauges.observe(&compute(&CostInputs {
            jobs: &jobs,
            ledger: None,
            turns: Some(&[]),
            since: 0.0,
            until: 86_400.0,
            days: 1,
        }));
        let family = registry
            .gather()
            .into_iter()
            .find(|f| f.name() == "fleetgate_report_cron_runs")
            .expect("the runs gauge is exported");
        let labels: Vec<String> = family
            .get_metric()
            .iter()
            .flat_map(|m| m.get_label().iter().map(|l| l.value().to_string()))
            .collect();
        assert_eq!(
            labels.len(),
            MAX_JOB_SERIES + 1,
            "at most {MAX_JOB_SERIES} jobs plus `other` get a series"
        );
        assert!(
            labels.contains(&"other".to_string()),
            "the rest add up under other"
        );
        for label in &labels {
            assert!(label.len() <= 64, "no long id becomes a label");
            assert!(!label.contains("ghp_"), "no token becomes a label: {label}");
            assert!(
                !label.contains(' '),
                "no free text becomes a label: {label}"
            );
        }
    }
}
