//! The `FleetPolicy` custom resource (`fleetgate.dev/v1alpha1`): spec, status and the CRD.
//!
//! First layer of the controller (CRD types → [`crate::desired`] → [`crate::reconcile`]). The
//! schema carries every check the API server can make on its own — backend names as enums,
//! ranges, patterns, CEL rules for cross-field checks — so `kubectl apply` of a bad policy is
//! refused with a message naming the field. What only the gate's own validator can judge (for
//! example an `allowCIDRs` entry that would open the cloud-metadata floor) is refused at render
//! time and reported as `Valid=False`.

use std::collections::BTreeMap;

pub use backend_names::{ExtractBackend, SearchBackend};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::{CustomResource, CustomResourceExt, KubeSchema, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod backend_names;
pub mod cluster_fleet_policy;
pub mod llm;
#[cfg(test)]
mod tests;
pub mod watch;

/// API group of the FleetPolicy resource.
pub const GROUP: &str = "fleetgate.dev";
/// API version of the FleetPolicy resource.
pub const VERSION: &str = "v1alpha1";
/// Default seconds between two fleet status scrapes.
pub const DEFAULT_RESYNC_SECONDS: u32 = 60;
/// The command that regenerates the committed CRD copies.
pub const REGENERATE_HINT: &str = "cargo run -p fleetgate-controller -- crd > deploy/crd/fleetpolicy.yaml && cp deploy/crd/fleetpolicy.yaml charts/fleetgate/crds/fleetpolicy.yaml";

/// One FleetPolicy per namespace: which pods are agents, what their managed Hermes config pins,
/// and what their gates enforce.
// Several printer columns share `type_ = "integer"`, which clippy reads as a duplicate.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "fleetgate.dev",
    version = "v1alpha1",
    kind = "FleetPolicy",
    plural = "fleetpolicies",
    shortname = "fp",
    namespaced,
    status = "FleetPolicyStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "A fleetgate policy: the Hermes managed config and the egress gate policy of the selected agent pods.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(name = "Pods", type_ = "integer", json_path = ".status.pods.selected"),
    printcolumn(
        name = "Current",
        type_ = "integer",
        json_path = ".status.pods.current"
    ),
    printcolumn(
        name = "Cost/day",
        type_ = "number",
        json_path = ".status.totalCostPerDay"
    ),
    printcolumn(name = "Flagged", type_ = "integer", json_path = ".status.flagged"),
    printcolumn(name = "Budget", type_ = "string", json_path = ".status.budget"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct FleetPolicySpec {
    /// Which pods are agents. An empty selector selects every pod of the namespace.
    pub selector: LabelSelector,
    /// Free-form Hermes config mapping written to the managed scope (`config.yaml`); every leaf
    /// is pinned. The controller adds `web.extract_backend: firecrawl` and
    /// `web.search_backend: searxng` so Hermes' web tools go through the gate; a value given
    /// here for those two keys must equal the pin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_form_mapping")]
    pub managed: Option<Map<String, Value>>,
    /// Web tools as the gate serves them.
    #[serde(default)]
    pub web: WebSpec,
    /// The website blocklist the gate enforces.
    #[serde(default)]
    pub website_blocklist: BlocklistSpec,
    /// Extra secret rules of gate E1 (gitleaks rule files in ConfigMaps), their mode and
    /// exemptions. Hermes' own checks and the built-in rules always apply.
    #[serde(default, skip_serializing_if = "SecretsSpec::is_empty")]
    pub secrets: SecretsSpec,
    /// Egress interception and its exceptions.
    #[serde(default)]
    pub egress: EgressSpec,
    /// Cron cost accounting.
    #[serde(default)]
    pub cron: CronSpec,
    /// Settings shared by every watch (the pinned MCP endpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<watch::WatchSettingsSpec>,
    /// Watches: MCP read tools whose new items wake the agent's cron jobs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub watches: Vec<watch::WatchSpec>,
    /// The gate's LLM route: providers (keys in Secrets), role routing, allowed models,
    /// pinned effort/tier, observe or enforce. Hermes' base URLs are pinned to the gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<llm::LlmSpec>,
    /// Seconds between two fleet status scrapes, 10..3600. Default 60.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 10, max = 3600))]
    pub resync_seconds: Option<u32>,
}

/// `spec.web`: backends, limits and cache of the gate's web tools.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(validation = kube::core::Rule::new(
    "!(has(self.searchBackend) && self.searchBackend == 'searxng') || (has(self.vendors) && has(self.vendors.searxng) && has(self.vendors.searxng.baseURL))"
).message("SearXNG is self-hosted: set spec.web.vendors.searxng.baseURL when searchBackend is searxng"))]
#[serde(rename_all = "camelCase")]
pub struct WebSpec {
    /// Upstream serving extract. Default `direct` (the gate fetches pages itself; keyless).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extract_backend: Option<ExtractBackend>,
    /// Upstream serving search. Default none (search calls are refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_backend: Option<SearchBackend>,
    /// Character limit of an extracted page, 2000..500000. Default 15000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2000, max = 500000))]
    pub char_limit: Option<u32>,
    /// Lifetime of a cached page in minutes, 1..1440. Default 20.
    #[serde(
        default,
        rename = "cacheTTLMinutes",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = 1440))]
    pub cache_ttl_minutes: Option<u32>,
    /// Whether the `direct` backend returns a page's main content (article body, headings,
    /// lists, tables, code, links and images as markdown; navigation, footers, share bars,
    /// link lists and readers' comments dropped) or, `false`, the whole page. Default `true`.
    /// A call still chooses for itself: Firecrawl front `onlyMainContent`, Tavily front
    /// `extract_depth` (`advanced` = whole page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only_main_content: Option<bool>,
    /// Hosts never cached (exact host or any subdomain; a leading `*.` is allowed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 256),
        inner(
            length(min = 1, max = 253),
            regex(pattern = r"^(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?\.?$")
        )
    )]
    pub cache_exempt_hosts: Vec<String>,
    /// Backends tried, in order, when the extract backend fails for every URL of a call (and,
    /// those that can search, when the search backend fails). Default `[direct]`; `keyless`
    /// walks the keyless ring (exa, parallel, firecrawl, keenable without keys: those vendors
    /// read the agent's URLs and queries); an empty list turns rescue off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 5))]
    pub rescue: Option<Vec<ExtractBackend>>,
    /// Connection settings per upstream vendor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendors: Option<VendorsSpec>,
    /// Name of the Secret holding vendor API keys, one key per variable (`FIRECRAWL_API_KEY`,
    /// `TAVILY_API_KEY`, ...). Mounted into the gate only; the agent never holds the keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub credentials_secret: Option<String>,
}

