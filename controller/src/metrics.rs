//! Every metric of the controller, registered once. Names carry the `fleetgate_controller_`
//! prefix and their unit; label values come only from stable codes ([`crate::Error::code`],
//! [`Write`]), never from object names.

use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, Opts, Registry};

/// The controller's metrics.
#[derive(Clone, Debug)]
pub struct Metrics {
    /// `fleetgate_controller_reconcile_runs_total`: reconcile calls.
    pub runs: IntCounter,
    /// `fleetgate_controller_reconcile_failures_total{error}`: failed reconciles by error code.
    pub failures: IntCounterVec,
    /// `fleetgate_controller_reconcile_duration_seconds`: reconcile latency.
    pub duration: Histogram,
    /// `fleetgate_controller_writes_total{object}`: writes to the API server (`config_map`,
    /// `status`); a steady fleet writes nothing.
    pub writes: IntCounterVec,
    /// `fleetgate_controller_invalid_specs_total`: reconciles that found the spec invalid.
    pub invalid_specs: IntCounter,
    /// `fleetgate_controller_scrape_failures_total{reason}`: pods whose gate did not answer,
    /// by failure code (`timeout`, `unreachable`, `unauthorized`, ...).
    pub scrape_failures: IntCounterVec,
}

/// What the controller wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    /// The managed ConfigMap (server-side apply).
    ConfigMap,
    /// The FleetPolicy status subresource.
    Status,
}

// === impl Write ===

impl Write {
    /// The `object` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ConfigMap => "config_map",
            Self::Status => "status",
        }
    }
}

// === impl Metrics ===

impl Metrics {
    /// Create and register every metric in `reg`.
    pub fn register(reg: &Registry) -> prometheus::Result<Self> {
        let m = Self {
            runs: IntCounter::new(
                "fleetgate_controller_reconcile_runs_total",
                "Reconcile calls.",
            )?,
            failures: IntCounterVec::new(
                Opts::new(
                    "fleetgate_controller_reconcile_failures_total",
                    "Failed reconciles by error code.",
                ),
                &["error"],
            )?,
            duration: Histogram::with_opts(
                HistogramOpts::new(
                    "fleetgate_controller_reconcile_duration_seconds",
                    "Reconcile latency.",
                )
                .buckets(vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 15.0, 60.0]),
            )?,
            writes: IntCounterVec::new(
                Opts::new(
                    "fleetgate_controller_writes_total",
                    "Writes to the API server by object.",
                ),
                &["object"],
            )?,
            invalid_specs: IntCounter::new(
                "fleetgate_controller_invalid_specs_total",
                "Reconciles that found the FleetPolicy spec invalid.",
            )?,
            scrape_failures: IntCounterVec::new(
                Opts::new(
                    "fleetgate_controller_scrape_failures_total",
                    "Pods whose gate did not answer the fleet scrape, by failure code.",
                ),
                &["reason"],
            )?,
        };
        reg.register(Box::new(m.scrape_failures.clone()))?;
        reg.register(Box::new(m.runs.clone()))?;
        reg.register(Box::new(m.failures.clone()))?;
        reg.register(Box::new(m.duration.clone()))?;
        reg.register(Box::new(m.writes.clone()))?;
        reg.register(Box::new(m.invalid_specs.clone()))?;
        Ok(m)
    }

    /// Metrics registered in a registry of their own (tests, offline tools).
    pub fn unregistered() -> prometheus::Result<Self> {
        Self::register(&Registry::new())
    }

    /// Count one write.
    pub fn wrote(&self, what: Write) {
        self.writes.with_label_values(&[what.as_str()]).inc();
    }

    /// Writes of `what` so far.
    pub fn writes_of(&self, what: Write) -> u64 {
        self.writes.with_label_values(&[what.as_str()]).get()
    }
}
