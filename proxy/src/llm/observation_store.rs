//! The last observation per role, with counters, kept in memory for `/v1/report`'s
//! `observed` part (the observer's shape: model, effort, requested and served tier, ts).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::enforce::Rewrite;
use super::request_facts::RequestFacts;
use crate::report::time::format_iso_z;
use crate::report::{GateCounters, Observed, RoleObservation};

/// Roles kept at most; past it, new auxiliary tasks share `auxiliary:other`.
const MAX_ROLES: usize = 64;

/// Observations per role, in first-seen order.
#[derive(Debug, Default)]
pub(crate) struct ObservationStore {
    roles: Mutex<Vec<(String, Slot)>>,
    next_seq: AtomicU64,
}

#[derive(Debug, Default)]
struct Slot {
    observation: RoleObservation,
    counters: GateCounters,
    seq: u64,
}

// === impl ObservationStore ===

impl ObservationStore {
    /// An empty store.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Record a request sent upstream; returns its sequence number for [`Self::record_served`].
    pub(crate) fn record_sent(
        &self,
        role: &str,
        facts: &RequestFacts,
        rewrites: &[Rewrite],
        applied: bool,
    ) -> u64 {
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed) + 1;
        self.with_slot(role, |slot| {
            slot.seq = seq;
            slot.observation = RoleObservation {
                model: facts.model.clone(),
                reasoning_effort: facts.effort.clone(),
                service_tier: facts.service_tier.clone(),
                response_service_tier: None,
                ts: Some(format_iso_z(unix_now())),
                gate: None,
            };
            slot.counters.requests += 1;
            if applied && !rewrites.is_empty() {
                slot.counters.rewritten += 1;
            }
            slot.counters.last_rewrites = rewrites.iter().map(Rewrite::describe).collect();
            slot.counters.applied = applied;
        });
        seq
    }

    /// Count a refused request (it never reached the provider, so the observation stays):
    /// an attempt, and a refused turn unless `retry` says it is a further attempt of one.
    pub(crate) fn record_refused(&self, role: &str, retry: bool) {
        self.with_slot(role, |slot| {
            slot.counters.refused_attempts += 1;
            if !retry {
                slot.counters.refused += 1;
            }
        });
    }

    /// The served tier of request `seq`, once its response ended; ignored when a newer
    /// request of the role was recorded meanwhile.
    pub(crate) fn record_served(&self, role: &str, seq: u64, tier: Option<&str>) {
        self.with_slot(role, |slot| {
            if slot.seq == seq {
                slot.observation.response_service_tier = tier.map(str::to_string);
            }
        });
    }

    /// A snapshot in the report's shape.
    pub(crate) fn observed(&self) -> Observed {
        let mut out = Observed::default();
        if let Ok(roles) = self.roles.lock() {
            for (role, slot) in roles.iter() {
                let mut observation = slot.observation.clone();
                observation.gate = Some(slot.counters.clone());
                out.insert(role.clone(), observation);
            }
        }
        out
    }

    fn with_slot(&self, role: &str, f: impl FnOnce(&mut Slot)) {
        let Ok(mut roles) = self.roles.lock() else {
            return;
        };
        let role = if roles.len() >= MAX_ROLES && !roles.iter().any(|(r, _)| r == role) {
            "auxiliary:other"
        } else {
            role
        };
        match roles.iter().position(|(r, _)| r == role) {
            Some(i) => f(&mut roles[i].1),
            None => {
                let mut slot = Slot::default();
                f(&mut slot);
                roles.push((role.to_string(), slot));
            }
        }
    }
}

fn unix_now() -> f64 {
    crate::base::clock::now_secs() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(model: &str, effort: Option<&str>) -> RequestFacts {
        RequestFacts {
            model: Some(model.into()),
            effort: effort.map(str::to_string),
            service_tier: None,
        }
    }

    #[test]
    fn the_last_request_per_role_wins_and_counters_accumulate() {
        let store = ObservationStore::new();
        let first = store.record_sent("main", &facts("a", Some("low")), &[], false);
        store.record_refused("main", false);
        store.record_refused("main", true);
        let rewrite = Rewrite {
            field: "reasoning_effort",
            from: Some("low".into()),
            to: "high".into(),
        };
        let second = store.record_sent("main", &facts("b", Some("high")), &[rewrite], true);
        store.record_served("main", first, Some("flex"));
        store.record_served("main", second, Some("priority"));
        store.record_sent("auxiliary:vision", &facts("v", None), &[], false);
        let observed = store.observed();
        let roles: Vec<&str> = observed.roles().map(|(r, _)| r).collect();
        assert_eq!(
            roles,
            ["main", "auxiliary:vision"],
            "roles keep first-seen order"
        );
        let main = observed.get("main").expect("main must be observed");
        assert_eq!(main.model.as_deref(), Some("b"), "the newest request wins");
        assert_eq!(
            main.response_service_tier.as_deref(),
            Some("priority"),
            "a stale response must not overwrite the newest request's tier"
        );
        let gate = main.gate.clone().expect("gate counters must be attached");
        assert_eq!(
            (
                gate.requests,
                gate.refused,
                gate.refused_attempts,
                gate.rewritten
            ),
            (2, 1, 2, 1),
            "counters: one refused turn of two attempts"
        );
        assert_eq!(
            gate.last_rewrites,
            ["reasoning_effort: low -> high"],
            "last rewrites"
        );
        assert!(
            main.ts.as_deref().is_some_and(|t| t.ends_with('Z')),
            "ts is ISO UTC"
        );
    }
}
