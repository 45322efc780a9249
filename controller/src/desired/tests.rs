use fleetgate_policy::Policy;
use fleetgate_policy::backends::BackendKind;
use std::path::Path;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::*;
use crate::crd::{
    BlocklistMode, EgressMode, ExtractBackend, FleetPolicySpec, SearchBackend, SharedListRef,
    VendorSpec, VendorsSpec,
};

type Edit = fn(&mut FleetPolicySpec);

fn data<'a>(d: &'a Desired, key: &str) -> &'a str {
    d.config_map
        .data
        .as_ref()
        .and_then(|m| m.get(key))
        .map(String::as_str)
        .expect("the rendered ConfigMap must carry every file")
}

/// The rendered file parsed back, as JSON for pointer lookups.
fn parsed(d: &Desired, key: &str) -> Value {
    serde_yaml::from_str(data(d, key)).expect("a rendered file must be valid YAML")
}

fn render_with(edit: Edit) -> Result<Desired, RenderError> {
    render(&FleetPolicy::test().with_spec(edit))
}

fn searxng(url: &str) -> Option<VendorsSpec> {
    Some(VendorsSpec {
        searxng: Some(VendorSpec {
            base_url: Some(url.into()),
            timeout_seconds: None,
            tier: None,
            keyless_url: None,
        }),
        ..VendorsSpec::default()
    })
}

