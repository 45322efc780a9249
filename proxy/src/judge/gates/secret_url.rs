//! Gate E1: secret-URL refusal (credential prefixes and token formats on every URL form,
//! sensitive query names, userinfo). A hit refuses the whole call before any network action,
//! DNS included.
//!
//! Hermes' own checks keep Hermes' exact semantics (its 56 prefix families, its 20 query
//! names); everything else is fleetgate's and stricter (see [`SecretUrlGate`]): the built-in
//! rule set ([`rules`], over 150 token formats, URL-is-credential shapes and JWTs), more URL
//! forms (the canonical WHATWG URL, whose host is lower-cased and IDNA-mapped, and
//! percent-decoding repeated up to [`DECODE_ROUNDS`] times), query names in other spellings,
//! userinfo and fragment parameters. Every refusal names the rule that matched, never the
//! secret.

use std::borrow::Cow;
use std::ops::ControlFlow;
use std::sync::LazyLock;

use super::{DenyReason, Gate, Verdict};
use crate::base::target_url::TargetUrl;
use crate::base::url_form::{self, SplitUrl, py_strip, unquote, unquote_plus};

mod prefix;
/// The secret rule sets (gitleaks format), shared with the controller through the policy crate.
pub use fleetgate_policy::secret_rules as rules;

pub use prefix::{family_prefix, find_credential_prefix};
use rules::{RuleSet, WithLiterals};

use crate::policy::{EnforcementMode, SecretsPolicy};

#[cfg(test)]
mod tests;

/// The query names Hermes treats as credential-bearing (compared lowercased after a second
/// percent-decoding). `code`, `key`, `auth`, `session` and `sig` are deliberately absent.
pub(crate) const SENSITIVE_QUERY_NAMES: [&str; 20] = [
    "access_token",
    "api_key",
    "apikey",
    "auth_token",
    "authorization",
    "awsaccesskeyid",
    "client_secret",
    "credential",
    "credentials",
    "jwt",
    "password",
    "passwd",
    "secret",
    "session_id",
    "signature",
    "token",
    "x_amz_security_token",
    "x_amz_signature",
    "x-amz-security-token",
    "x-amz-signature",
];

/// Hermes' `sensitive_query_param_name`: the first query key (decoded once by `parse_qsl`,
/// case kept) whose value is non-empty and whose second decoding, lowercased, is a
/// [`SENSITIVE_QUERY_NAMES`] entry. Only `http`/`https` URLs; the fragment is ignored.
pub fn sensitive_query_param_name(url: &str) -> Option<String> {
    if !url.contains('?') {
        return None;
    }
    query_param_in(&url_form::urlsplit(py_strip(url)).ok()?)
}

/// [`sensitive_query_param_name`] on a URL already split.
fn query_param_in(parts: &SplitUrl<'_>) -> Option<String> {
    if !parts.is_http_or_https() || parts.query().is_empty() {
        return None;
    }
    first_sensitive_pair(parts.query())
}

/// fleetgate's fragment check (stricter than Hermes): the same names in a `k=v&…` fragment
/// (OAuth implicit flow returns `access_token` there, and fragments reach vendor APIs and
/// cache keys), and in the part after a `?` inside the fragment (hash-routed callbacks such as
/// `#/cb?access_token=…`).
pub fn sensitive_fragment_param_name(url: &str) -> Option<String> {
    if !url.contains('#') {
        return None;
    }
    fragment_param_in(&url_form::urlsplit(py_strip(url)).ok()?)
}

/// [`sensitive_fragment_param_name`] on a URL already split.
fn fragment_param_in(parts: &SplitUrl<'_>) -> Option<String> {
    let fragment = parts.fragment();
    if !fragment.contains('=') {
        return None;
    }
    first_sensitive_pair(fragment).or_else(|| {
        let (_, routed_query) = fragment.split_once('?')?;
        first_sensitive_pair(routed_query)
    })
}

/// How many times E1 percent-decodes each URL form: a secret encoded twice (`%2573k-…` →
/// `%73k-…` → `sk-…`) is found; a bound keeps the cost of a hostile URL fixed.
pub(crate) const DECODE_ROUNDS: usize = 3;

