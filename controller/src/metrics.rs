//! Every metric of the controller, registered once. Names carry the `fleetgate_controller_`
//! prefix and their unit; label values come from stable codes ([`crate::Error::code`],
//! [`Write`]), except the fleet gauges, which carry `namespace` and `policy`: one series per
//! FleetPolicy (one per namespace in practice), removed when the policy goes away.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use prometheus::{
    GaugeVec, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry,
};

use crate::crd::FleetPolicyStatus;

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
    /// `fleetgate_controller_accept_errors_total{listener,kind}`: failed accepts of the admin
    /// and webhook listeners (`resource`: out of descriptors or memory, the listener backs
    /// off; `connection`: one connection failed).
    pub accept_errors: IntCounterVec,
    /// `fleetgate_controller_webhook_reviews_total{outcome}`: admission reviews answered by
    /// this replica's webhook (`patched`, `refused`, `malformed`, or why the pod was left
    /// unchanged).
    pub webhook_reviews: IntCounterVec,
    /// `fleetgate_controller_invalid_specs_total`: reconciles that found the spec invalid.
    pub invalid_specs: IntCounter,
    /// `fleetgate_controller_scrape_failures_total{reason}`: pods whose gate did not answer,
    /// by failure code (`timeout`, `unreachable`, `unauthorized`, ...).
    pub scrape_failures: IntCounterVec,
    /// `fleetgate_controller_fleet_cost_per_day_usd{namespace,policy}`: total cron cost per day
    /// of the pods a FleetPolicy selects, as last scraped.
    pub fleet_cost_per_day: GaugeVec,
    /// `fleetgate_controller_fleet_flagged_jobs{namespace,policy}`: cron jobs carrying a flag.
    pub fleet_flagged: IntGaugeVec,
    /// `fleetgate_controller_fleet_pods{namespace,policy,state}`: pods `selected`, `reporting`
    /// and `current` (on the current policy and managed hashes).
    pub fleet_pods: IntGaugeVec,
    /// `fleetgate_controller_leader`: 1 while this replica holds the reconcile lease (or runs
    /// without election), else 0. Summed over the replicas it must be exactly 1.
    pub leader: IntGauge,
    /// `fleetgate_controller_lease_transitions_total{change}`: this replica `acquired` or
    /// `lost` the lease.
    pub lease_transitions: IntCounterVec,
    /// `fleetgate_controller_fenced_writes_total{reason}`: writes not made because this
    /// replica could not show it still holds the lease (`deposed`: another replica holds it;
    /// `unconfirmed`: the lease could not be read or has run out).
    pub fenced_writes: IntCounterVec,
    /// The `(namespace, policy)` pairs that have fleet series, so stale ones can be removed.
    fleet_series: Arc<Mutex<BTreeSet<(String, String)>>>,
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
        let m = Self::unregistered_series()?;
        reg.register(Box::new(m.fleet_cost_per_day.clone()))?;
        reg.register(Box::new(m.fleet_flagged.clone()))?;
        reg.register(Box::new(m.fleet_pods.clone()))?;
        reg.register(Box::new(m.scrape_failures.clone()))?;
        reg.register(Box::new(m.runs.clone()))?;
        reg.register(Box::new(m.failures.clone()))?;
        reg.register(Box::new(m.duration.clone()))?;
        reg.register(Box::new(m.writes.clone()))?;
        reg.register(Box::new(m.invalid_specs.clone()))?;
        reg.register(Box::new(m.accept_errors.clone()))?;
        reg.register(Box::new(m.webhook_reviews.clone()))?;
        reg.register(Box::new(m.leader.clone()))?;
        reg.register(Box::new(m.lease_transitions.clone()))?;
        reg.register(Box::new(m.fenced_writes.clone()))?;
        for change in ["acquired", "lost"] {
            m.lease_transitions.with_label_values(&[change]);
        }
        for reason in ["not_leader", "deposed", "unconfirmed"] {
            m.fenced_writes.with_label_values(&[reason]);
        }
        // At 0 from the start, so the alert sees the first malformed review.
        m.webhook_reviews.with_label_values(&["malformed"]);
        Ok(m)
    }

    /// Every series, not yet in a registry.
    fn unregistered_series() -> prometheus::Result<Self> {
        let m = Self {
            runs: IntCounter::new(
                "fleetgate_controller_reconcile_runs_total",
                "Reconcile calls.",
            )?,
            accept_errors: counter_vec(
                "fleetgate_controller_accept_errors_total",
                "Failed accepts of the admin and webhook listeners by kind (resource: out of descriptors or memory).",
                &["listener", "kind"],
            )?,
            webhook_reviews: counter_vec(
                "fleetgate_controller_webhook_reviews_total",
                "Admission reviews answered by the injection webhook, by outcome.",
                &["outcome"],
            )?,
            failures: counter_vec(
                "fleetgate_controller_reconcile_failures_total",
                "Failed reconciles by error code.",
                &["error"],
            )?,
            duration: Histogram::with_opts(
                HistogramOpts::new(
                    "fleetgate_controller_reconcile_duration_seconds",
                    "Reconcile latency.",
                )
                .buckets(vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 15.0, 60.0]),
            )?,
            writes: counter_vec(
                "fleetgate_controller_writes_total",
                "Writes to the API server by object.",
                &["object"],
            )?,
            invalid_specs: IntCounter::new(
                "fleetgate_controller_invalid_specs_total",
                "Reconciles that found the FleetPolicy spec invalid.",
            )?,
            scrape_failures: counter_vec(
                "fleetgate_controller_scrape_failures_total",
                "Pods whose gate did not answer the fleet scrape, by failure code.",
                &["reason"],
            )?,
            fleet_cost_per_day: GaugeVec::new(
                Opts::new(
                    "fleetgate_controller_fleet_cost_per_day_usd",
                    "Cron cost per day of the pods a FleetPolicy selects, in USD.",
                ),
                &["namespace", "policy"],
            )?,
            fleet_flagged: int_gauge_vec(
                "fleetgate_controller_fleet_flagged_jobs",
                "Cron jobs of the selected pods carrying a flag.",
                &["namespace", "policy"],
            )?,
            fleet_pods: int_gauge_vec(
                "fleetgate_controller_fleet_pods",
                "Pods a FleetPolicy selects, by state (selected, reporting, current).",
                &["namespace", "policy", "state"],
            )?,
            leader: IntGauge::new(
                "fleetgate_controller_leader",
                "1 while this replica holds the reconcile lease, else 0.",
            )?,
            lease_transitions: counter_vec(
                "fleetgate_controller_lease_transitions_total",
                "Times this replica acquired or lost the reconcile lease.",
                &["change"],
            )?,
            fenced_writes: counter_vec(
                "fleetgate_controller_fenced_writes_total",
                "Writes not made because this replica could not show it holds the lease, by reason.",
                &["reason"],
            )?,
            fleet_series: Arc::default(),
        };
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

    /// Set the fleet gauges of one FleetPolicy from its computed status. A status without
    /// fleet fields (scraping off, invalid spec) removes the series rather than keep stale ones.
    pub fn observe_fleet(&self, namespace: &str, policy: &str, status: &FleetPolicyStatus) {
        let (Some(cost), Some(flagged), Some(pods)) = (
            status.total_cost_per_day,
            status.flagged,
            status.pods.as_ref(),
        ) else {
            self.forget_fleet(namespace, policy);
            return;
        };
        let labels = [namespace, policy];
        self.fleet_cost_per_day.with_label_values(&labels).set(cost);
        self.fleet_flagged
            .with_label_values(&labels)
            .set(i64::from(flagged));
        for (state, n) in [
            ("selected", pods.selected),
            ("reporting", pods.reporting),
            ("current", pods.current),
        ] {
            self.fleet_pods
                .with_label_values(&[namespace, policy, state])
                .set(i64::from(n));
        }
        if let Ok(mut series) = self.fleet_series.lock() {
            series.insert((namespace.to_string(), policy.to_string()));
        }
    }

    /// Remove every fleet series: a replica that stops leading stops reporting the fleet, so
    /// summing over replicas never counts a FleetPolicy twice.
    pub fn forget_all_fleets(&self) {
        self.retain_fleet(&BTreeSet::new());
    }

    /// Remove the fleet series of every FleetPolicy not in `live` (deleted policies).
    pub fn retain_fleet(&self, live: &BTreeSet<(String, String)>) {
        let stale: Vec<(String, String)> = match self.fleet_series.lock() {
            Ok(series) => series.difference(live).cloned().collect(),
            Err(_) => return,
        };
        for (namespace, policy) in stale {
            self.forget_fleet(&namespace, &policy);
        }
    }

    fn forget_fleet(&self, namespace: &str, policy: &str) {
        let labels = [namespace, policy];
        // Absent series are fine: removing is idempotent here.
        let _ = self.fleet_cost_per_day.remove_label_values(&labels);
        let _ = self.fleet_flagged.remove_label_values(&labels);
        for state in ["selected", "reporting", "current"] {
            let _ = self
                .fleet_pods
                .remove_label_values(&[namespace, policy, state]);
        }
        if let Ok(mut series) = self.fleet_series.lock() {
            series.remove(&(namespace.to_string(), policy.to_string()));
        }
    }
}

/// An [`IntCounterVec`] named `name` with the labels `labels`.
fn counter_vec(name: &str, help: &str, labels: &[&str]) -> prometheus::Result<IntCounterVec> {
    IntCounterVec::new(Opts::new(name, help), labels)
}

/// An [`IntGaugeVec`] named `name` with the labels `labels`.
fn int_gauge_vec(name: &str, help: &str, labels: &[&str]) -> prometheus::Result<IntGaugeVec> {
    IntGaugeVec::new(Opts::new(name, help), labels)
}

#[cfg(test)]
mod tests;
