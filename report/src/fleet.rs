//! Both reports in one object, as the admin `/v1/report` endpoint serves them.

use serde::Serialize;

use super::crons::{CronCostReport, cron_cost};
use super::incremental::CostCache;
use super::options::ReportOptions;
use super::status::{StatusReport, status};

/// Both reports, as served on admin `/v1/report`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FleetReport {
    /// The status report.
    pub status: StatusReport,
    /// The cron cost report.
    pub crons: CronCostReport,
}

/// Both reports.
pub fn fleet_report(opts: &ReportOptions) -> FleetReport {
    FleetReport {
        status: status(opts),
        crons: cron_cost(opts),
    }
}

/// Both reports, the cron cost through `cache` (see [`crate::incremental`]).
pub fn fleet_report_cached(opts: &ReportOptions, cache: &CostCache) -> FleetReport {
    FleetReport {
        status: status(opts),
        crons: cache.cron_cost(opts),
    }
}
