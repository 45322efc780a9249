//! Why a transparent connection (or what a CONNECT tunnel carries) is not spliced, with its
//! stable code, and how a refusal looks on the wire: nothing for TLS (a clean close), a JSON
//! answer for plain HTTP.

use http::StatusCode;

use crate::base::dialer::ConnectError;
use crate::egress::relay::sniff::{Protocol, SniffError};
use crate::judge::gates::DenyReason;
use crate::judge::respond::{self, Shape};

/// A refused transparent connection.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CaptureRefusal {
    /// A gate refused the name (secret in host, port, SSRF, blocklist).
    #[error("{}", .0.message())]
    Gate(DenyReason),
    /// No SNI, no Host, or an IP literal as the name, and raw-IP egress is off.
    #[error(
        "Blocked: the connection names no host (no TLS SNI or HTTP Host name) and raw-IP egress is not allowed"
    )]
    NoTargetName,
    /// The first bytes are neither TLS nor HTTP/1, or break their grammar, or are too long.
    #[error("Blocked: {0}")]
    Sniff(SniffError),
    /// The client sent no complete ClientHello or request head in time.
    #[error("Blocked: no complete TLS ClientHello or HTTP request head arrived in time")]
    SniffTimeout,
    /// The connection was not redirected by the capture rules.
    #[error("Blocked: the connection has no original destination (it was not redirected)")]
    NoOriginalDst,
    /// The checked target is one of the gate's own listeners, or the connection is the
    /// gate's own upstream connection sent back by the capture rules.
    #[error("Blocked: the connection would loop back into the gate")]
    Loop,
    /// No checked address accepted the connection (the shared connector's error).
    #[error("{0}")]
    UpstreamConnect(ConnectError),
    /// The concurrent connection cap is reached.
    #[error("Too many open transparent connections through this gate (limit {0}); retry shortly")]
    Overloaded(usize),
}

impl respond::Refusal for CaptureRefusal {
    fn code(&self) -> &'static str {
        CaptureRefusal::code(self)
    }
    fn status(&self) -> StatusCode {
        CaptureRefusal::status(self)
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
        matches!(self, Self::Overloaded(_))
    }
}

// === impl CaptureRefusal ===

impl CaptureRefusal {
    /// Codes this module adds to the other families, for uniqueness tests and docs. A loop,
    /// the connection cap and a failed dial reuse the forward proxy's and the connector's codes
    /// (`proxy_loop`, `too_many_tunnels`, `upstream_connect_failed`, `upstream_timeout`): the
    /// same outcome has the same label on every listener.
    #[cfg(test)]
    pub(crate) const OWN_CODES: &'static [&'static str] = &[
        "no_target_name",
        "unrecognised_protocol",
        "sniff_malformed",
        "sniff_too_large",
        "sniff_timeout",
        "no_original_dst",
    ];

    /// The stable snake_case code (a gate refusal keeps the gate's code).
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::Gate(reason) => reason.code(),
            Self::NoTargetName => "no_target_name",
            Self::Sniff(SniffError::Unrecognised) => "unrecognised_protocol",
            Self::Sniff(SniffError::Malformed { .. }) => "sniff_malformed",
            Self::Sniff(SniffError::TooLarge(_)) => "sniff_too_large",
            Self::SniffTimeout => "sniff_timeout",
            Self::NoOriginalDst => "no_original_dst",
            Self::Loop => "proxy_loop",
            Self::UpstreamConnect(e) => e.code(),
            Self::Overloaded(_) => "too_many_tunnels",
        }
    }

    /// The gate (or stage) that decided, for the `gate` log field; gate refusals use the
    /// forward proxy's names.
    pub(crate) fn gate(&self) -> &'static str {
        match self {
            Self::Gate(reason) => reason.gate(),
            Self::NoTargetName | Self::Sniff(_) | Self::SniffTimeout => "sniff",
            Self::NoOriginalDst => "original_dst",
            Self::Loop => "proxy_loop",
            Self::UpstreamConnect(_) => "upstream",
            Self::Overloaded(_) => "tunnel_cap",
        }
    }

    /// `deny` for a policy decision, `error` for a failure to reach an allowed target.
    pub(crate) fn verdict(&self) -> &'static str {
        match self {
            Self::UpstreamConnect(_) => "error",
            _ => "deny",
        }
    }

    /// The status a plain-HTTP client sees.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Self::Sniff(_) => StatusCode::BAD_REQUEST,
            Self::SniffTimeout => StatusCode::REQUEST_TIMEOUT,
            Self::UpstreamConnect(ConnectError::TimedOut { .. }) => StatusCode::GATEWAY_TIMEOUT,
            Self::UpstreamConnect(_) => StatusCode::BAD_GATEWAY,
            Self::Overloaded(_) => StatusCode::TOO_MANY_REQUESTS,
            _ => StatusCode::FORBIDDEN,
        }
    }

    /// Whether the client is told in-band: only plain HTTP gets a response; TLS (and bytes
    /// that are neither) get a clean close, since the gate cannot speak their protocol.
    pub(crate) fn answers(&self, protocol: Option<Protocol>) -> bool {
        match self {
            Self::Sniff(
                SniffError::Malformed { protocol, .. } | SniffError::TooLarge(protocol),
            ) => *protocol == Protocol::Http,
            _ => protocol == Some(Protocol::Http),
        }
    }

    /// The answer to a plain-HTTP client as HTTP/1.1 bytes: `{"error": {"code", "message"}}`,
    /// `x-fleetgate-error`, `content-length`, `connection: close` (the connection ends after it).
    pub(crate) async fn response_bytes(&self) -> Vec<u8> {
        crate::egress::relay::h1::encode_refusal(respond::refuse(self, Shape::Error), true).await
    }
}

