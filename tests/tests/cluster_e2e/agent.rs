//! The example agent (`deploy/examples/agent-deployment.yaml`) as this cluster runs it, and what
//! a case does with its pods: exec into a container, read the gate's decision lines, kill the
//! gate's process on the node.

use std::time::Duration;

use serde::Deserialize as _;
use serde_json::{Value, json};

use crate::cluster::{AGENT_IMAGE, Cluster, NAMES, PUBLIC, WAIT, eventually, workspace};

/// The example Deployment moved into `ns`, with what this cluster needs and nothing else:
/// the locally built Hermes image (never pulled); an idle command, so a case runs Hermes'
/// own tools in the container with `exec`; an `emptyDir` Hermes home (this cluster has no
/// volume provisioner, so the example's claim is left out); small requests, so ten replicas
/// fit one two-core node; and the hosts file that maps the test names to a public address.
pub fn deployment(ns: &str) -> String {
    let text = std::fs::read_to_string(workspace().join("deploy/examples/agent-deployment.yaml"))
        .expect("the example must exist");
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).expect("the example must be valid YAML"))
        .filter(|doc| !doc.is_null())
        .collect();
    let mut deployment = docs
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("the example must hold the Deployment");
    deployment["metadata"]["namespace"] = json!(ns);
    let spec = &mut deployment["spec"]["template"]["spec"];
    spec["hostAliases"] = json!([{"ip": PUBLIC, "hostnames": NAMES}]);
    spec["terminationGracePeriodSeconds"] = json!(2);
    spec["volumes"] = json!([{"name": "hermes-home", "emptyDir": {}}]);
    let agent = &mut spec["containers"][0];
    agent["image"] = json!(AGENT_IMAGE);
    agent["imagePullPolicy"] = json!("Never");
    agent["command"] = json!(["sleep", "infinity"]);
    agent["args"] = json!([]);
    agent["resources"] = json!({"requests": {"cpu": "10m", "memory": "64Mi"}});
    serde_json::to_string(&deployment).expect("JSON")
}

/// A FleetPolicy selecting the agents: the origin's address allowed, `ads.fleet.test` on the
/// blocklist, Hermes' extract through the gate's Firecrawl front with the keyless `direct`
/// backend, and `mode` as the egress mode.
pub fn fleet_policy(cluster: &Cluster, ns: &str, mode: &str, blocked: &[&str]) -> String {
    json!({
        "apiVersion": "fleetgate.dev/v1alpha1",
        "kind": "FleetPolicy",
        "metadata": {"name": "fleet", "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {"app": "hermes"}},
            "websiteBlocklist": {"domains": blocked},
            "egress": {
                "mode": mode,
                "allowCIDRs": [format!("{}/32", cluster.gateway)],
            },
        },
    })
    .to_string()
}

/// A second agent pod, `hermes-root`, that runs as root the way admission lets it in a
/// captured pod: SETUID, SETGID and NET_RAW dropped, no privilege escalation. Its name, once
/// it is ready.
pub fn root_agent(cluster: &Cluster, ns: &str) -> String {
    let deployment: Value = serde_json::from_str(&deployment(ns)).expect("JSON");
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "hermes-root", "namespace": ns,
                     "labels": deployment["spec"]["template"]["metadata"]["labels"].clone()},
        "spec": deployment["spec"]["template"]["spec"].clone(),
    });
    pod["spec"]["securityContext"] = json!({"runAsUser": 0, "runAsGroup": 0,
        "seccompProfile": {"type": "RuntimeDefault"}});
    pod["spec"]["containers"][0]["securityContext"] = json!({
        "allowPrivilegeEscalation": false,
        "capabilities": {"drop": ["SETUID", "SETGID", "NET_RAW"]},
    });
    cluster.kubectl_in(&["apply", "-n", ns, "-f", "-"], &pod.to_string());
    cluster.kubectl(&[
        "-n",
        ns,
        "wait",
        "--for=condition=Ready",
        "pod/hermes-root",
        "--timeout",
        WAIT,
    ]);
    "hermes-root".to_string()
}

/// Apply the agent Deployment and wait for its rollout.
pub fn start_agents(cluster: &Cluster, ns: &str) {
    cluster.kubectl_in(&["apply", "-n", ns, "-f", "-"], &deployment(ns));
    rollout(cluster, ns);
}

pub fn rollout(cluster: &Cluster, ns: &str) {
    cluster.kubectl(&[
        "-n",
        ns,
        "rollout",
        "status",
        "deployment/hermes",
        "--timeout",
        WAIT,
    ]);
}

