//! The `ClusterFleetPolicy` custom resource (`fleetgate.dev/v1alpha1`, cluster-scoped): the
//! baseline a platform team sets for every namespace, which each namespace's FleetPolicy can
//! only tighten.
//!
//! Every field states what it does to a FleetPolicy; [`crate::desired::tighten::merge`] is the
//! one place that does it. Two kinds of rule:
//!
//! - **raise**: the stricter value wins (`egress.minimumMode`, every `mode: enforce`, the pins,
//!   `llm.providerTools`, the cost ceiling). A namespace asking for less is raised and the `Baseline` condition says
//!   which field moved.
//! - **bound**: the namespace's list is cut to what the baseline allows (`egress.ports`,
//!   `llm.allowedModels`, `cron.allowedModels`, `egress.allowCIDRs` against `denyCIDRs` and
//!   `maxAllowCIDRs`), or the baseline's list is added to it (blocklist rules, secret rules).
//!   When a cut leaves nothing — no port, no model — the namespace's policy is refused
//!   (`Baseline=False`, reason `Conflict`) and its last good ConfigMap stays: an empty list
//!   would mean "any" to the gate.
//!
//! Several ClusterFleetPolicies apply together, in name order; since each one only tightens,
//! the order matters only for pins two baselines set differently (the first name wins).

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::BlocklistMode;
use super::llm::{LlmModeSpec, LlmPinSpec, LlmProviderTools};

/// The command that regenerates the committed copies of this CRD.
pub const REGENERATE_HINT: &str = "cargo run -p fleetgate-controller -- crd cluster-fleet-policy > deploy/crd/clusterfleetpolicy.yaml && cp deploy/crd/clusterfleetpolicy.yaml charts/fleetgate/crds/ && cp deploy/crd/clusterfleetpolicy.yaml charts/fleetgate-baseline/crds/";

/// A cluster-wide baseline every FleetPolicy can only tighten.
#[derive(CustomResource, Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "fleetgate.dev",
    version = "v1alpha1",
    kind = "ClusterFleetPolicy",
    plural = "clusterfleetpolicies",
    shortname = "cfp",
    derive = "PartialEq",
    derive = "Default",
    doc = "A fleetgate baseline for every namespace: floors and ceilings each FleetPolicy can only tighten.",
    printcolumn(
        name = "Minimum mode",
        type_ = "string",
        json_path = ".spec.egress.minimumMode"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterFleetPolicySpec {
    /// Floors of egress capture and ceilings of what a namespace may open.
    #[serde(default, skip_serializing_if = "BaselineEgress::is_empty")]
    pub egress: BaselineEgress,
    /// Blocklist rules every namespace enforces on top of its own.
    #[serde(default, skip_serializing_if = "BaselineBlocklist::is_empty")]
    pub website_blocklist: BaselineBlocklist,
    /// Model ceilings and pins of the gate's LLM route.
    #[serde(default, skip_serializing_if = "BaselineLlm::is_empty")]
    pub llm: BaselineLlm,
    /// Secret rules every namespace enforces on top of its own.
    #[serde(default, skip_serializing_if = "BaselineSecrets::is_empty")]
    pub secrets: BaselineSecrets,
    /// Cron models and the cost ceiling that flags a job.
    #[serde(default, skip_serializing_if = "BaselineCron::is_empty")]
    pub cron: BaselineCron,
}

/// `spec.egress` of a baseline.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BaselineEgress {
    /// The least capture a namespace may run: `proxy` or `transparent`. A FleetPolicy below it
    /// (`off`, or `proxy` under `transparent`) is raised to it, in its rendered policy and in
    /// the sidecar the webhook injects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum_mode: Option<MinimumMode>,
    /// Ranges no namespace may open: the parts of a FleetPolicy's `allowCIDRs` inside one
    /// are removed. The gate refuses every non-public address by default, so these ranges stay
    /// refused.
    #[serde(default, rename = "denyCIDRs", skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(min = 2, max = 43), regex(pattern = CIDR_PATTERN)))]
    pub deny_cidrs: Vec<String>,
    /// The only ranges a namespace may open: the parts of a FleetPolicy's `allowCIDRs` outside
    /// every one are removed. Unset: no ceiling; empty: no namespace may open any range.
    #[serde(
        default,
        rename = "maxAllowCIDRs",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(length(max = 256), inner(length(min = 2, max = 43), regex(pattern = CIDR_PATTERN)))]
    pub max_allow_cidrs: Option<Vec<String>>,
    /// Ports egress may use in any namespace; a FleetPolicy's `egress.ports` (default 80, 443)
    /// is intersected with them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64), inner(range(min = 1, max = 65535)))]
    pub ports: Option<Vec<u16>>,
}

