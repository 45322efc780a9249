//! The chart's ValidatingAdmissionPolicy, evaluated client-side as the API server would (kube's
//! CEL evaluator with the Kubernetes extension functions): the injected pods the webhook
//! produces (the golden files) pass, the same pods before injection are refused, and so is
//! every way around the gate the policy names — NET_ADMIN / NET_RAW / ALL in any spelling,
//! privileged, hostNetwork, a look-alike gate container or init container, an ephemeral debug
//! container. Pods not labelled for injection (or opted out, when allowed) are not matched.
//!
//! The identity rules run the shared table of `fleetgate_controller::webhook::identity`: each
//! forbidden pod refused with exactly one message, naming its field in the table's words, and
//! each allowed pod admitted, as the webhook does.
//!
//! Real-server twin: `tests/tests/k8s/admission.rs` has kube-apiserver itself evaluate the
//! installed policy (refusals naming it, the ephemeral-container path); this file keeps the
//! wide table of spellings, which is cheaper client-side.
#![allow(clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

use fleetgate_controller::webhook::identity::{self, Gate};
use kube::core::cel::{AdmissionRequest, VapEvaluator, VapExpression};
use serde::Deserialize;
use serde_json::{Value, json};

const HELM_ENV: &str = "FLEETGATE_HELM";
const REQUIRE_ENV: &str = "FLEETGATE_REQUIRE_K8S_TOOLS";

/// The policy as the chart renders it for namespace `agents` with `extra` arguments, or `None`
/// (skipped) without helm.
#[allow(
    clippy::print_stdout,
    reason = "the skip line belongs in the test's output"
)]
fn policy(extra: &[&str]) -> Option<Value> {
    let Some(helm) = std::env::var_os(HELM_ENV) else {
        assert!(
            std::env::var_os(REQUIRE_ENV).is_none_or(|v| v != "1"),
            "{REQUIRE_ENV}=1 but {HELM_ENV} is not set"
        );
        println!("skipped: {HELM_ENV} not set (run tests/run)");
        return None;
    };
    let chart = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../charts/fleetgate");
    let out = Command::new(helm)
        .args(["template", "fleetgate", "--namespace", "agents"])
        .arg(&chart)
        .args(extra)
        .output()
        .expect("helm must run");
    assert!(
        out.status.success(),
        "helm template must pass: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("helm prints UTF-8");
    serde_yaml::Deserializer::from_str(&text)
        .filter_map(|d| Value::deserialize(d).ok())
        .find(|d| d["kind"] == "ValidatingAdmissionPolicy")
}

/// What the API server would do with `pod` on `operation`.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// The policy does not apply (a match condition is false).
    NotMatched,
    /// Admitted.
    Admitted,
    /// Refused with these messages.
    Refused(Vec<String>),
}

fn verdict(policy: &Value, pod: &Value, operation: &str) -> Verdict {
    let evaluator = VapEvaluator::builder()
        .object(pod.clone())
        .request(AdmissionRequest {
            operation: operation.into(),
            namespace: "agents".into(),
            ..AdmissionRequest::default()
        })
        .build();
    let variables = variables(policy);
    let expressions = |key: &str| -> Vec<VapExpression> {
        policy["spec"][key]
            .as_array()
            .expect("the policy must list its expressions")
            .iter()
            .map(|e| VapExpression {
                expression: with_variables(
                    &as_kube_cel_sees_it(e["expression"].as_str().expect("an expression")),
                    &variables,
                ),
                message: e["message"].as_str().map(str::to_string),
                message_expression: e["messageExpression"]
                    .as_str()
                    .map(|m| with_variables(m, &variables)),
            })
            .collect()
    };
    let conditions = evaluator.evaluate(&expressions("matchConditions"));
    for c in &conditions {
        assert!(
            c.passed || c.message.as_deref().is_some_and(|m| !m.contains("error")),
            "a match condition must evaluate, not fail: {c:?}"
        );
    }
    if conditions.iter().any(|c| !c.passed) {
        return Verdict::NotMatched;
    }
    let refused: Vec<String> = evaluator
        .evaluate(&expressions("validations"))
        .into_iter()
        .filter(|r| !r.passed)
        .map(|r| r.message.unwrap_or_default())
        .collect();
    match refused.is_empty() {
        true => Verdict::Admitted,
        false => Verdict::Refused(refused),
    }
}

