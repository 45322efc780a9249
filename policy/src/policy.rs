//! The validated gate policy: the domain values every other module reads, built by
//! [`crate::validate`] from the file as written ([`crate::raw`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::addr::AddrPolicy;
use crate::egress::EgressLimits;
use crate::llm::LlmPolicy;
use crate::secret_rules::RuleSet;
use crate::watch::WatchSpec;

/// Hermes' default extract character limit.
pub const DEFAULT_CHAR_LIMIT: usize = 15_000;
/// Smallest accepted character limit.
pub const MIN_CHAR_LIMIT: usize = 2_000;
/// Largest accepted character limit.
pub const MAX_CHAR_LIMIT: usize = 500_000;

/// The only policy format version this gate reads.
pub const POLICY_VERSION: &str = "v1";

/// The policy used when `serve` gets no `--policy`: the keyless `direct` backend, cache and
/// store under `./.fleetgate/`, listeners on loopback.
pub const EMBEDDED_DEFAULT: &str = include_str!("default.yaml");

/// A validated gate policy.
#[derive(Clone, Debug)]
pub struct Policy {
    /// Web tool settings.
    pub web: WebPolicy,
    /// The website blocklist.
    pub blocklist: BlocklistPolicy,
    /// Egress rules.
    pub egress: EgressPolicy,
    /// The shared volume.
    pub store: StorePolicy,
    /// Listener addresses.
    pub listen: ListenPolicy,
    /// Limits of the gate's own fetches.
    pub fetch: FetchPolicy,
    /// Fleet reports.
    pub report: ReportPolicy,
    /// Watches (`watches:`), with the pinned endpoint already applied.
    pub watches: Vec<WatchSpec>,
    /// The LLM route.
    pub llm: LlmPolicy,
    /// Extra secret rules of gate E1.
    pub secrets: SecretsPolicy,
    /// sha256 of the policy file bytes (hex), shown in `/v1/status`.
    pub sha256: String,
}

/// `web:`.
#[derive(Clone, Debug)]
pub struct WebPolicy {
    /// Backend serving extract. Default `direct`.
    pub extract_backend: String,
    /// Backend serving search, when one is configured.
    pub search_backend: Option<String>,
    /// Default character limit, 2000..=500000. Default 15000.
    pub char_limit: usize,
    /// Whether the `direct` backend returns a page's main content (`true`, the default) or
    /// the whole page; a call may ask for either (Firecrawl `onlyMainContent`, Tavily
    /// `extract_depth`).
    pub only_main_content: bool,
    /// The extract cache.
    pub cache: CachePolicy,
    /// Connection settings per vendor backend (only the configured ones).
    pub vendors: Vec<VendorSettings>,
    /// Backends tried once, in order, when the extract backend fails for every URL of a call.
    /// Default `[direct]`; empty turns rescue off.
    pub rescue: Vec<String>,
}

/// `web.vendors.<name>`: how the gate reaches one vendor. Keys never live in the policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VendorSettings {
    /// Backend name (`firecrawl`, `searxng`, ...).
    pub name: String,
    /// API base URL; default the vendor's public API (SearXNG has none and needs one).
    pub base_url: Option<url::Url>,
    /// File holding the API key (a mounted Secret); read at every policy load.
    pub api_key_file: Option<PathBuf>,
    /// Environment variable holding the API key. Default the vendor's usual one
    /// (`FIRECRAWL_API_KEY`, `TAVILY_API_KEY`, ...).
    pub api_key_env: Option<String>,
    /// Per-attempt timeout. Default the vendor's (60 s; SearXNG and Brave 15 s; xAI 90 s).
    pub timeout: Option<Duration>,
    /// Response body cap in bytes. Default 32 MiB.
    pub max_body_bytes: Option<u64>,
    /// Retries after the first attempt on 5xx, timeouts and connection errors. Default 2.
    pub retries: Option<u32>,
    /// Parallel's search mode (`agentic`, `one-shot`, `fast`, ...).
    pub search_mode: Option<String>,
    /// xAI model.
    pub model: Option<String>,
    /// xAI allowed domains (at most 5).
    pub allowed_domains: Vec<String>,
    /// xAI excluded domains (at most 5).
    pub excluded_domains: Vec<String>,
    /// Keyed or keyless, for a vendor with a keyless tier (Hermes' `web.provider_tier`).
    pub tier: VendorTier,
    /// The keyless endpoint; default the vendor's public one (Exa's and Parallel's MCP
    /// servers, Firecrawl's cloud API, Keenable's base URL).
    pub keyless_url: Option<url::Url>,
}

/// `web.vendors.<name>.tier`: how a vendor with a keyless tier is called.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VendorTier {
    /// Keyless when no key is configured, keyed otherwise.
    #[default]
    Auto,
    /// Always keyless, even with a key.
    Free,
    /// Always keyed: without a key the vendor is not configured.
    Paid,
}

