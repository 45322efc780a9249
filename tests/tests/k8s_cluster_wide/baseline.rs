//! The cluster baseline on a real API server: `charts/fleetgate-baseline` installs a
//! ClusterFleetPolicy whose floor is transparent capture, and a namespace release with
//! `clusterBaseline.enabled` runs its controller with `--cluster-baseline` (bound to the
//! reader ClusterRole, never admin). A FleetPolicy asking for the forward proxy is rendered
//! raised to transparent, its `Baseline` condition naming the change. A second
//! ClusterFleetPolicy that leaves it no port is a conflict: `Baseline=False`, and the last good
//! ConfigMap stays, byte for byte and resourceVersion for resourceVersion. Removing it heals
//! the namespace.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::{Value, json};

use crate::replica::start_as_installed;
use crate::support::{self, Grant, ensure_crds, eventually, helm_bin, kubectl};

fn fleet_policy(ns: &str) -> Value {
    serde_json::from_str(&kubectl(
        &["-n", ns, "get", "fp", "fleet", "-o", "json"],
        None,
    ))
    .expect("kubectl prints JSON")
}

/// Condition `kind` of the FleetPolicy's status, once it is for the current generation.
fn condition(fp: &Value, kind: &str) -> Option<Value> {
    if fp["status"]["observedGeneration"] != fp["metadata"]["generation"] {
        return None;
    }
    fp["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .cloned()
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s_cluster_wide"
)]
async fn a_cluster_baseline_raises_a_namespace_and_a_conflict_keeps_its_last_good_config_map() {
    let _serial = crate::serial().await;
    let _ = ensure_crds();
    let client = support::client().await;
    let ns = support::namespace(&client, "baselined").await;
    let workspace = fleetgate_e2e::k8s::workspace();
    let chart = |name: &str| workspace.join("charts").join(name).display().to_string();
    support::ok(
        &helm_bin(),
        &[
            "install",
            "fleetgate-baseline",
            &chart("fleetgate-baseline"),
            "--namespace",
            &ns,
            "--set",
            "baseline.spec.egress.minimumMode=transparent",
        ],
        None,
    );
    support::install_chart(&ns, &["--set", "clusterBaseline.enabled=true"]);
    let controller = start_as_installed(&ns, "controller-0");
    support::apply(
        &ns,
        &json!({
            "apiVersion": "fleetgate.dev/v1alpha1",
            "kind": "FleetPolicy",
            "metadata": { "name": "fleet" },
            "spec": {
                "selector": { "matchLabels": { "app": "hermes" } },
                "egress": { "mode": "proxy", "ports": [80, 443] },
            },
        }),
    );

    // Raised: rendered in transparent mode, the Baseline condition naming the change.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let raised = eventually(Duration::from_secs(60), "the raised render", || async {
        let baseline = condition(&fleet_policy(&ns), "Baseline")?;
        (baseline["status"] == "True").then_some(baseline)
    })
    .await;
    let message = raised["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("platform") && message.contains("transparent"),
        "the Baseline condition must name the baseline and the raised mode: {raised}"
    );
    let good = cms
        .get("fleet-managed")
        .await
        .expect("the rendered ConfigMap");
    let text = serde_json::to_string(&good.data).expect("data as JSON");
    assert!(
        text.contains("transparent"),
        "the rendered policy must run transparent capture: {text}"
    );
    println!("raised: {message}");

    // A conflict: a second baseline leaves the FleetPolicy no port.
    let conflicting = json!({
        "apiVersion": "fleetgate.dev/v1alpha1",
        "kind": "ClusterFleetPolicy",
        "metadata": { "name": format!("ssh-only-{ns}") },
        "spec": { "egress": { "ports": [22] } },
    })
    .to_string();
    kubectl(&["apply", "--server-side", "-f", "-"], Some(&conflicting));
    let conflict = eventually(Duration::from_secs(60), "Baseline=False", || async {
        let baseline = condition(&fleet_policy(&ns), "Baseline")?;
        (baseline["status"] == "False").then_some(baseline)
    })
    .await;
    assert_eq!(
        conflict["reason"], "Conflict",
        "a baseline leaving no port is a conflict: {conflict}"
    );
    assert!(
        conflict["message"]
            .as_str()
            .is_some_and(|m| m.contains("spec.egress.ports")),
        "the conflict names the field: {conflict}"
    );
    let ready = condition(&fleet_policy(&ns), "Ready").expect("a Ready condition");
    assert_eq!(
        (&ready["status"], &ready["reason"]),
        (&json!("False"), &json!("KeptLastGood")),
        "a conflict keeps the last good ConfigMap: {ready}"
    );
    // Give a wrong write time to happen, then compare.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let kept = cms.get("fleet-managed").await.expect("the ConfigMap stays");
    assert_eq!(
        (kept.data, kept.metadata.resource_version),
        (good.data.clone(), good.metadata.resource_version.clone()),
        "the last good ConfigMap must stay untouched"
    );
    println!("conflict: {}", conflict["message"]);

    // The conflicting baseline removed: the namespace renders again.
    kubectl(
        &["delete", "clusterfleetpolicy", &format!("ssh-only-{ns}")],
        None,
    );
    eventually(Duration::from_secs(60), "Baseline=True again", || async {
        let baseline = condition(&fleet_policy(&ns), "Baseline")?;
        (baseline["status"] == "True").then_some(())
    })
    .await;
    // The reader ClusterRole grants exactly what the controller used of clusterfleetpolicies.
    let user = format!("system:serviceaccount:{ns}:fleetgate-controller");
    let (used, refused) = support::audit_used(&user);
    assert!(refused.is_empty(), "the API server refused: {refused:#?}");
    let cluster: BTreeSet<Grant> = used
        .into_iter()
        .filter(|(_, resource, _)| resource.starts_with("clusterfleetpolicies"))
        .collect();
    let reader = support::granted(&["clusterrole", "fleetgate-baseline-reader"]);
    assert_eq!(
        cluster, reader,
        "the reader ClusterRole must grant exactly the verbs the controller used on baselines"
    );
    println!("baselines read with: {cluster:?}");
    support::ok(
        &helm_bin(),
        &["uninstall", "fleetgate-baseline", "--namespace", &ns],
        None,
    );
    let refused = controller.refusals();
    assert!(
        refused.is_empty(),
        "the controller as installed must never be refused: {refused:#?}"
    );
}
