//! Secret rules at leak-scanner breadth: token formats (prefix, charset, length, and an entropy
//! floor where the format alone is weak), URL-is-credential shapes (Slack, Discord, Teams
//! webhooks, Telegram bot URLs) and JWTs, each with an id that names the refusal.
//!
//! Rules are written in the gitleaks rule-file format (`[[rules]]` with `id`, `regex`,
//! `keywords`, `entropy`, `secretGroup`, `allowlists`), so the built-in set (`rules.toml`) and a
//! security team's own files load through one parser. Matching is keyword-prefiltered as leak
//! scanners do: one pass over the text (ASCII case-insensitive, [`keywords`]) marks the rules
//! whose keywords occur, and only their regexes run, so the cost stays flat as rules grow. A
//! rule without keywords runs on every text.
//!
//! A rule's regex is compiled, and kept, only when a text first names one of the rule's
//! keywords (or, for a rule without keywords, on the first text): most rules never see their
//! keywords, so their compiled programs and search caches stay off the heap of an idle gate.
//! An operator's rule file is compiled once at load to check it (then dropped); the built-in
//! set is checked by its test instead, so loading it compiles nothing.
//!
//! A [`Hit`] carries the rule id and the span of the match, never a copy of the secret: the
//! callers log and answer with the id only.

use std::ops::{ControlFlow, Range};
use std::sync::{LazyLock, OnceLock};

use base64::Engine as _;
use regex::bytes::{Regex, RegexBuilder};
use serde::Deserialize;

mod filter;
mod keywords;
pub use filter::LiteralFilter;
use keywords::KeywordIndex;

/// The built-in rules, in the gitleaks format.
const BUILTIN: &str = include_str!("rules.toml");

/// Compiled-size limit of one rule's regex (a rule file is operator input).
const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// The rule id of a JSON Web Token found anywhere in a URL.
pub const JWT_RULE: &str = "jwt";

/// A rule that matched: its id and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    /// The rule id (`aws-access-key-id`, `jwt`, ...).
    pub rule: String,
    /// Byte range of the match in the text searched.
    pub span: Range<usize>,
}

/// Why a rule file cannot be used; names the rule and the reason.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RuleError {
    /// The file is not TOML or not shaped like a gitleaks rule file.
    #[error("failed to parse the secret rules of {origin}: {message}")]
    Parse {
        /// The file (or `built-in`).
        origin: String,
        /// The parser's message.
        message: String,
    },
    /// One rule cannot be compiled or is incomplete.
    #[error("secret rule {id:?} of {origin}: {message}")]
    Rule {
        /// The file.
        origin: String,
        /// The rule id (or its position when it has none).
        id: String,
        /// What is wrong.
        message: String,
    },
}

/// A compiled set of rules.
#[derive(Debug)]
pub struct RuleSet {
    rules: Vec<Rule>,
    /// Every rule's keywords; `None` when no rule has one.
    keywords: Option<KeywordIndex>,
    /// Rules without keywords: they run on every text.
    unkeyed: Vec<usize>,
    /// File-wide allowlists.
    allow: Vec<Allowlist>,
}

#[derive(Debug)]
struct Rule {
    id: String,
    regex: LazyRegex,
    /// `secretGroup` as the file gives it; without it, the first group when there is one
    /// (gitleaks), decided once the regex is compiled.
    secret_group: Option<usize>,
    entropy: Option<f64>,
    allow: Vec<Allowlist>,
}

#[derive(Debug, Default)]
struct Allowlist {
    regexes: Vec<LazyRegex>,
    stopwords: Vec<String>,
    /// `regexTarget = "match"`: the regexes test the whole match, else the secret.
    target_match: bool,
    /// `condition = "AND"`: every given criterion must hold.
    all: bool,
}

/// A rule file's pattern, compiled on its first use and kept from then on.
#[derive(Debug)]
struct LazyRegex {
    pattern: Box<str>,
    compiled: OnceLock<Option<Regex>>,
}

/// How a rule file's regexes are checked at load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    /// Compile each one (then drop it): an operator's file, whose mistakes are named at load.
    Compile,
    /// Compile none: the built-in set, which its test compiles and checks.
    Trusted,
}

