//! The Tavily extract front: `POST /tavily/extract` with `{"urls": [...] | "url"}` answered as
//! `{"results": [{url, title, raw_content, images}], "failed_results": [{url, error, code}]}`.
//! A whole-call refusal is `403 {"detail": {"error", "code"}}`, Tavily's error shape.

use http::{Response, StatusCode};
use serde_json::{Value, json};

use crate::judge::respond::{self, ApiError, Body};
use crate::web::pipeline::ExtractOutcome;
use crate::web::vendors::html::Scope;

/// The pipeline's `urls` value and scope from a Tavily extract body: `extract_depth`
/// `basic` is the main content, `advanced` the whole page; absent, the policy decides.
pub(crate) fn parse_extract(body: &Value) -> Result<(Value, Option<Scope>), ApiError> {
    let urls = match body.get("urls") {
        Some(Value::String(u)) => json!([u]),
        Some(list @ Value::Array(_)) => list.clone(),
        _ => {
            return Err(ApiError::InvalidRequest(
                "`urls` must be a URL or a list of URLs".into(),
            ));
        }
    };
    let scope = match body.get("extract_depth") {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) if d == "basic" => Some(Scope::Main),
        Some(Value::String(d)) if d == "advanced" => Some(Scope::Full),
        Some(_) => {
            return Err(ApiError::InvalidRequest(
                "`extract_depth` must be \"basic\" or \"advanced\"".into(),
            ));
        }
    };
    Ok((urls, scope))
}

/// Shape an extract outcome the way Tavily answers.
pub(crate) fn extract_response(outcome: ExtractOutcome) -> Response<Body> {
    let rows = match outcome {
        ExtractOutcome::Refused(reason) => {
            return respond::refuse(&reason, respond::Shape::Tavily);
        }
        ExtractOutcome::Rows(rows) => rows,
    };
    let (ok, failed): (Vec<_>, Vec<_>) = rows.into_iter().partition(|r| r.error.is_none());
    respond::json(
        StatusCode::OK,
        &json!({
            "results": ok.iter().map(|r| json!({
                "url": r.url, "title": r.title, "raw_content": r.content, "images": [],
                "cached": r.cached, "served_by": r.served_by,
            })).collect::<Vec<_>>(),
            "failed_results": failed.iter().map(|r| json!({
                "url": r.url, "error": r.error, "code": r.code, "blocked_by_policy": r.blocked_by_policy,
            })).collect::<Vec<_>>(),
            "response_time": 0.0,
        }),
    )
}
