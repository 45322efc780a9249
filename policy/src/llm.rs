//! `llm:` — the LLM route's policy: providers (base URL, kind, key file), which provider
//! serves each agent role, the observe/enforce switch, the allowed models, the pinned
//! effort and service tier per role, and what a role's provider-side tools get. Raw serde types and their validation live together
//! here; `policy::mod` only calls [`validate`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::FieldError;

pub mod spend;

pub use spend::{Budgets, Prices, SecretsMode, Usage};

/// Effort levels a pin may name (Hermes' wire ladder; `ultra` never reaches a wire).
pub const EFFORT_LEVELS: &[&str] = &["none", "minimal", "low", "medium", "high", "xhigh", "max"];

/// What `llm.providerTools.<role>` may say.
pub const PROVIDER_TOOLS_MODES: &[&str] = &["allow", "observe", "refuse"];

/// Provider kinds: how the key is sent and where effort lives on the wire.
pub const PROVIDER_KINDS: &[&str] = &["openai", "anthropic", "openrouter", "xai"];

/// Default cap of a request body the route buffers (to observe and rewrite it): Anthropic's
/// own request limit. The body is judged without a tree of it, so a request costs about twice
/// its size at peak (the buffered body and its rewrite).
pub const DEFAULT_MAX_REQUEST_BYTES: u64 = 32 * 1024 * 1024;

/// Smallest and largest `llm.maxRequestBytes` accepted.
pub const MAX_REQUEST_BYTES_RANGE: std::ops::RangeInclusive<u64> = 1024..=128 * 1024 * 1024;

/// Default time an upstream may take to send its response head.
pub const DEFAULT_HEADER_TIMEOUT_MS: u64 = 600_000;

/// `llm:` as written.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawLlm {
    /// `observe` (default) or `enforce`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Name of the fleet policy this was rendered from, quoted in refusals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_name: Option<String>,
    /// Upstream providers by name.
    #[serde(default)]
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub providers: BTreeMap<String, RawLlmProvider>,
    /// Role (`main`, `delegation`, `cron`, `auxiliary`, `auxiliary:<task>`, `default`) →
    /// provider name.
    #[serde(default)]
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub roles: BTreeMap<String, String>,
    /// Models the fleet may use (exact ids, or a prefix ending in `*`); empty allows all.
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_models: Vec<String>,
    /// Pinned effort / tier per role (same role keys as `roles`).
    #[serde(default)]
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub pins: BTreeMap<String, RawLlmPin>,
    /// Request body cap in bytes (default 32 MiB, 1 KiB to 128 MiB); a larger body gets a 413
    /// in the provider's error shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_request_bytes: Option<u64>,
    /// Endpoints beyond the judged ones that enforce mode relays as sent (unjudged), as
    /// `METHOD /path` patterns: `*` is one path segment, a final `**` any rest
    /// (`POST /v1/batches`, `GET /v1/batches/*`).
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extra_endpoints: Vec<String>,
    /// Role (same role keys as `roles`) → `allow`, `observe` (the default for every role) or
    /// `refuse`: what a request naming a tool the provider runs itself (a web search, a page
    /// fetch, code execution) gets. Such a tool fetches at the provider, where no gate sees
    /// it.
    #[serde(default)]
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub provider_tools: BTreeMap<String, String>,
    /// Prices per model (USD per million tokens) and service-tier multipliers, over the
    /// built-in table.
    #[serde(default)]
    #[serde(skip_serializing_if = "spend::RawPrices::is_unset")]
    pub prices: spend::RawPrices,
    /// Spend caps per role, for this pod and for the namespace.
    #[serde(default)]
    #[serde(skip_serializing_if = "spend::RawBudgets::is_unset")]
    pub budgets: spend::RawBudgets,
    /// What a request whose prompt holds a secret gets: `refuse` (default), `redact` or
    /// `observe`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secrets: Option<String>,
    /// Where the pod's spend is kept across restarts (default `<store.root>/llm/spend.json`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spend_file: Option<String>,
}

