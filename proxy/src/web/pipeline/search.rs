//! The search pipeline: limit clamp → strict backend (settled at load) → memo → vendor call at
//! the bucketed limit → rescue when it failed → slice to the caller's limit.
//!
//! Rescue walks `web.rescue` for entries that can search (the keyless ring pinned at the
//! failed backend, or a named backend); a rescued answer names the backend that failed and is
//! never memoized, so the next call asks the configured backend again.
//!
//! Search has no URL to gate (Hermes applies no SSRF, secret or blocklist check to a query);
//! result URLs come back unfiltered, and any later fetch of them goes through extract.

use serde_json::Value;
use tokio::time::Instant;

use super::Pipeline;
use super::fetch::{BACKEND_ERROR_CHARS, rescue_failed_suffix};
use crate::web::cache::memo;
use crate::web::vendors::{Backend, SearchHit, Searched, VendorFailure, keyless::Start};

/// Hermes' default search limit.
pub(crate) const DEFAULT_SEARCH_LIMIT: usize = 5;
/// Hermes' largest search limit.
pub(crate) const MAX_SEARCH_LIMIT: usize = 100;

/// What a search call produced.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum SearchOutcome {
    /// Rows, at most the caller's limit.
    Hits {
        /// The rows, in the backend's order and key order.
        hits: Vec<SearchHit>,
        /// The backend that served them (a ring member when the keyless ring did).
        served_by: &'static str,
        /// Whether they came from the memo.
        cached: bool,
        /// The configured backend, when a rescue backend served this call.
        rescued_from: Option<&'static str>,
        /// Why the configured backend failed, on a rescued call.
        backend_error: Option<String>,
    },
    /// The search failed; `message` is the backend's (or the gate's) text.
    Failed {
        /// Stable code.
        code: &'static str,
        /// Message for the agent.
        message: String,
    },
}

/// Hermes' limit coercion: an integer (or integral float / numeric string) clamped to 1..=100,
/// anything else the default 5.
pub(crate) fn clamp_search_limit(value: Option<&Value>) -> usize {
    let n = match value {
        Some(Value::Number(n)) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Some(Value::String(s)) => s.trim().parse::<i64>().ok(),
        Some(Value::Bool(b)) => Some(i64::from(*b)),
        _ => None,
    };
    match n {
        Some(n) => n.clamp(1, MAX_SEARCH_LIMIT as i64) as usize,
        None => DEFAULT_SEARCH_LIMIT,
    }
}

impl Pipeline<'_> {
    /// Run a search for `query` with the caller's `limit`.
    pub(crate) async fn search(&self, query: &str, limit: Option<&Value>) -> SearchOutcome {
        let limit = clamp_search_limit(limit);
        let query = query.trim();
        if query.is_empty() {
            return SearchOutcome::Failed {
                code: "invalid_request",
                message: "query is required".into(),
            };
        }
        let Some(backend) = &self.web.backends.search else {
            return SearchOutcome::Failed {
                code: "vendor_not_configured",
                message: "No web search provider configured. Set web.searchBackend in the fleetgate policy.".into(),
            };
        };
        let started = Instant::now();
        // The vendor is asked for the bucketed limit; the memo keys on (backend, query, bucket)
        // and keeps only successes; the caller gets its own limit.
        let (result, cached) = self
            .web
            .search_memo
            .get_or_fetch(backend.name(), query, limit, |bucket| {
                backend.search(query, bucket)
            })
            .await;
        if !cached {
            let status = result.as_ref().ok().map(|_| 200);
            self.observe_vendor(backend, status, started);
        }
        let outcome = match result {
            Ok(searched) => hits(searched, limit, cached, None),
            Err(failure) => self.rescue_search(backend, query, limit, failure).await,
        };
        let label = match &outcome {
            SearchOutcome::Hits { cached: true, .. } => "memo_hit",
            SearchOutcome::Hits {
                rescued_from: Some(_),
                ..
            } => "rescued",
            SearchOutcome::Hits { .. } => "ok",
            SearchOutcome::Failed { code, .. } => code,
        };
        self.metrics.searches.with_label_values(&[label]).inc();
        outcome
    }
}

impl Pipeline<'_> {
    /// The configured search backend failed: try each rescue entry that can search, in order.
    async fn rescue_search(
        &self,
        primary: &Backend,
        query: &str,
        limit: usize,
        failure: VendorFailure,
    ) -> SearchOutcome {
        let original = failure.to_string();
        let rescuers: Vec<&Backend> = self
            .web
            .backends
            .rescue
            .iter()
            .filter(|b| b.capabilities().search && b.name() != primary.name())
            .collect();
        if rescuers.is_empty() {
            return SearchOutcome::Failed {
                code: failure.code(),
                message: original,
            };
        }
        let bucket = memo::bucket(limit);
        let mut last_error = String::from("unknown");
        for rescuer in &rescuers {
            let started = Instant::now();
            let result = match rescuer {
                Backend::Ring(ring) => ring.search(Start::rescuing(primary), query, bucket).await,
                other => other.search(query, bucket).await,
            };
            self.observe_vendor(rescuer, result.as_ref().ok().map(|_| 200), started);
            match result {
                Ok(searched) => {
                    self.count_rescue_kind("search", primary, rescuer, "served");
                    let by = match rescuer {
                        Backend::Ring(_) => "the keyless free tier".to_string(),
                        other => format!("'{}'", other.name()),
                    };
                    let excerpt: String = original.chars().take(BACKEND_ERROR_CHARS).collect();
                    let note = format!(
                        "Configured backend '{p}' failed this call ({excerpt}); result served by \
                         {by}. The next call will use '{p}' again.",
                        p = primary.name()
                    );
                    return hits(searched, limit, false, Some((primary.name(), note)));
                }
                Err(e) => {
                    self.count_rescue_kind("search", primary, rescuer, "failed");
                    last_error = e.to_string();
                }
            }
        }
        let names: Vec<&str> = rescuers.iter().map(|b| b.name()).collect();
        SearchOutcome::Failed {
            code: failure.code(),
            message: format!("{original}{}", rescue_failed_suffix(&names, &last_error)),
        }
    }
}

/// The caller's rows of a successful search.
fn hits(
    searched: Searched,
    limit: usize,
    cached: bool,
    rescued: Option<(&'static str, String)>,
) -> SearchOutcome {
    let Searched {
        mut hits,
        served_by,
    } = searched;
    hits.truncate(limit);
    let (rescued_from, backend_error) = match rescued {
        Some((from, note)) => (Some(from), Some(note)),
        None => (None, None),
    };
    SearchOutcome::Hits {
        hits,
        served_by: served_by.name(),
        cached,
        rescued_from,
        backend_error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn search_limits_are_clamped_like_hermes() {
        let cases = [
            (None, 5),
            (Some(json!(0)), 1),
            (Some(json!(7)), 7),
            (Some(json!(250)), 100),
            (Some(json!(3.9)), 3),
            (Some(json!("12")), 12),
            (Some(json!("many")), 5),
            (Some(json!(null)), 5),
        ];
        for (input, want) in cases {
            assert_eq!(clamp_search_limit(input.as_ref()), want, "limit {input:?}");
        }
    }
}
