//! The gate policy (`policy.yaml`) built from a FleetPolicy spec, then validated by the gate.
//!
//! The controller fills the gate's own file types (`fleetgate_policy::raw::RawPolicy`,
//! camelCase, `version: v1`) with what it sets and serializes them, so the file's schema is
//! written once, in the policy crate. Paths and listener addresses are the pod layout the
//! injector builds (constants below). After serializing, the text goes through
//! `Policy::parse`; its field errors are mapped back to `spec.*` paths so the `Valid`
//! condition names what the user wrote.

use std::collections::BTreeMap;
use std::path::Path;

use fleetgate_policy::backends::BackendKind;
use fleetgate_policy::raw::{
    RawBlocklist, RawCache, RawEgress, RawListen, RawPolicy, RawReport, RawSecrets, RawStore,
    RawVendor, RawWeb,
};
use fleetgate_policy::watch::{RawWatch, RawWatchSettings};
use fleetgate_policy::{POLICY_VERSION, Policy, PolicyError};

use super::pod_layout::POLICY_KEY;
use super::problems::{RenderError, SpecProblem};
use crate::crd::{BlocklistMode, EgressMode, FleetPolicySpec, vendor_entries};

pub use super::pod_layout::{
    BLOCKLISTS_DIR, HERMES_HOME, LISTEN_ADMIN, LISTEN_API, LISTEN_FORWARD_PROXY,
    LISTEN_TRANSPARENT, MANAGED_DIR, REPORT_TOKEN_FILE, SECRET_RULES_DIR, STORE_AGENT_ROOT,
    STORE_ROOT, VENDOR_KEYS_DIR,
};

/// The rendered gate policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedPolicy {
    /// The `policy.yaml` text.
    pub yaml: String,
    /// sha256 (hex) of `yaml`, as the gate computes and reports it.
    pub sha256: String,
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
    render_named_with(spec, name, None)
}

