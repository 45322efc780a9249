//! What every backend speaks: a [`Page`] and its redirect [`Hop`]s, a [`VendorFailure`] with
//! its stable code, the [`Admitted`] target and the [`HopGate`] that re-gates each hop, and
//! the helpers that fetch per URL and match a vendor's rows to the URLs asked for.

use std::future::Future;
use std::net::IpAddr;

use super::client::{FailureSource, VendorError, VendorErrorKind};
use crate::base::target_url::TargetUrl;
use crate::judge::gates::DenyReason;
use crate::policy::backends::BackendKind;

/// A vendor that fetches one URL per call.
pub(crate) trait FetchOne {
    /// Fetch `url`.
    fn fetch_one(&self, url: &str) -> impl Future<Output = Result<Page, VendorError>>;
}

/// Fetch each URL in turn; one result per URL in input order. A failure that cannot differ
/// per URL ([`account_wide`]) is reused for the remaining URLs instead of calling again.
pub(crate) async fn per_url(
    client: &impl FetchOne,
    urls: &[String],
) -> Vec<Result<Page, VendorFailure>> {
    let mut out: Vec<Result<Page, VendorFailure>> = Vec::with_capacity(urls.len());
    for url in urls {
        if let Some(Err(VendorFailure::Vendor(e))) = out.last()
            && account_wide(e)
        {
            let again = e.clone();
            out.push(Err(VendorFailure::Vendor(again)));
            continue;
        }
        out.push(client.fetch_one(url).await.map_err(VendorFailure::Vendor));
    }
    out
}

/// A failure that would repeat for every URL of a per-URL vendor call (a refused key, no
/// credit, no route to the vendor).
fn account_wide(e: &VendorError) -> bool {
    matches!(e.status, Some(401 | 402))
        || matches!(
            e.kind,
            VendorErrorKind::NotConfigured | VendorErrorKind::Unreachable
        )
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
    pub(crate) content_type: Option<String>,
    /// False when the body is not a text type (E7 names the binary kind or refuses it).
    pub(crate) textual: bool,
    /// The ring member that served the page when the keyless ring did.
    pub(crate) via: Option<BackendKind>,
    /// Every URL after the requested one (redirect hops, a vendor's final URL), in order,
    /// each with the addresses E2 checked for it (none when a vendor dialled it).
    pub(crate) hops: Vec<Hop>,
}

/// One URL a page was fetched through after the requested one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hop {
    /// The normalised URL.
    pub(crate) url: String,
    /// The addresses E2 returned for it, when the gate dialled it.
    pub(crate) addrs: Vec<IpAddr>,
}

// === impl Page ===

impl Page {
    /// A page a vendor API delivered as text (markdown or plain).
    pub(crate) fn from_vendor(url: String, title: String, content: String) -> Self {
        Self {
            url,
            title,
            content,
            status: 200,
            content_type: None,
            textual: true,
            via: None,
            hops: Vec::new(),
        }
    }
}

/// Whether a vendor's row URL is the requested one (exact, or up to one trailing `/`).
pub(crate) fn same_url(requested: &str, row: &str) -> bool {
    requested == row || requested.trim_end_matches('/') == row.trim_end_matches('/')
}

/// A vendor's rows keyed by the URL each names.
pub(crate) type UrlRows = Vec<(String, Result<Page, VendorFailure>)>;

/// Give each requested URL its vendor row, in input order; each row is used once and a URL
/// without a row gets `missing(url)`.
pub(crate) fn assign_rows(
    urls: &[String],
    rows: UrlRows,
    missing: impl Fn(&str) -> VendorFailure,
) -> Vec<Result<Page, VendorFailure>> {
    let mut rows: Vec<Option<(String, Result<Page, VendorFailure>)>> =
        rows.into_iter().map(Some).collect();
    urls.iter()
        .map(|url| {
            let exact = rows
                .iter()
                .position(|r| r.as_ref().is_some_and(|(u, _)| u == url));
            let index = exact.or_else(|| {
                rows.iter()
                    .position(|r| r.as_ref().is_some_and(|(u, _)| same_url(url, u)))
            });
            let slot = index.and_then(|i| rows.get_mut(i));
            match slot.and_then(Option::take) {
                Some((_, result)) => result,
                None => Err(missing(url)),
            }
        })
        .collect()
}

/// The same failure for every URL of a call.
pub(crate) fn fail_all(urls: &[String], error: VendorError) -> Vec<Result<Page, VendorFailure>> {
    let failure = VendorFailure::Vendor(error);
    urls.iter().map(|_| Err(failure.clone())).collect()
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
    /// A non-empty body yielded no text: never handed to the agent as an empty success.
    #[error(
        "the page has no extractable text ({bytes} bytes of {kind}; it may be rendered by script)"
    )]
    EmptyContent {
        /// Size of the decoded body.
        bytes: usize,
        /// What the body was read as (`html`, `text`).
        kind: &'static str,
    },
    /// A vendor API call failed; the message is the vendor's (or Hermes') wording.
    #[error("{0}")]
    Vendor(VendorError),
}

// === impl VendorFailure ===

impl VendorFailure {
    /// Every code, for the uniqueness test and the table in docs/decision-codes.md.
    pub const ALL_CODES: &'static [&'static str] = &[
        "upstream_connect_failed",
        "upstream_tls_failed",
        "upstream_timeout",
        "upstream_http_status",
        "upstream_body_too_large",
        "too_many_redirects",
        "upstream_protocol_error",
        "empty_content",
        "vendor_not_configured",
        "vendor_capability_missing",
        "vendor_unreachable",
        "vendor_timeout",
        "vendor_http_status",
        "vendor_rate_limited",
        "vendor_bad_response",
        "vendor_body_too_large",
        "vendor_page_failed",
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
            Self::EmptyContent { .. } => "empty_content",
            Self::Vendor(e) => e.kind.code(),
        }
    }

    /// Who caused the failure: a refused hop is the gate's doing, the rest the upstream's.
    pub fn failure_source(&self) -> FailureSource {
        match self {
            Self::Refused(_) => FailureSource::Gate,
            Self::Vendor(e) => e.kind.source(),
            _ => FailureSource::Vendor,
        }
    }
}

/// A target that passed the URL gates, with the addresses E2 checked.
#[derive(Clone, Debug)]
pub struct Admitted {
    /// The target.
    pub(crate) target: TargetUrl,
    /// Checked addresses; the only ones that may be dialled.
    pub(crate) addrs: Vec<IpAddr>,
}

/// Re-runs the URL gates (E1, E2, E4) on a redirect hop. Implemented by the pipeline so a
/// backend cannot forget a gate.
pub trait HopGate: Sync {
    /// Admit `url` or say why not.
    fn admit(&self, url: &str) -> impl Future<Output = Result<Admitted, DenyReason>> + Send;
}
