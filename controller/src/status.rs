//! Status computation (pure): the `Valid` and `Ready` conditions and the rendered hashes.
//!
//! Sits between [`crate::desired`] and [`crate::reconcile`]: given the object, its render
//! result and "now", it returns the status the controller wants. A condition keeps its
//! `lastTransitionTime` while its status stays the same, and the fleet fields (pods, tiers,
//! cron costs) the scraper writes are carried over untouched, so computing the status twice
//! gives the same value and the reconcile loop writes only when something really changed.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::crd::{FleetPolicy, FleetPolicyStatus};
use crate::desired::{Desired, Problems, RenderError};
use crate::fleet::{FleetView, Verdict};

#[cfg(test)]
mod tests;

/// The condition types the controller writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionType {
    /// The spec renders (the gate accepts the policy).
    Valid,
    /// The ConfigMap of the current spec is applied (and, when the fleet is scraped, every
    /// selected pod runs it).
    Ready,
    /// Every selected pod reports the current policy and managed hashes (fleet scrape).
    Propagated,
    /// An observed model / effort / tier differs from a pin (fleet scrape).
    Drift,
    /// The cluster baselines (ClusterFleetPolicies) tightened the spec, or refuse it. Only
    /// written when the controller reads baselines.
    Baseline,
}

/// Why a condition has its status; stable CamelCase codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The spec rendered into a gate policy the gate accepts.
    Rendered,
    /// The spec is invalid; the message names the fields.
    InvalidSpec,
    /// The object has no name.
    MissingName,
    /// Rendering failed for a reason that is not the user's.
    RenderFailed,
    /// The ConfigMap of the current spec is applied.
    Applied,
    /// The last good ConfigMap stays; the current spec is not applied.
    KeptLastGood,
    /// A cluster baseline refuses the spec: a field it bounds would be left empty.
    BaselineConflict,
    /// No ClusterFleetPolicy exists; the spec renders as written.
    NoBaseline,
    /// A field a baseline bounds would be left empty (the `Baseline` condition's reason).
    Conflict,
}

// === impl ConditionType ===

impl ConditionType {
    /// The condition's `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Valid => "Valid",
            Self::Ready => "Ready",
            Self::Propagated => "Propagated",
            Self::Drift => "Drift",
            Self::Baseline => "Baseline",
        }
    }
}

// === impl Reason ===

impl Reason {
    /// The condition's `reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rendered => "Rendered",
            Self::InvalidSpec => "InvalidSpec",
            Self::MissingName => "MissingName",
            Self::RenderFailed => "RenderFailed",
            Self::Applied => "Applied",
            Self::KeptLastGood => "KeptLastGood",
            Self::BaselineConflict => "BaselineConflict",
            Self::NoBaseline => "NoBaseline",
            Self::Conflict => "Conflict",
        }
    }

    fn of(err: &RenderError) -> Self {
        match err {
            RenderError::MissingName => Self::MissingName,
            RenderError::InvalidSpec(_) => Self::InvalidSpec,
            RenderError::Baseline(_) => Self::BaselineConflict,
            RenderError::Serialize { .. } => Self::RenderFailed,
        }
    }
}

/// The status the controller wants for `fp` after rendering it into `rendered` and, when the
/// fleet was scraped, observing it as `fleet`.
///
/// On a render error the hashes of the last good render stay, since the last good ConfigMap
/// stays in place. Without a fleet view the fleet fields and conditions of the previous status
/// are carried over.
pub fn compute(
    fp: &FleetPolicy,
    rendered: &Result<Desired, RenderError>,
    fleet: Option<&FleetView>,
    now: &Time,
) -> FleetPolicyStatus {
    let old = fp.status.clone().unwrap_or_default();
    let generation = fp.metadata.generation;
    let mut status = FleetPolicyStatus {
        observed_generation: generation,
        conditions: Vec::new(),
        ..old.clone()
    };
    let mut verdicts = render_verdicts(&mut status, rendered, fleet);
    if let Some(v) = baseline_verdict(rendered) {
        verdicts.push((ConditionType::Baseline, v));
    }
    if let Some(f) = fleet {
        status.pods = Some(f.pods.clone());
        status.observed_tiers = f.observed_tiers.clone();
        status.cron_jobs = f.cron_jobs.clone();
        status.cron_job_count = Some(f.cron_job_count);
        status.total_cost_per_day = Some(f.total_cost_per_day);
        status.flagged = Some(f.flagged);
        let budgets = fp.spec.llm.as_ref().and_then(|l| l.budgets.as_ref());
        status.llm_spend = f
            .llm_spend
            .as_ref()
            .map(|s| crate::budgets::status(s, budgets));
        status.budget = status.llm_spend.as_ref().map(crate::budgets::column);
        verdicts.push((ConditionType::Propagated, f.propagated.clone()));
        verdicts.push((ConditionType::Drift, f.drift.clone()));
    }
    for (kind, v) in &verdicts {
        status.conditions.push(condition(
            &old.conditions,
            *kind,
            v.ok,
            v.reason,
            v.message.clone(),
            generation,
            now,
        ));
    }
    // Conditions this computation does not own this time are kept as they are.
    status.conditions.extend(
        old.conditions
            .iter()
            .filter(|c| !verdicts.iter().any(|(k, _)| c.type_ == k.as_str()))
            .cloned(),
    );
    status.conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
    status
}

