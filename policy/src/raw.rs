//! The policy file as written: serde types with `deny_unknown_fields`, no interpretation.
//!
//! Every field is optional except `version`; defaults are applied by the validation step in
//! the crate root, which also documents them. The same types serialize: the controller builds
//! a [`RawPolicy`] and writes it, so the file's schema is written once. Unset fields and empty
//! sections are left out of what is written.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The top level of the gate policy file.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawPolicy {
    /// Policy format version; must be `v1`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Web tool settings (backends, character limit, cache).
    #[serde(default)]
    #[serde(skip_serializing_if = "crate::raw::is_default")]
    pub web: RawWeb,
    /// The website blocklist (gate E4).
    #[serde(default)]
    #[serde(skip_serializing_if = "crate::raw::is_default")]
    pub website_blocklist: RawBlocklist,
    /// Egress rules (address exceptions, ports, resolver).
    #[serde(default)]
    #[serde(skip_serializing_if = "crate::raw::is_default")]
    pub egress: RawEgress,
    /// The shared volume: cache and full-text store.
    #[serde(default)]
    #[serde(skip_serializing_if = "crate::raw::is_default")]
    pub store: RawStore,
    /// Listener addresses.
    #[serde(default)]
    #[serde(skip_serializing_if = "crate::raw::is_default")]
    pub listen: RawListen,
    /// Limits of the gate's own page fetches (the `direct` backend).
    #[serde(default)]
    #[serde(skip_serializing_if = "crate::raw::is_default")]
    pub fetch: RawFetch,
    /// Fleet reports served on the admin listener.
    #[serde(default)]
    #[serde(skip_serializing_if = "crate::raw::is_default")]
    pub report: RawReport,
    /// Settings shared by every watch (the pinned MCP endpoint).
    #[serde(default)]
    #[serde(skip_serializing_if = "crate::raw::is_default")]
    pub watch: super::watch::RawWatchSettings,
    /// Watches: MCP read tools whose new items wake the agent.
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub watches: Vec<super::watch::RawWatch>,
    /// The LLM route: providers, roles, enforcement.
    #[serde(default)]
    #[serde(skip_serializing_if = "crate::raw::is_default")]
    pub llm: super::llm::RawLlm,
    /// Extra secret rules of gate E1 (gitleaks rule files), their mode and exemptions.
    #[serde(default)]
    #[serde(skip_serializing_if = "crate::raw::is_default")]
    pub secrets: RawSecrets,
}

/// `secrets:`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawSecrets {
    /// `enforce` or `report` (the rule files' rules only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// gitleaks TOML rule files.
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules_files: Vec<String>,
    /// gitleaks TOML rule files written inline (a cluster baseline's rules, rendered by the
    /// controller into the policy so they travel with it).
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inline_rules: Vec<String>,
    /// Rule ids or URL prefixes exempt from the rule sets.
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
}

/// `web:`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawWeb {
    /// Shared backend for both capabilities.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// Backend for extract.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extract_backend: Option<String>,
    /// Backend for search.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_backend: Option<String>,
    /// Default character limit of an extracted page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub char_limit: Option<i64>,
    /// Main content (default) or the whole page, for the `direct` backend.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub only_main_content: Option<bool>,
    /// Extract cache.
    #[serde(default)]
    #[serde(skip_serializing_if = "crate::raw::is_default")]
    pub cache: RawCache,
    /// Per-backend connection settings, keyed by backend name.
    #[serde(default)]
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub vendors: BTreeMap<String, RawVendor>,
    /// Backends tried once when the extract backend fails for every URL of a call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rescue: Option<Vec<String>>,
}

/// `web.vendors.<name>:`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawVendor {
    /// API base URL (self-hosted Firecrawl, SearXNG, a regional endpoint).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// File holding the API key (a mounted Secret).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_file: Option<String>,
    /// Environment variable holding the API key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Per-attempt timeout, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Response body cap, bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<u64>,
    /// Retries after the first attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    /// Parallel search mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_mode: Option<String>,
    /// xAI model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// xAI allowed domains.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_domains: Option<Vec<String>>,
    /// xAI excluded domains.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excluded_domains: Option<Vec<String>>,
    /// `free`, `paid` or `auto` (keyless-capable vendors).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// The keyless endpoint (keyless-capable vendors).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keyless_url: Option<String>,
}

/// `web.cache:`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawCache {
    /// Cache on or off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Entry lifetime in minutes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_minutes: Option<i64>,
    /// Hosts never cached.
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exempt_hosts: Vec<String>,
    /// Entry count bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_entries: Option<u64>,
    /// Byte bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

/// `websiteBlocklist:`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawBlocklist {
    /// Blocklist on or off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// `enforce` or `report`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Inline rules.
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<String>,
    /// Files of rules, one per line.
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shared_files: Vec<String>,
}

/// `egress:`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawEgress {
    /// Explicit address exceptions.
    #[serde(default, rename = "allowCIDRs")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_cidrs: Vec<String>,
    /// Names exempt from the pre-DNS name rules.
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_hosts: Vec<String>,
    /// Port allow-list for egress connections.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<u16>>,
    /// The gate's own resolver.
    #[serde(default)]
    #[serde(skip_serializing_if = "crate::raw::is_default")]
    pub resolver: RawResolver,
    /// Raw-IP egress on transparent capture (`egress.allowRawIP`).
    #[serde(rename = "allowRawIP")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_raw_ip: Option<bool>,
    /// Ports whose CONNECT tunnels may carry bytes that are neither TLS nor HTTP/1.
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub raw_tunnel_ports: Vec<u16>,
    /// Concurrent tunnels per egress listener.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tunnels: Option<u64>,
    /// Concurrent client connections per egress listener.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<u64>,
    /// Egress listener timeouts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<super::egress::RawEgressTimeouts>,
}

/// `egress.resolver:`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawResolver {
    /// `ip:port` of name servers; empty means the system resolver.
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    /// Per-query timeout in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Attempts per query.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<usize>,
}

/// `store:`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawStore {
    /// Root of the shared volume.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// The same folder as the agent sees it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_visible_root: Option<String>,
}

/// `listen:`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawListen {
    /// Vendor-compatible API listener.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// Forward proxy listener.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forward_proxy: Option<String>,
    /// Transparent capture listener.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transparent: Option<String>,
    /// Admin listener.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin: Option<String>,
}

/// `fetch:`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawFetch {
    /// TCP (+TLS) connect timeout, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_timeout_ms: Option<u64>,
    /// Time to response headers, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header_timeout_ms: Option<u64>,
    /// Whole fetch including redirects, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_timeout_ms: Option<u64>,
    /// Body cap in bytes (after decompression).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<u64>,
    /// Redirects followed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_redirects: Option<u8>,
    /// `User-Agent` of direct fetches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
}

/// `report:`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawReport {
    /// Hermes home mounted read-only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hermes_home: Option<String>,
    /// File holding the bearer token for `/v1/report`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_file: Option<String>,
    /// Cron cost window in days.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub days: Option<u32>,
    /// The agent's managed config directory as mounted in the gate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub managed_dir: Option<String>,
}

/// Whether a section equals its default, so a written policy leaves it out.
pub fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}
