//! Reading a policy file: [`Policy::parse`] and [`Policy::load`], and the [`Validator`] that
//! turns the file as written ([`crate::raw::RawPolicy`]) into a [`Policy`], collecting every
//! problem so `fleetgate-proxy check-policy` shows them all at once.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::IpNet;
use sha2::{Digest, Sha256};

use crate::addr::AddrPolicy;
use crate::backends as vendors;
use crate::error::{FieldError, PolicyError};
use crate::policy::*;
use crate::{llm, raw, watch};

mod egress_limits;

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
            only_main_content: raw.only_main_content.unwrap_or(true),
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
        let (tier, keyless_url) = self.vendor_tier(name, &field, raw);
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

    /// `web.vendors.<name>.tier` and `.keylessUrl`: free and a keyless URL only for a backend
    /// with a keyless tier.
    fn vendor_tier(
        &mut self,
        name: &str,
        field: &str,
        raw: &raw::RawVendor,
    ) -> (VendorTier, Option<url::Url>) {
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
        (tier, keyless_url)
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
