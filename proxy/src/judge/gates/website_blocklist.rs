//! Gate E4: the website blocklist (host + subdomains, `*.` globs, shared files).
//!
//! Behaviour follows Hermes' website policy (reference §5): rules come from the config list and
//! from shared files (one rule a line, `#` comments, UTF-8 with or without BOM; a missing or
//! unreadable file is skipped with a warning, failing open), are normalised (see `rule`), and
//! are deduplicated on (pattern, source) keeping first-seen order.
//!
//! **Match order.** Rules are ordered config rules first (as listed), then each shared file in
//! the listed order, lines top to bottom. A `*.`-rule is an fnmatch glob (`*` crosses dots;
//! `*.example.com` does not match `example.com`); any other rule matches the host itself or any
//! subdomain. The first rule in that order that matches wins and is the one reported.
//!
//! **Cost.** Plain rules and wildcard-free `*.base` rules sit in two hash maps; a check looks up
//! the host and each of its dot-suffixes (at most two probes per label). The remaining globs are
//! tried in order after a literal-tail check, stopping once a glob comes later than a match
//! already found. A check allocates nothing unless the host is
//! not canonical or a glob has to look at a non-ASCII host.

use std::borrow::Cow;
use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

use rustc_hash::FxHashMap;

use super::{DenyReason, Gate, Verdict};
use crate::base::target_url::TargetUrl;

mod glob;
mod rule;

use glob::Glob;
use rule::Normalised;

/// A compiled blocklist.
#[derive(Clone, Debug, Default)]
pub struct Blocklist {
    enabled: bool,
    /// Every rule, in match order.
    rules: Vec<Rule>,
    /// Plain patterns → index of the first rule with that pattern. The tables' keys are the
    /// operator's rules and a lookup never inserts, so a host cannot shape a table: a fast
    /// non-keyed hash (Fx) is safe here and a lookup is paid per dot of every host.
    plain: FxHashMap<Box<str>, usize>,
    /// `*.base` rules without further wildcards: base → index of the first such rule.
    subdomain: FxHashMap<Box<str>, usize>,
    /// Glob rules as (rule index, compiled glob), in match order.
    globs: Vec<(usize, Glob)>,
    /// Resolved shared-file paths, in the listed order, whether or not they could be read.
    shared: Vec<PathBuf>,
}

#[derive(Clone, Debug)]
struct Rule {
    pattern: String,
    source: String,
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

/// The source label of rules from the config list.
pub(crate) const CONFIG_SOURCE: &str = "config";

// === impl Blocklist ===

impl Blocklist {
    /// Compile a blocklist. Relative shared paths resolve against `base_dir` (`~` is not
    /// expanded: the gate has no user home); a missing or unreadable file is skipped with a
    /// warning (fail open, like Hermes). Rules are loaded even when `enabled` is false, so
    /// warnings and the shared files a reloader watches do not depend on the switch.
    pub fn load(
        enabled: bool,
        domains: &[String],
        shared_files: &[PathBuf],
        base_dir: &Path,
    ) -> (Self, Vec<LoadWarning>) {
        let mut builder = Builder::default();
        for domain in domains {
            builder.add(domain, CONFIG_SOURCE);
        }
        for file in shared_files {
            if py_blank(file) {
                continue;
            }
            let path = resolve_shared(file, base_dir);
            // A file listed twice adds nothing the dedupe would keep; read it once.
            if !builder.list.shared.contains(&path) {
                builder.add_file(&path);
                builder.list.shared.push(path);
            }
        }
        builder.list.enabled = enabled;
        (builder.list, builder.warnings)
    }

    /// Match a host (canonical: lowercase, no trailing dot; other forms are normalised first).
    /// `None` when the list is disabled, the host is empty or no rule matches.
    pub fn check_host(&self, host: &str) -> Option<BlockMatch> {
        if !self.enabled || self.rules.is_empty() {
            return None;
        }
        let host = canonical(host);
        if host.is_empty() {
            return None;
        }
        let index = self.first_match(&host)?;
        let rule = self.rules.get(index)?;
        Some(BlockMatch {
            host: host.into_owned(),
            rule: rule.pattern.clone(),
            source: rule.source.clone(),
        })
    }

