//! The gate policy (`policy.yaml`) built from a FleetPolicy spec, then validated by the gate.
//!
//! The wire shape is `fleetgate_proxy::policy::raw::RawPolicy` (camelCase, `version: v1`);
//! the types below are its serializing mirror, holding only what the controller sets. Paths
//! and listener addresses are the pod layout the injector builds (constants below). After
//! serializing, the text goes through `Policy::parse`; its field errors are mapped back to
//! `spec.*` paths so the `Valid` condition names what the user wrote.

use std::collections::BTreeMap;
use std::path::Path;

use fleetgate_proxy::policy::{POLICY_VERSION, Policy, PolicyError};
use fleetgate_proxy::vendors::BackendKind;
use serde::Serialize;

use super::{RenderError, SpecProblem};
use crate::crd::{BlocklistMode, EgressMode, FleetPolicySpec, vendor_entries};

/// Gate API listener (Firecrawl / Tavily / SearXNG fronts, LLM route).
pub const LISTEN_API: &str = "127.0.0.1:15180";
/// Gate forward proxy listener (`HTTP(S)_PROXY`).
pub const LISTEN_FORWARD_PROXY: &str = "127.0.0.1:15181";
/// Gate transparent listener (iptables REDIRECT target).
pub const LISTEN_TRANSPARENT: &str = "127.0.0.1:15182";
/// Gate admin listener; all addresses, since one ConfigMap serves every pod of the fleet.
pub const LISTEN_ADMIN: &str = "0.0.0.0:15190";
/// The shared cache volume in the gate container.
pub const STORE_ROOT: &str = "/var/cache/fleetgate";
/// The same volume as the agent sees it.
pub const STORE_AGENT_ROOT: &str = "/opt/data/cache/fleetgate";
/// The agent's `$HERMES_HOME`, mounted read-only in the gate.
pub const HERMES_HOME: &str = "/hermes";
/// The managed ConfigMap as mounted in the gate (for the report's managed digest).
pub const MANAGED_DIR: &str = "/etc/hermes";
/// The report bearer token (Secret created by the chart) in the gate.
pub const REPORT_TOKEN_FILE: &str = "/etc/fleetgate/report-token/token";
/// Where the vendor credentials Secret is mounted in the gate, one file per key.
pub const VENDOR_KEYS_DIR: &str = "/etc/fleetgate/vendor-keys";
/// Where blocklist ConfigMaps are mounted in the gate: `<dir>/<configMap>/<key>`.
pub const BLOCKLISTS_DIR: &str = "/etc/fleetgate/blocklists";
/// Where secret-rule ConfigMaps (gitleaks rule files) are mounted: `<dir>/<configMap>/<key>`.
pub const SECRET_RULES_DIR: &str = "/etc/fleetgate/secret-rules";

