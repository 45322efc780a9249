//! Watches: call one MCP read tool and report only the items whose ids were never seen, so
//! a cron job wakes its agent only when there is something new.
//!
//! A run: find the watch in the policy, take its lock (runs of one watch are serialised),
//! read the state, call the tool through the egress gates ([`mcp`]), find the items
//! ([`items`]), merge their ids into the state ([`state`]) and print one line per new item or
//! `{"wakeAgent": false}`. The first run records a baseline and reports nothing; any error
//! leaves the state as it was; a dry run never writes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use prometheus::{IntCounterVec, Opts, Registry};

use crate::judge::metrics::ProxyMetrics;
use crate::live::runtime::Runtime;
use crate::policy::watch::WatchSpec;

pub(crate) mod cli;
pub(crate) mod error;
pub(crate) mod items;
pub(crate) mod mcp;
pub(crate) mod route;
pub(crate) mod state;

pub(crate) use error::WatchError;

/// What a successful run found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RunOutput {
    /// `baseline`, `no_change` or `new_items`.
    pub(crate) result: &'static str,
    /// Ids never seen before (all current ids on a baseline run).
    pub(crate) new_items: usize,
    /// The text/plain output (ends with a newline).
    pub(crate) text: String,
}

/// Metrics of the watches.
#[derive(Clone, Debug)]
pub(crate) struct WatchMetrics {
    /// `fleetgate_watch_runs_total{watch,result}`: `baseline`, `no_change`, `new_items`, `error`.
    pub(crate) runs: IntCounterVec,
    /// `fleetgate_watch_new_items_total{watch}`: new ids reported.
    pub(crate) new_items: IntCounterVec,
    /// `fleetgate_watch_errors_total{watch,reason}`: failed runs by reason code.
    pub(crate) errors: IntCounterVec,
    /// `fleetgate_watch_dry_runs_total{watch,result}`: dry runs (`?dry_run=1`, `--dry-run`) by
    /// the result they showed; they change no state and count in no other watch metric.
    pub(crate) dry_runs: IntCounterVec,
}

/// The watches of a gate: per-watch locks (kept across policy reloads) and metrics.
#[derive(Debug)]
pub(crate) struct Watches {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Metrics.
    pub(crate) metrics: WatchMetrics,
}

// === impl Watches ===

impl Watches {
    /// Watches whose metrics are registered in `reg`.
    pub(crate) fn register(reg: &Registry) -> prometheus::Result<Self> {
        let counter = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels)?;
            reg.register(Box::new(c.clone()))?;
            Ok::<_, prometheus::Error>(c)
        };
        Ok(Self {
            locks: Mutex::new(HashMap::new()),
            metrics: WatchMetrics {
                runs: counter(
                    "fleetgate_watch_runs_total",
                    "Watch runs by result.",
                    &["watch", "result"],
                )?,
                new_items: counter(
                    "fleetgate_watch_new_items_total",
                    "New items reported by watches.",
                    &["watch"],
                )?,
                errors: counter(
                    "fleetgate_watch_errors_total",
                    "Failed watch runs by reason.",
                    &["watch", "reason"],
                )?,
                dry_runs: counter(
                    "fleetgate_watch_dry_runs_total",
                    "Watch dry runs by the result they showed (no state changed).",
                    &["watch", "result"],
                )?,
            },
        })
    }

    /// Run watch `name` of `rt`'s policy once and count the outcome.
    pub(crate) async fn run(
        &self,
        rt: &Runtime,
        metrics: &ProxyMetrics,
        own: &crate::base::dialer::OwnListeners,
        name: &str,
        dry_run: bool,
    ) -> Result<RunOutput, WatchError> {
        let Some(spec) = rt.policy.watches.iter().find(|w| w.name == name) else {
            return Err(WatchError::Unknown(name.to_string()));
        };
        let lock = self.lock_of(name);
        let _guard = lock.lock().await;
        let outcome = run_once(rt, metrics, own, spec, dry_run).await;
        let m = &self.metrics;
        if dry_run {
            // A dry run is a look, not a run: it moves no run or item counter.
            let result = outcome.as_ref().map_or("error", |out| out.result);
            m.dry_runs.with_label_values(&[name, result]).inc();
            return outcome;
        }
        match &outcome {
            Ok(out) => {
                m.runs.with_label_values(&[name, out.result]).inc();
                if out.result == "new_items" {
                    m.new_items
                        .with_label_values(&[name])
                        .inc_by(out.new_items as u64);
                }
            }
            Err(e) => {
                m.runs.with_label_values(&[name, "error"]).inc();
                m.errors.with_label_values(&[name, e.code()]).inc();
            }
        }
        outcome
    }

    fn lock_of(&self, name: &str) -> Arc<tokio::sync::Mutex<()>> {
        match self.locks.lock() {
            Ok(mut map) => map.entry(name.to_string()).or_default().clone(),
            // A poisoned map only means another thread panicked while inserting.
            Err(poisoned) => poisoned
                .into_inner()
                .entry(name.to_string())
                .or_default()
                .clone(),
        }
    }
}

/// One run of one watch, without locking or metrics; `own` are the gate's listeners, which
/// the MCP client never dials.
pub(crate) async fn run_once(
    rt: &Runtime,
    metrics: &ProxyMetrics,
    own: &crate::base::dialer::OwnListeners,
    spec: &WatchSpec,
    dry_run: bool,
) -> Result<RunOutput, WatchError> {
    let path = state::path(&rt.policy.store.root, &spec.name);
    let seen = state::load(&path)?;
    let docs = mcp::call(rt, metrics, own, spec).await?;
    let found = items::extract(&docs, &spec.id_field);
    if let Some(error) = found.envelope_error {
        return Err(WatchError::Source(format!(
            "tool {} reported an error: {}",
            spec.tool,
            error.split_whitespace().collect::<Vec<_>>().join(" ")
        )));
    }
    let current: Vec<String> = found.items.iter().map(|i| i.id.clone()).collect();
    let (new, stored) = state::merge(seen.as_deref().unwrap_or(&[]), &current, spec.max_seen);
    if !dry_run {
        state::save(
            &path,
            &spec.name,
            &stored,
            crate::base::clock::now_secs_i64(),
        )?;
    }
    let new_set: std::collections::HashSet<&str> = new.iter().map(String::as_str).collect();
    let lines: Vec<String> = found
        .items
        .iter()
        .filter(|i| new_set.contains(i.id.as_str()))
        .map(|i| items::line(i, &spec.show_fields))
        .collect();
    let (result, text) = match (&seen, dry_run) {
        // A dry run without state shows the items the baseline would record.
        (None, true) => ("baseline", items::render(&lines, spec.max_new)),
        (None, false) => ("baseline", items::render(&[], spec.max_new)),
        (Some(_), _) if lines.is_empty() => ("no_change", items::render(&[], spec.max_new)),
        (Some(_), _) => ("new_items", items::render(&lines, spec.max_new)),
    };
    Ok(RunOutput {
        result,
        new_items: new.len(),
        text,
    })
}
