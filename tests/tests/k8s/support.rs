//! What the real-cluster cases share: the tools (kubectl, helm v4 and v3) run against the
//! shared control plane, YAML streams, the CRDs installed once, and the controller binary.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use fleetgate_e2e::k8s::{self, ControlPlane};
use serde::Deserialize as _;
use serde_json::Value;

/// The control plane of this test binary.
pub fn plane() -> &'static ControlPlane {
    k8s::shared()
}

/// A tool's path from `tests/run`'s environment or `.tools/k8s/bin`; a missing tool fails.
pub fn tool(env: &str, name: &str) -> PathBuf {
    k8s::tool(env, name).unwrap_or_else(|e| panic!("{e:#}"))
}

/// kubectl 1.37.
pub fn kubectl_bin() -> PathBuf {
    tool("FLEETGATE_KUBECTL", "kubectl")
}

/// helm v4.
pub fn helm_bin() -> PathBuf {
    tool("FLEETGATE_HELM", "helm")
}

/// helm v3.
pub fn helm3_bin() -> PathBuf {
    tool("FLEETGATE_HELM3", "helm3")
}

/// Run `program args…` with the admin kubeconfig (and helm's state in the control plane's
/// folder), feeding `stdin`; the output whatever the status.
pub fn run(program: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let plane = plane();
    let helm_home = plane.dir().join("helm");
    let mut child = Command::new(program)
        .args(args)
        .env("KUBECONFIG", plane.kubeconfig())
        .env("HELM_CONFIG_HOME", helm_home.join("config"))
        .env("HELM_CACHE_HOME", helm_home.join("cache"))
        .env("HELM_DATA_HOME", helm_home.join("data"))
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{} must start: {e}", program.display()));
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes())
            .expect("the tool must read its stdin");
    }
    child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("{} must finish: {e}", program.display()))
}

