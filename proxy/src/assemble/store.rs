//! The full-text store: `<root>/store/<host>-<10 hex>.md`, symlink-refusing writes.

use std::path::{Path, PathBuf};

/// Where full texts of truncated pages are written.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// A store writing into `dir`.
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
        }
    }

    /// The directory files are written to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}
