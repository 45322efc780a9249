//! The seen ids of one watch on the shared volume: `<store.root>/watch/<name>.json`, written
//! atomically (temp file, fsync, rename) and bounded.
//!
//! A missing file means "no baseline yet"; a file that cannot be read or parsed is an error,
//! never a silent new baseline.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

#[cfg(test)]
mod tests;

/// Format version of the state file.
const STATE_VERSION: u32 = 1;

/// Why the state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StateError {
    /// The file exists but cannot be read.
    #[error("failed to read the watch state {path}: {source}")]
    Read {
        /// The state file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a state file of this format.
    #[error(
        "failed to parse the watch state {path} (corrupt; delete it to start a new baseline): {message}"
    )]
    Corrupt {
        /// The state file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The new state could not be written.
    #[error("failed to write the watch state {path}: {source}")]
    Write {
        /// The state file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct StateFile {
    version: u32,
    watch: String,
    /// Oldest first.
    ids: Vec<String>,
    updated_at: i64,
}

/// The state file of watch `name` under `store_root`.
pub(crate) fn path(store_root: &Path, name: &str) -> PathBuf {
    store_root.join("watch").join(format!("{name}.json"))
}

/// The seen ids, oldest first; `None` when there is no state yet.
pub(crate) fn load(path: &Path) -> Result<Option<Vec<String>>, StateError> {
    let bytes = match crate::policy::file::read_regular(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(StateError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let corrupt = |message: String| StateError::Corrupt {
        path: path.to_path_buf(),
        message,
    };
    let file: StateFile = serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
    if file.version != STATE_VERSION {
        return Err(corrupt(format!("unknown version {}", file.version)));
    }
    Ok(Some(file.ids))
}

/// Write `ids` for watch `name` atomically: a temp file beside the target, fsync, rename,
/// then fsync the folder so the rename survives a crash.
pub(crate) fn save(path: &Path, name: &str, ids: &[String], now: i64) -> Result<(), StateError> {
    let err = |source| StateError::Write {
        path: path.to_path_buf(),
        source,
    };
    let body = serde_json::to_vec(&StateFile {
        version: STATE_VERSION,
        watch: name.to_string(),
        ids: ids.to_vec(),
        updated_at: now,
    })
    .map_err(|e| err(std::io::Error::other(e)))?;
    crate::base::file_write::write_atomically(path, name, &body).map_err(err)
}

/// Merge the ids of this run into `seen`: returns the new ids (in result order) and the
/// stored list, oldest first, bounded by `max_seen`. Past the bound, the oldest ids the tool
/// no longer returns go first, then the oldest of the rest.
pub(crate) fn merge(
    seen: &[String],
    current: &[String],
    max_seen: usize,
) -> (Vec<String>, Vec<String>) {
    let known: HashSet<&str> = seen.iter().map(String::as_str).collect();
    let new: Vec<String> = current
        .iter()
        .filter(|id| !known.contains(id.as_str()))
        .cloned()
        .collect();
    let mut merged: Vec<String> = seen.iter().chain(new.iter()).cloned().collect();
    let mut excess = merged.len().saturating_sub(max_seen);
    if excess > 0 {
        let returned: HashSet<&str> = current.iter().map(String::as_str).collect();
        let mut keep = Vec::with_capacity(merged.len());
        for id in merged {
            if excess > 0 && !returned.contains(id.as_str()) {
                excess -= 1;
            } else {
                keep.push(id);
            }
        }
        merged = keep;
        let over = merged.len().saturating_sub(max_seen);
        merged.drain(..over);
    }
    (new, merged)
}
