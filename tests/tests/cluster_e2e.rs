//! The cluster suite: fleetgate installed with helm on a real cluster on this machine and its
//! agents run for real. What is real: etcd, kube-apiserver, kube-controller-manager and
//! kube-scheduler of the pinned release; a node (kubelet of the same release, containerd with
//! runc, the CNI bridge on a pod range that exists only inside this machine); the images
//! (`deploy/images/build.sh`: the gate, the controller, Hermes Agent 0.19.0 and the sandbox
//! image) built from this tree and loaded into the node's runtime; Hermes' own `web_extract`
//! and curl inside the agent container. The origin and the name server are processes of this
//! test on the host's bridge address ([`cluster`]).
//!
//! - Two releases inject their gates, each into its own namespace; the FleetPolicy becomes
//!   Ready.
//! - The leading controller pod is deleted while the agents scale to ten: every pod carries its
//!   gate, the Lease moves, and the ValidatingAdmissionPolicy refuses a pod that dodges the
//!   webhook.
//! - A cluster baseline raises a namespace.
//! - Egress from inside a pod (proxy mode): Hermes' `web_extract` reaches the origin only
//!   through the gate's Firecrawl front, the metadata address and a blocklisted site are
//!   refused; curl through `HTTP_PROXY` is gated. Probes pass; a gate killed in the pod is
//!   restarted by the kubelet and the next fetch succeeds; a policy edit reaches the running
//!   gate through the kubelet's volume refresh without a restart.
//! - Transparent mode: the init container (gate image, NET_ADMIN) installs the capture, a
//!   direct connection from the agent container lands on the gate, a metadata fetch is
//!   refused; only the gate's uid goes out. The admitted agent (uid 10000) and an admitted
//!   root agent (SETUID, SETGID and NET_RAW dropped) hold no way out: no capability, no switch
//!   to the gate's uid or gid, no packet or raw socket, UDP refused, TCP to a blocklisted site
//!   by address or name refused by the gate.
//!
//! Root only (a kubelet and a bridge); `tests/run` runs it (`FLEETGATE_REQUIRE_K8S_NODE=1`).
//! Opt-in (feature `real-cluster`: ignored under a plain `cargo test`); `tests/run k8s` runs it
//! with the other real-cluster suites.

#![allow(clippy::expect_used, clippy::print_stdout, clippy::panic)]

#[path = "cluster_e2e/agent.rs"]
mod agent;
#[path = "cluster_e2e/cluster.rs"]
mod cluster;

use std::time::Duration;

use serde_json::{Value, json};

use crate::agent::{curl, decision, hermes_web_extract, one_pod};
use crate::cluster::{Cluster, WAIT, eventually, serial};

/// The cluster, or `None` after the skip line when this machine cannot run a node and the
/// suite is not required.
fn cluster() -> Option<&'static Cluster> {
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .is_some_and(|l| l.split_whitespace().nth(1) == Some("0"))
    });
    if !root && std::env::var_os("FLEETGATE_REQUIRE_K8S_NODE").is_none() {
        println!("skipped: a node needs root (tests/run sets FLEETGATE_REQUIRE_K8S_NODE as root)");
        return None;
    }
    Some(cluster::shared())
}

fn unique(prefix: &str) -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    )
}

