use std::path::PathBuf;

use serde_json::{Value, json};

use super::*;

/// The committed copies of the generated CRD, relative to the workspace root.
const COMMITTED: [&str; 2] = [
    "deploy/crd/fleetpolicy.yaml",
    "charts/fleetgate/crds/fleetpolicy.yaml",
];

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .expect("the controller crate must sit inside the workspace")
}

fn crd_json() -> Value {
    serde_json::to_value(FleetPolicy::crd()).expect("the CRD must serialize")
}

fn schema() -> Value {
    crd_json()
        .pointer("/spec/versions/0/schema/openAPIV3Schema")
        .cloned()
        .expect("the CRD must carry a schema")
}

#[test]
fn committed_crd_copies_match_the_code() {
    let generated = crd_yaml().expect("the CRD must print as YAML");
    for rel in COMMITTED {
        let committed = std::fs::read_to_string(workspace_root().join(rel)).unwrap_or_default();
        assert!(
            committed == generated,
            "{rel} is out of date with the FleetPolicy types; regenerate it with:\n  {REGENERATE_HINT}"
        );
    }
}

#[test]
fn no_value_of_the_crd_reads_as_a_boolean_in_yaml_1_1() {
    // The API server reads YAML 1.1: a plain `off` is `false` there.
    let fleet = crd_yaml().expect("the CRD must print");
    assert!(
        fleet.contains("- 'off'"),
        "the egress mode `off` must be quoted"
    );
    for generated in [
        fleet,
        cluster_fleet_policy::crd_yaml().expect("the CRD must print"),
    ] {
        for line in generated.lines() {
            let value = line.trim_start().trim_start_matches("- ");
            let value = value.rsplit_once(": ").map_or(value, |(_, v)| v);
            assert!(
                !super::YAML11_BOOLEANS.contains(&value),
                "a plain YAML 1.1 boolean in the CRD: {line}"
            );
        }
    }
}

#[test]
fn the_crd_names_the_resource_as_designed() {
    let crd = crd_json();
    let cases: &[(&str, Value)] = &[
        ("/metadata/name", json!("fleetpolicies.fleetgate.dev")),
        ("/spec/group", json!("fleetgate.dev")),
        ("/spec/scope", json!("Namespaced")),
        ("/spec/names/kind", json!("FleetPolicy")),
        ("/spec/names/shortNames", json!(["fp"])),
        ("/spec/versions/0/name", json!("v1alpha1")),
        ("/spec/versions/0/subresources/status", json!({})),
    ];
    for (pointer, want) in cases {
        assert_eq!(crd.pointer(pointer), Some(want), "{pointer} must be {want}");
    }
}

