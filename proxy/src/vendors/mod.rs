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
pub use search::{KeyOrder, SearchHit, Searched};

/// Backends that can extract pages, by policy name.
pub const EXTRACT_BACKENDS: &[&str] = &[
    "direct",
    "firecrawl",
    "tavily",
    "exa",
    "parallel",
    "keenable",
    "keyless",
];
/// Backends that can search, by policy name.
pub const SEARCH_BACKENDS: &[&str] = &[
    "firecrawl",
    "tavily",
    "exa",
    "parallel",
    "keenable",
    "perplexity",
    "searxng",
    "brave-free",
    "ddgs",
    "xai",
    "keyless",
];

/// Refuse, at policy load, an extract backend that does not exist or cannot extract.
///
/// A search-only backend gets Hermes' typed search-only text.
pub fn check_extract_backend(name: &str) -> Result<(), String> {
    if EXTRACT_BACKENDS.contains(&name) {
        return Ok(());
    }
    if let Some(kind) = BackendKind::from_name(name) {
        return Err(format!(
            "'{name}': {}",
            search_only_error(kind.display_name())
        ));
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
    Err(format!(
        "unknown search backend '{name}'; this gate can search with: {}",
        SEARCH_BACKENDS.join(", ")
    ))
}

/// Hermes' typed error for extract through a search-only backend (0.19.0 wording).
pub fn search_only_error(display_name: &str) -> String {
    format!(
        "{display_name} is a search-only backend and cannot extract URL content. \
         Set web.extract_backend to firecrawl, tavily, exa, or parallel."
    )
}

/// Hermes' error for search through a backend that cannot search.
pub fn no_search_error(display_name: &str) -> String {
    format!(
        "{display_name} does not support web search. \
         Set web.search_backend to a search-capable provider."
    )
}

/// What a backend can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// It can extract page content.
    pub extract: bool,
    /// It can search the web.
    pub search: bool,
}

/// Every backend name, with its static facts; no client needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    /// The gate fetches pages itself.
    Direct,
    /// Firecrawl (`/v2/scrape`, `/v2/search`).
    Firecrawl,
    /// Tavily (`/extract`, `/search`).
    Tavily,
    /// Exa (`/contents`, `/search`).
    Exa,
    /// Parallel (`/v1beta/extract`, `/v1beta/search`).
    Parallel,
    /// Keenable (`/v1/fetch`, `/v1/search`, or their keyless `/public` forms).
    Keenable,
    /// Perplexity's Search API (`/search`).
    Perplexity,
    /// A SearXNG instance (`/search?format=json`).
    Searxng,
    /// Brave Search's web search API.
    BraveFree,
    /// DuckDuckGo's HTML search page (keyless).
    Ddgs,
    /// xAI's Responses API with the `web_search` tool.
    Xai,
    /// The keyless ring: exa, parallel, firecrawl and keenable without a key.
    Keyless,
}

// === impl BackendKind ===

impl BackendKind {
    /// Every backend, in registry order.
    pub const ALL: [Self; 12] = [
        Self::Direct,
        Self::Firecrawl,
        Self::Tavily,
        Self::Exa,
        Self::Parallel,
        Self::Keenable,
        Self::Perplexity,
        Self::Searxng,
        Self::BraveFree,
        Self::Ddgs,
        Self::Xai,
        Self::Keyless,
    ];