fn containers(pod: &Value) -> Vec<String> {
    pod["spec"]["containers"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|c| c["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source; a node: root, containerd, runc; the container images): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test cluster_e2e"
)]
fn two_releases_inject_the_gate_and_the_fleet_policy_becomes_ready() {
    let Some(cluster) = cluster() else { return };
    let _serial = serial();
    let (a, b) = (unique("e2e-a"), unique("e2e-b"));
    let release_a = cluster.install(&a, &[]);
    let _release_b = cluster.install(&b, &[]);
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
        let controllers = cluster.json(&["-n", ns, "get", "deployment", "fleetgate-controller"]);
        assert_eq!(
            controllers["status"]["readyReplicas"], 2,
            "both controller replicas must run from the local image: {}",
            controllers["status"]
        );
    }
    cluster.kubectl_in(
        &["apply", "-n", &a, "-f", "-"],
        &agent::fleet_policy(cluster, &a, "proxy", &[]),
    );
    agent::start_agents(cluster, &a);
    let pods = agent::pods(cluster, &a);
    let pod = &pods[0];
    assert!(
        containers(pod).iter().any(|c| c == "fleetgate-proxy"),
        "the agent pod must carry the gate sidecar: {:?}",
        containers(pod)
    );
    assert!(
        pod["metadata"]["annotations"]
            .get("fleetgate.dev/injected")
            .is_some(),
        "the injected pod must be marked"
    );
    assert_eq!(
        pod["status"]["phase"], "Running",
        "the agent pod must run on the node"
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
    drop(release_a);
}

/// Fail closed through a leader's death: agent pods are created while the leading controller
/// pod is deleted. Every agent pod that exists afterwards carries its gate, the Lease moves to
/// the other replica, and an un-injected pod labelled for injection is refused by the API
/// server itself, naming the policy.
#[test]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source; a node: root, containerd, runc; the container images): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test cluster_e2e"
)]
fn deleting_the_leading_controller_while_agents_scale_to_ten_never_lets_a_pod_run_ungated() {
    let Some(cluster) = cluster() else { return };
    let _serial = serial();
    let ns = unique("e2e-ha");
    let _release = cluster.install(&ns, &[]);
    cluster.kubectl_in(
        &["apply", "-n", &ns, "-f", "-"],
        &agent::fleet_policy(cluster, &ns, "proxy", &[]),
    );
    let leader = eventually(Duration::from_secs(60), "a replica holds the lease", || {
        let lease = cluster.json(&["-n", &ns, "get", "lease", "fleetgate-controller"]);
        lease["spec"]["holderIdentity"].as_str().map(str::to_string)
    });
    cluster.kubectl_in(&["apply", "-n", &ns, "-f", "-"], &agent::deployment(&ns));
    cluster.kubectl(&["-n", &ns, "scale", "deployment/hermes", "--replicas", "4"]);
    cluster.kubectl(&["-n", &ns, "delete", "pod", &leader, "--wait=false"]);
    cluster.kubectl(&["-n", &ns, "scale", "deployment/hermes", "--replicas", "10"]);
    agent::rollout(cluster, &ns);
    let pods = agent::pods(cluster, &ns);
    let running: Vec<&Value> = pods
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .collect();
    assert_eq!(running.len(), 10, "every agent replica must have started");
    for pod in &running {
        assert!(
            containers(pod).iter().any(|c| c == "fleetgate-proxy"),
            "agent pod {} started without its gate",
            pod["metadata"]["name"]
        );
        assert_eq!(
            pod["status"]["phase"], "Running",
            "{}",
            pod["metadata"]["name"]
        );
    }
    let moved = eventually(Duration::from_secs(60), "the lease moves", || {
        let lease = cluster.json(&["-n", &ns, "get", "lease", "fleetgate-controller"]);
        lease["spec"]["holderIdentity"]
            .as_str()
            .filter(|h| *h != leader)
            .map(str::to_string)
    });
    assert_ne!(
        moved, leader,
        "the lease must have moved off the deleted pod"
    );
    // A pod that dodges the webhook (its configuration deleted, as a misconfigured or bypassed
    // webhook would leave it) and forges the injected mark: the API server's own policy
    // refuses it.
    cluster.kubectl(&[
        "delete",
        "mutatingwebhookconfiguration",
        &format!("fleetgate-{ns}"),
    ]);
    let bare = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "bare",
            "namespace": ns,
            "labels": {"app": "hermes", "fleetgate.dev/inject": "enabled"},
            "annotations": {"fleetgate.dev/injected": "bypass"},
        },
        "spec": {"containers": [{"name": "agent", "image": cluster::AGENT_IMAGE}]},
    });
    let (ok, said) = cluster.kubectl_try(&["apply", "-n", &ns, "-f", "-"], Some(&bare.to_string()));
    assert!(
        !ok && said.contains(&format!("fleetgate-injected-{ns}")),
        "an un-injected labelled pod must be refused by the ValidatingAdmissionPolicy: {said}"
    );
}

