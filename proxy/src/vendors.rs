//! Upstream backends: who actually fetches a page once every gate has allowed it.
//!
//! One file per backend. `direct` is built in and keyless: the gate fetches the page itself
//! through a connector that dials only addresses E2 checked, and re-gates every redirect hop.
//! The vendor backends (`firecrawl`, `tavily`, `exa`, `parallel`, `keenable` for extract and
//! search; `perplexity`, `searxng`, `brave-free`, `ddgs`, `xai` for search only) speak each vendor's
//! wire format through the shared [`client`]. exa, parallel, firecrawl and keenable also answer
//! without a key ([`keyless`]), and `keyless` names their ring. Backends never build HTTP
//! responses; failures are [`VendorFailure`] values with stable codes.

use std::future::Future;
use std::net::IpAddr;

use crate::context::TargetUrl;
use crate::gates::DenyReason;

pub mod brave_free;
pub mod client;
pub mod ddgs;
pub mod direct;
pub mod exa;
pub mod firecrawl;
pub mod html;
pub mod keenable;
pub mod keyless;
pub mod parallel;
pub mod perplexity;
pub mod registry;
pub mod search;
pub mod searxng;
pub mod tavily;
pub mod xai;

pub use client::{Endpoint, FailureSource, VendorError, VendorErrorKind};
pub use fleetgate_policy::backends::{
    BackendKind, Capabilities, EXTRACT_BACKENDS, KeyOrder, SEARCH_BACKENDS, check_extract_backend,
    check_search_backend, no_search_error, search_only_error,
};
pub use search::{SearchHit, Searched};

/// An endpoint at `kind`'s default base URL with its timeout; `None` without one.
pub fn default_endpoint(kind: BackendKind) -> Option<Endpoint> {
    let base = url::Url::parse(kind.default_base_url()?).ok()?;
    let mut endpoint = Endpoint::new(base);
    endpoint.timeout = kind.default_timeout();
    Some(endpoint)
}

/// A configured backend: the built-in fetcher or a vendor client.
#[derive(Clone, Debug)]
pub enum Backend {
    /// The gate fetches pages itself; the pipeline drives it hop by hop.
    Direct(direct::DirectFetcher),
    /// Firecrawl.
    Firecrawl(firecrawl::FirecrawlClient),
    /// Tavily.
    Tavily(tavily::TavilyClient),
    /// Exa.
    Exa(exa::ExaClient),
    /// Parallel.
    Parallel(parallel::ParallelClient),
    /// Keenable, keyed or keyless.
    Keenable(keenable::KeenableClient),
    /// Perplexity search.
    Perplexity(perplexity::PerplexityClient),
    /// SearXNG.
    Searxng(searxng::SearxngClient),
    /// Brave Search.
    BraveFree(brave_free::BraveFreeClient),
    /// DuckDuckGo.
    Ddgs(ddgs::DdgsClient),
    /// xAI web search.
    Xai(xai::XaiClient),
    /// Exa, Parallel or Firecrawl on its keyless endpoint.
    Keyless(keyless::KeylessClient),
    /// The keyless ring, each call starting at the cursor.
    Ring(keyless::Ring),
}

// === impl Backend ===

impl Backend {
    /// The vendor client of `kind` at `endpoint`; `None` for `direct`.
    pub fn vendor(kind: BackendKind, endpoint: Endpoint) -> Option<Self> {
        Some(match kind {
            BackendKind::Direct | BackendKind::Keyless => return None,
            BackendKind::Firecrawl => Self::Firecrawl(firecrawl::FirecrawlClient::new(endpoint)),
            BackendKind::Tavily => Self::Tavily(tavily::TavilyClient::new(endpoint)),
            BackendKind::Exa => Self::Exa(exa::ExaClient::new(endpoint)),
            BackendKind::Parallel => Self::Parallel(parallel::ParallelClient::new(endpoint)),
            BackendKind::Keenable => Self::Keenable(keenable::KeenableClient::new(endpoint)),
            BackendKind::Perplexity => {
                Self::Perplexity(perplexity::PerplexityClient::new(endpoint))
            }
            BackendKind::Searxng => Self::Searxng(searxng::SearxngClient::new(endpoint)),
            BackendKind::BraveFree => Self::BraveFree(brave_free::BraveFreeClient::new(endpoint)),
            BackendKind::Ddgs => Self::Ddgs(ddgs::DdgsClient::new(endpoint)),
            BackendKind::Xai => Self::Xai(xai::XaiClient::new(endpoint)),
        })
    }