/// The rendered gate policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedPolicy {
    /// The `policy.yaml` text.
    pub yaml: String,
    /// sha256 (hex) of `yaml`, as the gate computes and reports it.
    pub sha256: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WirePolicy {
    version: &'static str,
    web: WireWeb,
    website_blocklist: WireBlocklist,
    egress: WireEgress,
    store: BTreeMap<&'static str, &'static str>,
    listen: BTreeMap<&'static str, &'static str>,
    report: WireReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    watch: Option<crate::crd::watch::WatchSettingsSpec>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    watches: Vec<crate::crd::watch::WatchSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    llm: Option<super::llm::WireLlm>,
    #[serde(skip_serializing_if = "Option::is_none")]
    secrets: Option<WireSecrets>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireSecrets {
    mode: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    rules_files: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    inline_rules: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    allow: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireWeb {
    extract_backend: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    search_backend: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    char_limit: Option<u32>,
    cache: WireCache,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    vendors: BTreeMap<&'static str, WireVendor>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rescue: Option<Vec<&'static str>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireCache {
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl_minutes: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    exempt_hosts: Vec<String>,
}

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireVendor {
    #[serde(skip_serializing_if = "Option::is_none")]
    base_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    api_key_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tier: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    keyless_url: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireBlocklist {
    #[serde(skip_serializing_if = "Option::is_none")]
    enabled: Option<bool>,
    mode: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    domains: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    shared_files: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireEgress {
    #[serde(rename = "allowCIDRs", skip_serializing_if = "Vec::is_empty")]
    allow_cidrs: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    allow_hosts: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ports: Option<Vec<u16>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireReport {
    hermes_home: &'static str,
    token_file: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    days: Option<u32>,
    managed_dir: &'static str,
}

/// First lines of every rendered `policy.yaml`.
pub const HEADER: &str = "# fleetgate gate policy rendered by fleetgate-controller; edit the FleetPolicy, not this file.\n";

/// Build `policy.yaml` from `spec` and validate it with the gate's parser.
pub fn render(spec: &FleetPolicySpec) -> Result<RenderedPolicy, RenderError> {
    render_named(spec, None)
}

/// [`render`] for the FleetPolicy `name` (quoted in the LLM route's refusals).
pub fn render_named(
    spec: &FleetPolicySpec,
    name: Option<&str>,
) -> Result<RenderedPolicy, RenderError> {
    let wire = WirePolicy {
        version: POLICY_VERSION,
        web: web(spec),
        website_blocklist: blocklist(spec),
        egress: WireEgress {
            allow_cidrs: spec.egress.allow_cidrs.clone(),
            allow_hosts: spec.egress.allow_hosts.clone(),
            ports: spec.egress.ports.clone(),
        },
        store: BTreeMap::from([("root", STORE_ROOT), ("agentVisibleRoot", STORE_AGENT_ROOT)]),
        listen: listen(spec.egress.mode.unwrap_or(EgressMode::Proxy)),
        report: WireReport {
            hermes_home: HERMES_HOME,
            token_file: REPORT_TOKEN_FILE,
            days: spec.cron.window_days,
            managed_dir: MANAGED_DIR,
        },
        watch: spec.watch.clone(),
        watches: spec.watches.clone(),
        llm: spec.llm.as_ref().map(|l| super::llm::wire(l, name)),
        secrets: secrets(spec),
    };
    let body = serde_yaml::to_string(&wire).map_err(|e| RenderError::Serialize {
        file: super::POLICY_KEY,
        message: e.to_string(),
    })?;
    let yaml = format!("{HEADER}{body}");
    let parsed =
        Policy::parse_without_rule_files(yaml.as_bytes(), Path::new("/")).map_err(spec_problems)?;
    Ok(RenderedPolicy {
        yaml,
        sha256: parsed.sha256,
    })
}

fn web(spec: &FleetPolicySpec) -> WireWeb {
    let w = &spec.web;
    let extract = w.extract_backend.map_or("direct", |b| b.name());
    let search = w.search_backend.map(|b| b.name());
    let rescue: Option<Vec<&'static str>> = w
        .rescue
        .as_ref()
        .map(|r| r.iter().map(|b| b.name()).collect());
    let mut vendors: BTreeMap<&'static str, WireVendor> = w
        .vendors
        .as_ref()
        .map(vendor_entries)
        .unwrap_or_default()
        .into_iter()
        .map(|(name, v)| {
            let wire = WireVendor {
                base_url: v.base_url.clone(),
                api_key_file: None,
                timeout_ms: v.timeout_seconds.map(|s| u64::from(s) * 1000),
                tier: v.tier.map(|t| t.name()),
                keyless_url: v.keyless_url.clone(),
            };
            (name, wire)
        })
        .collect();
    if w.credentials_secret.is_some() {
        // Every backend in use reads its key from the mounted Secret, never from the env.
        let in_use = [Some(extract), search]
            .into_iter()
            .flatten()
            .chain(rescue.iter().flatten().copied());
        for name in in_use {
            let Some(env) = BackendKind::from_name(name).and_then(BackendKind::key_env) else {
                continue;
            };
            vendors.entry(name).or_default().api_key_file =
                Some(format!("{VENDOR_KEYS_DIR}/{env}"));
        }
    }
    WireWeb {
        extract_backend: extract,
        search_backend: search,
        char_limit: w.char_limit,
        cache: WireCache {
            ttl_minutes: w.cache_ttl_minutes,
            exempt_hosts: w.cache_exempt_hosts.clone(),
        },
        vendors,
        rescue,
    }
}

fn blocklist(spec: &FleetPolicySpec) -> WireBlocklist {
    let b = &spec.website_blocklist;
    WireBlocklist {
        enabled: b.enabled,
        mode: match b.mode.unwrap_or(BlocklistMode::Enforce) {
            BlocklistMode::Enforce => "enforce",
            BlocklistMode::Report => "report",
        },
        domains: b.domains.clone(),
        shared_files: b
            .shared_lists
            .iter()
            .map(|l| format!("{BLOCKLISTS_DIR}/{}/{}", l.config_map, l.key))
            .collect(),
    }
}

fn secrets(spec: &FleetPolicySpec) -> Option<WireSecrets> {
    let s = &spec.secrets;
    if s.is_empty() {
        return None;
    }
    Some(WireSecrets {
        mode: match s.mode.unwrap_or(BlocklistMode::Enforce) {
            BlocklistMode::Enforce => "enforce",
            BlocklistMode::Report => "report",
        },
        rules_files: s
            .rules_config_maps
            .iter()
            .map(|l| format!("{SECRET_RULES_DIR}/{}/{}", l.config_map, l.key))
            .collect(),
        inline_rules: s.inline_rules.clone(),
        allow: s.allow.clone(),
    })
}

fn listen(mode: EgressMode) -> BTreeMap<&'static str, &'static str> {
    let mut listen = BTreeMap::from([("api", LISTEN_API), ("admin", LISTEN_ADMIN)]);
    if mode != EgressMode::Off {
        listen.insert("forwardProxy", LISTEN_FORWARD_PROXY);
    }
    if mode == EgressMode::Transparent {
        listen.insert("transparent", LISTEN_TRANSPARENT);
    }
    listen
}

/// Gate field paths → FleetPolicy field paths, first match wins.
const FIELD_MAP: &[(&str, &str)] = &[
    ("web.cache.ttlMinutes", "spec.web.cacheTTLMinutes"),
    ("web.cache.exemptHosts", "spec.web.cacheExemptHosts"),
    ("web.vendors.brave-free", "spec.web.vendors.braveFree"),
    ("web.backend", "spec.web.extractBackend"),
    ("web.", "spec.web."),
    (
        "websiteBlocklist.sharedFiles",
        "spec.websiteBlocklist.sharedLists",
    ),
    ("websiteBlocklist.", "spec.websiteBlocklist."),
    ("egress.", "spec.egress."),
    ("report.days", "spec.cron.windowDays"),
    ("watches", "spec.watches"),
    ("watch.", "spec.watch."),
    ("llm.", "spec.llm."),
    ("secrets.rulesFiles", "spec.secrets.rulesConfigMaps"),
    ("secrets.", "spec.secrets."),
];

/// The FleetPolicy path of a gate policy field; fields the controller sets itself keep a
/// `policy.yaml:` prefix (a problem there is a controller bug, not a user error).
pub fn spec_field(gate_field: &str) -> String {
    for (from, to) in FIELD_MAP {
        if let Some(rest) = gate_field.strip_prefix(from) {
            let mapped = format!("{to}{rest}");
            return match mapped.strip_suffix(".baseUrl") {
                Some(head) => format!("{head}.baseURL"),
                None => mapped,
            };
        }
    }
    format!("policy.yaml:{gate_field}")
}

fn spec_problems(err: PolicyError) -> RenderError {
    RenderError::InvalidSpec(
        err.errors
            .into_iter()
            .map(|e| SpecProblem {
                field: spec_field(&e.field),
                message: e.message,
            })
            .collect(),
    )
}
