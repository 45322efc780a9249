//! The LLM route: `/llm/<role>/...` on the api listener reverse-proxies an agent's provider
//! calls to the provider `llm.roles.<role>` names, so the gate sees — per role — the model,
//! the reasoning effort and the service tier really sent, and the tier really served.
//!
//! Roles are `main`, `delegation`, `cron` and `auxiliary/<task>` (observed as
//! `auxiliary:<task>`, the observer's name). The gate holds the provider key and adds it;
//! any key the agent sends is dropped. The request body is buffered (bounded) to be read and,
//! in enforce mode, rewritten; the response streams back frame by frame, SSE included, with
//! the served tier scanned as it passes ([`tier`]). [`proxy`] is the request path,
//! [`enforce`] the refusals and pins, [`store`] the last observation per role.

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full};

use crate::dialer::ConnectError;
use crate::gates::DenyReason;
use crate::policy::llm::{ProviderKind, role_key};
use crate::respond::{self, Refusal, Shape};
use crate::state::GateState;

use std::sync::Arc;

pub mod body;
pub mod endpoint;
pub mod enforce;
pub mod judge;
pub mod metrics;
pub mod observations;
pub mod observe;
pub mod path;
pub mod proxy;
pub mod scan;
pub mod tier;
pub mod upstream;

pub use proxy::handle;

/// Path prefix of the route.
pub const PREFIX: &str = "/llm/";

/// Body type of every api-listener response once the LLM route streams.
pub type LlmBody =
    http_body_util::combinators::BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// Live state of the route: the observations, the metrics and the upstream pool.
#[derive(Debug)]
pub struct LlmState {
    /// Last observation per role.
    pub observations: observations::ObservationStore,
    /// Metrics.
    pub metrics: metrics::LlmMetrics,
    /// TLS and kept connections.
    pub upstreams: upstream::Upstreams,
}

/// What one LLM request reads: the gate's state and the route's own.
#[derive(Clone, Debug)]
pub struct LlmContext {
    /// The runtime, the gate metrics, the bound listeners.
    pub gate: Arc<GateState>,
    /// Observations, route metrics, the upstream pool.
    pub llm: Arc<LlmState>,
}

// === impl LlmState ===

impl LlmState {
    /// Fresh state with metrics registered in `reg`.
    pub fn register(reg: &prometheus::Registry) -> prometheus::Result<Self> {
        Ok(Self {
            observations: observations::ObservationStore::new(),
            metrics: metrics::LlmMetrics::register(reg)?,
            upstreams: upstream::Upstreams::new(),
        })
    }
}

/// A parsed `/llm/<role>/<rest>` path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// Role key (`main`, `auxiliary:vision`, ...).
    pub role: String,
    /// The provider path after the role, starting with `/`.
    pub rest: String,
}

// === impl Route ===

impl Route {
    /// Parse a request path; `None` when it names no role.
    pub fn parse(path: &str) -> Option<Self> {
        let tail = path.strip_prefix(PREFIX)?;
        let (role, rest) = match tail.split_once('/') {
            Some(("auxiliary", after)) => {
                let (task, rest) = after.split_once('/').unwrap_or((after, ""));
                (format!("auxiliary:{task}"), rest)
            }
            Some((role, rest)) => (role.to_string(), rest),
            None => (tail.to_string(), ""),
        };
        let role = role_key(&role).filter(|r| r != "auxiliary" && r != "default")?;
        Some(Self {
            role,
            rest: format!("/{rest}"),
        })
    }
}