#[test]
fn every_spec_field_lands_in_the_gate_policy() {
    let cases: &[(&str, Edit, &str, Value)] = &[
        (
            "extract backend",
            |s| s.web.extract_backend = Some(ExtractBackend::new(BackendKind::Tavily).unwrap()),
            "/web/extractBackend",
            json!("tavily"),
        ),
        (
            "search backend by its gate name",
            |s| s.web.search_backend = Some(SearchBackend::new(BackendKind::BraveFree).unwrap()),
            "/web/searchBackend",
            json!("brave-free"),
        ),
        (
            "char limit",
            |s| s.web.char_limit = Some(40_000),
            "/web/charLimit",
            json!(40_000),
        ),
        (
            "whole pages instead of main content",
            |s| s.web.only_main_content = Some(false),
            "/web/onlyMainContent",
            json!(false),
        ),
        (
            "cache ttl",
            |s| s.web.cache_ttl_minutes = Some(90),
            "/web/cache/ttlMinutes",
            json!(90),
        ),
        (
            "cache exempt hosts",
            |s| s.web.cache_exempt_hosts = vec!["*.wiki.corp".into()],
            "/web/cache/exemptHosts",
            json!(["*.wiki.corp"]),
        ),
        (
            "empty rescue turns rescue off",
            |s| s.web.rescue = Some(vec![]),
            "/web/rescue",
            json!([]),
        ),
        (
            "rescue order kept",
            |s| {
                s.web.rescue = Some(vec![
                    ExtractBackend::new(BackendKind::Exa).unwrap(),
                    ExtractBackend::new(BackendKind::Direct).unwrap(),
                ])
            },
            "/web/rescue",
            json!(["exa", "direct"]),
        ),
        (
            "vendor base url",
            |s| {
                s.web.vendors = Some(VendorsSpec {
                    firecrawl: Some(VendorSpec {
                        base_url: Some("https://fc.corp:3002".into()),
                        timeout_seconds: None,
                        tier: None,
                        keyless_url: None,
                    }),
                    ..VendorsSpec::default()
                })
            },
            "/web/vendors/firecrawl/baseUrl",
            json!("https://fc.corp:3002"),
        ),
        (
            "vendor timeout in ms under the gate name",
            |s| {
                s.web.vendors = Some(VendorsSpec {
                    brave_free: Some(VendorSpec {
                        base_url: None,
                        timeout_seconds: Some(5),
                        tier: None,
                        keyless_url: None,
                    }),
                    ..VendorsSpec::default()
                })
            },
            "/web/vendors/brave-free/timeoutMs",
            json!(5000),
        ),
        (
            "vendor tier under the gate name",
            |s| {
                s.web.search_backend = Some(SearchBackend::new(BackendKind::Keenable).unwrap());
                s.web.vendors = Some(VendorsSpec {
                    keenable: Some(VendorSpec {
                        tier: Some(crate::crd::VendorTier::Paid),
                        ..VendorSpec::default()
                    }),
                    ..VendorsSpec::default()
                })
            },
            "/web/vendors/keenable/tier",
            json!("paid"),
        ),
        (
            "keyless endpoint under the gate name",
            |s| {
                s.web.rescue = Some(vec![ExtractBackend::new(BackendKind::Keyless).unwrap()]);
                s.web.vendors = Some(VendorsSpec {
                    exa: Some(VendorSpec {
                        keyless_url: Some("https://mcp.mirror.example/mcp".into()),
                        ..VendorSpec::default()
                    }),
                    ..VendorsSpec::default()
                })
            },
            "/web/vendors/exa/keylessUrl",
            json!("https://mcp.mirror.example/mcp"),
        ),
        (
            "the keyless ring as a rescue",
            |s| {
                s.web.rescue = Some(vec![
                    ExtractBackend::new(BackendKind::Direct).unwrap(),
                    ExtractBackend::new(BackendKind::Keyless).unwrap(),
                ])
            },
            "/web/rescue/1",
            json!("keyless"),
        ),
        (
            "credentials secret gives the extract backend a key file",
            |s| {
                s.web.extract_backend = Some(ExtractBackend::new(BackendKind::Firecrawl).unwrap());
                s.web.credentials_secret = Some("vendor-keys".into());
            },
            "/web/vendors/firecrawl/apiKeyFile",
            json!("/etc/fleetgate/vendor-keys/FIRECRAWL_API_KEY"),
        ),
        (
            "credentials secret gives rescue backends a key file",
            |s| {
                s.web.rescue = Some(vec![ExtractBackend::new(BackendKind::Tavily).unwrap()]);
                s.web.credentials_secret = Some("vendor-keys".into());
            },
            "/web/vendors/tavily/apiKeyFile",
            json!("/etc/fleetgate/vendor-keys/TAVILY_API_KEY"),
        ),
        (
            "searxng base url",
            |s| {
                s.web.search_backend = Some(SearchBackend::new(BackendKind::Searxng).unwrap());
                s.web.vendors = searxng("http://searxng.search.svc:8080");
            },
            "/web/vendors/searxng/baseUrl",
            json!("http://searxng.search.svc:8080"),
        ),
        (
            "blocklist domains",
            |s| s.website_blocklist.domains = vec!["ads.example".into()],
            "/websiteBlocklist/domains",
            json!(["ads.example"]),
        ),
        (
            "blocklist report mode",
            |s| s.website_blocklist.mode = Some(BlocklistMode::Report),
            "/websiteBlocklist/mode",
            json!("report"),
        ),
        (
            "blocklist off",
            |s| s.website_blocklist.enabled = Some(false),
            "/websiteBlocklist/enabled",
            json!(false),
        ),
        (
            "shared lists become mounted files",
            |s| {
                s.website_blocklist.shared_lists = vec![SharedListRef {
                    config_map: "corp-lists".into(),
                    key: "ads.txt".into(),
                }]
            },
            "/websiteBlocklist/sharedFiles",
            json!(["/etc/fleetgate/blocklists/corp-lists/ads.txt"]),
        ),
        (
            "secret rule ConfigMaps become mounted rule files",
            |s| {
                s.secrets.rules_config_maps = vec![SharedListRef {
                    config_map: "corp-secret-rules".into(),
                    key: "gitleaks.toml".into(),
                }];
                s.secrets.mode = Some(crate::crd::BlocklistMode::Report);
                s.secrets.allow = vec!["corp-token".into(), "https://docs.example.com/".into()];
            },
            "/secrets",
            json!({"mode": "report",
                   "rulesFiles": ["/etc/fleetgate/secret-rules/corp-secret-rules/gitleaks.toml"],
                   "allow": ["corp-token", "https://docs.example.com/"]}),
        ),
        (
            "allow cidrs",
            |s| s.egress.allow_cidrs = vec!["10.20.0.0/16".into(), "fd00:1::/64".into()],
            "/egress/allowCIDRs",
            json!(["10.20.0.0/16", "fd00:1::/64"]),
        ),
        (
            "allow hosts",
            |s| s.egress.allow_hosts = vec!["wiki.corp.svc.cluster.local".into()],
            "/egress/allowHosts",
            json!(["wiki.corp.svc.cluster.local"]),
        ),
        (
            "ports",
            |s| s.egress.ports = Some(vec![443, 8443]),
            "/egress/ports",
            json!([443, 8443]),
        ),
        (
            "transparent mode opens the transparent listener",
            |s| s.egress.mode = Some(EgressMode::Transparent),
            "/listen/transparent",
            json!("127.0.0.1:15182"),
        ),
        (
            "cron window is the report window",
            |s| s.cron.window_days = Some(14),
            "/report/days",
            json!(14),
        ),
    ];
    for (name, edit, pointer, want) in cases {
        let d =
            render_with(*edit).unwrap_or_else(|e| panic!("{name}: a valid spec must render: {e}"));
        let got = parsed(&d, POLICY_KEY);
        assert_eq!(
            got.pointer(pointer),
            Some(want),
            "{name}: {pointer} must hold the spec value"
        );
    }
}

