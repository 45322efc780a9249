use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::*;
use crate::crd::{EgressMode, FleetPolicy};
use crate::webhook::{Decision, InjectorConfig, mutate};

const IMAGE: &str = "ghcr.io/fleetgate/fleetgate-proxy:0.1.0";

fn gate() -> Gate<'static> {
    Gate {
        uid: DEFAULT_PROXY_UID,
        gid: DEFAULT_PROXY_UID,
        image: IMAGE,
    }
}

fn spec_of(pod: &Value) -> PodSpec {
    serde_json::from_value(pod["spec"].clone()).expect("a case's spec must be a PodSpec")
}

/// The webhook's answer for the case pod before injection, in the mode its capture implies.
fn webhook(pod: &Value) -> Decision {
    let spec = spec_of(pod);
    let mode = match captured(&spec, &gate()) {
        true => EgressMode::Transparent,
        false => EgressMode::Proxy,
    };
    let fp = FleetPolicy::test().with_spec(|s| s.egress.mode = Some(mode));
    let mut before = without_gate(pod);
    before["metadata"]["namespace"] = json!("agents");
    let before: Pod = serde_json::from_value(before).expect("a Pod");
    mutate(
        &before,
        "agents",
        &[&fp],
        &InjectorConfig::with_image(IMAGE),
    )
}

#[test]
fn every_forbidden_pod_breaks_exactly_its_rule_naming_the_field() {
    let mut seen = 0;
    for case in cases(IMAGE) {
        let Some(rule) = case.rule else { continue };
        let spec = spec_of(&case.pod);
        let got = check(&spec, &gate(), captured(&spec, &gate()));
        assert_eq!(
            got.iter().map(|v| v.rule).collect::<Vec<_>>(),
            [rule],
            "{}: exactly {rule:?} must be broken: {got:?}",
            case.name
        );
        assert_eq!(got[0].fields, [case.field], "{}", case.name);
        seen += 1;
    }
    assert!(
        seen >= 20,
        "the table must hold the forbidden pods ({seen})"
    );
}

#[test]
fn the_webhook_refuses_every_forbidden_pod_before_injection_with_the_field_and_the_reason() {
    for case in cases(IMAGE).into_iter().filter(|c| !c.ephemeral) {
        let got = webhook(&case.pod);
        // An init container ahead of fleetgate-init is fine before injection: the injector
        // puts fleetgate-init first (tested below).
        let rule = case.rule.filter(|r| *r != Rule::InitNotFirst);
        let field = case.field_before_injection(&gate());
        match rule {
            Some(rule) => {
                let Decision::Refuse(message) = &got else {
                    panic!("{}: the webhook must refuse: {got:?}", case.name);
                };
                let says = rule.says(&gate());
                assert!(
                    message.starts_with("fleetgate: pod agent: ")
                        && message.contains(&format!("{field} {says}")),
                    "{}: the refusal must name {field} and say {says:?}: {message}",
                    case.name,
                );
            }
            None => assert!(
                matches!(got, Decision::Patch { .. }),
                "{}: the webhook must inject the pod: {got:?}",
                case.name
            ),
        }
    }
}

#[test]
fn admitted_pods_break_no_rule_and_the_gates_own_containers_are_exempt() {
    for case in cases(IMAGE).into_iter().filter(|c| c.rule.is_none()) {
        let spec = spec_of(&case.pod);
        let got = check(&spec, &gate(), captured(&spec, &gate()));
        assert_eq!(got, [], "{} must be admitted", case.name);
    }
    // The same containers under another image are not the gate's: a look-alike
    // fleetgate-proxy running as the gate's uid, a look-alike fleetgate-init running as root
    // with NET_ADMIN (and then there is no capture).
    let mut fake = base_pod(IMAGE);
    fake["spec"]["containers"][1]["image"] = json!("ghcr.io/fleetgate/fleetgate-proxy-evil:0.1.0");
    let spec = spec_of(&fake);
    let got = check(&spec, &gate(), true);
    assert_eq!(
        got,
        [
            Violation {
                rule: Rule::GateUid,
                fields: vec!["spec.containers[1].securityContext.runAsUser".into()],
            },
            Violation {
                rule: Rule::GateGid,
                fields: vec!["spec.containers[1].securityContext.runAsGroup".into()],
            },
        ]
    );
    let mut fake_init = base_pod(IMAGE);
    fake_init["spec"]["initContainers"][0]["image"] = json!("alpine:3");
    let spec = spec_of(&fake_init);
    assert!(
        !captured(&spec, &gate()),
        "a look-alike init container is no capture"
    );
    let got = check(&spec, &gate(), true);
    let rules: Vec<Rule> = got.iter().map(|v| v.rule).collect();
    // It adds NET_RAW as root, too (the gate's own init container is exempt from both).
    assert_eq!(rules, [Rule::NetCaps, Rule::RootKeepsSetuid], "{got:?}");
}

