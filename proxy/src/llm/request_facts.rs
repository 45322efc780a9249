//! What a provider request says about itself: the model, the reasoning effort in the
//! observer's vocabulary and the requested service tier, read from the scanned body; plus the
//! bounded metric labels derived from them.

use super::scan::ObjectScan;
use crate::judge::gates::secret_url::redact_secrets;
use crate::policy::llm::{EFFORT_LEVELS, LlmPolicy};

/// Anthropic manual-thinking budgets Hermes sends per effort (`THINKING_BUDGET`).
pub(crate) const THINKING_BUDGETS: &[(&str, u64)] = &[
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
pub(crate) struct RequestFacts {
    /// `model`.
    pub(crate) model: Option<String>,
    /// Effort: a level, `budget:<n>`, or `none` when reasoning is disabled.
    pub(crate) effort: Option<String>,
    /// Requested `service_tier`.
    pub(crate) service_tier: Option<String>,
}

// === impl RequestFacts ===

impl RequestFacts {
    /// Read the facts from a scanned request body ([`super::scan::COMPLETION`]).
    pub(crate) fn of(body: &ObjectScan<'_>) -> Self {
        Self {
            model: body.str_at(&["model"]),
            effort: effort_of(body),
            service_tier: body
                .str_at(&["service_tier"])
                .or_else(|| body.str_at(&["extra_body", "service_tier"])),
        }
    }

    /// The facts as `/v1/report` and the logs show them: each agent-chosen string passed
    /// through [`shown`].
    pub(crate) fn shown(&self) -> Self {
        Self {
            model: self.model.as_deref().map(shown),
            effort: self.effort.as_deref().map(shown),
            service_tier: self.service_tier.as_deref().map(shown),
        }
    }
}

/// The effort on the wire, in the observer's order: `reasoning.effort`, `reasoning_effort`,
/// `output_config.effort`, `extra_body.reasoning.effort`, then an Anthropic thinking budget
/// (`budget:<n>`), then `none` when reasoning is explicitly disabled.
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) fn effort_of(body: &ObjectScan<'_>) -> Option<String> {
    let found = body
        .str_at(&["reasoning", "effort"])
        .or_else(|| body.str_at(&["reasoning_effort"]))
        .or_else(|| body.str_at(&["output_config", "effort"]))
        .or_else(|| body.str_at(&["extra_body", "reasoning", "effort"]));
    if found.is_some() {
        return found;
    }
    if let Some(thinking) = body.object("thinking") {
        match thinking.str_at(&["type"]).as_deref() {
            Some("enabled") => {
                if let Some(n) = thinking.u64_of("budget_tokens") {
                    return Some(format!("budget:{n}"));
                }
            }
            Some("disabled") => return Some("none".into()),
            _ => {}
        }
    }
    let disabled = |r: Option<&ObjectScan<'_>>| r.and_then(|r| r.bool_of("enabled")) == Some(false);
    let extra_reasoning = body
        .object("extra_body")
        .and_then(|e| e.object("reasoning"));
    (disabled(body.object("reasoning")) || disabled(extra_reasoning)).then(|| "none".to_string())
}

/// The model label: the `allowedModels` entry that admits it, as written (`gpt-5`, or the
/// pattern `claude-*` for any model it matches), `unset` when the request has none, `other`
/// otherwise. Agents choose the model string; only the policy chooses the label set.
pub(crate) fn model_label(policy: &LlmPolicy, model: Option<&str>) -> String {
    match model {
        None => "unset".into(),
        Some(m) => policy.allowed_entry(m).unwrap_or("other").to_string(),
    }
}

/// Longest agent-chosen string (model, effort, tier) shown in a log line, the report or a
/// refusal message; the rest is cut.
pub(crate) const SHOWN_MAX: usize = 128;

/// An agent-chosen string fit for a log line, `/v1/report` or a refusal message: every span a
/// secret rule matches replaced by `[redacted:<rule>]`, cut to [`SHOWN_MAX`] characters.
pub(crate) fn shown(text: &str) -> String {
    let redacted = redact_secrets(text);
    match redacted.char_indices().nth(SHOWN_MAX) {
        Some((cut, _)) => format!("{}… ({} bytes)", &redacted[..cut], text.len()),
        None => redacted.into_owned(),
    }
}

/// The effort label: a ladder level, `budget` for any thinking budget, `unset`, or `other`.
pub(crate) fn effort_label(effort: Option<&str>) -> &str {
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
pub(crate) fn tier_label(tier: Option<&str>) -> &str {
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
pub(crate) fn role_label(policy: &LlmPolicy, role: &str) -> String {
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