/// The query names fleetgate treats as credential-bearing beyond Hermes' list
/// ([`SENSITIVE_QUERY_NAMES`]), written squashed. Both lists are compared squashed (ASCII
/// letters and digits only, lower-cased), so `accessToken`, `access-token`, `access_token[]`
/// and `ACCESS_TOKEN` are one name.
const MORE_SENSITIVE_NAMES: [&str; 10] = [
    "refreshtoken",
    "idtoken",
    "privatetoken",
    "privatekey",
    "xgoogsignature",
    "apisecret",
    "apitoken",
    "secretkey",
    "sessiontoken",
    "secretaccesskey",
];

/// A secret found by E1: the rule id, and whether the rule only reports (`secrets.mode:
/// report` for the policy's own rule files).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The rule id.
    pub(crate) rule: String,
    /// `true`: log and count, do not refuse.
    pub(crate) report: bool,
}

/// The first secret rule that matches any form of `target` (raw, Hermes' normalised form, the
/// canonical WHATWG URL, each percent-decoded up to [`DECODE_ROUNDS`] times): Hermes' prefix
/// families (always enforced), the built-in rules and JWTs, then the policy's rule files; the
/// policy's `secrets.allow` exempts rule ids and URL prefixes from all but Hermes' families.
pub fn find_secret(target: &TargetUrl, secrets: Option<&SecretsPolicy>) -> Option<Found> {
    let forms = url_forms(target);
    let exempt = secrets.is_some_and(|s| {
        s.allow_prefixes.iter().any(|prefix| {
            forms.iter().any(|f| {
                f.len() >= prefix.len()
                    && f.is_char_boundary(prefix.len())
                    && f[..prefix.len()].eq_ignore_ascii_case(prefix)
            })
        })
    });
    judge(&forms, secrets, exempt)
}

/// The layers of E1 over `forms`, with the policy's `secrets:`: Hermes' families, the
/// built-in rules and JWTs, the rule files (enforced, or in report mode judged last and
/// reported); `exempt` leaves only Hermes' families.
fn judge<S: AsRef<str>>(
    forms: &[S],
    secrets: Option<&SecretsPolicy>,
    exempt: bool,
) -> Option<Found> {
    let (skip, report, extra) = policy_layers(secrets);
    let scan = Scan {
        exempt,
        skip,
        extra: if report { &[] } else { &extra },
    };
    if let Some(rule) = forms.iter().find_map(|f| scan.text(f.as_ref())) {
        return Some(Found {
            rule,
            report: false,
        });
    }
    if report && !exempt {
        return forms
            .iter()
            .find_map(|f| {
                extra
                    .iter()
                    .find_map(|set| set.find_except(f.as_ref(), skip))
            })
            .map(|hit| Found {
                rule: hit.rule,
                report: true,
            });
    }
    None
}

/// What the policy's `secrets:` adds to the layers: the exempt rule ids, whether its rule
/// files only report (`mode: report`), and those rule sets.
fn policy_layers(secrets: Option<&SecretsPolicy>) -> (&[String], bool, Vec<&RuleSet>) {
    let skip: &[String] = secrets.map_or(&[], |s| s.allow_rules.as_slice());
    let report = secrets.is_some_and(|s| s.mode == EnforcementMode::Report);
    let extra: Vec<&RuleSet> = secrets
        .map(|s| s.rules.iter().map(|r| r.as_ref()).collect())
        .unwrap_or_default();
    (skip, report, extra)
}

/// The distinct forms of a URL E1 judges, in order.
fn url_forms(target: &TargetUrl) -> Vec<Cow<'_, str>> {
    let canonical = target.canonical();
    let bases = [
        Some(target.raw.as_str()),
        Some(target.normalized.as_str()),
        canonical,
    ];
    let mut forms: Vec<Cow<'_, str>> = Vec::with_capacity(4);
    for base in bases.into_iter().flatten() {
        // The three forms are often the same string: each distinct one is scanned once.
        if forms.iter().any(|f| f.as_ref() == base) {
            continue;
        }
        forms.push(Cow::Borrowed(base));
        let mut current = Cow::Borrowed(base);
        for _ in 0..DECODE_ROUNDS {
            let next = match unquote(&current) {
                Cow::Owned(d) => d,
                Cow::Borrowed(_) => break,
            };
            forms.push(Cow::Owned(next.clone()));
            current = Cow::Owned(next);
        }
    }
    forms
}

