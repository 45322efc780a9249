//! `effective = merge(baselines, namespace)`: a FleetPolicy spec tightened by every
//! ClusterFleetPolicy (pure; no I/O, no clock).
//!
//! The result is the spec the controller renders, plus what the baselines changed (each change
//! names the field, the old and new value and the baseline), or the fields they refuse. A
//! refusal is a cut that leaves nothing: no port, no model. The gate reads an empty list as
//! "any", so an empty intersection cannot be rendered and the last good ConfigMap stays.
//!
//! With no baseline the spec comes back unchanged, byte for byte, so turning the cluster part
//! on rolls no pod. The rules of each field are stated on [`crate::crd::cluster_fleet_policy`].

use std::collections::{BTreeMap, BTreeSet};

use fleetgate_policy::secret_rules::RuleSet;

pub use super::problems::Conflict;
use super::problems::SpecProblem;
use crate::crd::cluster_fleet_policy::{ClusterFleetPolicy, ClusterFleetPolicySpec, MinimumMode};
use crate::crd::llm::{LlmModeSpec, LlmProviderTools, LlmSpec};
use crate::crd::{BlocklistMode, EgressMode, FleetPolicySpec};

pub mod cidr;
#[cfg(test)]
mod tests;

/// The ports a FleetPolicy without `egress.ports` uses (the gate's default).
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];
/// Most `allowCIDRs` entries a cut may leave (the FleetPolicy schema's bound).
pub const MAX_ALLOW_CIDRS: usize = 256;

/// The spec a FleetPolicy renders once the baselines have tightened it.
#[derive(Clone, Debug, PartialEq)]
pub struct Merged {
    /// The effective spec.
    pub spec: FleetPolicySpec,
    /// The baselines applied, by name, with their generation.
    pub baselines: Vec<(String, Option<i64>)>,
    /// Each field a baseline changed, with the old and new value.
    pub changes: Vec<SpecProblem>,
    /// Baseline rules with nothing to apply to (a model ceiling without an LLM route).
    pub notes: Vec<String>,
}

/// Tighten `spec` by every baseline, in name order.
pub fn merge(baselines: &[ClusterFleetPolicy], spec: &FleetPolicySpec) -> Result<Merged, Conflict> {
    let mut sorted: Vec<&ClusterFleetPolicy> = baselines.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut m = Merger {
        spec: spec.clone(),
        changes: Vec::new(),
        notes: Vec::new(),
        problems: Vec::new(),
        pinned: BTreeSet::new(),
        name: String::new(),
    };
    for b in &sorted {
        m.name = b.metadata.name.clone().unwrap_or_default();
        m.apply(&b.spec);
    }
    let applied = sorted
        .iter()
        .map(|b| {
            (
                b.metadata.name.clone().unwrap_or_default(),
                b.metadata.generation,
            )
        })
        .collect();
    if !m.problems.is_empty() {
        return Err(Conflict {
            baselines: applied,
            problems: m.problems,
        });
    }
    Ok(Merged {
        spec: m.spec,
        baselines: applied,
        changes: m.changes,
        notes: m.notes,
    })
}

/// The egress mode a pod must run under `spec` and the baselines: the webhook needs it even
/// when the merge refuses the spec, so a refused namespace still cannot escape capture.
pub fn egress_mode(baselines: &[ClusterFleetPolicy], spec: &FleetPolicySpec) -> EgressMode {
    let floor = baselines
        .iter()
        .filter_map(|b| b.spec.egress.minimum_mode)
        .max();
    raise(spec.egress.mode.unwrap_or(EgressMode::Proxy), floor)
}

fn raise(mode: EgressMode, floor: Option<MinimumMode>) -> EgressMode {
    match floor {
        Some(f) if strength(mode) < strength(f.as_egress()) => f.as_egress(),
        _ => mode,
    }
}

fn strength(mode: EgressMode) -> u8 {
    mode.strength()
}

struct Merger {
    spec: FleetPolicySpec,
    changes: Vec<SpecProblem>,
    notes: Vec<String>,
    problems: Vec<SpecProblem>,
    /// (role, field) pins an earlier baseline set: the first name wins.
    pinned: BTreeSet<(String, &'static str)>,
    /// The baseline being applied.
    name: String,
}

impl Merger {
    fn apply(&mut self, b: &ClusterFleetPolicySpec) {
        self.egress(b);
        self.blocklist(b);
        self.secrets(b);
        self.llm(b);
        self.cron(b);
    }

    fn changed(&mut self, field: &str, message: String) {
        self.changes.push(SpecProblem {
            field: field.to_string(),
            message: format!("{message} (ClusterFleetPolicy {})", self.name),
        });
    }

