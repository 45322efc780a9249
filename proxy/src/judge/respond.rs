//! The only place where refusals become HTTP responses, and the only one that sets
//! `x-fleetgate-error`.
//!
//! Every refusal family — the gates' [`DenyReason`], the api's [`ApiError`], the forward
//! proxy's and the capture's refusals, vendor failures, the LLM route's and the watches'
//! errors — implements [`Refusal`]: one stable code, one status, one client-safe message.
//! [`refuse`] renders any of them in one of the wire shapes the gate speaks ([`Shape`]):
//! its own `{"error": {"code", "message"}}`, Hermes' extract body, Firecrawl's, Tavily's and
//! SearXNG's error bodies, OpenAI's and Anthropic's, and plain text. Every shape carries the
//! code in the body and in `x-fleetgate-error: <code>`. The full error goes to the log; the
//! client gets the short, safe message.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;
use serde_json::{Value, json};

use crate::judge::gates::DenyReason;

/// The response body type of every listener.
pub(crate) type Body = Full<Bytes>;

/// Header naming the refusal code on every refused response.
pub(crate) const ERROR_HEADER: &str = "x-fleetgate-error";

/// What every refusal tells the renderer.
pub(crate) trait Refusal {
    /// Stable snake_case code: the body's `code`, `x-fleetgate-error`, metric labels.
    fn code(&self) -> &'static str;
    /// The HTTP status.
    fn status(&self) -> StatusCode;
    /// The message the client sees (never an internal detail or a refused secret).
    fn message(&self) -> String;
    /// The id of the secret rule that decided, if one did.
    fn rule(&self) -> Option<&str> {
        None
    }
    /// Whether the client should retry later (`Retry-After`).
    fn retry_after(&self) -> bool {
        false
    }
    /// The seconds `Retry-After` says, when [`Refusal::retry_after`] holds (default 1).
    fn retry_after_secs(&self) -> u64 {
        1
    }
}

/// The wire shape of a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `{"error": {"code", "message"[, "rule"]}}`: the api's own routes and every egress
    /// listener.
    Error,
    /// Hermes' extract body: `{"success": false, "error", "code"[, "rule"]}`.
    HermesExtract,
    /// Firecrawl's: `{"success": false, "error", "details": "fleetgate: <code>", "code"}`.
    Firecrawl,
    /// Tavily's: `{"detail": {"error", "code"}}`.
    Tavily,
    /// SearXNG's: `{"error", "code"}`.
    Searxng,
    /// OpenAI's: `{"error": {"message", "type", "param", "code"}}`; `param` names the field.
    OpenAi {
        /// The request field at fault.
        param: Option<&'static str>,
    },
    /// Anthropic's: `{"type": "error", "error": {"type", "message"}, "code"}`.
    Anthropic,
    /// `<message>\n` as plain text, not to be cached.
    Text,
}

/// A refusal known only by its code, status and message: a front's row-level failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Coded {
    /// The code.
    pub(crate) code: &'static str,
    /// The status.
    pub(crate) status: StatusCode,
    /// The message.
    pub(crate) message: String,
}

impl Refusal for Coded {
    fn code(&self) -> &'static str {
        self.code
    }
    fn status(&self) -> StatusCode {
        self.status
    }
    fn message(&self) -> String {
        self.message.clone()
    }
}

/// Render `refusal` in `shape`: the body, the status, `x-fleetgate-error`, and `Retry-After`
/// where the refusal asks for it.
pub(crate) fn refuse(refusal: &dyn Refusal, shape: Shape) -> Response<Body> {
    let (code, status, message) = (refusal.code(), refusal.status(), refusal.message());
    let mut resp = match shape {
        Shape::Error => {
            let mut body = json!({"error": {"code": code, "message": message}});
            if let Some(rule) = refusal.rule() {
                body["error"]["rule"] = rule.into();
            }
            json(status, &body)
        }
        Shape::HermesExtract => {
            let mut body = json!({"success": false, "error": message, "code": code});
            if let Some(rule) = refusal.rule() {
                body["rule"] = rule.into();
            }
            json(status, &body)
        }
        Shape::Firecrawl => json(
            status,
            &json!({"success": false, "error": message, "details": format!("fleetgate: {code}"), "code": code}),
        ),
        Shape::Tavily => json(status, &json!({"detail": {"error": message, "code": code}})),
        Shape::Searxng => json(status, &json!({"error": message, "code": code})),
        Shape::OpenAi { param } => json(
            status,
            &json!({"error": {"message": message, "type": openai_type(status), "param": param, "code": code}}),
        ),
        Shape::Anthropic => json(
            status,
            &json!({"type": "error", "error": {"type": anthropic_type(status), "message": message}, "code": code}),
        ),
        Shape::Text => {
            let mut resp = text(status, "text/plain; charset=utf-8", format!("{message}\n"));
            resp.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            resp
        }
    };
    let headers = resp.headers_mut();
    headers.insert(ERROR_HEADER, HeaderValue::from_static(code));
    if refusal.retry_after() {
        headers.insert(
            header::RETRY_AFTER,
            HeaderValue::from(refusal.retry_after_secs()),
        );
    }
    if status == StatusCode::UNAUTHORIZED {
        headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    resp
}

fn openai_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        403 => "permission_error",
        404 => "not_found_error",
        400 | 413 => "invalid_request_error",
        429 => "rate_limit_exceeded",
        _ => "api_error",
    }
}