/// A cluster baseline raises a namespace that asks for no capture: the cluster part is
/// installed, the release reads baselines, a FleetPolicy with `egress.mode: off` renders with
/// the forward proxy and says so in its `Baseline` condition.
#[test]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source; a node: root, containerd, runc; the container images): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test cluster_e2e"
)]
fn a_cluster_baseline_raises_a_namespace_that_asks_for_no_capture() {
    let Some(cluster) = cluster() else { return };
    let _serial = serial();
    let ns = unique("e2e-base");
    let suffix = ns.trim_start_matches("e2e-base-").to_string();
    let (release, name, role) = (
        format!("fleetgate-baseline-{suffix}"),
        format!("e2e-{suffix}"),
        format!("fleetgate-baseline-reader-{suffix}"),
    );
    let chart = cluster::workspace()
        .join("charts/fleetgate-baseline")
        .display()
        .to_string();
    cluster.helm(&[
        "install",
        &release,
        &chart,
        "--wait",
        "--set",
        &format!("baseline.name={name}"),
        "--set",
        &format!("readerClusterRole={role}"),
    ]);
    let _release = cluster.install(
        &ns,
        &[
            "--set",
            "clusterBaseline.enabled=true",
            "--set",
            &format!("clusterBaseline.readerClusterRole={role}"),
        ],
    );
    cluster.kubectl_in(
        &["apply", "-n", &ns, "-f", "-"],
        &agent::fleet_policy(cluster, &ns, "off", &[]),
    );
    let waited = cluster.kubectl_try(
        &[
            "-n",
            &ns,
            "wait",
            "--for=jsonpath={.status.conditions[?(@.type==\"Baseline\")].reason}=Applied",
            "fleetpolicy/fleet",
            "--timeout",
            WAIT,
        ],
        None,
    );
    let fp = cluster.json(&["-n", &ns, "get", "fleetpolicy", "fleet"]);
    let cm = cluster.json(&["-n", &ns, "get", "configmap", "fleet-managed"]);
    // Removing the baseline re-renders the namespace without it: read everything first.
    let _ = cluster.helm_try(&["uninstall", &release, "--wait"]);
    assert!(waited.0, "the baseline must apply: {}\n{fp}", waited.1);
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
    let policy = cm["data"]["policy.yaml"].as_str().unwrap_or_default();
    assert!(
        policy.contains("forwardProxy"),
        "the raised policy runs the forward proxy: {policy}\nConfigMap: {}\nFleetPolicy: {fp}\n{}",
        cm["metadata"],
        cluster.diagnose(&ns)
    );
}

