//! The managed scope applied on the wire: a model outside `llm.allowedModels` is refused, and
//! a role's pinned effort and service tier are written onto the request where that
//! provider's wire shape keeps them. In observe mode nothing changes; the same decisions are
//! returned so they can be logged and counted as "would".

use serde_json::{Map, Value, json};

use super::observe::{THINKING_BUDGETS, effort_of};
use crate::policy::llm::{LlmPin, LlmPolicy, ProviderKind};

/// One field written onto a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rewrite {
    /// `reasoning_effort` or `service_tier`.
    pub field: &'static str,
    /// The value the agent sent (`None` when absent).
    pub from: Option<String>,
    /// The pinned value written.
    pub to: String,
}

// === impl Rewrite ===

impl Rewrite {
    /// `field: from -> to`, for logs and the report.
    pub fn describe(&self) -> String {
        format!(
            "{}: {} -> {}",
            self.field,
            self.from.as_deref().unwrap_or("unset"),
            self.to
        )
    }
}

/// Whether the request's model is refused, and the message a provider-shaped error carries.
pub fn model_refusal(policy: &LlmPolicy, model: Option<&str>) -> Option<String> {
    let model = model?;
    if policy.model_allowed(model) {
        return None;
    }
    let name = policy
        .policy_name
        .as_deref()
        .map(|n| format!("fleet policy '{n}'"))
        .unwrap_or_else(|| "the fleet policy".into());
    Some(format!(
        "fleetgate: model '{model}' is not allowed by {name} (llm.allowedModels: {})",
        policy.allowed_models.join(", ")
    ))
}

/// The rewrites `pin` asks for on `body`. With `apply`, they are written onto `body`.
pub fn pin_rewrites(
    pin: &LlmPin,
    kind: ProviderKind,
    path: &str,
    body: &mut Value,
    apply: bool,
) -> Vec<Rewrite> {
    let mut out = Vec::new();
    if !body.is_object() {
        return out;
    }
    if let Some(want) = &pin.effort {
        let have = effort_of(body);
        if !same_effort(have.as_deref(), want) {
            if apply && let Some(obj) = body.as_object_mut() {
                write_effort(obj, kind, path, want);
            }
            out.push(Rewrite {
                field: "reasoning_effort",
                from: have,
                to: want.clone(),
            });
        }
    }
    if let Some(want) = &pin.service_tier {
        let have = body
            .as_object()
            .and_then(|o| o.get("service_tier"))
            .and_then(Value::as_str)
            .map(str::to_string);
        if have.as_deref() != Some(want.as_str()) {
            if apply && let Some(obj) = body.as_object_mut() {
                obj.insert("service_tier".into(), json!(want));
            }
            out.push(Rewrite {
                field: "service_tier",
                from: have,
                to: want.clone(),
            });
        }
    }
    out
}

/// Whether the effort on the wire already is `want` (a thinking budget counts as its level).
fn same_effort(have: Option<&str>, want: &str) -> bool {
    let Some(have) = have else {
        return false;
    };
    have == want
        || THINKING_BUDGETS
            .iter()
            .any(|(level, budget)| *level == want && have == format!("budget:{budget}"))
}

/// Write `effort` into every place the body already keeps one; when it keeps none, into the
/// place the provider kind reads.
fn write_effort(obj: &mut Map<String, Value>, kind: ProviderKind, path: &str, effort: &str) {
    let mut wrote = false;
    if obj.contains_key("reasoning_effort") {
        obj.insert("reasoning_effort".into(), json!(effort));
        wrote = true;
    }
    if let Some(Value::Object(r)) = obj.get_mut("reasoning") {
        set_reasoning(r, effort);
        wrote = true;
    }
    if let Some(Value::Object(r)) = obj
        .get_mut("extra_body")
        .and_then(|e| e.get_mut("reasoning"))
    {
        set_reasoning(r, effort);
        wrote = true;
    }
    if let Some(Value::Object(c)) = obj.get_mut("output_config") {
        c.insert("effort".into(), json!(effort));
        wrote = true;
    }
    if obj.contains_key("thinking") {
        write_thinking(obj, effort);
        wrote = true;
    }
    if wrote {
        return;
    }
    match kind {
        ProviderKind::Anthropic if effort == "none" => write_thinking(obj, effort),
        ProviderKind::Anthropic => {
            obj.insert("output_config".into(), json!({"effort": effort}));
        }
        ProviderKind::OpenRouter => {
            obj.insert("reasoning".into(), json!({"effort": effort}));
        }
        ProviderKind::OpenAi if path.trim_end_matches('/').ends_with("/responses") => {
            obj.insert("reasoning".into(), json!({"effort": effort}));
        }
        ProviderKind::OpenAi | ProviderKind::Xai => {
            obj.insert("reasoning_effort".into(), json!(effort));
        }
    }
}

fn set_reasoning(r: &mut Map<String, Value>, effort: &str) {
    if effort == "none" && r.contains_key("enabled") {
        r.insert("enabled".into(), json!(false));
        r.remove("effort");
        return;
    }
    if r.contains_key("enabled") {
        r.insert("enabled".into(), json!(true));
    }
    r.insert("effort".into(), json!(effort));
}

/// Anthropic thinking: a budget for the levels that have one, adaptive + `output_config`
/// for the others, disabled for `none`.
fn write_thinking(obj: &mut Map<String, Value>, effort: &str) {
    if effort == "none" {
        obj.insert("thinking".into(), json!({"type": "disabled"}));
        obj.remove("output_config");
        return;
    }
    match THINKING_BUDGETS.iter().find(|(level, _)| *level == effort) {
        Some((_, budget)) if !obj.contains_key("output_config") => {
            obj.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
        }
        _ => {
            obj.insert("thinking".into(), json!({"type": "adaptive"}));
            obj.insert("output_config".into(), json!({"effort": effort}));
        }
    }
}

#[cfg(test)]
mod tests;