    fn refuse(&mut self, field: &str, message: String) {
        self.problems.push(SpecProblem {
            field: field.to_string(),
            message: format!("{message} (ClusterFleetPolicy {})", self.name),
        });
    }

    fn egress(&mut self, b: &ClusterFleetPolicySpec) {
        let e = &b.egress;
        let mode = self.spec.egress.mode.unwrap_or(EgressMode::Proxy);
        let raised = raise(mode, e.minimum_mode);
        if raised != mode {
            self.spec.egress.mode = Some(raised);
            self.changed(
                "spec.egress.mode",
                format!(
                    "{} raised to {}, the minimumMode; pods injected before take it when they restart",
                    mode_name(mode),
                    mode_name(raised)
                ),
            );
        }
        self.allow_cidrs(e);
        if let Some(allowed) = &e.ports {
            let had = self.spec.egress.ports.clone();
            let ports = had.clone().unwrap_or_else(|| DEFAULT_PORTS.to_vec());
            let kept: Vec<u16> = ports
                .iter()
                .copied()
                .filter(|p| allowed.contains(p))
                .collect();
            if kept.is_empty() {
                self.refuse(
                    "spec.egress.ports",
                    format!(
                        "none of the ports {} is among the ports the baseline allows ({})",
                        list(&ports),
                        list(allowed)
                    ),
                );
            } else if had.as_ref() != Some(&kept) {
                let was = match &had {
                    Some(p) => list(p),
                    None => "unset (80, 443)".into(),
                };
                self.changed(
                    "spec.egress.ports",
                    format!("{was} bound to {} by the baseline's ports", list(&kept)),
                );
                self.spec.egress.ports = Some(kept);
            }
        }
    }

    fn allow_cidrs(&mut self, e: &crate::crd::cluster_fleet_policy::BaselineEgress) {
        let parse = |list: &[String]| -> Vec<cidr::Prefix> {
            list.iter().filter_map(|s| cidr::Prefix::parse(s)).collect()
        };
        let mut deny: Vec<cidr::Prefix> = parse(&e.deny_cidrs)
            .into_iter()
            .flat_map(cidr::Prefix::embedded_forms)
            .collect();
        if deny.iter().any(|d| d.is_v4()) {
            deny.push(cidr::TEREDO);
        }
        let ceiling = e.max_allow_cidrs.as_deref().map(parse);
        if deny.is_empty() && ceiling.is_none() {
            return;
        }
        let mut out = Vec::new();
        let entries = std::mem::take(&mut self.spec.egress.allow_cidrs);
        for (i, text) in entries.iter().enumerate() {
            let Some(entry) = cidr::Prefix::parse(text) else {
                // Not an address: the gate's own validator refuses it, naming the field.
                out.push(text.clone());
                continue;
            };
            let mut kept = cidr::subtract(entry, &deny);
            if let Some(ceiling) = &ceiling {
                kept = kept
                    .into_iter()
                    .flat_map(|k| cidr::intersect(k, ceiling))
                    .collect();
            }
            if kept == [entry] {
                out.push(text.clone());
                continue;
            }
            let field = format!("spec.egress.allowCIDRs[{i}]");
            let why = match &ceiling {
                Some(_) if !e.deny_cidrs.is_empty() => "denyCIDRs and maxAllowCIDRs",
                Some(_) => "maxAllowCIDRs",
                None => "denyCIDRs",
            };
            let shown: Vec<String> = kept.iter().map(ToString::to_string).collect();
            if shown.is_empty() {
                self.changed(
                    &field,
                    format!("{text} removed: the baseline's {why} close it"),
                );
            } else {
                self.changed(
                    &field,
                    format!("{text} cut to {} by the baseline's {why}", shown.join(", ")),
                );
            }
            out.extend(shown);
        }
        if out.len() > MAX_ALLOW_CIDRS {
            self.refuse(
                "spec.egress.allowCIDRs",
                format!(
                    "cutting the entries by the baseline leaves {} ranges, more than {MAX_ALLOW_CIDRS}; list narrower ranges",
                    out.len()
                ),
            );
        }
        self.spec.egress.allow_cidrs = out;
    }

