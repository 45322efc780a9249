//! Read-only SQLite access to a live Hermes database: never creates or changes a file.
//!
//! How a file is opened depends on its journal mode and on what sits next to it:
//!
//! 1. Rollback journal (`journal_mode=delete`): `mode=ro`. A reader creates no file; while a
//!    writer holds its lock, the busy timeout applies and then the read fails cleanly.
//! 2. WAL with both `-wal` and `-shm` present (a writer has it open, or crashed): `mode=ro`.
//!    The reader takes its read lock in the existing `-shm` as every WAL reader must; on a
//!    read-only mount SQLite maps that `-shm` read-only and still reads consistently.
//! 3. WAL with no `-wal` file (every writer closed and checkpointed): `mode=ro&immutable=1`.
//!    A plain `mode=ro` open would create `-wal` and `-shm` beside the database (and fail on a
//!    read-only mount); with nothing in a WAL there is nothing to miss, so the main file is
//!    read as-is without locks. A `-wal` left without its `-shm` (a crash) takes the same path;
//!    frames not yet checkpointed are then not seen.
//!
//! A transient `SQLITE_BUSY`/`SQLITE_IOERR` (a checkpoint racing the open) is retried a few
//! times with a short pause, as Hermes' own read-only readers do.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, ffi};

/// Bytes every SQLite 3 database file starts with.
const MAGIC: &[u8; 16] = b"SQLite format 3\0";
/// How many times a transient open/probe failure is retried.
const RETRIES: u32 = 3;
/// Pause between retries.
const RETRY_PAUSE: Duration = Duration::from_millis(50);
/// Characters left unescaped in the `file:` URI path.
const URI_PATH: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'/')
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Why a database could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The file does not exist.
    #[error("failed to open {0}: no such file")]
    Missing(PathBuf),
    /// The file exists but is not a SQLite database.
    #[error("failed to open {0}: not a SQLite database")]
    NotSqlite(PathBuf),
    /// The file could not be read at the filesystem level.
    #[error("failed to read {path}: {source}")]
    Io {
        /// The database path.
        path: PathBuf,
        /// The filesystem error.
        #[source]
        source: std::io::Error,
    },
    /// SQLite refused to open or query it (busy past the timeout, corrupt, wrong schema).
    #[error("failed to query {path}: {source}")]
    Sqlite {
        /// The database path.
        path: PathBuf,
        /// The SQLite error.
        #[source]
        source: rusqlite::Error,
    },
}

impl DbError {
    /// Wrap a SQLite error with the path it happened on.
    pub fn sqlite(path: &Path, source: rusqlite::Error) -> Self {
        Self::Sqlite {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// How [`open_read_only`] opened a file (exposed for tests and diagnostics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// `mode=ro`, with locking.
    ReadOnly,
    /// `mode=ro&immutable=1`, no locks and no side files.
    Immutable,
}

/// Open `path` read-only (see the module docs for the mode chosen) and check it is readable.
pub fn open_read_only(path: &Path, busy: Duration) -> Result<(Connection, OpenMode), DbError> {
    let header = read_header(path)?;
    let wal = header.len() >= 20 && (header[18] == 2 || header[19] == 2);
    let live_wal = side_file(path, "-wal").exists() && side_file(path, "-shm").exists();
    let mode = if wal && !live_wal {
        OpenMode::Immutable
    } else {
        OpenMode::ReadOnly
    };
    let uri = file_uri(path, mode);
    let mut attempt = 0;
    loop {
        match try_open(&uri, busy) {
            Ok(conn) => return Ok((conn, mode)),
            Err(err) if attempt < RETRIES && is_transient(&err) => {
                attempt += 1;
                std::thread::sleep(RETRY_PAUSE);
            }
            Err(err) => return Err(DbError::sqlite(path, err)),
        }
    }
}

fn try_open(uri: &str, busy: Duration) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(uri, flags)?;
    conn.busy_timeout(busy)?;
    // A report reads each page about once; a larger cache saves re-reads of index pages.
    conn.pragma_update(None, "cache_size", -32_768)?;
    // Reading the schema forces the header, lock and WAL-index checks now, not mid-report.
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |row| {
        row.get::<_, i64>(0)
    })?;
    Ok(conn)
}

fn read_header(path: &Path) -> Result<Vec<u8>, DbError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => DbError::Missing(path.to_path_buf()),
        _ => DbError::Io {
            path: path.to_path_buf(),
            source,
        },
    })?;
    let mut header = Vec::with_capacity(100);
    file.take(100)
        .read_to_end(&mut header)
        .map_err(|source| DbError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    // A zero-length file is a valid empty database to SQLite; anything else needs the magic.
    if !header.is_empty() && !header.starts_with(MAGIC) {
        return Err(DbError::NotSqlite(path.to_path_buf()));
    }
    Ok(header)
}

fn side_file(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

fn file_uri(path: &Path, mode: OpenMode) -> String {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let encoded = utf8_percent_encode(&absolute.to_string_lossy(), URI_PATH).to_string();
    match mode {
        OpenMode::ReadOnly => format!("file:{encoded}?mode=ro"),
        OpenMode::Immutable => format!("file:{encoded}?mode=ro&immutable=1"),
    }
}

fn is_transient(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(ffi::ErrorCode::DatabaseBusy | ffi::ErrorCode::SystemIoFailure)
    )
}

/// The column names of `table`, empty when the table does not exist.
pub fn columns(conn: &Connection, table: &str) -> rusqlite::Result<HashSet<String>> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
    let names = stmt.query_map([table], |row| row.get::<_, String>(0))?;
    names.collect()
}

/// `<alias>.<column>` when the probe found the column, else `fallback` (an SQL literal), for
/// building SELECTs that work on older and newer schemas alike.
pub fn column_or(cols: &HashSet<String>, alias: &str, column: &str, fallback: &str) -> String {
    if cols.contains(column) {
        format!("{alias}.{column}")
    } else {
        fallback.to_string()
    }
}

/// A column as text whatever its storage class (numbers printed); `None` for NULL or a blob.
pub fn text_at(row: &rusqlite::Row<'_>, idx: usize) -> rusqlite::Result<Option<String>> {
    Ok(match row.get_ref(idx)? {
        ValueRef::Text(bytes) => Some(match std::str::from_utf8(bytes) {
            Ok(text) => text.to_owned(),
            Err(_) => String::from_utf8_lossy(bytes).into_owned(),
        }),
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        ValueRef::Null | ValueRef::Blob(_) => None,
    })
}

/// A text column borrowed from the row; `None` for NULL, numbers, blobs or invalid UTF-8.
pub fn str_at<'r>(row: &'r rusqlite::Row<'_>, idx: usize) -> rusqlite::Result<Option<&'r str>> {
    Ok(match row.get_ref(idx)? {
        ValueRef::Text(bytes) => std::str::from_utf8(bytes).ok(),
        _ => None,
    })
}

/// A column as a number whatever its storage class (numeric text parsed); `None` otherwise.
pub fn real_at(row: &rusqlite::Row<'_>, idx: usize) -> rusqlite::Result<Option<f64>> {
    Ok(match row.get_ref(idx)? {
        ValueRef::Integer(i) => Some(i as f64),
        ValueRef::Real(f) => Some(f),
        ValueRef::Text(bytes) => std::str::from_utf8(bytes)
            .ok()
            .and_then(|t| t.trim().parse().ok()),
        ValueRef::Null | ValueRef::Blob(_) => None,
    })
}

#[cfg(test)]
mod tests;
