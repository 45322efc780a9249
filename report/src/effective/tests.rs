use serde_json::json;

use super::*;

fn map(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("the literal must be an object, got {other}"),
    }
}

fn effective_of(user: Option<&str>, managed: Value) -> (Vec<Value>, Option<String>) {
    let home = tempfile::tempdir().expect("a temp home must be created");
    if let Some(yaml) = user {
        std::fs::write(home.path().join("config.yaml"), yaml).expect("config must be written");
    }
    let merged = merge_config(home.path(), &map(managed));
    (
        effective(&merged.tree)
            .0
            .into_iter()
            .map(|(_, v)| v)
            .collect(),
        merged.user_error,
    )
}

#[test]
fn defaults_alone_give_hermes_default_values() {
    let (values, error) = effective_of(None, json!({}));
    let want = json!([
        null, null, null, "", "", "", null, "grok-4.5", true, true, 3600
    ]);
    assert_eq!(
        Value::Array(values),
        want,
        "the keys must carry Hermes' defaults"
    );
    assert_eq!(error, None, "no config file is not an error");
}

#[test]
fn user_then_managed_values_merge_leaf_by_leaf() {
    let user = "model:\n  default: grok-4.6\n  provider: xai\nagent:\n  reasoning_effort: high\n\
compression:\n  threshold_tokens: 120000\n";
    let managed =
        json!({"agent": {"service_tier": "priority"}, "model": {"provider": "openrouter"}});
    let (values, _) = effective_of(Some(user), managed);
    let want = json!([
        "grok-4.6",
        "openrouter",
        "high",
        "priority",
        "",
        "",
        120000,
        "grok-4.5",
        true,
        true,
        3600
    ]);
    assert_eq!(
        Value::Array(values),
        want,
        "managed must win only on the leaves it pins"
    );
}

#[test]
fn root_keys_and_aliases_are_canonicalised_before_the_overlay() {
    let cases = [
        (
            "root provider moves under model",
            "model: m1\nprovider: p1\n",
            ("m1", "p1"),
        ),
        (
            "model.name becomes model.default",
            "model:\n  name: m2\n  provider: p2\n",
            ("m2", "p2"),
        ),
        (
            "model.model becomes model.default",
            "model:\n  model: m3\n",
            ("m3", ""),
        ),
        (
            "root provider does not override",
            "model:\n  default: m4\n  provider: p4\nprovider: x\n",
            ("m4", "p4"),
        ),
        (
            "a bare string model is the default model",
            "model: m5\n",
            ("m5", ""),
        ),
    ];
    for (why, yaml, (model, provider)) in cases {
        let (values, _) = effective_of(Some(yaml), json!({}));
        assert_eq!(values[0], json!(model), "{why}: model.default");
        let want_provider = if provider.is_empty() {
            Value::Null
        } else {
            json!(provider)
        };
        assert_eq!(values[1], want_provider, "{why}: model.provider");
    }
}

#[test]
fn deep_merge_follows_hermes_rules() {
    let mut base = map(json!({"a": {"x": 1, "y": 2}, "b": {"z": 1}, "c": 1, "d": [1, 2]}));
    let over = map(json!({"a": {"y": 3}, "b": null, "c": {"n": 1}, "d": [9], "e": "new"}));
    deep_merge(&mut base, &over);
    let want = json!({"a": {"x": 1, "y": 3}, "b": {"z": 1}, "c": {"n": 1}, "d": [9], "e": "new"});
    assert_eq!(
        Value::Object(base),
        want,
        "mappings recurse, null over a mapping is ignored"
    );
    let mut section = map(json!({"agent": {"service_tier": "", "reasoning_effort": "low"}}));
    deep_merge(&mut section, &map(json!({"agent": "off"})));
    assert_eq!(
        lookup(&section, "agent.service_tier"),
        Value::Null,
        "a scalar replaces a section"
    );
}

#[test]
fn a_broken_user_config_serves_the_defaults_and_says_why() {
    let cases = [
        ("yaml error", "model: [oops\n", "yaml_error"),
        ("not a mapping", "- a\n- b\n", "not_a_mapping"),
    ];
    for (why, yaml, code) in cases {
        let (values, error) = effective_of(Some(yaml), json!({"agent": {"service_tier": "fast"}}));
        assert_eq!(
            values[3],
            json!("fast"),
            "{why}: the managed overlay still applies"
        );
        assert_eq!(values[0], Value::Null, "{why}: user values are dropped");
        let error = error.unwrap_or_default();
        assert!(
            error.contains(code),
            "{why}: the error must say {code}, got {error:?}"
        );
    }
    let (_, error) = effective_of(Some("# empty\n"), json!({}));
    assert_eq!(
        error, None,
        "an empty user config is an empty config, not an error"
    );
}

#[test]
fn the_cron_settings_are_shown_as_hermes_reads_them() {
    let guard = |yaml: &str, managed: Value| {
        let (values, _) = effective_of(Some(yaml), managed);
        (values[8].clone(), values[9].clone(), values[10].clone())
    };
    let cases = [
        (
            "unset: both guards on, the default timeout",
            "{}\n",
            json!({}),
            (true, true, json!(3600)),
        ),
        (
            "false turns a guard off",
            "cron:\n  model_drift_guard: false\n  script_timeout_seconds: 90\n",
            json!({}),
            (false, true, json!(90)),
        ),
        (
            "only the boolean false does: a string keeps it on",
            "cron:\n  model_drift_guard: 'false'\n  preflight: 0\n",
            json!({}),
            (true, true, json!(3600)),
        ),
        (
            "the managed overlay wins, a numeric string is read and cut",
            "cron:\n  preflight: true\n  script_timeout_seconds: ' 90.7 '\n",
            json!({"cron": {"preflight": false}}),
            (true, false, json!(90)),
        ),
        (
            "a non-positive or unreadable timeout is the default",
            "cron:\n  script_timeout_seconds: 0.5\n",
            json!({}),
            (true, true, json!(3600)),
        ),
        (
            "cron that is not a mapping keeps both guards on",
            "cron: off\n",
            json!({}),
            (true, true, json!(3600)),
        ),
    ];
    for (why, yaml, managed, (drift, preflight, timeout)) in cases {
        assert_eq!(
            guard(yaml, managed),
            (json!(drift), json!(preflight), timeout),
            "{why}"
        );
    }
    for (value, want) in [
        (json!(-5), 3600),
        (json!("abc"), 3600),
        (json!(true), 1),
        (json!([60]), 3600),
        (json!(f64::MAX), 3600),
        (json!("1_200"), 1200),
        (json!("1e3"), 1000),
    ] {
        assert_eq!(script_timeout_seconds(&value), want, "{value}");
    }
}