/// The policy's `spec.variables` as (name, expression), each with the earlier ones inlined.
fn variables(policy: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for v in policy["spec"]["variables"].as_array().into_iter().flatten() {
        let name = v["name"].as_str().expect("a variable name").to_string();
        let expression = as_kube_cel_sees_it(v["expression"].as_str().expect("an expression"));
        let expression = with_variables(&expression, &out);
        out.push((name, expression));
    }
    out
}

/// `expression` with every `variables.<name>` replaced by its expression, in parentheses: the
/// client-side evaluator binds no `variables`; the API server evaluates each once, lazily, to
/// the same value.
fn with_variables(expression: &str, variables: &[(String, String)]) -> String {
    let mut out = expression.to_string();
    // Longest names first, so no name is replaced inside a longer one.
    let mut sorted: Vec<&(String, String)> = variables.iter().collect();
    sorted.sort_by_key(|(name, _)| std::cmp::Reverse(name.len()));
    for (name, expr) in sorted {
        out = out.replace(&format!("variables.{name}"), &format!("({expr})"));
    }
    assert!(
        !out.contains("variables."),
        "every variable must be defined: {out}"
    );
    out
}

/// The client-side evaluator converts every JSON object key as the API server converts schema
/// *property names* (`.` → `__dot__`, `/` → `__slash__`), map entries included; the API server
/// leaves the keys of a map (labels, annotations) as they are, so the policy rightly writes
/// `'fleetgate.dev/inject' in object.metadata.labels`. For the evaluator, that one map key is
/// written escaped; nothing else in the expressions changes.
fn as_kube_cel_sees_it(expression: &str) -> String {
    expression.replace(
        "'fleetgate.dev/inject'",
        "'fleetgate__dot__dev__slash__inject'",
    )
}

fn golden(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/webhook")
        .join(name);
    std::fs::read_to_string(path).expect("a golden fixture must be readable")
}

fn pod(case: &str) -> Value {
    serde_yaml::from_str(&golden(&format!("{case}.pod.yaml"))).expect("a fixture pod must be YAML")
}

/// The pod as the webhook leaves it: the golden patch applied.
fn injected(case: &str) -> Value {
    let ops: Value = serde_json::from_str(&golden(&format!("{case}.patch.json")))
        .expect("a golden patch must be JSON");
    let patch: json_patch::Patch = serde_json::from_value(ops).expect("an RFC 6902 patch");
    let mut doc = pod(case);
    json_patch::patch(&mut doc, &patch).expect("the golden patch must apply");
    doc
}

fn refused_for(verdict: &Verdict, needle: &str) -> bool {
    matches!(verdict, Verdict::Refused(m) if m.iter().any(|m| m.contains(needle) && m.starts_with("fleetgate-injected-agents:")))
}

#[test]
fn every_pod_the_webhook_injects_passes_and_the_same_pod_before_injection_is_refused() {
    let Some(policy) = policy(&[]) else { return };
    for case in ["default", "transparent", "existing"] {
        for operation in ["CREATE", "UPDATE"] {
            assert_eq!(
                verdict(&policy, &injected(case), operation),
                Verdict::Admitted,
                "the injected {case} pod must pass on {operation}"
            );
        }
        let bare = verdict(&policy, &pod(case), "CREATE");
        assert!(
            refused_for(&bare, "must run the fleetgate-proxy container"),
            "the {case} pod before injection must be refused, naming the policy: {bare:?}"
        );
    }
}

