use std::collections::BTreeMap;

use fleetgate_policy::Policy;
use fleetgate_policy::llm::{LlmMode, ProviderToolsMode};
use serde_json::{Value, json};

use super::*;
use crate::crd::FleetPolicy;
use crate::crd::llm::{
    LlmBudgetSpec, LlmBudgetsSpec, LlmEffort, LlmPinSpec, LlmPriceSpec, LlmPricesSpec,
    LlmProviderSpec, LlmProviderTools, LlmSecretRef, LlmSecretsSpec,
};
use crate::desired::{CONFIG_KEY, POLICY_KEY, render};

fn provider(kind: LlmProviderKind, url: &str) -> LlmProviderSpec {
    LlmProviderSpec {
        kind,
        base_url: url.into(),
        secret_ref: LlmSecretRef {
            name: "llm-keys".into(),
            key: format!("{}-key", kind.name()),
        },
        timeout_seconds: None,
    }
}

fn spec() -> LlmSpec {
    LlmSpec {
        mode: Some(LlmModeSpec::Enforce),
        providers: BTreeMap::from([
            (
                "oai".into(),
                provider(LlmProviderKind::Openai, "https://api.openai.com"),
            ),
            (
                "claude".into(),
                provider(LlmProviderKind::Anthropic, "https://api.anthropic.com"),
            ),
        ]),
        roles: BTreeMap::from([
            ("main".into(), "oai".into()),
            ("delegation".into(), "claude".into()),
            ("auxiliary:title_generation".into(), "oai".into()),
        ]),
        allowed_models: vec!["gpt-5".into()],
        pins: BTreeMap::from([(
            "main".into(),
            LlmPinSpec {
                effort: Some(LlmEffort::High),
                service_tier: Some("priority".into()),
            },
        )]),
        provider_tools: BTreeMap::from([
            ("main".into(), LlmProviderTools::Refuse),
            ("auxiliary".into(), LlmProviderTools::Allow),
        ]),
        prices: Some(LlmPricesSpec {
            models: BTreeMap::from([(
                "gpt-5".into(),
                LlmPriceSpec {
                    input: 2.0,
                    output: 20.0,
                    cached_input: Some(0.2),
                    cache_write: None,
                },
            )]),
            tiers: BTreeMap::from([("batch".into(), 0.5)]),
            builtin: None,
        }),
        budgets: Some(LlmBudgetsSpec {
            pod: BTreeMap::from([(
                "cron".into(),
                LlmBudgetSpec {
                    daily_usd: Some(5.0),
                    tokens_per_minute: Some(100_000),
                },
            )]),
            namespace: BTreeMap::from([(
                "main".into(),
                LlmBudgetSpec {
                    daily_usd: Some(50.0),
                    tokens_per_minute: None,
                },
            )]),
        }),
        secrets: Some(LlmSecretsSpec::Redact),
    }
}

fn file(fp: &FleetPolicy, key: &str) -> String {
    let d = render(fp).expect("the spec must render");
    d.config_map
        .data
        .as_ref()
        .and_then(|m| m.get(key))
        .cloned()
        .expect("the file must be rendered")
}

#[test]
fn spec_llm_renders_a_gate_policy_the_gate_accepts_with_keys_from_the_secret_mount() {
    let fp = FleetPolicy::test().with_spec(|s| s.llm = Some(spec()));
    let yaml = file(&fp, POLICY_KEY);
    let policy = Policy::parse(yaml.as_bytes(), std::path::Path::new("/"))
        .expect("the gate must accept the rendered policy");
    let llm = &policy.llm;
    assert_eq!(llm.mode, LlmMode::Enforce, "mode");
    assert_eq!(
        llm.policy_name.as_deref(),
        Some("fleet"),
        "refusals name the FleetPolicy"
    );
    let oai = llm.provider_for("main").expect("main is served");
    assert_eq!(
        oai.key_file.as_deref(),
        Some(std::path::Path::new(
            "/etc/fleetgate/llm-keys/llm-keys/openai-key"
        )),
        "the key comes from the mounted Secret"
    );
    assert_eq!(
        llm.provider_for("delegation").map(|p| p.name.as_str()),
        Some("claude"),
        "delegation has its own provider"
    );
    assert_eq!(
        llm.pin_for("main").and_then(|p| p.effort.as_deref()),
        Some("high"),
        "the pin is rendered"
    );
    let tools = [
        ("main", ProviderToolsMode::Refuse),
        ("auxiliary:title_generation", ProviderToolsMode::Allow),
        ("delegation", ProviderToolsMode::Observe),
    ];
    for (role, want) in tools {
        assert_eq!(
            llm.provider_tools_for(role),
            want,
            "providerTools of {role} are rendered"
        );
    }
    assert!(!yaml.contains("sk-"), "no key material in the policy");
    let (_, gpt5) = llm.prices.price_for("gpt-5").expect("priced");
    assert_eq!(
        (gpt5.input, gpt5.cached_input, gpt5.output, gpt5.source),
        (2.0, 0.2, 20.0, "policy"),
        "the spec's price wins over the built-in one"
    );
    assert!(
        llm.prices.price_for("claude-sonnet-4-6").is_some(),
        "the built-in table stays"
    );
    assert_eq!(llm.prices.tiers.get("batch"), Some(&0.5));
    let cron = llm
        .budgets
        .pod_for("cron")
        .expect("the pod budget is rendered");
    assert_eq!(
        (cron.daily_usd, cron.tokens_per_minute),
        (Some(5.0), Some(100_000))
    );
    assert_eq!(
        llm.budgets.namespace.get("main").and_then(|b| b.daily_usd),
        Some(50.0)
    );
    assert_eq!(llm.secrets, fleetgate_policy::llm::SecretsMode::Redact);
}

