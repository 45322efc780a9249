use super::*;

const FILE: &str = r#"{
  "main": {"model": "grok-4.6", "reasoning_effort": "high", "service_tier": "priority",
           "response_service_tier": "priority", "ts": "2026-10-04T14:41:05Z"},
  "auxiliary:title_generation": {"model": "grok-4.6", "reasoning_effort": "none",
           "service_tier": null, "response_service_tier": null, "ts": "2026-10-04T14:41:05Z"},
  "cron": {"model": "m", "extra": 1},
  "junk": 5
}"#;

fn entry(model: &str, ts: Option<&str>) -> RoleObservation {
    RoleObservation {
        model: Some(model.to_string()),
        ts: ts.map(str::to_string),
        ..RoleObservation::default()
    }
}

#[test]
fn the_observer_file_reads_in_order_and_serialises_back_to_the_same_shape() {
    let observed = Observed::from_json(FILE).expect("the observer file must parse");
    let roles: Vec<&str> = observed.roles().map(|(r, _)| r).collect();
    assert_eq!(
        roles,
        ["main", "auxiliary:title_generation", "cron"],
        "non-objects are skipped"
    );
    let json = serde_json::to_string(&observed).expect("must serialise");
    let want = r#"{"main":{"model":"grok-4.6","reasoning_effort":"high","service_tier":"priority","response_service_tier":"priority","ts":"2026-10-04T14:41:05Z"},"auxiliary:title_generation":{"model":"grok-4.6","reasoning_effort":"none","service_tier":null,"response_service_tier":null,"ts":"2026-10-04T14:41:05Z"},"cron":{"model":"m","reasoning_effort":null,"service_tier":null,"response_service_tier":null,"ts":null}}"#;
    assert_eq!(json, want, "keys and order must match the contract");
    let wrapped = Observed::from_json(r#"{"roles": {"main": {"model": "x"}}}"#).expect("wrapped");
    assert_eq!(
        wrapped.get("main").and_then(|o| o.model.as_deref()),
        Some("x"),
        "roles wrapper"
    );
    assert!(
        Observed::from_json("[1]").is_err(),
        "a list is not an observer file"
    );
}

#[test]
fn merging_keeps_the_newest_entry_per_role() {
    let cases = [
        (
            "theirs newer",
            Some("2026-10-04T10:00:00Z"),
            Some("2026-10-04T11:00:00Z"),
            "theirs",
        ),
        (
            "ours newer",
            Some("2026-10-04T12:00:00+00:00"),
            Some("2026-10-04T13:00:00+02:00"),
            "ours",
        ),
        (
            "tie goes to theirs",
            Some("2026-10-04T10:00:00Z"),
            Some("2026-10-04T10:00:00Z"),
            "theirs",
        ),
        (
            "only ours dated",
            Some("2026-10-04T10:00:00Z"),
            None,
            "ours",
        ),
        ("neither dated", None, Some("garbage"), "theirs"),
    ];
    for (why, ours_ts, theirs_ts, want) in cases {
        let mut ours = Observed::default();
        ours.insert("main".into(), entry("ours", ours_ts));
        ours.insert("cron".into(), entry("kept", None));
        let mut theirs = Observed::default();
        theirs.insert("main".into(), entry("theirs", theirs_ts));
        theirs.insert("delegation".into(), entry("added", None));
        ours.merge(theirs);
        let got = ours.get("main").and_then(|o| o.model.clone());
        assert_eq!(got.as_deref(), Some(want), "{why}");
        let roles: Vec<&str> = ours.roles().map(|(r, _)| r).collect();
        assert_eq!(
            roles,
            ["main", "cron", "delegation"],
            "{why}: other roles kept and added"
        );
    }
}
