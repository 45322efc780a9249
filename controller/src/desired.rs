//! Pure rendering: one `FleetPolicy` → the ConfigMap `<name>-managed` its agents and gates read.
//!
//! Second layer of the controller (CRD types → **desired state** → I/O shell). No I/O, no
//! clock: the same spec always renders the same bytes, so the reconcile loop can compare hashes
//! instead of objects. The ConfigMap carries two files:
//!
//! - `config.yaml`, the Hermes managed scope ([`managed`]): `spec.managed` as written, plus the
//!   two web pins that send every Hermes web call to the gate. Precedence: the pins
//!   (`web.extract_backend: firecrawl`, `web.search_backend: searxng`) are the controller's;
//!   every other key of `spec.managed` is kept as written. A `spec.managed` value for a pinned
//!   key must equal the pin, else the spec is invalid (the upstream vendor is chosen with
//!   `spec.web`, not there).
//! - `policy.yaml`, the gate policy ([`policy`]), validated with the gate's own parser
//!   (`fleetgate_policy::Policy::parse`) before it is returned, so a policy the gate
//!   would refuse can never be rendered.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;
use kube::{Resource, ResourceExt};

use crate::crd::FleetPolicy;
use crate::crd::cluster_fleet_policy::ClusterFleetPolicy;

pub mod llm;
pub mod managed;
pub mod pod_layout;
pub mod policy;
pub mod problems;
#[cfg(test)]
mod tests;
pub mod tighten;

pub use pod_layout::{CONFIG_KEY, POLICY_KEY};
pub use problems::{Problems, RenderError, SpecProblem};

/// Label naming the FleetPolicy a ConfigMap was rendered from.
pub const POLICY_LABEL: &str = "fleetgate.dev/policy";
/// Annotation carrying the sha256 of `policy.yaml` (what each gate reports as `policy.sha256`).
pub const POLICY_SHA_ANNOTATION: &str = "fleetgate.dev/policy-sha256";
/// Annotation carrying the sha256 of `config.yaml` (what each gate reports as the managed digest).
pub const MANAGED_SHA_ANNOTATION: &str = "fleetgate.dev/managed-sha256";
/// The `app.kubernetes.io/managed-by` value of rendered objects.
pub const MANAGED_BY: &str = "fleetgate-controller";

/// Everything the controller writes for one FleetPolicy.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// The ConfigMap `<name>-managed`, ready for server-side apply.
    pub config_map: ConfigMap,
    /// sha256 (hex) of `config.yaml`.
    pub managed_sha256: String,
    /// sha256 (hex) of `policy.yaml`, as the gate computes it.
    pub policy_sha256: String,
    /// Number of dotted leaf keys `config.yaml` pins (Hermes' count).
    pub pinned_keys: usize,
    /// What the cluster baselines did to the spec; `None` when the controller does not read
    /// baselines.
    pub baseline: Option<BaselineApplied>,
    /// The effective `spec.cron` (after the baselines), which the fleet status flags against.
    pub cron: crate::crd::CronSpec,
    /// The effective egress mode (after the baselines) the selected pods should be injected with.
    pub egress_mode: crate::crd::EgressMode,
}

/// The baselines a rendered spec went through and what they changed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BaselineApplied {
    /// The ClusterFleetPolicies applied, by name, with their generation.
    pub baselines: Vec<(String, Option<i64>)>,
    /// Each field a baseline changed.
    pub changes: Vec<SpecProblem>,
    /// Baseline rules with nothing to bind in this spec.
    pub notes: Vec<String>,
}

/// Name of the ConfigMap rendered for the FleetPolicy `policy_name`.
pub fn config_map_name(policy_name: &str) -> String {
    format!("{policy_name}-managed")
}

/// Render the ConfigMap of `fp`. Pure: no I/O, no clock.
///
/// The owner reference (controller, pointing at `fp`) is set when `fp` carries a uid, which
/// every object read from the API server does; offline renders of a file leave it out.
pub fn render(fp: &FleetPolicy) -> Result<Desired, RenderError> {
    render_with(fp, None)
}

/// [`render`] under the cluster baselines: `Some` (even empty) when the controller reads
/// ClusterFleetPolicies, and the spec is then first tightened by [`tighten::merge`].
pub fn render_with(
    fp: &FleetPolicy,
    baselines: Option<&[ClusterFleetPolicy]>,
) -> Result<Desired, RenderError> {
    render_with_budgets(fp, baselines, None)
}

/// [`render_with`], the gate policy naming the roles whose namespace LLM budget is spent
/// today (`llm.budgets.exhausted`).
pub fn render_with_budgets(
    fp: &FleetPolicy,
    baselines: Option<&[ClusterFleetPolicy]>,
    exhausted: Option<&fleetgate_policy::llm::spend::RawExhausted>,
) -> Result<Desired, RenderError> {
    let name = fp.metadata.name.clone().ok_or(RenderError::MissingName)?;
    check_spec(fp)?;
    let (spec, applied) = match baselines {
        None => (std::borrow::Cow::Borrowed(&fp.spec), None),
        Some(baselines) => {
            let merged = tighten::merge(baselines, &fp.spec).map_err(RenderError::Baseline)?;
            let applied = BaselineApplied {
                baselines: merged.baselines,
                changes: merged.changes,
                notes: merged.notes,
            };
            (std::borrow::Cow::Owned(merged.spec), Some(applied))
        }
    };
    let managed_in = llm::with_pins(spec.managed.as_ref(), spec.llm.as_ref())?;
    let managed = managed::render(managed_in.as_ref())?;
    let policy = policy::render_named_with(&spec, Some(name.as_str()), exhausted)?;
    let labels = BTreeMap::from([
        (
            "app.kubernetes.io/managed-by".to_string(),
            MANAGED_BY.to_string(),
        ),
        (
            "app.kubernetes.io/part-of".to_string(),
            "fleetgate".to_string(),
        ),
        (POLICY_LABEL.to_string(), name.clone()),
    ]);
    let annotations = BTreeMap::from([
        (POLICY_SHA_ANNOTATION.to_string(), policy.sha256.clone()),
        (MANAGED_SHA_ANNOTATION.to_string(), managed.sha256.clone()),
    ]);
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(config_map_name(&name)),
            namespace: fp.namespace(),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: fp.controller_owner_ref(&()).map(|r| vec![r]),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([
            (CONFIG_KEY.to_string(), managed.yaml),
            (POLICY_KEY.to_string(), policy.yaml),
        ])),
        ..ConfigMap::default()
    };
    Ok(Desired {
        config_map,
        managed_sha256: managed.sha256,
        policy_sha256: policy.sha256,
        pinned_keys: managed.pinned_keys,
        baseline: applied,
        cron: spec.cron.clone(),
        egress_mode: spec.egress.mode.unwrap_or(crate::crd::EgressMode::Proxy),
    })
}

/// Checks the schema makes but an offline file (or an older API server) may skip, for fields
/// that never reach the gate's own validator.
fn check_spec(fp: &FleetPolicy) -> Result<(), RenderError> {
    if let Some(s) = fp.spec.resync_seconds
        && !(10..=3600).contains(&s)
    {
        return Err(RenderError::invalid(
            "spec.resyncSeconds",
            format!("{s} is out of range; set a value between 10 and 3600 seconds (default 60)"),
        ));
    }
    Ok(())
}
