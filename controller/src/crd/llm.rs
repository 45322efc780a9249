//! `spec.llm`: the gate's LLM route — providers (with their key in a Secret), which provider
//! serves each Hermes role, the allowed models, the pinned effort and tier per role, what a
//! role's provider-side tools get, and whether the gate only observes or also enforces. Rendered into the gate policy's `llm:`
//! and into the managed-scope pins that point Hermes' base URLs at the gate.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `spec.llm`.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LlmSpec {
    /// `observe` (default: pass everything, record model/effort/tier per role) or `enforce`
    /// (refuse models outside `allowedModels`, write pins onto requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<LlmModeSpec>,
    /// Upstream providers by name (1..63 of `[a-z0-9-]`).
    #[serde(default)]
    #[schemars(extend("maxProperties" = 16))]
    pub providers: BTreeMap<String, LlmProviderSpec>,
    /// Role → provider name. Roles: `main`, `delegation`, `cron`, `auxiliary` (every
    /// auxiliary task), `auxiliary:<task>`, `default`.
    #[serde(default)]
    #[schemars(extend("maxProperties" = 64))]
    pub roles: BTreeMap<String, String>,
    /// Models the fleet may use (exact ids, or a prefix ending in `*`). Empty allows any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 128), inner(length(min = 1, max = 256)))]
    pub allowed_models: Vec<String>,
    /// Pinned effort and tier per role (same role keys as `roles`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub pins: BTreeMap<String, LlmPinSpec>,
    /// Per role (same role keys as `roles`), what a request naming a tool the provider runs
    /// itself gets — a web search, a page fetch, code execution, a remote MCP server, which
    /// fetch at the provider where no gate sees them: `allow`, `observe` (the default for
    /// every role: counted and logged) or `refuse` (enforce mode: refused in the provider's
    /// error shape, naming the tool).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub provider_tools: BTreeMap<String, LlmProviderTools>,
    /// Prices in USD per million tokens per model id (or a prefix ending in `*`), over the
    /// gate's built-in table of published list prices; what each call costs is its
    /// provider-reported usage times its model's price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prices: Option<LlmPricesSpec>,
    /// Dollars per UTC day and tokens per minute per role (`main`, `delegation`, `cron`,
    /// `auxiliary`), for each pod (enforced at its gate) and for the whole namespace
    /// (summed by the controller). Over budget, enforce mode answers 429 in the provider's
    /// error shape (`llm_budget_exceeded`); observe mode counts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budgets: Option<LlmBudgetsSpec>,
    /// What a request whose prompt holds a secret (gate E1's rules) gets: `refuse` (the
    /// default: 403 `llm_secret_in_prompt`, naming the rule), `redact` (the secret replaced
    /// by `[redacted:<rule>]`, the call forwarded) or `observe` (counted and logged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets: Option<LlmSecretsSpec>,
}

/// `spec.llm.prices`.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LlmPricesSpec {
    /// Model id, or a prefix ending in `*`, → its price.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 256))]
    pub models: BTreeMap<String, LlmPriceSpec>,
    /// Service tier → price multiplier for models whose entry names none (OpenAI's
    /// built-in entries: `flex` 0.5, `priority` 2).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 32))]
    pub tiers: BTreeMap<String, f64>,
    /// Whether the gate's built-in table applies under `models` (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builtin: Option<bool>,
}

/// One model's price, USD per million tokens.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LlmPriceSpec {
    /// Uncached input tokens.
    #[schemars(range(min = 0.0, max = 10000.0))]
    pub input: f64,
    /// Output tokens (reasoning included).
    #[schemars(range(min = 0.0, max = 10000.0))]
    pub output: f64,
    /// Input tokens read from the prompt cache (default: `input`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 10000.0))]
    pub cached_input: Option<f64>,
    /// Input tokens written to the prompt cache (default: `input`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 10000.0))]
    pub cache_write: Option<f64>,
}

/// The CEL rule on both budget maps: each key is a budget role (the gate's
/// `fleetgate_policy::llm::spend::BUDGET_ROLES`), so the API server refuses a misspelt role
/// rather than the controller reporting the spec invalid after it is stored.
pub const BUDGET_ROLES_RULE: &str =
    "self.all(role, role in ['main', 'delegation', 'cron', 'auxiliary'])";
/// What the API server says when [`BUDGET_ROLES_RULE`] fails.
pub const BUDGET_ROLES_MESSAGE: &str = "a budget role is main, delegation, cron or auxiliary (every auxiliary task counts under auxiliary)";