/// `llm.providers.<name>:` as written.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawLlmProvider {
    /// `openai`, `anthropic`, `openrouter` or `xai`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Upstream base URL; the agent's path after the role is appended to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// File holding the API key (a mounted Secret).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_file: Option<String>,
    /// Environment variable holding the API key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_env: Option<String>,
    /// Time to the response head, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// `llm.pins.<role>:` as written.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawLlmPin {
    /// Pinned reasoning effort.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// Pinned service tier.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<String>,
}

/// Whether the route only observes or also enforces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LlmMode {
    /// Pass every request unchanged; count what enforce would do.
    #[default]
    Observe,
    /// Refuse disallowed models and write pins onto requests.
    Enforce,
}

/// What a request naming a provider-side tool gets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProviderToolsMode {
    /// Pass it, uncounted.
    Allow,
    /// Pass it, counted and logged (the default).
    #[default]
    Observe,
    /// Refuse it in enforce mode (counted as `would_refuse` in observe mode).
    Refuse,
}

// === impl ProviderToolsMode ===

impl ProviderToolsMode {
    /// Parse a mode name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "allow" => Some(Self::Allow),
            "observe" => Some(Self::Observe),
            "refuse" => Some(Self::Refuse),
            _ => None,
        }
    }

    /// The mode's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Observe => "observe",
            Self::Refuse => "refuse",
        }
    }
}

/// How a provider takes its key and shapes its requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderKind {
    /// OpenAI (chat completions and responses): `Authorization: Bearer`.
    OpenAi,
    /// Anthropic messages: `x-api-key`.
    Anthropic,
    /// OpenRouter: `Authorization: Bearer`, effort under `reasoning`.
    OpenRouter,
    /// xAI: `Authorization: Bearer`, `reasoning_effort`.
    Xai,
}

// === impl ProviderKind ===

impl ProviderKind {
    /// Parse a kind name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "openai" => Some(Self::OpenAi),
            "anthropic" => Some(Self::Anthropic),
            "openrouter" => Some(Self::OpenRouter),
            "xai" => Some(Self::Xai),
            _ => None,
        }
    }

    /// The kind's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
            Self::OpenRouter => "openrouter",
            Self::Xai => "xai",
        }
    }
}

/// One validated upstream provider. The key itself never lives in the policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LlmProvider {
    /// Provider name (the key under `llm.providers`).
    pub name: String,
    /// Its kind.
    pub kind: ProviderKind,
    /// Base URL the agent's path is appended to.
    pub base_url: url::Url,
    /// File holding the key; read on every request so a rotated Secret applies at once.
    pub key_file: Option<PathBuf>,
    /// Environment variable holding the key.
    pub key_env: Option<String>,
    /// Time to the response head.
    pub header_timeout: Duration,
}

/// A validated pin.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LlmPin {
    /// Effort written onto the request (one of [`EFFORT_LEVELS`]).
    pub effort: Option<String>,
    /// Service tier written onto the request.
    pub service_tier: Option<String>,
}

/// The validated `llm:` section.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmPolicy {
    /// Observe (default) or enforce.
    pub mode: LlmMode,
    /// Fleet policy name quoted in refusals.
    pub policy_name: Option<String>,
    /// Providers.
    pub providers: Vec<LlmProvider>,
    /// Role key → provider name.
    pub roles: BTreeMap<String, String>,
    /// Allowed models; empty allows every model.
    pub allowed_models: Vec<String>,
    /// Role key → pin.
    pub pins: BTreeMap<String, LlmPin>,
    /// Request body cap in bytes.
    pub max_request_bytes: u64,
    /// Other endpoints relayed as sent in enforce mode.
    pub extra_endpoints: Vec<EndpointPattern>,
    /// Role key → what its provider-side tools get; a role not named (nor `auxiliary`, nor
    /// `default`) observes.
    pub provider_tools: BTreeMap<String, ProviderToolsMode>,
    /// The price table.
    pub prices: Prices,
    /// The budgets.
    pub budgets: Budgets,
    /// What a prompt holding a secret gets.
    pub secrets: SecretsMode,
    /// The spend file, when the policy names one (else the gate's default under its store).
    pub spend_file: Option<PathBuf>,
}

