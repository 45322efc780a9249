//! Assertions on rendered chart objects: pod security, cluster-scoped names, RBAC rules, the
//! injector config, the controller's mounts and the webhook TLS material.

use std::collections::BTreeSet;

use serde_json::Value;

/// The fixed inputs of `deploy/install.yaml`: no random material (cert-manager issues the
/// webhook certificate; the report token Secret is the user's).
pub const INSTALL_ARGS: &[&str] = &[
    "--set",
    "webhook.certManager.enabled=true",
    "--set",
    "reportToken.create=false",
];

/// The header of `deploy/install.yaml`.
pub const INSTALL_HEADER: &str = "\
# Generated from charts/fleetgate by tests/tests/chart.rs; do not edit. Regenerate with:
#   FLEETGATE_BLESS=1 cargo test -p fleetgate-e2e --test chart
# Inputs: helm template fleetgate charts/fleetgate --namespace fleetgate --include-crds
#   --set webhook.certManager.enabled=true --set reportToken.create=false
# Needs cert-manager, and Secret fleetgate-report-token (key `token`) created by you first.
";

/// base64 of `-----BEGIN CERTIFICATE-----` (27 bytes, so the prefix is exact).
const PEM_CERT_B64: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t";

/// Kinds the API server keeps outside namespaces (those a chart may plausibly render).
pub fn is_cluster_scoped(kind: &str) -> bool {
    matches!(
        kind,
        "MutatingWebhookConfiguration"
            | "ValidatingWebhookConfiguration"
            | "ValidatingAdmissionPolicy"
            | "ValidatingAdmissionPolicyBinding"
            | "ClusterRole"
            | "ClusterRoleBinding"
            | "CustomResourceDefinition"
            | "ClusterIssuer"
            | "PriorityClass"
            | "Namespace"
    )
}

/// `Kind/name` of every cluster-scoped object.
pub fn cluster_scoped_names(docs: &[Value]) -> BTreeSet<String> {
    docs.iter()
        .filter(|d| is_cluster_scoped(d["kind"].as_str().unwrap_or_default()))
        .map(|d| {
            format!(
                "{}/{}",
                d["kind"].as_str().unwrap_or_default(),
                d["metadata"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// Pod specs of every workload, with `Kind/name`.
pub fn pod_specs(docs: &[Value]) -> Vec<(String, &Value)> {
    docs.iter()
        .filter_map(|d| {
            let kind = d["kind"].as_str()?;
            let spec = match kind {
                "Deployment" | "DaemonSet" | "StatefulSet" | "Job" => {
                    d.pointer("/spec/template/spec")?
                }
                "Pod" => d.get("spec")?,
                _ => return None,
            };
            Some((
                format!(
                    "{kind}/{}",
                    d["metadata"]["name"].as_str().unwrap_or_default()
                ),
                spec,
            ))
        })
        .collect()
}

/// The pod and every container meet the restricted Pod Security profile.
pub fn assert_restricted(label: &str, pod: &Value) {
    let psc = &pod["securityContext"];
    assert_eq!(psc["runAsNonRoot"], true, "{label}: pod runAsNonRoot");
    assert_eq!(
        psc["seccompProfile"]["type"], "RuntimeDefault",
        "{label}: pod seccomp"
    );
    assert!(
        pod.get("hostNetwork").is_none_or(|v| v == false),
        "{label}: no hostNetwork"
    );
    let containers = ["initContainers", "containers"]
        .iter()
        .filter_map(|k| pod[*k].as_array())
        .flatten();
    for c in containers {
        let name = c["name"].as_str().unwrap_or_default();
        let sc = &c["securityContext"];
        assert_eq!(
            sc["allowPrivilegeEscalation"], false,
            "{label} {name}: allowPrivilegeEscalation"
        );
        assert_eq!(
            sc["readOnlyRootFilesystem"], true,
            "{label} {name}: readOnlyRootFilesystem"
        );
        assert_eq!(
            sc["capabilities"]["drop"],
            serde_json::json!(["ALL"]),
            "{label} {name}: drop ALL"
        );
        assert!(
            sc["capabilities"].get("add").is_none(),
            "{label} {name}: no added capabilities"
        );
        assert!(
            sc.get("privileged").is_none_or(|v| v == false),
            "{label} {name}: not privileged"
        );
        assert!(
            sc.get("runAsUser").is_none_or(|v| v != 0),
            "{label} {name}: not root"
        );
    }
}

/// Every (group, resource, verb, resourceNames) a Role grants, one string each.
pub fn rule_set(role: &Value) -> BTreeSet<String> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_array().expect("the Role must list rules") {
        let names = strings(&rule["resourceNames"]).join(",");
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    out.insert(format!("{group}|{resource}|{verb}|{names}"));
                }
            }
        }
    }
    out
}

/// What the controller needs: its own resources, its ConfigMaps, pods, events, one Secret,
/// and its election Lease (every verb but `create` on that one name: RBAC cannot name the
/// object of a create). The real-server twin, `tests/tests/k8s/rbac.rs`, checks this list
/// against the API server's audit log of a running controller.
pub fn expected_rules(token_secret: &str, lease: &str) -> BTreeSet<String> {
    let table: &[(&str, &str, &[&str], &str)] = &[
        ("fleetgate.dev", "fleetpolicies", &["list", "watch"], ""),
        ("fleetgate.dev", "fleetpolicies/status", &["patch"], ""),
        (
            "",
            "configmaps",
            &["get", "list", "watch", "create", "patch"],
            "",
        ),
        ("", "pods", &["list", "watch"], ""),
        ("events.k8s.io", "events", &["create", "patch"], ""),
        ("", "secrets", &["get"], token_secret),
        ("coordination.k8s.io", "leases", &["get", "patch"], lease),
        ("coordination.k8s.io", "leases", &["create"], ""),
    ];
    table
        .iter()
        .flat_map(|(g, r, verbs, names)| verbs.iter().map(move |v| format!("{g}|{r}|{v}|{names}")))
        .collect()
}

/// The parsed `injector.yaml` of the injector ConfigMap.
pub fn injector_config(docs: &[Value], name: &str) -> Value {
    let cm = super::tools::find(docs, "ConfigMap", Some(name));
    let text = cm["data"]["injector.yaml"]
        .as_str()
        .expect("the ConfigMap must carry injector.yaml");
    serde_yaml::from_str(text).expect("injector.yaml must be YAML")
}

/// The Secret name behind the pod volume `volume` of a Deployment.
pub fn volume_secret(deployment: &Value, volume: &str) -> Value {
    deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == volume))
        .map(|v| v["secret"]["secretName"].clone())
        .unwrap_or_else(|| panic!("the Deployment must mount a Secret volume {volume}"))
}