/// An IPv4 or IPv6 address or CIDR (the FleetPolicy's `allowCIDRs` syntax).
const CIDR_PATTERN: &str = r"^([0-9]{1,3}(\.[0-9]{1,3}){3}(/([0-9]|[12][0-9]|3[0-2]))?|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*(/([0-9]|[1-9][0-9]|1[01][0-9]|12[0-8]))?)$";

/// The least egress capture of a namespace.
#[derive(
    JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord,
)]
#[serde(rename_all = "kebab-case")]
pub enum MinimumMode {
    /// At least the forward proxy (`HTTP(S)_PROXY`).
    Proxy,
    /// Transparent capture of all agent TCP.
    Transparent,
}

/// `spec.websiteBlocklist` of a baseline.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BaselineBlocklist {
    /// `enforce` (default) or `report`. Under `enforce` no namespace may run its blocklist in
    /// `report`; the blocklist of a namespace with these rules is switched on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<BlocklistMode>,
    /// Rules added to every namespace's: a host, `*.host`, or a URL prefix. Written here
    /// rather than in a ConfigMap so no namespace can edit them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 4096), inner(length(min = 1, max = 2048)))]
    pub domains: Vec<String>,
}

/// `spec.llm` of a baseline. Applies to namespaces whose FleetPolicy has an LLM route.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BaselineLlm {
    /// Under `enforce`, no namespace's route may only observe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<LlmModeSpec>,
    /// Models any namespace may use (exact ids, or a prefix ending in `*`); a FleetPolicy's
    /// list is intersected with it (an empty one becomes this one). Empty: no ceiling.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 128), inner(length(min = 1, max = 256)))]
    pub allowed_models: Vec<String>,
    /// Effort and tier per role (`main`, `delegation`, `cron`, `auxiliary`,
    /// `auxiliary:<task>`, `default`); each value set here overrides the namespace's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub pins: BTreeMap<String, LlmPinSpec>,
    /// The least each role's provider-side tools get (`allow` < `observe` < `refuse`), same
    /// role keys: a namespace asking for less for that role, or for a role it covers
    /// (`auxiliary` covers every task, `default` every role), is raised to it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub provider_tools: BTreeMap<String, LlmProviderTools>,
}

/// `spec.secrets` of a baseline.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BaselineSecrets {
    /// Under `enforce` (default), no namespace may run its added secret rules in `report`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<BlocklistMode>,
    /// A gitleaks rule file (TOML), written inline and added to every namespace's rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 262144))]
    pub rules: Option<String>,
    /// Exemptions granted to every namespace: rule ids or `http(s)://` URL prefixes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 2048)))]
    pub allow: Vec<String>,
    /// Whether a namespace's own `secrets.allow` stays. Default true; a namespace never
    /// exempts a rule of `rules` by its id. `false` drops every namespace exemption.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_allow: Option<bool>,
}

/// `spec.cron` of a baseline.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BaselineCron {
    /// Models cron jobs may run on in any namespace; a FleetPolicy's list is intersected with
    /// it. A job on another model is flagged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 256)))]
    pub allowed_models: Vec<String>,
    /// USD per job per day above which a job is flagged (`over_cost_ceiling`); a lower
    /// ceiling of a FleetPolicy stays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub max_cost_per_job_per_day: Option<f64>,
}

macro_rules! empty_when_default {
    ($($t:ty),*) => {$(
        impl $t {
            /// Whether nothing is set (the field is then left out of the object).
            pub fn is_empty(&self) -> bool {
                self == &Self::default()
            }
        }
    )*};
}

empty_when_default!(
    BaselineEgress,
    BaselineBlocklist,
    BaselineLlm,
    BaselineSecrets,
    BaselineCron
);

// === impl MinimumMode ===

impl MinimumMode {
    /// The egress mode this floor stands for.
    pub fn as_egress(self) -> super::EgressMode {
        match self {
            Self::Proxy => super::EgressMode::Proxy,
            Self::Transparent => super::EgressMode::Transparent,
        }
    }
}

/// The CRD as the YAML document `fleetgate-controller crd cluster-fleet-policy` prints.
pub fn crd_yaml() -> Result<String, serde_yaml::Error> {
    use kube::CustomResourceExt;
    let body = super::kubernetes_yaml(&ClusterFleetPolicy::crd())?;
    Ok(format!(
        "# Generated by `fleetgate-controller crd cluster-fleet-policy`; do not edit. Regenerate with:\n# {REGENERATE_HINT}\n{body}"
    ))
}