/// The `Valid` and `Ready` verdicts of a render, and its digests written into `status`.
fn render_verdicts(
    status: &mut FleetPolicyStatus,
    rendered: &Result<Desired, RenderError>,
    fleet: Option<&FleetView>,
) -> Vec<(ConditionType, Verdict)> {
    let mut verdicts = Vec::new();
    match rendered {
        Ok(d) => {
            status.managed_sha256 = Some(d.managed_sha256.clone());
            status.policy_sha256 = Some(d.policy_sha256.clone());
            status.pinned_keys = u32::try_from(d.pinned_keys).ok();
            verdicts.push((
                ConditionType::Valid,
                verdict(
                    true,
                    Reason::Rendered.as_str(),
                    "the spec renders into a policy the gate accepts",
                ),
            ));
            let ready = match fleet {
                Some(f) if !f.propagated.ok => Verdict {
                    ok: false,
                    ..f.propagated.clone()
                },
                _ => verdict(
                    true,
                    Reason::Applied.as_str(),
                    "the managed ConfigMap of this generation is applied",
                ),
            };
            verdicts.push((ConditionType::Ready, ready));
        }
        Err(e) => {
            verdicts.push((
                ConditionType::Valid,
                Verdict {
                    ok: false,
                    reason: Reason::of(e).as_str(),
                    message: e.to_string(),
                },
            ));
            verdicts.push((
                ConditionType::Ready,
                verdict(
                    false,
                    Reason::KeptLastGood.as_str(),
                    "the spec is invalid; the last good ConfigMap stays in place",
                ),
            ));
        }
    }
    verdicts
}

/// The `Baseline` condition: applied (naming each baseline with its generation and each field
/// it changed) or refused; `None` when baselines are not read or the render failed otherwise.
fn baseline_verdict(rendered: &Result<Desired, RenderError>) -> Option<Verdict> {
    let named = |list: &[(String, Option<i64>)]| {
        list.iter()
            .map(|(n, g)| match g {
                Some(g) => format!("{n} (generation {g})"),
                None => n.clone(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    match rendered {
        Ok(Desired {
            baseline: Some(b), ..
        }) if b.baselines.is_empty() => Some(verdict(
            true,
            Reason::NoBaseline.as_str(),
            "no ClusterFleetPolicy exists; the spec renders as written",
        )),
        Ok(Desired {
            baseline: Some(b), ..
        }) => {
            let mut message = format!("applied {}", named(&b.baselines));
            if b.changes.is_empty() {
                message.push_str("; nothing tightened");
            } else {
                message.push_str("; tightened ");
                message.push_str(&Problems(&b.changes).to_string());
            }
            for note in &b.notes {
                message.push_str("; ");
                message.push_str(note);
            }
            Some(Verdict {
                ok: true,
                reason: Reason::Applied.as_str(),
                message,
            })
        }
        Err(RenderError::Baseline(c)) => Some(Verdict {
            ok: false,
            reason: Reason::Conflict.as_str(),
            message: format!(
                "{} refuse this spec, the last good ConfigMap stays: {}",
                named(&c.baselines),
                Problems(&c.problems)
            ),
        }),
        _ => None,
    }
}

fn verdict(ok: bool, reason: &'static str, message: &str) -> Verdict {
    Verdict {
        ok,
        reason,
        message: message.to_string(),
    }
}

/// One condition; `lastTransitionTime` only moves when the status flips.
pub fn condition(
    previous: &[Condition],
    kind: ConditionType,
    ok: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    let status = if ok { "True" } else { "False" };
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == kind.as_str() && c.status == status)
        .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
    Condition {
        type_: kind.as_str().to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message,
        observed_generation: generation,
        last_transition_time,
    }
}

/// Whether `fp`'s current status already equals `wanted` (so nothing needs writing).
/// Conditions compare by type, whatever order the API server returned them in.
pub fn unchanged(fp: &FleetPolicy, wanted: &FleetPolicyStatus) -> bool {
    fp.status
        .as_ref()
        .is_some_and(|current| same(current, wanted))
}

/// Whether two statuses say the same (conditions compared by type, in any order).
pub fn same(a: &FleetPolicyStatus, b: &FleetPolicyStatus) -> bool {
    let (mut a, mut b) = (a.clone(), b.clone());
    a.conditions.sort_by(|x, y| x.type_.cmp(&y.type_));
    b.conditions.sort_by(|x, y| x.type_.cmp(&y.type_));
    a == b
}

/// Whether two statuses computed moments apart say the same but for when their conditions
/// were stamped: a status computed again before the last write came back through the watch
/// stamps its new conditions with a newer time.
pub fn same_but_times(a: &FleetPolicyStatus, b: &FleetPolicyStatus) -> bool {
    let unstamped = |s: &FleetPolicyStatus| {
        let mut s = s.clone();
        for c in &mut s.conditions {
            c.last_transition_time = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        }
        s
    };
    same(&unstamped(a), &unstamped(b))
}

/// What [`same_but_times`] compares, as a sha256 of the status's JSON with its conditions
/// unstamped and in type order: the controller remembers this digest of each status it wrote
/// rather than the status (a few KiB each, with its cron jobs). Two statuses have the same
/// digest exactly when they serialize the same, which for these types is when
/// [`same_but_times`] holds.
pub fn digest_but_times(s: &FleetPolicyStatus) -> [u8; 32] {
    use sha2::{Digest as _, Sha256};
    let mut s = s.clone();
    for c in &mut s.conditions {
        c.last_transition_time = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    }
    s.conditions.sort_by(|x, y| x.type_.cmp(&y.type_));
    // Serializing these types cannot fail (maps have string keys).
    let json = serde_json::to_vec(&s).unwrap_or_default();
    Sha256::digest(&json).into()
}