// --- the gitleaks file format (the fields that apply to a URL; others are ignored) ---

#[derive(Deserialize)]
struct RawFile {
    #[serde(default)]
    rules: Vec<RawRule>,
    #[serde(default)]
    allowlist: Option<RawAllowlist>,
    #[serde(default)]
    allowlists: Vec<RawAllowlist>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRule {
    #[serde(default)]
    id: String,
    #[serde(default)]
    regex: Option<String>,
    #[serde(default)]
    secret_group: Option<usize>,
    #[serde(default)]
    entropy: Option<f64>,
    #[serde(default)]
    keywords: Vec<String>,
    /// A rule on file paths only: nothing to match in a URL.
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    allowlist: Option<RawAllowlist>,
    #[serde(default)]
    allowlists: Vec<RawAllowlist>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawAllowlist {
    #[serde(default)]
    regexes: Vec<String>,
    #[serde(default)]
    stopwords: Vec<String>,
    #[serde(default)]
    regex_target: Option<String>,
    #[serde(default)]
    condition: Option<String>,
}

// === impl RuleSet ===

impl RuleSet {
    /// The built-in rules (parsed once; each regex compiled on its first use).
    pub fn builtin() -> &'static RuleSet {
        static SET: LazyLock<RuleSet> = LazyLock::new(|| {
            RuleSet::load(BUILTIN, "built-in", Check::Trusted).unwrap_or_else(|e| {
                // A test compiles and checks every built-in rule (`RuleSet::parse`); this
                // cannot be reached by input.
                tracing::error!(error = %e, "secrets.builtin_rules_invalid");
                RuleSet::empty()
            })
        });
        &SET
    }

    /// A set without rules.
    pub fn empty() -> Self {
        Self {
            rules: Vec::new(),
            keywords: None,
            unkeyed: Vec::new(),
            allow: Vec::new(),
        }
    }

    /// Parse a gitleaks rule file and compile every regex in it to check it; `origin` names it
    /// in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, RuleError> {
        Self::load(text, origin, Check::Compile)
    }