#[test]
fn printer_columns_are_ready_pods_current_cost_flagged_budget_age() {
    let crd = crd_json();
    let columns = crd
        .pointer("/spec/versions/0/additionalPrinterColumns")
        .and_then(Value::as_array)
        .expect("the CRD must declare printer columns");
    let got: Vec<(&str, &str)> = columns
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default(),
                c["jsonPath"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    let want = [
        ("Ready", ".status.conditions[?(@.type==\"Ready\")].status"),
        ("Pods", ".status.pods.selected"),
        ("Current", ".status.pods.current"),
        ("Cost/day", ".status.totalCostPerDay"),
        ("Flagged", ".status.flagged"),
        ("Budget", ".status.budget"),
        ("Age", ".metadata.creationTimestamp"),
    ];
    assert_eq!(got, want, "the printer columns must follow the design");
}

#[test]
fn the_schema_carries_the_validation() {
    let s = schema();
    let spec = "/properties/spec/properties";
    let cases: &[(&str, Value)] = &[
        ("/web/properties/charLimit/minimum", json!(2000.0)),
        ("/web/properties/charLimit/maximum", json!(500000.0)),
        ("/web/properties/cacheTTLMinutes/minimum", json!(1.0)),
        ("/web/properties/cacheTTLMinutes/maximum", json!(1440.0)),
        (
            "/web/properties/extractBackend/enum",
            json!([
                "direct",
                "firecrawl",
                "tavily",
                "exa",
                "parallel",
                "keenable",
                "keyless"
            ]),
        ),
        (
            "/web/properties/searchBackend/enum",
            json!([
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
                "keyless"
            ]),
        ),
        (
            "/web/properties/rescue/items/enum",
            json!([
                "direct",
                "firecrawl",
                "tavily",
                "exa",
                "parallel",
                "keenable",
                "keyless"
            ]),
        ),
        (
            "/egress/properties/mode/enum",
            json!(["proxy", "transparent", "off"]),
        ),
        ("/egress/properties/ports/items/minimum", json!(1.0)),
        ("/egress/properties/ports/items/maximum", json!(65535.0)),
        (
            "/websiteBlocklist/properties/mode/enum",
            json!(["enforce", "report"]),
        ),
        ("/cron/properties/windowDays/maximum", json!(366.0)),
        ("/managed/x-kubernetes-preserve-unknown-fields", json!(true)),
        ("/resyncSeconds/minimum", json!(10.0)),
        // Map sizes are maxProperties (schemars' `length` sets nothing on a map).
        ("/llm/properties/providers/maxProperties", json!(16)),
        ("/llm/properties/roles/maxProperties", json!(64)),
        ("/llm/properties/pins/maxProperties", json!(64)),
        ("/llm/properties/providerTools/maxProperties", json!(64)),
        (
            "/llm/properties/prices/properties/models/maxProperties",
            json!(256),
        ),
        (
            "/llm/properties/prices/properties/tiers/maxProperties",
            json!(32),
        ),
        (
            "/llm/properties/budgets/properties/namespace/maxProperties",
            json!(4),
        ),
        (
            "/llm/properties/budgets/properties/pod/maxProperties",
            json!(4),
        ),
        (
            "/llm/properties/budgets/properties/namespace/additionalProperties/properties/dailyUsd/minimum",
            json!(0.0),
        ),
        (
            "/llm/properties/budgets/properties/pod/additionalProperties/properties/tokensPerMinute/minimum",
            json!(1.0),
        ),
    ];
    for (pointer, want) in cases {
        let full = format!("{spec}{pointer}");
        assert_eq!(s.pointer(&full), Some(want), "{full} must be {want}");
    }
    let rules = s
        .pointer("/properties/spec/properties/web/x-kubernetes-validations/0/rule")
        .and_then(Value::as_str)
        .expect("spec.web must carry a CEL rule");
    assert!(
        rules.contains("searxng"),
        "the CEL rule must tie searxng to its base URL"
    );
    assert_eq!(
        s.pointer("/properties/spec/required"),
        Some(&json!(["selector"])),
        "only the selector must be required"
    );
}

#[test]
fn both_budget_maps_take_only_the_gates_budget_roles() {
    let s = schema();
    for scope in ["pod", "namespace"] {
        let rule = s
            .pointer(&format!(
                "/properties/spec/properties/llm/properties/budgets/properties/{scope}/x-kubernetes-validations/0"
            ))
            .unwrap_or_else(|| panic!("budgets.{scope} must carry a CEL rule"));
        assert_eq!(rule["rule"], json!(llm::BUDGET_ROLES_RULE));
        assert_eq!(rule["message"], json!(llm::BUDGET_ROLES_MESSAGE));
    }
    // The rule's list is the gate's: every role it names, and no other.
    let listed: Vec<&str> = llm::BUDGET_ROLES_RULE
        .split('\'')
        .skip(1)
        .step_by(2)
        .collect();
    assert_eq!(listed, fleetgate_policy::llm::spend::BUDGET_ROLES);
}

#[test]
fn the_cidr_pattern_accepts_addresses_and_refuses_junk() {
    let pattern = schema()
        .pointer("/properties/spec/properties/egress/properties/allowCIDRs/items/pattern")
        .and_then(Value::as_str)
        .map(str::to_string)
        .expect("allowCIDRs items must carry a pattern");
    let re = regex::Regex::new(&pattern).expect("the pattern must compile");
    for ok in [
        "10.0.0.0/8",
        "10.1.2.3",
        "fd00:1::/64",
        "::1",
        "2001:db8::1/128",
    ] {
        assert!(re.is_match(ok), "{ok} must match the CIDR pattern");
    }
    for bad in [
        "10.0.0.0/33",
        "example.com",
        "10.0.0.0/",
        "fd00::/129",
        "10.0.0/8 ",
    ] {
        assert!(!re.is_match(bad), "{bad} must not match the CIDR pattern");
    }
}

#[test]
fn conditions_merge_by_type() {
    let s = schema();
    let conditions = s
        .pointer("/properties/status/properties/conditions")
        .expect("status must carry conditions");
    assert_eq!(
        conditions["x-kubernetes-list-type"],
        json!("map"),
        "conditions must be a map list"
    );
    assert_eq!(
        conditions["x-kubernetes-list-map-keys"],
        json!(["type"]),
        "conditions must merge by type"
    );
}

#[test]
fn spec_and_status_round_trip_in_camel_case() {
    let fp = FleetPolicy::test().with_status(FleetPolicyStatus {
        observed_generation: Some(3),
        total_cost_per_day: Some(1.5),
        ..FleetPolicyStatus::default()
    });
    let value = serde_json::to_value(&fp).expect("a FleetPolicy must serialize");
    assert_eq!(
        value.pointer("/status/observedGeneration"),
        Some(&json!(3)),
        "status keys must be camelCase"
    );
    assert_eq!(
        value.pointer("/status/totalCostPerDay"),
        Some(&json!(1.5)),
        "status keys must be camelCase"
    );
    let back: FleetPolicy = serde_json::from_value(value).expect("a FleetPolicy must deserialize");
    assert_eq!(back, fp, "serialization must round-trip");
}

#[test]
fn committed_cluster_baseline_crd_copies_match_the_code() {
    let generated = cluster_fleet_policy::crd_yaml().expect("the CRD must print as YAML");
    for rel in [
        "deploy/crd/clusterfleetpolicy.yaml",
        "charts/fleetgate/crds/clusterfleetpolicy.yaml",
        "charts/fleetgate-baseline/crds/clusterfleetpolicy.yaml",
    ] {
        let committed = std::fs::read_to_string(workspace_root().join(rel)).unwrap_or_default();
        assert!(
            committed == generated,
            "{rel} is out of date with the ClusterFleetPolicy types; regenerate it with:\n  {}",
            cluster_fleet_policy::REGENERATE_HINT
        );
    }
}

#[test]
fn the_cluster_baseline_crd_is_cluster_scoped_with_its_short_name() {
    let crd =
        serde_json::to_value(cluster_fleet_policy::ClusterFleetPolicy::crd()).expect("serializes");
    let cases: &[(&str, Value)] = &[
        (
            "/metadata/name",
            json!("clusterfleetpolicies.fleetgate.dev"),
        ),
        ("/spec/group", json!("fleetgate.dev")),
        ("/spec/scope", json!("Cluster")),
        ("/spec/names/kind", json!("ClusterFleetPolicy")),
        ("/spec/names/shortNames", json!(["cfp"])),
        ("/spec/versions/0/name", json!("v1alpha1")),
    ];
    for (pointer, want) in cases {
        assert_eq!(crd.pointer(pointer), Some(want), "{pointer} must be {want}");
    }
}

#[test]
fn the_backend_enums_are_the_policy_catalogues_names_by_capability() {
    use fleetgate_policy::backends::BackendKind;
    let schema = schema();
    let web = "/properties/spec/properties/web/properties";
    let listed = |path: &str| -> Vec<String> {
        let values = schema
            .pointer(&format!("{web}/{path}/enum"))
            .and_then(Value::as_array)
            .unwrap_or_else(|| panic!("{path} must be an enum"));
        values
            .iter()
            .map(|v| v.as_str().expect("enum values are names").to_owned())
            .collect()
    };
    let catalogue = |can: fn(BackendKind) -> bool| -> Vec<String> {
        BackendKind::ALL
            .into_iter()
            .filter(|k| can(*k))
            .map(|k| k.name().to_owned())
            .collect()
    };
    let extract = catalogue(|k| k.capabilities().extract);
    let search = catalogue(|k| k.capabilities().search);
    assert_eq!(listed("extractBackend"), extract);
    assert_eq!(listed("rescue/items"), extract);
    assert_eq!(listed("searchBackend"), search);
    assert!(extract.contains(&"direct".to_owned()) && !search.contains(&"direct".to_owned()));
    assert!(search.contains(&"ddgs".to_owned()) && !extract.contains(&"ddgs".to_owned()));
    assert_eq!(
        ExtractBackend::all()
            .map(ExtractBackend::name)
            .collect::<Vec<_>>(),
        extract
    );
    assert_eq!(
        SearchBackend::all()
            .map(SearchBackend::name)
            .collect::<Vec<_>>(),
        search
    );
}

#[test]
fn a_backend_name_reads_only_where_it_has_the_capability() {
    use fleetgate_policy::backends::BackendKind;
    let exa: ExtractBackend = serde_json::from_value(json!("exa")).expect("exa extracts");
    assert_eq!(exa.kind(), BackendKind::Exa);
    let err = serde_json::from_value::<ExtractBackend>(json!("ddgs"))
        .expect_err("ddgs cannot extract")
        .to_string();
    assert!(
        err.starts_with("unknown variant `ddgs`, expected one of `direct`, `firecrawl`"),
        "{err}"
    );
    let err = serde_json::from_value::<SearchBackend>(json!("direct"))
        .expect_err("direct cannot search")
        .to_string();
    assert!(err.starts_with("unknown variant `direct`"), "{err}");
    let brave: SearchBackend =
        serde_json::from_value(json!("brave-free")).expect("brave-free searches");
    assert_eq!(brave.kind(), BackendKind::BraveFree);
    assert_eq!(
        serde_json::to_value(brave).expect("serializes"),
        json!("brave-free")
    );
    assert!(ExtractBackend::new(BackendKind::Xai).is_none());
}
