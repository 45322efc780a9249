use serde_json::json;

use super::*;

const POLICY: &str = "p-current";
const MANAGED: &str = "m-current";

fn expected() -> Expected {
    Expected {
        policy_sha256: POLICY.into(),
        managed_sha256: MANAGED.into(),
        pins: pins_from_managed(
            json!({"model": {"default": "grok-4.6"}, "agent": {"reasoning_effort": "high"}})
                .as_object(),
        ),
        allowed_models: Vec::new(),
        max_cost_per_job_per_day: None,
    }
}

/// A gate answer: policy and managed hashes, the main role's (model, effort), cron jobs
/// as (id, model, cost per day, flags).
fn gate(
    policy: &str,
    managed: &str,
    main: (&str, &str),
    jobs: &[(&str, &str, f64, &[&str])],
) -> GateSnapshot {
    let report = json!({
        "status": {
            "managed": {"dir": "/etc/hermes", "keys": 3, "sha256": managed, "error": null},
            "observed": {"main": {"model": main.0, "reasoning_effort": main.1, "service_tier": null, "ts": "2026-10-04T14:41:05Z"}},
            "crons": jobs.iter().map(|(id, model, _, _)| json!({"id": id, "name": id, "enabled": true, "model": model})).collect::<Vec<_>>(),
        },
        "crons": {"cost": {
            "jobs": jobs.iter().map(|(id, _, cost, flags)| json!({"id": id, "name": format!("job {id}"), "cost_per_day_usd": cost, "flags": flags})).collect::<Vec<_>>(),
            "total_cost_per_day_usd": 0.0,
        }},
    });
    GateSnapshot {
        llm_spend: None,
        policy_sha256: Some(policy.into()),
        report: serde_json::from_value(report).expect("a contract-shaped report must deserialize"),
    }
}

fn ok(pod: &str, g: GateSnapshot) -> PodScrape {
    PodScrape {
        pod: pod.into(),
        outcome: Ok(g),
    }
}

fn current(pod: &str) -> PodScrape {
    ok(pod, gate(POLICY, MANAGED, ("grok-4.6", "high"), &[]))
}

/// name, selected, scrapes, (selected, reporting, current), ok, reason, mentioned.
type PropagationCase = (
    &'static str,
    usize,
    Vec<PodScrape>,
    (u32, u32, u32),
    bool,
    &'static str,
    &'static str,
);

#[test]
fn propagation_counts_and_names_the_pods() {
    let silent = PodScrape {
        pod: "agent-c".into(),
        outcome: Err(ScrapeFailure::Timeout),
    };
    let old = ok("agent-b", gate("p-old", MANAGED, ("grok-4.6", "high"), &[]));
    let stale_managed = ok("agent-b", gate(POLICY, "m-old", ("grok-4.6", "high"), &[]));
    let cases: Vec<PropagationCase> = vec![
        (
            "all current",
            2,
            vec![current("agent-a"), current("agent-b")],
            (2, 2, 2),
            true,
            "AllCurrent",
            "all 2 pods",
        ),
        (
            "one on an old policy",
            2,
            vec![current("agent-a"), old],
            (2, 2, 1),
            false,
            "PodsBehind",
            "agent-b",
        ),
        (
            "one on an old managed config",
            2,
            vec![current("agent-a"), stale_managed],
            (2, 2, 1),
            false,
            "PodsBehind",
            "agent-b",
        ),
        (
            "one silent",
            3,
            vec![current("agent-a"), current("agent-b"), silent],
            (3, 2, 2),
            false,
            "PodsNotReporting",
            "agent-c",
        ),
        (
            "no pods",
            0,
            vec![],
            (0, 0, 0),
            true,
            "NoPods",
            "spec.selector",
        ),
    ];
    for (name, selected, scrapes, (sel, rep, cur), ok_, reason, mention) in cases {
        let view = aggregate(selected, &scrapes, &expected());
        assert_eq!(
            (view.pods.selected, view.pods.reporting, view.pods.current),
            (sel, rep, cur),
            "{name}: pod counts"
        );
        assert_eq!(
            (view.propagated.ok, view.propagated.reason),
            (ok_, reason),
            "{name}: Propagated verdict"
        );
        assert!(
            view.propagated.message.contains(mention),
            "{name}: the message must mention {mention}: {}",
            view.propagated.message
        );
    }
}

