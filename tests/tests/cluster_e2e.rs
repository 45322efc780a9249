//! The opt-in real-cluster suite: runs only when `FLEETGATE_E2E_KUBECONFIG` names a kubeconfig
//! (a kind, k3d or any disposable cluster). It installs the chart in two fresh namespaces,
//! applies a FleetPolicy and the example agent in the first, waits for the injected sidecar and
//! the FleetPolicy's `Ready` condition, checks the second release stays in its namespace, and
//! uninstalls everything. What it alone covers: admission wiring and TLS, RBAC sufficiency,
//! server-side apply, structural-schema and CEL acceptance by a real API server, image startup.
//!
//! Optional env: `FLEETGATE_E2E_CONTROLLER_IMAGE`, `FLEETGATE_E2E_PROXY_IMAGE` (`repo:tag` of
//! images the cluster can pull, e.g. loaded with `kind load docker-image`),
//! `FLEETGATE_E2E_AGENT_IMAGE` (the Hermes image), `FLEETGATE_HELM`, `FLEETGATE_KUBECTL`.

// Helpers outside `#[test]` functions fail the test on broken setup, exactly as the tests do.
#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// The kubeconfig that turns the suite on.
const KUBECONFIG_ENV: &str = "FLEETGATE_E2E_KUBECONFIG";
/// How long rollouts and conditions may take (image pulls included).
const WAIT: &str = "300s";

/// One cluster session: kubeconfig, tools, and the namespaces to clean up.
#[derive(Debug)]
struct Cluster {
    kubeconfig: PathBuf,
    helm: PathBuf,
    kubectl: PathBuf,
    namespaces: Vec<String>,
    /// Releases of the cluster part (`charts/fleetgate-baseline`) to uninstall.
    baseline_releases: Vec<String>,
}

impl Cluster {
    /// Run a tool with the suite's kubeconfig; `(success, stdout + stderr)`.
    fn run(&self, tool: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String) {
        let mut child = Command::new(tool)
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{} must start: {e}", tool.display()));
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            std::io::Write::write_all(&mut pipe, text.as_bytes()).expect("stdin must be written");
        }
        let out = child.wait_with_output().expect("the tool must finish");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }

    fn kubectl(&self, args: &[&str]) -> String {
        self.must(&self.kubectl.clone(), args, None)
    }

    fn must(&self, tool: &Path, args: &[&str], stdin: Option<&str>) -> String {
        let (ok, text) = self.run(tool, args, stdin);
        assert!(
            ok,
            "{} {} must succeed: {text}",
            tool.display(),
            args.join(" ")
        );
        text
    }

    /// `helm install` of the chart into `ns`, waiting for the controller.
    fn install(&mut self, ns: &str) {
        self.install_with(ns, &[]);
    }

    /// [`Cluster::install`] with extra `helm install` arguments.
    fn install_with(&mut self, ns: &str, extra: &[&str]) {
        self.kubectl(&["create", "namespace", ns]);
        self.namespaces.push(ns.to_string());
        let chart = workspace().join("charts/fleetgate").display().to_string();
        let mut args: Vec<String> = [
            "install",
            "fleetgate",
            &chart,
            "--namespace",
            ns,
            "--wait",
            "--timeout",
            "5m",
        ]
        .iter()
        .map(|s| (*s).to_string())
        .collect();
        args.extend(image_overrides());
        args.extend(extra.iter().map(|s| (*s).to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        self.must(&self.helm.clone(), &refs, None);
    }

    /// `kubectl apply` of an example file, moved into `ns`.
    fn apply_example(&self, ns: &str, file: &str) {
        let text = std::fs::read_to_string(workspace().join("deploy/examples").join(file))
            .expect("the example must exist");
        let mut text = text.replace("namespace: agents", &format!("namespace: {ns}"));
        if let Ok(image) = std::env::var("FLEETGATE_E2E_AGENT_IMAGE") {
            text = text.replace("nousresearch/hermes-agent:v0.19.0", &image);
        }
        self.must(
            &self.kubectl.clone(),
            &["apply", "-n", ns, "-f", "-"],
            Some(&text),
        );
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.kubectl(&all)).expect("kubectl must print JSON")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for release in self.baseline_releases.clone() {
            let helm = self.helm.clone();
            let _ = self.run(&helm, &["uninstall", &release, "--wait"], None);
        }
        for ns in self.namespaces.clone() {
            let helm = self.helm.clone();
            let kubectl = self.kubectl.clone();
            let _ = self.run(
                &helm,
                &["uninstall", "fleetgate", "--namespace", &ns, "--wait"],
                None,
            );
            let _ = self.run(
                &kubectl,
                &["delete", "namespace", &ns, "--wait=false"],
                None,
            );
        }
    }
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .expect("the tests crate must sit inside the workspace")
}