impl Default for LlmPolicy {
    fn default() -> Self {
        validate(RawLlm::default(), Path::new("/"), &mut Vec::new())
    }
}

/// A `METHOD /path` pattern of `llm.extraEndpoints`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointPattern {
    /// Upper-case method, or `*` for any.
    pub method: String,
    /// Path segments: literal, `*` (one segment) or a final `**` (any rest).
    pub segments: Vec<String>,
}

// === impl EndpointPattern ===

impl EndpointPattern {
    /// Parse `METHOD /path`; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (method, path) = text
            .trim()
            .split_once(' ')
            .ok_or_else(|| format!("'{text}' is not `METHOD /path`, e.g. `POST /v1/batches`"))?;
        let path = path.trim();
        let upper = !method.is_empty() && method.bytes().all(|b| b.is_ascii_uppercase());
        if method != "*" && !upper {
            return Err(format!(
                "'{method}' is not a method; use an upper-case method such as POST, or *"
            ));
        }
        let Some(rest) = path.strip_prefix('/') else {
            return Err(format!("'{path}' must start with /"));
        };
        let segments: Vec<String> = rest.split('/').map(str::to_string).collect();
        for (i, segment) in segments.iter().enumerate() {
            let plain = !segment.is_empty()
                && segment != "."
                && segment != ".."
                && segment.bytes().all(|b| {
                    b.is_ascii_alphanumeric()
                        || matches!(b, b'-' | b'.' | b'_' | b'~' | b':' | b'@')
                });
            let wild = segment == "*" || (segment == "**" && i + 1 == segments.len());
            if !plain && !wild {
                return Err(format!(
                    "segment '{segment}' of '{path}' must be plain (letters, digits, -._~:@), `*`, or a final `**`"
                ));
            }
        }
        Ok(Self {
            method: method.to_string(),
            segments,
        })
    }

    /// Whether `method` on the normalised provider path `path` matches.
    pub fn matches(&self, method: &str, path: &str) -> bool {
        if self.method != "*" && self.method != method {
            return false;
        }
        let path = path.strip_prefix('/').unwrap_or(path);
        let mut given = path.trim_end_matches('/').split('/');
        for want in &self.segments {
            if want == "**" {
                return true;
            }
            match given.next() {
                Some(seg) if want == "*" || want == seg => {}
                _ => return false,
            }
        }
        given.next().is_none()
    }
}

// === impl LlmPolicy ===

impl LlmPolicy {
    /// The provider serving `role` (`main`, `auxiliary:<task>`, ...): the role itself, then
    /// `auxiliary` for any auxiliary task, then `default`.
    pub fn provider_for(&self, role: &str) -> Option<&LlmProvider> {
        let name = lookup(&self.roles, role)?;
        self.providers.iter().find(|p| p.name == *name)
    }

    /// The pin applying to `role`, with the same fallbacks as [`Self::provider_for`].
    pub fn pin_for(&self, role: &str) -> Option<&LlmPin> {
        lookup(&self.pins, role)
    }

    /// What `role`'s provider-side tools get, with the same fallbacks as
    /// [`Self::provider_for`]; `observe` when no entry applies.
    pub fn provider_tools_for(&self, role: &str) -> ProviderToolsMode {
        lookup(&self.provider_tools, role)
            .copied()
            .unwrap_or_default()
    }

    /// Whether `model` is allowed (always, when the list is empty).
    pub fn model_allowed(&self, model: &str) -> bool {
        self.allowed_models.is_empty() || self.names_model(model)
    }

    /// Whether the policy names `model` in `allowedModels`.
    pub fn names_model(&self, model: &str) -> bool {
        self.allowed_entry(model).is_some()
    }

