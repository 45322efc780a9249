//! The managed scope: which directory pins settings, how many keys it pins, and whether its
//! `config.yaml` is applied at all.
//!
//! Hermes resolves the directory from `HERMES_MANAGED_DIR` (used only when it names an
//! existing directory, never falling back) and else `/etc/hermes` when that is a directory.
//! A managed `config.yaml` that exists but cannot be applied (unreadable, not UTF-8, empty,
//! YAML error, not a mapping) is ignored by Hermes with a log line; the report names the
//! reason in `error` and counts zero pinned keys.

use std::path::PathBuf;

use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

pub use fleetgate_policy::managed::pinned_keys;

use super::yaml::parse_mapping;

/// Where the managed directory comes from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ManagedDir {
    /// Resolve like Hermes: `HERMES_MANAGED_DIR`, else `/etc/hermes`.
    #[default]
    Auto,
    /// Use this directory if it exists (a mount of the agent's managed dir).
    At(PathBuf),
    /// No managed scope.
    Off,
}

/// `managed` of the status report.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ManagedState {
    /// The active managed directory, or null when there is none.
    pub dir: Option<String>,
    /// Number of dotted keys pinned.
    pub keys: usize,
    /// sha256 of the raw managed `config.yaml`, null when absent or unreadable.
    pub sha256: Option<String>,
    /// Why an existing managed `config.yaml` is not applied.
    pub error: Option<String>,
}

/// The managed scope as read: its state for the report and the mapping to overlay.
#[derive(Clone, Debug, Default)]
pub struct ManagedScope {
    /// What the report shows.
    pub state: ManagedState,
    /// The parsed mapping (empty when absent or broken).
    pub config: Map<String, Value>,
}

/// Resolve the managed directory.
pub fn resolve_dir(source: &ManagedDir) -> Option<PathBuf> {
    match source {
        ManagedDir::Off => None,
        ManagedDir::At(dir) => dir.is_dir().then(|| dir.clone()),
        ManagedDir::Auto => {
            let from_env = std::env::var("HERMES_MANAGED_DIR").unwrap_or_default();
            let from_env = from_env.trim();
            if !from_env.is_empty() {
                let dir = PathBuf::from(from_env);
                return dir.is_dir().then_some(dir);
            }
            let default = PathBuf::from("/etc/hermes");
            default.is_dir().then_some(default)
        }
    }
}

/// Read the managed scope.
pub fn load(source: &ManagedDir) -> ManagedScope {
    let Some(dir) = resolve_dir(source) else {
        return ManagedScope::default();
    };
    let mut scope = ManagedScope {
        state: ManagedState {
            dir: Some(dir.display().to_string()),
            ..ManagedState::default()
        },
        config: Map::new(),
    };
    let path = dir.join("config.yaml");
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return scope,
        Err(err) => {
            scope.state.error = Some(format!("unreadable: {err}"));
            return scope;
        }
    };
    scope.state.sha256 = Some(hex::encode(Sha256::digest(&bytes)));
    match parse_mapping(&bytes) {
        Ok(config) => {
            scope.state.keys = pinned_keys(&config).len();
            scope.config = config;
        }
        Err(err) => scope.state.error = Some(err.to_string()),
    }
    scope
}

#[cfg(test)]
mod tests;
