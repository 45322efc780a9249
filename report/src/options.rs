//! What a report reads: the Hermes home, the window, "now", the managed scope, the busy timeout;
//! and the contract's name and version.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use super::managed::ManagedDir;

/// Name of the contract the reports follow (the observer plugin's name).
pub const PLUGIN: &str = "fleet-policy";
/// Version of that contract.
pub const CONTRACT_VERSION: &str = "0.2.0";
/// Default report window in days.
pub const DEFAULT_DAYS: u32 = 7;
/// Default SQLite busy timeout, the one Hermes' own read-only readers use.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// What to report on.
#[derive(Clone, Debug, PartialEq)]
pub struct ReportOptions {
    /// The Hermes home (`$HERMES_HOME`, `/opt/data` in the image).
    pub hermes_home: PathBuf,
    /// Cost window in days.
    pub days: u32,
    /// "Now" as Unix seconds; `None` reads the clock (tests pin it).
    pub now: Option<f64>,
    /// Where the managed scope is.
    pub managed_dir: ManagedDir,
    /// How long a read waits on a database lock before the store is reported unreadable.
    pub busy_timeout: Duration,
}

impl ReportOptions {
    /// Options for `hermes_home` with the defaults: 7 days, the clock, the managed dir
    /// resolved like Hermes, a 5 s busy timeout.
    pub fn new(hermes_home: impl Into<PathBuf>) -> Self {
        Self {
            hermes_home: hermes_home.into(),
            days: DEFAULT_DAYS,
            now: None,
            managed_dir: ManagedDir::Auto,
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
        }
    }

    /// The report's "now" in Unix seconds.
    pub fn now_unix(&self) -> f64 {
        self.now
            .unwrap_or_else(|| super::time::unix_secs_f64(SystemTime::now()))
    }
}