    /// The `allowedModels` entry that admits `model`, as written (`gpt-5`, `claude-*`): the
    /// bounded name a model is counted under.
    pub fn allowed_entry(&self, model: &str) -> Option<&str> {
        self.allowed_models
            .iter()
            .find(|m| match m.strip_suffix('*') {
                Some(prefix) => model.starts_with(prefix),
                None => *m == model,
            })
            .map(String::as_str)
    }
}

/// `role`'s entry in a per-role map, with the gate's fallbacks: the role itself, `auxiliary`
/// for an auxiliary task (`auxiliary:<task>`), then `default`.
pub fn lookup<'a, T>(map: &'a BTreeMap<String, T>, role: &str) -> Option<&'a T> {
    map.get(role)
        .or_else(|| {
            role.starts_with("auxiliary:")
                .then(|| map.get("auxiliary"))
                .flatten()
        })
        .or_else(|| map.get("default"))
}

/// Normalise a role key (`auxiliary/x` → `auxiliary:x`); `None` when it names no role.
pub fn role_key(raw: &str) -> Option<String> {
    let key = raw.trim().replacen('/', ":", 1);
    match key.as_str() {
        "main" | "delegation" | "cron" | "auxiliary" | "default" => Some(key),
        _ => key
            .strip_prefix("auxiliary:")
            .filter(|task| is_task_name(task))
            .map(|_| key.clone()),
    }
}

/// An auxiliary task name: 1..=64 of `[a-z0-9_-]`.
pub fn is_task_name(task: &str) -> bool {
    (1..=64).contains(&task.len())
        && task
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Validate `llm:`, pushing every problem onto `errors`.
pub fn validate(raw: RawLlm, base_dir: &Path, errors: &mut Vec<FieldError>) -> LlmPolicy {
    let mut err = |field: String, message: String| errors.push(FieldError { field, message });
    let mode = match raw.mode.as_deref().map(str::trim) {
        None | Some("observe") => LlmMode::Observe,
        Some("enforce") => LlmMode::Enforce,
        Some(other) => {
            err(
                "llm.mode".into(),
                format!("unknown mode '{other}'; use `observe` or `enforce`"),
            );
            LlmMode::Observe
        }
    };
    let providers: Vec<LlmProvider> = raw
        .providers
        .iter()
        .filter_map(|(name, p)| provider(name, p, base_dir, &mut err))
        .collect();
    let mut roles = BTreeMap::new();
    for (role, name) in &raw.roles {
        let Some(key) = role_key(role) else {
            err(format!("llm.roles.{role}"), bad_role(role));
            continue;
        };
        if !raw.providers.contains_key(name) {
            err(
                format!("llm.roles.{role}"),
                format!("names no provider '{name}'; add it under llm.providers"),
            );
        }
        roles.insert(key, name.clone());
    }
    let mut pins = BTreeMap::new();
    for (role, pin) in &raw.pins {
        let Some(key) = role_key(role) else {
            err(format!("llm.pins.{role}"), bad_role(role));
            continue;
        };
        if let Some(effort) = &pin.effort
            && !EFFORT_LEVELS.contains(&effort.as_str())
        {
            err(
                format!("llm.pins.{role}.effort"),
                format!(
                    "unknown effort '{effort}'; use one of {}",
                    EFFORT_LEVELS.join(", ")
                ),
            );
        }
        pins.insert(
            key,
            LlmPin {
                effort: pin.effort.clone(),
                service_tier: pin.service_tier.clone().filter(|t| !t.trim().is_empty()),
            },
        );
    }
    let mut provider_tools = BTreeMap::new();
    for (role, mode) in &raw.provider_tools {
        let Some(key) = role_key(role) else {
            err(format!("llm.providerTools.{role}"), bad_role(role));
            continue;
        };
        match ProviderToolsMode::from_name(mode.trim()) {
            Some(mode) => {
                provider_tools.insert(key, mode);
            }
            None => err(
                format!("llm.providerTools.{role}"),
                format!(
                    "unknown value '{mode}'; use one of {}",
                    PROVIDER_TOOLS_MODES.join(", ")
                ),
            ),
        }
    }
    let max_request_bytes = raw.max_request_bytes.unwrap_or(DEFAULT_MAX_REQUEST_BYTES);
    if !MAX_REQUEST_BYTES_RANGE.contains(&max_request_bytes) {
        err(
            "llm.maxRequestBytes".into(),
            format!(
                "{max_request_bytes} is out of range; use {} to {} bytes (default {DEFAULT_MAX_REQUEST_BYTES})",
                MAX_REQUEST_BYTES_RANGE.start(),
                MAX_REQUEST_BYTES_RANGE.end()
            ),
        );
    }
    let mut extra_endpoints = Vec::new();
    for (i, text) in raw.extra_endpoints.iter().enumerate() {
        match EndpointPattern::parse(text) {
            Ok(p) => extra_endpoints.push(p),
            Err(message) => err(format!("llm.extraEndpoints[{i}]"), message),
        }
    }
    let prices = spend::validate_prices(&raw.prices, &mut err);
    let budgets = spend::validate_budgets(&raw.budgets, &mut err);
    let secrets = match raw.secrets.as_deref().map(str::trim) {
        None => SecretsMode::Refuse,
        Some(name) => SecretsMode::from_name(name).unwrap_or_else(|| {
            err(
                "llm.secrets".into(),
                format!(
                    "unknown value '{name}'; use one of {}",
                    spend::SECRETS_MODES.join(", ")
                ),
            );
            SecretsMode::Refuse
        }),
    };
    let spend_file = raw.spend_file.as_deref().map(|p| {
        let p = Path::new(p.trim());
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            base_dir.join(p)
        }
    });
    LlmPolicy {
        prices,
        budgets,
        secrets,
        spend_file,
        mode,
        policy_name: raw.policy_name.filter(|n| !n.trim().is_empty()),
        providers,
        roles,
        allowed_models: raw.allowed_models,
        pins,
        max_request_bytes: max_request_bytes.clamp(
            *MAX_REQUEST_BYTES_RANGE.start(),
            *MAX_REQUEST_BYTES_RANGE.end(),
        ),
        extra_endpoints,
        provider_tools,
    }
}