/// Why the route answered itself instead of relaying the provider's answer.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The path names no role.
    #[error("failed to route: {0} is not /llm/<main|delegation|cron|auxiliary/<task>>/...")]
    NotFound(String),
    /// No provider serves the role.
    #[error("failed to route: no provider serves role '{0}'; set llm.roles in the policy")]
    RoleNotConfigured(String),
    /// The model is outside `llm.allowedModels` (enforce mode).
    #[error("{0}")]
    ModelNotAllowed(String),
    /// A completion request whose model is missing or not a string (enforce mode with an
    /// allow-list: a provider would apply its own default model).
    #[error("{0}")]
    ModelMissing(String),
    /// A key the gate judges or rewrites appears twice in one object (enforce mode): providers
    /// differ on which one counts, so the one judged might not be the one run.
    #[error("{0}")]
    DuplicateKey(String),
    /// The provider path is not its own normal form (enforce mode): a provider that decodes
    /// or resolves it would route it elsewhere than it reads.
    #[error("{0}")]
    PathNotCanonical(String),
    /// The method and path are not an endpoint the gate judges, nor one the policy names in
    /// `llm.extraEndpoints` (enforce mode).
    #[error("{0}")]
    EndpointNotAllowed(String),
    /// The request body is over `llm.maxRequestBytes`.
    #[error("failed to read the request: the body is larger than {0} bytes")]
    TooLarge(u64),
    /// The request body could not be read.
    #[error("failed to read the request: {0}")]
    BadRequest(String),
    /// The provider key could not be read.
    #[error("failed to read the key of provider '{0}'")]
    KeyUnavailable(String),
    /// An egress gate refused the upstream.
    #[error("failed to reach the provider: {}", .0.message())]
    Refused(DenyReason),
    /// No checked address accepted the connection.
    #[error("failed to reach the provider: {0}")]
    Connect(ConnectError),
    /// TLS failed.
    #[error("failed to reach the provider: TLS: {0}")]
    Tls(String),
    /// The provider sent no response head in time.
    #[error("failed to reach the provider: no response within {0} s")]
    Timeout(u64),
    /// HTTP failed.
    #[error("failed to reach the provider: {0}")]
    Protocol(String),
}

// === impl LlmError ===

impl LlmError {
    /// Codes only the LLM route gives; its other codes are the api's, the gates' and the
    /// connector's (`not_found`, `invalid_request`, `payload_too_large`, a gate code,
    /// `proxy_loop`, `upstream_*`).
    pub const OWN_CODES: &'static [&'static str] = &[
        "llm_role_not_configured",
        "llm_model_not_allowed",
        "llm_model_missing",
        "llm_duplicate_key",
        "llm_path_not_canonical",
        "llm_endpoint_not_allowed",
        "llm_key_unavailable",
    ];

    /// Stable code (body `code`, `x-fleetgate-error`, metric label).
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "not_found",
            Self::RoleNotConfigured(_) => "llm_role_not_configured",
            Self::ModelNotAllowed(_) => "llm_model_not_allowed",
            Self::ModelMissing(_) => "llm_model_missing",
            Self::DuplicateKey(_) => "llm_duplicate_key",
            Self::PathNotCanonical(_) => "llm_path_not_canonical",
            Self::EndpointNotAllowed(_) => "llm_endpoint_not_allowed",
            Self::TooLarge(_) => "payload_too_large",
            Self::BadRequest(_) => "invalid_request",
            Self::KeyUnavailable(_) => "llm_key_unavailable",
            Self::Refused(reason) => reason.code(),
            Self::Connect(e) => e.code(),
            Self::Tls(_) => "upstream_tls_failed",
            Self::Timeout(_) => "upstream_timeout",
            Self::Protocol(_) => "upstream_protocol_error",
        }
    }

    /// HTTP status of the answer.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::NotFound(_) | Self::RoleNotConfigured(_) => StatusCode::NOT_FOUND,
            Self::ModelNotAllowed(_) | Self::EndpointNotAllowed(_) | Self::Refused(_) => {
                StatusCode::FORBIDDEN
            }
            Self::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::BadRequest(_)
            | Self::ModelMissing(_)
            | Self::DuplicateKey(_)
            | Self::PathNotCanonical(_) => StatusCode::BAD_REQUEST,
            Self::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::KeyUnavailable(_) | Self::Connect(_) | Self::Tls(_) | Self::Protocol(_) => {
                StatusCode::BAD_GATEWAY
            }
        }
    }

    /// The answer in the provider's own error shape, so the agent's SDK shows the message.
    pub fn response(&self, kind: Option<ProviderKind>) -> Response<LlmBody> {
        let shape = match kind {
            Some(ProviderKind::Anthropic) => Shape::Anthropic,
            _ => Shape::OpenAi {
                param: matches!(self, Self::ModelNotAllowed(_) | Self::ModelMissing(_))
                    .then_some("model"),
            },
        };
        respond::refuse(self, shape).map(|body| body.map_err(|never| match never {}).boxed())
    }
}

impl Refusal for LlmError {
    fn code(&self) -> &'static str {
        LlmError::code(self)
    }
    fn status(&self) -> StatusCode {
        LlmError::status(self)
    }
    fn message(&self) -> String {
        self.to_string()
    }
}

/// A whole body as an [`LlmBody`].
pub fn full(bytes: impl Into<Bytes>) -> LlmBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

#[cfg(test)]
mod tests;
