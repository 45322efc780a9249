//! Result rows: Hermes' `{url, title, content, error}` plus fleetgate's provenance fields, and
//! the constructors the pipeline uses for each outcome.

use serde::Serialize;

use crate::base::json_escape as escape;

use crate::judge::gates::DenyReason;
use crate::web::vendors::{Backend, VendorFailure};

/// One row of an extract result, in Hermes' shape plus fleetgate's fields.
///
/// [`Results::to_json`] writes rows without this derive for `url`, `title` and `content`, and
/// through [`RowTail`] for the rest: a new field goes in both (the byte-for-byte test catches
/// a miss).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Row {
    /// The (normalised) URL; empty for invalid items.
    pub(crate) url: String,
    /// Page title.
    pub(crate) title: String,
    /// Assembled page text (truncated with footer when over the limit).
    pub(crate) content: String,
    /// Error message, `null` on success.
    pub(crate) error: Option<String>,
    /// Set when the website blocklist refused the item.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) blocked_by_policy: Option<PolicyBlock>,
    /// Stable code of the error (fleetgate field).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) code: Option<&'static str>,
    /// Whether the content came from the shared cache (fleetgate field).
    pub(crate) cached: bool,
    /// Age of the cached copy in seconds, on a cache hit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cache_age_s: Option<u64>,
    /// The backend that produced the content (fleetgate field).
    pub(crate) served_by: Option<String>,
    /// The configured backend that failed when a rescue backend served this row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) rescued_from: Option<String>,
    /// The configured backend's error (first 300 characters) on a rescued row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) backend_error: Option<String>,
    /// The upstream HTTP status of the page, when one was fetched (vendor fronts report it).
    #[serde(skip)]
    pub(crate) upstream_status: Option<u16>,
}

/// The `/v1/extract` success body, `{"results": [...]}`, written from the borrowed rows
/// (the same bytes as through a `serde_json::Value`, without that copy of every page).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Results<'a> {
    /// The rows, in input order.
    pub(crate) results: &'a [Row],
}

fn is_none<T>(field: &&Option<T>) -> bool {
    field.is_none()
}

/// A row's fields after `content`, as the derive writes them.
#[derive(Serialize)]
struct RowTail<'a> {
    error: &'a Option<String>,
    #[serde(skip_serializing_if = "is_none")]
    blocked_by_policy: &'a Option<PolicyBlock>,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<&'static str>,
    cached: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_age_s: Option<u64>,
    served_by: &'a Option<String>,
    #[serde(skip_serializing_if = "is_none")]
    rescued_from: &'a Option<String>,
    #[serde(skip_serializing_if = "is_none")]
    backend_error: &'a Option<String>,
}

/// The `blocked_by_policy` object of a row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct PolicyBlock {
    /// Canonical host.
    pub(crate) host: String,
    /// Matching rule.
    pub(crate) rule: String,
    /// `config` or the shared file path.
    pub(crate) source: String,
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
    pub(crate) fn page(
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
    pub(crate) fn denied(url: &str, reason: &DenyReason) -> Self {
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
    pub(crate) fn failed(url: &str, failure: &VendorFailure, backend: &Backend) -> Self {
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
    pub(crate) fn unassembled(
        url: &str,
        message: String,
        backend: &str,
        status: Option<u16>,
    ) -> Self {
        Self {
            error: Some(message),
            code: Some("binary_content"),
            served_by: Some(backend.to_string()),
            upstream_status: status,
            ..Self::empty(url)
        }
    }
}

// === impl Results ===

impl Results<'_> {
    /// The body: what `serde_json::to_vec(self)` gives, with the strings of each row's `url`,
    /// `title` and `content` through the fast writer.
    pub(crate) fn to_json(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.size_hint());
        out.extend_from_slice(br#"{"results":["#);
        for (i, row) in self.results.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(br#"{"url":"#);
            escape::write_str(&mut out, &row.url);
            out.extend_from_slice(br#","title":"#);
            escape::write_str(&mut out, &row.title);
            out.extend_from_slice(br#","content":"#);
            escape::write_str(&mut out, &row.content);
            let tail = RowTail {
                error: &row.error,
                blocked_by_policy: &row.blocked_by_policy,
                code: row.code,
                cached: row.cached,
                cache_age_s: row.cache_age_s,
                served_by: &row.served_by,
                rescued_from: &row.rescued_from,
                backend_error: &row.backend_error,
            };
            // `{"error":...}` (never empty: `error` is always written) continues the row.
            let start = out.len();
            if serde_json::to_writer(&mut out, &tail).is_err() {
                return b"{}".to_vec();
            }
            out[start] = b',';
        }
        out.extend_from_slice(b"]}");
        out
    }

    /// About how many bytes the body takes: the contents plus a little for escapes and fields.
    pub(crate) fn size_hint(&self) -> usize {
        self.results
            .iter()
            .map(|r| r.content.len() + r.content.len() / 16 + r.url.len() + r.title.len() + 256)
            .sum::<usize>()
            + 16
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_results_body_is_byte_for_byte_the_value_built_one() {
        let tricky = "quotes \" \\ controls \u{0}\u{8}\u{9}\u{a}\u{c}\u{d}\u{1f}\u{7f} non-ASCII é 🦀 \u{2028}\u{2029}";
        let mut hit = Row::page(
            "https://e.example/a?\"",
            format!("title {tricky}"),
            tricky.repeat(40),
            "firecrawl",
            Some(200),
        );
        hit.cached = true;
        hit.cache_age_s = Some(17);
        let mut rescued = Row::page(
            "https://e.example/b",
            String::new(),
            "x".into(),
            "tavily",
            None,
        );
        rescued.rescued_from = Some("firecrawl".into());
        rescued.backend_error = Some(format!("failed: {tricky}"));
        let denied = Row::denied(
            "https://blocked.example/",
            &DenyReason::BlockedByPolicy {
                host: "blocked.example".into(),
                rule: "blocked.example".into(),
                source: "config".into(),
            },
        );
        for rows in [vec![], vec![hit.clone()], vec![hit, rescued, denied]] {
            let want = serde_json::to_vec(&json!({ "results": rows })).expect("serializable");
            let got = Results { results: &rows }.to_json();
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "the borrowed body must be what the Value tree gave"
            );
        }
    }
}