fn bad_role(role: &str) -> String {
    format!(
        "'{role}' is not a role; use main, delegation, cron, auxiliary, auxiliary:<task> or default"
    )
}

fn provider(
    name: &str,
    raw: &RawLlmProvider,
    base_dir: &Path,
    err: &mut impl FnMut(String, String),
) -> Option<LlmProvider> {
    let field = format!("llm.providers.{name}");
    let kind = raw.kind.as_deref().map(str::trim).unwrap_or("openai");
    let Some(kind) = ProviderKind::from_name(kind) else {
        err(
            format!("{field}.kind"),
            format!(
                "unknown kind '{kind}'; use one of {}",
                PROVIDER_KINDS.join(", ")
            ),
        );
        return None;
    };
    let base_url = match raw.base_url.as_deref().map(url::Url::parse) {
        Some(Ok(u)) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => u,
        _ => {
            err(
                format!("{field}.baseUrl"),
                "must be an absolute http(s) URL, e.g. `https://api.openai.com`".into(),
            );
            return None;
        }
    };
    if raw.key_file.is_none() && raw.key_env.is_none() {
        err(
            field.clone(),
            "set keyFile (a mounted Secret) or keyEnv: the gate adds the key, the agent has none"
                .into(),
        );
    }
    let key_file = raw.key_file.as_deref().map(|p| {
        let p = Path::new(p.trim());
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            base_dir.join(p)
        }
    });
    Some(LlmProvider {
        name: name.to_string(),
        kind,
        base_url,
        key_file,
        key_env: raw.key_env.clone(),
        header_timeout: Duration::from_millis(
            raw.timeout_ms
                .unwrap_or(DEFAULT_HEADER_TIMEOUT_MS)
                .clamp(1, 3_600_000),
        ),
    })
}

#[cfg(test)]
mod tests;