/// `spec.llm.budgets`.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LlmBudgetsSpec {
    /// Role → each pod's budget, enforced at its gate.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 4, "x-kubernetes-validations" = [{"rule": BUDGET_ROLES_RULE, "message": BUDGET_ROLES_MESSAGE}]))]
    pub pod: BTreeMap<String, LlmBudgetSpec>,
    /// Role → the namespace's budget, shared by every gate of the namespace.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 4, "x-kubernetes-validations" = [{"rule": BUDGET_ROLES_RULE, "message": BUDGET_ROLES_MESSAGE}]))]
    pub namespace: BTreeMap<String, LlmBudgetSpec>,
}

/// One role's budget.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LlmBudgetSpec {
    /// Dollars per UTC day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1000000.0))]
    pub daily_usd: Option<f64>,
    /// Tokens (input, cache reads and writes, output) per rolling minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000000000))]
    pub tokens_per_minute: Option<u64>,
}

/// What a prompt holding a secret gets.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum LlmSecretsSpec {
    /// Refused (403 `llm_secret_in_prompt`), naming the rule.
    Refuse,
    /// The secret replaced by `[redacted:<rule>]`, the call forwarded.
    Redact,
    /// Counted and logged, forwarded as sent.
    Observe,
}

// === impl LlmSecretsSpec ===

impl LlmSecretsSpec {
    /// The gate's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Refuse => "refuse",
            Self::Redact => "redact",
            Self::Observe => "observe",
        }
    }
}

/// What a role's provider-side tools get, weakest first.
#[derive(
    JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord,
)]
#[serde(rename_all = "kebab-case")]
pub enum LlmProviderTools {
    /// Relayed, not counted.
    Allow,
    /// Relayed, counted and logged (the default).
    Observe,
    /// Refused in enforce mode (counted as would-be refusals in observe mode).
    Refuse,
}

// === impl LlmProviderTools ===

impl LlmProviderTools {
    /// The gate's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Observe => "observe",
            Self::Refuse => "refuse",
        }
    }
}

/// Observe or enforce.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum LlmModeSpec {
    /// Pass every request unchanged; count what enforce would do.
    Observe,
    /// Refuse disallowed models and write the pins.
    Enforce,
}

/// How a provider takes its key and where effort lives on its wire.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum LlmProviderKind {
    /// OpenAI (chat completions, responses).
    Openai,
    /// Anthropic messages.
    Anthropic,
    /// OpenRouter.
    Openrouter,
    /// xAI.
    Xai,
}

// === impl LlmProviderKind ===

impl LlmProviderKind {
    /// The gate's name for the kind.
    pub fn name(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
            Self::Openrouter => "openrouter",
            Self::Xai => "xai",
        }
    }
}

/// One provider.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LlmProviderSpec {
    /// Its kind.
    pub kind: LlmProviderKind,
    /// Base URL the agent's path after `/v1` is appended to, e.g. `https://api.openai.com`,
    /// `https://openrouter.ai/api`, `https://api.anthropic.com`.
    #[serde(rename = "baseURL")]
    #[schemars(length(max = 2048), regex(pattern = r"^https?://[^\s/?#]+[^\s]*$"))]
    pub base_url: String,
    /// The Secret key holding the API key; mounted into the gate only.
    pub secret_ref: LlmSecretRef,
    /// Seconds to the response head, 1..3600. Default 600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3600))]
    pub timeout_seconds: Option<u32>,
}

/// A key of a Secret in the FleetPolicy's namespace.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct LlmSecretRef {
    /// Secret name.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub name: String,
    /// Key inside the Secret.
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[-._a-zA-Z0-9]+$"))]
    pub key: String,
}

/// A pin.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LlmPinSpec {
    /// Reasoning effort written onto the role's requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<LlmEffort>,
    /// Service tier written onto the role's requests (`priority`, `flex`, `default`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[A-Za-z0-9_.-]+$"))]
    pub service_tier: Option<String>,
}

/// Effort levels as they appear on the wire.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum LlmEffort {
    /// Reasoning off.
    None,
    /// Minimal.
    Minimal,
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
    /// Extra high.
    Xhigh,
    /// Max.
    Max,
}

// === impl LlmEffort ===

impl LlmEffort {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Minimal => "minimal",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Xhigh => "xhigh",
            Self::Max => "max",
        }
    }
}
