//! `spec.llm` rendered twice: the gate policy's `llm:` section (providers with their key
//! files, roles, allowed models, pins, provider-side tools, mode) and the managed-scope pins that point Hermes at
//! the gate's role paths — `model.base_url`, `delegation.base_url`,
//! `auxiliary.<task>.base_url` — with no `api_key` anywhere (the gate holds the keys).
//!
//! Roles Hermes cannot route separately: cron jobs run on the main model's runtime (same
//! base URL), so their calls are observed as `main`; auxiliary tasks without their own
//! `base_url` fall back to the main runtime too. `/llm/cron/` exists for other clients.

use std::collections::BTreeMap;

use fleetgate_policy::llm::spend::{RawBudget, RawBudgets, RawPrice, RawPrices};
use fleetgate_policy::llm::{RawLlm, RawLlmPin, RawLlmProvider};
use serde_json::{Map, Value};

use super::pod_layout::LISTEN_API;
use super::problems::RenderError;
use crate::crd::llm::{LlmModeSpec, LlmProviderKind, LlmSpec};

/// Where each provider's Secret is mounted in the gate: `<dir>/<secret>/<key>`.
pub const LLM_KEYS_DIR: &str = "/etc/fleetgate/llm-keys";

/// Auxiliary tasks of Hermes' config (`auxiliary.<task>`), pinned when `auxiliary` or
/// `default` names a provider.
pub const HERMES_AUX_TASKS: &[&str] = &[
    "vision",
    "web_extract",
    "compression",
    "skills_hub",
    "approval",
    "mcp",
    "title_generation",
    "memory_query_rewrite",
    "tts_audio_tags",
    "triage_specifier",
    "kanban_decomposer",
    "profile_describer",
    "goal_judge",
    "curator",
];

/// The gate policy's `llm:` for `spec` of the FleetPolicy `name`.
pub fn raw(spec: &LlmSpec, name: Option<&str>) -> RawLlm {
    let providers = spec
        .providers
        .iter()
        .map(|(n, p)| {
            let raw = RawLlmProvider {
                kind: Some(p.kind.name().to_string()),
                base_url: Some(p.base_url.clone()),
                key_file: Some(format!(
                    "{LLM_KEYS_DIR}/{}/{}",
                    p.secret_ref.name, p.secret_ref.key
                )),
                timeout_ms: p.timeout_seconds.map(|s| u64::from(s) * 1000),
                ..RawLlmProvider::default()
            };
            (n.clone(), raw)
        })
        .collect();
    let pins = spec
        .pins
        .iter()
        .map(|(role, p)| {
            let pin = RawLlmPin {
                effort: p.effort.map(|e| e.name().to_string()),
                service_tier: p.service_tier.clone(),
            };
            (role.clone(), pin)
        })
        .collect();
    RawLlm {
        mode: Some(
            match spec.mode.unwrap_or(LlmModeSpec::Observe) {
                LlmModeSpec::Observe => "observe",
                LlmModeSpec::Enforce => "enforce",
            }
            .to_string(),
        ),
        policy_name: name.map(str::to_string),
        providers,
        roles: spec.roles.clone(),
        allowed_models: spec.allowed_models.clone(),
        pins,
        provider_tools: spec
            .provider_tools
            .iter()
            .map(|(role, tools)| (role.clone(), tools.name().to_string()))
            .collect(),
        prices: spec.prices.as_ref().map(prices).unwrap_or_default(),
        budgets: spec.budgets.as_ref().map(budgets).unwrap_or_default(),
        secrets: spec.secrets.map(|s| s.name().to_string()),
        ..RawLlm::default()
    }
}

fn prices(spec: &crate::crd::llm::LlmPricesSpec) -> RawPrices {
    RawPrices {
        models: spec
            .models
            .iter()
            .map(|(model, p)| {
                let raw = RawPrice {
                    input: Some(p.input),
                    output: Some(p.output),
                    cached_input: p.cached_input,
                    cache_write: p.cache_write,
                    ..RawPrice::default()
                };
                (model.clone(), raw)
            })
            .collect(),
        tiers: spec.tiers.clone(),
        builtin: spec.builtin,
    }
}