/// [`render_named`] with the roles whose namespace LLM budget the fleet has spent today
/// (`llm.budgets.exhausted`), from the controller's last poll of the gates.
pub fn render_named_with(
    spec: &FleetPolicySpec,
    name: Option<&str>,
    exhausted: Option<&fleetgate_policy::llm::spend::RawExhausted>,
) -> Result<RenderedPolicy, RenderError> {
    let mut llm = spec
        .llm
        .as_ref()
        .map(|l| super::llm::raw(l, name))
        .unwrap_or_default();
    if let Some(e) = exhausted.filter(|e| !e.roles.is_empty()) {
        llm.budgets.exhausted = Some(e.clone());
    }
    let raw = RawPolicy {
        version: Some(POLICY_VERSION.to_string()),
        web: web(spec),
        website_blocklist: blocklist(spec),
        egress: RawEgress {
            allow_cidrs: spec.egress.allow_cidrs.clone(),
            allow_hosts: spec.egress.allow_hosts.clone(),
            ports: spec.egress.ports.clone(),
            ..RawEgress::default()
        },
        store: RawStore {
            root: Some(STORE_ROOT.to_string()),
            agent_visible_root: Some(STORE_AGENT_ROOT.to_string()),
        },
        listen: listen(spec.egress.mode.unwrap_or(EgressMode::Proxy)),
        report: RawReport {
            hermes_home: Some(HERMES_HOME.to_string()),
            token_file: Some(REPORT_TOKEN_FILE.to_string()),
            days: spec.cron.window_days,
            managed_dir: Some(MANAGED_DIR.to_string()),
        },
        watch: RawWatchSettings {
            pinned_server_url: spec
                .watch
                .as_ref()
                .and_then(|w| w.pinned_server_url.clone()),
        },
        watches: spec.watches.iter().map(watch).collect(),
        llm,
        secrets: secrets(spec),
        ..RawPolicy::default()
    };
    let body = serde_yaml::to_string(&raw).map_err(|e| RenderError::Serialize {
        file: POLICY_KEY,
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

fn web(spec: &FleetPolicySpec) -> RawWeb {
    let w = &spec.web;
    let extract = w.extract_backend.map_or("direct", |b| b.name());
    let search = w.search_backend.map(|b| b.name());
    let rescue: Option<Vec<&'static str>> = w
        .rescue
        .as_ref()
        .map(|r| r.iter().map(|b| b.name()).collect());
    let mut vendors: BTreeMap<String, RawVendor> = w
        .vendors
        .as_ref()
        .map(vendor_entries)
        .unwrap_or_default()
        .into_iter()
        .map(|(name, v)| {
            let raw = RawVendor {
                base_url: v.base_url.clone(),
                timeout_ms: v.timeout_seconds.map(|s| u64::from(s) * 1000),
                tier: v.tier.map(|t| t.name().to_string()),
                keyless_url: v.keyless_url.clone(),
                ..RawVendor::default()
            };
            (name.to_string(), raw)
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
            vendors.entry(name.to_string()).or_default().api_key_file =
                Some(format!("{VENDOR_KEYS_DIR}/{env}"));
        }
    }
    RawWeb {
        extract_backend: Some(extract.to_string()),
        search_backend: search.map(str::to_string),
        char_limit: w.char_limit.map(i64::from),
        only_main_content: w.only_main_content,
        cache: RawCache {
            ttl_minutes: w.cache_ttl_minutes.map(i64::from),
            exempt_hosts: w.cache_exempt_hosts.clone(),
            ..RawCache::default()
        },
        vendors,
        rescue: rescue.map(|r| r.into_iter().map(str::to_string).collect()),
        ..RawWeb::default()
    }
}

fn blocklist(spec: &FleetPolicySpec) -> RawBlocklist {
    let b = &spec.website_blocklist;
    RawBlocklist {
        enabled: b.enabled,
        mode: Some(mode_name(b.mode).to_string()),
        domains: b.domains.clone(),
        shared_files: b
            .shared_lists
            .iter()
            .map(|l| format!("{BLOCKLISTS_DIR}/{}/{}", l.config_map, l.key))
            .collect(),
    }
}

fn secrets(spec: &FleetPolicySpec) -> RawSecrets {
    let s = &spec.secrets;
    if s.is_empty() {
        return RawSecrets::default();
    }
    RawSecrets {
        mode: Some(mode_name(s.mode).to_string()),
        rules_files: s
            .rules_config_maps
            .iter()
            .map(|l| format!("{SECRET_RULES_DIR}/{}/{}", l.config_map, l.key))
            .collect(),
        inline_rules: s.inline_rules.clone(),
        allow: s.allow.clone(),
    }
}

fn mode_name(mode: Option<BlocklistMode>) -> &'static str {
    match mode.unwrap_or(BlocklistMode::Enforce) {
        BlocklistMode::Enforce => "enforce",
        BlocklistMode::Report => "report",
    }
}

fn watch(w: &crate::crd::watch::WatchSpec) -> RawWatch {
    RawWatch {
        name: Some(w.name.clone()),
        server_url: w.server_url.clone(),
        tool: Some(w.tool.clone()),
        arguments: w.arguments.clone().map(serde_json::Value::Object),
        id_field: Some(w.id_field.clone()),
        show_fields: w.show_fields.clone(),
        max_new: w.max_new.map(i64::from),
        max_seen: w.max_seen.map(i64::from),
        headers: w.headers.clone(),
        timeout_seconds: w.timeout_seconds.map(i64::from),
    }
}

fn listen(mode: EgressMode) -> RawListen {
    let on = |addr: &str, when: bool| when.then(|| addr.to_string());
    RawListen {
        api: Some(LISTEN_API.to_string()),
        forward_proxy: on(LISTEN_FORWARD_PROXY, mode != EgressMode::Off),
        transparent: on(LISTEN_TRANSPARENT, mode == EgressMode::Transparent),
        admin: Some(LISTEN_ADMIN.to_string()),
    }
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