/// `--set image.<which>.repository=…,tag=…` from the optional image env vars.
fn image_overrides() -> Vec<String> {
    let mut out = Vec::new();
    for (var, which) in [
        ("FLEETGATE_E2E_CONTROLLER_IMAGE", "controller"),
        ("FLEETGATE_E2E_PROXY_IMAGE", "proxy"),
    ] {
        if let Some((repo, tag)) = std::env::var(var)
            .ok()
            .as_deref()
            .and_then(|i| i.rsplit_once(':'))
        {
            out.push("--set".into());
            out.push(format!(
                "image.{which}.repository={repo},image.{which}.tag={tag}"
            ));
        }
    }
    out
}

/// The session, or `None` after printing the skip line when the suite is not asked for.
#[allow(
    clippy::print_stdout,
    reason = "the skip line belongs in the test's output"
)]
fn cluster() -> Option<Cluster> {
    let Some(kubeconfig) = std::env::var_os(KUBECONFIG_ENV).map(PathBuf::from) else {
        println!("skipped: {KUBECONFIG_ENV} not set (the real-cluster suite is opt-in)");
        return None;
    };
    let tool = |var: &str, name: &str| {
        std::env::var_os(var).map_or_else(|| PathBuf::from(name), PathBuf::from)
    };
    Some(Cluster {
        kubeconfig,
        helm: tool("FLEETGATE_HELM", "helm"),
        kubectl: tool("FLEETGATE_KUBECTL", "kubectl"),
        namespaces: Vec::new(),
        baseline_releases: Vec::new(),
    })
}

#[test]
fn two_releases_inject_the_gate_and_the_fleet_policy_becomes_ready() {
    let Some(mut cluster) = cluster() else { return };
    let suffix = std::process::id();
    let (a, b) = (
        format!("fleetgate-e2e-a-{suffix}"),
        format!("fleetgate-e2e-b-{suffix}"),
    );
    cluster.install(&a);
    cluster.install(&b);
    for ns in [&a, &b] {
        let hook = cluster.json(&[
            "get",
            "mutatingwebhookconfiguration",
            &format!("fleetgate-{ns}"),
        ]);
        assert_eq!(
            hook.pointer("/webhooks/0/namespaceSelector/matchLabels/kubernetes.io~1metadata.name"),
            Some(&Value::from(ns.as_str())),
            "each release's webhook must be scoped to its own namespace"
        );
    }
    cluster.apply_example(&a, "valid-minimal.yaml");
    cluster.apply_example(&a, "agent-deployment.yaml");
    cluster.kubectl(&[
        "-n",
        &a,
        "rollout",
        "status",
        "deployment/hermes",
        "--timeout",
        WAIT,
    ]);
    let pods = cluster.json(&["-n", &a, "get", "pods", "-l", "app=hermes"]);
    let pod = &pods["items"][0];
    let names: Vec<&str> = pod["spec"]["containers"]
        .as_array()
        .map(|c| c.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        names.contains(&"fleetgate-proxy"),
        "the agent pod must carry the gate sidecar: {names:?}"
    );
    assert!(
        pod["metadata"]["annotations"]
            .get("fleetgate.dev/injected")
            .is_some(),
        "the injected pod must be marked"
    );
    cluster.kubectl(&[
        "-n",
        &a,
        "wait",
        "--for=condition=Ready",
        "fleetpolicy/fleet",
        "--timeout",
        WAIT,
    ]);
    let cm = cluster.json(&["-n", &a, "get", "configmap", "fleet-managed"]);
    assert!(
        cm["data"]["policy.yaml"].is_string(),
        "the rendered gate policy must exist"
    );
    assert_eq!(
        cm["metadata"]["ownerReferences"][0]["kind"], "FleetPolicy",
        "owned by the FleetPolicy"
    );
    let in_b = cluster.json(&["-n", &b, "get", "fleetpolicies"]);
    assert_eq!(
        in_b["items"].as_array().map(Vec::len),
        Some(0),
        "nothing may leak into the other namespace"
    );
}

