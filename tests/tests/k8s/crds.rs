//! The CRDs on a real API server: both accepted (structural schema, CEL cost budget) and
//! established; every example manifest and every chart-rendered object through a server-side
//! apply; a table of invalid FleetPolicies and ClusterFleetPolicies generated from the schema,
//! each refused with a message naming the field.

use futures_util::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::support::{self, documents, ensure_crds, kubectl, read, run, stream, text};
use crate::violations::{Violation, violations};

/// The example files of `deploy/examples/` and what the API server must do with each
/// (`# schema:` header line: `accepted…` or the refusal).
fn examples() -> Vec<(String, String)> {
    let dir = fleetgate_e2e::k8s::workspace().join("deploy/examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("deploy/examples must list")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            (
                p.file_name()
                    .expect("a name")
                    .to_string_lossy()
                    .into_owned(),
                std::fs::read_to_string(&p).expect("the example must read"),
            )
        })
        .collect()
}

/// `docs` moved into namespace `ns` (cluster-scoped kinds untouched).
fn into_namespace(docs: &[Value], ns: &str) -> Vec<Value> {
    docs.iter()
        .map(|d| {
            let mut d = d.clone();
            if d["metadata"].get("namespace").is_some() {
                d["metadata"]["namespace"] = json!(ns);
            }
            d
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s"
)]
async fn both_crds_are_accepted_established_and_answer_to_their_short_names() {
    let _ = ensure_crds();
    for crd in [
        "fleetpolicies.fleetgate.dev",
        "clusterfleetpolicies.fleetgate.dev",
    ] {
        let got: Value = serde_json::from_str(&kubectl(&["get", "crd", crd, "-o", "json"], None))
            .expect("kubectl prints JSON");
        let conditions = got["status"]["conditions"]
            .as_array()
            .expect("a CRD status has conditions");
        for wanted in ["NamesAccepted", "Established"] {
            assert!(
                conditions
                    .iter()
                    .any(|c| c["type"] == wanted && c["status"] == "True"),
                "{crd} must be {wanted}: {conditions:?}"
            );
        }
        // A non-structural schema or a CEL rule over budget shows as a condition too.
        assert!(
            !conditions
                .iter()
                .any(|c| c["type"] == "NonStructuralSchema" && c["status"] == "True"),
            "{crd} must be structural: {conditions:?}"
        );
    }
    // The API server reads YAML 1.1: the egress modes must arrive as the three strings (a plain
    // `off` in the file once arrived as `false`, and every `mode: off` was refused).
    let got: Value = serde_json::from_str(&kubectl(
        &["get", "crd", "fleetpolicies.fleetgate.dev", "-o", "json"],
        None,
    ))
    .expect("kubectl prints JSON");
    assert_eq!(
        got.pointer(
            "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/egress/properties/mode/enum"
        ),
        Some(&serde_json::json!(["proxy", "transparent", "off"])),
        "the API server must hold the egress modes as strings"
    );
    // The short names the docs use (README.md, docs/kubernetes.md) resolve through discovery.
    let fp = kubectl(
        &["api-resources", "--api-group=fleetgate.dev", "-o", "wide"],
        None,
    );
    for (short, kind) in [("fp", "FleetPolicy"), ("cfp", "ClusterFleetPolicy")] {
        assert!(
            fp.lines()
                .any(|l| l.split_whitespace().any(|w| w == short) && l.contains(kind)),
            "discovery must list {kind} with short name {short}: {fp}"
        );
    }
    // The chart ships the same CRDs as deploy/ (helm installs the chart's copy).
    for (chart, deploy) in [
        (
            "charts/fleetgate/crds/fleetpolicy.yaml",
            "deploy/crd/fleetpolicy.yaml",
        ),
        (
            "charts/fleetgate/crds/clusterfleetpolicy.yaml",
            "deploy/crd/clusterfleetpolicy.yaml",
        ),
        (
            "charts/fleetgate-baseline/crds/clusterfleetpolicy.yaml",
            "deploy/crd/clusterfleetpolicy.yaml",
        ),
    ] {
        assert_eq!(
            documents(&read(chart)),
            documents(&read(deploy)),
            "{chart} must equal {deploy}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s"
)]
async fn every_example_manifest_meets_the_api_server_as_its_header_says() {
    let _ = ensure_crds();
    let client = support::client().await;
    let ns = support::namespace(&client, "examples").await;
    let mut checked = 0;
    for (name, yaml) in examples() {
        let schema_line = yaml
            .lines()
            .find_map(|l| l.strip_prefix("# schema:"))
            .map(str::trim);
        let docs = into_namespace(&documents(&yaml), &ns);
        let out = run(
            &support::kubectl_bin(),
            &["apply", "--server-side", "--dry-run=server", "-f", "-"],
            Some(&stream(&docs)),
        );
        let said = text(&out);
        match schema_line {
            Some(line) if !line.starts_with("accepted") => {
                assert!(
                    !out.status.success(),
                    "{name}: the API server must refuse it ({line}): {said}"
                );
                // The header's refusal names the field; the API server must name it too.
                let field = line
                    .split(':')
                    .next()
                    .expect("a field")
                    .trim()
                    .trim_start_matches('/')
                    .replace('/', ".");
                assert!(
                    said.contains(&field),
                    "{name}: the refusal must name {field}: {said}"
                );
                // A JSON-schema pointer (`/spec/...`) is the offline validator's wording; a
                // field path (`spec....`) heads a CEL rule's own message, which must come
                // back verbatim.
                if let Some(message) = line
                    .split_once(": ")
                    .map(|(_, m)| m)
                    .filter(|_| !line.starts_with('/'))
                {
                    assert!(
                        said.contains(message),
                        "{name}: the refusal must say {message:?}: {said}"
                    );
                }
            }
            _ => assert!(
                out.status.success(),
                "{name}: the API server must accept it: {said}"
            ),
        }
        checked += 1;
    }
    assert!(
        checked >= 10,
        "every example must be checked, {checked} were"
    );
    println!("{checked} example manifests checked against the API server");
}

/// The values cases of the chart tests whose objects the API server serves without extra
/// CRDs, and the kinds of other operators' CRDs a case renders (checked by kind only).
const FOREIGN_GROUPS: [&str; 2] = ["cert-manager.io/", "monitoring.coreos.com/"];

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s"
)]
async fn every_chart_rendered_object_passes_a_server_side_dry_run_apply() {
    let _ = ensure_crds();
    let client = support::client().await;
    let helm = support::helm_bin();
    let values_dir = fleetgate_e2e::k8s::workspace().join("tests/tests/chart/values");
    let mut applied = 0;
    let mut foreign = std::collections::BTreeSet::new();
    for case in [
        "defaults.yaml",
        "transparent.yaml",
        "cert-manager.yaml",
        "everything.yaml",
    ] {
        let ns = support::namespace(&client, "render").await;
        let values = values_dir.join(case).display().to_string();
        let chart = fleetgate_e2e::k8s::workspace()
            .join("charts/fleetgate")
            .display()
            .to_string();
        let rendered = support::ok(
            &helm,
            &[
                "template",
                "fleetgate",
                &chart,
                "--namespace",
                &ns,
                "-f",
                &values,
            ],
            None,
        );
        let (ours, theirs): (Vec<Value>, Vec<Value>) =
            documents(&rendered).into_iter().partition(|d| {
                let api = d["apiVersion"].as_str().unwrap_or_default();
                !FOREIGN_GROUPS.iter().any(|g| api.starts_with(g))
            });
        for d in &theirs {
            foreign.insert(format!("{}/{}", d["apiVersion"], d["kind"]));
        }
        let out = run(
            &support::kubectl_bin(),
            &[
                "apply",
                "--server-side",
                "--dry-run=server",
                "--namespace",
                &ns,
                "-f",
                "-",
            ],
            Some(&stream(&ours)),
        );
        assert!(
            out.status.success(),
            "{case}: every rendered object must pass a server-side apply: {}",
            text(&out)
        );
        applied += ours.len();
    }
    println!(
        "{applied} chart objects server-side applied; not served here (other operators' CRDs): {foreign:?}"
    );
    assert!(applied > 40, "the renders must hold objects, {applied} did");
}

