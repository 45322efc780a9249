//! The policy file as written: serde types with `deny_unknown_fields`, no interpretation.
//!
//! Every field is optional except `version`; defaults are applied by the validation step in
//! `policy::mod`, which also documents them.

use serde::Deserialize;

/// The top level of the gate policy file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawPolicy {
    /// Policy format version; must be `v1`.
    pub version: Option<String>,
    /// Web tool settings (backends, character limit, cache).
    #[serde(default)]
    pub web: RawWeb,
    /// The website blocklist (gate E4).
    #[serde(default)]
    pub website_blocklist: RawBlocklist,
    /// Egress rules (address exceptions, ports, resolver).
    #[serde(default)]
    pub egress: RawEgress,
    /// The shared volume: cache and full-text store.
    #[serde(default)]
    pub store: RawStore,
    /// Listener addresses.
    #[serde(default)]
    pub listen: RawListen,
    /// Limits of the gate's own page fetches (the `direct` backend).
    #[serde(default)]
    pub fetch: RawFetch,
    /// Fleet reports served on the admin listener.
    #[serde(default)]
    pub report: RawReport,
    /// Settings shared by every watch (the pinned MCP endpoint).
    #[serde(default)]
    pub watch: super::watch::RawWatchSettings,
    /// Watches: MCP read tools whose new items wake the agent.
    #[serde(default)]
    pub watches: Vec<super::watch::RawWatch>,
    /// The LLM route: providers, roles, enforcement.
    #[serde(default)]
    pub llm: super::llm::RawLlm,
    /// Extra secret rules of gate E1 (gitleaks rule files), their mode and exemptions.
    #[serde(default)]
    pub secrets: RawSecrets,
}

/// `secrets:`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawSecrets {
    /// `enforce` or `report` (the rule files' rules only).
    pub mode: Option<String>,
    /// gitleaks TOML rule files.
    #[serde(default)]
    pub rules_files: Vec<String>,
    /// gitleaks TOML rule files written inline (a cluster baseline's rules, rendered by the
    /// controller into the policy so they travel with it).
    #[serde(default)]
    pub inline_rules: Vec<String>,
    /// Rule ids or URL prefixes exempt from the rule sets.
    #[serde(default)]
    pub allow: Vec<String>,
}

/// `web:`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawWeb {
    /// Shared backend for both capabilities.
    pub backend: Option<String>,
    /// Backend for extract.
    pub extract_backend: Option<String>,
    /// Backend for search.
    pub search_backend: Option<String>,
    /// Default character limit of an extracted page.
    pub char_limit: Option<i64>,
    /// Extract cache.
    #[serde(default)]
    pub cache: RawCache,
    /// Per-backend connection settings, keyed by backend name.
    #[serde(default)]
    pub vendors: std::collections::BTreeMap<String, RawVendor>,
    /// Backends tried once when the extract backend fails for every URL of a call.
    pub rescue: Option<Vec<String>>,
}

/// `web.vendors.<name>:`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawVendor {
    /// API base URL (self-hosted Firecrawl, SearXNG, a regional endpoint).
    pub base_url: Option<String>,
    /// File holding the API key (a mounted Secret).
    pub api_key_file: Option<String>,
    /// Environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// Per-attempt timeout, ms.
    pub timeout_ms: Option<u64>,
    /// Response body cap, bytes.
    pub max_body_bytes: Option<u64>,
    /// Retries after the first attempt.
    pub retries: Option<u32>,
    /// Parallel search mode.
    pub search_mode: Option<String>,
    /// xAI model.
    pub model: Option<String>,
    /// xAI allowed domains.
    pub allowed_domains: Option<Vec<String>>,
    /// xAI excluded domains.
    pub excluded_domains: Option<Vec<String>>,
    /// `free`, `paid` or `auto` (keyless-capable vendors).
    pub tier: Option<String>,
    /// The keyless endpoint (keyless-capable vendors).
    pub keyless_url: Option<String>,
}

/// `web.cache:`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawCache {
    /// Cache on or off.
    pub enabled: Option<bool>,
    /// Entry lifetime in minutes.
    pub ttl_minutes: Option<i64>,
    /// Hosts never cached.
    #[serde(default)]
    pub exempt_hosts: Vec<String>,
    /// Entry count bound.
    pub max_entries: Option<u64>,
    /// Byte bound.
    pub max_bytes: Option<u64>,
}

/// `websiteBlocklist:`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawBlocklist {
    /// Blocklist on or off.
    pub enabled: Option<bool>,
    /// `enforce` or `report`.
    pub mode: Option<String>,
    /// Inline rules.
    #[serde(default)]
    pub domains: Vec<String>,
    /// Files of rules, one per line.
    #[serde(default)]
    pub shared_files: Vec<String>,
}

/// `egress:`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawEgress {
    /// Explicit address exceptions.
    #[serde(default, rename = "allowCIDRs")]
    pub allow_cidrs: Vec<String>,
    /// Names exempt from the pre-DNS name rules.
    #[serde(default)]
    pub allow_hosts: Vec<String>,
    /// Port allow-list for egress connections.
    pub ports: Option<Vec<u16>>,
    /// The gate's own resolver.
    #[serde(default)]
    pub resolver: RawResolver,
    /// Raw-IP egress on transparent capture (`egress.allowRawIP`).
    #[serde(rename = "allowRawIP")]
    pub allow_raw_ip: Option<bool>,
    /// Concurrent tunnels per egress listener.
    pub max_tunnels: Option<u64>,
    /// Concurrent client connections per egress listener.
    pub max_connections: Option<u64>,
    /// Egress listener timeouts.
    pub timeouts: Option<super::egress::RawEgressTimeouts>,
}

/// `egress.resolver:`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawResolver {
    /// `ip:port` of name servers; empty means the system resolver.
    #[serde(default)]
    pub nameservers: Vec<String>,
    /// Per-query timeout in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Attempts per query.
    pub attempts: Option<usize>,
}

/// `store:`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawStore {
    /// Root of the shared volume.
    pub root: Option<String>,
    /// The same folder as the agent sees it.
    pub agent_visible_root: Option<String>,
}

/// `listen:`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawListen {
    /// Vendor-compatible API listener.
    pub api: Option<String>,
    /// Forward proxy listener.
    pub forward_proxy: Option<String>,
    /// Transparent capture listener.
    pub transparent: Option<String>,
    /// Admin listener.
    pub admin: Option<String>,
}

/// `fetch:`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawFetch {
    /// TCP (+TLS) connect timeout, ms.
    pub connect_timeout_ms: Option<u64>,
    /// Time to response headers, ms.
    pub header_timeout_ms: Option<u64>,
    /// Whole fetch including redirects, ms.
    pub total_timeout_ms: Option<u64>,
    /// Body cap in bytes (after decompression).
    pub max_body_bytes: Option<u64>,
    /// Redirects followed.
    pub max_redirects: Option<u8>,
    /// `User-Agent` of direct fetches.
    pub user_agent: Option<String>,
}

/// `report:`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawReport {
    /// Hermes home mounted read-only.
    pub hermes_home: Option<String>,
    /// File holding the bearer token for `/v1/report`.
    pub token_file: Option<String>,
    /// Cron cost window in days.
    pub days: Option<u32>,
    /// The agent's managed config directory as mounted in the gate.
    pub managed_dir: Option<String>,
}