#[test]
fn drift_is_detected_per_role_and_names_the_pods() {
    let cases = [
        ("matching pins", ("grok-4.6", "high"), false),
        ("effort differs", ("grok-4.6", "low"), true),
        ("model differs", ("grok-4.5", "high"), true),
        (
            "provider-prefixed model matches",
            ("xai/grok-4.6", "high"),
            false,
        ),
    ];
    for (name, main, want) in cases {
        let scrapes = [
            current("agent-a"),
            ok("agent-b", gate(POLICY, MANAGED, main, &[])),
        ];
        let view = aggregate(2, &scrapes, &expected());
        assert_eq!(view.drift.ok, want, "{name}: Drift must be {want}");
        let b = view
            .observed_tiers
            .iter()
            .find(|t| t.pods.contains(&"agent-b".to_string()))
            .expect("agent-b must be observed");
        assert_eq!(b.drift, want, "{name}: agent-b's tier drift flag");
        if want {
            assert!(
                view.drift.message.contains("main on agent-b"),
                "{name}: the message must name role and pod: {}",
                view.drift.message
            );
        }
    }
}

#[test]
fn pods_with_the_same_observation_are_grouped() {
    let view = aggregate(2, &[current("agent-b"), current("agent-a")], &expected());
    assert_eq!(
        view.observed_tiers.len(),
        1,
        "one combination must be one row"
    );
    assert_eq!(
        view.observed_tiers[0].pods,
        vec!["agent-a".to_string(), "agent-b".to_string()],
        "pods must be listed sorted"
    );
}

#[test]
fn unpinned_roles_never_drift() {
    let mut e = expected();
    e.pins.clear();
    let view = aggregate(
        1,
        &[ok(
            "agent-a",
            gate(POLICY, MANAGED, ("anything", "xhigh"), &[]),
        )],
        &e,
    );
    assert!(!view.drift.ok, "without pins nothing can drift");
}

