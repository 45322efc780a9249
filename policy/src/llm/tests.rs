use super::*;

fn validated(raw: RawLlm) -> (LlmPolicy, Vec<FieldError>) {
    let mut errors = Vec::new();
    let policy = validate(raw, Path::new("/"), &mut errors);
    (policy, errors)
}

#[test]
fn the_request_cap_defaults_to_32_mib_and_out_of_range_values_name_the_field() {
    let (policy, errors) = validated(RawLlm::default());
    assert!(errors.is_empty(), "the default is valid: {errors:?}");
    assert_eq!(policy.max_request_bytes, 32 * 1024 * 1024, "default cap");
    for bad in [0, 1023, 128 * 1024 * 1024 + 1, u64::MAX] {
        let (_, errors) = validated(RawLlm {
            max_request_bytes: Some(bad),
            ..RawLlm::default()
        });
        assert_eq!(
            errors.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(),
            ["llm.maxRequestBytes"],
            "{bad} must be refused naming the field"
        );
    }
    let (policy, errors) = validated(RawLlm {
        max_request_bytes: Some(1024),
        ..RawLlm::default()
    });
    assert!(errors.is_empty(), "1 KiB is accepted: {errors:?}");
    assert_eq!(policy.max_request_bytes, 1024, "the cap is kept");
}

#[test]
fn extra_endpoints_parse_as_method_and_path_patterns_and_bad_ones_name_the_entry() {
    let (policy, errors) = validated(RawLlm {
        extra_endpoints: vec![
            "POST /v1/batches".into(),
            "GET /v1/batches/*".into(),
            "* /v1/files/**".into(),
        ],
        ..RawLlm::default()
    });
    assert!(errors.is_empty(), "valid patterns: {errors:?}");
    let cases = [
        ("POST", "/v1/batches", true),
        ("GET", "/v1/batches", false),
        ("GET", "/v1/batches/b1", true),
        ("GET", "/v1/batches/b1/cancel", false),
        ("DELETE", "/v1/files/f1/content", true),
        ("GET", "/v1/files", true),
        ("POST", "/v1/batch", false),
    ];
    for (method, path, want) in cases {
        let got = policy
            .extra_endpoints
            .iter()
            .any(|p| p.matches(method, path));
        assert_eq!(got, want, "{method} {path}");
    }
    for bad in [
        "/v1/batches",
        "post /v1/batches",
        "POST v1/batches",
        "POST /v1/../chat/completions",
        "POST /v1/%63hat",
        "POST /v1//x",
        "GET /**/x",
    ] {
        let (_, errors) = validated(RawLlm {
            extra_endpoints: vec![bad.into()],
            ..RawLlm::default()
        });
        assert_eq!(
            errors.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(),
            ["llm.extraEndpoints[0]"],
            "{bad} must be refused naming the entry"
        );
    }
}

#[test]
fn provider_tools_default_to_observe_follow_the_role_fallbacks_and_bad_values_name_the_field() {
    let (policy, errors) = validated(RawLlm::default());
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        policy.provider_tools_for("main"),
        ProviderToolsMode::Observe,
        "observe is the default"
    );
    let (policy, errors) = validated(RawLlm {
        provider_tools: [
            ("main", "refuse"),
            ("auxiliary", "allow"),
            ("auxiliary/vision", " refuse "),
            ("default", "observe"),
        ]
        .into_iter()
        .map(|(r, m)| (r.to_string(), m.to_string()))
        .collect(),
        ..RawLlm::default()
    });
    assert!(errors.is_empty(), "valid entries: {errors:?}");
    let cases = [
        ("main", ProviderToolsMode::Refuse),
        ("auxiliary:vision", ProviderToolsMode::Refuse),
        ("auxiliary:title_generation", ProviderToolsMode::Allow),
        ("delegation", ProviderToolsMode::Observe),
        ("cron", ProviderToolsMode::Observe),
    ];
    for (role, want) in cases {
        assert_eq!(policy.provider_tools_for(role), want, "{role}");
    }
    let (_, errors) = validated(RawLlm {
        provider_tools: [("main", "block"), ("sneaky", "refuse")]
            .into_iter()
            .map(|(r, m)| (r.to_string(), m.to_string()))
            .collect(),
        ..RawLlm::default()
    });
    let fields: Vec<(&str, &str)> = errors
        .iter()
        .map(|e| (e.field.as_str(), e.message.as_str()))
        .collect();
    assert_eq!(
        fields,
        [
            (
                "llm.providerTools.main",
                "unknown value 'block'; use one of allow, observe, refuse"
            ),
            (
                "llm.providerTools.sneaky",
                "'sneaky' is not a role; use main, delegation, cron, auxiliary, auxiliary:<task> or default"
            ),
        ],
        "each bad entry is named"
    );
}
