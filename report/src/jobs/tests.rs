use std::path::Path;

use super::*;

fn home_with(jobs_json: &[u8]) -> tempfile::TempDir {
    let home = tempfile::tempdir().expect("a temp home must be created");
    std::fs::create_dir(home.path().join("cron")).expect("cron dir must be created");
    std::fs::write(home.path().join("cron").join("jobs.json"), jobs_json).expect("write jobs");
    home
}

fn ids(home: &Path) -> Vec<String> {
    load_jobs(home)
        .expect("the store must read")
        .into_iter()
        .map(|j| j.id)
        .collect()
}

#[test]
fn every_accepted_top_level_shape_lists_the_jobs_in_order() {
    let cases: [(&str, &[u8], &[&str]); 6] = [
        (
            "canonical object",
            br#"{"jobs": [{"id": "a"}, {"id": "b"}], "updated_at": "x"}"#,
            &["a", "b"],
        ),
        ("bare list", br#"[{"id": "a"}, {"id": "b"}]"#, &["a", "b"]),
        (
            "id-keyed map, inline id wins",
            br#"{"jobs": {"k1": {"id": "a"}, "b": {}}}"#,
            &["a", "b"],
        ),
        (
            "BOM before the object",
            b"\xef\xbb\xbf{\"jobs\": [{\"id\": \"a\"}]}",
            &["a"],
        ),
        (
            "raw control char in a string",
            b"{\"jobs\": [{\"id\": \"a\", \"prompt\": \"x\ty\"}]}",
            &["a"],
        ),
        (
            "non-object entries skipped, job_id accepted",
            br#"{"jobs": [1, "x", {"job_id": "c"}]}"#,
            &["c"],
        ),
    ];
    for (why, json, want) in cases {
        let home = home_with(json);
        assert_eq!(ids(home.path()), want, "{why} must list {want:?}");
    }
}

#[test]
fn a_missing_store_means_no_jobs_and_a_corrupt_one_is_an_error() {
    let home = tempfile::tempdir().expect("a temp home must be created");
    assert!(
        ids(home.path()).is_empty(),
        "no jobs.json must mean no jobs"
    );
    let corrupt: [(&str, &[u8]); 4] = [
        ("truncated JSON", br#"{"jobs": [{"id": "a""#),
        ("a string at the top", br#""jobs""#),
        ("jobs is a number", br#"{"jobs": 3}"#),
        ("not text at all", b"\x00\x01\x02\xff"),
    ];
    for (why, json) in corrupt {
        let home = home_with(json);
        let result = load_jobs(home.path());
        assert!(result.is_err(), "{why} must be an error, got {result:?}");
    }
}

#[test]
fn records_are_normalised_like_hermes_list_jobs() {
    let json = br#"{"jobs": [
      {"id": "paused1", "name": "  ", "prompt": "Check the inbox and summarise every new message for me please, thanks",
       "enabled": false, "schedule": {"kind": "interval", "minutes": 15, "display": "every 15m"}},
      {"id": "pmark", "name": "marker", "enabled": true, "paused_at": "2026-09-01T00:00:00+00:00",
       "schedule_display": "0 9 * * *", "script": "x.sh", "no_agent": true},
      {"id": "mon", "name": "m", "monitor_url": "https://example.org", "script": "s.sh",
       "created_at": "2026-09-20T10:00:00+02:00", "failure_streak": 3, "last_status": "error",
       "model": "m1", "provider": "p1", "reasoning_effort": "xhigh"},
      {"id": "scr", "name": "s", "script": "gate.py", "schedule": "weird"},
      {"id": "plain", "skills": ["daily-brief"]}
    ]}"#;
    let home = home_with(json);
    let jobs = load_jobs(home.path()).expect("the store must read");
    let by = |id: &str| {
        jobs.iter()
            .find(|j| j.id == id)
            .expect("the job must be listed")
            .clone()
    };
    let paused = by("paused1");
    assert_eq!(
        paused.name, "Check the inbox and summarise every new message fo",
        "50-char label"
    );
    assert_eq!(
        (paused.enabled, paused.state.as_str()),
        (false, "paused"),
        "disabled is paused"
    );
    assert_eq!(
        paused.schedule, "every 15m",
        "the schedule display must come from the schedule"
    );
    assert_eq!(paused.gate, None, "a plain prompt job has no gate");
    let marker = by("pmark");
    assert!(!marker.enabled, "a pause marker must count as not enabled");
    assert_eq!(
        marker.gate,
        Some(Gate::NoAgent),
        "no_agent wins over script"
    );
    assert_eq!(
        marker.schedule, "0 9 * * *",
        "schedule_display is used as-is"
    );
    let monitor = by("mon");
    assert_eq!(
        monitor.gate,
        Some(Gate::Monitor),
        "a monitor wins over a pre-run script"
    );
    assert_eq!(
        monitor.created_at,
        Some(1_789_891_200.0),
        "created_at must be read with its offset"
    );
    assert_eq!(
        (monitor.failure_streak, monitor.last_status.as_deref()),
        (3, Some("error")),
        "status"
    );
    assert_eq!(
        monitor.reasoning_effort.as_deref(),
        Some("xhigh"),
        "effort pin must be read"
    );
    assert_eq!(by("scr").gate, Some(Gate::Script), "a pre-run script gates");
    assert_eq!(
        by("scr").schedule,
        "weird",
        "a non-object schedule is shown as text"
    );
    assert_eq!(
        by("plain").name,
        "daily-brief",
        "the first skill names a nameless job"
    );
    assert!(
        by("plain").enabled,
        "a job without an enabled key is enabled"
    );
}