#[test]
fn a_budget_for_no_role_names_its_spec_field() {
    let fp = FleetPolicy::test().with_spec(|s| {
        let mut llm = spec();
        if let Some(b) = llm.budgets.as_mut() {
            b.pod.insert("boss".into(), LlmBudgetSpec::default());
        }
        s.llm = Some(llm);
    });
    let err = render(&fp).expect_err("a role that is none must be refused");
    assert!(
        err.to_string().contains("spec.llm.budgets.pod.boss"),
        "the error must name the field: {err}"
    );
}

#[test]
fn a_provider_tools_entry_for_no_role_names_its_spec_field() {
    let fp = FleetPolicy::test().with_spec(|s| {
        let mut llm = spec();
        llm.provider_tools
            .insert("sneaky".into(), LlmProviderTools::Allow);
        s.llm = Some(llm);
    });
    let err = render(&fp).expect_err("a role that is none must be refused");
    assert!(
        err.to_string().contains("spec.llm.providerTools.sneaky"),
        "the error must name the field: {err}"
    );
}

#[test]
fn hermes_base_urls_are_pinned_per_role_without_any_api_key() {
    let fp = FleetPolicy::test().with_spec(|s| s.llm = Some(spec()));
    let managed: Value = serde_yaml::from_str(&file(&fp, CONFIG_KEY)).expect("managed YAML");
    let cases = [
        (
            "/model/base_url",
            json!("http://127.0.0.1:15180/llm/main/v1"),
        ),
        ("/model/provider", json!("custom")),
        (
            "/delegation/base_url",
            json!("http://127.0.0.1:15180/llm/delegation"),
        ),
        ("/delegation/api_mode", json!("anthropic_messages")),
        (
            "/auxiliary/title_generation/base_url",
            json!("http://127.0.0.1:15180/llm/auxiliary/title_generation/v1"),
        ),
        ("/auxiliary/vision", Value::Null),
    ];
    for (pointer, want) in cases {
        assert_eq!(
            managed.pointer(pointer).cloned().unwrap_or(Value::Null),
            want,
            "{pointer} in {managed}"
        );
    }
    assert!(
        !managed.to_string().contains("api_key"),
        "no api_key is rendered: {managed}"
    );
}

#[test]
fn a_generic_auxiliary_role_pins_every_hermes_task() {
    let mut s = spec();
    s.roles.insert("auxiliary".into(), "oai".into());
    let pins = managed_pins(&s);
    for task in HERMES_AUX_TASKS {
        assert!(
            pins.contains_key(&format!("auxiliary.{task}.base_url")),
            "auxiliary.{task}.base_url must be pinned"
        );
    }
}

#[test]
fn a_managed_value_that_contradicts_the_llm_route_is_refused() {
    let fp = FleetPolicy::test().with_spec(|s| {
        s.llm = Some(spec());
        s.managed = serde_json::from_value(json!({"model": {"base_url": "https://elsewhere/v1"}}))
            .expect("mapping");
    });
    let err = render(&fp).expect_err("a contradicting base_url must be refused");
    assert!(
        err.to_string().contains("spec.managed.model.base_url"),
        "the error must name the field: {err}"
    );
}