#[test]
fn a_default_spec_renders_the_keyless_pod_layout() {
    let d = render(&FleetPolicy::test()).expect("the default spec must render");
    let p = parsed(&d, POLICY_KEY);
    let cases: &[(&str, Value)] = &[
        ("/version", json!("v1")),
        ("/web/extractBackend", json!("direct")),
        ("/listen/api", json!("127.0.0.1:15180")),
        ("/listen/forwardProxy", json!("127.0.0.1:15181")),
        ("/listen/admin", json!("0.0.0.0:15190")),
        ("/store/root", json!("/var/cache/fleetgate")),
        (
            "/store/agentVisibleRoot",
            json!("/opt/data/cache/fleetgate"),
        ),
        ("/report/hermesHome", json!("/hermes")),
        (
            "/report/tokenFile",
            json!("/etc/fleetgate/report-token/token"),
        ),
        ("/report/managedDir", json!("/etc/hermes")),
    ];
    for (pointer, want) in cases {
        assert_eq!(
            p.pointer(pointer),
            Some(want),
            "{pointer} must hold the pod layout default"
        );
    }
    for absent in [
        "/web/searchBackend",
        "/web/vendors",
        "/web/rescue",
        "/listen/transparent",
    ] {
        assert_eq!(
            p.pointer(absent),
            None,
            "{absent} must be left to the gate's default"
        );
    }
    let policy = Policy::parse(data(&d, POLICY_KEY).as_bytes(), Path::new("/"))
        .expect("the gate must accept the rendered policy");
    assert_eq!(
        policy.web.rescue,
        vec!["direct".to_string()],
        "the gate default rescue must be the keyless direct backend"
    );
}

#[test]
fn egress_off_renders_no_forward_proxy() {
    let d = render_with(|s| s.egress.mode = Some(EgressMode::Off)).expect("egress off must render");
    let p = parsed(&d, POLICY_KEY);
    assert_eq!(
        p.pointer("/listen/forwardProxy"),
        None,
        "egress off must not open the forward proxy"
    );
    assert_eq!(
        p.pointer("/listen/transparent"),
        None,
        "egress off must not open the transparent listener"
    );
}

