//! The only place where outcomes become HTTP responses.
//!
//! Refusals carry `{"error": {"code", "message"}}` (or Hermes' own body shape on the extract
//! route) and the `x-fleetgate-error: <code>` header. The full error goes to the log; the
//! client gets the short, safe message.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;
use serde_json::{Value, json};

use crate::gates::DenyReason;

/// The response body type of every listener.
pub type Body = Full<Bytes>;

/// Header naming the refusal code on every refused response.
pub const ERROR_HEADER: &str = "x-fleetgate-error";

/// A request-level failure (not a gate decision).
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The body is not what the route expects.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// No such route.
    #[error("no such route: {0}")]
    NotFound(String),
    /// The route exists with another method.
    #[error("method not allowed")]
    MethodNotAllowed,
    /// The request body is over the limit.
    #[error("request body larger than {0} bytes")]
    PayloadTooLarge(usize),
    /// Missing or wrong bearer token.
    #[error("missing or invalid bearer token")]
    Unauthorized,
    /// The endpoint is switched off by policy.
    #[error("{0}")]
    Disabled(String),
    /// Something inside the gate failed.
    #[error("internal error: {0}")]
    Internal(String),
}

// === impl ApiError ===

impl ApiError {
    /// Every code, for the uniqueness test and the README table.
    pub const ALL_CODES: &'static [&'static str] = &[
        "invalid_request",
        "not_found",
        "method_not_allowed",
        "payload_too_large",
        "unauthorized",
        "endpoint_disabled",
        "internal_error",
    ];

    /// Stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidRequest(_) => "invalid_request",
            Self::NotFound(_) => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::PayloadTooLarge(_) => "payload_too_large",
            Self::Unauthorized => "unauthorized",
            Self::Disabled(_) => "endpoint_disabled",
            Self::Internal(_) => "internal_error",
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            Self::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            Self::NotFound(_) | Self::Disabled(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// `{"error": {"code", "message"}}` with the matching status and header.
pub fn api_error(err: &ApiError) -> Response<Body> {
    if matches!(err, ApiError::Internal(_)) {
        tracing::error!(error = %err, code = err.code(), "request failed");
    } else {
        tracing::debug!(error = %err, code = err.code(), "request refused");
    }
    let message = match err {
        // Internals stay in the log.
        ApiError::Internal(_) => "internal error".to_string(),
        other => other.to_string(),
    };
    let mut resp = json(
        err.status(),
        &json!({"error": {"code": err.code(), "message": message}}),
    );
    if err.status() == StatusCode::UNAUTHORIZED {
        resp.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    with_code(resp, err.code())
}

/// A gate refusal of a whole extract call, in Hermes' shape plus the code: 403.
pub fn extract_refusal(reason: &DenyReason) -> Response<Body> {
    let mut body = json!({"success": false, "error": reason.message(), "code": reason.code()});
    if let Some(rule) = reason.rule() {
        body["rule"] = rule.into();
    }
    with_code(json(StatusCode::FORBIDDEN, &body), reason.code())
}

/// A gate refusal on an egress listener: 403 `{"error": {"code", "message"}}`.
pub fn egress_refusal(reason: &DenyReason) -> Response<Body> {
    let mut body = json!({"error": {"code": reason.code(), "message": reason.message()}});
    if let Some(rule) = reason.rule() {
        body["error"]["rule"] = rule.into();
    }
    with_code(json(StatusCode::FORBIDDEN, &body), reason.code())
}

/// A JSON response.
pub fn json(status: StatusCode, value: &Value) -> Response<Body> {
    let bytes = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    let mut resp = Response::new(Full::new(Bytes::from(bytes)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// A plain-text response.
pub fn text(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut resp = Response::new(Full::new(body.into()));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

fn with_code(mut resp: Response<Body>, code: &'static str) -> Response<Body> {
    resp.headers_mut()
        .insert(ERROR_HEADER, HeaderValue::from_static(code));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn api_errors_carry_code_header_and_safe_message() {
        let resp = api_error(&ApiError::Internal("db path /secret/x exploded".into()));
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(resp.headers()[ERROR_HEADER], "internal_error");
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["error"]["code"], "internal_error");
        assert_eq!(
            v["error"]["message"], "internal error",
            "internals must not leak"
        );
    }

    #[test]
    fn all_response_codes_are_unique_across_gates_vendors_and_api() {
        let mut seen = std::collections::HashSet::new();
        let all = DenyReason::ALL_CODES
            .iter()
            .chain(ApiError::ALL_CODES)
            .chain(crate::vendors::VendorFailure::ALL_CODES)
            .chain(&["binary_content"]);
        for code in all {
            assert!(
                seen.insert(*code),
                "code {code} must be unique across all families"
            );
        }
    }
}
