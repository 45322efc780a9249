//! What the forward proxy answers when it does not relay: gate refusals (rendered by
//! `respond::refuse` like every listener's), its own refusals (loop, tunnel cap, malformed proxy request) and
//! upstream failures, all as `{"error": {"code", "message"}}` with `x-fleetgate-error`.

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::BodyExt;

use crate::base::dialer::ConnectError;
use crate::egress::relay::meter::BoxError;
use crate::judge::gates::DenyReason;
use crate::judge::respond::{self, ApiError, Refusal, Shape};

/// The body type of every forward-proxy response: relayed bodies stream through it.
pub(crate) type ProxyBody = http_body_util::combinators::BoxBody<Bytes, BoxError>;

/// Why the forward proxy did not relay a request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProxyRefusal {
    /// A gate refused the target.
    #[error("{0}")]
    Gate(DenyReason),
    /// The gate's own upstream connection came back into the gate through the capture rules
    /// (the gate's uid is not exempt from them) and was refused there.
    #[error(
        "Blocked: the connection to {target} came back into this gate (is the gate's uid exempt from the capture rules?); a proxied request must not loop back into the gate"
    )]
    CameBack {
        /// The checked address the gate dialled.
        target: std::net::SocketAddr,
    },
    /// The concurrent-tunnel cap is reached.
    #[error("Too many open tunnels through this gate (limit {limit}); retry shortly")]
    TooManyTunnels {
        /// The cap.
        limit: usize,
    },
    /// The listener's cap on concurrent client connections is reached.
    #[error("Too many open connections to this gate (limit {limit}); retry shortly")]
    TooManyConnections {
        /// The cap.
        limit: usize,
    },
    /// The request is not a proxy request this listener serves.
    #[error("{0}")]
    BadRequest(String),
    /// No checked address accepted the connection.
    #[error("{0}")]
    Connect(ConnectError),
    /// The upstream did not send response headers in time.
    #[error("upstream sent no response headers within {} s", .0.as_secs())]
    HeaderTimeout(std::time::Duration),
    /// The upstream broke the HTTP exchange.
    #[error("upstream protocol error: {0}")]
    Protocol(String),
    /// A captured request (transparent listener) names no host the gates may decide about,
    /// or its head breaks the capture's grammar: the transparent listener's code and message.
    #[error("{0}")]
    Capture(crate::egress::capture_refusal::CaptureRefusal),
}

// === impl ProxyRefusal ===

impl ProxyRefusal {
    /// Codes this module adds to the families in `gates`, `respond` and `vendors`.
    #[cfg(test)]
    pub(crate) const OWN_CODES: &'static [&'static str] =
        &["too_many_tunnels", "too_many_connections"];

    /// The stable code: the same in the header, the body, the log line and metric labels.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::Gate(reason) => reason.code(),
            Self::CameBack { .. } => "proxy_loop",
            Self::TooManyTunnels { .. } => "too_many_tunnels",
            Self::TooManyConnections { .. } => "too_many_connections",
            Self::BadRequest(_) => "invalid_request",
            Self::Connect(e) => e.code(),
            Self::HeaderTimeout(_) => "upstream_timeout",
            Self::Protocol(_) => "upstream_protocol_error",
            Self::Capture(r) => r.code(),
        }
    }

    /// The gate (or stage) that decided, for the `gate` log field.
    pub(crate) fn gate(&self) -> &'static str {
        match self {
            Self::Gate(reason) => reason.gate(),
            Self::CameBack { .. } => "proxy_loop",
            Self::TooManyTunnels { .. } => "tunnel_cap",
            Self::TooManyConnections { .. } => "connection_cap",
            Self::BadRequest(_) => "parse_request",
            Self::Connect(_) | Self::HeaderTimeout(_) | Self::Protocol(_) => "upstream",
            Self::Capture(r) => r.gate(),
        }
    }

    /// `deny` for a policy decision, `error` for a failure to relay an allowed request.
    pub(crate) fn verdict(&self) -> &'static str {
        match self {
            Self::Connect(_) | Self::HeaderTimeout(_) | Self::Protocol(_) => "error",
            Self::Capture(r) => r.verdict(),
            _ => "deny",
        }
    }

    /// The HTTP status.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Self::Gate(_) | Self::CameBack { .. } => StatusCode::FORBIDDEN,
            Self::TooManyTunnels { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::TooManyConnections { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Connect(ConnectError::TimedOut { .. }) | Self::HeaderTimeout(_) => {
                StatusCode::GATEWAY_TIMEOUT
            }
            Self::Connect(_) | Self::Protocol(_) => StatusCode::BAD_GATEWAY,
            Self::Capture(r) => r.status(),
        }
    }

    /// The HTTP answer, `{"error": {"code", "message"}}`: a gate refusal exactly as every
    /// egress listener renders it, a malformed request as the api's `invalid_request`.
    pub(crate) fn response(&self) -> Response<ProxyBody> {
        let resp = match self {
            Self::Gate(reason) => respond::refuse(reason, Shape::Error),
            Self::BadRequest(message) => {
                respond::api_error(&ApiError::InvalidRequest(message.clone()))
            }
            other => respond::refuse(other, Shape::Error),
        };
        resp.map(|body| body.map_err(|never| match never {}).boxed())
    }
}