fn anthropic_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        400 => "invalid_request_error",
        429 => "rate_limit_error",
        _ => "api_error",
    }
}

/// A request-level failure (not a gate decision).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
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
    /// The request body stalled or took too long (`408`, the connection closes).
    #[error("{0}")]
    BodyTimeout(String),
    /// The listener's request bodies hold their budget (`503`, `Retry-After: 1`).
    #[error("{0}")]
    BodyBudgetExhausted(String),
}

impl From<crate::judge::request_body::BodyError> for ApiError {
    fn from(e: crate::judge::request_body::BodyError) -> Self {
        use crate::judge::request_body::BodyError as E;
        match e {
            E::TooLarge(cap) => Self::PayloadTooLarge(cap),
            E::OverBudget { .. } => Self::BodyBudgetExhausted(e.to_string()),
            E::Idle(_) | E::Total(_) => Self::BodyTimeout(e.to_string()),
            E::Read(_) => Self::InvalidRequest(e.to_string()),
        }
    }
}

// === impl ApiError ===

impl ApiError {
    /// Every code, for the uniqueness test and the table in docs/decision-codes.md.
    #[cfg(test)]
    pub(crate) const ALL_CODES: &'static [&'static str] = &[
        "invalid_request",
        "not_found",
        "method_not_allowed",
        "payload_too_large",
        "unauthorized",
        "endpoint_disabled",
        "internal_error",
        "body_timeout",
        "body_budget_exhausted",
    ];

    /// Stable snake_case code.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::InvalidRequest(_) => "invalid_request",
            Self::NotFound(_) => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::PayloadTooLarge(_) => "payload_too_large",
            Self::Unauthorized => "unauthorized",
            Self::Disabled(_) => "endpoint_disabled",
            Self::Internal(_) => "internal_error",
            Self::BodyTimeout(_) => "body_timeout",
            Self::BodyBudgetExhausted(_) => "body_budget_exhausted",
        }
    }
}

impl Refusal for ApiError {
    fn code(&self) -> &'static str {
        ApiError::code(self)
    }
    fn status(&self) -> StatusCode {
        match self {
            Self::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            Self::NotFound(_) | Self::Disabled(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Self::BodyBudgetExhausted(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
    fn message(&self) -> String {
        match self {
            // Internals stay in the log.
            Self::Internal(_) => "internal error".to_string(),
            other => other.to_string(),
        }
    }
    fn retry_after(&self) -> bool {
        matches!(self, Self::BodyBudgetExhausted(_))
    }
}

/// `{"error": {"code", "message"}}` with the matching status and header, logged.
pub(crate) fn api_error(err: &ApiError) -> Response<Body> {
    if matches!(err, ApiError::Internal(_)) {
        tracing::error!(error = %err, code = err.code(), "request failed");
    } else {
        tracing::debug!(error = %err, code = err.code(), "request refused");
    }
    refuse(err, Shape::Error)
}

/// A gate refusal of a whole extract call, in Hermes' shape plus the code: 403.
pub(crate) fn extract_refusal(reason: &DenyReason) -> Response<Body> {
    refuse(reason, Shape::HermesExtract)
}

impl Refusal for DenyReason {
    fn code(&self) -> &'static str {
        DenyReason::code(self)
    }
    fn status(&self) -> StatusCode {
        StatusCode::FORBIDDEN
    }
    fn message(&self) -> String {
        DenyReason::message(self)
    }
    fn rule(&self) -> Option<&str> {
        DenyReason::rule(self)
    }
}

/// A JSON response.
pub(crate) fn json(status: StatusCode, value: &Value) -> Response<Body> {
    let bytes = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    let mut resp = Response::new(Full::new(Bytes::from(bytes)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// [`json()`] for a body already serialized.
pub(crate) fn json_bytes(status: StatusCode, bytes: Vec<u8>) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from(bytes)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// A plain-text response.
pub(crate) fn text(
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

#[cfg(test)]
pub(crate) mod tests;