/// The controller mounts the TLS Secret at /tls and the injector ConfigMap where its flag points.
pub fn assert_mounts(deployment: &Value) {
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let mounts = container["volumeMounts"]
        .as_array()
        .expect("the controller must mount volumes");
    let at = |path: &str| -> String {
        mounts
            .iter()
            .find(|m| m["mountPath"] == path)
            .and_then(|m| m["name"].as_str().map(String::from))
            .unwrap_or_else(|| panic!("the controller must mount something at {path}"))
    };
    assert_eq!(at("/tls"), "webhook-tls", "the TLS Secret must be at /tls");
    assert_eq!(
        at("/etc/fleetgate-controller"),
        "injector",
        "the injector config must be mounted"
    );
    assert!(
        mounts
            .iter()
            .all(|m| m["mountPath"] == "/tmp" || m["readOnly"] == true),
        "every mount but /tmp must be read-only"
    );
}

/// In helm-TLS mode the webhook's caBundle is the CA of the Secret the controller mounts.
pub fn assert_helm_tls_matches(docs: &[Value], hook: &Value) {
    let bundle = hook["clientConfig"]["caBundle"]
        .as_str()
        .expect("helm mode must set caBundle");
    assert!(
        bundle.starts_with(PEM_CERT_B64),
        "caBundle must be a base64 PEM certificate"
    );
    let deployment = super::tools::find(docs, "Deployment", None);
    let name = volume_secret(deployment, "webhook-tls");
    let secret = super::tools::find(docs, "Secret", name.as_str());
    assert_eq!(secret["type"], "kubernetes.io/tls", "the TLS Secret type");
    assert_eq!(
        secret["data"]["ca.crt"], bundle,
        "caBundle must be the Secret's ca.crt"
    );
    for key in ["tls.crt", "tls.key"] {
        assert!(
            secret["data"][key].as_str().is_some_and(|v| !v.is_empty()),
            "the TLS Secret must carry {key}"
        );
    }
}
