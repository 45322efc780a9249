//! The chart's MutatingWebhookConfiguration pointed at the controller's HTTPS listener on
//! 127.0.0.1 through the `webhook.url` values override, trusted through the chart's own
//! generated caBundle: a Pod and a Deployment's pods (made by kube-controller-manager) are
//! stored with the gate injected; with `failurePolicy: Fail` and the controller stopped, pod
//! creation in the namespace is refused, and works again once it is back (both measured).
//! Every pod of the identity table, before injection, is refused by the webhook naming its
//! field in the table's words, or injected and then stored past the admission policy too.

use std::time::Duration;

use fleetgate_controller::webhook::identity::{self, Gate};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use crate::replica::{free_addr, start_as_installed_on};
use crate::support::{self, ensure_crds, eventually, kubectl};

fn agent_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "labels": { "fleetgate.dev/inject": "enabled", "app": "hermes" } },
        "spec": { "containers": [{ "name": "agent", "image": "example.com/hermes:1" }] },
    }))
    .expect("a pod")
}

/// The injected gate container of a stored pod, if any.
fn gate_image(pod: &Pod) -> Option<String> {
    pod.spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == "fleetgate-proxy")
        .and_then(|c| c.image.clone())
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s"
)]
async fn the_webhook_behind_a_url_override_injects_pods_and_fails_closed_without_a_controller() {
    let _ = ensure_crds();
    let client = support::client().await;
    let ns = support::namespace(&client, "webhook").await;
    let addr = free_addr();
    let url = format!("https://{addr}/mutate-pods");
    support::install_chart(&ns, &["--set", &format!("webhook.url={url}")]);
    let stored = kubectl(
        &[
            "get",
            "mutatingwebhookconfiguration",
            &format!("fleetgate-{ns}"),
            "-o",
            "jsonpath={.webhooks[0].clientConfig.url}",
        ],
        None,
    );
    assert_eq!(stored, url, "the webhook must point at the override");
    kubectl(
        &["-n", &ns, "apply", "--server-side", "-f", "-"],
        Some(
            &json!({
                "apiVersion": "fleetgate.dev/v1alpha1",
                "kind": "FleetPolicy",
                "metadata": { "name": "fleet" },
                "spec": { "selector": { "matchLabels": { "app": "hermes" } } },
            })
            .to_string(),
        ),
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };

    // No controller yet: failurePolicy Fail refuses the labelled pod.
    let refused = pods
        .create(&PostParams::default(), &agent_pod("before"))
        .await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(s)) if s.message.contains("inject.fleetgate.dev")),
        "without a webhook server a labelled pod must be refused (failurePolicy Fail): {refused:?}"
    );

    let controller = start_as_installed_on(&ns, "controller-0", &addr);
    let started = tokio::time::Instant::now();
    eventually(Duration::from_secs(60), "the webhook serving", || async {
        pods.create(&dry, &agent_pod("probe"))
            .await
            .ok()
            .and_then(|p| gate_image(&p))
    })
    .await;
    println!(
        "webhook serving {:?} after the controller started",
        started.elapsed()
    );

    let pod = pods
        .create(&PostParams::default(), &agent_pod("agent-0"))
        .await
        .expect("a labelled pod must be stored once the webhook serves");
    let image = gate_image(&pod).expect("the stored pod must carry the gate");
    assert!(
        image.starts_with("ghcr.io/fleetgate/fleetgate-proxy:"),
        "the gate must run the chart's proxy image: {image}"
    );
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    assert!(
        annotations.contains_key("fleetgate.dev/egress-mode"),
        "the webhook records the injected egress mode: {annotations:?}"
    );

    // A Deployment: kube-controller-manager makes the pods, the webhook injects each.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": "agents" },
        "spec": {
            "replicas": 2,
            "selector": { "matchLabels": { "app": "hermes", "role": "agent" } },
            "template": {
                "metadata": { "labels": { "fleetgate.dev/inject": "enabled", "app": "hermes", "role": "agent" } },
                "spec": { "containers": [{ "name": "agent", "image": "example.com/hermes:1" }] },
            },
        },
    }))
    .expect("a deployment");
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("the Deployment must be stored");
    let made = eventually(Duration::from_secs(60), "the Deployment's pods", || async {
        let list = pods
            .list(&ListParams::default().labels("role=agent"))
            .await
            .ok()?;
        (list.items.len() == 2).then_some(list.items)
    })
    .await;
    for p in &made {
        assert!(
            gate_image(p).is_some(),
            "kube-controller-manager's pod {:?} must be stored with the gate",
            p.metadata.name
        );
    }

    // Fail closed: the controller stops; labelled pods are refused until it is back.
    drop(controller);
    let stopped = tokio::time::Instant::now();
    eventually(Duration::from_secs(30), "the refusal", || async {
        match pods.create(&dry, &agent_pod("while-down")).await {
            Err(kube::Error::Api(s)) if s.message.contains("inject.fleetgate.dev") => Some(()),
            _ => None,
        }
    })
    .await;
    println!(
        "fail-closed: labelled pods refused {:?} after the controller stopped",
        stopped.elapsed()
    );
    let _back = start_as_installed_on(&ns, "controller-1", &addr);
    let restarted = tokio::time::Instant::now();
    eventually(Duration::from_secs(60), "pod creation again", || async {
        pods.create(&dry, &agent_pod("after"))
            .await
            .ok()
            .and_then(|p| gate_image(&p))
    })
    .await;
    println!(
        "fail-closed: labelled pods admitted again {:?} after a controller restarted",
        restarted.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s"
)]
async fn the_webhook_refuses_every_identity_of_the_table_and_what_it_injects_passes_the_policy() {
    let _ = ensure_crds();
    let client = support::client().await;
    let ns = support::namespace(&client, "webhook-id").await;
    let addr = free_addr();
    let url = format!("https://{addr}/mutate-pods");
    support::install_chart(&ns, &["--set", &format!("webhook.url={url}")]);
    // `app: hermes` in proxy mode, `app: hermes-captured` in transparent mode.
    for (name, app, mode) in [
        ("fleet", "hermes", "proxy"),
        ("capture", "hermes-captured", "transparent"),
    ] {
        kubectl(
            &["-n", &ns, "apply", "--server-side", "-f", "-"],
            Some(
                &json!({
                    "apiVersion": "fleetgate.dev/v1alpha1",
                    "kind": "FleetPolicy",
                    "metadata": { "name": name },
                    "spec": {
                        "selector": { "matchLabels": { "app": app } },
                        "egress": { "mode": mode },
                    },
                })
                .to_string(),
            ),
        );
    }
    let _controller = start_as_installed_on(&ns, "controller-0", &addr);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let image = "ghcr.io/fleetgate/fleetgate-proxy:1.0.0";
    let gate = Gate {
        uid: 15000,
        gid: 15000,
        image,
    };
    let before = |i: usize, pod: &serde_json::Value| -> Pod {
        let spec: k8s_openapi::api::core::v1::PodSpec =
            serde_json::from_value(pod["spec"].clone()).expect("a PodSpec");
        let app = match identity::captured(&spec, &gate) {
            true => "hermes-captured",
            false => "hermes",
        };
        let mut p = identity::without_gate(pod);
        p["metadata"]["name"] = json!(format!("id-{i}"));
        p["metadata"]["labels"]["app"] = json!(app);
        serde_json::from_value(p).expect("a Pod")
    };
    let cases: Vec<_> = identity::cases(image)
        .into_iter()
        .filter(|c| !c.ephemeral)
        .collect();
    // Serving, with both FleetPolicies in its cache: an admitted captured pod is injected in
    // transparent mode.
    let probe = before(999, &identity::base_pod(image));
    eventually(Duration::from_secs(60), "the webhook serving", || async {
        let pod = pods.create(&dry, &probe).await.ok()?;
        let annotations = pod.metadata.annotations?;
        (annotations.get("fleetgate.dev/egress-mode")? == "transparent").then_some(())
    })
    .await;
    let mut refused = 0;
    for (i, case) in cases.iter().enumerate() {
        let answer = pods
            .create(&PostParams::default(), &before(i, &case.pod))
            .await;
        // An init container ahead of fleetgate-init is put behind it by the injector (and the
        // policy then admits the pod): refused only when the webhook is bypassed.
        let rule = case.rule.filter(|r| *r != identity::Rule::InitNotFirst);
        match (rule, answer) {
            (Some(rule), Err(kube::Error::Api(status))) => {
                let field = case.field_before_injection(&gate);
                let want = format!("fleetgate: pod id-{i}: {field} {}", rule.says(&gate));
                assert!(
                    status.message.contains("inject.fleetgate.dev")
                        && status.message.contains(&want),
                    "{}: the webhook's refusal must say {want:?}: {}",
                    case.name,
                    status.message
                );
                if refused == 0 {
                    println!(
                        "the webhook's refusal as the API server returns it: {}",
                        status.message
                    );
                }
                refused += 1;
            }
            // Stored: injected by the webhook and admitted by the chart's policy after it.
            (None, Ok(pod)) => assert!(
                gate_image(&pod).is_some(),
                "{}: the stored pod must carry the gate",
                case.name
            ),
            (rule, answer) => panic!(
                "{}: the webhook must {}: {answer:?}",
                case.name,
                if rule.is_some() {
                    "refuse it"
                } else {
                    "inject it"
                }
            ),
        }
    }
    println!("the webhook refused {refused} pods of the identity table");
}