/// One scan configuration: which layers run on a text.
struct Scan<'a> {
    /// The URL is under an allowed prefix: only Hermes' families judge it.
    exempt: bool,
    /// Rule ids the policy exempts.
    skip: &'a [String],
    /// The policy's enforced rule sets.
    extra: &'a [&'a RuleSet],
}

impl Scan<'_> {
    /// The id of the first rule of the layers that matches `text`.
    fn text(&self, text: &str) -> Option<String> {
        self.hit(text).map(|(_, rule)| rule)
    }

    /// The first rule of the layers that matches `text`, with the span it matched.
    fn hit(&self, text: &str) -> Option<(std::ops::Range<usize>, String)> {
        if self.exempt {
            return hermes_hit(text);
        }
        // Hermes' families and the built-in rules' keywords in one pass over the text: the
        // leftmost Hermes match that is not `sk-` prose ends it (as `hermes_hit` finds it);
        // without one, the rules whose keywords occurred are run.
        let mut resume = 0;
        let first = BUILTIN_AND_HERMES.find_except(text, self.skip, |i| {
            if i < resume {
                return None;
            }
            let end = prefix::match_at(text, i)?;
            let matched = text.get(i..end)?;
            if is_prose_after_sk(matched) {
                resume = end;
                return None;
            }
            Some((i..end, hermes_rule_id(family_prefix(matched))))
        });
        let builtin = match first {
            ControlFlow::Break(found) => return Some(found),
            ControlFlow::Continue(hit) => hit,
        };
        let hit = builtin
            .or_else(|| {
                (!self.skip.iter().any(|id| id == rules::JWT_RULE))
                    .then(|| rules::find_jwt(text))
                    .flatten()
            })
            .or_else(|| {
                self.extra
                    .iter()
                    .find_map(|set| set.find_except(text, self.skip))
            });
        hit.map(|h| (h.span, h.rule))
    }
}

/// The built-in rules with Hermes' prefix families, read in one pass ([`Scan::hit`]).
static BUILTIN_AND_HERMES: LazyLock<WithLiterals<'static>> =
    LazyLock::new(|| RuleSet::builtin().with_literals(&prefix::prefix_filter()));

/// The first Hermes prefix family in `text` (rule id `hermes-<prefix>`) with its span,
/// skipping `sk-` prose.
fn hermes_hit(text: &str) -> Option<(std::ops::Range<usize>, String)> {
    let mut offset = 0;
    while let Some(found) = text.get(offset..).and_then(find_credential_prefix) {
        let span = offset + found.start..offset + found.end;
        let matched = &text[span.clone()];
        if !is_prose_after_sk(matched) {
            return Some((span, hermes_rule_id(family_prefix(matched))));
        }
        offset += found.end;
    }
    None
}

/// The id of the first rule matching `text`: Hermes' prefix families (`hermes-<prefix>`),
/// then the built-in rules, JWTs, then `extra`; no exemption applies.
pub fn secret_in_text(text: &str, extra: &[&RuleSet]) -> Option<String> {
    Scan {
        exempt: false,
        skip: &[],
        extra,
    }
    .text(text)
}

/// The first secret in free text (a prompt) under the policy's `secrets:`, with its span:
/// Hermes' prefix families, the built-in rules and JWTs, the enforced rule files, then the
/// rule files in report mode (`report: true`). Rule ids in `secrets.allow` are skipped (URL
/// prefixes do not apply to text).
pub fn find_in_text(
    text: &str,
    secrets: Option<&SecretsPolicy>,
) -> Option<(std::ops::Range<usize>, Found)> {
    let (skip, report, extra) = policy_layers(secrets);
    let scan = Scan {
        exempt: false,
        skip,
        extra: if report { &[] } else { &extra },
    };
    if let Some((span, rule)) = scan.hit(text) {
        return Some((
            span,
            Found {
                rule,
                report: false,
            },
        ));
    }
    if !report {
        return None;
    }
    extra
        .iter()
        .find_map(|set| set.find_except(text, skip))
        .map(|hit| {
            (
                hit.span,
                Found {
                    rule: hit.rule,
                    report: true,
                },
            )
        })
}