    fn load(text: &str, origin: &str, check: Check) -> Result<Self, RuleError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| RuleError::Parse {
            origin: origin.into(),
            message: e.message().to_string(),
        })?;
        let mut rules = Vec::new();
        let mut keywords_per_rule: Vec<Vec<String>> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (index, r) in raw.rules.into_iter().enumerate() {
            let id = if r.id.trim().is_empty() {
                return Err(RuleError::Rule {
                    origin: origin.into(),
                    id: format!("#{}", index + 1),
                    message: "has no id".into(),
                });
            } else {
                r.id.clone()
            };
            let fail = |message: String| RuleError::Rule {
                origin: origin.into(),
                id: id.clone(),
                message,
            };
            if !seen.insert(id.clone()) {
                return Err(fail("is defined twice".into()));
            }
            let Some(pattern) = r.regex.as_deref().filter(|p| !p.is_empty()) else {
                if r.path.is_some() {
                    // A path-only rule judges file names; a URL has none to judge.
                    continue;
                }
                return Err(fail("has no regex".into()));
            };
            let (regex, groups) =
                LazyRegex::new(pattern, check).map_err(|e| fail(format!("invalid regex: {e}")))?;
            if let (Some(group), Some(groups)) = (r.secret_group, groups)
                && group >= groups
            {
                return Err(fail(format!(
                    "secretGroup {group} but the regex has {} group(s)",
                    groups - 1
                )));
            }
            if let Some(e) = r.entropy
                && !(0.0..=8.0).contains(&e)
            {
                return Err(fail(format!("entropy {e} is outside 0..8 bits per byte")));
            }
            let mut allow = Vec::new();
            for a in r.allowlist.into_iter().chain(r.allowlists) {
                allow.push(Allowlist::compile(a, check).map_err(&fail)?);
            }
            rules.push(Rule {
                id: id.clone(),
                regex,
                secret_group: r.secret_group,
                entropy: r.entropy,
                allow,
            });
            keywords_per_rule.push(r.keywords);
        }
        let mut allow = Vec::new();
        for a in raw.allowlist.into_iter().chain(raw.allowlists) {
            allow.push(
                Allowlist::compile(a, check).map_err(|message| RuleError::Rule {
                    origin: origin.into(),
                    id: "(global allowlist)".into(),
                    message,
                })?,
            );
        }
        let (keywords, unkeyed) = keyword_index(keywords_per_rule);
        Ok(Self {
            rules,
            keywords,
            unkeyed,
            allow,
        })
    }

    /// How many rules the set holds.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether the set holds no rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Every rule id, in file order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|r| r.id.as_str())
    }

    /// The first rule (in file order) that matches `text`, or `None`.
    pub fn find(&self, text: &str) -> Option<Hit> {
        self.find_except(text, &[])
    }

    /// [`RuleSet::find`] without the rules whose id is in `skip` (a policy's exemptions).
    pub fn find_except(&self, text: &str, skip: &[String]) -> Option<Hit> {
        // Candidate rules, without allocating for the common text that names no keyword.
        let mut candidates: Vec<usize> = Vec::new();
        if let Some(index) = &self.keywords {
            index.candidates(text.as_bytes(), &mut candidates);
        }
        self.run(text, skip, candidates)
    }

    /// This set's keywords joined with `literals`, to look for both in one pass over a text
    /// ([`WithLiterals::find_except`]).
    pub fn with_literals(&self, literals: &LiteralFilter) -> WithLiterals<'_> {
        let joint = match &self.keywords {
            Some(index) => index.filter().union(literals),
            None => literals.clone(),
        };
        WithLiterals {
            set: self,
            joint,
            literals: literals.clone(),
        }
    }

    /// The first of the `candidates` rules (and the rules without keywords), in file order,
    /// that matches `text`, skipping the ids in `skip`.
    fn run(&self, text: &str, skip: &[String], mut candidates: Vec<usize>) -> Option<Hit> {
        candidates.extend_from_slice(&self.unkeyed);
        if candidates.is_empty() {
            return None;
        }
        candidates.sort_unstable();
        candidates.dedup();
        candidates
            .into_iter()
            .filter(|&r| !skip.iter().any(|id| *id == self.rules[r].id))
            .find_map(|r| self.rules[r].find(text, &self.allow))
    }
}

/// A rule set and a caller's literals (Hermes' prefix families in the gate) read in one pass
/// over a text: where the filter of both passes, the caller checks its literals; the set's
/// keywords are compared there afterwards, and only when the caller found nothing (a caller's
/// hit ends the reading, so a text with one costs no keyword comparison).
#[derive(Debug)]
pub struct WithLiterals<'a> {
    set: &'a RuleSet,
    /// The set's keywords and the literals.
    joint: LiteralFilter,
    /// The literals alone: which passing positions the caller is asked about.
    literals: LiteralFilter,
}

impl WithLiterals<'_> {
    /// [`RuleSet::find_except`] on `text`, calling `at`, in increasing order, at every
    /// position where one of the literals may start (and some others). When `at` answers
    /// `Some`, that answer is returned (`Break`) and no rule is run; otherwise the rule set's
    /// answer is (`Continue`).
    ///
    /// The pass keeps one mask of 64 bits per 64 bytes of text (an eighth of its length; on
    /// the stack up to 512 bytes) until the keywords are compared.
    pub fn find_except<T>(
        &self,
        text: &str,
        skip: &[String],
        mut at: impl FnMut(usize) -> Option<T>,
    ) -> ControlFlow<T, Option<Hit>> {
        let bytes = text.as_bytes();
        // The masks, on the stack for a text of up to 512 bytes (a URL).
        let mut short = [0u64; 8];
        let blocks = bytes.len().div_ceil(64);
        let mut long = if blocks > short.len() {
            vec![0; blocks]
        } else {
            Vec::new()
        };
        let masks: &mut [u64] = match short.get_mut(..blocks) {
            Some(masks) => masks,
            None => &mut long,
        };
        self.joint.scan_blocks(bytes, |start, mask| {
            if let Some(slot) = masks.get_mut(start / 64) {
                *slot = mask;
            }
            let mut rest = mask;
            while rest != 0 {
                let i = start + rest.trailing_zeros() as usize;
                rest &= rest - 1;
                if self.literals.passes(bytes, i)
                    && let Some(answer) = at(i)
                {
                    return ControlFlow::Break(answer);
                }
            }
            ControlFlow::Continue(())
        })?;
        let mut candidates: Vec<usize> = Vec::new();
        if let Some(index) = &self.set.keywords {
            index.candidates_at(bytes, LiteralFilter::positions(masks), &mut candidates);
        }
        ControlFlow::Continue(self.set.run(text, skip, candidates))
    }
}

