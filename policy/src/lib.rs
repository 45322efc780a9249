//! fleetgate's policy: the gate policy file and the static facts both the gate and the
//! controller decide with — the backend catalogue ([`backends`]), the address table of gate E2
//! ([`addr`]), the secret rules of gate E1 ([`secret_rules`]), watch header templates
//! ([`header_template`]) and the keys a managed Hermes config pins ([`managed`]). No I/O beyond
//! reading rule files named in a policy; no network, no SQLite.
//!
//! The gate policy file: YAML with `version: v1`, camelCase keys, unknown keys refused.
//!
//! Parsed in two layers: [`raw::RawPolicy`] is the file as written (serde,
//! `deny_unknown_fields`); [`Policy`] is the validated domain value every other module reads.
//! Validation collects every problem, each naming the field and the fix, so
//! `fleetgate-proxy check-policy` shows them all at once. The controller renders this file
//! (`fleetgate_controller`), so it is part of the wire contract between the two crates.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::IpNet;
use sha2::{Digest, Sha256};

use crate::addr::AddrPolicy;
use crate::backends as vendors;

pub mod addr;
pub mod backends;
pub mod egress;
pub mod header_template;
pub mod llm;
pub mod managed;
pub mod raw;
pub mod secret_rules;
#[cfg(test)]
mod tests;
pub mod watch;

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
    pub watches: Vec<watch::WatchSpec>,
    /// The LLM route.
    pub llm: llm::LlmPolicy,
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
    pub rules: Vec<std::sync::Arc<crate::secret_rules::RuleSet>>,
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
    pub limits: egress::EgressLimits,
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

/// One problem in a policy file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Dotted path of the field (`web.charLimit`), or `policy` for file-level problems.
    pub field: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// Every problem found in a policy file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct PolicyError {
    /// The problems, in file order.
    pub errors: Vec<FieldError>,
}

// === impl PolicyError ===

impl PolicyError {
    fn one(field: &str, message: impl Into<String>) -> Self {
        Self {
            errors: vec![FieldError {
                field: field.to_string(),
                message: message.into(),
            }],
        }
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{}: {}", e.field, e.message)?;
        }
        Ok(())
    }
}

// === impl Policy ===

impl Policy {
    /// Parse and validate policy bytes. Relative paths resolve against `base_dir`.
    pub fn parse(bytes: &[u8], base_dir: &Path) -> Result<Self, PolicyError> {
        let text = std::str::from_utf8(bytes)
            .map_err(|e| PolicyError::one("policy", format!("the file is not UTF-8 ({e})")))?;
        if text.trim().is_empty() {
            return Err(PolicyError::one(
                "policy",
                "the file is empty; it needs at least `version: v1`",
            ));
        }
        let raw: raw::RawPolicy = serde_yaml::from_str(text).map_err(|e| {
            PolicyError::one("policy", format!("invalid YAML or unknown field: {e}"))
        })?;
        let mut policy = Validator::new(base_dir).validate(raw)?;
        policy.sha256 = hex::encode(Sha256::digest(bytes));
        Ok(policy)
    }

    /// [`Policy::parse`] without reading `secrets.rulesFiles` (their paths only exist where the
    /// gate runs): what the controller checks before it writes a policy. The gate still reads
    /// and compiles every file when it loads the policy, and keeps its last good policy when
    /// one is bad. Exempted rule ids are then checked against the built-in rules only when no
    /// rule file is named.
    pub fn parse_without_rule_files(bytes: &[u8], base_dir: &Path) -> Result<Self, PolicyError> {
        let text = std::str::from_utf8(bytes)
            .map_err(|e| PolicyError::one("policy", format!("the file is not UTF-8 ({e})")))?;
        let raw: raw::RawPolicy = serde_yaml::from_str(text).map_err(|e| {
            PolicyError::one("policy", format!("invalid YAML or unknown field: {e}"))
        })?;
        let mut validator = Validator::new(base_dir);
        validator.read_rule_files = false;
        let mut policy = validator.validate(raw)?;
        policy.sha256 = hex::encode(Sha256::digest(bytes));
        Ok(policy)
    }