/// `spec.web.vendors`: per-vendor connection settings.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VendorsSpec {
    /// Firecrawl (self-hosted or regional endpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firecrawl: Option<VendorSpec>,
    /// Tavily.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tavily: Option<VendorSpec>,
    /// Exa.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exa: Option<VendorSpec>,
    /// Parallel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel: Option<VendorSpec>,
    /// Keenable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keenable: Option<VendorSpec>,
    /// Perplexity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perplexity: Option<VendorSpec>,
    /// SearXNG (required when it is the search backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub searxng: Option<VendorSpec>,
    /// Brave Search (free tier).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brave_free: Option<VendorSpec>,
    /// DuckDuckGo.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ddgs: Option<VendorSpec>,
    /// xAI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xai: Option<VendorSpec>,
}

/// How the gate reaches one vendor.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VendorSpec {
    /// API base URL, absolute http(s). Default the vendor's public API.
    #[serde(default, rename = "baseURL", skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048), regex(pattern = r"^https?://[^\s/?#]+[^\s]*$"))]
    pub base_url: Option<String>,
    /// Per-attempt timeout in seconds, 1..600. Default the vendor's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 600))]
    pub timeout_seconds: Option<u32>,
    /// For a vendor with a keyless tier (exa, parallel, firecrawl, keenable): `auto` (keyless
    /// without a key, the default), `free` (always keyless; the vendor reads the agent's
    /// queries without any contract) or `paid` (always keyed; no call without a key, and
    /// never walked by the keyless ring).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<VendorTier>,
    /// The keyless endpoint of a vendor with a keyless tier, absolute http(s). Default the
    /// vendor's public one (Exa's and Parallel's MCP servers, Firecrawl's cloud API).
    #[serde(
        default,
        rename = "keylessURL",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(length(max = 2048), regex(pattern = r"^https?://[^\s/?#]+[^\s]*$"))]
    pub keyless_url: Option<String>,
}

/// How a vendor with a keyless tier is called.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum VendorTier {
    /// Keyless without a key, keyed with one.
    Auto,
    /// Always keyless.
    Free,
    /// Always keyed.
    Paid,
}

