//! The controller binary against the real API server, run as installed
//! ([`crate::replica::start_as_installed`]): never as admin, so a verb the Role lacks shows as
//! a refusal.
//! A FleetPolicy applied becomes its ConfigMap and status; edits re-render (latency measured);
//! an invalid edit keeps the last good ConfigMap with `Valid=False`; deleting the FleetPolicy
//! lets kube-controller-manager's garbage collector remove what it owned.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use crate::replica::start_as_installed;
use crate::support::{self, ensure_crds, eventually, kubectl};

fn condition<'a>(fp: &'a DynamicObject, kind: &str) -> Option<&'a Value> {
    fp.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "an index into a short list"
    )]
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s"
)]
async fn the_controller_as_its_service_account_reconciles_edits_and_lets_gc_clean_up() {
    let _ = ensure_crds();
    let client = support::client().await;
    let ns = support::namespace(&client, "reconcile").await;
    support::install_chart(&ns, &[]);
    let controller = start_as_installed(&ns, "controller-0");
    let fps = support::fleet_policies(&client, &ns);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let policy: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "fleetgate.dev/v1alpha1",
        "kind": "FleetPolicy",
        "metadata": { "name": "fleet", "namespace": ns },
        "spec": { "selector": { "matchLabels": { "app": "hermes" } } },
    }))
    .expect("a FleetPolicy");
    let apply = PatchParams::apply("fleetgate-e2e").force();
    fps.patch("fleet", &apply, &Patch::Apply(&policy))
        .await
        .expect("the FleetPolicy must be accepted");

    // Reconciled: the owned ConfigMap, and a status for this generation.
    let cm = eventually(Duration::from_secs(60), "the managed ConfigMap", || async {
        cms.get_opt("fleet-managed").await.ok().flatten()
    })
    .await;
    let owner = &cm
        .metadata
        .owner_references
        .as_ref()
        .expect("owner references")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("FleetPolicy", "fleet", Some(true)),
        "the ConfigMap must be owned by its FleetPolicy"
    );
    let fp = eventually(
        Duration::from_secs(60),
        "a status for generation 1",
        || async {
            let fp = fps.get("fleet").await.ok()?;
            let observed = fp.data["status"]["observedGeneration"].as_i64();
            (observed == fp.metadata.generation
                && condition(&fp, "Valid").is_some_and(|c| c["status"] == "True"))
            .then_some(fp)
        },
    )
    .await;
    // Ready once its reflectors have listed (the reconciler's readiness used to hang on a
    // store signal that wakes only one of its waiters).
    let said = eventually(Duration::from_secs(30), "/ready answers 200", || async {
        controller.ready().filter(|r| r.contains(" 200 "))
    })
    .await;
    println!("controller /ready: {said}");
    let ready = condition(&fp, "Ready").map(|c| c["status"].clone());
    println!("status after the first reconcile: {}", fp.data["status"]);

    // `kubectl get fp` prints the documented columns with the status' values.
    let table = kubectl(&["-n", &ns, "get", "fp", "fleet"], None);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().expect("a header").split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME", "READY", "PODS", "CURRENT", "COST/DAY", "FLAGGED", "BUDGET", "AGE"
        ],
        "{table}"
    );
    let row: Vec<&str> = lines.next().expect("a row").split_whitespace().collect();
    assert_eq!(row[0], "fleet", "{table}");
    assert_eq!(
        Some(json!(row[1])),
        ready,
        "READY must print the Ready condition's status: {table}"
    );
    assert_eq!(
        row[2],
        fp.data["status"]["pods"]["selected"].to_string(),
        "PODS must print status.pods.selected: {table}"
    );

    // 50 edits, each re-rendered into the ConfigMap; latency from the edit to the new data.
    let mut latencies = Vec::new();
    let mut last = cm.data.clone();
    for i in 0..50 {
        let mut edited = policy.clone();
        edited.data["spec"]["web"] = json!({ "charLimit": 2001 + i });
        let sent = tokio::time::Instant::now();
        fps.patch("fleet", &apply, &Patch::Apply(&edited))
            .await
            .expect("an edit must be accepted");
        let data = eventually(Duration::from_secs(30), "the re-render", || async {
            let now = cms.get("fleet-managed").await.ok()?.data;
            (now != last).then_some(now)
        })
        .await;
        latencies.push(sent.elapsed());
        last = data;
    }
    latencies.sort();
    println!(
        "re-render latency over 50 edits: p50 {:?}, p99 {:?}, max {:?}",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies[latencies.len() - 1]
    );

    // An edit only the controller can judge keeps the last good ConfigMap, Valid=False.
    let mut invalid = policy.clone();
    invalid.data["spec"]["egress"] = json!({ "allowCIDRs": ["169.254.0.0/16"] });
    let generation = fps
        .patch("fleet", &apply, &Patch::Apply(&invalid))
        .await
        .expect("the schema accepts it")
        .metadata
        .generation;
    let fp = eventually(Duration::from_secs(60), "Valid=False", || async {
        let fp = fps.get("fleet").await.ok()?;
        (fp.data["status"]["observedGeneration"].as_i64() == generation
            && condition(&fp, "Valid").is_some_and(|c| c["status"] == "False"))
        .then_some(fp)
    })
    .await;
    let valid = condition(&fp, "Valid").expect("Valid");
    assert!(
        valid["message"]
            .as_str()
            .is_some_and(|m| m.contains("allowCIDRs")),
        "Valid=False must name the field: {valid}"
    );
    assert_eq!(
        cms.get("fleet-managed").await.expect("the ConfigMap").data,
        last,
        "an invalid edit must keep the last good ConfigMap"
    );

    // Deleting the FleetPolicy: kube-controller-manager's garbage collector removes the child.
    fps.delete("fleet", &Default::default())
        .await
        .expect("the FleetPolicy must delete");
    eventually(Duration::from_secs(60), "garbage collection", || async {
        cms.get_opt("fleet-managed")
            .await
            .ok()
            .and_then(|c| c.is_none().then_some(()))
    })
    .await;

    let refused = controller.refusals();
    assert!(
        refused.is_empty(),
        "the API server must never refuse the controller as installed (RBAC): {refused:#?}"
    );
}
