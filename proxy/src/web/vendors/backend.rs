//! The configured backend: the built-in fetcher or one vendor client, and the one `match`
//! that dispatches a fetch or a search to it.

use super::client::{Endpoint, VendorError, VendorErrorKind};
use super::keyless::Start;
use super::page::{Page, VendorFailure, fail_all};
use super::search::Searched;
use super::{
    brave_free, ddgs, direct, exa, firecrawl, keenable, keyless, parallel, perplexity, searxng,
    tavily, xai,
};
use crate::policy::backends::{BackendKind, Capabilities, no_search_error, search_only_error};

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
    pub(crate) fn kind(&self) -> BackendKind {
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
    pub(crate) fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// Hermes' display name.
    pub(crate) fn display_name(&self) -> &'static str {
        self.kind().display_name()
    }

    /// What the backend can do.
    pub(crate) fn capabilities(&self) -> Capabilities {
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
    pub(crate) fn keyless(&self) -> bool {
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
            Self::Ring(r) => return r.extract(Start::Cursor, urls).await,
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
            Self::Ring(r) => return r.search(Start::Cursor, query, limit).await,
        };
        result
            .map(|hits| Searched {
                hits,
                served_by: self.kind(),
            })
            .map_err(VendorFailure::Vendor)
    }
}

// === impl Start ===

impl Start {
    /// The walk of a rescue for the configured backend `primary`.
    pub(crate) fn rescuing(primary: &Backend) -> Self {
        match primary {
            Backend::Keyless(c) => Self::After(c.kind()),
            Backend::Keenable(k) if k.keyless() => Self::After(BackendKind::Keenable),
            other => Self::At(other.kind()),
        }
    }
}