#[test]
fn what_the_webhook_injects_in_transparent_mode_passes_its_own_rules() {
    let pod = without_gate(&base_pod(IMAGE));
    let Decision::Patch { ops, .. } = webhook(&base_pod(IMAGE)) else {
        panic!("the base pod must be injected");
    };
    let patch: json_patch::Patch =
        serde_json::from_value(serde_json::to_value(ops).expect("ops serialize"))
            .expect("an RFC 6902 patch");
    let mut doc = pod;
    json_patch::patch(&mut doc, &patch).expect("the patch must apply");
    let spec = spec_of(&doc);
    assert!(
        captured(&spec, &gate()),
        "the injected init container is the capture"
    );
    assert_eq!(check(&spec, &gate(), true), []);
}

#[test]
fn the_webhook_names_every_rule_a_pod_breaks_and_every_field() {
    let mut pod = base_pod(IMAGE);
    pod["spec"]["securityContext"] = json!({"runAsUser": 0, "fsGroup": DEFAULT_PROXY_UID});
    pod["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
        .insert(1, json!({"name": "tool", "image": "t", "securityContext": {"runAsGroup": DEFAULT_PROXY_UID}}));
    let Decision::Refuse(message) = webhook(&pod) else {
        panic!("the pod must be refused");
    };
    for part in [
        format!(
            "spec.containers[1].securityContext.runAsGroup, spec.securityContext.fsGroup {}",
            Rule::GateGid.says(&gate())
        ),
        format!(
            "spec.containers[1].securityContext.capabilities.drop {}",
            Rule::RootKeepsSetuid.says(&gate())
        ),
        format!(
            "spec.containers[1].securityContext.allowPrivilegeEscalation {}",
            Rule::RootEscalates.says(&gate())
        ),
    ] {
        assert!(message.contains(&part), "{part:?} must be in: {message}");
    }
}

#[test]
fn the_table_covers_every_rule_and_every_kind_of_container() {
    for (i, row) in RULES.iter().enumerate() {
        assert_eq!(
            row.rule as usize, i,
            "RULES lists the rules in declaration order"
        );
    }
    let all = cases(IMAGE);
    for row in &RULES {
        assert!(
            all.iter().any(|c| c.rule == Some(row.rule)),
            "no pod of the table breaks {:?}",
            row.rule
        );
    }
    for list in [
        "spec.containers[",
        "spec.initContainers[",
        "spec.ephemeralContainers[",
    ] {
        assert!(
            all.iter().any(|c| c.field.starts_with(list)),
            "no refused field under {list}"
        );
    }
}

#[test]
fn capability_names_match_in_every_spelling_and_the_repository_is_the_image_without_tag() {
    for spelling in ["SETUID", "setuid", "CAP_SETUID", "cap_setuid", "ALL", "all"] {
        assert!(
            names(Some(&vec![spelling.to_string()]), &["SETUID", "ALL"]),
            "{spelling}"
        );
    }
    assert!(!names(Some(&vec!["SETUIDX".into()]), &["SETUID"]));
    assert!(!names(None, &["SETUID"]));
    for (image, repo) in [
        (IMAGE, "ghcr.io/fleetgate/fleetgate-proxy"),
        (
            "registry:5000/fg/proxy@sha256:0123",
            "registry:5000/fg/proxy",
        ),
        ("registry:5000/fg/proxy", "registry:5000/fg/proxy"),
        ("localhost/fleetgate-proxy:dev", "localhost/fleetgate-proxy"),
    ] {
        let g = Gate { image, ..gate() };
        assert_eq!(g.repository(), repo, "{image}");
    }
    let g = gate();
    assert!(g.runs(Some("ghcr.io/fleetgate/fleetgate-proxy@sha256:0123")));
    assert!(!g.runs(Some("ghcr.io/fleetgate/fleetgate-proxy-evil:0.1.0")));
    assert!(!g.runs(Some("evil.example/ghcr.io/fleetgate/fleetgate-proxy:0.1.0")));
    assert!(!g.runs(None));
}

#[test]
fn the_injector_puts_fleetgate_init_before_the_pods_own_init_containers() {
    let mut pod = base_pod(IMAGE);
    pod["spec"]["initContainers"]
        .as_array_mut()
        .expect("init containers")
        .push(
            json!({"name": "setup", "image": "example.com/tool:1", "securityContext":
                     {"runAsUser": 1001, "allowPrivilegeEscalation": false,
                      "capabilities": {"drop": ["ALL"]}}}),
        );
    let Decision::Patch { ops, .. } = webhook(&pod) else {
        panic!("the pod must be injected");
    };
    let patch: json_patch::Patch =
        serde_json::from_value(serde_json::to_value(ops).expect("ops serialize"))
            .expect("an RFC 6902 patch");
    let mut doc = without_gate(&pod);
    json_patch::patch(&mut doc, &patch).expect("the patch must apply");
    let names: Vec<&str> = doc["spec"]["initContainers"]
        .as_array()
        .expect("init containers")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, [INIT_CONTAINER, "setup"]);
    let spec = spec_of(&doc);
    assert_eq!(check(&spec, &gate(), true), [], "the injected pod passes");
}
