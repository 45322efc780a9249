//! The chart's ValidatingAdmissionPolicy evaluated by the API server's own CEL: in a release
//! whose webhook is unreachable and set to `Ignore` (so pods dodge injection), every labelled
//! pod that does not carry the gate is refused with a message naming the policy; a look-alike
//! gate image, a container adding NET_ADMIN, hostNetwork and an ephemeral container adding
//! NET_ADMIN are refused too, while a pod that carries the gate and an unlabelled pod are
//! stored. Every pod of the identity table (`fleetgate_controller::webhook::identity`) is
//! refused naming its field in the table's words, or stored, as the webhook decides.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use fleetgate_controller::webhook::identity::{self, Gate};

use crate::support::{self, ensure_crds};

/// The gate image the chart's policy accepts (`image.proxy.repository`).
const GATE_REPO: &str = "ghcr.io/fleetgate/fleetgate-proxy";

fn pod(name: &str, labelled: bool, containers: Value, extra_spec: Value) -> Pod {
    let mut spec = json!({ "containers": containers });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra_spec.as_object()) {
        spec.extend(extra.clone());
    }
    let labels = if labelled {
        json!({ "fleetgate.dev/inject": "enabled", "app": "hermes" })
    } else {
        json!({ "app": "other" })
    };
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "labels": labels },
        "spec": spec,
    }))
    .expect("a pod")
}

fn agent() -> Value {
    json!({ "name": "agent", "image": "example.com/hermes:1" })
}

