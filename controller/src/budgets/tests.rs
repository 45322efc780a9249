use super::*;
use crate::crd::llm::LlmBudgetSpec;
use serde_json::json;

fn gate(day: &str, roles: &[(&str, f64)]) -> GateSpend {
    let status = json!({"llm": {"spend": {"day": day, "corrupt": false,
        "roles": roles.iter().map(|(r, u)| (r.to_string(), json!({"usd": u, "tokens": 1, "calls": 1}))).collect::<serde_json::Map<_, _>>()}}});
    from_status(&status).expect("a spend object")
}

fn budgets(cron: f64) -> LlmBudgetsSpec {
    LlmBudgetsSpec {
        pod: BTreeMap::new(),
        namespace: BTreeMap::from([(
            "cron".to_string(),
            LlmBudgetSpec {
                daily_usd: Some(cron),
                tokens_per_minute: None,
            },
        )]),
    }
}

#[test]
fn the_gates_spend_of_the_latest_day_is_summed_per_role() {
    let gates = [
        gate("2026-12-07", &[("cron", 1.5), ("main", 0.25)]),
        gate("2026-12-07", &[("cron", 2.0)]),
        gate("2026-12-06", &[("cron", 99.0)]),
    ];
    let spend = sum(&gates).expect("gates");
    assert_eq!(spend.day, "2026-12-07");
    assert_eq!(spend.gates, 2, "a gate still on yesterday is left out");
    assert_eq!(spend.usd["cron"], 3.5);
    assert_eq!(spend.usd["main"], 0.25);
    assert_eq!(sum(&[]), None);
    assert_eq!(
        from_status(&json!({"policy": {}})),
        None,
        "an older gate reports none"
    );
}

#[test]
fn a_role_at_its_namespace_cap_is_spent_and_shows_in_the_status_and_column() {
    let spend = sum(&[gate("2026-12-07", &[("cron", 3.5), ("main", 1.0)])]).unwrap();
    assert!(
        exhausted(&spend, &budgets(4.0)).roles.is_empty(),
        "3.5 of 4"
    );
    let over = exhausted(&spend, &budgets(3.5));
    assert_eq!(
        (over.day.as_str(), over.roles.as_slice()),
        ("2026-12-07", &["cron".to_string()][..])
    );
    let s = status(&spend, Some(&budgets(5.0)));
    assert_eq!(s.roles.len(), 2);
    assert_eq!(
        s.roles[0],
        RoleBudgetStatus {
            role: "cron".into(),
            spent_usd: 3.5,
            daily_usd: Some(5.0),
            exhausted: false
        }
    );
    assert_eq!(column(&s), "cron:$3.50/$5.00");
    let none = status(&spend, None);
    assert_eq!(column(&none), "$4.50", "without a cap, the total");
}

#[test]
fn a_gate_missing_from_a_poll_keeps_its_spend_for_the_day_so_a_spent_role_stays_spent() {
    let cap = budgets(1.0);
    let both = sum(&[
        gate("2026-12-07", &[("cron", 0.6), ("main", 0.1)]),
        gate("2026-12-07", &[("cron", 0.5)]),
    ])
    .expect("gates");
    let first = high_water(None, both);
    assert_eq!(exhausted(&first, &cap).roles, vec!["cron".to_string()]);
    // The second gate misses the next poll: alone, the first is under the cap.
    let one = sum(&[gate("2026-12-07", &[("cron", 0.7)])]).expect("a gate");
    assert!(exhausted(&one, &cap).roles.is_empty(), "the poll alone");
    let kept = high_water(Some(&first), one);
    assert_eq!(kept.gates, 1, "the poll's own gate count");
    assert_eq!(kept.usd["cron"], 1.1, "the day's high-water mark");
    assert_eq!(kept.usd["main"], 0.1, "a role no gate reports now is kept");
    assert_eq!(
        exhausted(&kept, &cap).roles,
        vec!["cron".to_string()],
        "still spent"
    );
    // More spend than ever seen raises the mark.
    let more = sum(&[
        gate("2026-12-07", &[("cron", 0.9)]),
        gate("2026-12-07", &[("cron", 0.5)]),
    ])
    .expect("gates");
    assert_eq!(high_water(Some(&kept), more).usd["cron"], 1.4);
    // A new UTC day starts from what the gates report; a poll of only yesterday's gates keeps
    // today's.
    let tomorrow = sum(&[gate("2026-12-08", &[("cron", 0.01)])]).expect("a gate");
    let next = high_water(Some(&kept), tomorrow);
    assert_eq!((next.day.as_str(), next.usd["cron"]), ("2026-12-08", 0.01));
    let late = sum(&[gate("2026-12-07", &[("cron", 5.0)])]).expect("a gate");
    let still = high_water(Some(&next), late);
    assert_eq!(
        (still.day.as_str(), still.usd["cron"]),
        ("2026-12-08", 0.01)
    );
    // A raised cap serves the role again.
    assert!(exhausted(&kept, &budgets(2.0)).roles.is_empty());
}

#[test]
fn a_status_without_roles_shows_zero_dollars_not_negative_zero() {
    let status = LlmBudgetStatus {
        day: "2026-12-07".into(),
        gates: 1,
        roles: Vec::new(),
    };
    assert_eq!(column(&status), "$0.00");
}