/// Where in `text` a secret rule matches, and which: the span to redact in a log line.
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) fn secret_span(text: &str) -> Option<(std::ops::Range<usize>, String)> {
    Scan {
        exempt: false,
        skip: &[],
        extra: &[],
    }
    .hit(text)
}

/// `text` fit for a log line: every span a secret rule matches replaced by
/// `[redacted:<rule>]`; when a secret shows only once `text` is percent-decoded, nothing after
/// the scheme is kept. Text without a secret comes back unchanged.
pub fn redact_secrets(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    for _ in 0..16 {
        let Some((span, rule)) = secret_span(&out) else {
            break;
        };
        let mut owned = out.into_owned();
        owned.replace_range(span, &format!("[redacted:{rule}]"));
        out = Cow::Owned(owned);
    }
    if !out.contains('%') {
        // Nothing to decode: the span search above has seen every form there is.
        return out;
    }
    let mut decoded = out.to_string();
    for round in 0..=DECODE_ROUNDS {
        if let Some(rule) = secret_in_text(&decoded, &[]) {
            let scheme = text.split_once("://").map_or("", |(s, _)| s);
            let shown = if scheme.is_empty() || scheme.len() > 10 {
                format!("[redacted:{rule}]")
            } else {
                format!("{scheme}://[redacted:{rule}]")
            };
            return Cow::Owned(shown);
        }
        if round == DECODE_ROUNDS {
            break;
        }
        match unquote(&decoded) {
            Cow::Owned(d) => decoded = d,
            Cow::Borrowed(_) => break,
        }
    }
    out
}

