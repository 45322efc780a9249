//! The backend catalogue: every web backend's policy name, Hermes display name, capabilities,
//! credential variables, default endpoint and timeout, and the keyless ring. Static facts only;
//! the gate's clients live with the gate, and the controller renders policies from the same list.

/// The keyless ring, in Hermes' order: the vendors that also answer without a key.
pub const RING: [BackendKind; 4] = [
    BackendKind::Exa,
    BackendKind::Parallel,
    BackendKind::Firecrawl,
    BackendKind::Keenable,
];

/// The key order of a search row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyOrder {
    /// `{url, title, description, position}`.
    WebHit,
    /// `{title, url, description, position}`.
    TitleHit,
}

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
            Self::Firecrawl => Some("https://api.firecrawl.dev"),
            Self::Tavily => Some("https://api.tavily.com"),
            Self::Exa => Some("https://api.exa.ai"),
            Self::Parallel => Some("https://api.parallel.ai"),
            Self::Keenable => Some("https://api.keenable.ai"),
            Self::Perplexity => Some("https://api.perplexity.ai"),
            Self::BraveFree => Some("https://api.search.brave.com"),
            Self::Ddgs => Some("https://html.duckduckgo.com"),
            Self::Xai => Some("https://api.x.ai/v1"),
        }
    }

    /// Hermes' per-call timeout for this vendor.
    pub fn default_timeout(self) -> std::time::Duration {
        let secs = match self {
            Self::Searxng | Self::BraveFree => 15,
            Self::Keenable | Self::Ddgs => 30,
            Self::Xai => 90,
            _ => 60,
        };
        std::time::Duration::from_secs(secs)
    }

    /// Whether the vendor answers without a key (`tier: free | auto`): the ring members.
    pub fn has_keyless_tier(self) -> bool {
        RING.contains(&self)
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
}