/// Compile with ASCII classes, as gitleaks' Go regexes read them (`\w`, `\d`, `\s`, `\b` are
/// ASCII there), matching bytes (a URL form may hold any byte after percent-decoding).
fn compile(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(pattern)
        .unicode(false)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
}

// === impl LazyRegex ===

impl LazyRegex {
    /// The regex of `pattern`, not compiled yet. With [`Check::Compile`] the pattern is
    /// compiled once to check it (then dropped) and its capture count (groups, the whole
    /// match included) returned.
    fn new(pattern: &str, check: Check) -> Result<(Self, Option<usize>), regex::Error> {
        let groups = match check {
            Check::Compile => Some(compile(pattern)?.captures_len()),
            Check::Trusted => None,
        };
        let lazy = Self {
            pattern: pattern.into(),
            compiled: OnceLock::new(),
        };
        Ok((lazy, groups))
    }

    /// The compiled regex. `None` only if the pattern does not compile, which the check at
    /// load (an operator's file) or the built-in set's test rules out; a rule then matches
    /// nothing and an allowlist allows nothing, and the failure is logged.
    fn get(&self) -> Option<&Regex> {
        self.compiled
            .get_or_init(|| match compile(&self.pattern) {
                Ok(regex) => Some(regex),
                Err(e) => {
                    tracing::error!(error = %e, "secrets.rule_regex_failed_to_compile");
                    None
                }
            })
            .as_ref()
    }

    /// Whether the regex has been compiled for use (tests).
    #[cfg(test)]
    fn is_compiled(&self) -> bool {
        self.compiled.get().is_some()
    }
}

// === impl Rule ===

impl Rule {
    fn find(&self, text: &str, global: &[Allowlist]) -> Option<Hit> {
        let regex = self.regex.get()?;
        // The lazy DFA answers "no" without the capture engine for nearly every candidate.
        if !regex.is_match(text.as_bytes()) {
            return None;
        }
        let group = match (self.secret_group, regex.captures_len()) {
            (Some(group), _) => group,
            // gitleaks: without secretGroup, the first group is the secret when there is one.
            (None, n) if n > 1 => 1,
            (None, _) => 0,
        };
        for caps in regex.captures_iter(text.as_bytes()) {
            let Some(whole) = caps.get(0) else { continue };
            let secret = caps.get(group).unwrap_or(whole);
            if let Some(floor) = self.entropy
                && shannon_entropy(secret.as_bytes()) < floor
            {
                continue;
            }
            let allowed = self
                .allow
                .iter()
                .chain(global)
                .any(|a| a.allows(whole.as_bytes(), secret.as_bytes()));
            if allowed {
                continue;
            }
            return Some(Hit {
                rule: self.id.clone(),
                span: secret.range(),
            });
        }
        None
    }
}

// === impl Allowlist ===

impl Allowlist {
    fn compile(raw: RawAllowlist, check: Check) -> Result<Self, String> {
        let regexes = raw
            .regexes
            .iter()
            .map(|p| {
                LazyRegex::new(p, check)
                    .map(|(regex, _)| regex)
                    .map_err(|e| format!("invalid allowlist regex {p:?}: {e}"))
            })
            .collect::<Result<_, _>>()?;
        let target_match = match raw.regex_target.as_deref() {
            None | Some("secret") => false,
            Some("match") => true,
            Some(other) => {
                return Err(format!(
                    "allowlist regexTarget {other:?} is not `secret` or `match` (a URL has no `line`)"
                ));
            }
        };
        let all = match raw
            .condition
            .as_deref()
            .map(str::to_ascii_uppercase)
            .as_deref()
        {
            None | Some("OR") => false,
            Some("AND") => true,
            Some(other) => return Err(format!("allowlist condition {other:?} is not OR or AND")),
        };
        Ok(Self {
            regexes,
            stopwords: raw
                .stopwords
                .iter()
                .map(|s| s.to_ascii_lowercase())
                .collect(),
            target_match,
            all,
        })
    }

