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
    assert_eq!(turns.len(), 2, "only roots inside the window count: {turns:?}");
    let first = &turns.iter().find(|t| t.started_at == 100.0).expect("the first turn");
    assert_eq!(first.job_id, "j1", "the job id comes from the session id");
    assert_eq!(first.tokens, 25, "the child's tokens belong to the root's lineage");
    assert_eq!(first.cost_usd, 0.0, "no cost columns means zero cost");
    assert_eq!(first.reply, FinalReply::Text("  [SILENT] ".into()), "the final reply is kept raw");
    let second = turns.iter().find(|t| t.started_at == 200.0).expect("the second turn");
    assert_eq!(second.reply, FinalReply::Interrupted, "a trailing tool call is no reply");
}

#[test]
fn a_database_without_sessions_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let path = dir.path().join("state.db");
    Connection::open(&path)
        .and_then(|c| c.execute_batch("CREATE TABLE other(x)"))
        .expect("the fixture must be written");
    let result = read_turns(&path, 0.0, 1.0, BUSY);
    assert!(matches!(result, Err(DbError::Sqlite { .. })), "got {result:?}");
}