#[test]
fn invalid_specs_name_the_field() {
    let cases: &[(&str, Edit, &str)] = &[
        (
            "cidr over the metadata floor",
            |s| s.egress.allow_cidrs = vec!["169.254.0.0/16".into()],
            "spec.egress.allowCIDRs[0]",
        ),
        (
            "cidr covering everything",
            |s| s.egress.allow_cidrs = vec!["10.0.0.0/8".into(), "0.0.0.0/0".into()],
            "spec.egress.allowCIDRs[1]",
        ),
        (
            "not a cidr",
            |s| s.egress.allow_cidrs = vec!["10.0.0.0/33".into()],
            "spec.egress.allowCIDRs[0]",
        ),
        (
            "char limit below the floor",
            |s| s.web.char_limit = Some(100),
            "spec.web.charLimit",
        ),
        (
            "char limit above the ceiling",
            |s| s.web.char_limit = Some(500_001),
            "spec.web.charLimit",
        ),
        (
            "cache ttl zero",
            |s| s.web.cache_ttl_minutes = Some(0),
            "spec.web.cacheTTLMinutes",
        ),
        (
            "cache ttl above a day",
            |s| s.web.cache_ttl_minutes = Some(1441),
            "spec.web.cacheTTLMinutes",
        ),
        (
            "searxng without a base url",
            |s| s.web.search_backend = Some(SearchBackend::new(BackendKind::Searxng).unwrap()),
            "spec.web.vendors.searxng.baseURL",
        ),
        (
            "vendor base url not http",
            |s| {
                s.web.vendors = Some(VendorsSpec {
                    firecrawl: Some(VendorSpec {
                        base_url: Some("ftp://fc.corp".into()),
                        timeout_seconds: None,
                        tier: None,
                        keyless_url: None,
                    }),
                    ..VendorsSpec::default()
                })
            },
            "spec.web.vendors.firecrawl.baseURL",
        ),
        (
            "brave base url not a url",
            |s| {
                s.web.vendors = Some(VendorsSpec {
                    brave_free: Some(VendorSpec {
                        base_url: Some("brave".into()),
                        timeout_seconds: None,
                        tier: None,
                        keyless_url: None,
                    }),
                    ..VendorsSpec::default()
                })
            },
            "spec.web.vendors.braveFree.baseURL",
        ),
        (
            "port zero",
            |s| s.egress.ports = Some(vec![443, 0]),
            "spec.egress.ports",
        ),
        (
            "no ports",
            |s| s.egress.ports = Some(vec![]),
            "spec.egress.ports",
        ),
        (
            "cron window zero",
            |s| s.cron.window_days = Some(0),
            "spec.cron.windowDays",
        ),
        (
            "resync too fast",
            |s| s.resync_seconds = Some(5),
            "spec.resyncSeconds",
        ),
        (
            "managed pin overridden",
            |s| {
                s.managed = json!({"web": {"extract_backend": "tavily"}})
                    .as_object()
                    .cloned()
            },
            "spec.managed.web.extract_backend",
        ),
        (
            "managed search pin overridden",
            |s| {
                s.managed = json!({"web": {"search_backend": null}})
                    .as_object()
                    .cloned()
            },
            "spec.managed.web.search_backend",
        ),
        (
            "managed web not a mapping",
            |s| s.managed = json!({"web": "firecrawl"}).as_object().cloned(),
            "spec.managed.web",
        ),
    ];
    for (name, edit, field) in cases {
        let err =
            render_with(*edit).expect_err(&format!("{name}: an invalid spec must not render"));
        assert!(
            err.fields().contains(field),
            "{name}: the error must name {field}, got {err}"
        );
        assert_eq!(
            err.reason(),
            "InvalidSpec",
            "{name}: the Valid reason must be InvalidSpec"
        );
        assert!(
            err.to_string().starts_with("failed to render"),
            "{name}: message must say what failed: {err}"
        );
    }
}

#[test]
fn a_policy_without_a_name_is_refused() {
    let mut fp = FleetPolicy::test();
    fp.metadata.name = None;
    let err = render(&fp).expect_err("a nameless FleetPolicy must not render");
    assert_eq!(
        err,
        RenderError::MissingName,
        "the error must say the name is missing"
    );
}

#[test]
fn managed_config_keeps_user_keys_and_adds_the_web_pins() {
    let d = render_with(|s| {
        s.managed = json!({
            "model": {"default": "claude-sonnet-4.5", "provider": "anthropic"},
            "web": {"search_backend": "searxng", "extract_timeout": 30},
            "security": {"redact_secrets": true},
            "toolsets": ["web", "terminal"]
        })
        .as_object()
        .cloned();
    })
    .expect("a managed mapping agreeing with the pins must render");
    let config = parsed(&d, CONFIG_KEY);
    let cases: &[(&str, Value)] = &[
        ("/model/default", json!("claude-sonnet-4.5")),
        ("/model/provider", json!("anthropic")),
        ("/web/extract_backend", json!("firecrawl")),
        ("/web/search_backend", json!("searxng")),
        ("/web/extract_timeout", json!(30)),
        ("/security/redact_secrets", json!(true)),
        ("/toolsets", json!(["web", "terminal"])),
    ];
    for (pointer, want) in cases {
        assert_eq!(
            config.pointer(pointer),
            Some(want),
            "config.yaml {pointer} must hold the managed value"
        );
    }
    // model.default, model.provider, web.{extract_backend,search_backend,extract_timeout},
    // security.redact_secrets, toolsets (a list is one leaf).
    assert_eq!(
        d.pinned_keys, 7,
        "pinned keys must follow Hermes' leaf count"
    );
}

#[test]
fn an_empty_spec_pins_only_the_web_backends() {
    let d = render(&FleetPolicy::test()).expect("the default spec must render");
    assert_eq!(
        parsed(&d, CONFIG_KEY),
        json!({"web": {"extract_backend": "firecrawl", "search_backend": "searxng"}}),
        "config.yaml must hold exactly the two pins"
    );
    assert_eq!(d.pinned_keys, 2, "the two pins must be counted");
    assert!(
        data(&d, CONFIG_KEY).starts_with("# Hermes managed scope"),
        "config.yaml must say where it comes from"
    );
}