// === impl VendorTier ===

impl VendorTier {
    /// The gate's name for this tier.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Free => "free",
            Self::Paid => "paid",
        }
    }
}

/// `spec.websiteBlocklist`: sites the gate refuses (gate E4).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BlocklistSpec {
    /// On or off. Default on when rules are listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// `enforce` (refuse) or `report` (log and count only). Default `enforce`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<BlocklistMode>,
    /// Inline rules: a host, `*.host`, or a URL prefix.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 4096), inner(length(min = 1, max = 2048)))]
    pub domains: Vec<String>,
    /// Shared rule lists kept in ConfigMaps of the namespace (one rule per line).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub shared_lists: Vec<SharedListRef>,
}

/// `spec.secrets`: what gate E1 adds to its built-in secret rules.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SecretsSpec {
    /// `enforce` (refuse) or `report` (log and count what the ConfigMaps' rules would refuse).
    /// Applies to the ConfigMaps' rules only. Default `enforce`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<BlocklistMode>,
    /// gitleaks rule files (TOML: `[[rules]]` with `id`, `regex`, `keywords`, `entropy`,
    /// `allowlists`) kept in ConfigMaps of the namespace. A bad file is refused by the gate,
    /// which keeps its last good policy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub rules_config_maps: Vec<SharedListRef>,
    /// Rule ids (built-in or from the ConfigMaps) or `http(s)://` URL prefixes exempt from
    /// every rule set but Hermes' own checks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 2048)))]
    pub allow: Vec<String>,
    /// gitleaks rule files written inline, each one TOML text (a ClusterFleetPolicy's rules
    /// land here). They travel inside the gate policy, so no ConfigMap has to be mounted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(min = 1, max = 262144)))]
    pub inline_rules: Vec<String>,
}

// === impl SecretsSpec ===

impl SecretsSpec {
    /// Whether nothing is set (the field is then left out of the object).
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// Whether the blocklist refuses or only reports.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum BlocklistMode {
    /// Refuse matching requests.
    Enforce,
    /// Let them pass; log and count what would have been refused.
    Report,
}

/// One key of a ConfigMap holding blocklist rules.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SharedListRef {
    /// ConfigMap name (same namespace).
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub config_map: String,
    /// Key inside the ConfigMap.
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[-._a-zA-Z0-9]+$"))]
    pub key: String,
}

/// `spec.egress`: how agent traffic is captured and what may pass.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EgressSpec {
    /// `proxy` (HTTP(S)_PROXY env), `transparent` (iptables capture) or `off`. Default `proxy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<EgressMode>,
    /// Address exceptions: CIDRs or single addresses the gate may reach although they are
    /// private. None may cover the cloud-metadata floor (169.254.0.0/16, fd00:ec2::/32...).
    #[serde(default, rename = "allowCIDRs", skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 256),
        inner(
            length(min = 2, max = 43),
            regex(
                pattern = r"^([0-9]{1,3}(\.[0-9]{1,3}){3}(/([0-9]|[12][0-9]|3[0-2]))?|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*(/([0-9]|[1-9][0-9]|1[01][0-9]|12[0-8]))?)$"
            )
        )
    )]
    pub allow_cidrs: Vec<String>,
    /// Host names exempt from the pre-DNS name rules (e.g. an in-cluster service name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 256),
        inner(
            length(min = 1, max = 253),
            regex(pattern = r"^(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?\.?$")
        )
    )]
    pub allow_hosts: Vec<String>,
    /// Ports egress connections may use, 1..65535. Default `[80, 443]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64), inner(range(min = 1, max = 65535)))]
    pub ports: Option<Vec<u16>>,
}

/// How agent egress is captured.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum EgressMode {
    /// `HTTP(S)_PROXY` point at the gate's forward proxy.
    Proxy,
    /// An init container redirects all agent TCP to the gate (needs NET_ADMIN).
    Transparent,
    /// No capture; only the web tools go through the gate.
    Off,
}

// === impl EgressMode ===

impl EgressMode {
    /// The name as written in a FleetPolicy.
    pub fn name(self) -> &'static str {
        match self {
            Self::Proxy => "proxy",
            Self::Transparent => "transparent",
            Self::Off => "off",
        }
    }

    /// The mode named `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Proxy, Self::Transparent, Self::Off]
            .into_iter()
            .find(|m| m.name() == name)
    }

    /// How much traffic the mode captures: `off` < `proxy` < `transparent`.
    pub fn strength(self) -> u8 {
        match self {
            Self::Off => 0,
            Self::Proxy => 1,
            Self::Transparent => 2,
        }
    }
}

