//! Both charts installed, upgraded and uninstalled on a real API server with helm v4 and v3:
//! `charts/fleetgate` into two namespaces, `charts/fleetgate-baseline` once. What only a real
//! server shows: `lookup` reading the webhook TLS Secret back on upgrade (the caBundle stays),
//! the objects as stored, and nothing cluster-scoped left behind after `helm uninstall` —
//! above all no webhook configuration or admission policy that would keep refusing pods.

use std::path::Path;

use serde_json::Value;

use crate::support::{self, ensure_crds, kubectl, ok};

/// Cluster-scoped kinds a release may create.
const CLUSTER_KINDS: &str = "mutatingwebhookconfigurations,validatingwebhookconfigurations,validatingadmissionpolicies,validatingadmissionpolicybindings,clusterroles,clusterrolebindings,clusterfleetpolicies";

/// Cluster-scoped objects that belong to namespace `ns`'s release or to helm release
/// `release` (by name or label).
fn cluster_leftovers(namespaces: &[&str], releases: &[&str]) -> Vec<String> {
    let got: Value = serde_json::from_str(&kubectl(&["get", CLUSTER_KINDS, "-o", "json"], None))
        .expect("kubectl prints JSON");
    got["items"]
        .as_array()
        .expect("a list")
        .iter()
        .filter(|o| {
            let name = o["metadata"]["name"].as_str().unwrap_or_default();
            let labels = &o["metadata"]["labels"];
            namespaces.iter().any(|ns| {
                name.ends_with(&format!("-{ns}")) || labels["fleetgate.dev/namespace"] == *ns
            }) || releases
                .iter()
                .any(|r| labels["app.kubernetes.io/instance"] == *r)
        })
        .map(|o| format!("{}/{}", o["kind"], o["metadata"]["name"]))
        .collect()
}

/// The webhook configuration of namespace `ns`'s release.
fn webhook(ns: &str) -> Value {
    serde_json::from_str(&kubectl(
        &[
            "get",
            "mutatingwebhookconfiguration",
            &format!("fleetgate-{ns}"),
            "-o",
            "json",
        ],
        None,
    ))
    .expect("kubectl prints JSON")
}

fn chart(name: &str) -> String {
    fleetgate_e2e::k8s::workspace()
        .join("charts")
        .join(name)
        .display()
        .to_string()
}

fn helm(helm: &Path, args: &[&str]) -> String {
    ok(helm, args, None)
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s"
)]
async fn both_charts_install_upgrade_and_uninstall_with_helm_v4_and_v3_leaving_nothing_behind() {
    let _ = ensure_crds();
    let client = support::client().await;
    let a = support::namespace(&client, "helm-v4").await;
    let b = support::namespace(&client, "helm-v3").await;
    let baseline_release = "fleetgate-baseline-under-test";
    let fleetgate = chart("fleetgate");
    for (bin, ns) in [(support::helm_bin(), &a), (support::helm3_bin(), &b)] {
        helm(
            &bin,
            &["install", "fleetgate", &fleetgate, "--namespace", ns],
        );
        // What the release stored: the cluster-scoped objects pinned to its namespace.
        let hook = webhook(ns);
        assert_eq!(
            hook["webhooks"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
            ns.as_str(),
            "{}: the webhook must be scoped to its namespace",
            bin.display()
        );
        assert_eq!(hook["webhooks"][0]["failurePolicy"], "Fail");
        kubectl(
            &[
                "get",
                "validatingadmissionpolicy",
                &format!("fleetgate-injected-{ns}"),
            ],
            None,
        );
        kubectl(
            &[
                "-n",
                ns,
                "get",
                "deployment/fleetgate-controller",
                "role/fleetgate-controller",
                "rolebinding/fleetgate-controller",
                "serviceaccount/fleetgate-controller",
                "secret/fleetgate-webhook-tls",
                "secret/fleetgate-report-token",
                "configmap/fleetgate-injector",
            ],
            None,
        );
    }
    // The cluster part, once.
    helm(
        &support::helm_bin(),
        &[
            "install",
            baseline_release,
            &chart("fleetgate-baseline"),
            "--namespace",
            &a,
        ],
    );
    kubectl(
        &[
            "get",
            "clusterrole/fleetgate-baseline-reader",
            "cfp/platform",
        ],
        None,
    );

    // Upgrades with changed values: the generated TLS is read back (lookup), not regenerated.
    for (bin, ns) in [(support::helm_bin(), &a), (support::helm3_bin(), &b)] {
        let before = webhook(ns)["webhooks"][0]["clientConfig"]["caBundle"].clone();
        let token_before = kubectl(
            &[
                "-n",
                ns,
                "get",
                "secret/fleetgate-report-token",
                "-o",
                "jsonpath={.data.token}",
            ],
            None,
        );
        helm(
            &bin,
            &[
                "upgrade",
                "fleetgate",
                &fleetgate,
                "--namespace",
                ns,
                "--set",
                "webhook.failurePolicy=Ignore",
                "--set",
                "controller.replicas=3",
                "--set",
                "clusterBaseline.enabled=true",
            ],
        );
        let hook = webhook(ns);
        assert_eq!(hook["webhooks"][0]["failurePolicy"], "Ignore");
        assert_eq!(
            hook["webhooks"][0]["clientConfig"]["caBundle"],
            before,
            "{}: an upgrade must keep the webhook's CA (helm's lookup reads the Secret back)",
            bin.display()
        );
        assert!(
            before.as_str().is_some_and(|s| s.len() > 100),
            "the caBundle must be a certificate: {before}"
        );
        assert_eq!(
            kubectl(
                &[
                    "-n",
                    ns,
                    "get",
                    "secret/fleetgate-report-token",
                    "-o",
                    "jsonpath={.data.token}"
                ],
                None
            ),
            token_before,
            "an upgrade must keep the report token"
        );
        assert_eq!(
            kubectl(
                &[
                    "-n",
                    ns,
                    "get",
                    "deployment/fleetgate-controller",
                    "-o",
                    "jsonpath={.spec.replicas}"
                ],
                None
            ),
            "3"
        );
        kubectl(
            &[
                "get",
                &format!("clusterrolebinding/fleetgate-baseline-reader-{ns}"),
            ],
            None,
        );
    }

    for (bin, ns) in [(support::helm_bin(), &a), (support::helm3_bin(), &b)] {
        helm(&bin, &["uninstall", "fleetgate", "--namespace", ns]);
    }
    helm(
        &support::helm_bin(),
        &["uninstall", baseline_release, "--namespace", &a],
    );
    let left = cluster_leftovers(&[&a, &b], &[baseline_release]);
    assert!(
        left.is_empty(),
        "helm uninstall must leave no cluster-scoped object behind: {left:?}"
    );
    // And the namespaces hold nothing of the releases either.
    for ns in [&a, &b] {
        let rest = kubectl(
            &[
                "-n",
                ns,
                "get",
                "deployments,roles,rolebindings,secrets,configmaps,services,serviceaccounts",
                "-l",
                "app.kubernetes.io/instance=fleetgate",
                "-o",
                "name",
            ],
            None,
        );
        assert!(
            rest.trim().is_empty(),
            "{ns} must hold nothing of the release: {rest}"
        );
    }
}