#[test]
fn the_config_map_is_named_labelled_annotated_and_owned() {
    let d = render(&FleetPolicy::test()).expect("the default spec must render");
    let meta = &d.config_map.metadata;
    assert_eq!(
        meta.name.as_deref(),
        Some("fleet-managed"),
        "the ConfigMap must be <name>-managed"
    );
    assert_eq!(
        meta.namespace.as_deref(),
        Some("agents"),
        "the ConfigMap must live in the policy's namespace"
    );
    let labels = meta.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(POLICY_LABEL).map(String::as_str),
        Some("fleet"),
        "the policy label must name the FleetPolicy"
    );
    assert_eq!(
        labels
            .get("app.kubernetes.io/managed-by")
            .map(String::as_str),
        Some("fleetgate-controller"),
        "managed-by must name the controller"
    );
    let annotations = meta.annotations.clone().unwrap_or_default();
    let policy_sha = hex::encode(Sha256::digest(data(&d, POLICY_KEY).as_bytes()));
    let managed_sha = hex::encode(Sha256::digest(data(&d, CONFIG_KEY).as_bytes()));
    assert_eq!(
        annotations.get(POLICY_SHA_ANNOTATION),
        Some(&policy_sha),
        "the policy annotation must be the sha256 of policy.yaml"
    );
    assert_eq!(
        annotations.get(MANAGED_SHA_ANNOTATION),
        Some(&managed_sha),
        "the managed annotation must be the sha256 of config.yaml"
    );
    assert_eq!(
        (d.policy_sha256.as_str(), d.managed_sha256.as_str()),
        (policy_sha.as_str(), managed_sha.as_str()),
        "Desired must carry the same hashes"
    );
    let owners = meta.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1, "exactly one owner reference must be set");
    assert_eq!(
        (
            owners[0].kind.as_str(),
            owners[0].name.as_str(),
            owners[0].uid.as_str()
        ),
        ("FleetPolicy", "fleet", crate::fixtures::UID),
        "the owner must be the FleetPolicy"
    );
    assert_eq!(
        owners[0].controller,
        Some(true),
        "the owner reference must be the controller one"
    );
}

#[test]
fn an_offline_render_without_uid_has_no_owner() {
    let mut fp = FleetPolicy::test();
    fp.metadata.uid = None;
    let d = render(&fp).expect("a policy read from a file must render");
    assert_eq!(
        d.config_map.metadata.owner_references, None,
        "no uid means no owner reference"
    );
}

#[test]
fn rendering_is_deterministic_and_follows_the_spec() {
    let a = render(&FleetPolicy::test()).expect("must render");
    let b = render(&FleetPolicy::test()).expect("must render");
    assert_eq!(a, b, "the same spec must render the same ConfigMap");
    let c = render_with(|s| s.web.char_limit = Some(30_000)).expect("must render");
    assert_ne!(
        a.policy_sha256, c.policy_sha256,
        "a policy change must change the policy hash"
    );
    assert_eq!(
        a.managed_sha256, c.managed_sha256,
        "a policy change must leave the managed hash alone"
    );
}

#[test]
fn gate_fields_map_to_spec_fields() {
    let cases = [
        ("web.charLimit", "spec.web.charLimit"),
        ("web.backend", "spec.web.extractBackend"),
        ("web.cache.ttlMinutes", "spec.web.cacheTTLMinutes"),
        (
            "web.vendors.searxng.baseUrl",
            "spec.web.vendors.searxng.baseURL",
        ),
        (
            "web.vendors.brave-free.baseUrl",
            "spec.web.vendors.braveFree.baseURL",
        ),
        ("web.rescue[1]", "spec.web.rescue[1]"),
        (
            "websiteBlocklist.sharedFiles",
            "spec.websiteBlocklist.sharedLists",
        ),
        ("egress.allowCIDRs[2]", "spec.egress.allowCIDRs[2]"),
        ("report.days", "spec.cron.windowDays"),
        ("listen.admin", "policy.yaml:listen.admin"),
    ];
    for (gate, spec) in cases {
        assert_eq!(policy::spec_field(gate), spec, "{gate} must map to {spec}");
    }
}