#[test]
fn cron_costs_are_totalled_flagged_and_rounded() {
    let mut e = expected();
    e.allowed_models = vec!["grok-4.6-mini".into()];
    let a = gate(
        POLICY,
        MANAGED,
        ("grok-4.6", "high"),
        &[
            (
                "inbox",
                "grok-4.6-mini",
                16.064,
                &["frequent_without_gate", "mostly_empty"],
            ),
            ("digest", "grok-4.6", 0.5, &[]),
        ],
    );
    let b = gate(
        POLICY,
        MANAGED,
        ("grok-4.6", "high"),
        &[("inbox", "grok-4.6-mini", 1.001, &[])],
    );
    let view = aggregate(2, &[ok("agent-b", b), ok("agent-a", a)], &e);
    let rows: Vec<(&str, &str, f64, Vec<&str>)> = view
        .cron_jobs
        .iter()
        .map(|j| {
            (
                j.pod.as_str(),
                j.job.as_str(),
                j.cost_per_day,
                j.flags.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("agent-a", "digest", 0.5, vec![MODEL_NOT_ALLOWED]),
            (
                "agent-a",
                "inbox",
                16.06,
                vec!["frequent_without_gate", "mostly_empty"]
            ),
            ("agent-b", "inbox", 1.0, vec![]),
        ],
        "jobs must be listed per pod, sorted, with the allowed-model flag added"
    );
    assert_eq!(
        view.total_cost_per_day, 17.56,
        "the total must be the sum per day, to the cent"
    );
    assert_eq!(view.flagged, 2, "two jobs carry flags");
}

#[test]
fn scrape_order_does_not_change_the_view() {
    let a = current("agent-a");
    let b = ok(
        "agent-b",
        gate(
            "p-old",
            MANAGED,
            ("grok-4.6", "low"),
            &[("j", "m", 1.0, &[])],
        ),
    );
    let c = PodScrape {
        pod: "agent-c".into(),
        outcome: Err(ScrapeFailure::Unauthorized),
    };
    let one = aggregate(3, &[a.clone(), b.clone(), c.clone()], &expected());
    let two = aggregate(3, &[c, b, a], &expected());
    assert_eq!(
        one, two,
        "the view must not depend on the order answers arrive in"
    );
}

#[test]
fn pins_come_from_the_managed_config() {
    let cases = [
        (json!({}), None, None),
        (json!({"model": "grok-4.6"}), Some("grok-4.6"), None),
        (
            json!({"model": {"default": "m1"}, "agent": {"reasoning_effort": "high"}}),
            Some("m1"),
            Some("high"),
        ),
        (
            json!({"model": {"default": ""}, "agent": {"reasoning_effort": ""}}),
            None,
            None,
        ),
    ];
    for (managed, model, effort) in cases {
        let pins = pins_from_managed(managed.as_object());
        let main = pins.get("main").cloned().unwrap_or_default();
        assert_eq!(
            (main.model.as_deref(), main.reasoning_effort.as_deref()),
            (model, effort),
            "pins of {managed}"
        );
    }
    let pins = pins_from_managed(json!({"delegation": {"model": "d1"}}).as_object());
    assert_eq!(
        pins.get("delegation").and_then(|p| p.model.as_deref()),
        Some("d1"),
        "delegation.model must pin the delegation role"
    );
}

#[test]
fn a_job_over_the_cost_ceiling_is_flagged_and_one_at_it_is_not() {
    let mut e = expected();
    e.max_cost_per_job_per_day = Some(2.0);
    let a = gate(
        POLICY,
        MANAGED,
        ("grok-4.6", "high"),
        &[
            ("costly", "grok-4.6", 2.01, &[]),
            ("at-ceiling", "grok-4.6", 2.0, &[]),
            ("cheap", "grok-4.6", 0.1, &["mostly_empty"]),
        ],
    );
    let view = aggregate(1, &[ok("agent-a", a)], &e);
    let flags: Vec<(&str, Vec<&str>)> = view
        .cron_jobs
        .iter()
        .map(|j| (j.job.as_str(), j.flags.iter().map(String::as_str).collect()))
        .collect();
    assert_eq!(
        flags,
        vec![
            ("at-ceiling", vec![]),
            ("cheap", vec!["mostly_empty"]),
            ("costly", vec![OVER_COST_CEILING]),
        ],
        "only the job above the ceiling gains the flag"
    );
    assert_eq!(
        view.flagged, 2,
        "the flagged count includes the ceiling flag"
    );
}

#[test]
fn pods_injected_with_less_capture_than_the_policy_asks_are_named() {
    let pods = vec![
        ("agent-off".to_string(), Some("off".to_string())),
        ("agent-proxy".to_string(), Some("proxy".to_string())),
        (
            "agent-transparent".to_string(),
            Some("transparent".to_string()),
        ),
        ("agent-older".to_string(), None),
    ];
    assert_eq!(injected_below(&pods, EgressMode::Proxy), ["agent-off"]);
    assert_eq!(
        injected_below(&pods, EgressMode::Transparent),
        ["agent-off", "agent-proxy"]
    );
    assert!(injected_below(&pods, EgressMode::Off).is_empty());

    let mut view = aggregate(1, &[current("agent-off")], &expected());
    assert!(view.propagated.ok);
    check_capture(&mut view, &["agent-off".to_string()], EgressMode::Proxy);
    assert!(!view.propagated.ok);
    assert_eq!(view.propagated.reason, "CaptureBelowPolicy");
    assert!(view.propagated.message.contains("agent-off"));
}

#[test]
fn a_large_fleet_lists_the_flagged_and_costliest_jobs_and_counts_every_one() {
    // 300 pods, two jobs each: "cheap" (1 cent; flagged on every tenth pod) and "dear"
    // (cost rising with the pod number).
    let scrapes: Vec<PodScrape> = (0..300)
        .map(|i| {
            let flags: &[&str] = if i % 10 == 0 { &["mostly_empty"] } else { &[] };
            let dear = 1.0 + f64::from(i) / 100.0;
            ok(
                &format!("agent-{i:03}"),
                gate(
                    POLICY,
                    MANAGED,
                    ("grok-4.6", "high"),
                    &[
                        ("cheap", "grok-4.6", 0.01, flags),
                        ("dear", "grok-4.6", dear, &[]),
                    ],
                ),
            )
        })
        .collect();
    let view = aggregate(300, &scrapes, &expected());
    assert_eq!(view.cron_job_count, 600);
    assert_eq!(view.cron_jobs.len(), MAX_LISTED_JOBS);
    assert_eq!(view.flagged, 30, "the count covers every job");
    let listed_flagged = view
        .cron_jobs
        .iter()
        .filter(|j| !j.flags.is_empty())
        .count();
    assert_eq!(listed_flagged, 30, "every flagged job is listed");
    let cheapest_dear = view
        .cron_jobs
        .iter()
        .filter(|j| j.job == "dear")
        .map(|j| j.cost_per_day)
        .fold(f64::INFINITY, f64::min);
    assert!(
        (cheapest_dear - 2.3).abs() < 1e-9,
        "the 170 costliest unflagged jobs are listed (from 2.30 up), got {cheapest_dear}"
    );
    let total: f64 = (0..300).map(|i| 0.01 + 1.0 + f64::from(i) / 100.0).sum();
    assert!((view.total_cost_per_day - (total * 100.0).round() / 100.0).abs() < 1e-9);
    let tier = &view.observed_tiers[0];
    assert_eq!(tier.pod_count, 300);
    assert_eq!(tier.pods.len(), MAX_LISTED_PODS);
}

#[test]
fn folding_answers_as_they_land_gives_the_view_of_the_sorted_answers() {
    // Many pods, with jobs, tiers, failures and spend whose float sum depends on its order.
    let scrapes: Vec<PodScrape> = (0..300_usize)
        .map(|i| {
            let pod = format!("agent-{i:03}");
            if i % 11 == 0 {
                return PodScrape {
                    pod,
                    outcome: Err(ScrapeFailure::Timeout),
                };
            }
            let policy = if i % 7 == 0 { "p-old" } else { POLICY };
            let effort = if i % 3 == 0 { "low" } else { "high" };
            let cost = (i % 13) as f64 * 0.137;
            let mut g = gate(
                policy,
                MANAGED,
                ("grok-4.6", effort),
                &[("a", "m", cost, &[]), ("b", "m", 0.01, &["mostly_empty"])],
            );
            g.llm_spend = Some(crate::budgets::GateSpend {
                day: "2026-12-07".into(),
                usd: BTreeMap::from([("main".to_string(), 0.1 + i as f64 * 1e-3)]),
            });
            ok(&pod, g)
        })
        .collect();
    let sorted = aggregate(300, &scrapes, &expected());
    // A fixed shuffle: every 7th answer first, walking the list 7 times.
    let e = expected();
    let mut fold = Aggregator::new(300, &e);
    let mut shuffled = Aggregator::new(300, &e);
    for start in 0..7 {
        for s in scrapes.iter().skip(start).step_by(7) {
            shuffled.add(s);
        }
    }
    for s in scrapes.iter().rev() {
        fold.add(s);
    }
    assert_eq!(shuffled.finish(), sorted);
    assert_eq!(fold.finish(), sorted);
    assert_eq!(sorted.pods.reporting, 272);
    assert_eq!(sorted.cron_job_count, 544);
}