/// FIN, then read (and drop) what the client still sends for a moment, so unread bytes in
/// the receive queue do not turn the close into a reset that could overtake an answer.
pub(crate) async fn close_cleanly(stream: &mut tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    let _ = stream.shutdown().await;
    // Readiness first, then a read into an array that lives only between two awaits: the
    // array is not part of the future, which every connection task is allocated at the size of.
    let drain = async {
        let mut total = 0usize;
        while total < 256 * 1024 {
            if stream.readable().await.is_err() {
                break;
            }
            let mut sink = [0u8; 4096];
            match stream.try_read(&mut sink) {
                Ok(0) => break,
                Ok(n) => total += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), drain).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_codes_are_listed_and_do_not_collide_with_other_families() {
        let samples = [
            CaptureRefusal::NoTargetName,
            CaptureRefusal::Sniff(SniffError::Unrecognised),
            CaptureRefusal::Sniff(SniffError::TooLarge(Protocol::Tls)),
            CaptureRefusal::SniffTimeout,
            CaptureRefusal::NoOriginalDst,
        ];
        for refusal in &samples {
            assert!(
                CaptureRefusal::OWN_CODES.contains(&refusal.code()),
                "{} must be listed in OWN_CODES",
                refusal.code()
            );
        }
        respond::tests::assert_listed_once(CaptureRefusal::OWN_CODES);
        let shared = [
            (CaptureRefusal::Loop.code(), "proxy_loop"),
            (CaptureRefusal::Overloaded(1).code(), "too_many_tunnels"),
        ];
        for (got, forward) in shared {
            let forward_codes = crate::egress::forward::refusal::ProxyRefusal::OWN_CODES
                .iter()
                .chain(DenyReason::ALL_CODES);
            assert!(
                forward_codes.clone().any(|c| *c == got) && got == forward,
                "{got} must be the forward proxy's code for the same outcome"
            );
        }
    }

    #[tokio::test]
    async fn http_refusal_bytes_carry_status_header_and_json_error() {
        let refusal = CaptureRefusal::Gate(DenyReason::PortNotAllowed { port: 25 });
        let bytes = refusal.response_bytes().await;
        let text = String::from_utf8(bytes).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("HTTP/1.1 403 Forbidden\r\n"),
            "head: {head}"
        );
        assert!(
            head.contains("x-fleetgate-error: port_not_allowed"),
            "head: {head}"
        );
        assert!(head.contains("connection: close"), "head: {head}");
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "head: {head}"
        );
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], "port_not_allowed");
        assert_eq!(
            v["error"]["message"],
            "Blocked: port 25 is not on the egress port allow-list"
        );
    }

    #[test]
    fn only_http_is_answered_in_band() {
        let gate = CaptureRefusal::Gate(DenyReason::SecretInHost { rule: "r".into() });
        assert!(
            gate.answers(Some(Protocol::Http)),
            "HTTP refusals must be answered"
        );
        assert!(
            !gate.answers(Some(Protocol::Tls)),
            "TLS refusals must be a clean close"
        );
        assert!(
            !gate.answers(None),
            "unknown protocols must be a clean close"
        );
        let bad_http = CaptureRefusal::Sniff(SniffError::Malformed {
            protocol: Protocol::Http,
            detail: "x",
        });
        assert!(
            bad_http.answers(None),
            "a malformed HTTP head must be answered with 400"
        );
    }
}
