//! The full-text store: `<root>/store/<host>-<10 hex>.md`, symlink-refusing writes.

use std::path::{Path, PathBuf};

/// Where full texts of truncated pages are written.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// A store writing into `dir`.
    pub fn new(root: &Path, _agent_visible_root: Option<&Path>) -> Self {
        Self {
            dir: root.join("store"),
        }
    }

    /// Write the full text of `url`; returns the agent-visible path.
    pub fn write(&self, _url: &str, _content: &str) -> Result<PathBuf, std::io::Error> {
        Err(std::io::Error::other("store not built yet"))
    }

    /// The directory files are written to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}
