//! The chart's Role against what the controller really asks of the API server: one replica
//! runs as installed through everything it does (take the Lease, render a FleetPolicy into
//! its ConfigMap, write status and events, re-render edits, refuse an invalid edit, read the
//! report token, list the fleet's pods), and the API server's own audit log lists every
//! request its ServiceAccount made. Every request was allowed, every verb it used is one the
//! Role grants, and every verb the Role grants was used: a missing permission and an excess
//! one both fail.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::replica::start_as_installed;
use crate::support::{
    self, Grant, audit_used, char_limit_policy, ensure_crds, eventually, granted, kubectl,
};

/// The FleetPolicy with `web.charLimit`; `invalid` adds what the schema accepts and the
/// controller's validation refuses (an allowed CIDR inside the metadata range).
fn policy(char_limit: u64, invalid: bool) -> String {
    let mut fp = char_limit_policy(char_limit);
    if invalid {
        fp["spec"]["egress"] = json!({ "allowCIDRs": ["169.254.0.0/16"] });
    }
    fp.to_string()
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s"
)]
async fn the_role_grants_exactly_the_verbs_the_controller_uses() {
    let _ = ensure_crds();
    let client = support::client().await;
    let ns = support::namespace(&client, "rbac").await;
    support::install_chart(&ns, &[]);
    let controller = start_as_installed(&ns, "controller-0");
    let apply = |text: String| {
        kubectl(
            &["-n", &ns, "apply", "--server-side", "-f", "-"],
            Some(&text),
        )
    };
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let rendered = |limit: u64| {
        let cms = cms.clone();
        async move {
            eventually(Duration::from_secs(60), "the render", || async {
                let cm = cms.get_opt("fleet-managed").await.ok()??;
                serde_json::to_string(&cm.data)
                    .ok()?
                    .contains(&limit.to_string())
                    .then_some(())
            })
            .await;
        }
    };

    // A pod of the fleet, stored (no kubelet runs it).
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "agent-0", "labels": { "app": "hermes" } },
        "spec": { "containers": [{ "name": "agent", "image": "example.com/hermes:1" }] },
    }))
    .expect("a pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("the pod is stored");

    apply(policy(3001, false));
    rendered(3001).await;
    apply(policy(3002, false));
    rendered(3002).await;
    // The same invalid edit twice: refused by the controller's validation (the schema allows
    // it), recorded as a warning Event and then as a repeat of it.
    for _ in 0..2 {
        apply(policy(3002, true));
        tokio::time::sleep(Duration::from_secs(3)).await;
        apply(policy(3002, false));
        tokio::time::sleep(Duration::from_secs(3)).await;
    }

    let user = format!("system:serviceaccount:{ns}:fleetgate-controller");
    let (used, refused) = audit_used(&user);
    let granted = granted(&["-n", &ns, "role", "fleetgate-controller"]);
    println!("the controller used, per the API server's audit log: {used:#?}");
    assert!(
        refused.is_empty(),
        "the API server refused the controller as installed: {refused:#?}\n{}",
        controller.log()
    );
    let missing: Vec<&Grant> = used.difference(&granted).collect();
    assert!(
        missing.is_empty(),
        "verbs used but not granted: {missing:?}"
    );
    let excess: Vec<&Grant> = granted.difference(&used).collect();
    assert!(
        excess.is_empty(),
        "verbs the Role grants that the controller never used (least privilege): {excess:?}\nused: {used:#?}"
    );
}
