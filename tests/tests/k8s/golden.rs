//! The webhook's golden files (`controller/tests/golden/webhook/`) against what the API server
//! stores. The chart is installed with the values its golden injector config was rendered
//! from, the fixture FleetPolicies are applied, and each golden input pod is created through
//! the real admission chain with the controller's webhook serving: the stored pod carries,
//! field by field, exactly the input pod with the golden patch applied. What the API server
//! adds on its own is allowed only where it is its documented defaulting (a closed list) or
//! the ServiceAccount admission plugin's token volume.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::replica::{free_addr, start_as_installed_on};
use crate::support::{self, documents, ensure_crds, eventually, kubectl};

/// The golden cases that are patched (the unchanged ones need no server to show it).
const CASES: &[&str] = &["default", "transparent", "existing"];

/// Fields the API server fills in when a pod leaves them out (its defaulting functions),
/// by name: a stored object may carry these beyond the golden pod, nothing else.
const SERVER_DEFAULTS: &[&str] = &[
    "terminationMessagePath",
    "terminationMessagePolicy",
    "imagePullPolicy",
    "resources",
    "defaultMode",
    "protocol",
    "scheme",
    "timeoutSeconds",
    "periodSeconds",
    "successThreshold",
    "failureThreshold",
    "apiVersion",
    "restartPolicy",
    "dnsPolicy",
    "schedulerName",
    "securityContext",
    "terminationGracePeriodSeconds",
    "enableServiceLinks",
    "preemptionPolicy",
    "priority",
    "tolerations",
    "serviceAccountName",
    "serviceAccount",
];

fn golden(name: &str) -> String {
    support::read(&format!("controller/tests/golden/webhook/{name}"))
}

/// The golden input pod moved into namespace `ns`, and the pod the golden patch makes of it.
fn expected(case: &str, ns: &str) -> (Value, Value) {
    let mut input: Value =
        serde_yaml::from_str(&golden(&format!("{case}.pod.yaml"))).expect("a golden pod");
    input["metadata"]["namespace"] = json!(ns);
    let ops: json_patch::Patch =
        serde_json::from_str(&golden(&format!("{case}.patch.json"))).expect("a golden patch");
    let mut out = input.clone();
    json_patch::patch(&mut out, &ops).expect("the golden patch applies to its pod");
    (input, out)
}

/// Drop the ServiceAccount admission plugin's token volume and its mounts: it adds them to
/// every pod, injected or not.
fn without_token_volume(pod: &mut Value) {
    let is_token = |name: &Value| {
        name.as_str()
            .is_some_and(|n| n.starts_with("kube-api-access-"))
    };
    if let Some(volumes) = pod["spec"]["volumes"].as_array_mut() {
        volumes.retain(|v| !is_token(&v["name"]));
    }
    for list in ["containers", "initContainers"] {
        // `get_mut`, not indexing: indexing would add the key to a pod that has none.
        let containers = pod["spec"].get_mut(list).and_then(Value::as_array_mut);
        for c in containers.into_iter().flatten() {
            if let Some(mounts) = c["volumeMounts"].as_array_mut() {
                mounts.retain(|m| !is_token(&m["name"]));
                if mounts.is_empty() {
                    c.as_object_mut().map(|o| o.remove("volumeMounts"));
                }
            }
        }
    }
}

