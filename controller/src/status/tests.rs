use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::desired::render;

fn at(secs: i64) -> Time {
    Time(Timestamp::from_second(secs).expect("a test timestamp must be valid"))
}

fn cond<'a>(s: &'a FleetPolicyStatus, kind: &str) -> &'a Condition {
    s.conditions
        .iter()
        .find(|c| c.type_ == kind)
        .unwrap_or_else(|| panic!("the status must carry {kind}"))
}

fn invalid() -> FleetPolicy {
    FleetPolicy::test().with_spec(|s| s.web.char_limit = Some(10))
}

#[test]
fn a_valid_spec_is_valid_and_ready_with_its_hashes() {
    let fp = FleetPolicy::test();
    let rendered = render(&fp);
    let d = rendered.clone().expect("the test policy must render");
    let s = compute(&fp, &rendered, None, &at(1_000));
    let cases = [("Valid", "True", "Rendered"), ("Ready", "True", "Applied")];
    for (kind, status, reason) in cases {
        let c = cond(&s, kind);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            (status, reason),
            "{kind} must be {status}/{reason}"
        );
        assert_eq!(
            c.observed_generation,
            Some(1),
            "{kind} must carry the generation"
        );
    }
    assert_eq!(
        s.observed_generation,
        Some(1),
        "observedGeneration must be the object's generation"
    );
    assert_eq!(
        s.managed_sha256.as_deref(),
        Some(d.managed_sha256.as_str()),
        "the managed hash must be the render's"
    );
    assert_eq!(
        s.policy_sha256.as_deref(),
        Some(d.policy_sha256.as_str()),
        "the policy hash must be the render's"
    );
    assert_eq!(
        s.pinned_keys,
        Some(2),
        "the pinned key count must be the render's"
    );
}

#[test]
fn an_invalid_spec_is_not_valid_and_keeps_the_last_good_hashes() {
    let good = FleetPolicy::test();
    let good_status = compute(&good, &render(&good), None, &at(1_000));
    let mut fp = invalid().with_status(good_status.clone());
    fp.metadata.generation = Some(2);
    let s = compute(&fp, &render(&fp), None, &at(2_000));
    let valid = cond(&s, "Valid");
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("False", "InvalidSpec"),
        "Valid must be False/InvalidSpec"
    );
    assert!(
        valid.message.contains("spec.web.charLimit"),
        "the Valid message must name the field: {}",
        valid.message
    );
    let ready = cond(&s, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "KeptLastGood"),
        "Ready must say the last good ConfigMap stays"
    );
    assert_eq!(
        s.policy_sha256, good_status.policy_sha256,
        "the last good policy hash must stay"
    );
    assert_eq!(
        s.managed_sha256, good_status.managed_sha256,
        "the last good managed hash must stay"
    );
    assert_eq!(
        s.observed_generation,
        Some(2),
        "observedGeneration must follow the object even when invalid"
    );
}

#[test]
fn transition_time_moves_only_when_the_status_flips() {
    let fp = FleetPolicy::test();
    let first = compute(&fp, &render(&fp), None, &at(1_000));
    let same = compute(
        &fp.clone().with_status(first.clone()),
        &render(&fp),
        None,
        &at(5_000),
    );
    assert_eq!(
        cond(&same, "Valid").last_transition_time,
        at(1_000),
        "an unchanged condition must keep its time"
    );
    let bad = invalid().with_status(first);
    let flipped = compute(&bad, &render(&bad), None, &at(9_000));
    assert_eq!(
        cond(&flipped, "Valid").last_transition_time,
        at(9_000),
        "a flipped condition must take the new time"
    );
}

#[test]
fn a_computed_status_is_a_fixed_point() {
    let fp = FleetPolicy::test();
    let s = compute(&fp, &render(&fp), None, &at(1_000));
    assert!(
        !unchanged(&fp, &s),
        "an object without status must need a write"
    );
    let stored = fp.clone().with_status(s);
    let again = compute(&stored, &render(&stored), None, &at(2_000));
    assert!(
        unchanged(&stored, &again),
        "recomputing an applied status must need no write"
    );
}

#[test]
fn condition_order_from_the_server_does_not_force_a_write() {
    let fp = FleetPolicy::test();
    let mut s = compute(&fp, &render(&fp), None, &at(1_000));
    s.conditions.reverse();
    let stored = fp.clone().with_status(s);
    let again = compute(&stored, &render(&stored), None, &at(2_000));
    assert!(
        unchanged(&stored, &again),
        "conditions must compare by type, not by position"
    );
}