    fn blocklist(&mut self, b: &ClusterFleetPolicySpec) {
        let bl = &b.website_blocklist;
        let ns = &mut self.spec.website_blocklist;
        if !bl.domains.is_empty() {
            if ns.enabled == Some(false) {
                ns.enabled = Some(true);
                let dropped = ns.domains.len() + ns.shared_lists.len();
                ns.domains.clear();
                ns.shared_lists.clear();
                self.changed(
                    "spec.websiteBlocklist.enabled",
                    format!(
                        "false raised to true for the baseline's rules ({dropped} rules of this FleetPolicy stay off)"
                    ),
                );
            }
            let ns = &mut self.spec.website_blocklist;
            let before = ns.domains.len();
            for d in &bl.domains {
                if !ns.domains.contains(d) {
                    ns.domains.push(d.clone());
                }
            }
            let added = ns.domains.len() - before;
            if added > 0 {
                self.changed(
                    "spec.websiteBlocklist.domains",
                    format!("{added} rules of the baseline added"),
                );
            }
        }
        let floor = bl
            .mode
            .or((!bl.domains.is_empty()).then_some(BlocklistMode::Enforce));
        if floor == Some(BlocklistMode::Enforce)
            && self.spec.website_blocklist.mode == Some(BlocklistMode::Report)
        {
            self.spec.website_blocklist.mode = Some(BlocklistMode::Enforce);
            self.changed(
                "spec.websiteBlocklist.mode",
                "report raised to enforce".into(),
            );
        }
    }

    fn secrets(&mut self, b: &ClusterFleetPolicySpec) {
        let bs = &b.secrets;
        let mut ids: Vec<String> = Vec::new();
        if let Some(text) = &bs.rules {
            let origin = format!("ClusterFleetPolicy {} spec.secrets.rules", self.name);
            match RuleSet::parse(text, &origin) {
                Ok(set) => {
                    ids = set.ids().map(str::to_string).collect();
                    if !self.spec.secrets.inline_rules.contains(text) {
                        self.spec.secrets.inline_rules.push(text.clone());
                        self.changed(
                            "spec.secrets.inlineRules",
                            format!("the baseline's secret rules added ({})", ids.len()),
                        );
                    }
                }
                Err(e) => self.refuse("spec.secrets", e.to_string()),
            }
        }
        let allow = std::mem::take(&mut self.spec.secrets.allow);
        let mut kept = Vec::new();
        for (i, entry) in allow.into_iter().enumerate() {
            let field = format!("spec.secrets.allow[{i}]");
            if bs.namespace_allow == Some(false) {
                self.changed(
                    &field,
                    format!("{entry} removed: the baseline keeps exemptions to itself"),
                );
            } else if ids.iter().any(|id| id == entry.trim()) {
                self.changed(
                    &field,
                    format!("{entry} removed: a baseline rule cannot be exempted by a namespace"),
                );
            } else {
                kept.push(entry);
            }
        }
        for entry in &bs.allow {
            if !kept.contains(entry) {
                kept.push(entry.clone());
            }
        }
        self.spec.secrets.allow = kept;
        let floor = bs
            .mode
            .or(bs.rules.is_some().then_some(BlocklistMode::Enforce));
        if floor == Some(BlocklistMode::Enforce)
            && self.spec.secrets.mode == Some(BlocklistMode::Report)
        {
            self.spec.secrets.mode = Some(BlocklistMode::Enforce);
            self.changed("spec.secrets.mode", "report raised to enforce".into());
        }
    }

    fn llm(&mut self, b: &ClusterFleetPolicySpec) {
        let bl = &b.llm;
        if bl.is_empty() {
            return;
        }
        let Some(mut llm) = self.spec.llm.take() else {
            self.notes.push(format!(
                "ClusterFleetPolicy {}: this FleetPolicy has no LLM route (spec.llm), so the baseline's model rules have none to bind",
                self.name
            ));
            return;
        };
        if bl.mode == Some(LlmModeSpec::Enforce) && llm.mode != Some(LlmModeSpec::Enforce) {
            llm.mode = Some(LlmModeSpec::Enforce);
            self.changed("spec.llm.mode", "observe raised to enforce".into());
        }
        self.models("spec.llm.allowedModels", &mut llm, &bl.allowed_models);
        for (role, pin) in &bl.pins {
            let field = format!("spec.llm.pins.{role}");
            let mine = llm.pins.entry(role.clone()).or_default();
            let mut moved = Vec::new();
            if let Some(effort) = pin.effort
                && self.pinned.insert((role.clone(), "effort"))
                && mine.effort != Some(effort)
            {
                moved.push(format!(
                    "effort {} → {}",
                    mine.effort.map_or("unset", |e| e.name()),
                    effort.name()
                ));
                mine.effort = Some(effort);
            }
            if let Some(tier) = &pin.service_tier
                && self.pinned.insert((role.clone(), "serviceTier"))
                && mine.service_tier.as_ref() != Some(tier)
            {
                moved.push(format!(
                    "serviceTier {} → {tier}",
                    mine.service_tier.as_deref().unwrap_or("unset")
                ));
                mine.service_tier = Some(tier.clone());
            }
            if !moved.is_empty() {
                self.changed(
                    &field,
                    format!("{} by the baseline's pin", moved.join(", ")),
                );
            }
        }
        for (role, floor) in &bl.provider_tools {
            self.provider_tools(&mut llm, role, *floor);
        }
        self.spec.llm = Some(llm);
    }