fn gate(image: &str) -> Value {
    json!({ "name": "fleetgate-proxy", "image": image })
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s"
)]
async fn the_admission_policy_refuses_every_labelled_pod_that_dodged_the_gate() {
    let _ = ensure_crds();
    let client = support::client().await;
    let ns = support::namespace(&client, "vap").await;
    support::install_chart(&ns, &["--set", "webhook.failurePolicy=Ignore"]);
    let policy = format!("fleetgate-injected-{ns}");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let good = format!("{GATE_REPO}:1.0.0");
    let net_admin = json!({ "name": "sneaky", "image": "example.com/tool:1",
        "securityContext": { "capabilities": { "add": ["NET_ADMIN"] } } });
    let refused_cases = [
        (
            "dodged-the-webhook",
            pod("p1", true, json!([agent()]), json!({})),
            "must run the fleetgate-proxy container",
        ),
        (
            "look-alike gate image",
            pod(
                "p2",
                true,
                json!([
                    agent(),
                    gate("ghcr.io/fleetgate/fleetgate-proxy-lookalike:1.0.0")
                ]),
                json!({}),
            ),
            "must run the fleetgate-proxy container",
        ),
        (
            "look-alike registry prefix",
            pod(
                "p3",
                true,
                json!([agent(), gate(&format!("evil.example/{GATE_REPO}:1.0.0"))]),
                json!({}),
            ),
            "must run the fleetgate-proxy container",
        ),
        (
            "a container adding NET_ADMIN",
            pod(
                "p4",
                true,
                json!([agent(), gate(&good), net_admin]),
                json!({}),
            ),
            "must not add",
        ),
        (
            "hostNetwork",
            pod(
                "p5",
                true,
                json!([agent(), gate(&good)]),
                json!({ "hostNetwork": true }),
            ),
            "must not use hostNetwork",
        ),
    ];
    // The policy binds asynchronously: wait until the first case is refused.
    let first = &refused_cases[0].1;
    support::eventually(
        std::time::Duration::from_secs(30),
        "the admission policy to take effect",
        || async {
            let params = PostParams {
                dry_run: true,
                ..PostParams::default()
            };
            pods.create(&params, first).await.err().map(|_| ())
        },
    )
    .await;
    let mut refused = 0;
    for (case, p, words) in &refused_cases {
        match pods.create(&PostParams::default(), p).await {
            Err(kube::Error::Api(status)) => {
                assert!(
                    status.message.contains(&policy) && status.message.contains(words),
                    "{case}: the refusal must name {policy} and say {words:?}: {}",
                    status.message
                );
                refused += 1;
            }
            other => panic!("{case}: the API server must refuse the pod: {other:?}"),
        }
    }
    // Controls: a pod with the gate, and an unlabelled pod, are stored.
    pods.create(
        &PostParams::default(),
        &pod("gated", true, json!([agent(), gate(&good)]), json!({})),
    )
    .await
    .expect("a labelled pod carrying the gate must be stored");
    pods.create(
        &PostParams::default(),
        &pod("unlabelled", false, json!([agent()]), json!({})),
    )
    .await
    .expect("an unlabelled pod must be stored");

    // kubectl debug on the gated pod: an ephemeral container adding NET_ADMIN.
    let debug = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "gated" },
        "spec": { "ephemeralContainers": [{
            "name": "debugger", "image": "example.com/tool:1",
            "securityContext": { "capabilities": { "add": ["NET_ADMIN"] } },
        }]},
    });
    let patched = pods
        .patch_subresource(
            "ephemeralcontainers",
            "gated",
            &PatchParams::default(),
            &Patch::Strategic(&debug),
        )
        .await;
    match patched {
        Err(kube::Error::Api(status)) => {
            assert!(
                status.message.contains(&policy) && status.message.contains("must not add"),
                "the ephemeral container's refusal must name {policy}: {}",
                status.message
            );
            refused += 1;
        }
        other => panic!("an ephemeral container adding NET_ADMIN must be refused: {other:?}"),
    }
    println!("the ValidatingAdmissionPolicy refused {refused} pods or pod updates");
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s"
)]
async fn the_admission_policy_refuses_every_identity_that_could_send_as_the_gate() {
    let _ = ensure_crds();
    let client = support::client().await;
    let ns = support::namespace(&client, "vap-id").await;
    support::install_chart(&ns, &["--set", "webhook.failurePolicy=Ignore"]);
    let policy = format!("fleetgate-injected-{ns}");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let image = format!("{GATE_REPO}:1.0.0");
    let gate = Gate {
        uid: 15000,
        gid: 15000,
        image: &image,
    };
    let cases = identity::cases(&image);
    let named = |i: usize, pod: &Value| -> Pod {
        let mut pod = pod.clone();
        pod["metadata"]["name"] = json!(format!("id-{i}"));
        serde_json::from_value(pod).expect("a table pod is a Pod")
    };
    // The policy binds asynchronously: wait until a pod of the gate's uid is refused.
    let (first, probe) = cases
        .iter()
        .enumerate()
        .find(|(_, c)| c.rule == Some(identity::Rule::GateUid) && !c.ephemeral)
        .expect("the table refuses the gate's uid");
    let probe = named(first, &probe.pod);
    support::eventually(
        std::time::Duration::from_secs(30),
        "the admission policy to take effect",
        || async {
            let params = PostParams {
                dry_run: true,
                ..PostParams::default()
            };
            pods.create(&params, &probe).await.err().map(|_| ())
        },
    )
    .await;
    let mut table = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let answer = if case.ephemeral {
            // Stored without it, then `kubectl debug`: an UPDATE of pods/ephemeralcontainers.
            let mut stored = case.pod.clone();
            let debug = stored["spec"]
                .as_object_mut()
                .and_then(|s| s.remove("ephemeralContainers"))
                .expect("an ephemeral case adds an ephemeral container");
            let stored = named(i, &stored);
            pods.create(&PostParams::default(), &stored)
                .await
                .unwrap_or_else(|e| {
                    panic!(
                        "{}: the pod without the debug container must be stored: {e}",
                        case.name
                    )
                });
            let patch = json!({"spec": {"ephemeralContainers": debug}});
            pods.patch_subresource(
                "ephemeralcontainers",
                &format!("id-{i}"),
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
            .map(|_| ())
        } else {
            pods.create(&PostParams::default(), &named(i, &case.pod))
                .await
                .map(|_| ())
        };
        match (case.rule, answer) {
            (Some(rule), Err(kube::Error::Api(status))) => {
                let want = format!("{policy}: {} {}", case.field, rule.says(&gate));
                assert!(
                    status.message.contains(&want),
                    "{}: the API server's refusal must say {want:?}: {}",
                    case.name,
                    status.message
                );
                table.push((case.name, status.message));
            }
            (None, Ok(())) => table.push((case.name, "admitted".to_string())),
            (rule, answer) => panic!(
                "{}: the API server must {}: {answer:?}",
                case.name,
                if rule.is_some() {
                    "refuse it"
                } else {
                    "admit it"
                }
            ),
        }
    }
    println!("the identity table on the real API server:");
    for (name, answer) in &table {
        println!("- {name}: {answer}");
    }
}