    /// Read, parse and validate a policy file.
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let bytes = std::fs::read(path).map_err(|e| {
            PolicyError::one("policy", format!("failed to read {}: {e}", path.display()))
        })?;
        Self::parse(&bytes, path.parent().unwrap_or(Path::new(".")))
    }

    /// The embedded default policy, relative paths under the current directory.
    pub fn embedded_default() -> Result<Self, PolicyError> {
        Self::parse(EMBEDDED_DEFAULT.as_bytes(), Path::new("."))
    }
}

/// Collects field errors while building a [`Policy`].
struct Validator<'a> {
    base_dir: &'a Path,
    errors: Vec<FieldError>,
    /// Whether `secrets.rulesFiles` are read and compiled (the gate) or only named.
    read_rule_files: bool,
}

impl<'a> Validator<'a> {
    fn new(base_dir: &'a Path) -> Self {
        Self {
            base_dir,
            errors: Vec::new(),
            read_rule_files: true,
        }
    }

    fn err(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.errors.push(FieldError {
            field: field.into(),
            message: message.into(),
        });
    }

    fn validate(mut self, raw: raw::RawPolicy) -> Result<Policy, PolicyError> {
        match raw.version.as_deref() {
            Some(POLICY_VERSION) => {}
            Some(other) => self.err(
                "version",
                format!(
                    "unsupported version '{other}'; this gate reads `version: {POLICY_VERSION}`"
                ),
            ),
            None => self.err(
                "version",
                format!("missing; add `version: {POLICY_VERSION}`"),
            ),
        }
        let web = self.web(raw.web);
        let blocklist = self.blocklist(raw.website_blocklist);
        let egress = self.egress(raw.egress);
        let store = self.store(raw.store);
        let listen = self.listen(raw.listen);
        let fetch = self.fetch(raw.fetch);
        let report = self.report(raw.report);
        let watches = watch::validate(&raw.watch, &raw.watches, &mut self.errors);
        let llm = llm::validate(raw.llm, self.base_dir, &mut self.errors);
        let secrets = self.secrets(raw.secrets);
        if !self.errors.is_empty() {
            return Err(PolicyError {
                errors: self.errors,
            });
        }
        Ok(Policy {
            web,
            blocklist,
            egress,
            store,
            listen,
            fetch,
            report,
            watches,
            llm,
            secrets,
            sha256: String::new(),
        })
    }

    fn secrets(&mut self, raw: raw::RawSecrets) -> SecretsPolicy {
        use crate::secret_rules::RuleSet;
        let mode = match raw.mode.as_deref().map(str::trim) {
            None | Some("enforce") => EnforcementMode::Enforce,
            Some("report") => EnforcementMode::Report,
            Some(other) => {
                self.err(
                    "secrets.mode",
                    format!("unknown mode '{other}'; use `enforce` or `report`"),
                );
                EnforcementMode::Enforce
            }
        };
        let mut rules = Vec::new();
        let mut rules_files = Vec::new();
        for (i, file) in raw.rules_files.iter().enumerate() {
            let path = self.path(file);
            let field = format!("secrets.rulesFiles[{i}]");
            if !self.read_rule_files {
                rules_files.push(path);
                continue;
            }
            match std::fs::read_to_string(&path) {
                Ok(text) => match RuleSet::parse(&text, &path.display().to_string()) {
                    Ok(set) => rules.push(std::sync::Arc::new(set)),
                    Err(e) => self.err(field, e.to_string()),
                },
                Err(e) => self.err(field, format!("failed to read {}: {e}", path.display())),
            }
            rules_files.push(path);
        }
        for (i, text) in raw.inline_rules.iter().enumerate() {
            let field = format!("secrets.inlineRules[{i}]");
            match RuleSet::parse(text, &field) {
                Ok(set) => rules.push(std::sync::Arc::new(set)),
                Err(e) => self.err(field, e.to_string()),
            }
        }
        let known: std::collections::HashSet<String> = RuleSet::builtin()
            .ids()
            .chain(rules.iter().flat_map(|s| s.ids()))
            .map(str::to_string)
            .chain([crate::secret_rules::JWT_RULE.to_string()])
            .collect();
        let mut allow_rules = Vec::new();
        let mut allow_prefixes = Vec::new();
        for (i, entry) in raw.allow.iter().enumerate() {
            let entry = entry.trim();
            let field = format!("secrets.allow[{i}]");
            if entry.contains("://") {
                let lower = entry.to_ascii_lowercase();
                if !(lower.starts_with("http://") || lower.starts_with("https://"))
                    || entry
                        .split_once("://")
                        .is_some_and(|(_, rest)| rest.is_empty())
                {
                    self.err(field, format!("'{entry}' is not an http(s) URL prefix"));
                } else {
                    allow_prefixes.push(entry.to_string());
                }
            } else if entry.starts_with("hermes-") {
                self.err(
                    field,
                    format!("'{entry}' is one of Hermes' own checks, which no policy can exempt"),
                );
            } else if known.contains(entry) || (!self.read_rule_files && !rules_files.is_empty()) {
                allow_rules.push(entry.to_string());
            } else {
                self.err(
                    field,
                    format!("no secret rule has the id '{entry}' (built-in or in secrets.rulesFiles); an URL prefix needs its scheme"),
                );
            }
        }
        SecretsPolicy {
            mode,
            rules_files,
            rules,
            allow_rules,
            allow_prefixes,
        }
    }

