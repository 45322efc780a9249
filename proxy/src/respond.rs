//! The only place where outcomes become HTTP responses, and the only one that sets
//! `x-fleetgate-error` ([`tag`]); listeners and fronts shape their bodies and call it.
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
    tag(resp.headers_mut(), code);
    resp
}

/// Name the refusal `code` in the `x-fleetgate-error` header: the one place any response of
/// any listener gets it, so the header and the body's code cannot drift apart.
pub fn tag(headers: &mut http::HeaderMap, code: &'static str) {
    headers.insert(ERROR_HEADER, HeaderValue::from_static(code));
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

    /// Every code any listener answers with, each family's list once.
    fn every_code() -> Vec<&'static str> {
        DenyReason::ALL_CODES
            .iter()
            .chain(ApiError::ALL_CODES)
            .chain(crate::vendors::VendorFailure::ALL_CODES)
            .chain(crate::forward::refusal::ProxyRefusal::OWN_CODES)
            .chain(crate::relay::capture::Refusal::OWN_CODES)
            .chain(crate::llm::LlmError::OWN_CODES)
            .chain(crate::watch::WatchError::ALL_CODES)
            .chain(&["binary_content"])
            .copied()
            .collect()
    }

    #[test]
    fn every_code_is_listed_once_across_all_families() {
        let mut seen = std::collections::HashSet::new();
        for code in every_code() {
            assert!(
                seen.insert(code),
                "code {code} must be unique across all families"
            );
            assert!(
                code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{code} must be snake_case"
            );
        }
    }

    #[test]
    fn no_other_module_sets_the_error_header() {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir)
                .expect("the source tree is readable")
                .flatten()
            {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    out.push(path);
                }
            }
        }
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        walk(&src, &mut files);
        assert!(files.len() > 50, "the walk must see the sources");
        for file in files {
            if file.ends_with("respond.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&file).expect("a source file is readable");
            let compact: String = text.split_whitespace().collect();
            for setter in [
                "insert(ERROR_HEADER",
                "insert(respond::ERROR_HEADER",
                "insert(\"x-fleetgate-error\"",
            ] {
                assert!(
                    !compact.contains(setter),
                    "{} sets x-fleetgate-error itself; call respond::tag",
                    file.display()
                );
            }
        }
    }

    #[test]
    fn the_llm_routes_codes_are_all_listed() {
        use crate::llm::LlmError;
        let errors = [
            LlmError::NotFound(String::new()),
            LlmError::RoleNotConfigured(String::new()),
            LlmError::ModelNotAllowed(String::new()),
            LlmError::ModelMissing(String::new()),
            LlmError::TooLarge(1),
            LlmError::BadRequest(String::new()),
            LlmError::KeyUnavailable(String::new()),
            LlmError::Refused(DenyReason::PortNotAllowed { port: 1 }),
            LlmError::Connect(crate::connect::ConnectError::NoAddress),
            LlmError::Tls(String::new()),
            LlmError::Timeout(1),
            LlmError::Protocol(String::new()),
        ];
        let all = every_code();
        for e in errors {
            assert!(all.contains(&e.code()), "{} must be listed", e.code());
        }
    }
}
