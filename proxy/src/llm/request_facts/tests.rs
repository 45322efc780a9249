use serde_json::{Value, json};

use super::*;
use crate::llm::scan::{COMPLETION, scan_object};

fn effort(body: &Value) -> Option<String> {
    let text = body.to_string();
    effort_of(&scan_object(&text, &text, &COMPLETION).expect("an object scans"))
}

fn facts_of(body: &Value) -> RequestFacts {
    let text = body.to_string();
    RequestFacts::of(&scan_object(&text, &text, &COMPLETION).expect("an object scans"))
}

#[test]
fn the_effort_is_read_in_the_observer_vocabulary_from_every_wire_shape() {
    let cases = [
        (
            json!({"model": "m", "reasoning": {"effort": "high", "summary": "auto"}}),
            Some("high"),
        ),
        (json!({"reasoning_effort": "low"}), Some("low")),
        (
            json!({"output_config": {"effort": "max"}, "thinking": {"type": "adaptive"}}),
            Some("max"),
        ),
        (
            json!({"extra_body": {"reasoning": {"enabled": true, "effort": "xhigh"}}}),
            Some("xhigh"),
        ),
        (
            json!({"thinking": {"type": "enabled", "budget_tokens": 16000}}),
            Some("budget:16000"),
        ),
        (json!({"thinking": {"type": "disabled"}}), Some("none")),
        (json!({"reasoning": {"enabled": false}}), Some("none")),
        (
            json!({"extra_body": {"reasoning": {"enabled": false}}}),
            Some("none"),
        ),
        (json!({"messages": []}), None),
    ];
    for (body, want) in cases {
        assert_eq!(
            effort(&body).as_deref(),
            want,
            "the effort of {body} must be {want:?}"
        );
    }
}

#[test]
fn model_and_requested_tier_come_from_the_body_or_extra_body() {
    let facts = facts_of(&json!({"model": "gpt-x", "service_tier": "priority"}));
    assert_eq!(facts.model.as_deref(), Some("gpt-x"), "model must be read");
    assert_eq!(
        facts.service_tier.as_deref(),
        Some("priority"),
        "tier must be read"
    );
    let facts = facts_of(&json!({"extra_body": {"service_tier": "flex"}}));
    assert_eq!(
        facts.service_tier.as_deref(),
        Some("flex"),
        "extra_body tier must be read"
    );
    assert_eq!(facts.model, None, "a body without a model has none");
}

#[test]
fn metric_labels_stay_within_a_bounded_set() {
    let policy = LlmPolicy {
        allowed_models: vec!["gpt-x".into(), "claude-*".into()],
        ..LlmPolicy::default()
    };
    let models = [
        (Some("gpt-x"), "gpt-x"),
        (Some("claude-9"), "claude-*"),
        (
            Some("claude-sk-proj-0123456789abcdefABCDEF0123456789"),
            "claude-*",
        ),
        (Some("rogue-model"), "other"),
        (None, "unset"),
    ];
    for (model, want) in models {
        assert_eq!(
            model_label(&policy, model),
            want,
            "model label of {model:?}"
        );
    }
    let efforts = [
        (Some("high"), "high"),
        (Some("budget:8000"), "budget"),
        (Some("turbo"), "other"),
        (None, "unset"),
    ];
    for (effort, want) in efforts {
        assert_eq!(effort_label(effort), want, "effort label of {effort:?}");
    }
    assert_eq!(tier_label(Some("priority")), "priority", "known tier");
    assert_eq!(tier_label(Some("weird")), "other", "unknown tier");
    assert_eq!(
        role_label(&policy, "auxiliary:vision"),
        "auxiliary:vision",
        "Hermes task"
    );
    assert_eq!(
        role_label(&policy, "auxiliary:zzz"),
        "auxiliary:other",
        "unnamed task"
    );
    assert_eq!(role_label(&policy, "main"), "main", "fixed role");
}

#[test]
fn agent_strings_are_shown_without_secrets_and_cut_to_a_bound() {
    let token = format!("ghp_{}", "a1B2".repeat(9));
    let cases = [
        format!("claude-{token}"),
        "claude-sk-proj-0123456789abcdefABCDEF0123456789abcdef".to_string(),
        format!("gpt-{}", "y".repeat(4 * 1024 * 1024)),
    ];
    for model in &cases {
        let s = shown(model);
        assert!(
            s.chars().count() <= SHOWN_MAX + 32,
            "{} chars shown",
            s.chars().count()
        );
        assert!(
            !s.contains("ghp_a1B2"),
            "a GitHub token must not be shown: {s}"
        );
        assert!(
            !s.contains("0123456789abcdefABCDEF"),
            "an OpenAI key must not be shown: {s}"
        );
    }
    assert_eq!(shown("gpt-5"), "gpt-5", "a plain model is shown as is");
}