/// `hermes-<prefix>`: the rule id of one of Hermes' prefix families (`hermes-sk`,
/// `hermes-github-pat`, `hermes-xoxb`).
fn hermes_rule_id(prefix: &str) -> String {
    let name: String = prefix
        .trim_end_matches(['-', '_', '.'])
        .chars()
        .map(|c| match c {
            '_' | '.' => '-',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    format!("hermes-{name}")
}

/// `sk-` followed by hyphenated lower-case words (`sk-learn-basics`, the scikit-learn
/// nickname in a docs path): words, not a key. Hermes' `sk-` family matches them; no
/// provider issues keys of that shape (they carry digits or capitals), so fleetgate lets
/// them through. A single word (`sk-abcdefghij`) is still refused.
fn is_prose_after_sk(matched: &str) -> bool {
    let Some(body) = matched.strip_prefix("sk-") else {
        return false;
    };
    let words: Vec<&str> = body.split('-').collect();
    words.len() >= 2
        && words
            .iter()
            .all(|w| (2..=12).contains(&w.len()) && w.bytes().all(|b| b.is_ascii_lowercase()))
}

/// fleetgate's query-name check (stricter than Hermes): every `&`- or `;`-separated pair of
/// the query and the fragment whose name, percent-decoded up to [`DECODE_ROUNDS`] times,
/// without `[]` suffixes and squashed to lower-case letters and digits, is a sensitive name,
/// and whose value is not empty. Returns the name as written.
pub fn sensitive_param_any_spelling(url: &str) -> Option<String> {
    if !url.contains('=') {
        return None;
    }
    any_spelling_in(&url_form::urlsplit(py_strip(url)).ok()?)
}

/// [`sensitive_param_any_spelling`] on a URL already split.
fn any_spelling_in(parts: &SplitUrl<'_>) -> Option<String> {
    if !parts.is_http_or_https() {
        return None;
    }
    [parts.query(), parts.fragment()]
        .into_iter()
        .flat_map(|section| section.split(['&', ';', '?']))
        .find_map(|pair| {
            let (raw_key, raw_value) = pair.split_once('=')?;
            if raw_value.is_empty() || raw_key.len() > 3 * 64 {
                return None;
            }
            let plain = !raw_key.contains(['%', '+']);
            let sensitive = if plain {
                is_sensitive_squashed(raw_key) && !is_signed_url_signature(raw_key, raw_value)
            } else {
                let mut key = unquote_plus(raw_key).into_owned();
                for _ in 0..DECODE_ROUNDS {
                    match unquote(&key) {
                        Cow::Owned(decoded) => key = decoded,
                        Cow::Borrowed(_) => break,
                    }
                }
                is_sensitive_squashed(&key) && !is_signed_url_signature(&key, raw_value)
            };
            sensitive.then(|| unquote_plus(raw_key).into_owned())
        })
}

/// Whether `name=value` is the signature of a Google Cloud Storage signed URL as Google issues
/// them: the name `X-Goog-Signature` (any spelling) with a value of 64 to 1024 hex digits (the
/// HMAC-SHA256 or RSA signature of a V4 signed URL). Such a URL is made to be handed out: the
/// signature proves one request until the URL expires and grants nothing else, as Hermes
/// reads it (its list has no `X-Goog-` name). A value in any other shape is refused as a
/// credential parameter, as before, and the secret rules still read the value whatever it is.
fn is_signed_url_signature(name: &str, raw_value: &str) -> bool {
    is_squashed(name, "xgoogsignature")
        && (64..=1024).contains(&raw_value.len())
        && raw_value.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `name`, squashed to lower-case ASCII letters and digits, is `squashed`.
fn is_squashed(name: &str, squashed: &str) -> bool {
    name.bytes()
        .filter(u8::is_ascii_alphanumeric)
        .map(|b| b.to_ascii_lowercase())
        .eq(squashed.bytes())
}

/// Whether `name`, without `[…]` suffixes and squashed to lower-case ASCII letters and
/// digits, is a sensitive name of Hermes' list or [`MORE_SENSITIVE_NAMES`]. No allocation.
fn is_sensitive_squashed(name: &str) -> bool {
    let mut name = name;
    while let Some(stripped) = name
        .strip_suffix(']')
        .and_then(|n| n.rfind('[').map(|i| &n[..i]))
    {
        name = stripped;
    }
    let mut buf = [0u8; 32];
    let mut len = 0;
    for b in name.bytes().filter(u8::is_ascii_alphanumeric) {
        if len == buf.len() {
            return false;
        }
        buf[len] = b.to_ascii_lowercase();
        len += 1;
    }
    let squashed = &buf[..len];
    let squash = |n: &'static str| n.bytes().filter(u8::is_ascii_alphanumeric);
    SENSITIVE_QUERY_NAMES
        .iter()
        .chain(&MORE_SENSITIVE_NAMES)
        .any(|n| squash(n).eq(squashed.iter().copied()))
}

/// Whether Hermes' four forms of a URL (raw, `unquote(raw)`, normalised,
/// `unquote(normalised)`) hold a credential-shaped token.
pub fn secret_in_url_forms(raw: &str, normalized: &str) -> bool {
    has_prefix_decoded(raw) || (normalized != raw && has_prefix_decoded(normalized))
}

/// The prefix search on `s` and, when it has escapes, on its `unquote`.
fn has_prefix_decoded(s: &str) -> bool {
    find_credential_prefix(s).is_some()
        || matches!(unquote(s), Cow::Owned(decoded) if find_credential_prefix(&decoded).is_some())
}

/// `parse_qsl(qs, keep_blank_values=True)` walked until the first sensitive pair.
fn first_sensitive_pair(qs: &str) -> Option<String> {
    for pair in qs.split('&') {
        // A non-empty raw value decodes to a non-empty value, so the raw test is exact.
        let Some((raw_key, raw_value)) = pair.split_once('=') else {
            continue;
        };
        if raw_value.is_empty() {
            continue;
        }
        let key = unquote_plus(raw_key);
        if is_sensitive_name(&unquote(&key)) {
            return Some(key.into_owned());
        }
    }
    None
}

/// `name.lower() in SENSITIVE_QUERY_NAMES` with Python's full Unicode lowercase (the Kelvin
/// sign lowercases to `k`).
fn is_sensitive_name(name: &str) -> bool {
    if name.len() > 3 * 20 {
        return false;
    }
    if name.is_ascii() {
        return SENSITIVE_QUERY_NAMES
            .iter()
            .any(|n| n.eq_ignore_ascii_case(name));
    }
    let lower = name.to_lowercase();
    SENSITIVE_QUERY_NAMES.contains(&lower.as_str())
}

/// The E1 gate. Checks, in order:
/// 1. a secret rule on any form of the URL ([`find_secret`]: Hermes' prefix families, the
///    built-in rules, JWTs, the policy's rule files) → [`DenyReason::SecretInUrl`] naming the
///    rule;
/// 2. Hermes: a sensitive query name with a value, on the normalised URL →
///    [`DenyReason::SensitiveQueryParam`];
/// 3. stricter than Hermes: userinfo in the WHATWG parse (non-empty user name or password) →
///    [`DenyReason::CredentialsInUserinfo`] (vendors are third-party readers of the URL);
/// 4. stricter than Hermes: a sensitive name in a `k=v&…` fragment
///    ([`sensitive_fragment_param_name`]), or in another spelling or after a `;`
///    ([`sensitive_param_any_spelling`]) → [`DenyReason::SensitiveQueryParam`].
#[derive(Clone, Copy, Debug, Default)]
pub struct SecretUrlGate<'a> {
    /// The policy's `secrets:` (extra rule files, their mode, exemptions); `None`: the
    /// built-in rules only.
    pub secrets: Option<&'a SecretsPolicy>,
}

impl Gate for SecretUrlGate<'_> {
    fn name(&self) -> &'static str {
        "secret_url"
    }

    fn check(&self, target: &TargetUrl) -> Verdict {
        let reported = match find_secret(target, self.secrets) {
            Some(Found {
                rule,
                report: false,
            }) => return Verdict::Deny(DenyReason::SecretInUrl { rule }),
            Some(Found { rule, report: true }) => Some(rule),
            None => None,
        };
        // One Python split of the normalised URL serves the three query-name checks (a URL
        // without `?`, `#` or `=` has no name=value pair to check).
        let split = if target.normalized.contains(['?', '#', '=']) {
            target.split()
        } else {
            None
        };
        if let Some(key) = split.as_ref().and_then(query_param_in) {
            return Verdict::Deny(DenyReason::SensitiveQueryParam { key });
        }
        if target.has_userinfo() {
            return Verdict::Deny(DenyReason::CredentialsInUserinfo);
        }
        if let Some(key) = split
            .as_ref()
            .and_then(|parts| fragment_param_in(parts).or_else(|| any_spelling_in(parts)))
        {
            return Verdict::Deny(DenyReason::SensitiveQueryParam { key });
        }
        match reported {
            Some(rule) => Verdict::Report(DenyReason::SecretInUrl { rule }),
            None => Verdict::Allow,
        }
    }
}