    fn web(&mut self, raw: raw::RawWeb) -> WebPolicy {
        let pick = |specific: &Option<String>| {
            specific
                .as_deref()
                .or(raw.backend.as_deref())
                .map(|s| s.trim().to_ascii_lowercase())
                .filter(|s| !s.is_empty())
        };
        let field = if raw.extract_backend.is_some() {
            "web.extractBackend"
        } else {
            "web.backend"
        };
        let extract_backend = pick(&raw.extract_backend).unwrap_or_else(|| "direct".into());
        if let Err(message) = vendors::check_extract_backend(&extract_backend) {
            self.err(field, message);
        }
        let search_backend = pick(&raw.search_backend);
        if let Some(Err(message)) = search_backend.as_deref().map(vendors::check_search_backend) {
            let field = if raw.search_backend.is_some() {
                "web.searchBackend"
            } else {
                "web.backend"
            };
            self.err(field, message);
        }
        let char_limit = match raw.char_limit {
            None => DEFAULT_CHAR_LIMIT,
            Some(n) if (MIN_CHAR_LIMIT as i64..=MAX_CHAR_LIMIT as i64).contains(&n) => n as usize,
            Some(n) => {
                self.err(
                    "web.charLimit",
                    format!("{n} is out of range; set a value between {MIN_CHAR_LIMIT} and {MAX_CHAR_LIMIT}"),
                );
                DEFAULT_CHAR_LIMIT
            }
        };
        let rescue = raw.rescue.clone().unwrap_or_else(|| vec!["direct".into()]);
        for (i, name) in rescue.iter().enumerate() {
            if let Err(message) = vendors::check_extract_backend(name) {
                self.err(format!("web.rescue[{i}]"), message);
            }
        }
        let vendors: Vec<VendorSettings> = raw
            .vendors
            .iter()
            .filter_map(|(name, v)| self.vendor(name, v))
            .collect();
        let named = [Some(&extract_backend), search_backend.as_ref()];
        if named.iter().flatten().any(|n| *n == "searxng")
            && !vendors
                .iter()
                .any(|v| v.name == "searxng" && v.base_url.is_some())
        {
            self.err(
                "web.vendors.searxng.baseUrl",
                "SearXNG is self-hosted: set its base URL",
            );
        }
        WebPolicy {
            extract_backend,
            search_backend,
            char_limit,
            cache: self.cache(raw.cache),
            vendors,
            rescue,
        }
    }