/// `web.cache:`.
#[derive(Clone, Debug)]
pub struct CachePolicy {
    /// Cache on or off. Default on.
    pub enabled: bool,
    /// Entry lifetime, 1..=1440 minutes. Default 20 minutes.
    pub ttl: Duration,
    /// Hosts never cached (exact host or any subdomain; a leading `*.` is ignored).
    pub exempt_hosts: Vec<String>,
    /// Entry count bound. Default 5000.
    pub max_entries: u64,
    /// Byte bound. Default 512 MiB.
    pub max_bytes: u64,
}

/// Whether a gate refuses or only reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EnforcementMode {
    /// Refuse matching requests.
    #[default]
    Enforce,
    /// Let them pass; log and count what would have been refused.
    Report,
}

/// `websiteBlocklist:`.
#[derive(Clone, Debug)]
pub struct BlocklistPolicy {
    /// Blocklist on or off. Default off when the section is absent, on when it lists rules
    /// and says nothing (fleetgate does not repeat Hermes' "rules listed but silently off").
    pub enabled: bool,
    /// Enforce (default) or report.
    pub mode: EnforcementMode,
    /// Inline rules.
    pub domains: Vec<String>,
    /// Shared rule files, absolute.
    pub shared_files: Vec<PathBuf>,
}

/// `secrets:`: what gate E1 adds to its built-in rules.
///
/// Hermes' prefix families and query names and the built-in rule set always enforce; the
/// policy can add rules (`rulesFiles`, in the gitleaks rule-file format), run the added rules
/// in shadow (`mode: report`: logged and counted as `report`, not refused) and exempt rule
/// ids or URL prefixes (`allow`). No setting here can lower Hermes' floor.
#[derive(Clone, Debug, Default)]
pub struct SecretsPolicy {
    /// Enforce (default) or report the rules of `rules_files` and `inlineRules`.
    pub mode: EnforcementMode,
    /// The rule files, absolute.
    pub rules_files: Vec<PathBuf>,
    /// Their compiled rules, one set per file.
    pub rules: Vec<std::sync::Arc<RuleSet>>,
    /// Rule ids (built-in or from the files) that never refuse.
    pub allow_rules: Vec<String>,
    /// URL prefixes (`https://docs.example.com/`) the rule sets do not judge.
    pub allow_prefixes: Vec<String>,
}

/// `egress:`.
#[derive(Clone, Debug)]
pub struct EgressPolicy {
    /// The address table plus explicit exceptions.
    pub addrs: AddrPolicy,
    /// Ports egress connections may use. Default 80 and 443.
    pub ports: Vec<u16>,
    /// Whether the policy set `egress.ports` itself. Only then does the list also bind the
    /// extract pipeline's own fetches: unset, those follow Hermes (any port), while the
    /// egress listeners keep the 80/443 default.
    pub ports_explicit: bool,
    /// The gate's own resolver.
    pub resolver: ResolverPolicy,
    /// Raw-IP switch, tunnel cap and timeouts of the egress listeners.
    pub limits: EgressLimits,
}

/// `egress.resolver:`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolverPolicy {
    /// Name servers; empty means the system resolver (`/etc/resolv.conf`).
    pub nameservers: Vec<SocketAddr>,
    /// How long one try waits for an answer. Default 2.5 s.
    pub timeout: Duration,
    /// Tries per lookup, the first included (1..=5). Default 2, so a name whose server never
    /// answers is refused as `dns_failure` after `timeout × attempts` = 5 s at the most.
    pub attempts: usize,
}

/// `store:`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorePolicy {
    /// Root of the shared volume (`extract/` cache and `store/` full texts below it).
    /// Default `./.fleetgate`.
    pub root: PathBuf,
    /// The same folder as the agent sees it; footers name paths under it.
    pub agent_visible_root: Option<PathBuf>,
}

/// `listen:`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenPolicy {
    /// API listener. Default `127.0.0.1:15180`.
    pub api: SocketAddr,
    /// Forward proxy listener, when enabled.
    pub forward_proxy: Option<SocketAddr>,
    /// Transparent listener, when enabled.
    pub transparent: Option<SocketAddr>,
    /// Admin listener. Default `127.0.0.1:15190`; in a pod the controller renders the pod IP.
    pub admin: SocketAddr,
}

/// `fetch:`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchPolicy {
    /// TCP + TLS connect timeout. Default 5 s.
    pub connect_timeout: Duration,
    /// Time to response headers. Default 15 s.
    pub header_timeout: Duration,
    /// Whole fetch including redirects. Default 30 s.
    pub total_timeout: Duration,
    /// Body cap in bytes after decompression. Default 10 MiB.
    pub max_body_bytes: u64,
    /// Redirects followed, each re-gated. Default 5, at most 10.
    pub max_redirects: u8,
    /// `User-Agent` of direct fetches.
    pub user_agent: String,
}

/// `report:`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportPolicy {
    /// Hermes home (read-only mount). Reports are off without it.
    pub hermes_home: Option<PathBuf>,
    /// Bearer token file for `/v1/report`; the endpoint is off without it.
    pub token_file: Option<PathBuf>,
    /// Cron cost window in days. Default 7.
    pub days: u32,
    /// The agent's managed config directory as mounted in the gate; default resolved like
    /// Hermes (`HERMES_MANAGED_DIR`, else `/etc/hermes`).
    pub managed_dir: Option<PathBuf>,
}
