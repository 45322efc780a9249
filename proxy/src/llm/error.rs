//! Why the LLM route answered itself instead of relaying the provider's answer: the
//! [`LlmError`] codes, statuses, and the answer in the provider's own error shape.

use http::{Response, StatusCode};
use http_body_util::BodyExt;

use super::boxed_body::LlmBody;
use crate::base::dialer::ConnectError;
use crate::judge::gates::DenyReason;
use crate::judge::respond::{self, Refusal, Shape};
use crate::policy::llm::ProviderKind;

/// Why the route answered itself instead of relaying the provider's answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LlmError {
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
    /// The request names a tool the provider runs itself and `llm.providerTools` refuses
    /// them for the role (enforce mode).
    #[error("{0}")]
    ProviderToolNotAllowed(String),
    /// The prompt holds a secret and `llm.secrets` refuses it (enforce mode). The message
    /// names the rule, never the secret.
    #[error("{0}")]
    SecretInPrompt(String),
    /// The role's budget is spent (enforce mode): `(message, Retry-After seconds)`. A
    /// tokens-per-minute limit frees up within the minute and says when; a daily dollar budget
    /// carries no `Retry-After` (hours away; agents cap the wait and retry anyway, so the
    /// header only holds a refused run open: Hermes waits up to 600 s per attempt, as long as
    /// its cron inactivity limit), and its message names the 00:00 UTC reset.
    #[error("{0}")]
    BudgetExceeded(String, Option<u64>),
    /// The request body is over `llm.maxRequestBytes`.
    #[error("failed to read the request: the body is larger than {0} bytes")]
    TooLarge(u64),
    /// The request body could not be read.
    #[error("failed to read the request: {0}")]
    BadRequest(String),
    /// The request body stalled or took too long.
    #[error("failed to read the request: {0}")]
    BodyTimeout(String),
    /// The api listener's request bodies hold their budget.
    #[error("failed to read the request: {0}")]
    BodyBudgetExhausted(String),
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
    #[cfg(test)]
    pub(crate) const OWN_CODES: &'static [&'static str] = &[
        "llm_role_not_configured",
        "llm_model_not_allowed",
        "llm_model_missing",
        "llm_duplicate_key",
        "llm_path_not_canonical",
        "llm_endpoint_not_allowed",
        "llm_provider_tool_not_allowed",
        "llm_secret_in_prompt",
        "llm_budget_exceeded",
        "llm_key_unavailable",
    ];

    /// Stable code (body `code`, `x-fleetgate-error`, metric label).
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "not_found",
            Self::RoleNotConfigured(_) => "llm_role_not_configured",
            Self::ModelNotAllowed(_) => "llm_model_not_allowed",
            Self::ModelMissing(_) => "llm_model_missing",
            Self::DuplicateKey(_) => "llm_duplicate_key",
            Self::PathNotCanonical(_) => "llm_path_not_canonical",
            Self::EndpointNotAllowed(_) => "llm_endpoint_not_allowed",
            Self::ProviderToolNotAllowed(_) => "llm_provider_tool_not_allowed",
            Self::SecretInPrompt(_) => "llm_secret_in_prompt",
            Self::BudgetExceeded(..) => "llm_budget_exceeded",
            Self::TooLarge(_) => "payload_too_large",
            Self::BadRequest(_) => "invalid_request",
            Self::BodyTimeout(_) => "body_timeout",
            Self::BodyBudgetExhausted(_) => "body_budget_exhausted",
            Self::KeyUnavailable(_) => "llm_key_unavailable",
            Self::Refused(reason) => reason.code(),
            Self::Connect(e) => e.code(),
            Self::Tls(_) => "upstream_tls_failed",
            Self::Timeout(_) => "upstream_timeout",
            Self::Protocol(_) => "upstream_protocol_error",
        }
    }

    /// HTTP status of the answer.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Self::NotFound(_) | Self::RoleNotConfigured(_) => StatusCode::NOT_FOUND,
            Self::ModelNotAllowed(_)
            | Self::EndpointNotAllowed(_)
            | Self::ProviderToolNotAllowed(_)
            | Self::SecretInPrompt(_)
            | Self::Refused(_) => StatusCode::FORBIDDEN,
            Self::BudgetExceeded(..) => StatusCode::TOO_MANY_REQUESTS,
            Self::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Self::BodyBudgetExhausted(_) => StatusCode::SERVICE_UNAVAILABLE,
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
    pub(crate) fn response(&self, kind: Option<ProviderKind>) -> Response<LlmBody> {
        let shape = match kind {
            Some(ProviderKind::Anthropic) => Shape::Anthropic,
            _ => Shape::OpenAi {
                param: match self {
                    Self::ModelNotAllowed(_) | Self::ModelMissing(_) => Some("model"),
                    Self::ProviderToolNotAllowed(_) => Some("tools"),
                    Self::SecretInPrompt(_) => Some("messages"),
                    _ => None,
                },
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
    fn retry_after(&self) -> bool {
        matches!(
            self,
            Self::BodyBudgetExhausted(_) | Self::BudgetExceeded(_, Some(_))
        )
    }
    fn retry_after_secs(&self) -> u64 {
        match self {
            Self::BudgetExceeded(_, Some(secs)) => (*secs).max(1),
            _ => 1,
        }
    }
}

impl From<crate::judge::request_body::BodyError> for LlmError {
    fn from(e: crate::judge::request_body::BodyError) -> Self {
        use crate::judge::request_body::BodyError as E;
        match e {
            E::TooLarge(cap) => Self::TooLarge(cap as u64),
            E::OverBudget { .. } => Self::BodyBudgetExhausted(e.to_string()),
            E::Idle(_) | E::Total(_) => Self::BodyTimeout(e.to_string()),
            E::Read(_) => Self::BadRequest(e.to_string()),
        }
    }
}
