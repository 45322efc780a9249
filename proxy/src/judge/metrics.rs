//! Every metric of the gate, registered once. Names carry the `fleetgate_` prefix and their
//! unit; label values come only from stable enum codes, never from hosts or paths.

use prometheus::{
    HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

use crate::judge::gates::Verdict;

/// The gate's metrics.
#[derive(Clone, Debug)]
pub struct ProxyMetrics {
    /// `fleetgate_gate_decisions_total{gate,verdict,reason}`: one per gate per URL.
    pub(crate) gate_decisions: IntCounterVec,
    /// `fleetgate_extract_items_total{outcome}`: extract items by final outcome code
    /// (`ok`, a deny code, or a vendor failure code).
    pub(crate) extract_items: IntCounterVec,
    /// `fleetgate_http_request_duration_seconds{route}`: api and admin request latency.
    pub(crate) request_duration: HistogramVec,
    /// `fleetgate_vendor_request_duration_seconds{vendor,status_class}`.
    pub(crate) vendor_duration: HistogramVec,
    /// `fleetgate_policy_reloads_total{result}`: `ok`, `invalid`, `timeout`; `unchanged` is not
    /// counted.
    pub(crate) policy_reloads: IntCounterVec,
    /// `fleetgate_policy_last_reload_success_timestamp_seconds`.
    pub(crate) policy_loaded_at: IntGauge,
    /// `fleetgate_store_writes_total{outcome}`: full-text store writes (`ok`, `failed`).
    pub(crate) store_writes: IntCounterVec,
    /// `fleetgate_blocklist_rules`: rules in the active website blocklist.
    pub(crate) blocklist_rules: IntGauge,
    /// `fleetgate_listener_connections_total{listener}`: client connections accepted by an
    /// egress listener (`forward_proxy`, ...).
    pub(crate) listener_connections: IntCounterVec,
    /// `fleetgate_listener_accept_errors_total{listener,kind}`: failed accepts by listener
    /// (`api`, `admin`, `forward_proxy`, `transparent`, ...) and kind (`resource`: out of
    /// descriptors or memory, the listener backs off; `connection`: one connection failed).
    pub(crate) accept_errors: IntCounterVec,
    /// `fleetgate_listener_requests_total{listener,proxy_type,verdict}`: egress requests by
    /// kind (`http`, `connect`) and verdict (`allow`, `deny`, `report`, `error`).
    pub listener_requests: IntCounterVec,
    /// `fleetgate_listener_refusals_total{listener,code}`: refused or failed egress requests
    /// by stable code (a gate code, `proxy_loop`, `too_many_tunnels`, an upstream code).
    pub listener_refusals: IntCounterVec,
    /// `fleetgate_listener_bytes_total{listener,direction}`: bytes relayed; `in` flows from
    /// the client towards the upstream, `out` from the upstream back to the client.
    pub listener_bytes: IntCounterVec,
    /// `fleetgate_listener_active_tunnels{listener}`: open CONNECT tunnels.
    pub(crate) active_tunnels: IntGaugeVec,
    /// `fleetgate_shard_connections{shard}`: client connections open on each listener thread
    /// (`0` is the thread that accepts; see `crate::base::shards`).
    pub(crate) shard_connections: IntGaugeVec,
    /// `fleetgate_cache_lookups_total{outcome}`: `hit`, `miss`, `stale` or a no-cache reason.
    pub(crate) cache_lookups: IntCounterVec,
    /// `fleetgate_cache_writes_total{outcome}`: `stored` or a no-cache reason.
    pub(crate) cache_writes: IntCounterVec,
    /// `fleetgate_search_requests_total{outcome}`: `ok`, `memo_hit`, `rescued` or a failure
    /// code.
    pub(crate) searches: IntCounterVec,
    /// `fleetgate_extract_rescues_total{from,to,outcome}`: rescue passes by backend
    /// (`served`, `failed`).
    pub(crate) rescues: IntCounterVec,
    /// `fleetgate_search_rescues_total{from,to,outcome}`: rescues of a failed search by
    /// backend (`to` is `keyless` for the ring) and outcome (`served`, `failed`).
    pub(crate) search_rescues: IntCounterVec,
    /// `fleetgate_log_lines_dropped_total`: log lines dropped because the log queue was full
    /// (brought up to date on every scrape by [`ProxyMetrics::sync_log_drops`]).
    pub(crate) log_lines_dropped: IntCounter,
    /// The `allow` series of the gates every relayed URL passes, resolved once.
    allows: GateAllows,
}

/// `fleetgate_gate_decisions_total{gate,verdict="allow",reason="ok"}` of the gates every URL
/// passes: a labelled lookup hashes its values under a lock, and a relayed request counts
/// four or five of these.
#[derive(Clone, Debug)]
struct GateAllows {
    secret_url: IntCounter,
    ssrf: IntCounter,
    website_blocklist: IntCounter,
    port: IntCounter,
    proxy_loop: IntCounter,
}

// === impl GateAllows ===

impl GateAllows {
    fn resolve(decisions: &IntCounterVec) -> Self {
        let allow = |gate: &str| decisions.with_label_values(&[gate, "allow", "ok"]);
        Self {
            secret_url: allow("secret_url"),
            ssrf: allow("ssrf"),
            website_blocklist: allow("website_blocklist"),
            port: allow("port"),
            proxy_loop: allow("proxy_loop"),
        }
    }

    fn get(&self, gate: &str) -> Option<&IntCounter> {
        match gate {
            "secret_url" => Some(&self.secret_url),
            "ssrf" => Some(&self.ssrf),
            "website_blocklist" => Some(&self.website_blocklist),
            "port" => Some(&self.port),
            "proxy_loop" => Some(&self.proxy_loop),
            _ => None,
        }
    }
}

// === impl ProxyMetrics ===

impl ProxyMetrics {
    /// Create and register every metric in `reg`.
    pub(crate) fn register(reg: &Registry) -> prometheus::Result<Self> {
        let gate_decisions = counter_vec(
            "fleetgate_gate_decisions_total",
            "Gate decisions by gate, verdict and reason code.",
            &["gate", "verdict", "reason"],
        )?;
        let m = Self {
            allows: GateAllows::resolve(&gate_decisions),
            gate_decisions,
            extract_items: counter_vec(
                "fleetgate_extract_items_total",
                "Extract items by outcome code.",
                &["outcome"],
            )?,
            request_duration: histogram_vec(
                "fleetgate_http_request_duration_seconds",
                "Latency of requests served by the gate's listeners, by route.",
                vec![
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0,
                ],
                &["route"],
            )?,
            vendor_duration: histogram_vec(
                "fleetgate_vendor_request_duration_seconds",
                "Latency of upstream fetches by backend and status class.",
                vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0],
                &["vendor", "status_class"],
            )?,
            policy_reloads: counter_vec(
                "fleetgate_policy_reloads_total",
                "Policy reload attempts by result.",
                &["result"],
            )?,
            policy_loaded_at: IntGauge::new(
                "fleetgate_policy_last_reload_success_timestamp_seconds",
                "Unix time of the last successful policy load.",
            )?,
            store_writes: counter_vec(
                "fleetgate_store_writes_total",
                "Full-text store writes by outcome.",
                &["outcome"],
            )?,
            cache_lookups: counter_vec(
                "fleetgate_cache_lookups_total",
                "Shared cache lookups by outcome.",
                &["outcome"],
            )?,
            cache_writes: counter_vec(
                "fleetgate_cache_writes_total",
                "Shared cache writes by outcome.",
                &["outcome"],
            )?,
            searches: counter_vec(
                "fleetgate_search_requests_total",
                "Search calls by outcome.",
                &["outcome"],
            )?,
            rescues: counter_vec(
                "fleetgate_extract_rescues_total",
                "Rescue passes after the extract backend failed every URL, by backend and outcome.",
                &["from", "to", "outcome"],
            )?,
            search_rescues: counter_vec(
                "fleetgate_search_rescues_total",
                "Rescues after the search backend failed, by backend and outcome.",
                &["from", "to", "outcome"],
            )?,
            blocklist_rules: IntGauge::new(
                "fleetgate_blocklist_rules",
                "Rules in the active website blocklist.",
            )?,
            listener_connections: counter_vec(
                "fleetgate_listener_connections_total",
                "Client connections accepted by an egress listener.",
                &["listener"],
            )?,
            accept_errors: counter_vec(
                "fleetgate_listener_accept_errors_total",
                "Failed accepts by listener and kind (resource: out of descriptors or memory).",
                &["listener", "kind"],
            )?,
            listener_requests: counter_vec(
                "fleetgate_listener_requests_total",
                "Egress requests by listener, proxy type and verdict.",
                &["listener", "proxy_type", "verdict"],
            )?,
            listener_refusals: counter_vec(
                "fleetgate_listener_refusals_total",
                "Refused or failed egress requests by listener and code.",
                &["listener", "code"],
            )?,
            listener_bytes: counter_vec(
                "fleetgate_listener_bytes_total",
                "Bytes relayed by an egress listener (in: client to upstream, out: upstream to client).",
                &["listener", "direction"],
            )?,
            shard_connections: gauge_vec(
                "fleetgate_shard_connections",
                "Client connections open on each listener thread.",
                &["shard"],
            )?,
            active_tunnels: gauge_vec(
                "fleetgate_listener_active_tunnels",
                "Open CONNECT tunnels by listener.",
                &["listener"],
            )?,
            log_lines_dropped: IntCounter::new(
                "fleetgate_log_lines_dropped_total",
                "Log lines dropped because the log queue was full.",
            )?,
        };
        m.register_in(reg)?;
        m.start_alerted_series_at_zero();
        Ok(m)
    }

    /// Register every metric of `self` in `reg`.
    fn register_in(&self, reg: &Registry) -> prometheus::Result<()> {
        reg.register(Box::new(self.log_lines_dropped.clone()))?;
        reg.register(Box::new(self.gate_decisions.clone()))?;
        reg.register(Box::new(self.extract_items.clone()))?;
        reg.register(Box::new(self.request_duration.clone()))?;
        reg.register(Box::new(self.vendor_duration.clone()))?;
        reg.register(Box::new(self.policy_reloads.clone()))?;
        reg.register(Box::new(self.policy_loaded_at.clone()))?;
        reg.register(Box::new(self.store_writes.clone()))?;
        reg.register(Box::new(self.blocklist_rules.clone()))?;
        reg.register(Box::new(self.listener_connections.clone()))?;
        reg.register(Box::new(self.accept_errors.clone()))?;
        reg.register(Box::new(self.listener_requests.clone()))?;
        reg.register(Box::new(self.listener_refusals.clone()))?;
        reg.register(Box::new(self.listener_bytes.clone()))?;
        reg.register(Box::new(self.active_tunnels.clone()))?;
        reg.register(Box::new(self.shard_connections.clone()))?;
        reg.register(Box::new(self.rescues.clone()))?;
        reg.register(Box::new(self.search_rescues.clone()))?;
        reg.register(Box::new(self.cache_lookups.clone()))?;
        reg.register(Box::new(self.cache_writes.clone()))?;
        reg.register(Box::new(self.searches.clone()))?;
        Ok(())
    }

    /// Create, at 0, the series the shipped alerts watch for a first occurrence: a counter
    /// series that appears with the value 1 has no earlier sample, so `increase()` would miss
    /// the one metadata attempt or leaked secret that matters most.
    fn start_alerted_series_at_zero(&self) {
        for (gate, reason) in [
            ("ssrf", "ip_cloud_metadata"),
            ("secret_url", "secret_in_url"),
            ("secret_url", "sensitive_query_param"),
            ("secret_url", "credentials_in_userinfo"),
            ("secret_url", "secret_in_host"),
        ] {
            self.gate_decisions
                .with_label_values(&[gate, "deny", reason]);
        }
        for result in ["ok", "invalid"] {
            self.policy_reloads.with_label_values(&[result]);
        }
        for listener in ["api", "admin", "forward_proxy", "transparent"] {
            self.accept_errors
                .with_label_values(&[listener, "resource"]);
        }
        for outcome in ["volume_unwritable", "volume_full", "volume_error"] {
            self.cache_writes.with_label_values(&[outcome]);
        }
        for outcome in ["volume_unreadable", "corrupt_entry"] {
            self.cache_lookups.with_label_values(&[outcome]);
        }
        self.store_writes.with_label_values(&["failed"]);
    }

    /// Count one decision of `gate` (`verdict` `allow`, `deny` or `report`; `reason` its code).
    pub(crate) fn count_gate(&self, gate: &str, verdict: &str, reason: &str) {
        if verdict == "allow"
            && let Some(allowed) = self.allows.get(gate)
        {
            allowed.inc();
            return;
        }
        self.gate_decisions
            .with_label_values(&[gate, verdict, reason])
            .inc();
    }

    /// Count one gate's [`Verdict`] (see [`Self::count_gate`]).
    pub(crate) fn count_verdict(&self, gate: &str, verdict: &Verdict) {
        let (v, reason) = match verdict {
            Verdict::Allow => ("allow", "ok"),
            Verdict::Deny(r) => ("deny", r.code()),
            Verdict::Report(r) => ("report", r.code()),
        };
        self.count_gate(gate, v, reason);
    }

    /// Metrics registered in a private registry (CLI one-shots and tests).
    pub fn unregistered() -> prometheus::Result<Self> {
        Self::register(&Registry::new())
    }

    /// Bring `fleetgate_log_lines_dropped_total` up to the log queue's own count. The lock
    /// keeps two concurrent scrapes from adding the same drops twice.
    pub(crate) fn sync_log_drops(&self) {
        static SYNC: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _guard = SYNC.lock();
        let (seen, now) = (
            self.log_lines_dropped.get(),
            crate::judge::telemetry::dropped_lines(),
        );
        if now > seen {
            self.log_lines_dropped.inc_by(now - seen);
        }
    }
}