/// Proxy mode, from inside a real agent pod: Hermes' `web_extract` gets the allowed page
/// through the gate's Firecrawl front and sees the gate's refusals; curl through `HTTP_PROXY`
/// is gated; the probes pass; a killed gate comes back; a policy edit lands without a restart.
#[test]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source; a node: root, containerd, runc; the container images): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test cluster_e2e"
)]
fn hermes_in_a_real_pod_reaches_the_web_only_through_its_gate() {
    let Some(cluster) = cluster() else { return };
    let _serial = serial();
    let ns = unique("e2e-egress");
    let _release = cluster.install(&ns, &[]);
    cluster.kubectl_in(
        &["apply", "-n", &ns, "-f", "-"],
        &agent::fleet_policy(cluster, &ns, "proxy", &["ads.fleet.test"]),
    );
    cluster.kubectl(&[
        "-n",
        &ns,
        "wait",
        "--for=condition=Ready",
        "fleetpolicy/fleet",
        "--timeout",
        WAIT,
    ]);
    agent::start_agents(cluster, &ns);
    let pod = one_pod(cluster, &ns);

    // The gate's readiness and liveness probes pass: the kubelet calls them on the pod's IP.
    let gate = agent::container_status(cluster, &ns, &pod, "fleetgate-proxy");
    assert_eq!(
        gate["ready"], true,
        "the gate's readiness probe must pass: {gate}"
    );
    assert_eq!(
        gate["restartCount"], 0,
        "the liveness probe must not restart it: {gate}"
    );

    // Hermes' own web_extract, in the agent container.
    let hits = cluster.origin.hits("/guide");
    let urls = [
        "http://docs.fleet.test/guide".to_string(),
        "http://meta.fleet.test/latest/meta-data/".to_string(),
        "http://ads.fleet.test/ad".to_string(),
    ];
    let result = hermes_web_extract(cluster, &ns, &pod, &urls);
    let rows = result["results"]
        .as_array()
        .unwrap_or_else(|| panic!("results expected: {result}"));
    assert_eq!(rows.len(), 3, "{result}");
    assert_eq!(
        rows[0]["error"],
        Value::Null,
        "the page must arrive through the gate: {result}"
    );
    assert_eq!(rows[0]["title"], "Fleet Docs");
    let content = rows[0]["content"].as_str().unwrap_or_default();
    assert!(content.starts_with("# Fleet docs"), "{content:.200}");
    assert_eq!(
        cluster.origin.hits("/guide"),
        hits + 1,
        "the gate fetched the page once"
    );
    assert!(
        cluster.dns.queries("meta.fleet.test") > 0,
        "the gate resolved the metadata name through the pods' name server"
    );
    let meta = rows[1]["error"].as_str().unwrap_or_default();
    assert!(
        meta.contains("ip_cloud_metadata"),
        "the gate's SSRF refusal: {meta}"
    );
    let ads = rows[2]["error"].as_str().unwrap_or_default();
    assert!(
        ads.contains("Blocked by website policy: 'ads.fleet.test'"),
        "the gate's blocklist refusal: {ads}"
    );
    assert_eq!(
        cluster.origin.hits("/ad"),
        0,
        "a blocklisted page is never fetched"
    );
    let allowed = decision(cluster, &ns, &pod, "docs.fleet.test/guide", |l| {
        l["verdict"] == "allow"
    });
    let refused = decision(cluster, &ns, &pod, "meta.fleet.test", |l| {
        l["verdict"] == "deny"
    });
    println!("decision (web_extract, allowed): {allowed}");
    println!("decision (web_extract, metadata): {refused}");

    // curl through the injected HTTP_PROXY: gated like any other fetch.
    let (ok, out) = curl(
        cluster,
        &ns,
        &pod,
        &["-i", "--max-time", "20", "http://ads.fleet.test/ad"],
    );
    assert!(
        ok && out.starts_with("HTTP/1.1 403") && out.contains("blocked_by_policy"),
        "curl through HTTP_PROXY must be refused by the gate: {out}"
    );
    let (ok, out) = curl(
        cluster,
        &ns,
        &pod,
        &["--max-time", "20", "http://docs.fleet.test/guide"],
    );
    assert!(
        ok && out.contains("Paragraph 399"),
        "curl through HTTP_PROXY must reach the page: {out}"
    );
    let proxied = decision(cluster, &ns, &pod, "ads.fleet.test", |l| {
        l["listener"] == "forward_proxy" && l["verdict"] == "deny"
    });
    println!("decision (curl via HTTP_PROXY, blocklisted): {proxied}");

    // A gate killed inside the pod is restarted by the kubelet; the agent's next fetch works.
    let killed = agent::kill_gate(cluster, &ns, &pod);
    eventually(
        Duration::from_secs(120),
        "the kubelet restarts the gate",
        || {
            let gate = agent::container_status(cluster, &ns, &pod, "fleetgate-proxy");
            (gate["restartCount"].as_u64() >= Some(1) && gate["ready"] == true).then_some(())
        },
    );
    let again = hermes_web_extract(cluster, &ns, &pod, &urls[..1]);
    assert_eq!(
        again["results"][0]["error"],
        Value::Null,
        "the fetch after the gate's restart (pid {killed} killed) must succeed: {again}"
    );

    // A policy edit reaches the running gate through the kubelet's volume refresh.
    let restarts =
        agent::container_status(cluster, &ns, &pod, "fleetgate-proxy")["restartCount"].clone();
    cluster.kubectl(&[
        "-n",
        &ns,
        "patch",
        "fleetpolicy",
        "fleet",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"websiteBlocklist":{"domains":["ads.fleet.test","docs.fleet.test"]}}}"#,
    ]);
    let refused = eventually(
        Duration::from_secs(180),
        "the edited blocklist takes effect",
        || {
            let (_, out) = curl(
                cluster,
                &ns,
                &pod,
                &["-i", "--max-time", "20", "http://docs.fleet.test/guide"],
            );
            out.contains("blocked_by_policy").then_some(out)
        },
    );
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    assert_eq!(
        agent::container_status(cluster, &ns, &pod, "fleetgate-proxy")["restartCount"],
        restarts,
        "the policy must take effect without a restart"
    );
}

