//! Report gauges: cost per day per cron job and flagged jobs, refreshed from a cost report.

use prometheus::{GaugeVec, IntGaugeVec, Opts, Registry};

use super::cost::{CostSection, Flag};

/// The report's gauges.
#[derive(Clone, Debug)]
pub struct ReportGauges {
    cost_per_day: GaugeVec,
    flagged: IntGaugeVec,
}

impl ReportGauges {
    /// Create the gauges and register them in `registry`.
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
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
        registry.register(Box::new(cost_per_day.clone()))?;
        registry.register(Box::new(flagged.clone()))?;
        Ok(Self { cost_per_day, flagged })
    }

    /// Replace every value with those of `cost` (jobs that disappeared are dropped).
    pub fn observe(&self, cost: &CostSection) {
        self.cost_per_day.reset();
        self.flagged.reset();
        for job in &cost.jobs {
            self.cost_per_day.with_label_values(&[job.id.as_str()]).set(job.cost_per_day_usd);
            for flag in [Flag::FrequentWithoutGate, Flag::MostlyEmpty] {
                let name = match flag {
                    Flag::FrequentWithoutGate => "frequent_without_gate",
                    Flag::MostlyEmpty => "mostly_empty",
                };
                let raised = i64::from(job.flags.contains(&flag));
                self.flagged.with_label_values(&[job.id.as_str(), name]).set(raised);
            }
        }
    }
}