/// `spec.cron`: cron cost accounting.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CronSpec {
    /// Models cron jobs may run on; a job on another model is flagged. Empty allows any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 256)))]
    pub allowed_models: Vec<String>,
    /// Cost window in days, 1..366. Default 7.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 366))]
    pub window_days: Option<u32>,
    /// USD per job per day above which a cron job is flagged (`over_cost_ceiling`); flagged,
    /// never stopped. Unset: no ceiling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub max_cost_per_job_per_day: Option<f64>,
}

/// What the controller last rendered and what the fleet really does.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FleetPolicyStatus {
    /// `Valid`, `Ready`, `Propagated`, `Drift`.
    #[serde(default)]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// sha256 of the rendered managed `config.yaml` (what gates report as the managed digest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_sha256: Option<String>,
    /// sha256 of the rendered gate `policy.yaml` (what gates report as `policy.sha256`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_sha256: Option<String>,
    /// Number of dotted leaf keys the managed config pins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_keys: Option<u32>,
    /// Pod counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<PodCounts>,
    /// Model / reasoning effort / service tier observed per role, with drift against the pins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observed_tiers: Vec<ObservedTier>,
    /// Cron jobs per pod with their cost per day and flags: the flagged ones first, then the
    /// costliest, at most 200 (a status must stay far below the API server's object size
    /// limit however large the fleet); `cronJobCount` counts them all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cron_jobs: Vec<CronJobCost>,
    /// Cron jobs over every reporting pod (`totalCostPerDay` and `flagged` cover them all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron_job_count: Option<u32>,
    /// Sum of the cron cost per day over every reporting pod, in USD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_cost_per_day: Option<f64>,
    /// Number of flagged cron jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flagged: Option<u32>,
    /// Today's LLM spend (UTC day) over the reporting gates, per role, against
    /// `spec.llm.budgets.namespace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_spend: Option<LlmBudgetStatus>,
    /// The Budget column: the role closest to its namespace cap (`cron:$3.50/$5.00`), else
    /// today's total (`$4.50`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<String>,
}

/// Today's LLM spend of a FleetPolicy's gates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LlmBudgetStatus {
    /// The UTC day.
    pub day: String,
    /// Gates whose spend of that day is summed.
    pub gates: u32,
    /// Per role.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<RoleBudgetStatus>,
}

/// One role's spend today and its namespace budget.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleBudgetStatus {
    /// `main`, `delegation`, `cron` or `auxiliary`.
    pub role: String,
    /// Dollars spent today over the gates (to the cent).
    pub spent_usd: f64,
    /// The namespace's daily budget, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daily_usd: Option<f64>,
    /// Spent: the gates refuse the role until 00:00 UTC.
    pub exhausted: bool,
}

/// Pods selected by `spec.selector`, how many answered, how many run the current hashes.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PodCounts {
    /// Pods matching the selector.
    pub selected: u32,
    /// Pods whose gate answered the status scrape.
    pub reporting: u32,
    /// Reporting pods running the current policy and managed hashes.
    pub current: u32,
}

/// One observed (model, effort, tier) combination of a role and the pods showing it.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ObservedTier {
    /// Role (`main`, `delegation`, `auxiliary.<task>`, ...).
    pub role: String,
    /// Observed model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Observed reasoning effort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// Observed service tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<String>,
    /// Whether a value differs from the one the managed config pins.
    #[serde(default)]
    pub drift: bool,
    /// Pods showing this combination, at most 20 (by name); `podCount` counts them all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<String>,
    /// How many pods show this combination.
    #[serde(default)]
    pub pod_count: u32,
}

/// One cron job of one pod with its measured cost.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CronJobCost {
    /// Pod running the job.
    pub pod: String,
    /// Job id.
    pub job: String,
    /// Job name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Cost per day in USD over the window.
    pub cost_per_day: f64,
    /// Flags (`frequent_without_gate`, `mostly_empty`, `model_not_allowed`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
}