    /// Which backend this is.
    pub fn kind(&self) -> BackendKind {
        match self {
            Self::Direct(_) => BackendKind::Direct,
            Self::Firecrawl(_) => BackendKind::Firecrawl,
            Self::Tavily(_) => BackendKind::Tavily,
            Self::Exa(_) => BackendKind::Exa,
            Self::Parallel(_) => BackendKind::Parallel,
            Self::Keenable(_) => BackendKind::Keenable,
            Self::Perplexity(_) => BackendKind::Perplexity,
            Self::Searxng(_) => BackendKind::Searxng,
            Self::BraveFree(_) => BackendKind::BraveFree,
            Self::Ddgs(_) => BackendKind::Ddgs,
            Self::Xai(_) => BackendKind::Xai,
            Self::Keyless(c) => c.kind(),
            Self::Ring(_) => BackendKind::Keyless,
        }
    }

    /// Policy name.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// Hermes' display name.
    pub fn display_name(&self) -> &'static str {
        self.kind().display_name()
    }

    /// What the backend can do.
    pub fn capabilities(&self) -> Capabilities {
        self.kind().capabilities()
    }

    /// Whether it has what it needs to be called: its credential (Firecrawl: a key or a
    /// self-hosted base URL); SearXNG exists only with a base URL; `direct` always.
    pub fn available(&self) -> bool {
        match self {
            Self::Direct(_) | Self::Searxng(_) | Self::Keyless(_) | Self::Ring(_) => true,
            Self::Firecrawl(c) => c.available(),
            Self::Tavily(c) => c.available(),
            Self::Exa(c) => c.available(),
            Self::Parallel(c) => c.available(),
            Self::Keenable(c) => c.available(),
            Self::Perplexity(c) => c.available(),
            Self::BraveFree(c) => c.available(),
            Self::Ddgs(c) => c.available(),
            Self::Xai(c) => c.available(),
        }
    }

    /// Whether calls go to a vendor without a key: a ring member's keyless endpoint or the ring.
    pub fn keyless(&self) -> bool {
        match self {
            Self::Keyless(_) | Self::Ring(_) => true,
            Self::Keenable(k) => k.keyless(),
            _ => false,
        }
    }

    /// Extract `urls`: one result per URL, in input order.
    ///
    /// `direct` is driven by the pipeline through [`direct::DirectFetcher::fetch`]; here it
    /// and the search-only backends answer every URL with a capability error.
    pub async fn extract(&self, urls: &[String]) -> Vec<Result<Page, VendorFailure>> {
        let refusal = match self {
            Self::Firecrawl(c) => return c.extract(urls).await,
            Self::Tavily(c) => return c.extract(urls).await,
            Self::Exa(c) => return c.extract(urls).await,
            Self::Parallel(c) => return c.extract(urls).await,
            Self::Keenable(c) => return c.extract(urls).await,
            Self::Keyless(c) => return c.extract(urls).await,
            Self::Ring(r) => return r.extract(keyless::Start::Cursor, urls).await,
            Self::Direct(_) => "the direct backend fetches through the pipeline".to_string(),
            Self::Perplexity(_)
            | Self::Searxng(_)
            | Self::BraveFree(_)
            | Self::Ddgs(_)
            | Self::Xai(_) => search_only_error(self.display_name()),
        };
        fail_all(
            urls,
            VendorError::new(self.name(), VendorErrorKind::Unsupported, refusal),
        )
    }

    /// Search for `query`, at most `limit` rows (each vendor clamps further).
    pub async fn search(&self, query: &str, limit: usize) -> Result<Searched, VendorFailure> {
        let result = match self {
            Self::Direct(_) => Err(VendorError::new(
                self.name(),
                VendorErrorKind::Unsupported,
                no_search_error(self.display_name()),
            )),
            Self::Firecrawl(c) => c.search(query, limit).await,
            Self::Tavily(c) => c.search(query, limit).await,
            Self::Exa(c) => c.search(query, limit).await,
            Self::Parallel(c) => c.search(query, limit).await,
            Self::Keenable(c) => c.search(query, limit).await,
            Self::Perplexity(c) => c.search(query, limit).await,
            Self::Searxng(c) => c.search(query, limit).await,
            Self::BraveFree(c) => c.search(query, limit).await,
            Self::Ddgs(c) => c.search(query, limit).await,
            Self::Xai(c) => c.search(query, limit).await,
            Self::Keyless(c) => c.search(query, limit).await,
            Self::Ring(r) => return r.search(keyless::Start::Cursor, query, limit).await,
        };
        result
            .map(|hits| Searched {
                hits,
                served_by: self.kind(),
            })
            .map_err(VendorFailure::Vendor)
    }
}

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
    pub content_type: Option<String>,
    /// False when the body is not a text type (E7 names the binary kind or refuses it).
    pub textual: bool,
    /// The ring member that served the page when the keyless ring did.
    pub via: Option<BackendKind>,
    /// Every URL after the requested one (redirect hops, a vendor's final URL), in order,
    /// each with the addresses E2 checked for it (none when a vendor dialled it).
    pub hops: Vec<Hop>,
}

/// One URL a page was fetched through after the requested one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hop {
    /// The normalised URL.
    pub url: String,
    /// The addresses E2 returned for it, when the gate dialled it.
    pub addrs: Vec<IpAddr>,
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
