//! Why a watch run failed, with the reason code and HTTP status of each failure.

use http::StatusCode;

use super::state;

/// Why a watch run failed. Every variant leaves the state unchanged.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WatchError {
    /// The policy declares no watch of this name.
    #[error("failed to find watch '{0}': the policy declares no such watch")]
    Unknown(String),
    /// The watch cannot be run as configured (a header variable is not set, ...).
    #[error("failed to prepare the watch: {0}")]
    Config(String),
    /// An egress gate refused the server URL.
    #[error("failed to reach the MCP server: refused by the gate ({code}): {message}")]
    Refused {
        /// The gate's decision code.
        code: &'static str,
        /// The gate's message.
        message: String,
    },
    /// The transport failed or the tool reported an error.
    #[error("{0}")]
    Source(String),
    /// The state file is unreadable, corrupt or could not be written.
    #[error(transparent)]
    State(#[from] state::StateError),
}

// === impl WatchError ===

impl WatchError {
    /// Every code of a watch route.
    #[cfg(test)]
    pub(crate) const ALL_CODES: &'static [&'static str] = &[
        "watch_unknown",
        "watch_config",
        "watch_refused",
        "watch_source_failed",
        "watch_state",
    ];

    /// The stable reason code (metric label, `x-fleetgate-error` header).
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::Unknown(_) => "watch_unknown",
            Self::Config(_) => "watch_config",
            Self::Refused { .. } => "watch_refused",
            Self::Source(_) => "watch_source_failed",
            Self::State(_) => "watch_state",
        }
    }

    /// The HTTP status of the route.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Self::Unknown(_) => StatusCode::NOT_FOUND,
            Self::Refused { .. } => StatusCode::FORBIDDEN,
            Self::Source(_) => StatusCode::BAD_GATEWAY,
            Self::Config(_) | Self::State(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}
