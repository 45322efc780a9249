use serde_json::{Value, json};

use super::*;
use crate::llm::scan::{COMPLETION, scan_object};

/// `body` pinned (`apply`) or judged only: the body that would be sent and the rewrites.
fn pinned(
    pin: &LlmPin,
    kind: ProviderKind,
    path: &str,
    body: &Value,
    apply: bool,
) -> (Value, Vec<Rewrite>) {
    let text = body.to_string();
    let scan = scan_object(&text, &text, &COMPLETION).expect("an object scans");
    if !apply {
        return (body.clone(), pin_rewrites(pin, kind, path, &scan, None));
    }
    let (rewrites, rewritten) = rewrite(pin, kind, path, &text, &scan);
    let sent = rewritten.unwrap_or(text);
    let value = serde_json::from_str(&sent).expect("a rewritten body stays JSON");
    (value, rewrites)
}

fn effort(body: &Value) -> Option<String> {
    let text = body.to_string();
    effort_of(&scan_object(&text, &text, &COMPLETION).expect("an object scans"))
}

fn pin(effort: Option<&str>, tier: Option<&str>) -> LlmPin {
    LlmPin {
        effort: effort.map(str::to_string),
        service_tier: tier.map(str::to_string),
    }
}

#[test]
fn a_pinned_effort_lands_where_each_wire_shape_keeps_it() {
    let cases = [
        (
            ProviderKind::OpenAi,
            "/v1/chat/completions",
            json!({"model": "m", "reasoning_effort": "low"}),
            json!({"model": "m", "reasoning_effort": "high"}),
        ),
        (
            ProviderKind::OpenAi,
            "/v1/chat/completions",
            json!({"model": "m"}),
            json!({"model": "m", "reasoning_effort": "high"}),
        ),
        (
            ProviderKind::OpenAi,
            "/v1/responses",
            json!({"model": "m"}),
            json!({"model": "m", "reasoning": {"effort": "high"}}),
        ),
        (
            ProviderKind::OpenRouter,
            "/v1/chat/completions",
            json!({"reasoning": {"enabled": false}}),
            json!({"reasoning": {"enabled": true, "effort": "high"}}),
        ),
        (
            ProviderKind::Anthropic,
            "/v1/messages",
            json!({"thinking": {"type": "enabled", "budget_tokens": 4000}}),
            json!({"thinking": {"type": "enabled", "budget_tokens": 16000}}),
        ),
        (
            ProviderKind::Anthropic,
            "/v1/messages",
            json!({"thinking": {"type": "adaptive"}, "output_config": {"effort": "low"}}),
            json!({"thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}}),
        ),
        (
            ProviderKind::Anthropic,
            "/v1/messages",
            json!({}),
            json!({"output_config": {"effort": "high"}}),
        ),
    ];
    for (kind, path, before, want) in cases {
        let (body, rewrites) = pinned(&pin(Some("high"), None), kind, path, &before, true);
        assert_eq!(
            body, want,
            "{kind:?} {path} {before} must be rewritten to {want}"
        );
        assert_eq!(
            rewrites.len(),
            1,
            "one rewrite must be reported for {before}"
        );
        assert_eq!(
            effort(&body).map(|e| e == "high" || e == "budget:16000"),
            Some(true),
            "the rewritten body must read back as the pin"
        );
    }
}

#[test]
fn observe_mode_reports_rewrites_without_touching_the_body() {
    let before = json!({"model": "m", "reasoning_effort": "low", "service_tier": "flex"});
    let (body, rewrites) = pinned(
        &pin(Some("high"), Some("priority")),
        ProviderKind::OpenAi,
        "/v1/chat/completions",
        &before,
        false,
    );
    assert_eq!(body, before, "observe mode must not change the body");
    let described: Vec<String> = rewrites.iter().map(Rewrite::describe).collect();
    assert_eq!(
        described,
        [
            "reasoning_effort: low -> high",
            "service_tier: flex -> priority"
        ],
        "both would-be rewrites must be reported"
    );
}

#[test]
fn a_request_that_already_matches_the_pin_is_not_rewritten() {
    let cases = [
        json!({"reasoning_effort": "high", "service_tier": "priority"}),
        json!({"thinking": {"type": "enabled", "budget_tokens": 16000}, "service_tier": "priority"}),
    ];
    for before in cases {
        let (body, rewrites) = pinned(
            &pin(Some("high"), Some("priority")),
            ProviderKind::Anthropic,
            "/v1/messages",
            &before,
            true,
        );
        assert!(rewrites.is_empty(), "{before} must need no rewrite");
        assert_eq!(body, before, "{before} must stay unchanged");
    }
}

#[test]
fn a_model_outside_the_allowed_list_is_refused_naming_the_policy() {
    let policy = LlmPolicy {
        allowed_models: vec!["gpt-ok".into(), "claude-*".into()],
        policy_name: Some("team-a".into()),
        ..LlmPolicy::default()
    };
    assert_eq!(
        model_refusal(&policy, Some("gpt-ok")),
        None,
        "a listed model passes"
    );
    assert_eq!(
        model_refusal(&policy, Some("claude-x")),
        None,
        "a prefix match passes"
    );
    assert_eq!(
        model_refusal(&policy, None),
        None,
        "no model is left to the provider"
    );
    let refused = model_refusal(&policy, Some("gpt-rogue")).expect("a rogue model must be refused");
    assert!(
        refused.contains("fleet policy 'team-a'") && refused.contains("gpt-rogue"),
        "the refusal must name the policy and the model: {refused}"
    );
    let open = LlmPolicy::default();
    assert_eq!(
        model_refusal(&open, Some("any")),
        None,
        "an empty list allows all"
    );
}

#[test]
fn edits_that_remove_or_replace_members_keep_the_body_valid_json() {
    let none = pin(Some("none"), None);
    let cases = [
        (
            ProviderKind::Anthropic,
            r#"{"thinking":{"type":"enabled","budget_tokens":4000},"output_config":{"effort":"low"},"model":"m"}"#,
            json!({"thinking": {"type": "disabled"}, "model": "m"}),
        ),
        (
            ProviderKind::Anthropic,
            r#"{ "output_config" : {"effort":"low"} , "thinking":{"type":"adaptive"} }"#,
            json!({"thinking": {"type": "disabled"}}),
        ),
        (
            ProviderKind::OpenRouter,
            r#"{"reasoning":{"effort":"low","enabled":true},"model":"m"}"#,
            json!({"reasoning": {"enabled": false}, "model": "m"}),
        ),
        (
            ProviderKind::OpenRouter,
            r#"{"model":"m","reasoning":{"enabled":true, "effort":"low"}}"#,
            json!({"reasoning": {"enabled": false}, "model": "m"}),
        ),
        (
            ProviderKind::Anthropic,
            r#"{"model":"m","messages":[]}"#,
            json!({"model": "m", "messages": [], "thinking": {"type": "disabled"}}),
        ),
    ];
    for (kind, text, want) in cases {
        let body: Value = serde_json::from_str(text).expect("case is JSON");
        let (sent, rewrites) = pinned(&none, kind, "/v1/messages", &body, true);
        assert_eq!(sent, want, "{kind:?} {text} pinned to none");
        assert_eq!(rewrites.len(), 1, "{text}: one rewrite reported");
    }
    let both = pin(Some("high"), Some("flex"));
    let (sent, _) = pinned(
        &both,
        ProviderKind::OpenAi,
        "/v1/chat/completions",
        &json!({}),
        true,
    );
    assert_eq!(
        sent,
        json!({"reasoning_effort": "high", "service_tier": "flex"}),
        "members are added to an empty object without a stray comma"
    );
}

#[test]
fn a_rewrite_leaves_every_other_byte_as_sent() {
    let text = r#"{ "model": "m", "messages": [ {"role":"user","content":"h\u00e9"} ], "reasoning_effort" : "low" }"#;
    let scan = scan_object(text, text, &COMPLETION).expect("scans");
    let (_, sent) = rewrite(
        &pin(Some("high"), None),
        ProviderKind::OpenAi,
        "/v1/chat/completions",
        text,
        &scan,
    );
    assert_eq!(
        sent.as_deref(),
        Some(
            r#"{ "model": "m", "messages": [ {"role":"user","content":"h\u00e9"} ], "reasoning_effort" : "high" }"#
        ),
        "only the pinned value changes"
    );
}