#[test]
fn capabilities_privilege_and_host_network_that_bypass_the_gate_are_refused() {
    let Some(policy) = policy(&[]) else { return };
    let base = injected("default");
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut p = base.clone();
        edit(&mut p);
        verdict(&policy, &p, "CREATE")
    };
    for cap in [
        "NET_ADMIN",
        "NET_RAW",
        "ALL",
        "net_admin",
        "CAP_NET_RAW",
        "cap_net_admin",
    ] {
        let v = with(&|p| {
            p["spec"]["containers"][0]["securityContext"] =
                json!({"capabilities": {"add": ["CHOWN", cap]}});
        });
        assert!(
            refused_for(&v, "must not add NET_ADMIN"),
            "an agent adding {cap} must be refused: {v:?}"
        );
    }
    let harmless = with(&|p| {
        p["spec"]["containers"][0]["securityContext"] =
            json!({"capabilities": {"add": ["CHOWN"], "drop": ["NET_RAW"]}});
    });
    assert_eq!(
        harmless,
        Verdict::Admitted,
        "other capabilities are not ours to judge"
    );
    let privileged = with(&|p| {
        p["spec"]["containers"][0]["securityContext"] = json!({"privileged": true});
    });
    assert!(
        refused_for(
            &privileged,
            "spec.containers[0].securityContext.privileged must not be true"
        ),
        "{privileged:?}"
    );
    let host = with(&|p| p["spec"]["hostNetwork"] = json!(true));
    assert!(refused_for(&host, "must not use hostNetwork"), "{host:?}");
    let no_host = with(&|p| p["spec"]["hostNetwork"] = json!(false));
    assert_eq!(no_host, Verdict::Admitted, "hostNetwork: false is fine");
    let debug = with(&|p| {
        p["spec"]["ephemeralContainers"] = json!([{"name": "debug", "image": "busybox",
            "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}]);
    });
    assert!(
        refused_for(&debug, "must not add NET_ADMIN"),
        "an ephemeral debug container with NET_ADMIN must be refused (UPDATE of pods/ephemeralcontainers): {debug:?}"
    );
}

#[test]
fn look_alike_gate_containers_do_not_pass_for_the_gate() {
    let Some(policy) = policy(&[]) else { return };
    // A container named fleetgate-proxy that is not the gate image.
    let mut fake_gate = pod("default");
    fake_gate["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
        .push(json!({"name": "fleetgate-proxy", "image": "busybox:1.36"}));
    let v = verdict(&policy, &fake_gate, "CREATE");
    assert!(
        refused_for(&v, "must run the fleetgate-proxy container"),
        "{v:?}"
    );
    // The gate swapped in place for another image (an UPDATE of the pod's image).
    let mut swapped = injected("default");
    for c in swapped["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
    {
        if c["name"] == "fleetgate-proxy" {
            c["image"] = json!("ghcr.io/fleetgate/fleetgate-proxy-evil:0.1.0");
        }
    }
    let v = verdict(&policy, &swapped, "UPDATE");
    assert!(
        refused_for(&v, "must run the fleetgate-proxy container"),
        "{v:?}"
    );
    // An init container named like the gate's, with NET_ADMIN, but another image.
    let mut fake_init = injected("transparent");
    fake_init["spec"]["initContainers"][0]["image"] = json!("alpine:3");
    let v = verdict(&policy, &fake_init, "CREATE");
    assert!(refused_for(&v, "must not add NET_ADMIN"), "{v:?}");
    // Any other init container with NET_ADMIN.
    let mut other_init = injected("transparent");
    other_init["spec"]["initContainers"]
        .as_array_mut()
        .expect("init containers")
        .push(json!({"name": "setup", "image": "alpine:3",
            "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}));
    let v = verdict(&policy, &other_init, "CREATE");
    assert!(refused_for(&v, "must not add NET_ADMIN"), "{v:?}");
}

#[test]
fn pods_not_labelled_for_injection_are_not_matched_and_opting_out_follows_the_value() {
    let Some(allowing) = policy(&[]) else { return };
    let mut unlabelled = pod("default");
    unlabelled["metadata"]["labels"] = json!({"app": "hermes"});
    assert_eq!(
        verdict(&allowing, &unlabelled, "CREATE"),
        Verdict::NotMatched
    );
    let mut no_labels = pod("default");
    no_labels["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("labels");
    assert_eq!(
        verdict(&allowing, &no_labels, "CREATE"),
        Verdict::NotMatched
    );
    let mut off = pod("default");
    off["metadata"]["labels"]["fleetgate.dev/inject"] = json!("disabled");
    assert_eq!(verdict(&allowing, &off, "CREATE"), Verdict::NotMatched);

    let opted_out = pod("opt-out");
    assert_eq!(
        verdict(&allowing, &opted_out, "CREATE"),
        Verdict::NotMatched,
        "with allowOptOut the annotation is honoured, as the webhook does"
    );
    let strict = policy(&["--set", "admissionPolicy.allowOptOut=false"])
        .expect("the strict policy must render");
    let v = verdict(&strict, &opted_out, "CREATE");
    assert!(
        refused_for(&v, "must run the fleetgate-proxy container"),
        "without allowOptOut the label binds: {v:?}"
    );
}

#[test]
fn the_policy_follows_the_gate_image_repository_of_the_values() {
    let Some(policy) = policy(&["--set", "image.proxy.repository=registry.corp/fg/proxy"]) else {
        return;
    };
    let v = verdict(&policy, &injected("default"), "CREATE");
    assert!(
        refused_for(&v, "from registry.corp/fg/proxy"),
        "a pod injected with another repository than the chart's must be refused: {v:?}"
    );
    let mut moved = injected("default");
    for c in moved["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
    {
        if c["name"] == "fleetgate-proxy" {
            c["image"] = json!("registry.corp/fg/proxy@sha256:0123");
        }
    }
    assert_eq!(verdict(&policy, &moved, "CREATE"), Verdict::Admitted);
}

/// The gate image of the chart's default values.
const GATE_IMAGE: &str = "ghcr.io/fleetgate/fleetgate-proxy:0.1.0";

#[test]
fn the_policy_refuses_every_pod_of_the_identity_table_naming_the_field_in_the_tables_words() {
    let Some(policy) = policy(&[]) else { return };
    let gate = Gate {
        uid: 15000,
        gid: 15000,
        image: GATE_IMAGE,
    };
    let cases = identity::cases(GATE_IMAGE);
    assert!(cases.len() > 25, "the table must be the full one");
    for case in cases {
        // An ephemeral container reaches the API server as an UPDATE of the pod.
        let operation = if case.ephemeral { "UPDATE" } else { "CREATE" };
        let got = verdict(&policy, &case.pod, operation);
        match case.rule {
            Some(rule) => {
                let want = format!(
                    "fleetgate-injected-agents: {} {}",
                    case.field,
                    rule.says(&gate)
                );
                assert_eq!(
                    got,
                    Verdict::Refused(vec![want]),
                    "{}: refused once, naming the field",
                    case.name
                );
            }
            None => assert_eq!(got, Verdict::Admitted, "{} must be admitted", case.name),
        }
    }
}

#[test]
fn the_identity_rules_follow_the_gate_uid_of_the_values() {
    let Some(policy) = policy(&["--set", "injector.proxyUid=2102"]) else {
        return;
    };
    let gate = Gate {
        uid: 2102,
        gid: 2102,
        image: GATE_IMAGE,
    };
    let mut pod = identity::base_pod(GATE_IMAGE);
    pod["spec"]["containers"][0]["securityContext"]["runAsUser"] = json!(2102);
    let want = format!(
        "fleetgate-injected-agents: spec.containers[0].securityContext.runAsUser {}",
        identity::Rule::GateUid.says(&gate)
    );
    assert!(want.contains("is 2102, the gate's uid"), "{want}");
    assert_eq!(
        verdict(&policy, &pod, "CREATE"),
        Verdict::Refused(vec![want])
    );
    // The default gate's uid is an ordinary uid under another proxyUid (the gate container of
    // the base pod runs as 15000 too; it is exempt as the gate either way).
    pod["spec"]["containers"][0]["securityContext"]["runAsUser"] = json!(15000);
    assert_eq!(verdict(&policy, &pod, "CREATE"), Verdict::Admitted);
}
