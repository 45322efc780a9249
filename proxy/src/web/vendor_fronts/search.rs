//! Search fronts: fleetgate's native `POST /v1/search`, Firecrawl `POST /v2/search` and
//! `/v1/search`, Tavily `POST /tavily/search`, SearXNG `GET /searxng/search?q=..&format=json`.
//! One pipeline ([`Pipeline::search`](crate::web::pipeline::Pipeline::search)); each front only reshapes its outcome.

use http::{Response, StatusCode};
use serde_json::{Value, json};

use crate::judge::respond::{self, ApiError, Body};
use crate::web::pipeline::search::SearchOutcome;

/// The search shapes the api listener speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SearchShape {
    /// `{"success": true, "data": {"web": [...]}, "served_by", "cached"}` (Hermes' own shape;
    /// a rescued answer adds `data.rescued_from` and `data.backend_error`).
    Native,
    /// Firecrawl v2: `{"success": true, "data": {"web": [{url,title,description,position}]}}`.
    FirecrawlV2,
    /// Tavily: `{"query", "results": [{title,url,content,score}], "response_time"}`.
    Tavily,
    /// SearXNG: `{"query", "number_of_results", "results": [{title,url,content,score,engine}]}`.
    Searxng,
}

/// The query and limit of a JSON search body (`query`, then `limit` or Tavily's `max_results`).
pub(crate) fn parse_body(body: &Value) -> Result<(String, Option<Value>), ApiError> {
    let query = body
        .get("query")
        .and_then(Value::as_str)
        .filter(|q| !q.trim().is_empty())
        .ok_or_else(|| ApiError::InvalidRequest("`query` must be a non-empty string".into()))?;
    let limit = body
        .get("limit")
        .or_else(|| body.get("max_results"))
        .cloned();
    Ok((query.to_string(), limit))
}

/// The query of a SearXNG `GET /search?q=..&format=json` request.
pub(crate) fn parse_searxng_query(query: Option<&str>) -> Result<String, ApiError> {
    let pairs = url::form_urlencoded::parse(query.unwrap_or("").as_bytes());
    let mut q = None;
    for (k, v) in pairs {
        match k.as_ref() {
            "q" => q = Some(v.into_owned()),
            "format" if v != "json" => {
                return Err(ApiError::InvalidRequest(
                    "only format=json is served".into(),
                ));
            }
            _ => {}
        }
    }
    q.filter(|q| !q.trim().is_empty())
        .ok_or_else(|| ApiError::InvalidRequest("the `q` parameter is required".into()))
}

/// Shape a search outcome for `shape`.
pub(crate) fn respond(shape: SearchShape, query: &str, outcome: SearchOutcome) -> Response<Body> {
    let (hits, served_by, cached, rescue) = match outcome {
        SearchOutcome::Hits {
            hits,
            served_by,
            cached,
            rescued_from,
            backend_error,
        } => (hits, served_by, cached, rescued_from.zip(backend_error)),
        SearchOutcome::Failed { code, message } => return failure(shape, code, &message),
    };
    let score = |i: usize| 1.0 - (i as f64) / (hits.len().max(1) as f64 * 2.0);
    let body = match shape {
        SearchShape::Native => {
            let mut data = json!({"web": hits});
            // Hermes marks a rescued answer in `data`: the backend that failed and why.
            if let Some((from, note)) = rescue {
                data["rescued_from"] = json!(from);
                data["backend_error"] = json!(note);
            }
            json!({
                "success": true,
                "data": data,
                "served_by": served_by,
                "cached": cached,
            })
        }
        SearchShape::FirecrawlV2 => {
            json!({"success": true, "data": {"web": hits.iter().map(|h| json!({
            "url": h.url, "title": h.title, "description": h.description, "position": h.position,
        })).collect::<Vec<_>>()}})
        }
        SearchShape::Tavily => json!({
            "query": query,
            "answer": null,
            "images": [],
            "follow_up_questions": null,
            "results": hits.iter().enumerate().map(|(i, h)| json!({
                "title": h.title, "url": h.url, "content": h.description, "score": score(i), "raw_content": null,
            })).collect::<Vec<_>>(),
            "response_time": 0.0,
        }),
        SearchShape::Searxng => json!({
            "query": query,
            "number_of_results": hits.len(),
            "results": hits.iter().enumerate().map(|(i, h)| json!({
                "title": h.title, "url": h.url, "content": h.description, "score": score(i), "engine": served_by,
            })).collect::<Vec<_>>(),
            "answers": [], "corrections": [], "infoboxes": [], "suggestions": [], "unresponsive_engines": [],
        }),
    };
    respond::json(StatusCode::OK, &body)
}

/// A failed search in each vendor's error shape, with fleetgate's message and code.
fn failure(shape: SearchShape, code: &'static str, message: &str) -> Response<Body> {
    let status = match code {
        "invalid_request" => StatusCode::BAD_REQUEST,
        "vendor_not_configured" | "vendor_capability_missing" => StatusCode::SERVICE_UNAVAILABLE,
        "vendor_timeout" => StatusCode::GATEWAY_TIMEOUT,
        _ => StatusCode::BAD_GATEWAY,
    };
    let wire = match shape {
        SearchShape::Native | SearchShape::FirecrawlV2 => respond::Shape::Firecrawl,
        SearchShape::Tavily => respond::Shape::Tavily,
        SearchShape::Searxng => respond::Shape::Searxng,
    };
    let coded = respond::Coded {
        code,
        status,
        message: message.to_string(),
    };
    respond::refuse(&coded, wire)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_and_searxng_queries_parse() {
        let (q, l) = parse_body(&json!({"query": "rust", "max_results": 3})).expect("tavily body");
        assert_eq!((q.as_str(), l), ("rust", Some(json!(3))));
        assert!(parse_body(&json!({"query": "  "})).is_err());
        assert_eq!(
            parse_searxng_query(Some("q=hello+world&format=json&pageno=1")).unwrap(),
            "hello world"
        );
        assert!(
            parse_searxng_query(Some("q=x&format=html")).is_err(),
            "only JSON is served"
        );
        assert!(parse_searxng_query(None).is_err());
    }
}