impl Refusal for ProxyRefusal {
    fn code(&self) -> &'static str {
        ProxyRefusal::code(self)
    }
    fn status(&self) -> StatusCode {
        ProxyRefusal::status(self)
    }
    fn message(&self) -> String {
        self.to_string()
    }
    fn rule(&self) -> Option<&str> {
        match self {
            Self::Gate(reason) => reason.rule(),
            _ => None,
        }
    }
    fn retry_after(&self) -> bool {
        matches!(
            self,
            Self::TooManyTunnels { .. } | Self::TooManyConnections { .. }
        )
    }
}

// === impl ProxyRefusal (wire) ===

impl ProxyRefusal {
    /// Write the answer to a client connection the relay owns, `connection: close` when the
    /// connection ends after it.
    pub(crate) async fn write_to<W>(&self, w: &mut W, close: bool) -> std::io::Result<()>
    where
        W: tokio::io::AsyncWrite + Unpin,
    {
        use tokio::io::AsyncWriteExt;
        let out = crate::egress::relay::h1::encode_refusal(self.response(), close).await;
        w.write_all(&out).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_refusals_carry_status_code_header_and_retry_after() {
        let cases = [
            (
                ProxyRefusal::Gate(DenyReason::ProxyLoop {
                    target: "127.0.0.1:15181".parse().expect("addr"),
                }),
                403,
                "proxy_loop",
                None,
            ),
            (
                ProxyRefusal::CameBack {
                    target: "192.0.2.10:80".parse().expect("addr"),
                },
                403,
                "proxy_loop",
                None,
            ),
            (
                ProxyRefusal::TooManyTunnels { limit: 2 },
                429,
                "too_many_tunnels",
                Some("1"),
            ),
            (
                ProxyRefusal::Gate(DenyReason::PortNotAllowed { port: 22 }),
                403,
                "port_not_allowed",
                None,
            ),
            (
                ProxyRefusal::BadRequest("origin-form".into()),
                400,
                "invalid_request",
                None,
            ),
        ];
        for (refusal, status, code, retry) in cases {
            let resp = refusal.response();
            assert_eq!(resp.status().as_u16(), status, "{code} status");
            assert_eq!(resp.headers()[respond::ERROR_HEADER], code, "{code} header");
            assert_eq!(
                resp.headers()
                    .get(http::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok()),
                retry,
                "{code} Retry-After"
            );
        }
    }

    #[test]
    fn own_codes_do_not_collide_with_any_other_family() {
        crate::judge::respond::tests::assert_listed_once(ProxyRefusal::OWN_CODES);
    }
}
