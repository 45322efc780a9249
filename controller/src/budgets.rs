//! Namespace LLM budgets (`spec.llm.budgets.namespace`): the spend each gate reports for the
//! current UTC day (`GET /v1/status`'s `llm.spend`) summed per role, against the namespace's
//! daily dollars. A role at or over its cap is written into the gates' policy as spent
//! (`llm.budgets.exhausted`, with its day) at the next reconcile, and the gates refuse it
//! until 00:00 UTC.
//!
//! Overshoot bound: a gate learns a role is spent one reconcile after the poll that saw it
//! (the poll runs each `resyncSeconds`, default 60 s; a new verdict requeues the reconcile at
//! once) plus the gate's policy reload (the kubelet's ConfigMap sync, then the gate's file
//! poll). Until then every gate keeps serving the role, so the namespace can overshoot by
//! what the fleet spends in that time; each pod's own budget still holds at its gate.
//!
//! What a poll sums is kept as the day's high-water mark per role ([`high_water`]): a gate
//! that misses a poll (a timeout, a restart, a pod gone) takes its spend out of that poll's
//! sum, but not out of the day's, so a spent role stays spent until 00:00 UTC rather than
//! being served again until the gate answers.

use std::collections::BTreeMap;

use fleetgate_policy::llm::spend::RawExhausted;

use crate::crd::llm::LlmBudgetsSpec;
use crate::crd::{LlmBudgetStatus, RoleBudgetStatus};

/// One gate's spend today, per budget role, in USD.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GateSpend {
    /// The gate's UTC day (`YYYY-MM-DD`).
    pub day: String,
    /// Role → dollars.
    pub usd: BTreeMap<String, f64>,
}

/// The namespace's spend on one day.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NamespaceSpend {
    /// The UTC day summed: the latest day any gate reports (a gate still on yesterday has not
    /// reset yet and is left out).
    pub day: String,
    /// Role → dollars over the gates on that day.
    pub usd: BTreeMap<String, f64>,
    /// Gates summed.
    pub gates: u32,
}

/// Read `GET /v1/status`'s `llm.spend` (`{"day", "roles": {role: {"usd"}}}`); `None` from a
/// gate that reports none (an older gate).
pub fn from_status(status: &serde_json::Value) -> Option<GateSpend> {
    let spend = status.pointer("/llm/spend")?;
    let day = spend.get("day")?.as_str()?.to_string();
    let usd = spend
        .get("roles")
        .and_then(|r| r.as_object())
        .map(|roles| {
            roles
                .iter()
                .filter_map(|(role, v)| {
                    let usd = v
                        .get("usd")?
                        .as_f64()
                        .filter(|u| u.is_finite() && *u >= 0.0)?;
                    Some((role.clone(), usd))
                })
                .collect()
        })
        .unwrap_or_default();
    Some(GateSpend { day, usd })
}

/// Sum the gates' spend on the latest day any of them reports.
pub fn sum<'a>(gates: impl IntoIterator<Item = &'a GateSpend>) -> Option<NamespaceSpend> {
    let gates: Vec<&GateSpend> = gates.into_iter().collect();
    let day = gates.iter().map(|g| g.day.as_str()).max()?.to_string();
    let mut out = NamespaceSpend {
        day,
        ..NamespaceSpend::default()
    };
    for g in gates.iter().filter(|g| g.day == out.day) {
        out.gates += 1;
        for (role, usd) in &g.usd {
            *out.usd.entry(role.clone()).or_default() += usd;
        }
    }
    Some(out)
}

/// The day's spend as far as this controller has seen it: per role, the larger of what the
/// gates report now and what they reported earlier the same day (`previous`); a new day starts
/// from `now`. A poll summing an earlier day than `previous` (only gates still on yesterday
/// answered) keeps `previous`. The gate count is the poll's own.
pub fn high_water(previous: Option<&NamespaceSpend>, now: NamespaceSpend) -> NamespaceSpend {
    let Some(previous) = previous else {
        return now;
    };
    match now.day.cmp(&previous.day) {
        std::cmp::Ordering::Greater => now,
        std::cmp::Ordering::Less => NamespaceSpend {
            gates: now.gates,
            ..previous.clone()
        },
        std::cmp::Ordering::Equal => {
            let mut usd = previous.usd.clone();
            for (role, spent) in now.usd {
                let kept = usd.entry(role).or_default();
                *kept = kept.max(spent);
            }
            NamespaceSpend { usd, ..now }
        }
    }
}

/// The roles at or over their namespace cap on the summed day.
pub fn exhausted(spend: &NamespaceSpend, budgets: &LlmBudgetsSpec) -> RawExhausted {
    let roles = budgets
        .namespace
        .iter()
        .filter_map(|(role, b)| {
            let cap = b.daily_usd?;
            let spent = spend.usd.get(role).copied().unwrap_or(0.0);
            (spent >= cap).then(|| role.clone())
        })
        .collect();
    RawExhausted {
        day: spend.day.clone(),
        roles,
    }
}

/// The status of the namespace's LLM spend: every role with spend or a namespace budget.
pub fn status(spend: &NamespaceSpend, budgets: Option<&LlmBudgetsSpec>) -> LlmBudgetStatus {
    let caps: BTreeMap<&str, f64> = budgets
        .map(|b| {
            b.namespace
                .iter()
                .filter_map(|(r, b)| Some((r.as_str(), b.daily_usd?)))
                .collect()
        })
        .unwrap_or_default();
    let mut roles: Vec<&str> = spend.usd.keys().map(String::as_str).collect();
    roles.extend(caps.keys().copied());
    roles.sort_unstable();
    roles.dedup();
    let roles = roles
        .into_iter()
        .map(|role| {
            let spent = cents(spend.usd.get(role).copied().unwrap_or(0.0));
            let cap = caps.get(role).copied();
            RoleBudgetStatus {
                role: role.to_string(),
                spent_usd: spent,
                daily_usd: cap,
                exhausted: cap.is_some_and(|c| spend.usd.get(role).copied().unwrap_or(0.0) >= c),
            }
        })
        .collect();
    LlmBudgetStatus {
        day: spend.day.clone(),
        gates: spend.gates,
        roles,
    }
}

/// `kubectl get fp`'s Budget column: the role closest to its namespace cap as
/// `<role>:$<spent>/$<cap>` (one word, so the table splits on spaces), else the total spent
/// today as `$<spent>`.
pub fn column(status: &LlmBudgetStatus) -> String {
    let tightest = status
        .roles
        .iter()
        .filter_map(|r| Some((r, r.daily_usd.filter(|c| *c > 0.0)?)))
        .max_by(|(a, ca), (b, cb)| (a.spent_usd / ca).total_cmp(&(b.spent_usd / cb)));
    match tightest {
        Some((r, cap)) => format!("{}:${:.2}/${cap:.2}", r.role, r.spent_usd),
        // `+ 0.0`: an empty float sum is -0.0, which would print as "$-0.00".
        None => format!(
            "${:.2}",
            status.roles.iter().map(|r| r.spent_usd).sum::<f64>() + 0.0
        ),
    }
}

fn cents(usd: f64) -> f64 {
    (usd * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests;
