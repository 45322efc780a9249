use super::*;
use crate::policy::llm::spend::{RawBudget, RawBudgets, RawExhausted, validate_budgets};

/// 2026-12-07T12:00:00Z.
const NOON: u64 = 1_796_644_800;

fn budgets(role: &str, daily_usd: Option<f64>, tpm: Option<u64>) -> Budgets {
    let mut raw = RawBudgets::default();
    raw.pod.insert(
        role.into(),
        RawBudget {
            daily_usd,
            tokens_per_minute: tpm,
        },
    );
    validate_budgets(&raw, &mut |f, m| panic!("{f}: {m}"))
}

fn charge(usd: f64, tokens: u64) -> Charge {
    Charge {
        usd: Some(usd),
        tokens: Some(tokens),
    }
}

#[test]
fn the_day_is_the_utc_day() {
    assert_eq!(utc_day(NOON), "2026-12-07");
    assert_eq!(utc_day(NOON + 12 * 3600 - 1), "2026-12-07");
    assert_eq!(utc_day(NOON + 12 * 3600), "2026-12-08");
}

#[test]
fn a_daily_cap_refuses_once_reached_and_frees_at_the_next_utc_day() {
    let b = budgets("cron", Some(1.0), None);
    let l = SpendLedger::in_memory();
    assert_eq!(l.check("cron", &b, NOON), Ok(()));
    l.record("cron", charge(0.6, 10), NOON);
    assert_eq!(l.check("cron", &b, NOON), Ok(()), "0.6 of 1.0");
    l.record("cron", charge(0.6, 10), NOON + 1);
    let over = l.check("cron", &b, NOON + 2).unwrap_err();
    assert_eq!(
        (over.scope, over.limit, over.role.as_str()),
        ("pod", "daily_usd", "cron")
    );
    assert!(
        (over.used - 1.2).abs() < 1e-9 && over.cap == 1.0,
        "{over:?}"
    );
    assert_eq!(over.retry_after, 12 * 3600 - 2, "until 00:00 UTC");
    assert_eq!(
        l.check("main", &b, NOON + 2),
        Ok(()),
        "another role has no budget"
    );
    assert_eq!(
        l.check("cron", &b, NOON + 12 * 3600),
        Ok(()),
        "the next day"
    );
    assert_eq!(l.snapshot(NOON + 12 * 3600).roles.get("cron"), None);
}

#[test]
fn tokens_per_minute_is_a_rolling_minute() {
    let b = budgets("auxiliary", None, Some(100));
    let l = SpendLedger::in_memory();
    l.record("auxiliary:vision", charge(0.0, 60), NOON);
    l.record("auxiliary:title", charge(0.0, 40), NOON + 30);
    let over = l.check("auxiliary:compression", &b, NOON + 31).unwrap_err();
    assert_eq!(
        (over.limit, over.used, over.retry_after),
        ("tokens_per_minute", 100.0, 29)
    );
    assert_eq!(
        l.check("auxiliary:vision", &b, NOON + 60),
        Ok(()),
        "the first call left the window"
    );
    assert_eq!(l.snapshot(NOON + 60).tokens_last_minute["auxiliary"], 40);
}

#[test]
fn unknown_usage_and_unpriced_models_are_counted_not_guessed() {
    let l = SpendLedger::in_memory();
    l.record("main", Charge::default(), NOON);
    l.record(
        "main",
        Charge {
            usd: None,
            tokens: Some(30),
        },
        NOON,
    );
    l.record("main", charge(0.25, 10), NOON);
    let s = l.snapshot(NOON);
    assert_eq!(
        s.roles["main"],
        RoleSpend {
            usd: 0.25,
            tokens: 40,
            calls: 3,
            unknown_usage: 1,
            unpriced: 1
        }
    );
}

#[test]
fn the_namespace_budget_is_spent_when_the_controller_says_so_for_today() {
    let mut raw = RawBudgets::default();
    raw.namespace.insert(
        "cron".into(),
        RawBudget {
            daily_usd: Some(5.0),
            tokens_per_minute: None,
        },
    );
    raw.exhausted = Some(RawExhausted {
        day: "2026-12-07".into(),
        roles: vec!["cron".into()],
    });
    let b = validate_budgets(&raw, &mut |f, m| panic!("{f}: {m}"));
    let l = SpendLedger::in_memory();
    let over = l.check("cron", &b, NOON).unwrap_err();
    assert_eq!(
        (over.scope, over.limit, over.cap),
        ("namespace", "daily_usd", 5.0)
    );
    assert_eq!(
        l.check("cron", &b, NOON + 86_400),
        Ok(()),
        "yesterday's list"
    );
}

#[test]
fn spend_survives_a_restart_and_an_unreadable_file_keeps_the_stricter_state() {
    let dir = std::env::temp_dir().join(format!("fleetgate-spend-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("llm/spend.json");
    let b = budgets("main", Some(1.0), None);
    let (l, problem) = SpendLedger::open(&path, NOON);
    assert_eq!(problem, None, "a missing file is a fresh day");
    l.record("main", charge(0.4, 10), NOON);
    l.flush().expect("written");
    let (again, problem) = SpendLedger::open(&path, NOON + 5);
    assert_eq!(problem, None);
    assert_eq!(
        again.snapshot(NOON + 5).roles["main"].usd,
        0.4,
        "kept across the restart"
    );
    let (tomorrow, _) = SpendLedger::open(&path, NOON + 86_400);
    assert!(
        tomorrow.snapshot(NOON + 86_400).roles.is_empty(),
        "another day starts fresh"
    );

    std::fs::write(
        &path,
        b"{\"version\":1,\"day\":\"2026-12-07\",\"roles\":{\"main\":",
    )
    .unwrap();
    let (broken, problem) = SpendLedger::open(&path, NOON + 10);
    assert!(problem.is_some(), "a torn file is an error");
    let over = broken.check("main", &b, NOON + 10).unwrap_err();
    assert_eq!(over.limit, "spend_file_unreadable");
    let tpm_only = budgets("main", None, Some(1000));
    assert_eq!(
        broken.check("main", &tpm_only, NOON + 10),
        Ok(()),
        "no dollar budget to keep"
    );
    broken.flush().expect("the penalty is written");
    let (restarted, problem) = SpendLedger::open(&path, NOON + 20);
    assert_eq!(problem, None);
    assert_eq!(
        restarted.check("main", &b, NOON + 20).map_err(|e| e.limit),
        Err("spend_file_unreadable"),
        "a restart does not clear the penalty the same day"
    );
    assert_eq!(
        restarted.check("main", &b, NOON + 86_400),
        Ok(()),
        "the next day does"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
