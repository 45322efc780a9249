use super::*;

fn v(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

/// Name, seen, current, maxSeen, expected new ids, expected stored ids.
type MergeCase = (
    &'static str,
    Vec<String>,
    Vec<String>,
    usize,
    Vec<String>,
    Vec<String>,
);

#[test]
fn merge_reports_new_ids_and_bounds_the_store() {
    let cases: Vec<MergeCase> = vec![
        (
            "nothing new",
            v(&["a", "b"]),
            v(&["b", "a"]),
            10,
            v(&[]),
            v(&["a", "b"]),
        ),
        (
            "one new id",
            v(&["a"]),
            v(&["a", "c"]),
            10,
            v(&["c"]),
            v(&["a", "c"]),
        ),
        (
            "past the bound, ids no longer returned go first even when newer",
            v(&["a", "b", "c"]),
            v(&["a", "d"]),
            3,
            v(&["d"]),
            v(&["a", "c", "d"]),
        ),
        (
            "when everything is still returned, the oldest go",
            v(&["a", "b"]),
            v(&["a", "b", "c", "d"]),
            3,
            v(&["c", "d"]),
            v(&["b", "c", "d"]),
        ),
        (
            "the baseline is bounded too",
            v(&[]),
            v(&["a", "b", "c"]),
            2,
            v(&["a", "b", "c"]),
            v(&["b", "c"]),
        ),
    ];
    for (name, seen, current, max, want_new, want_stored) in cases {
        let (new, stored) = merge(&seen, &current, max);
        assert_eq!(new, want_new, "{name}: new ids must match");
        assert_eq!(stored, want_stored, "{name}: stored ids must match");
    }
}

#[test]
fn state_round_trips_and_a_missing_file_is_no_baseline() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let p = path(dir.path(), "inbox");
    assert!(
        load(&p)
            .expect("a missing file must not be an error")
            .is_none()
    );
    save(&p, "inbox", &v(&["1", "2"]), 42).expect("the state must be written");
    assert_eq!(load(&p).expect("the state must load"), Some(v(&["1", "2"])));
    let leftovers: Vec<_> = std::fs::read_dir(p.parent().expect("state has a folder"))
        .expect("the folder must list")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "no temp file may be left behind");
}

#[test]
fn a_corrupt_state_is_an_error() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let p = path(dir.path(), "inbox");
    std::fs::create_dir_all(p.parent().expect("state has a folder")).expect("mkdir must work");
    for body in [
        "",
        "{not json",
        r#"{"version": 9, "watch": "inbox", "ids": [], "updatedAt": 0}"#,
        "[1,2]",
    ] {
        std::fs::write(&p, body).expect("the file must be written");
        let got = load(&p);
        assert!(
            matches!(got, Err(StateError::Corrupt { .. })),
            "state {body:?} must be refused as corrupt, got {got:?}"
        );
    }
}