/// Combined stdout and stderr.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Run and require success; stdout.
pub fn ok(program: &Path, args: &[&str], stdin: Option<&str>) -> String {
    let out = run(program, args, stdin);
    assert!(
        out.status.success(),
        "{} {args:?} must succeed: {}",
        program.display(),
        text(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `kubectl args…`, required to succeed; stdout.
/// `helm install fleetgate charts/fleetgate --namespace <ns>` with helm v4 and `extra` arguments.
pub fn install_chart(ns: &str, extra: &[&str]) -> String {
    let chart = fleetgate_e2e::k8s::workspace()
        .join("charts/fleetgate")
        .display()
        .to_string();
    let mut args = vec!["install", "fleetgate", &chart, "--namespace", ns];
    args.extend_from_slice(extra);
    ok(&helm_bin(), &args, None)
}

pub fn kubectl(args: &[&str], stdin: Option<&str>) -> String {
    ok(&kubectl_bin(), args, stdin)
}

/// Every non-empty document of a YAML stream, as JSON.
pub fn documents(yaml: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(yaml)
        .map(|doc| Value::deserialize(doc).expect("the stream must be valid YAML"))
        .filter(|doc| !doc.is_null())
        .collect()
}

/// The documents as one JSON-per-document YAML stream.
pub fn stream(docs: &[Value]) -> String {
    docs.iter()
        .map(|d| format!("---\n{d}\n"))
        .collect::<Vec<_>>()
        .concat()
}

/// A workspace file's text.
pub fn read(rel: &str) -> String {
    let path = k8s::workspace().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{} must read: {e}", path.display()))
}

/// The two CRDs (`deploy/crd/`), created server-side once per control plane; later callers
/// wait for the first one's result. Returns what kubectl printed on stderr while creating them
/// (the API server's `Warning:` headers: it warns on a new object, not on an unchanged one).
pub fn ensure_crds() -> &'static str {
    static DONE: OnceLock<Result<String, String>> = OnceLock::new();
    let done = DONE.get_or_init(|| {
        let mut stderr = String::new();
        for file in [
            "deploy/crd/fleetpolicy.yaml",
            "deploy/crd/clusterfleetpolicy.yaml",
        ] {
            let out = run(
                &kubectl_bin(),
                &["apply", "--server-side", "-f", "-"],
                Some(&read(file)),
            );
            if !out.status.success() {
                return Err(format!("{file} was refused: {}", text(&out)));
            }
            stderr.push_str(&String::from_utf8_lossy(&out.stderr));
        }
        let out = run(
            &kubectl_bin(),
            &[
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                "crd/fleetpolicies.fleetgate.dev",
                "crd/clusterfleetpolicies.fleetgate.dev",
            ],
            None,
        );
        if !out.status.success() {
            return Err(format!("the CRDs were not established: {}", text(&out)));
        }
        Ok(stderr)
    });
    match done {
        Ok(stderr) => stderr,
        Err(message) => panic!("{message}"),
    }
}

/// The FleetPolicy API of `ns`, as dynamic objects (the cases write specs the types may refuse).
pub fn fleet_policies(client: &kube::Client, ns: &str) -> kube::Api<kube::api::DynamicObject> {
    let ar = kube::discovery::ApiResource {
        group: "fleetgate.dev".into(),
        version: "v1alpha1".into(),
        api_version: "fleetgate.dev/v1alpha1".into(),
        kind: "FleetPolicy".into(),
        plural: "fleetpolicies".into(),
    };
    kube::Api::namespaced_with(client.clone(), ns, &ar)
}

/// A fresh namespace for one test.
pub async fn namespace(client: &kube::Client, prefix: &str) -> String {
    plane()
        .namespace(client, prefix)
        .await
        .unwrap_or_else(|e| panic!("namespace {prefix}: {e:#}"))
}

/// FleetPolicy `fleet` selecting `app: hermes` with `web.charLimit` set: the edit the cases
/// make (each value renders a different ConfigMap).
pub fn char_limit_policy(char_limit: u64) -> Value {
    serde_json::json!({
        "apiVersion": "fleetgate.dev/v1alpha1",
        "kind": "FleetPolicy",
        "metadata": { "name": "fleet" },
        "spec": {
            "selector": { "matchLabels": { "app": "hermes" } },
            "web": { "charLimit": char_limit },
        },
    })
}

/// `kubectl -n <ns> apply --server-side` of one object, as a user edits; stdout.
pub fn apply(ns: &str, object: &Value) -> String {
    kubectl(
        &["-n", ns, "apply", "--server-side", "-f", "-"],
        Some(&object.to_string()),
    )
}

/// An admin client for the current runtime.
pub async fn client() -> kube::Client {
    plane()
        .client()
        .await
        .unwrap_or_else(|e| panic!("the admin client: {e:#}"))
}

/// The `fleetgate-controller` binary of this workspace, built once per test process.
pub fn controller_bin() -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        // A prebuilt binary (the scale benchmark runs the release build).
        if let Some(bin) = std::env::var_os("FLEETGATE_CONTROLLER_BIN").filter(|v| !v.is_empty()) {
            return Ok(PathBuf::from(bin));
        }
        let root = k8s::workspace();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let out = Command::new(cargo)
            .args([
                "build",
                "-p",
                "fleetgate-controller",
                "--bin",
                "fleetgate-controller",
            ])
            .current_dir(&root)
            .output()
            .map_err(|e| format!("cargo must start: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "cargo build -p fleetgate-controller failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .filter(|v| !v.is_empty())
            .map_or_else(|| root.join("target"), |d| root.join(d));
        Ok(target.join("debug/fleetgate-controller"))
    });
    built.clone().unwrap_or_else(|e| panic!("{e}"))
}

/// Poll `check` every 50 ms until it returns `Some`, failing with `what` after `within`.
pub async fn eventually<T, F, Fut>(within: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} did not happen within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `(apiGroup, resource[/subresource], verb)`; the core group is `""`.
pub type Grant = (String, String, String);

/// What the stored Role or ClusterRole `object` (kubectl's `[-n ns] <kind> <name>`)
/// grants, one entry per group × resource × verb.
pub fn granted(object: &[&str]) -> BTreeSet<Grant> {
    let mut args = vec!["get"];
    args.extend_from_slice(object);
    args.extend_from_slice(&["-o", "json"]);
    let role: Value = serde_json::from_str(&kubectl(&args, None)).expect("kubectl prints JSON");
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_array().expect("rules") {
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    out.insert((group.clone(), resource.clone(), verb));
                }
            }
        }
    }
    out
}

/// What `user` asked for, from the API server's audit log, and the requests it was refused.
/// A server-side apply that created its object (201) used `create` as well as `patch`: the
/// API server authorizes both.
pub fn audit_used(user: &str) -> (BTreeSet<Grant>, Vec<String>) {
    let audit = std::fs::read_to_string(plane().audit_log()).expect("the audit log");
    let mut used = BTreeSet::new();
    let mut refused = Vec::new();
    for line in audit.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if event["user"]["username"] != user {
            continue;
        }
        let object = &event["objectRef"];
        let Some(resource) = object["resource"].as_str() else {
            continue; // a non-resource URL such as /api or /version
        };
        let resource = match object["subresource"].as_str() {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource.to_string(),
        };
        let group = object["apiGroup"].as_str().unwrap_or_default().to_string();
        let verb = event["verb"].as_str().unwrap_or_default().to_string();
        let code = event["responseStatus"]["code"].as_i64().unwrap_or_default();
        if code == 403 {
            refused.push(format!("{verb} {group}/{resource}: {line}"));
        }
        if verb == "patch" && code == 201 {
            used.insert((group.clone(), resource.clone(), "create".to_string()));
        }
        used.insert((group, resource, verb));
    }
    (used, refused)
}
