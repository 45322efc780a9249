//! What a provider request says about itself: the model, the reasoning effort in the
//! observer's vocabulary and the requested service tier, read from the JSON body; plus the
//! bounded metric labels derived from them.

use serde_json::Value;

use crate::policy::llm::{EFFORT_LEVELS, LlmPolicy};

/// Anthropic manual-thinking budgets Hermes sends per effort (`THINKING_BUDGET`).
pub const THINKING_BUDGETS: &[(&str, u64)] = &[
    ("xhigh", 32_000),
    ("high", 16_000),
    ("medium", 8_000),
    ("low", 4_000),
];

/// Service tiers counted under their own label; any other value counts as `other`.
const KNOWN_TIERS: &[&str] = &[
    "auto",
    "default",
    "flex",
    "priority",
    "scale",
    "standard_only",
];

/// The observed facts of one request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestFacts {
    /// `model`.
    pub model: Option<String>,
    /// Effort: a level, `budget:<n>`, or `none` when reasoning is disabled.
    pub effort: Option<String>,
    /// Requested `service_tier`.
    pub service_tier: Option<String>,
}

// === impl RequestFacts ===

impl RequestFacts {
    /// Read the facts from a request body.
    pub fn of(body: &Value) -> Self {
        let extra = body.get("extra_body");
        Self {
            model: string_at(body, &["model"]),
            effort: effort_of(body),
            service_tier: string_at(body, &["service_tier"])
                .or_else(|| extra.and_then(|e| string_at(e, &["service_tier"]))),
        }
    }
}

/// The effort on the wire, in the observer's order: `reasoning.effort`, `reasoning_effort`,
/// `output_config.effort`, `extra_body.reasoning.effort`, then an Anthropic thinking budget
/// (`budget:<n>`), then `none` when reasoning is explicitly disabled.
pub fn effort_of(body: &Value) -> Option<String> {
    let found = string_at(body, &["reasoning", "effort"])
        .or_else(|| string_at(body, &["reasoning_effort"]))
        .or_else(|| string_at(body, &["output_config", "effort"]))
        .or_else(|| string_at(body, &["extra_body", "reasoning", "effort"]));
    if found.is_some() {
        return found;
    }
    if let Some(thinking) = body.get("thinking") {
        match thinking.get("type").and_then(Value::as_str) {
            Some("enabled") => {
                if let Some(n) = thinking.get("budget_tokens").and_then(Value::as_u64) {
                    return Some(format!("budget:{n}"));
                }
            }
            Some("disabled") => return Some("none".into()),
            _ => {}
        }
    }
    let disabled = |v: Option<&Value>| {
        v.and_then(|r| r.get("enabled"))
            .and_then(Value::as_bool)
            .is_some_and(|on| !on)
    };
    let extra_reasoning = body.get("extra_body").and_then(|e| e.get("reasoning"));
    (disabled(body.get("reasoning")) || disabled(extra_reasoning)).then(|| "none".to_string())
}

fn string_at(value: &Value, path: &[&str]) -> Option<String> {
    let mut v = value;
    for key in path {
        v = v.get(key)?;
    }
    v.as_str().map(str::to_string)
}

/// The model label: the id when the policy names it in `allowedModels`, `unset` when the
/// request has none, `other` otherwise (so agents cannot grow the label set).
pub fn model_label(policy: &LlmPolicy, model: Option<&str>) -> String {
    match model {
        None => "unset".into(),
        Some(m) if policy.names_model(m) => m.to_string(),
        Some(_) => "other".into(),
    }
}

/// The effort label: a ladder level, `budget` for any thinking budget, `unset`, or `other`.
pub fn effort_label(effort: Option<&str>) -> &str {
    match effort {
        None => "unset",
        Some(e) if e.starts_with("budget:") => "budget",
        Some(e) => EFFORT_LEVELS
            .iter()
            .chain(std::iter::once(&"ultra"))
            .find(|l| **l == e)
            .copied()
            .unwrap_or("other"),
    }
}

/// The tier label: a known tier, `unset`, or `other`.
pub fn tier_label(tier: Option<&str>) -> &str {
    match tier {
        None => "unset",
        Some(t) => KNOWN_TIERS
            .iter()
            .find(|k| **k == t)
            .copied()
            .unwrap_or("other"),
    }
}

/// The role label: the three fixed roles, an auxiliary task the policy names, the tasks
/// Hermes ships, or `auxiliary:other`.
pub fn role_label(policy: &LlmPolicy, role: &str) -> String {
    const HERMES_TASKS: &[&str] = &[
        "approval",
        "compression",
        "flush_memories",
        "mcp",
        "moa",
        "session_search",
        "skills_hub",
        "title_generation",
        "tts_audio_tags",
        "vision",
        "web_extract",
    ];
    match role.strip_prefix("auxiliary:") {
        None => role.to_string(),
        Some(task)
            if HERMES_TASKS.contains(&task)
                || policy.roles.contains_key(role)
                || policy.pins.contains_key(role) =>
        {
            role.to_string()
        }
        Some(_) => "auxiliary:other".into(),
    }
}

#[cfg(test)]
mod tests;