/// The agent pods, running or not.
pub fn pods(cluster: &Cluster, ns: &str) -> Vec<Value> {
    cluster.json(&["-n", ns, "get", "pods", "-l", "app=hermes"])["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The one agent pod's name.
pub fn one_pod(cluster: &Cluster, ns: &str) -> String {
    let pods = pods(cluster, ns);
    pods.iter()
        .find(|p| p["metadata"]["deletionTimestamp"].is_null())
        .and_then(|p| p["metadata"]["name"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| panic!("an agent pod must exist: {pods:?}"))
}

/// `kubectl exec` in `container`; `(success, output)`.
pub fn exec(
    cluster: &Cluster,
    ns: &str,
    pod: &str,
    container: &str,
    command: &[&str],
    stdin: Option<&str>,
) -> (bool, String) {
    let mut args = vec!["-n", ns, "exec"];
    if stdin.is_some() {
        args.push("-i");
    }
    args.extend([pod, "-c", container, "--"]);
    args.extend(command);
    cluster.kubectl_try(&args, stdin)
}

/// `curl -sS <args>` in the agent container; `(success, output)`.
pub fn curl(cluster: &Cluster, ns: &str, pod: &str, args: &[&str]) -> (bool, String) {
    let mut command = vec!["curl", "-sS"];
    command.extend(args);
    exec(cluster, ns, pod, "hermes", &command, None)
}

/// Hermes 0.19.0's own `web_extract` in the agent container (its venv's Python, the test's
/// script on stdin), with a Hermes home that selects the Firecrawl backend; `FIRECRAWL_API_URL`
/// is what the webhook injected. The parsed result.
pub fn hermes_web_extract(cluster: &Cluster, ns: &str, pod: &str, urls: &[String]) -> Value {
    let script = std::fs::read_to_string(workspace().join("tests/python/hermes_web_extract.py"))
        .expect("the script must exist");
    let mut command = vec![
        "sh",
        "-c",
        "mkdir -p /tmp/hermes && printf 'web:\\n  extract_backend: firecrawl\\n' > /tmp/hermes/config.yaml \
         && HERMES_HOME=/tmp/hermes exec /opt/hermes/bin/python - \"$@\"",
        "hermes_web_extract",
        "3000",
    ];
    command.extend(urls.iter().map(String::as_str));
    let (ok, out) = exec(cluster, ns, pod, "hermes", &command, Some(&script));
    assert!(
        ok,
        "Hermes' web_extract must run in the agent container: {out}"
    );
    let start = out
        .find('{')
        .unwrap_or_else(|| panic!("Hermes must print JSON: {out}"));
    serde_json::from_str(&out[start..]).unwrap_or_else(|e| panic!("Hermes' result ({e}): {out}"))
}

/// The gate's JSON log lines in `pod` (its current run, or the previous one).
pub fn gate_log(cluster: &Cluster, ns: &str, pod: &str, previous: bool) -> Vec<Value> {
    let mut args = vec!["-n", ns, "logs", pod, "-c", "fleetgate-proxy"];
    if previous {
        args.push("--previous");
    }
    let (_, text) = cluster.kubectl_try(&args, None);
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

/// Waits for the gate's `egress.decision` line whose URL contains `url_part` and matches
/// `more`.
pub fn decision(
    cluster: &Cluster,
    ns: &str,
    pod: &str,
    url_part: &str,
    more: impl Fn(&Value) -> bool,
) -> Value {
    eventually(
        Duration::from_secs(30),
        &format!("the gate's decision line for {url_part}"),
        || {
            gate_log(cluster, ns, pod, false).into_iter().find(|l| {
                l["message"] == "egress.decision"
                    && l["url"].as_str().is_some_and(|u| u.contains(url_part))
                    && more(l)
            })
        },
    )
}

/// The container's status in the pod.
pub fn container_status(cluster: &Cluster, ns: &str, pod: &str, name: &str) -> Value {
    let pod = cluster.json(&["-n", ns, "get", "pod", pod]);
    pod["status"]["containerStatuses"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .cloned()
        .unwrap_or(Value::Null)
}

/// Kills the gate's process on the node (SIGKILL, as an OOM kill would): found as the process
/// whose cgroup names the container's ID.
pub fn kill_gate(cluster: &Cluster, ns: &str, pod: &str) -> u32 {
    let status = container_status(cluster, ns, pod, "fleetgate-proxy");
    let id = status["containerID"]
        .as_str()
        .and_then(|id| id.split_once("://"))
        .map(|(_, id)| id.to_string())
        .unwrap_or_else(|| panic!("the gate must have a container ID: {status}"));
    let pid = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
            cgroup.contains(&id) && exe.to_string_lossy().ends_with("fleetgate-proxy")
        })
        .unwrap_or_else(|| panic!("the gate's process of container {id} must run on the node"));
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("kill must run");
    assert!(killed.success(), "the gate's process {pid} must be killed");
    pid
}
