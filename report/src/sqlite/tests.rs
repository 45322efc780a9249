use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;

use super::*;

const BUSY: Duration = Duration::from_millis(200);

fn listing(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .expect("the directory must be listable")
        .map(|e| {
            e.expect("entries must be readable")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

fn make_db(path: &Path, journal: &str) {
    let conn = Connection::open(path).expect("the fixture database must open");
    conn.pragma_update(None, "journal_mode", journal)
        .expect("the journal mode must be set");
    conn.execute_batch("CREATE TABLE t(x INTEGER, y TEXT); INSERT INTO t VALUES (1, 'a');")
        .expect("the fixture rows must be written");
}

#[test]
fn a_checkpointed_wal_database_opens_immutable_and_creates_no_side_files() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let path = dir.path().join("a.db");
    make_db(&path, "wal");
    let before = listing(dir.path());
    assert_eq!(
        before,
        BTreeSet::from(["a.db".to_string()]),
        "the writer must have checkpointed"
    );
    let (conn, mode) = open_read_only(&path, BUSY).expect("the database must open");
    let x: i64 = conn
        .query_row("SELECT x FROM t", [], |r| r.get(0))
        .expect("rows must read");
    drop(conn);
    assert_eq!(
        (mode, x),
        (OpenMode::Immutable, 1),
        "a closed WAL database must read immutable"
    );
    assert_eq!(
        listing(dir.path()),
        before,
        "no -wal or -shm may be created"
    );
}

#[test]
fn a_rollback_journal_database_opens_read_only_and_creates_no_side_files() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let path = dir.path().join("a.db");
    make_db(&path, "delete");
    let before = listing(dir.path());
    let (conn, mode) = open_read_only(&path, BUSY).expect("the database must open");
    let y: String = conn
        .query_row("SELECT y FROM t", [], |r| r.get(0))
        .expect("rows must read");
    drop(conn);
    assert_eq!(
        (mode, y.as_str()),
        (OpenMode::ReadOnly, "a"),
        "rollback mode must use mode=ro"
    );
    assert_eq!(listing(dir.path()), before, "no journal may be created");
}

#[test]
fn a_live_wal_database_reads_committed_rows_while_a_writer_holds_a_transaction() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let path = dir.path().join("a.db");
    make_db(&path, "wal");
    let writer = Connection::open(&path).expect("the writer must open");
    writer
        .execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (2, 'b');")
        .expect("must write");
    let files = listing(dir.path());
    let (conn, mode) = open_read_only(&path, BUSY).expect("a reader must not be blocked");
    let n: i64 = conn
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .expect("must count");
    assert_eq!(
        (mode, n),
        (OpenMode::ReadOnly, 1),
        "only the committed row may be seen"
    );
    drop(conn);
    assert_eq!(listing(dir.path()), files, "the reader must add no file");
    writer
        .execute_batch("COMMIT")
        .expect("the writer must commit");
}

#[test]
fn a_rollback_database_locked_exclusively_fails_within_the_busy_timeout() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let path = dir.path().join("a.db");
    make_db(&path, "delete");
    let writer = Connection::open(&path).expect("the writer must open");
    writer
        .execute_batch("BEGIN EXCLUSIVE; INSERT INTO t VALUES (2, 'b');")
        .expect("must lock");
    let started = tokio::time::Instant::now();
    let result = open_read_only(&path, BUSY);
    let waited = started.elapsed();
    assert!(
        matches!(result, Err(DbError::Sqlite { .. })),
        "a locked database must be reported, not read: {result:?}"
    );
    assert!(
        waited < Duration::from_secs(3),
        "the read must give up near the timeout: {waited:?}"
    );
    writer
        .execute_batch("ROLLBACK")
        .expect("the writer must roll back");
}

#[test]
fn missing_empty_and_foreign_files_are_classified() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let missing = dir.path().join("missing.db");
    assert!(
        matches!(open_read_only(&missing, BUSY), Err(DbError::Missing(_))),
        "absent file"
    );
    assert!(!missing.exists(), "opening must not create the file");
    let foreign = dir.path().join("foreign.db");
    std::fs::write(&foreign, b"{\"jobs\": []} and more bytes than a header").expect("write");
    assert!(
        matches!(open_read_only(&foreign, BUSY), Err(DbError::NotSqlite(_))),
        "not SQLite"
    );
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").expect("write");
    let (conn, _) = open_read_only(&empty, BUSY).expect("an empty file is an empty database");
    assert!(
        columns(&conn, "sessions")
            .expect("probe must work")
            .is_empty(),
        "no table"
    );
}

#[test]
fn paths_with_uri_special_characters_open() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let odd = dir.path().join("we?ird #dir %41");
    std::fs::create_dir(&odd).expect("the odd directory must be created");
    let path = odd.join("a.db");
    make_db(&path, "delete");
    let (conn, _) = open_read_only(&path, BUSY).expect("an escaped path must open");
    let cols = columns(&conn, "t").expect("the probe must work");
    assert_eq!(cols.len(), 2, "both columns must be found");
    assert_eq!(
        column_or(&cols, "t", "x", "NULL"),
        "t.x",
        "a present column is selected"
    );
    assert_eq!(
        column_or(&cols, "t", "z", "NULL"),
        "NULL",
        "a missing column falls back"
    );
}

#[test]
fn a_wal_file_left_without_its_shm_opens_immutable_without_creating_one() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let live = dir.path().join("live.db");
    make_db(&live, "wal");
    let writer = Connection::open(&live).expect("the writer must open");
    writer
        .execute_batch("INSERT INTO t VALUES (2, 'b')")
        .expect("a committed row in the WAL");
    // What a crash leaves behind: the database and its -wal, no -shm.
    let copy = tempfile::tempdir().expect("a second temp dir must be created");
    let path = copy.path().join("a.db");
    std::fs::copy(&live, &path).expect("the database must copy");
    std::fs::copy(side_file(&live, "-wal"), side_file(&path, "-wal")).expect("the WAL must copy");
    let before = listing(copy.path());
    let (conn, mode) = open_read_only(&path, BUSY).expect("the database must open");
    let n: i64 = conn
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .expect("must count");
    drop(conn);
    assert_eq!(
        mode,
        OpenMode::Immutable,
        "without -shm the reader must not create one"
    );
    assert_eq!(
        n, 1,
        "frames not yet checkpointed are not seen on this path"
    );
    assert_eq!(listing(copy.path()), before, "no -shm may be created");
}