    /// The backend with policy name `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Policy name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Firecrawl => "firecrawl",
            Self::Tavily => "tavily",
            Self::Exa => "exa",
            Self::Parallel => "parallel",
            Self::Keenable => "keenable",
            Self::Perplexity => "perplexity",
            Self::Searxng => "searxng",
            Self::BraveFree => "brave-free",
            Self::Ddgs => "ddgs",
            Self::Xai => "xai",
            Self::Keyless => "keyless",
        }
    }

    /// Hermes 0.19.0's display name, used in typed errors.
    pub fn display_name(self) -> &'static str {
        match self {
            Self::Direct => "Direct",
            Self::Firecrawl => "Firecrawl",
            Self::Tavily => "Tavily",
            Self::Exa => "Exa",
            Self::Parallel => "Parallel",
            Self::Keenable => "Keenable",
            Self::Perplexity => "Perplexity",
            Self::Searxng => "SearXNG",
            Self::BraveFree => "Brave Search (Free)",
            Self::Ddgs => "DuckDuckGo (ddgs)",
            Self::Xai => "xAI Web Search (Grok)",
            Self::Keyless => "Keyless tier",
        }
    }

    /// What the backend can do.
    pub fn capabilities(self) -> Capabilities {
        let extract = matches!(
            self,
            Self::Direct
                | Self::Firecrawl
                | Self::Tavily
                | Self::Exa
                | Self::Parallel
                | Self::Keenable
                | Self::Keyless
        );
        Capabilities {
            extract,
            search: self != Self::Direct,
        }
    }

    /// The key order of this backend's search rows.
    pub fn key_order(self) -> KeyOrder {
        match self {
            Self::Direct
            | Self::Firecrawl
            | Self::Exa
            | Self::Parallel
            | Self::Keenable
            | Self::Keyless => KeyOrder::WebHit,
            Self::Tavily
            | Self::Perplexity
            | Self::Searxng
            | Self::BraveFree
            | Self::Ddgs
            | Self::Xai => KeyOrder::TitleHit,
        }
    }

    /// The public API base URL; `None` for `direct` and for `searxng` (operator-hosted).
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            Self::Direct | Self::Searxng | Self::Keyless => None,
            Self::Firecrawl => Some(firecrawl::CLOUD_BASE_URL),
            Self::Tavily => Some(tavily::DEFAULT_BASE_URL),
            Self::Exa => Some(exa::DEFAULT_BASE_URL),
            Self::Parallel => Some(parallel::DEFAULT_BASE_URL),
            Self::Keenable => Some(keenable::DEFAULT_BASE_URL),
            Self::Perplexity => Some(perplexity::DEFAULT_BASE_URL),
            Self::BraveFree => Some(brave_free::DEFAULT_BASE_URL),
            Self::Ddgs => Some(ddgs::DEFAULT_BASE_URL),
            Self::Xai => Some(xai::DEFAULT_BASE_URL),
        }
    }

    /// Hermes' per-call timeout for this vendor.
    pub fn default_timeout(self) -> std::time::Duration {
        let secs = match self {
            Self::Searxng | Self::BraveFree => 15,
            Self::Keenable => keenable::TIMEOUT_SECS,
            Self::Ddgs => ddgs::TIMEOUT_SECS,
            Self::Xai => 90,
            _ => 60,
        };
        std::time::Duration::from_secs(secs)
    }

    /// Whether the vendor answers without a key (`tier: free | auto`): the ring members.
    pub fn has_keyless_tier(self) -> bool {
        keyless::RING.contains(&self)
    }

    /// The env var Hermes reads the credential from.
    pub fn key_env(self) -> Option<&'static str> {
        match self {
            Self::Direct | Self::Searxng | Self::Ddgs | Self::Keyless => None,
            Self::Firecrawl => Some("FIRECRAWL_API_KEY"),
            Self::Tavily => Some("TAVILY_API_KEY"),
            Self::Exa => Some("EXA_API_KEY"),
            Self::Parallel => Some("PARALLEL_API_KEY"),
            Self::Keenable => Some("KEENABLE_API_KEY"),
            Self::Perplexity => Some("PERPLEXITY_API_KEY"),
            Self::BraveFree => Some("BRAVE_SEARCH_API_KEY"),
            Self::Xai => Some("XAI_API_KEY"),
        }
    }

    /// The env var Hermes (or the vendor SDK) reads a base URL override from.
    pub fn base_url_env(self) -> Option<&'static str> {
        match self {
            Self::Firecrawl => Some("FIRECRAWL_API_URL"),
            Self::Tavily => Some("TAVILY_BASE_URL"),
            Self::Parallel => Some("PARALLEL_BASE_URL"),
            Self::Perplexity => Some("PERPLEXITY_BASE_URL"),
            Self::Searxng => Some("SEARXNG_URL"),
            _ => None,
        }
    }

    /// An endpoint at the default base URL with this vendor's timeout; `None` without one.
    pub fn default_endpoint(self) -> Option<Endpoint> {
        let base = url::Url::parse(self.default_base_url()?).ok()?;
        let mut endpoint = Endpoint::new(base);
        endpoint.timeout = self.default_timeout();
        Some(endpoint)
    }
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
    /// Every code, for the uniqueness test and the README table.
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
