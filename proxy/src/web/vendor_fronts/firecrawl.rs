//! The Firecrawl front: `POST /v2/scrape` and `/v1/scrape`.
//!
//! Request `{"url", "formats": ["markdown", ...], ...}`; success
//! `{"success": true, "data": {"markdown", "metadata": {"title", "sourceURL", "url", "statusCode"}}}`.
//! A refusal is `403 {"success": false, "error": <message>, "details": "fleetgate: <code>",
//! "code"}`: the Firecrawl SDK raises it as `"Website Not Supported: Failed to scrape.
//! <message> - fleetgate: <code>"`, which is what the agent reads.

use http::{Response, StatusCode};
use serde::Serialize;
use serde_json::{Value, json};

use crate::judge::respond::{self, ApiError, Body};
use crate::web::pipeline::{ExtractOutcome, Row};
use crate::web::vendors::html::Scope;

/// A scrape request, as the pipeline takes it.
pub(crate) type Scrape = (Value, Option<Value>, Option<Scope>);

/// Translate a scrape request body into the pipeline's `urls` value, char limit and scope
/// (`onlyMainContent`, Firecrawl's default `true`; absent, the policy decides).
pub(crate) fn parse_scrape(body: &Value) -> Result<Scrape, ApiError> {
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
    let scope = match body.get("onlyMainContent") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(only_main)) => Some(Scope::from_only_main(*only_main)),
        Some(_) => {
            return Err(ApiError::InvalidRequest(
                "`onlyMainContent` must be true or false".into(),
            ));
        }
    };
    Ok((json!([url]), limit, scope))
}

/// The Firecrawl response for one scraped URL.
pub(crate) fn scrape_response(outcome: ExtractOutcome) -> Response<Body> {
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

/// The success body's `data.metadata`, borrowed from the row, fields in this order.
#[derive(Serialize)]
struct Metadata<'a> {
    title: &'a str,
    #[serde(rename = "sourceURL")]
    source_url: &'a str,
    url: &'a str,
    #[serde(rename = "statusCode")]
    status_code: u16,
    #[serde(rename = "cacheState")]
    cache_state: &'static str,
    fleetgate: Provenance<'a>,
}

#[derive(Serialize)]
struct Provenance<'a> {
    cached: bool,
    served_by: Option<&'a str>,
}

/// `{"success": true, "data": {"markdown", "metadata": {"title", "sourceURL", "url",
/// "statusCode", "cacheState", "fleetgate": {"cached", "served_by"}}}}`, written straight into
/// the body: the page through the fast string writer, the metadata through serde_json.
fn success(row: Row) -> Response<Body> {
    let metadata = Metadata {
        title: &row.title,
        source_url: &row.url,
        url: &row.url,
        status_code: row.upstream_status.unwrap_or(200),
        cache_state: if row.cached { "hit" } else { "miss" },
        fleetgate: Provenance {
            cached: row.cached,
            served_by: row.served_by.as_deref(),
        },
    };
    // The content plus a little for escapes, the other fields and the keys.
    let hint = row.content.len() + row.content.len() / 16 + 2 * row.url.len() + row.title.len();
    let mut body = Vec::with_capacity(hint + 256);
    body.extend_from_slice(br#"{"success":true,"data":{"markdown":"#);
    crate::base::json_escape::write_str(&mut body, &row.content);
    body.extend_from_slice(br#","metadata":"#);
    if serde_json::to_writer(&mut body, &metadata).is_err() {
        body = b"{}".to_vec();
    } else {
        body.extend_from_slice(b"}}");
    }
    respond::json_bytes(StatusCode::OK, body)
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
/// upstream failures 502; binary payloads and pages without text 422.
fn status_for(code: &str) -> StatusCode {
    match code {
        "upstream_timeout" => StatusCode::REQUEST_TIMEOUT,
        "binary_content" | "empty_content" => StatusCode::UNPROCESSABLE_ENTITY,
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

    /// The success body as it was built before: a `serde_json::Value` tree.
    fn value_success(row: &Row) -> Vec<u8> {
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
        serde_json::to_vec(&json!({"success": true, "data": data})).expect("serializable")
    }

    async fn body_of(resp: Response<Body>) -> Vec<u8> {
        use http_body_util::BodyExt;
        resp.into_body()
            .collect()
            .await
            .expect("a full body")
            .to_bytes()
            .to_vec()
    }

    #[tokio::test]
    async fn the_success_body_is_byte_for_byte_the_value_built_one() {
        let tricky = [
            "",
            "plain text",
            "quotes \" and 'single' and backslash \\ and slash /",
            "controls \u{0}\u{1}\u{8}\u{9}\u{a}\u{b}\u{c}\u{d}\u{1b}\u{1f} and DEL \u{7f}",
            "non-ASCII: é ü 中文 🦀 \u{feff} and the separators \u{2028} \u{2029}",
            "a lone <script>\"</script> and &amp; and \r\n line ends\n\n[... middle omitted — see footer ...]",
        ];
        let mut cases = 0;
        for (i, text) in tricky.iter().enumerate() {
            for (cached, served_by, status) in [
                (true, Some("firecrawl"), None),
                (false, None, Some(404)),
                (false, Some("weird \"\u{2028}\u{1}"), Some(201)),
            ] {
                let mut row = Row::page(
                    &format!("https://e.example/{i}?q=\"{text}\""),
                    format!("title {text}"),
                    text.repeat(50),
                    "direct",
                    status,
                );
                row.cached = cached;
                row.served_by = served_by.map(str::to_owned);
                let want = value_success(&row);
                let got = body_of(success(row)).await;
                assert_eq!(
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&want),
                    "case {i}: the body must be what the Value tree gave"
                );
                cases += 1;
            }
        }
        assert_eq!(cases, tricky.len() * 3);
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