    /// Raise what `role`'s provider-side tools get, and every narrower role the namespace
    /// names under it, to at least `floor`.
    fn provider_tools(&mut self, llm: &mut LlmSpec, role: &str, floor: LlmProviderTools) {
        let own = provider_tools_for(&llm.provider_tools, role);
        let mut raise = vec![(role.to_string(), own)];
        raise.extend(
            llm.provider_tools
                .iter()
                .filter(|(r, _)| *r != role && covers(role, r))
                .map(|(r, t)| (r.clone(), *t)),
        );
        for (r, was) in raise {
            if was < floor {
                llm.provider_tools.insert(r.clone(), floor);
                self.changed(
                    &format!("spec.llm.providerTools.{r}"),
                    format!("{} raised to {}", was.name(), floor.name()),
                );
            }
        }
    }

    fn models(&mut self, field: &str, llm: &mut LlmSpec, ceiling: &[String]) {
        if let Some(kept) = self.bound_models(field, &llm.allowed_models, ceiling, meet_pattern) {
            llm.allowed_models = kept;
        }
    }

    fn cron(&mut self, b: &ClusterFleetPolicySpec) {
        let bc = &b.cron;
        let ns = self.spec.cron.allowed_models.clone();
        if let Some(kept) = self.bound_models(
            "spec.cron.allowedModels",
            &ns,
            &bc.allowed_models,
            |a, b| (a == b).then(|| a.to_string()),
        ) {
            self.spec.cron.allowed_models = kept;
        }
        if let Some(ceiling) = bc.max_cost_per_job_per_day {
            let mine = self.spec.cron.max_cost_per_job_per_day;
            if mine.is_none_or(|m| m > ceiling) {
                self.spec.cron.max_cost_per_job_per_day = Some(ceiling);
                self.changed(
                    "spec.cron.maxCostPerJobPerDay",
                    format!(
                        "{} lowered to {ceiling} USD, the baseline's ceiling",
                        mine.map_or_else(|| "unset".to_string(), |m| format!("{m} USD"))
                    ),
                );
            }
        }
    }

    /// `ns ∩ ceiling` (an empty `ns` allows any: it becomes `ceiling`); `None` when unchanged.
    fn bound_models(
        &mut self,
        field: &str,
        ns: &[String],
        ceiling: &[String],
        meet: impl Fn(&str, &str) -> Option<String>,
    ) -> Option<Vec<String>> {
        if ceiling.is_empty() {
            return None;
        }
        if ns.is_empty() {
            self.changed(
                field,
                format!("any model bound to the baseline's {}", ceiling.join(", ")),
            );
            return Some(ceiling.to_vec());
        }
        let mut kept: Vec<String> = Vec::new();
        for mine in ns {
            for theirs in ceiling {
                if let Some(m) = meet(mine, theirs)
                    && !kept.contains(&m)
                {
                    kept.push(m);
                }
            }
        }
        if kept.is_empty() {
            self.refuse(
                field,
                format!(
                    "none of {} is among the models the baseline allows ({}); an empty list would allow any",
                    ns.join(", "),
                    ceiling.join(", ")
                ),
            );
            return None;
        }
        if kept == ns {
            return None;
        }
        self.changed(
            field,
            format!("{} bound to {}", ns.join(", "), kept.join(", ")),
        );
        Some(kept)
    }
}

/// The models both patterns allow, as one pattern (exact ids, or a prefix ending in `*`).
pub fn meet_pattern(a: &str, b: &str) -> Option<String> {
    match (a.strip_suffix('*'), b.strip_suffix('*')) {
        (None, None) => (a == b).then(|| a.to_string()),
        (None, Some(pb)) => a.starts_with(pb).then(|| a.to_string()),
        (Some(pa), None) => b.starts_with(pa).then(|| b.to_string()),
        (Some(pa), Some(pb)) if pa.starts_with(pb) => Some(a.to_string()),
        (Some(pa), Some(pb)) if pb.starts_with(pa) => Some(b.to_string()),
        _ => None,
    }
}

fn mode_name(mode: EgressMode) -> &'static str {
    mode.name()
}

fn list(ports: &[u16]) -> String {
    ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What `role`'s provider-side tools get under `map`, with the gate's fallbacks (the role,
/// `auxiliary` for a task, `default`; else `observe`).
fn provider_tools_for(map: &BTreeMap<String, LlmProviderTools>, role: &str) -> LlmProviderTools {
    fleetgate_policy::llm::lookup(map, role)
        .copied()
        .unwrap_or(LlmProviderTools::Observe)
}

/// Whether a baseline entry for `wide` governs the namespace's entry for `role`.
fn covers(wide: &str, role: &str) -> bool {
    match wide {
        "default" => true,
        "auxiliary" => role.starts_with("auxiliary:"),
        _ => false,
    }
}
