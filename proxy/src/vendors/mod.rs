//! Upstream backends: who actually fetches a page once every gate has allowed it.
//!
//! One file per backend. `direct` is built in and keyless: the gate fetches the page itself
//! through a connector that dials only addresses E2 checked, and re-gates every redirect hop.
//! Backends never build HTTP responses; failures are [`VendorFailure`] values with stable codes.

use std::future::Future;
use std::net::IpAddr;

use crate::context::TargetUrl;
use crate::gates::DenyReason;

pub mod direct;
pub mod html;

/// Backends that can extract pages, by policy name.
pub const EXTRACT_BACKENDS: &[&str] = &["direct"];
/// Backends that can search, by policy name.
pub const SEARCH_BACKENDS: &[&str] = &[];

/// Refuse, at policy load, an extract backend that does not exist or cannot extract.
pub fn check_extract_backend(name: &str) -> Result<(), String> {
    if EXTRACT_BACKENDS.contains(&name) {
        return Ok(());
    }
    Err(format!(
        "unknown extract backend '{name}'; this gate can extract with: {}",
        EXTRACT_BACKENDS.join(", ")
    ))
}

/// Refuse, at policy load, a search backend that does not exist or cannot search.
pub fn check_search_backend(name: &str) -> Result<(), String> {
    if SEARCH_BACKENDS.contains(&name) {
        return Ok(());
    }
    if EXTRACT_BACKENDS.contains(&name) {
        return Err(format!(
            "'{name}' cannot search; leave web.searchBackend unset or name a search backend"
        ));
    }
    Err(format!("unknown search backend '{name}'"))
}

/// A page as a backend returns it, before assembly (E7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    /// The final URL after redirects.
    pub url: String,
    /// Page title (`<title>` for HTML), or empty.
    pub title: String,
    /// Clean text: markdown for HTML, the body for text types, latin-1 bytes otherwise.
    pub content: String,
    /// The upstream HTTP status.
    pub status: u16,
    /// The upstream `Content-Type`, if any.
    pub content_type: Option<String>,
    /// False when the body is not a text type (E7 names the binary kind or refuses it).
    pub textual: bool,
}

/// Why a backend could not deliver a page.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VendorFailure {
    /// A redirect hop was refused by a gate; the row carries that gate's reason.
    #[error("{0}")]
    Refused(DenyReason),
    /// No checked address accepted a connection.
    #[error("failed to connect to {host}: {detail}")]
    Connect {
        /// Target host.
        host: String,
        /// Last connect error.
        detail: String,
    },
    /// The TLS handshake failed.
    #[error("failed to establish TLS with {host}: {detail}")]
    Tls {
        /// Target host.
        host: String,
        /// Handshake error.
        detail: String,
    },
    /// A timeout elapsed (connect, headers or total).
    #[error("fetch timed out after {seconds}s ({phase})")]
    Timeout {
        /// Which limit elapsed.
        phase: &'static str,
        /// The limit, in seconds.
        seconds: u64,
    },
    /// The origin answered with an error status.
    #[error("the page returned HTTP {status}")]
    HttpStatus {
        /// The status code.
        status: u16,
    },
    /// The body exceeded `fetch.maxBodyBytes`.
    #[error("the page is larger than the {limit}-byte limit")]
    BodyTooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// More redirects than `fetch.maxRedirects`.
    #[error("too many redirects (more than {0})")]
    TooManyRedirects(u8),
    /// The response could not be read or decoded.
    #[error("failed to read the response: {0}")]
    Protocol(String),
}

// === impl VendorFailure ===

impl VendorFailure {
    /// Every code, for the uniqueness test and the README table.
    pub const ALL_CODES: &'static [&'static str] = &[
        "upstream_connect_failed",
        "upstream_tls_failed",
        "upstream_timeout",
        "upstream_http_status",
        "upstream_body_too_large",
        "too_many_redirects",
        "upstream_protocol_error",
    ];

    /// Stable snake_case code; a refused hop reports the gate's own code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Refused(reason) => reason.code(),
            Self::Connect { .. } => "upstream_connect_failed",
            Self::Tls { .. } => "upstream_tls_failed",
            Self::Timeout { .. } => "upstream_timeout",
            Self::HttpStatus { .. } => "upstream_http_status",
            Self::BodyTooLarge { .. } => "upstream_body_too_large",
            Self::TooManyRedirects(_) => "too_many_redirects",
            Self::Protocol(_) => "upstream_protocol_error",
        }
    }
}

/// A target that passed the URL gates, with the addresses E2 checked.
#[derive(Clone, Debug)]
pub struct Admitted {
    /// The target.
    pub target: TargetUrl,
    /// Checked addresses; the only ones that may be dialled.
    pub addrs: Vec<IpAddr>,
}

/// Re-runs the URL gates (E1, E2, E4) on a redirect hop. Implemented by the pipeline so a
/// backend cannot forget a gate.
pub trait HopGate: Sync {
    /// Admit `url` or say why not.
    fn admit(&self, url: &str) -> impl Future<Output = Result<Admitted, DenyReason>> + Send;
}