    fn allows(&self, whole: &[u8], secret: &[u8]) -> bool {
        let target = if self.target_match { whole } else { secret };
        let lower = String::from_utf8_lossy(secret).to_ascii_lowercase();
        let mut checks = Vec::with_capacity(2);
        if !self.regexes.is_empty() {
            checks.push(
                self.regexes
                    .iter()
                    .any(|r| r.get().is_some_and(|r| r.is_match(target))),
            );
        }
        if !self.stopwords.is_empty() {
            checks.push(self.stopwords.iter().any(|w| lower.contains(w.as_str())));
        }
        match self.all {
            true => !checks.is_empty() && checks.iter().all(|c| *c),
            false => checks.iter().any(|c| *c),
        }
    }
}

/// Shannon entropy of `s` in bits per byte (gitleaks' measure).
pub fn shannon_entropy(s: &[u8]) -> f64 {
    if s.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in s {
        counts[usize::from(b)] += 1;
    }
    let n = s.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

/// A JSON Web Token anywhere in `text`: three base64url parts, the first decoding to a JSON
/// object with an `alg` member (so a random `eyJ…` string is not enough).
pub fn find_jwt(text: &str) -> Option<Hit> {
    static HEADER: LazyLock<memchr::memmem::Finder<'static>> =
        LazyLock::new(|| memchr::memmem::Finder::new("eyJ"));
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(at) = bytes.get(from..).and_then(|t| HEADER.find(t)) {
        let start = from + at;
        from = start + 3;
        if start > 0 && is_b64url(bytes[start - 1]) {
            continue;
        }
        let mut parts = [start..start, start..start, start..start];
        let mut cursor = start;
        let mut ok = true;
        for (i, part) in parts.iter_mut().enumerate() {
            let end = cursor
                + bytes[cursor..]
                    .iter()
                    .take_while(|&&b| is_b64url(b))
                    .count();
            *part = cursor..end;
            if end == cursor && i < 2 {
                ok = false;
                break;
            }
            if i < 2 {
                if bytes.get(end) != Some(&b'.') {
                    ok = false;
                    break;
                }
                cursor = end + 1;
            }
        }
        if !ok || parts[1].len() < 4 || parts[2].len() < 8 {
            continue;
        }
        let header = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&bytes[parts[0].clone()])
            .ok();
        let has_alg = header
            .and_then(|h| serde_json::from_slice::<serde_json::Value>(&h).ok())
            .is_some_and(|v| v.get("alg").is_some_and(serde_json::Value::is_string));
        if has_alg {
            return Some(Hit {
                rule: JWT_RULE.into(),
                span: start..parts[2].end,
            });
        }
    }
    None
}

fn is_b64url(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

/// The keyword index of a rule set: every rule's keywords (lower-cased, each once) with the
/// rules owning each, and the rules with no keyword (checked on every URL).
fn keyword_index(keywords_per_rule: Vec<Vec<String>>) -> (Option<KeywordIndex>, Vec<usize>) {
    let mut keywords: Vec<(String, Vec<usize>)> = Vec::new();
    let mut unkeyed = Vec::new();
    for (rule, words) in keywords_per_rule.into_iter().enumerate() {
        let words: Vec<String> = words
            .into_iter()
            .filter(|w| !w.is_empty())
            .map(|w| w.to_ascii_lowercase())
            .collect();
        if words.is_empty() {
            unkeyed.push(rule);
        }
        for w in words {
            match keywords.iter_mut().find(|(k, _)| *k == w) {
                Some((_, owners)) => owners.push(rule),
                None => keywords.push((w, vec![rule])),
            }
        }
    }
    (KeywordIndex::new(keywords), unkeyed)
}

#[cfg(test)]
mod tests;
