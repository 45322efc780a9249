//! The search pipeline: limit clamp → strict backend (settled at load) → memo → vendor call at
//! the bucketed limit → slice to the caller's limit.
//!
//! Search has no URL to gate (Hermes applies no SSRF, secret or blocklist check to a query);
//! result URLs come back unfiltered, and any later fetch of them goes through extract.

use serde_json::Value;
use tokio::time::Instant;

use super::Pipeline;
use crate::vendors::SearchHit;

/// Hermes' default search limit.
pub const DEFAULT_SEARCH_LIMIT: usize = 5;
/// Hermes' largest search limit.
pub const MAX_SEARCH_LIMIT: usize = 100;

/// What a search call produced.
#[derive(Clone, Debug, PartialEq)]
pub enum SearchOutcome {
    /// Rows, at most the caller's limit.
    Hits {
        /// The rows, in the backend's order and key order.
        hits: Vec<SearchHit>,
        /// The backend that served them.
        served_by: &'static str,
        /// Whether they came from the memo.
        cached: bool,
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
pub fn clamp_search_limit(value: Option<&Value>) -> usize {
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
    pub async fn search(&self, query: &str, limit: Option<&Value>) -> SearchOutcome {
        let limit = clamp_search_limit(limit);
        let query = query.trim();
        if query.is_empty() {
            return SearchOutcome::Failed {
                code: "invalid_request",
                message: "query is required".into(),
            };
        }
        let Some(backend) = &self.rt.backends.search else {
            return SearchOutcome::Failed {
                code: "vendor_not_configured",
                message: "No web search provider configured. Set web.searchBackend in the fleetgate policy.".into(),
            };
        };
        let started = Instant::now();
        // The vendor is asked for the bucketed limit; the memo keys on (backend, query, bucket)
        // and keeps only successes; the caller gets its own limit.
        let (result, cached) = self
            .rt
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
            Ok(mut hits) => {
                hits.truncate(limit);
                SearchOutcome::Hits {
                    hits,
                    served_by: backend.name(),
                    cached,
                }
            }
            Err(failure) => SearchOutcome::Failed {
                code: failure.code(),
                message: failure.to_string(),
            },
        };
        let label = match &outcome {
            SearchOutcome::Hits { cached: true, .. } => "memo_hit",
            SearchOutcome::Hits { .. } => "ok",
            SearchOutcome::Failed { code, .. } => code,
        };
        self.metrics.searches.with_label_values(&[label]).inc();
        outcome
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
