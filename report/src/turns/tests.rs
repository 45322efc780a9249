use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;

use super::*;

const BUSY: Duration = Duration::from_millis(200);

#[test]
fn cron_session_ids_give_their_job_id_parsed_from_the_right() {
    let cases = [
        ("cron_a1b2c3d4e5f6_20260927_030000", Some("a1b2c3d4e5f6")),
        ("cron_my_job_20260927_030000", Some("my_job")),
        ("cron__20260927_030000", None),
        ("cron_a1b2_20260927_0300000", None),
        ("cron_a1b2_2026092x_030000", None),
        ("cron_a1b2_20260927-030000", None),
        ("session_20260927_030000", None),
        ("cron_", None),
        ("cron_é_20260927_030000", Some("é")),
    ];
    for (id, want) in cases {
        assert_eq!(cron_job_id(id), want, "{id} must give {want:?}");
    }
}

/// A version-2 era `state.db`: no cost, cache or usage columns, no usage table.
fn legacy_db(path: &Path) {
    let conn = Connection::open(path).expect("the fixture must open");
    conn.execute_batch(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, model TEXT,
           parent_session_id TEXT, started_at REAL NOT NULL, ended_at REAL, end_reason TEXT,
           input_tokens INTEGER DEFAULT 0, output_tokens INTEGER DEFAULT 0);
         CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
           role TEXT NOT NULL, content TEXT, tool_calls TEXT, timestamp REAL NOT NULL);
         INSERT INTO sessions VALUES ('cron_j1_20260927_030000', 'cron', 'm', NULL, 100.0, 110.0,
           'cron_complete', 10, 5);
         INSERT INTO sessions VALUES ('child', 'subagent', 'm', 'cron_j1_20260927_030000', 101.0,
           105.0, NULL, 7, 3);
         INSERT INTO sessions VALUES ('cron_j1_20260927_040000', 'cron', 'm', NULL, 200.0, NULL,
           NULL, 1, 1);
         INSERT INTO sessions VALUES ('cron_j1_20260920_040000', 'cron', 'm', NULL, 5.0, NULL,
           NULL, 1, 1);
         INSERT INTO messages (session_id, role, content, tool_calls, timestamp)
           VALUES ('cron_j1_20260927_030000', 'user', 'go', NULL, 100.0),
                  ('cron_j1_20260927_030000', 'assistant', '  [SILENT] ', NULL, 109.0),
                  ('cron_j1_20260927_040000', 'assistant', '', '[{\"id\": 1}]', 201.0);",
    )
    .expect("the legacy fixture must be written");
}

#[test]
fn a_legacy_schema_reads_with_zero_cost_and_probed_columns() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let path = dir.path().join("state.db");
    legacy_db(&path);
    let turns = read_turns(&path, 50.0, 1000.0, BUSY).expect("a legacy schema must read");
    assert_eq!(
        turns.len(),
        2,
        "only roots inside the window count: {turns:?}"
    );
    let first = &turns
        .iter()
        .find(|t| t.started_at == 100.0)
        .expect("the first turn");
    assert_eq!(first.job_id, "j1", "the job id comes from the session id");
    assert_eq!(
        first.tokens, 25,
        "the child's tokens belong to the root's lineage"
    );
    assert_eq!(first.cost_usd(), 0.0, "no cost columns means zero cost");
    assert_eq!(
        first.reply,
        FinalReply::Text("  [SILENT] ".into()),
        "the final reply is kept raw"
    );
    let second = turns
        .iter()
        .find(|t| t.started_at == 200.0)
        .expect("the second turn");
    assert_eq!(
        second.reply,
        FinalReply::Interrupted,
        "a trailing tool call is no reply"
    );
}

#[test]
fn a_database_without_sessions_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let path = dir.path().join("state.db");
    Connection::open(&path)
        .and_then(|c| c.execute_batch("CREATE TABLE other(x)"))
        .expect("the fixture must be written");
    let result = read_turns(&path, 0.0, 1.0, BUSY);
    assert!(
        matches!(result, Err(DbError::Sqlite { .. })),
        "got {result:?}"
    );
}

