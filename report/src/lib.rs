//! Fleet reports: what a Hermes home says the agent really does (read-only).
//!
//! Two reports share the JSON contract of the fleet-policy observer (`status --json` and
//! `crons --cost --json`), same keys in the same order:
//!
//! - [`status()`]: the managed scope (dir, pinned keys, digest, why it is not applied), the
//!   effective config (defaults + `config.yaml` + managed overlay), the tiers observed per role
//!   (`fleet-policy/observed.json`) and the cron jobs (`cron/jobs.json`).
//! - [`cron_cost`]: per cron job runs, empty runs, tokens and dollars per day over a window,
//!   from `cron/executions.db` and `state.db`, with the flags `frequent_without_gate` and
//!   `mostly_empty`.
//!
//! Nothing here writes to the home: files are read, databases are opened read-only without
//! creating side files (see [`sqlite`]). A store that is missing or unreadable degrades the
//! report (`sources.<x>: false`, `managed.error`, a trailing `errors` list) instead of failing
//! it. [`fleet_report`] bundles both for the admin `/v1/report` endpoint, [`render_table`]
//! prints them for people, and [`cli`] is the `report` subcommand.

pub mod audit;
pub mod cli;
pub mod cost;
pub mod crons;
pub mod effective;
pub mod fleet;
pub mod incremental;
pub mod jobs;
pub mod ledger;
pub mod managed;
pub mod observed;
pub mod options;
pub mod silence;
pub mod sqlite;
pub mod status;
pub mod table;
pub mod time;
pub mod turns;
mod yaml;

pub use audit::Audit;
pub use cost::{CostSection, Flag, JobCost, Sources};
pub use crons::{CronCostReport, cron_cost};
pub use fleet::{FleetReport, fleet_report, fleet_report_cached};
pub use incremental::CostCache;
pub use jobs::Gate;
pub use managed::{ManagedDir, ManagedState};
pub use observed::{GateCounters, Observed, RoleObservation};
pub use options::{CONTRACT_VERSION, DEFAULT_BUSY_TIMEOUT, DEFAULT_DAYS, PLUGIN, ReportOptions};
pub use status::{CronEntry, StatusReport, status};
pub use table::render_table;