fn budgets(spec: &crate::crd::llm::LlmBudgetsSpec) -> RawBudgets {
    let scope = |map: &BTreeMap<String, crate::crd::llm::LlmBudgetSpec>| {
        map.iter()
            .map(|(role, b)| {
                let raw = RawBudget {
                    daily_usd: b.daily_usd,
                    tokens_per_minute: b.tokens_per_minute,
                };
                (role.clone(), raw)
            })
            .collect()
    };
    RawBudgets {
        pod: scope(&spec.pod),
        namespace: scope(&spec.namespace),
        exhausted: None,
    }
}

/// The managed leaves that route Hermes' roles through the gate, as dotted key → value.
pub fn managed_pins(spec: &LlmSpec) -> BTreeMap<String, Value> {
    let kind_of = |role: &str| {
        let name = spec
            .roles
            .get(role)
            .or_else(|| {
                role.starts_with("auxiliary:")
                    .then(|| spec.roles.get("auxiliary"))
                    .flatten()
            })
            .or_else(|| spec.roles.get("default"))?;
        spec.providers.get(name).map(|p| p.kind)
    };
    let mut pins = BTreeMap::new();
    let mut pin = |prefix: &str, path: &str, kind: LlmProviderKind| {
        pins.insert(
            format!("{prefix}.base_url"),
            Value::String(base_url(path, kind)),
        );
        if kind == LlmProviderKind::Anthropic {
            pins.insert(format!("{prefix}.api_mode"), "anthropic_messages".into());
        }
    };
    if let Some(kind) = kind_of("main") {
        pin("model", "main", kind);
    }
    if let Some(kind) = kind_of("delegation") {
        pin("delegation", "delegation", kind);
    }
    let generic = spec.roles.contains_key("auxiliary") || spec.roles.contains_key("default");
    let named = spec
        .roles
        .keys()
        .filter_map(|r| r.strip_prefix("auxiliary:"));
    let tasks: Vec<&str> = HERMES_AUX_TASKS
        .iter()
        .copied()
        .filter(|_| generic)
        .chain(named)
        .collect();
    for task in tasks {
        if let Some(kind) = kind_of(&format!("auxiliary:{task}")) {
            pin(
                &format!("auxiliary.{task}"),
                &format!("auxiliary/{task}"),
                kind,
            );
        }
    }
    if pins.contains_key("model.base_url") {
        // A base URL alone is honoured for the `custom` provider; others keep their own URL.
        pins.insert("model.provider".into(), "custom".into());
    }
    pins
}

/// `http://<api listener>/llm/<path>`, plus `/v1` for OpenAI-style SDKs (Anthropic's SDK
/// appends `/v1/messages` itself).
fn base_url(path: &str, kind: LlmProviderKind) -> String {
    match kind {
        LlmProviderKind::Anthropic => format!("http://{LISTEN_API}/llm/{path}"),
        _ => format!("http://{LISTEN_API}/llm/{path}/v1"),
    }
}

/// `managed` with the LLM pins merged in; a different value already there is refused.
pub fn with_pins(
    managed: Option<&Map<String, Value>>,
    spec: Option<&LlmSpec>,
) -> Result<Option<Map<String, Value>>, RenderError> {
    let Some(spec) = spec else {
        return Ok(managed.cloned());
    };
    let mut config = managed.cloned().unwrap_or_default();
    for (dotted, value) in managed_pins(spec) {
        set_leaf(&mut config, &dotted, value)?;
    }
    Ok(Some(config))
}

fn set_leaf(
    config: &mut Map<String, Value>,
    dotted: &str,
    value: Value,
) -> Result<(), RenderError> {
    let field = format!("spec.managed.{dotted}");
    let parts: Vec<&str> = dotted.split('.').collect();
    let (last, parents) = parts
        .split_last()
        .ok_or_else(|| RenderError::invalid(&field, "empty key"))?;
    let mut node = config;
    for part in parents {
        let next = node
            .entry(part.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        node = match next {
            Value::Object(m) => m,
            _ => {
                return Err(RenderError::invalid(
                    &field,
                    "must be a mapping: spec.llm pins the LLM base URLs under it",
                ));
            }
        };
    }
    match node.get(*last) {
        Some(existing) if *existing != value => Err(RenderError::invalid(
            &field,
            format!(
                "is {existing} but spec.llm routes this role through the gate ({value}); remove it"
            ),
        )),
        _ => {
            node.insert(last.to_string(), value);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests;