/// A current-schema `state.db` with a compressed (rotated) run and an archived last message.
fn current_db(path: &Path) {
    let conn = Connection::open(path).expect("the fixture must open");
    conn.execute_batch(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, parent_session_id TEXT,
           started_at REAL NOT NULL, end_reason TEXT, input_tokens INTEGER DEFAULT 0,
           output_tokens INTEGER DEFAULT 0, cache_read_tokens INTEGER DEFAULT 0,
           cache_write_tokens INTEGER DEFAULT 0, estimated_cost_usd REAL, actual_cost_usd REAL);
         CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
           role TEXT NOT NULL, content TEXT, tool_calls TEXT, timestamp REAL NOT NULL,
           active INTEGER NOT NULL DEFAULT 1);
         CREATE TABLE session_model_usage (session_id TEXT NOT NULL, model TEXT NOT NULL,
           task TEXT NOT NULL DEFAULT '', input_tokens INTEGER NOT NULL DEFAULT 0,
           output_tokens INTEGER NOT NULL DEFAULT 0, estimated_cost_usd REAL NOT NULL DEFAULT 0,
           actual_cost_usd REAL NOT NULL DEFAULT 0, last_seen REAL);
         INSERT INTO sessions VALUES ('cron_rot_20260927_030000', 'cron', NULL, 100.0,
           'compression', 10, 0, 0, 0, 0.5, NULL);
         INSERT INTO sessions VALUES ('cont1', 'cron', 'cron_rot_20260927_030000', 150.0,
           NULL, 5, 0, 0, 0, 0.25, 0.75);
         INSERT INTO sessions VALUES ('helper', 'subagent', 'cron_rot_20260927_030000', 120.0,
           NULL, 1, 0, 0, 0, 0.125, NULL);
         INSERT INTO sessions VALUES ('cron_arc_20260927_040000', 'cron', NULL, 300.0, NULL,
           0, 0, 0, 0, NULL, NULL);
         INSERT INTO messages (session_id, role, content, tool_calls, timestamp, active) VALUES
           ('cron_rot_20260927_030000', 'assistant', '', '[{\"id\": 1}]', 101.0, 1),
           ('helper', 'assistant', 'sub-agent answer', NULL, 121.0, 1),
           ('cont1', 'assistant', 'NO_REPLY', NULL, 151.0, 1),
           ('cron_arc_20260927_040000', 'assistant', 'Quarterly numbers are in.', NULL, 301.0, 1),
           ('cron_arc_20260927_040000', 'tool', 'archived tool output', NULL, 302.0, 0);
         INSERT INTO session_model_usage VALUES
           ('cron_rot_20260927_030000', 'm', '', 10, 0, 0.5, 0, 101.0),
           ('helper', 'aux', 'compression', 4, 4, 0.0625, 0, 121.0),
           ('cont1', 'aux', 'title_generation', 2, 0, 0.01, 0.03125, 151.0),
           ('cron_arc_20260927_040000', 'aux', 'vision', 100, 0, 9.0, 0, 10.0);",
    )
    .expect("the current fixture must be written");
}

#[test]
fn a_rotated_run_is_read_at_its_compression_tip_with_its_whole_lineage() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let path = dir.path().join("state.db");
    current_db(&path);
    let turns = read_turns(&path, 50.0, 1000.0, BUSY).expect("the current schema must read");
    let ids: Vec<&str> = turns.iter().map(|t| t.session_id.as_str()).collect();
    assert_eq!(
        ids,
        ["cron_rot_20260927_030000", "cron_arc_20260927_040000"],
        "roots in order"
    );
    let rotated = &turns[0];
    assert_eq!(
        rotated.reply,
        FinalReply::Text("NO_REPLY".into()),
        "the tip holds the reply"
    );
    // 0.5 (root) + 0.75 (actual beats estimate) + 0.125 (sub-agent) + 0.0625 + 0.03125 (aux;
    // the billed figure when present); the task='' row duplicates the root and is skipped.
    assert_eq!(rotated.cost_usd(), 1.46875, "lineage cost");
    assert_eq!(rotated.tokens, 10 + 5 + 1 + 8 + 2, "lineage tokens");
    let archived = &turns[1];
    assert_eq!(
        archived.reply,
        FinalReply::Text("Quarterly numbers are in.".into()),
        "an archived last row falls back to the newest active one"
    );
    assert_eq!(
        archived.cost_usd(),
        0.0,
        "usage rows last seen before their session started are not billed"
    );
}

#[test]
fn probing_the_replies_on_two_connections_reads_the_same_turns_as_on_one() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let path = dir.path().join("state.db");
    current_db(&path);
    let conn = Connection::open(&path).expect("the fixture must open");
    // 301 more runs (an odd count, so the halves differ): replies of every kind, some with
    // an archived last row, some with no message at all.
    for i in 0..301 {
        let id = format!("cron_job{}_20260927_{:06}", i % 7, 100_000 + i);
        let at = 400.0 + f64::from(i);
        conn.execute(
            "INSERT INTO sessions (id, source, started_at, input_tokens, estimated_cost_usd) \
             VALUES (?1, 'cron', ?2, ?3, ?4)",
            rusqlite::params![id, at, i, f64::from(i) / 1000.0],
        )
        .expect("a session");
        let (role, content, calls, active) = match i % 5 {
            0 => ("assistant", "[SILENT]", None, 1),
            1 => ("assistant", "Two new items.", None, 1),
            2 => ("assistant", "", Some("[{\"id\": 2}]"), 1),
            3 => ("tool", "archived", None, 0),
            _ => continue,
        };
        if role == "tool" {
            conn.execute(
                "INSERT INTO messages (session_id, role, content, timestamp) \
                 VALUES (?1, 'assistant', 'kept', ?2)",
                rusqlite::params![id, at],
            )
            .expect("a message");
        }
        conn.execute(
            "INSERT INTO messages (session_id, role, content, tool_calls, timestamp, active) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            rusqlite::params![id, role, content, calls, at + 1.0, active],
        )
        .expect("a message");
    }
    drop(conn);
    let one = read_turns_split(&path, 50.0, 1000.0, BUSY, u64::MAX).expect("one connection");
    let two = read_turns_split(&path, 50.0, 1000.0, BUSY, 0).expect("two connections");
    assert_eq!(one.len(), 303);
    assert_eq!(
        one, two,
        "the split probes must give the same turns in the same order"
    );
    let kinds: std::collections::BTreeSet<String> = one
        .iter()
        .map(|t| format!("{:?}", std::mem::discriminant(&t.reply)))
        .collect();
    assert!(kinds.len() >= 3, "the fixture covers several reply kinds");
}
