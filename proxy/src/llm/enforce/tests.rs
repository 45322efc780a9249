use serde_json::json;

use super::*;

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
    for (kind, path, mut body, want) in cases {
        let before = body.clone();
        let rewrites = pin_rewrites(&pin(Some("high"), None), kind, path, &mut body, true);
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
            effort_of(&body).map(|e| e == "high" || e == "budget:16000"),
            Some(true),
            "the rewritten body must read back as the pin"
        );
    }
}

#[test]
fn observe_mode_reports_rewrites_without_touching_the_body() {
    let mut body = json!({"model": "m", "reasoning_effort": "low", "service_tier": "flex"});
    let before = body.clone();
    let rewrites = pin_rewrites(
        &pin(Some("high"), Some("priority")),
        ProviderKind::OpenAi,
        "/v1/chat/completions",
        &mut body,
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
    for mut body in cases {
        let before = body.clone();
        let rewrites = pin_rewrites(
            &pin(Some("high"), Some("priority")),
            ProviderKind::Anthropic,
            "/v1/messages",
            &mut body,
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