/// Compare `want` with `got` field by field: every field of `want` must be in `got` with
/// the same value (arrays element by element, same length); a field only `got` has is
/// listed in `extra`, a difference in `diffs`.
fn compare(
    path: &str,
    want: &Value,
    got: &Value,
    diffs: &mut Vec<String>,
    extra: &mut Vec<String>,
) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                match g.get(k) {
                    Some(gv) => compare(&format!("{path}.{k}"), wv, gv, diffs, extra),
                    None => diffs.push(format!("{path}.{k}: missing, want {wv}")),
                }
            }
            for k in g.keys().filter(|k| !w.contains_key(*k)) {
                extra.push(format!("{path}.{k}"));
            }
        }
        (Value::Array(w), Value::Array(g)) if w.len() == g.len() => {
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                compare(&format!("{path}[{i}]"), wv, gv, diffs, extra);
            }
        }
        _ if want == got => {}
        _ => diffs.push(format!("{path}: want {want}, stored {got}")),
    }
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s"
)]
async fn pods_are_stored_exactly_as_the_webhook_golden_files_say() {
    let _ = ensure_crds();
    let client = support::client().await;
    let ns = support::namespace(&client, "golden").await;
    let addr = free_addr();
    let values = json!({
        "webhook": { "url": format!("https://{addr}/mutate-pods") },
        "injector": {
            "ignoreOutboundPorts": [22, "8000-8100"],
            "ignoreOutboundCIDRs": ["10.96.0.0/12"],
        },
    });
    let values_file = support::plane().dir().join(format!("{ns}-values.json"));
    std::fs::write(&values_file, values.to_string()).expect("the values file");
    support::install_chart(&ns, &["-f", &values_file.display().to_string()]);

    // The injector config the chart rendered is the one the golden files were made with.
    let rendered = kubectl(
        &[
            "-n",
            &ns,
            "get",
            "configmap",
            "fleetgate-injector",
            "-o",
            "jsonpath={.data.injector\\.yaml}",
        ],
        None,
    );
    let rendered: Value = serde_yaml::from_str(&rendered).expect("the rendered injector config");
    let want: Value = serde_yaml::from_str(&golden("injector.yaml")).expect("the golden config");
    assert_eq!(
        rendered, want,
        "the chart must render the golden injector config from these values"
    );

    // The fixture FleetPolicies of namespace `agents`, in this namespace.
    let policies: Vec<Value> = documents(&golden("fleetpolicies.yaml"))
        .into_iter()
        .filter(|fp| fp["metadata"]["namespace"] == "agents")
        .map(|mut fp| {
            fp["metadata"]["namespace"] = json!(ns);
            fp
        })
        .collect();
    kubectl(
        &["apply", "--server-side", "-f", "-"],
        Some(&support::stream(&policies)),
    );

    let _controller = start_as_installed_on(&ns, "controller-0", &addr);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    // Serving, and its cache holding both FleetPolicies (the transparent one selects
    // `app: hermes-captured`).
    let (probe, _) = expected("transparent", &ns);
    let probe: Pod = serde_json::from_value(probe).expect("a pod");
    eventually(Duration::from_secs(60), "the webhook serving", || async {
        let pod = pods.create(&dry, &probe).await.ok()?;
        let mode = pod
            .metadata
            .annotations?
            .get("fleetgate.dev/egress-mode")?
            .clone();
        (mode == "transparent").then_some(())
    })
    .await;

    for case in CASES {
        let (input, want) = expected(case, &ns);
        let pod: Pod = serde_json::from_value(input).expect("a golden pod");
        let stored = pods
            .create(&PostParams::default(), &pod)
            .await
            .unwrap_or_else(|e| panic!("{case}: the pod must be stored: {e}"));
        let mut got = serde_json::to_value(&stored).expect("the stored pod as JSON");
        without_token_volume(&mut got);
        let mut diffs = Vec::new();
        let mut extra = Vec::new();
        compare("spec", &want["spec"], &got["spec"], &mut diffs, &mut extra);
        compare(
            "metadata.annotations",
            &want["metadata"]["annotations"],
            &got["metadata"]["annotations"],
            &mut diffs,
            &mut Vec::new(),
        );
        compare(
            "metadata.labels",
            &want["metadata"]["labels"],
            &got["metadata"]["labels"],
            &mut diffs,
            &mut Vec::new(),
        );
        let unexplained: Vec<&String> = extra
            .iter()
            .filter(|path| {
                let name = path.rsplit('.').next().unwrap_or_default();
                !SERVER_DEFAULTS.contains(&name)
            })
            .collect();
        assert!(
            diffs.is_empty() && unexplained.is_empty(),
            "{case}: the stored pod must be the golden one field by field\ndifferences: {diffs:#?}\nfields the golden pod lacks: {unexplained:#?}\nstored spec: {:#}",
            got["spec"]
        );
        println!(
            "{case}: stored as golden; the API server added only its defaults ({} fields)",
            extra.len()
        );
    }
}