#[test]
fn scraper_conditions_and_fleet_fields_are_carried_over() {
    let fp = FleetPolicy::test();
    let mut s = compute(&fp, &render(&fp), None, &at(1_000));
    s.conditions.push(Condition {
        type_: "Propagated".into(),
        status: "True".into(),
        reason: "AllCurrent".into(),
        message: "3 of 3 pods run the current policy".into(),
        observed_generation: Some(1),
        last_transition_time: at(500),
    });
    s.total_cost_per_day = Some(4.25);
    let stored = fp.clone().with_status(s);
    let again = compute(&stored, &render(&stored), None, &at(2_000));
    assert_eq!(
        cond(&again, "Propagated").reason,
        "AllCurrent",
        "a scraper condition must be kept"
    );
    assert_eq!(
        again.total_cost_per_day,
        Some(4.25),
        "the scraped cost must be kept"
    );
}

fn fleet_view(propagated: bool) -> crate::fleet::FleetView {
    crate::fleet::FleetView {
        pods: crate::crd::PodCounts {
            selected: 2,
            reporting: 2,
            current: if propagated { 2 } else { 1 },
        },
        observed_tiers: Vec::new(),
        cron_jobs: Vec::new(),
        cron_job_count: 0,
        total_cost_per_day: 3.5,
        flagged: 1,
        llm_spend: None,
        propagated: Verdict {
            ok: propagated,
            reason: if propagated {
                "AllCurrent"
            } else {
                "PodsBehind"
            },
            message: "agent-b".into(),
        },
        drift: Verdict {
            ok: false,
            reason: "NoDrift",
            message: "none".into(),
        },
    }
}

#[test]
fn a_fleet_view_fills_the_fleet_fields_and_gates_ready() {
    let fp = FleetPolicy::test();
    let cases = [(true, "True", "Applied"), (false, "False", "PodsBehind")];
    for (propagated, ready_status, ready_reason) in cases {
        let s = compute(&fp, &render(&fp), Some(&fleet_view(propagated)), &at(1_000));
        let ready = cond(&s, "Ready");
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            (ready_status, ready_reason),
            "Ready must follow propagation ({propagated})"
        );
        assert_eq!(
            cond(&s, "Drift").status,
            "False",
            "Drift must be written from the view"
        );
        assert_eq!(
            s.pods.as_ref().map(|p| p.selected),
            Some(2),
            "pod counts must be written"
        );
        assert_eq!(
            (s.total_cost_per_day, s.flagged),
            (Some(3.5), Some(1)),
            "cost and flagged must be written"
        );
    }
}

#[test]
fn the_namespace_llm_spend_and_the_budget_column_come_from_the_gates() {
    use crate::crd::llm::{LlmBudgetSpec, LlmBudgetsSpec, LlmSpec};
    let fp = FleetPolicy::test().with_spec(|s| {
        s.llm = Some(LlmSpec {
            budgets: Some(LlmBudgetsSpec {
                pod: Default::default(),
                namespace: [(
                    "cron".to_string(),
                    LlmBudgetSpec {
                        daily_usd: Some(4.0),
                        tokens_per_minute: None,
                    },
                )]
                .into(),
            }),
            ..LlmSpec::default()
        })
    });
    let mut view = fleet_view(true);
    view.llm_spend = Some(crate::budgets::NamespaceSpend {
        day: "2026-12-07".into(),
        usd: [("cron".to_string(), 4.004), ("main".to_string(), 0.5)].into(),
        gates: 2,
    });
    let rendered = crate::desired::render(&fp);
    let status = compute(&fp, &rendered, Some(&view), &at(1_000));
    let spend = status.llm_spend.expect("the spend is shown");
    assert_eq!((spend.day.as_str(), spend.gates), ("2026-12-07", 2));
    let cron = spend.roles.iter().find(|r| r.role == "cron").expect("cron");
    assert!(
        cron.exhausted && cron.spent_usd == 4.0 && cron.daily_usd == Some(4.0),
        "{cron:?}"
    );
    assert_eq!(status.budget.as_deref(), Some("cron:$4.00/$4.00"));
}

#[test]
fn the_written_digest_tells_statuses_apart_as_same_but_times_does() {
    let fp = FleetPolicy::test();
    let first = compute(&fp, &render(&fp), Some(&fleet_view(true)), &at(1_000));
    // Stamped later, conditions in another order: the same status but for its times.
    let mut later = compute(&fp, &render(&fp), Some(&fleet_view(true)), &at(9_000));
    later.conditions.reverse();
    assert!(same_but_times(&first, &later));
    assert_eq!(digest_but_times(&first), digest_but_times(&later));
    // Any other difference tells them apart.
    let behind = compute(&fp, &render(&fp), Some(&fleet_view(false)), &at(1_000));
    assert!(!same_but_times(&first, &behind));
    assert_ne!(digest_but_times(&first), digest_but_times(&behind));
    let bad = invalid();
    let invalid = compute(&bad, &render(&bad), None, &at(1_000));
    assert!(!same_but_times(&first, &invalid));
    assert_ne!(digest_but_times(&first), digest_but_times(&invalid));
    let mut cheaper = first.clone();
    cheaper.total_cost_per_day = cheaper.total_cost_per_day.map(|c| c + 0.01);
    assert_ne!(digest_but_times(&first), digest_but_times(&cheaper));
}