    fn first_match(&self, host: &str) -> Option<usize> {
        let earlier = |best: Option<usize>, i: usize| Some(best.map_or(i, |b| b.min(i)));
        let mut best = self.plain.get(host).copied();
        for (dot, _) in host.match_indices('.') {
            let suffix = &host[dot + 1..];
            if let Some(&i) = self.plain.get(suffix) {
                best = earlier(best, i);
            }
            if let Some(&i) = self.subdomain.get(suffix) {
                best = earlier(best, i);
            }
        }
        for (i, glob) in &self.globs {
            if best.is_some_and(|b| *i > b) {
                break;
            }
            if glob.matches(host) {
                return Some(*i);
            }
        }
        best
    }

    /// The resolved shared-file paths (also the missing ones), for the policy reloader to watch.
    #[cfg(test)]
    pub(crate) fn shared_sources(&self) -> Vec<PathBuf> {
        self.shared.clone()
    }

    /// Number of rules after normalisation and dedupe.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether the list is switched on.
    #[cfg(test)]
    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }
}

/// Collects rules in order with the (pattern, source) dedupe.
#[derive(Debug, Default)]
struct Builder {
    list: Blocklist,
    seen: HashSet<(String, String)>,
    warnings: Vec<LoadWarning>,
}

impl Builder {
    fn add(&mut self, raw: &str, source: &str) {
        let patterns = match rule::normalise_rule(raw) {
            Normalised::Skip => return,
            Normalised::Patterns(p) => p,
            Normalised::Dropped(why) => {
                self.warn(format!(
                    "Dropped website blocklist rule {raw:?} from {source}: {why}"
                ));
                return;
            }
        };
        for pattern in patterns {
            self.push(pattern, source);
        }
    }

    fn push(&mut self, pattern: String, source: &str) {
        if !self.seen.insert((pattern.clone(), source.to_string())) {
            return;
        }
        let index = self.list.rules.len();
        if let Some(base) = Glob::plain_subdomain_base(&pattern) {
            self.list.subdomain.entry(base.into()).or_insert(index);
        } else if pattern.starts_with("*.") {
            match Glob::compile(&pattern) {
                Ok(glob) => self.list.globs.push((index, glob)),
                Err(e) => {
                    self.warn(format!(
                        "Dropped website blocklist rule {pattern:?} from {source}: {e}"
                    ));
                    return;
                }
            }
        } else {
            self.list
                .plain
                .entry(pattern.clone().into_boxed_str())
                .or_insert(index);
        }
        self.list.rules.push(Rule {
            pattern,
            source: source.to_string(),
        });
    }

    fn add_file(&mut self, path: &Path) {
        let label = path.to_string_lossy().into_owned();
        let text = match crate::policy::file::read_regular(path) {
            Ok(bytes) => String::from_utf8(bytes).map_err(|e| e.to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.warn(format!(
                    "Shared blocklist file not found (skipping): {label}"
                ));
                return;
            }
            Err(e) => Err(e.to_string()),
        };
        let text = match text {
            Ok(text) => text,
            Err(e) => {
                self.warn(format!(
                    "Failed to read shared blocklist file {label} (skipping): {e}"
                ));
                return;
            }
        };
        let body = text.strip_prefix('\u{feff}').unwrap_or(&text);
        for line in rule::py_lines(body) {
            let line = rule::py_strip(line);
            if !line.is_empty() && !line.starts_with('#') {
                self.add(line, &label);
            }
        }
    }

    fn warn(&mut self, message: String) {
        self.warnings.push(LoadWarning(message));
    }
}

/// Hermes' host normalisation (strip, lowercase, trailing dots off), borrowing when the host is
/// already canonical.
fn canonical(host: &str) -> Cow<'_, str> {
    let trimmed = rule::py_strip(host).trim_end_matches('.');
    if trimmed.bytes().any(|b| b.is_ascii_uppercase()) || !trimmed.is_ascii() {
        Cow::Owned(trimmed.to_lowercase())
    } else {
        Cow::Borrowed(trimmed)
    }
}

fn py_blank(path: &Path) -> bool {
    rule::py_strip(&path.to_string_lossy()).is_empty()
}

/// Absolute paths are used as given; relative ones are joined to `base_dir` and resolved
/// (symlinks followed where the path exists, `.`/`..` folded lexically where it does not).
fn resolve_shared(path: &Path, base_dir: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    let joined = base_dir.join(path);
    if let Ok(real) = std::fs::canonicalize(&joined) {
        return real;
    }
    let absolute = std::path::absolute(&joined).unwrap_or(joined);
    let mut out = PathBuf::new();
    for part in absolute.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    match (out.parent(), out.file_name()) {
        (Some(parent), Some(name)) => std::fs::canonicalize(parent)
            .map(|p| p.join(name))
            .unwrap_or(out.clone()),
        _ => out,
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

#[cfg(test)]
mod tests;