/// Host-level secret check (CONNECT and transparent capture see only a host name): the secret
/// rules on the host as sent, its percent-decodings, and its canonical form (lower-cased and
/// IDNA-mapped, fullwidth letters folded, as the resolver would query it) →
/// [`DenyReason::SecretInHost`]. Runs before any DNS query.
pub fn check_host_secret(host: &str) -> Verdict {
    check_host_secret_with(host, None)
}

/// [`check_host_secret`] with the policy's `secrets:`; a rule of a file in report mode gives
/// [`Verdict::Report`].
pub(crate) fn check_host_secret_with(host: &str, secrets: Option<&SecretsPolicy>) -> Verdict {
    let mut forms = vec![host.to_string()];
    let mut form = host.to_string();
    for _ in 0..DECODE_ROUNDS {
        match unquote(&form) {
            Cow::Owned(decoded) => {
                form = decoded;
                forms.push(form.clone());
            }
            Cow::Borrowed(_) => break,
        }
    }
    let canonical: Vec<String> = forms
        .iter()
        .filter_map(|f| match url::Host::parse(f) {
            Ok(url::Host::Domain(d)) => Some(d),
            _ => None,
        })
        .chain(forms.iter().map(|f| f.to_lowercase()))
        .collect();
    forms.extend(canonical);
    match judge(&forms, secrets, false) {
        Some(Found {
            rule,
            report: false,
        }) => Verdict::Deny(DenyReason::SecretInHost { rule }),
        Some(Found { rule, report: true }) => Verdict::Report(DenyReason::SecretInHost { rule }),
        None => Verdict::Allow,
    }
}
