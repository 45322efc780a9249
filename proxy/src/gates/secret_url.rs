//! Gate E1: secret-URL refusal (credential prefixes on four URL forms, sensitive query names,
//! userinfo). A hit refuses the whole call before any network action, DNS included.
//!
//! The first two checks are Hermes' own, with Hermes' exact semantics; the last two are
//! fleetgate's and stricter than Hermes (see [`SecretUrlGate`]).

use std::borrow::Cow;

use super::{DenyReason, Gate, Verdict};
use crate::context::TargetUrl;
use crate::url_form::{self, py_strip, unquote, unquote_plus};

mod prefix;

pub use prefix::find_credential_prefix;

#[cfg(test)]
mod tests;

/// The query names Hermes treats as credential-bearing (compared lowercased after a second
/// percent-decoding). `code`, `key`, `auth`, `session` and `sig` are deliberately absent.
pub const SENSITIVE_QUERY_NAMES: [&str; 20] = [
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
    let parts = url_form::urlsplit(py_strip(url)).ok()?;
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
    let parts = url_form::urlsplit(py_strip(url)).ok()?;
    let fragment = parts.fragment();
    if !fragment.contains('=') {
        return None;
    }
    first_sensitive_pair(fragment).or_else(|| {
        let (_, routed_query) = fragment.split_once('?')?;
        first_sensitive_pair(routed_query)
    })
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
/// 1. Hermes: a credential prefix in any of the four forms → [`DenyReason::SecretInUrl`];
/// 2. Hermes: a sensitive query name with a value, on the normalised URL →
///    [`DenyReason::SensitiveQueryParam`];
/// 3. stricter than Hermes: userinfo in the WHATWG parse (non-empty user name or password) →
///    [`DenyReason::CredentialsInUserinfo`] (vendors are third-party readers of the URL);
/// 4. stricter than Hermes: a sensitive name in a `k=v&…` fragment
///    ([`sensitive_fragment_param_name`]) → [`DenyReason::SensitiveQueryParam`].
#[derive(Clone, Copy, Debug, Default)]
pub struct SecretUrlGate;

impl Gate for SecretUrlGate {
    fn name(&self) -> &'static str {
        "secret_url"
    }

    fn check(&self, target: &TargetUrl) -> Verdict {
        if secret_in_url_forms(&target.raw, &target.normalized) {
            return Verdict::Deny(DenyReason::SecretInUrl);
        }
        if let Some(key) = sensitive_query_param_name(&target.normalized) {
            return Verdict::Deny(DenyReason::SensitiveQueryParam { key });
        }
        let userinfo = target.parsed.as_ref().is_some_and(|u| {
            !u.username().is_empty() || u.password().is_some_and(|p| !p.is_empty())
        });
        if userinfo {
            return Verdict::Deny(DenyReason::CredentialsInUserinfo);
        }
        if let Some(key) = sensitive_fragment_param_name(&target.normalized) {
            return Verdict::Deny(DenyReason::SensitiveQueryParam { key });
        }
        Verdict::Allow
    }
}

/// Host-level secret check (CONNECT and transparent capture see only a host name): the prefix
/// search on the host and on its `unquote` → [`DenyReason::SecretInHost`].
pub fn check_host_secret(host: &str) -> Verdict {
    if has_prefix_decoded(host) {
        Verdict::Deny(DenyReason::SecretInHost)
    } else {
        Verdict::Allow
    }
}