/// Transparent mode: the injected init container installs the capture from inside the pod;
/// the agent's direct connections land on the gate (only the gate's uid goes out), and a
/// metadata fetch is refused.
#[test]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source; a node: root, containerd, runc; the container images): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test cluster_e2e"
)]
fn transparent_capture_from_the_init_container_catches_the_agents_direct_connections() {
    let Some(cluster) = cluster() else { return };
    let _serial = serial();
    let ns = unique("e2e-capture");
    let _release = cluster.install(&ns, &[]);
    cluster.kubectl_in(
        &["apply", "-n", &ns, "-f", "-"],
        &agent::fleet_policy(cluster, &ns, "transparent", &["ads.fleet.test"]),
    );
    cluster.kubectl(&[
        "-n",
        &ns,
        "wait",
        "--for=condition=Ready",
        "fleetpolicy/fleet",
        "--timeout",
        WAIT,
    ]);
    agent::start_agents(cluster, &ns);
    let pod = one_pod(cluster, &ns);
    let spec = cluster.json(&["-n", &ns, "get", "pod", &pod]);
    let init = spec["status"]["initContainerStatuses"][0].clone();
    assert_eq!(
        init["state"]["terminated"]["exitCode"], 0,
        "the capture init container must have run: {init}"
    );

    // A direct connection (no proxy variables in transparent mode) to the public address the
    // hosts file gives: captured, admitted by name, fetched from the origin by the gate.
    let hits = cluster.origin.hits("/guide");
    let (ok, out) = curl(
        cluster,
        &ns,
        &pod,
        &[
            "--noproxy",
            "*",
            "--max-time",
            "20",
            "http://docs.fleet.test/guide",
        ],
    );
    assert!(
        ok && out.contains("Paragraph 399"),
        "a direct connection must be captured and served: {out}"
    );
    assert_eq!(cluster.origin.hits("/guide"), hits + 1);
    let captured = decision(cluster, &ns, &pod, "docs.fleet.test/guide", |l| {
        l["listener"] == "transparent" && l["verdict"] == "allow"
    });
    assert_eq!(
        captured["original_dst"],
        format!("{}:80", cluster::PUBLIC),
        "the gate read the agent's original destination"
    );
    println!("decision (captured direct connection): {captured}");

    // The metadata name: captured, resolved by the gate, refused.
    let (_, out) = curl(
        cluster,
        &ns,
        &pod,
        &[
            "-i",
            "--noproxy",
            "*",
            "--max-time",
            "20",
            "http://meta.fleet.test/latest/meta-data/",
        ],
    );
    assert!(
        out.starts_with("HTTP/1.1 403"),
        "the metadata fetch must be refused: {out}"
    );
    let meta = decision(cluster, &ns, &pod, "meta.fleet.test", |l| {
        l["listener"] == "transparent" && l["verdict"] == "deny"
    });
    println!("decision (captured metadata fetch): {meta}");

    // Hermes' own web_extract still goes through the Firecrawl front.
    let result = hermes_web_extract(
        cluster,
        &ns,
        &pod,
        &["http://docs.fleet.test/guide".to_string()],
    );
    assert_eq!(result["results"][0]["error"], Value::Null, "{result}");

    // No other way out: the agent's uid cannot reach the origin's address directly on a port
    // the capture does not take to the gate either.
    let (ok, out) = curl(
        cluster,
        &ns,
        &pod,
        &[
            "--noproxy",
            "*",
            "--max-time",
            "5",
            &format!("http://{}:80/guide", cluster.gateway),
        ],
    );
    assert!(
        !out.contains("Paragraph 399"),
        "a raw-address connection must not reach the origin past the gate (ok={ok}): {out}"
    );

    // Every way out a process of the admitted agent holds: as its own uid (10000, the example)
    // and as root that admission lets in (SETUID, SETGID and NET_RAW dropped, no escalation).
    let agent = escape_probe(cluster, &ns, &pod, "hermes");
    assert_eq!(agent["uid"], 10000, "{agent}");
    assert_eq!(
        agent["cap_eff"], "0000000000000000",
        "no capability: {agent}"
    );
    assert_no_way_out(&agent);
    let root = agent::root_agent(cluster, &ns);
    let probe = escape_probe(cluster, &ns, &root, "hermes");
    assert_eq!(probe["uid"], 0, "{probe}");
    assert_no_way_out(&probe);
    let refused = decision(cluster, &ns, &root, "ads.fleet.test", |l| {
        l["listener"] == "transparent" && l["verdict"] == "deny"
    });
    println!("decision (root agent, direct to a blocklisted site): {refused}");
}