/// `2xx`, `3xx`, ... or `error` when there was no status.
pub(crate) fn status_class(status: Option<u16>) -> &'static str {
    match status {
        Some(200..=299) => "2xx",
        Some(300..=399) => "3xx",
        Some(400..=499) => "4xx",
        Some(500..=599) => "5xx",
        _ => "error",
    }
}

/// An unregistered counter family `name` with `help` over `labels`.
fn counter_vec(name: &str, help: &str, labels: &[&str]) -> prometheus::Result<IntCounterVec> {
    IntCounterVec::new(Opts::new(name, help), labels)
}

/// An unregistered gauge family `name` with `help` over `labels`.
fn gauge_vec(name: &str, help: &str, labels: &[&str]) -> prometheus::Result<IntGaugeVec> {
    IntGaugeVec::new(Opts::new(name, help), labels)
}

/// An unregistered histogram family `name` with `help` and `buckets` over `labels`.
fn histogram_vec(
    name: &str,
    help: &str,
    buckets: Vec<f64>,
    labels: &[&str],
) -> prometheus::Result<HistogramVec> {
    HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(m: &ProxyMetrics, labels: &[&str]) -> u64 {
        m.gate_decisions
            .get_metric_with_label_values(labels)
            .map(|c| c.get())
            .unwrap_or(0)
    }

    #[test]
    fn resolved_allow_series_and_labelled_lookups_count_into_the_same_export() {
        let reg = Registry::new();
        let m = ProxyMetrics::register(&reg).expect("metrics must register");
        // The four resolved series and one looked up by label.
        const GATES: [&str; 5] = [
            "secret_url",
            "ssrf",
            "website_blocklist",
            "port",
            "parse_items",
        ];
        for gate in GATES {
            m.count_gate(gate, "allow", "ok");
            m.count_gate(gate, "allow", "ok");
        }
        m.count_gate("ssrf", "deny", "ip_private_range");
        m.count_gate("website_blocklist", "report", "blocked_by_policy");
        for gate in GATES {
            assert_eq!(value(&m, &[gate, "allow", "ok"]), 2, "{gate} allow");
        }
        assert_eq!(value(&m, &["ssrf", "deny", "ip_private_range"]), 1);
        assert_eq!(
            value(&m, &["website_blocklist", "report", "blocked_by_policy"]),
            1
        );
        let exported: u64 = reg
            .gather()
            .iter()
            .filter(|f| f.name() == "fleetgate_gate_decisions_total")
            .flat_map(|f| {
                f.get_metric()
                    .iter()
                    .map(|s| s.get_counter().get_value() as u64)
            })
            .sum();
        assert_eq!(
            exported, 12,
            "every count must reach the scrape exactly once"
        );
    }
}
