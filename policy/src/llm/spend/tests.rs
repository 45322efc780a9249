use super::*;

fn prices(raw: RawPrices) -> (Prices, Vec<(String, String)>) {
    let mut errors = Vec::new();
    let p = validate_prices(&raw, &mut |f, m| errors.push((f, m)));
    (p, errors)
}

#[test]
fn an_exact_id_wins_over_a_prefix_and_the_longest_prefix_over_a_shorter_one() {
    let (table, errors) = prices(RawPrices::default());
    assert!(errors.is_empty(), "{errors:?}");
    let at = |m: &str| table.price_for(m).map(|(p, _)| p.to_string());
    assert_eq!(at("gpt-5").as_deref(), Some("gpt-5"));
    assert_eq!(at("gpt-5-mini-2025-08-07").as_deref(), Some("gpt-5-mini*"));
    assert_eq!(
        at("claude-opus-4-8-fast").as_deref(),
        Some("claude-opus-4-8-fast")
    );
    assert_eq!(at("claude-opus-4-8").as_deref(), Some("claude-opus-4-8*"));
    assert_eq!(
        at("claude-sonnet-4-5-20250929").as_deref(),
        Some("claude-sonnet-4*")
    );
    assert_eq!(at("llama-3"), None, "an unknown model has no price");
}

#[test]
fn the_policy_overrides_a_builtin_entry_and_can_turn_the_table_off() {
    let mut raw = RawPrices::default();
    raw.models.insert(
        "gpt-5".into(),
        RawPrice {
            input: Some(2.0),
            output: Some(20.0),
            ..RawPrice::default()
        },
    );
    let (table, errors) = prices(raw.clone());
    assert!(errors.is_empty(), "{errors:?}");
    let (_, p) = table.price_for("gpt-5").unwrap();
    assert_eq!(
        (p.input, p.cached_input, p.output, p.source),
        (2.0, 2.0, 20.0, "policy")
    );
    raw.builtin = Some(false);
    let (table, _) = prices(raw);
    assert!(table.price_for("gpt-5-mini").is_none(), "no built-in entry");
}

#[test]
fn cost_is_usage_times_price_with_the_tier_multiplier() {
    let (table, _) = prices(RawPrices::default());
    let usage = Usage {
        input: 1_000_000,
        cache_read: 1_000_000,
        cache_write: 0,
        output: 1_000_000,
        reasoning: 400_000,
    };
    let list = 1.25 + 0.125 + 10.0;
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(table.cost("gpt-5", &usage, None).unwrap(), list));
    assert!(close(
        table.cost("gpt-5", &usage, Some("default")).unwrap(),
        list
    ));
    assert!(close(
        table.cost("gpt-5", &usage, Some("flex")).unwrap(),
        list * 0.5
    ));
    assert!(close(
        table.cost("gpt-5", &usage, Some("priority")).unwrap(),
        list * 2.0
    ));
    let claude = Usage {
        input: 2_000_000,
        cache_read: 0,
        cache_write: 1_000_000,
        output: 0,
        reasoning: 0,
    };
    assert!(close(
        table
            .cost("claude-sonnet-4-6", &claude, Some("priority"))
            .unwrap(),
        2.0 * 3.0 + 3.75
    ));
    assert_eq!(table.cost("unknown-model", &usage, None), None);
}

#[test]
fn bad_prices_and_budgets_name_their_field() {
    let mut raw = RawPrices::default();
    raw.models.insert(
        "m".into(),
        RawPrice {
            input: Some(-1.0),
            output: Some(1.0),
            ..RawPrice::default()
        },
    );
    raw.models.insert(
        "half".into(),
        RawPrice {
            input: Some(1.0),
            ..RawPrice::default()
        },
    );
    raw.models.insert("a*b".into(), RawPrice::default());
    raw.tiers.insert("flex".into(), f64::NAN);
    let (_, errors) = prices(raw);
    let fields: Vec<&str> = errors.iter().map(|(f, _)| f.as_str()).collect();
    for want in [
        "llm.prices.models.m.input",
        "llm.prices.models.half",
        "llm.prices.models.a*b",
        "llm.prices.tiers.flex",
    ] {
        assert!(fields.contains(&want), "{want} in {fields:?}");
    }
    let mut raw = RawBudgets::default();
    raw.pod.insert("boss".into(), RawBudget::default());
    raw.pod.insert("cron".into(), RawBudget::default());
    raw.namespace.insert(
        "main".into(),
        RawBudget {
            daily_usd: Some(-2.0),
            tokens_per_minute: None,
        },
    );
    raw.exhausted = Some(RawExhausted {
        day: "yesterday".into(),
        roles: vec![],
    });
    let mut errors = Vec::new();
    let b = validate_budgets(&raw, &mut |f, m| errors.push((f, m)));
    let fields: Vec<&str> = errors.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        fields,
        [
            "llm.budgets.pod.boss",
            "llm.budgets.pod.cron",
            "llm.budgets.namespace.main.dailyUsd",
            "llm.budgets.exhausted.day"
        ]
    );
    assert!(b.pod.is_empty() && b.namespace.is_empty() && b.exhausted.is_none());
}

#[test]
fn auxiliary_tasks_count_under_auxiliary_and_exhausted_applies_on_its_day_only() {
    let mut raw = RawBudgets::default();
    raw.pod.insert(
        "auxiliary".into(),
        RawBudget {
            daily_usd: Some(1.0),
            tokens_per_minute: Some(10),
        },
    );
    raw.exhausted = Some(RawExhausted {
        day: "2026-12-07".into(),
        roles: vec!["cron".into()],
    });
    let b = validate_budgets(&raw, &mut |f, m| panic!("{f}: {m}"));
    assert!(b.pod_for("auxiliary:vision").is_some());
    assert!(b.pod_for("main").is_none());
    assert!(b.namespace_exhausted("cron", "2026-12-07"));
    assert!(!b.namespace_exhausted("cron", "2026-12-08"), "another day");
    assert!(!b.namespace_exhausted("main", "2026-12-07"), "another role");
}
