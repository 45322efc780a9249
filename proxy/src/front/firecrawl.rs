//! The Firecrawl front: `POST /v2/scrape` and `/v1/scrape`.
//!
//! Request `{"url", "formats": ["markdown", ...], ...}`; success
//! `{"success": true, "data": {"markdown", "metadata": {"title", "sourceURL", "url", "statusCode"}}}`.
//! A refusal is `403 {"success": false, "error": <message>, "details": "fleetgate: <code>",
//! "code"}`: the Firecrawl SDK raises it as "Website Not Supported: Failed to scrape.
//! <message> - fleetgate: <code>", which is what the agent reads.

use http::{Response, StatusCode};
use serde_json::{Value, json};

use crate::pipeline::{ExtractOutcome, Row};
use crate::respond::{self, ApiError, Body};

/// Translate a scrape request body into the pipeline's `urls` value and char limit.
pub fn parse_scrape(body: &Value) -> Result<(Value, Option<Value>), ApiError> {
    let url = body
        .get("url")
        .and_then(Value::as_str)
        .filter(|u| !u.trim().is_empty())
        .ok_or_else(|| ApiError::InvalidRequest("`url` must be a non-empty string".into()))?;
    if let Some(formats) = body.get("formats") {
        let known = formats.as_array().is_some_and(|f| {
            f.iter()
                .all(|x| x.as_str().is_some() || x.get("type").and_then(Value::as_str).is_some())
        });
        if !known {
            return Err(ApiError::InvalidRequest(
                "`formats` must be a list of format names".into(),
            ));
        }
    }
    // Firecrawl has no char budget; the gate's policy default applies unless the caller asks.
    let limit = body.get("fleetgate_char_limit").cloned();
    Ok((json!([url]), limit))
}

/// The Firecrawl response for one scraped URL.
pub fn scrape_response(outcome: ExtractOutcome) -> Response<Body> {
    let row = match outcome {
        ExtractOutcome::Refused(reason) => {
            return refusal(reason.code(), &reason.message(), StatusCode::FORBIDDEN);
        }
        ExtractOutcome::Rows(mut rows) if !rows.is_empty() => rows.swap_remove(0),
        ExtractOutcome::Rows(_) => {
            return respond::api_error(&ApiError::InvalidRequest("no URL to scrape".into()));
        }
    };
    match (&row.error, row.code) {
        (Some(message), code) => {
            let code = code.unwrap_or("internal_error");
            refusal(code, message, status_for(code))
        }
        (None, _) => success(row),
    }
}

fn success(row: Row) -> Response<Body> {
    let status = row.upstream_status.unwrap_or(200);
    let data = json!({
        "markdown": row.content,
        "metadata": {
            "title": row.title,
            "sourceURL": row.url,
            "url": row.url,
            "statusCode": status,
            "cacheState": if row.cached { "hit" } else { "miss" },
            "fleetgate": {"cached": row.cached, "served_by": row.served_by},
        },
    });
    respond::json(StatusCode::OK, &json!({"success": true, "data": data}))
}

fn refusal(code: &'static str, message: &str, status: StatusCode) -> Response<Body> {
    let coded = respond::Coded {
        code,
        status,
        message: message.to_string(),
    };
    respond::refuse(&coded, respond::Shape::Firecrawl)
}

/// Gate refusals are 403; upstream timeouts 408 (Firecrawl's own timeout status); other
/// upstream failures 502; binary payloads 422.
fn status_for(code: &str) -> StatusCode {
    match code {
        "upstream_timeout" => StatusCode::REQUEST_TIMEOUT,
        "binary_content" => StatusCode::UNPROCESSABLE_ENTITY,
        c if c.starts_with("upstream_") || c == "too_many_redirects" => StatusCode::BAD_GATEWAY,
        _ => StatusCode::FORBIDDEN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrape_requests_need_a_url_and_list_formats() {
        let ok = parse_scrape(&json!({"url": " https://a.example/ ", "formats": ["markdown"]}))
            .expect("a normal scrape must parse");
        assert_eq!(ok.0, json!([" https://a.example/ "]));
        assert!(
            parse_scrape(&json!({"formats": ["markdown"]})).is_err(),
            "url is required"
        );
        assert!(
            parse_scrape(&json!({"url": ""})).is_err(),
            "a blank url is refused"
        );
        assert!(parse_scrape(&json!({"url": "x", "formats": "markdown"})).is_err());
        assert!(
            parse_scrape(&json!({"url": "x", "formats": [{"type": "screenshot"}]})).is_ok(),
            "object formats of v2 are accepted (only markdown is produced)"
        );
    }

    #[test]
    fn statuses_follow_the_failure_class() {
        assert_eq!(status_for("ip_private_range"), StatusCode::FORBIDDEN);
        assert_eq!(status_for("blocked_by_policy"), StatusCode::FORBIDDEN);
        assert_eq!(status_for("upstream_timeout"), StatusCode::REQUEST_TIMEOUT);
        assert_eq!(status_for("upstream_http_status"), StatusCode::BAD_GATEWAY);
        assert_eq!(
            status_for("binary_content"),
            StatusCode::UNPROCESSABLE_ENTITY
        );
    }
}