/// `tests/python/escape_probe.py` in `container`: what a process there can do to get out.
fn escape_probe(cluster: &Cluster, ns: &str, pod: &str, container: &str) -> Value {
    let script = std::fs::read_to_string(cluster::workspace().join("tests/python/escape_probe.py"))
        .expect("the probe must exist");
    let (ok, out) = agent::exec(
        cluster,
        ns,
        pod,
        container,
        &[
            "/opt/hermes/bin/python",
            "-",
            "15000",
            cluster::PUBLIC,
            "ads.fleet.test",
        ],
        Some(&script),
    );
    assert!(ok, "the probe must run in {pod}/{container}: {out}");
    let start = out
        .find('{')
        .unwrap_or_else(|| panic!("JSON expected: {out}"));
    let probe: Value =
        serde_json::from_str(&out[start..]).unwrap_or_else(|e| panic!("the probe ({e}): {out}"));
    println!("escape probe in {pod}/{container}: {probe}");
    probe
}

/// No capability, no switch to the gate's identity, no packet or raw socket, UDP refused, and
/// TCP to a blocklisted site (by address or by name) captured and refused by the gate.
fn assert_no_way_out(probe: &Value) {
    // SETGID 6, SETUID 7, NET_ADMIN 12, NET_RAW 13, SYS_PTRACE 19, SYS_ADMIN 21.
    let caps = probe["cap_eff"]
        .as_str()
        .and_then(|c| u64::from_str_radix(c, 16).ok())
        .unwrap_or_else(|| panic!("CapEff expected: {probe}"));
    for bit in [6, 7, 12, 13, 19, 21] {
        assert_eq!(caps & (1 << bit), 0, "capability {bit} held: {probe}");
    }
    assert_eq!(probe["no_new_privs"], "1", "{probe}");
    for attempt in ["setuid_gate", "setgid_gate", "packet_socket", "raw_socket"] {
        assert_eq!(probe[attempt], "PermissionError", "{attempt}: {probe}");
    }
    assert_eq!(probe["udp"], "refused", "{probe}");
    for tcp in ["tcp_by_address", "tcp_by_name"] {
        assert_eq!(probe[tcp], "HTTP/1.1 403 Forbidden", "{tcp}: {probe}");
    }
}