/// `spec.managed`: any mapping, kept as written.
fn free_form_mapping(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "description": "Free-form Hermes config mapping written to the managed scope; every leaf is pinned.",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// Conditions as a map list keyed by `type`, so server-side apply merges them per type.
fn conditions_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "description": "Valid, Ready, Propagated, Drift.",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["lastTransitionTime", "message", "reason", "status", "type"],
            "properties": {
                "lastTransitionTime": { "type": "string", "format": "date-time" },
                "message": { "type": "string", "maxLength": 32768 },
                "observedGeneration": { "type": "integer", "format": "int64", "minimum": 0 },
                "reason": { "type": "string", "maxLength": 1024, "minLength": 1 },
                "status": { "type": "string", "enum": ["True", "False", "Unknown"] },
                "type": { "type": "string", "maxLength": 316 }
            }
        }
    })
}

// === impl FleetPolicy ===

impl FleetPolicy {
    /// Seconds between two status scrapes.
    pub fn resync_seconds(&self) -> u32 {
        self.spec.resync_seconds.unwrap_or(DEFAULT_RESYNC_SECONDS)
    }

    /// `namespace/name`: what the controller keeps per FleetPolicy is keyed by it.
    pub fn key(&self) -> String {
        format!(
            "{}/{}",
            self.namespace().unwrap_or_default(),
            self.name_any()
        )
    }
}

/// The CRD as the YAML document `fleetgate-controller crd` prints and the repository commits.
pub fn crd_yaml() -> Result<String, serde_yaml::Error> {
    let body = kubernetes_yaml(&FleetPolicy::crd())?;
    Ok(format!(
        "# Generated by `fleetgate-controller crd`; do not edit. Regenerate with:\n# {REGENERATE_HINT}\n{body}"
    ))
}

/// A CRD as YAML in the schema vocabulary Kubernetes knows. schemars names the width of an
/// unsigned integer (`format: uint16`, `uint32`), which is no OpenAPI format the API server
/// knows: creating such a CRD draws `Warning: unrecognized format "uint32"` on every install
/// (the real-cluster suite's `the_crds_are_created_without_a_warning_from_the_api_server`).
/// Those formats are dropped; `type: integer` with the field's `minimum`/`maximum` already
/// bounds the value.
pub(crate) fn kubernetes_yaml(
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> Result<String, serde_yaml::Error> {
    fn strip(node: &mut serde_yaml::Value) {
        match node {
            serde_yaml::Value::Mapping(map) => {
                let unsigned = map
                    .get("format")
                    .and_then(serde_yaml::Value::as_str)
                    .is_some_and(|f| f.starts_with("uint"));
                if unsigned {
                    map.shift_remove("format");
                }
                for (_, child) in map.iter_mut() {
                    strip(child);
                }
            }
            serde_yaml::Value::Sequence(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut value = serde_yaml::to_value(crd)?;
    strip(&mut value);
    Ok(quote_yaml11_booleans(&serde_yaml::to_string(&value)?))
}

/// Words YAML 1.1 reads as booleans. serde_yaml writes YAML 1.2, where they are plain strings,
/// but the API server (and kubectl) read YAML 1.1: the enum value `off` of `spec.egress.mode`
/// arrived as `false` and every `mode: off` was refused.
const YAML11_BOOLEANS: [&str; 16] = [
    "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off",
    "OFF",
];

/// `text` with every plain scalar that YAML 1.1 would read as a boolean single-quoted: a
/// sequence item (`- off`) or a mapping value (`key: off`) that is the whole rest of its line.
fn quote_yaml11_booleans(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        let value_at = body
            .trim_start()
            .strip_prefix("- ")
            .map(|_| body.len() - body.trim_start().len() + 2)
            .or_else(|| body.find(": ").map(|i| i + 2));
        match value_at {
            Some(at) if YAML11_BOOLEANS.contains(&&body[at..]) => {
                out.push_str(&body[..at]);
                out.push('\'');
                out.push_str(&body[at..]);
                out.push('\'');
                out.push_str(&line[body.len()..]);
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// The per-vendor settings by the gate's backend name, in a stable order.
pub fn vendor_entries(vendors: &VendorsSpec) -> BTreeMap<&'static str, &VendorSpec> {
    [
        ("firecrawl", &vendors.firecrawl),
        ("tavily", &vendors.tavily),
        ("exa", &vendors.exa),
        ("parallel", &vendors.parallel),
        ("keenable", &vendors.keenable),
        ("perplexity", &vendors.perplexity),
        ("searxng", &vendors.searxng),
        ("brave-free", &vendors.brave_free),
        ("ddgs", &vendors.ddgs),
        ("xai", &vendors.xai),
    ]
    .into_iter()
    .filter_map(|(name, v)| v.as_ref().map(|v| (name, v)))
    .collect()
}