/// A smallest valid object of each kind.
fn base(kind: &str) -> Value {
    match kind {
        "FleetPolicy" => json!({ "selector": {} }),
        _ => json!({}),
    }
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s"
)]
async fn the_api_server_refuses_every_schema_violation_naming_the_field() {
    let _ = ensure_crds();
    let client = support::client().await;
    let ns = support::namespace(&client, "invalid").await;
    let mut refused = 0;
    let mut failures = Vec::new();
    let mut unbroken_all = Vec::new();
    for (file, kind, plural, namespaced) in [
        (
            "deploy/crd/fleetpolicy.yaml",
            "FleetPolicy",
            "fleetpolicies",
            true,
        ),
        (
            "deploy/crd/clusterfleetpolicy.yaml",
            "ClusterFleetPolicy",
            "clusterfleetpolicies",
            false,
        ),
    ] {
        let crd = &documents(&read(file))[0];
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        let (mut cases, unbroken) = violations(schema, &base(kind));
        unbroken_all.extend(unbroken);
        if kind == "FleetPolicy" {
            // The CRD's CEL rule, with the message the `# schema:` header of
            // deploy/examples/invalid-searxng-without-url.yaml documents.
            cases.push(Violation {
                rule: "CEL searxng needs baseURL".into(),
                field: "spec.web".into(),
                spec: json!({ "selector": {}, "web": { "searchBackend": "searxng" } }),
                expect: "SearXNG is self-hosted: set spec.web.vendors.searxng.baseURL when searchBackend is searxng".into(),
            });
            // The budget maps' CEL rule: a key that is not a budget role (a misspelling, an
            // auxiliary task, which counts under `auxiliary`) is refused where it is written.
            for (scope, role) in [("namespace", "crons"), ("pod", "auxiliary:vision")] {
                cases.push(Violation {
                    rule: format!("CEL budget role {role}"),
                    field: format!("spec.llm.budgets.{scope}"),
                    spec: json!({ "selector": {}, "llm": { "budgets": {
                        scope: { "cron": { "dailyUsd": 1 }, role: { "dailyUsd": 1 } },
                    }}}),
                    expect: "a budget role is main, delegation, cron or auxiliary".into(),
                });
            }
        }
        assert!(cases.len() > 10, "{kind}: the schema must yield cases");
        let ar = ApiResource {
            group: "fleetgate.dev".into(),
            version: "v1alpha1".into(),
            api_version: "fleetgate.dev/v1alpha1".into(),
            kind: kind.into(),
            plural: plural.into(),
        };
        let api: Api<DynamicObject> = if namespaced {
            Api::namespaced_with(client.clone(), &ns, &ar)
        } else {
            Api::all_with(client.clone(), &ar)
        };
        let results: Vec<(Violation, Result<DynamicObject, kube::Error>)> =
            futures_util::stream::iter(cases.into_iter().enumerate())
                .map(|(i, case)| {
                    let api = api.clone();
                    let kind = kind.to_string();
                    async move {
                        let obj: DynamicObject = serde_json::from_value(json!({
                            "apiVersion": "fleetgate.dev/v1alpha1",
                            "kind": kind,
                            "metadata": { "name": format!("invalid-{i}") },
                            "spec": case.spec,
                        }))
                        .expect("a dynamic object");
                        let params = PostParams {
                            dry_run: true,
                            ..PostParams::default()
                        };
                        let result = api.create(&params, &obj).await;
                        (case, result)
                    }
                })
                .buffer_unordered(16)
                .collect()
                .await;
        for (case, result) in results {
            match result {
                Err(kube::Error::Api(status))
                    if status.code == 422
                        && status.message.contains(&case.field)
                        && status.message.contains(&case.expect) =>
                {
                    refused += 1;
                }
                Err(e) => failures.push(format!(
                    "{kind} {} ({}): refused without naming the field or saying {:?}: {e}",
                    case.field, case.rule, case.expect
                )),
                Ok(_) => failures.push(format!(
                    "{kind} {} ({}): ACCEPTED {}",
                    case.field, case.rule, case.spec
                )),
            }
        }
    }
    println!(
        "the API server refused {refused} invalid objects; rules no generated value breaks: {unbroken_all:?}"
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases went wrong:\n{}",
        failures.len(),
        refused + failures.len(),
        failures.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s"
)]
async fn the_api_server_takes_a_budget_for_each_of_the_four_roles_in_both_scopes() {
    let _ = ensure_crds();
    let client = support::client().await;
    let ns = support::namespace(&client, "budget-roles").await;
    let budgets: serde_json::Map<String, Value> = ["main", "delegation", "cron", "auxiliary"]
        .iter()
        .map(|r| {
            (
                (*r).to_string(),
                json!({ "dailyUsd": 0, "tokensPerMinute": 1 }),
            )
        })
        .collect();
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "fleetgate.dev/v1alpha1",
        "kind": "FleetPolicy",
        "metadata": { "name": "budgets" },
        "spec": { "selector": {}, "llm": { "budgets": {
            "pod": budgets.clone(), "namespace": budgets,
        }}},
    }))
    .expect("a dynamic object");
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    support::fleet_policies(&client, &ns)
        .create(&params, &obj)
        .await
        .expect("four roles at their lowest values are a valid budget");
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s"
)]
async fn kubectl_get_cfp_prints_the_minimum_mode_column() {
    let _ = ensure_crds();
    let name = "columns-baseline";
    kubectl(
        &["apply", "--server-side", "-f", "-"],
        Some(
            &json!({
                "apiVersion": "fleetgate.dev/v1alpha1",
                "kind": "ClusterFleetPolicy",
                "metadata": { "name": name },
                "spec": { "egress": { "minimumMode": "transparent" } },
            })
            .to_string(),
        ),
    );
    let table = kubectl(&["get", "cfp", name], None);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().expect("a header").split_whitespace().collect();
    assert_eq!(header, ["NAME", "MINIMUM", "MODE", "AGE"], "{table}");
    let row: Vec<&str> = lines.next().expect("a row").split_whitespace().collect();
    assert_eq!(&row[..2], [name, "transparent"], "{table}");
    kubectl(&["delete", "cfp", name], None);
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s"
)]
async fn the_crds_are_created_without_a_warning_from_the_api_server() {
    // Found by this suite: schemars' `format: uint16` / `uint32` drew
    // `Warning: unrecognized format "uint32"` on every fresh install of the CRDs.
    let stderr = ensure_crds();
    assert!(
        !stderr.contains("Warning"),
        "creating the CRDs must draw no warning from the API server: {stderr}"
    );
}