/// Fail closed through a leader's death: agent pods are created while the leading controller
/// pod is deleted. Every agent pod that exists afterwards carries its gate (the webhook is
/// served by the other replica; failurePolicy Fail and the ValidatingAdmissionPolicy refuse
/// anything else), the Lease moves to the other replica, and an un-injected pod labelled for
/// injection is refused by the API server itself, naming the policy.
#[test]
fn deleting_the_leading_controller_while_agents_start_never_lets_a_pod_run_ungated() {
    let Some(mut cluster) = cluster() else { return };
    let ns = format!("fleetgate-e2e-ha-{}", std::process::id());
    cluster.install(&ns);
    cluster.apply_example(&ns, "valid-minimal.yaml");
    let lease = cluster.json(&["-n", &ns, "get", "lease", "fleetgate-controller"]);
    let leader = lease["spec"]["holderIdentity"]
        .as_str()
        .expect("a replica must hold the lease")
        .to_string();
    cluster.apply_example(&ns, "agent-deployment.yaml");
    cluster.kubectl(&["-n", &ns, "scale", "deployment/hermes", "--replicas", "6"]);
    cluster.kubectl(&["-n", &ns, "delete", "pod", &leader, "--wait=false"]);
    cluster.kubectl(&["-n", &ns, "scale", "deployment/hermes", "--replicas", "10"]);
    cluster.kubectl(&[
        "-n",
        &ns,
        "rollout",
        "status",
        "deployment/hermes",
        "--timeout",
        WAIT,
    ]);
    let pods = cluster.json(&["-n", &ns, "get", "pods", "-l", "app=hermes"]);
    let items = pods["items"].as_array().expect("a pod list");
    assert_eq!(items.len(), 10, "every agent replica must have started");
    for pod in items {
        let gated = pod["spec"]["containers"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["name"] == "fleetgate-proxy"));
        assert!(
            gated,
            "agent pod {} started without its gate",
            pod["metadata"]["name"]
        );
    }
    let moved = cluster.json(&["-n", &ns, "get", "lease", "fleetgate-controller"]);
    assert_ne!(
        moved["spec"]["holderIdentity"].as_str(),
        Some(leader.as_str()),
        "the lease must have moved off the deleted pod"
    );
    // Straight to the API server, no webhook in the way: the policy refuses.
    let bare = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bare\n  namespace: {ns}\n  labels:\n    fleetgate.dev/inject: enabled\n  annotations:\n    fleetgate.dev/injected: bypass\nspec:\n  containers:\n    - name: agent\n      image: busybox\n"
    );
    let (ok, said) = cluster.run(
        &cluster.kubectl.clone(),
        &["apply", "-n", &ns, "-f", "-"],
        Some(&bare),
    );
    assert!(
        !ok && said.contains(&format!("fleetgate-injected-{ns}")),
        "an un-injected labelled pod must be refused by the ValidatingAdmissionPolicy: {said}"
    );
}

/// A cluster baseline raises a namespace that asks for no capture: the cluster part is
/// installed, the release reads baselines, a FleetPolicy with `egress.mode: off` renders with
/// the forward proxy and says so in its `Baseline` condition.
#[test]
fn a_cluster_baseline_raises_a_namespace_that_asks_for_no_capture() {
    let Some(mut cluster) = cluster() else { return };
    let suffix = std::process::id();
    let (ns, release, name) = (
        format!("fleetgate-e2e-base-{suffix}"),
        format!("fleetgate-baseline-{suffix}"),
        format!("e2e-{suffix}"),
    );
    let chart = workspace()
        .join("charts/fleetgate-baseline")
        .display()
        .to_string();
    let role = format!("fleetgate-baseline-reader-{suffix}");
    cluster.must(
        &cluster.helm.clone(),
        &[
            "install",
            &release,
            &chart,
            "--wait",
            "--set",
            &format!("baseline.name={name}"),
            "--set",
            &format!("readerClusterRole={role}"),
        ],
        None,
    );
    cluster.baseline_releases.push(release);
    cluster.install_with(
        &ns,
        &[
            "--set",
            "clusterBaseline.enabled=true",
            "--set",
            &format!("clusterBaseline.readerClusterRole={role}"),
        ],
    );
    cluster.apply_example(&ns, "valid-minimal.yaml");
    cluster.kubectl(&[
        "-n",
        &ns,
        "patch",
        "fleetpolicy",
        "fleet",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"egress":{"mode":"off"}}}"#,
    ]);
    cluster.kubectl(&[
        "-n",
        &ns,
        "wait",
        "--for=jsonpath={.status.conditions[?(@.type==\"Baseline\")].reason}=Applied",
        "fleetpolicy/fleet",
        "--timeout",
        WAIT,
    ]);
    let fp = cluster.json(&["-n", &ns, "get", "fleetpolicy", "fleet"]);
    let said = fp["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Baseline"))
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(
        said.contains("spec.egress.mode: off raised to proxy"),
        "{said}"
    );
    let cm = cluster.json(&["-n", &ns, "get", "configmap", "fleet-managed"]);
    let policy = cm["data"]["policy.yaml"].as_str().unwrap_or_default();
    assert!(
        policy.contains("forwardProxy"),
        "the raised policy runs the forward proxy: {policy}"
    );
}
