//! Result rows: Hermes' `{url, title, content, error}` plus fleetgate's provenance fields, and
//! the constructors the pipeline uses for each outcome.

use serde::Serialize;

use crate::gates::DenyReason;
use crate::vendors::{Backend, VendorFailure};

/// One row of an extract result, in Hermes' shape plus fleetgate's fields.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The (normalised) URL; empty for invalid items.
    pub url: String,
    /// Page title.
    pub title: String,
    /// Assembled page text (truncated with footer when over the limit).
    pub content: String,
    /// Error message, `null` on success.
    pub error: Option<String>,
    /// Set when the website blocklist refused the item.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked_by_policy: Option<PolicyBlock>,
    /// Stable code of the error (fleetgate field).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
    /// Whether the content came from the shared cache (fleetgate field).
    pub cached: bool,
    /// Age of the cached copy in seconds, on a cache hit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_age_s: Option<u64>,
    /// The backend that produced the content (fleetgate field).
    pub served_by: Option<String>,
    /// The configured backend that failed when a rescue backend served this row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rescued_from: Option<String>,
    /// The configured backend's error (first 300 characters) on a rescued row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_error: Option<String>,
    /// The upstream HTTP status of the page, when one was fetched (vendor fronts report it).
    #[serde(skip)]
    pub upstream_status: Option<u16>,
}

/// The `blocked_by_policy` object of a row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PolicyBlock {
    /// Canonical host.
    pub host: String,
    /// Matching rule.
    pub rule: String,
    /// `config` or the shared file path.
    pub source: String,
}

// === impl Row ===

impl Row {
    fn empty(url: &str) -> Self {
        Self {
            url: url.to_string(),
            title: String::new(),
            content: String::new(),
            error: None,
            blocked_by_policy: None,
            code: None,
            cached: false,
            cache_age_s: None,
            served_by: None,
            rescued_from: None,
            backend_error: None,
            upstream_status: None,
        }
    }

    /// A page served by `backend`.
    pub fn page(
        url: &str,
        title: String,
        content: String,
        backend: &str,
        status: Option<u16>,
    ) -> Self {
        Self {
            title,
            content,
            served_by: Some(backend.to_string()),
            upstream_status: status,
            ..Self::empty(url)
        }
    }

    /// A gate refusal.
    pub fn denied(url: &str, reason: &DenyReason) -> Self {
        let blocked_by_policy = match reason {
            DenyReason::BlockedByPolicy { host, rule, source } => Some(PolicyBlock {
                host: host.clone(),
                rule: rule.clone(),
                source: source.clone(),
            }),
            _ => None,
        };
        Self {
            error: Some(reason.message()),
            code: Some(reason.code()),
            blocked_by_policy,
            ..Self::empty(url)
        }
    }

    /// A backend failure; a refused redirect hop or final URL reads as the gate's refusal.
    pub fn failed(url: &str, failure: &VendorFailure, backend: &Backend) -> Self {
        if let VendorFailure::Refused(reason) = failure {
            return Self::denied(url, reason);
        }
        let error = match backend {
            Backend::Direct(_) => format!("Direct fetch failed: {failure}"),
            _ => failure.to_string(),
        };
        Self {
            error: Some(error),
            code: Some(failure.code()),
            served_by: Some(backend.name().to_string()),
            upstream_status: match failure {
                VendorFailure::HttpStatus { status } => Some(*status),
                _ => None,
            },
            ..Self::empty(url)
        }
    }

    /// An assembly refusal (binary payload) of a fetched page.
    pub fn unassembled(url: &str, message: String, backend: &str, status: Option<u16>) -> Self {
        Self {
            error: Some(message),
            code: Some("binary_content"),
            served_by: Some(backend.to_string()),
            upstream_status: status,
            ..Self::empty(url)
        }
    }

    /// Whether the row carries an error.
    pub fn is_error(&self) -> bool {
        self.error.is_some()
    }
}