    fn vendor(&mut self, name: &str, raw: &raw::RawVendor) -> Option<VendorSettings> {
        let field = format!("web.vendors.{name}");
        match vendors::BackendKind::from_name(name) {
            None | Some(vendors::BackendKind::Direct | vendors::BackendKind::Keyless) => {
                self.err(
                    field,
                    format!(
                        "no configurable backend named '{name}'; configure one of: {}",
                        vendors::SEARCH_BACKENDS
                            .iter()
                            .filter(|n| **n != "keyless")
                            .copied()
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
                return None;
            }
            Some(_) => {}
        }
        let base_url = match raw.base_url.as_deref().map(url::Url::parse) {
            None => None,
            Some(Ok(u)) if matches!(u.scheme(), "http" | "https") => Some(u),
            Some(_) => {
                self.err(
                    format!("{field}.baseUrl"),
                    "must be an absolute http(s) URL, e.g. `https://api.firecrawl.dev`",
                );
                None
            }
        };
        let domains = |list: &Option<Vec<String>>| list.clone().unwrap_or_default();
        let (allowed, excluded) = (
            domains(&raw.allowed_domains),
            domains(&raw.excluded_domains),
        );
        if !allowed.is_empty() && !excluded.is_empty() {
            self.err(
                field.clone(),
                "allowedDomains and excludedDomains cannot both be set (xAI restriction)",
            );
        }
        if allowed.len() > 5 || excluded.len() > 5 {
            self.err(
                field.clone(),
                "at most 5 allowed or excluded domains (xAI restriction)",
            );
        }
        let tier = match raw.tier.as_deref().map(str::to_ascii_lowercase).as_deref() {
            None | Some("auto") => VendorTier::Auto,
            Some("free") => VendorTier::Free,
            Some("paid") => VendorTier::Paid,
            Some(other) => {
                self.err(
                    format!("{field}.tier"),
                    format!("'{other}' is not a tier; use free, paid or auto"),
                );
                VendorTier::Auto
            }
        };
        let keyless = vendors::BackendKind::from_name(name).is_some_and(|k| k.has_keyless_tier());
        if tier == VendorTier::Free && !keyless {
            self.err(
                format!("{field}.tier"),
                format!(
                    "'{name}' has no keyless tier; free applies to exa, parallel, firecrawl and keenable"
                ),
            );
        }
        let keyless_url = match raw.keyless_url.as_deref().map(url::Url::parse) {
            None => None,
            Some(_) if !keyless => {
                self.err(
                    format!("{field}.keylessUrl"),
                    format!("'{name}' has no keyless tier; keylessUrl applies to exa, parallel, firecrawl and keenable"),
                );
                None
            }
            Some(Ok(u)) if matches!(u.scheme(), "http" | "https") => Some(u),
            Some(_) => {
                self.err(
                    format!("{field}.keylessUrl"),
                    "must be an absolute http(s) URL, e.g. `https://mcp.exa.ai/mcp`",
                );
                None
            }
        };
        Some(VendorSettings {
            name: name.to_string(),
            base_url,
            api_key_file: raw.api_key_file.as_deref().map(|p| self.path(p)),
            api_key_env: raw.api_key_env.clone(),
            timeout: raw.timeout_ms.map(Duration::from_millis),
            max_body_bytes: raw.max_body_bytes,
            retries: raw.retries.map(|r| r.min(5)),
            search_mode: raw.search_mode.clone(),
            model: raw.model.clone(),
            allowed_domains: allowed,
            excluded_domains: excluded,
            tier,
            keyless_url,
        })
    }

    fn cache(&mut self, raw: raw::RawCache) -> CachePolicy {
        let ttl_minutes = match raw.ttl_minutes {
            None => 20,
            Some(n) if (1..=1440).contains(&n) => n as u64,
            Some(n) => {
                self.err(
                    "web.cache.ttlMinutes",
                    format!("{n} is out of range; set a value between 1 and 1440 minutes"),
                );
                20
            }
        };
        let exempt_hosts = raw
            .exempt_hosts
            .iter()
            .map(|h| {
                h.trim()
                    .trim_matches('.')
                    .trim_start_matches("*.")
                    .to_ascii_lowercase()
            })
            .filter(|h| !h.is_empty())
            .collect();
        if raw.max_entries == Some(0) {
            self.err(
                "web.cache.maxEntries",
                "must be at least 1; use `enabled: false` to turn the cache off",
            );
        }
        CachePolicy {
            enabled: raw.enabled.unwrap_or(true),
            ttl: Duration::from_secs(ttl_minutes * 60),
            exempt_hosts,
            max_entries: raw.max_entries.unwrap_or(5000).max(1),
            max_bytes: raw.max_bytes.unwrap_or(512 * 1024 * 1024),
        }
    }

    fn blocklist(&mut self, raw: raw::RawBlocklist) -> BlocklistPolicy {
        let mode = match raw.mode.as_deref().map(str::trim) {
            None | Some("enforce") => EnforcementMode::Enforce,
            Some("report") => EnforcementMode::Report,
            Some(other) => {
                self.err(
                    "websiteBlocklist.mode",
                    format!("unknown mode '{other}'; use `enforce` or `report`"),
                );
                EnforcementMode::Enforce
            }
        };
        let has_rules = !raw.domains.is_empty() || !raw.shared_files.is_empty();
        BlocklistPolicy {
            enabled: raw.enabled.unwrap_or(has_rules),
            mode,
            shared_files: raw.shared_files.iter().map(|p| self.path(p)).collect(),
            domains: raw.domains,
        }
    }

    fn egress(&mut self, raw: raw::RawEgress) -> EgressPolicy {
        let mut nets = Vec::new();
        for (i, s) in raw.allow_cidrs.iter().enumerate() {
            match parse_net(s) {
                Some(net) => nets.push(net),
                None => self.err(
                    format!("egress.allowCIDRs[{i}]"),
                    format!(
                        "'{s}' is not a CIDR or address; write e.g. `10.1.2.0/24` or `fd00::1/128`"
                    ),
                ),
            }
        }
        let addrs = match AddrPolicy::new(nets, raw.allow_hosts.clone()) {
            Ok(p) => p,
            Err(e) => {
                let idx = raw
                    .allow_cidrs
                    .iter()
                    .position(|s| parse_net(s) == Some(e.net))
                    .unwrap_or(0);
                self.err(
                    format!("egress.allowCIDRs[{idx}]"),
                    format!("{e}; list narrower ranges that leave the metadata floor closed"),
                );
                AddrPolicy::default()
            }
        };
        let ports_explicit = raw.ports.is_some();
        let ports = raw.ports.unwrap_or_else(|| vec![80, 443]);
        if ports.is_empty() || ports.contains(&0) {
            self.err(
                "egress.ports",
                "must list ports between 1 and 65535 (default [80, 443])",
            );
        }
        let mut limits = self.egress_limits(
            raw.allow_raw_ip,
            [raw.max_tunnels, raw.max_connections],
            raw.timeouts,
        );
        limits.raw_tunnel_ports = self.raw_tunnel_ports(raw.raw_tunnel_ports, &ports);
        EgressPolicy {
            addrs,
            ports,
            ports_explicit,
            resolver: self.resolver(raw.resolver),
            limits,
        }
    }

    fn resolver(&mut self, raw: raw::RawResolver) -> ResolverPolicy {
        let mut nameservers = Vec::new();
        for (i, s) in raw.nameservers.iter().enumerate() {
            let parsed = s.parse::<SocketAddr>().or_else(|_| {
                s.parse::<std::net::IpAddr>()
                    .map(|ip| SocketAddr::new(ip, 53))
            });
            match parsed {
                Ok(addr) => nameservers.push(addr),
                Err(_) => self.err(
                    format!("egress.resolver.nameservers[{i}]"),
                    format!("'{s}' is not `ip` or `ip:port`; write e.g. `10.96.0.10:53`"),
                ),
            }
        }
        let timeout_ms = raw.timeout_ms.unwrap_or(2500);
        if !(100..=60_000).contains(&timeout_ms) {
            self.err(
                "egress.resolver.timeoutMs",
                "must be between 100 and 60000 ms (default 2500)",
            );
        }
        ResolverPolicy {
            nameservers,
            timeout: Duration::from_millis(timeout_ms),
            attempts: raw.attempts.unwrap_or(2).clamp(1, 5),
        }
    }

    fn store(&mut self, raw: raw::RawStore) -> StorePolicy {
        StorePolicy {
            root: self.path(raw.root.as_deref().unwrap_or(".fleetgate")),
            agent_visible_root: raw.agent_visible_root.as_deref().map(PathBuf::from),
        }
    }

    fn listen(&mut self, raw: raw::RawListen) -> ListenPolicy {
        let mut addr = |field: &str, value: Option<String>, default: Option<&str>| {
            let text = value.or(default.map(str::to_string))?;
            match text.parse::<SocketAddr>() {
                Ok(a) => Some(a),
                Err(_) => {
                    self.err(
                        format!("listen.{field}"),
                        format!("'{text}' is not `ip:port`; write e.g. `127.0.0.1:15180` (port 0 picks a free port)"),
                    );
                    None
                }
            }
        };
        let fallback = |s: &str| s.parse::<SocketAddr>().ok();
        ListenPolicy {
            api: addr("api", raw.api, Some("127.0.0.1:15180"))
                .or_else(|| fallback("127.0.0.1:15180"))
                .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 15180))),
            forward_proxy: addr("forwardProxy", raw.forward_proxy, None),
            transparent: addr("transparent", raw.transparent, None),
            admin: addr("admin", raw.admin, Some("127.0.0.1:15190"))
                .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 15190))),
        }
    }

    fn fetch(&mut self, raw: raw::RawFetch) -> FetchPolicy {
        let mut ms = |field: &str, v: Option<u64>, default: u64| {
            let v = v.unwrap_or(default);
            if !(1..=600_000).contains(&v) {
                self.err(
                    format!("fetch.{field}"),
                    format!("{v} is out of range; set 1..600000 ms (default {default})"),
                );
                return Duration::from_millis(default);
            }
            Duration::from_millis(v)
        };
        let connect_timeout = ms("connectTimeoutMs", raw.connect_timeout_ms, 5_000);
        let header_timeout = ms("headerTimeoutMs", raw.header_timeout_ms, 15_000);
        let total_timeout = ms("totalTimeoutMs", raw.total_timeout_ms, 30_000);
        let max_redirects = raw.max_redirects.unwrap_or(5);
        if max_redirects > 10 {
            self.err(
                "fetch.maxRedirects",
                "at most 10 redirects are followed (default 5)",
            );
        }
        FetchPolicy {
            connect_timeout,
            header_timeout,
            total_timeout,
            max_body_bytes: raw.max_body_bytes.unwrap_or(10 * 1024 * 1024).max(1024),
            max_redirects: max_redirects.min(10),
            user_agent: raw
                .user_agent
                .unwrap_or_else(|| format!("fleetgate/{}", env!("CARGO_PKG_VERSION"))),
        }
    }

    fn report(&mut self, raw: raw::RawReport) -> ReportPolicy {
        let days = raw.days.unwrap_or(7);
        if !(1..=366).contains(&days) {
            self.err("report.days", "must be between 1 and 366 (default 7)");
        }
        ReportPolicy {
            hermes_home: raw.hermes_home.as_deref().map(|p| self.path(p)),
            token_file: raw.token_file.as_deref().map(|p| self.path(p)),
            days,
            managed_dir: raw.managed_dir.as_deref().map(|p| self.path(p)),
        }
    }

    fn path(&self, p: &str) -> PathBuf {
        let p = Path::new(p.trim());
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }
}

/// Parse `a.b.c.d/n`, `v6/n` or a bare address (a host route).
fn parse_net(s: &str) -> Option<IpNet> {
    let s = s.trim();
    s.parse::<IpNet>()
        .ok()
        .or_else(|| s.parse::<std::net::IpAddr>().ok().map(IpNet::from))
}
