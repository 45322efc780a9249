//! A real node: the control plane of `fleetgate_e2e::k8s` started for a node, kube-scheduler,
//! and a kubelet running pods with containerd and runc on a CNI bridge
//! (`fleetgate_e2e::k8s::node`), one per test binary, one namespace per case. The pods run the
//! probe image `tests/k8s/build.sh --node` packs (`localhost/fleetgate-node-probe:1`, also the
//! sandbox image): one static program that pauses, serves HTTP, dials out or calls the API
//! server, and logs what it sees.
//!
//! - The Node registers, Ready, on the gateway address, with the pinned kubelet and containerd.
//! - A two-container pod is scheduled and runs: the kubelet's readiness probe reaches one
//!   container from the host; the other connects to a TCP server this test runs on the
//!   gateway, from the pod's own IP in the pod range; both logs are read back.
//! - A container whose liveness probe fails is restarted by the kubelet; its neighbour,
//!   probed successfully, is not.
//! - A Deployment scaled from 1 to 3 gets 3 running pods with distinct pod IPs.
//! - A container's `hostPort` (CNI `portmap`) forwards the host's port to it, and deleting the
//!   pod closes the port again. The port is taken below the ephemeral range, so no loopback
//!   server of another test binary can be handed it while the rule lives.
//! - The `kubernetes` Service works from a pod: `GET /version` on `10.96.0.1:443`, verified
//!   with the ServiceAccount's CA and authenticated with its token.
//!
//! Needs root, containerd, runc, the CNI plugins, ip and iptables (`k8s::node::missing`); it
//! skips when they are missing unless `FLEETGATE_REQUIRE_K8S_NODE` is set (`tests/run` sets it as
//! root), and then fails instead. Opt-in (feature `real-cluster`: ignored under a plain `cargo
//! test`); `tests/run k8s` runs it; `tests/run k8s-up --node` starts the same for a person.

#![allow(clippy::expect_used, clippy::print_stdout)]

use std::net::Ipv4Addr;
use std::time::Duration;

use fleetgate_e2e::k8s::node::{self, Cluster, PROBE_IMAGE};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};

/// The shared node, or `None` (after saying why) when this machine cannot run one and
/// `FLEETGATE_REQUIRE_K8S_NODE` is unset.
fn cluster() -> Option<&'static Cluster> {
    let missing = node::missing();
    if !missing.is_empty() {
        assert!(
            std::env::var_os(node::REQUIRE_ENV).is_none(),
            "{}=1 but this machine lacks: {}",
            node::REQUIRE_ENV,
            missing.join(", ")
        );
        println!(
            "skipped: a real node needs root, containerd, ctr, runc, the CNI plugins, ip and iptables (missing: {})",
            missing.join(", ")
        );
        return None;
    }
    Some(node::shared())
}

/// A pod of probe containers: `(name, args, extra container fields)`.
fn probe_pod(name: &str, containers: &[(&str, &[&str], serde_json::Value)]) -> Pod {
    let containers: Vec<serde_json::Value> = containers
        .iter()
        .map(|(name, args, extra)| {
            let mut c = json!({
                "name": name,
                "image": PROBE_IMAGE,
                "imagePullPolicy": "Never",
                "args": args,
            });
            if let (Some(c), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
                c.extend(extra.clone());
            }
            c
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": { "terminationGracePeriodSeconds": 1, "containers": containers },
    }))
    .expect("a valid pod")
}

/// Poll `check` every 250 ms until it returns `Some`, or fail after `timeout` with `what`, the
/// last value seen and the node's logs.
async fn wait_for<T, F, Fut>(cluster: &Cluster, what: &str, timeout: Duration, check: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match check().await {
            Ok(value) => return value,
            Err(last) if tokio::time::Instant::now() > deadline => panic!(
                "{what} within {timeout:?}; last seen: {last}\n{}",
                cluster.node.logs_tail(30)
            ),
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

fn in_pod_range(ip: &str) -> bool {
    ip.parse::<Ipv4Addr>()
        .is_ok_and(|ip| ip.octets()[..3] == [10, 244, 0] && ip.octets()[3] > 1)
}

fn restarts(pod: &Pod, container: &str) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == container))
        .map_or(0, |c| c.restart_count)
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source; a node: root, containerd, runc): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s_node"
)]
async fn the_node_registers_ready_on_the_gateway() {
    let Some(cluster) = cluster() else { return };
    let client = cluster.plane.client().await.expect("client");
    let node = Api::<Node>::all(client)
        .get(node::NODE_NAME)
        .await
        .expect("the Node exists");
    let status = node.status.expect("a Node status");
    let conditions = status.conditions.unwrap_or_default();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        "the Node is Ready: {conditions:?}"
    );
    let addresses = status.addresses.unwrap_or_default();
    assert!(
        addresses
            .iter()
            .any(|a| a.type_ == "InternalIP" && a.address == node::GATEWAY.to_string()),
        "the Node's InternalIP is the gateway: {addresses:?}"
    );
    let info = status.node_info.expect("node info");
    assert_eq!(info.kubelet_version, fleetgate_e2e::k8s::K8S_VERSION);
    assert!(
        info.container_runtime_version.starts_with("containerd://"),
        "{}",
        info.container_runtime_version
    );
    let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
    assert!(
        taints.iter().all(|t| t.effect != "NoSchedule"),
        "schedulable: {taints:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source; a node: root, containerd, runc): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s_node"
)]
async fn a_pod_runs_is_probed_from_the_host_and_reaches_the_host() {
    let Some(cluster) = cluster() else { return };
    let client = cluster.plane.client().await.expect("client");
    let ns = cluster
        .plane
        .namespace(&client, "node-pod")
        .await
        .expect("namespace");
    // A TCP server of the host, on the gateway: what an origin a pod calls would be.
    let listener = tokio::net::TcpListener::bind((node::GATEWAY, 0))
        .await
        .expect("listen on the gateway");
    let port = listener.local_addr().expect("addr").port();
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((stream, peer)) = listener.accept().await {
            let seen_tx = seen_tx.clone();
            tokio::spawn(async move {
                let mut line = String::new();
                let mut reader = tokio::io::BufReader::new(stream);
                if reader.read_line(&mut line).await.is_ok() {
                    let _ = seen_tx.send((peer.ip().to_string(), line.trim().to_string()));
                }
            });
        }
    });
    let token = format!("hello-from-{ns}");
    let target = format!("{}:{port}", node::GATEWAY);
    let pod = probe_pod(
        "web",
        &[
            (
                "web",
                &["serve", ":8080"],
                json!({ "readinessProbe": {
                    "httpGet": { "path": "/healthz", "port": 8080 }, "periodSeconds": 1,
                }}),
            ),
            ("dial", &["dial", &target, &token], json!({})),
        ],
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let created = std::time::SystemTime::now();
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create the pod");
    let pod = wait_for(
        cluster,
        "the pod was not Ready",
        Duration::from_secs(90),
        || {
            let pods = pods.clone();
            async move {
                let pod = pods.get("web").await.map_err(|e| e.to_string())?;
                if is_ready(&pod) {
                    Ok(pod)
                } else {
                    Err(format!("{:?}", pod.status))
                }
            }
        },
    )
    .await;
    println!(
        "pod Ready {:.1} s after it was created",
        created.elapsed().unwrap_or_default().as_secs_f64()
    );
    let spec = pod.spec.as_ref().expect("spec");
    assert_eq!(
        spec.node_name.as_deref(),
        Some(node::NODE_NAME),
        "scheduled"
    );
    let pod_ip = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .expect("a pod IP");
    assert!(in_pod_range(&pod_ip), "{pod_ip} is in {}", node::POD_CIDR);

    // The pod reached the host's server from its own address.
    let (peer, line) = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let (peer, line) = seen.recv().await.expect("the server runs");
            if line == token {
                return (peer, line);
            }
        }
    })
    .await
    .expect("the pod connected to the gateway");
    assert_eq!(peer, pod_ip, "the connection came from the pod's IP");
    assert_eq!(line, token);

    // The readiness probe came from the host (the gateway is the host's address on the
    // bridge); the dialer logged its connection. Read from the kubelet's files and through
    // the API (`pods/log`: the API server calls the kubelet).
    let web_log = wait_for(
        cluster,
        "the web container did not log the kubelet's probe",
        Duration::from_secs(20),
        || async {
            let log = cluster
                .node
                .container_log(&ns, "web", "web")
                .map_err(|e| e.to_string())?;
            if log.contains(&format!("GET /healthz from {}:", node::GATEWAY)) {
                Ok(log)
            } else {
                Err(log)
            }
        },
    )
    .await;
    assert!(web_log.contains("probe: serving on :8080"), "{web_log}");
    let dial_log = pods
        .logs(
            "web",
            &kube::api::LogParams {
                container: Some("dial".into()),
                ..Default::default()
            },
        )
        .await
        .expect("pods/log through the API server");
    assert!(
        dial_log.contains(&format!("probe: dialed {target} from {pod_ip}:")),
        "{dial_log}"
    );
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source; a node: root, containerd, runc): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s_node"
)]
async fn a_failing_liveness_probe_restarts_only_its_container() {
    let Some(cluster) = cluster() else { return };
    let client = cluster.plane.client().await.expect("client");
    let ns = cluster
        .plane
        .namespace(&client, "node-liveness")
        .await
        .expect("namespace");
    let pod = probe_pod(
        "liveness",
        &[
            (
                // Nothing listens on 9999: every probe fails.
                "dead",
                &["pause"],
                json!({ "livenessProbe": {
                    "httpGet": { "path": "/healthz", "port": 9999 },
                    "periodSeconds": 1, "failureThreshold": 1,
                }}),
            ),
            (
                "alive",
                &["serve", ":8080"],
                // Probed as often, but tolerant of a slow start on a busy machine.
                json!({ "livenessProbe": {
                    "httpGet": { "path": "/healthz", "port": 8080 },
                    "initialDelaySeconds": 2, "periodSeconds": 1, "timeoutSeconds": 5,
                    "failureThreshold": 5,
                }}),
            ),
        ],
    );
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create the pod");
    let pod = wait_for(
        cluster,
        "the kubelet did not restart the failing container twice",
        Duration::from_secs(120),
        || {
            let pods = pods.clone();
            async move {
                let pod = pods.get("liveness").await.map_err(|e| e.to_string())?;
                if restarts(&pod, "dead") >= 2 {
                    Ok(pod)
                } else {
                    Err(format!("{:?}", pod.status))
                }
            }
        },
    )
    .await;
    assert_eq!(
        restarts(&pod, "alive"),
        0,
        "the container whose probe passes is left alone: {:?}",
        pod.status
    );
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source; a node: root, containerd, runc): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s_node"
)]
async fn a_deployment_scaled_to_three_runs_three_pods() {
    let Some(cluster) = cluster() else { return };
    let client = cluster.plane.client().await.expect("client");
    let ns = cluster
        .plane
        .namespace(&client, "node-deploy")
        .await
        .expect("namespace");
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "probes" },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": "probes" } },
            "template": {
                "metadata": { "labels": { "app": "probes" } },
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{
                        "name": "web", "image": PROBE_IMAGE, "imagePullPolicy": "Never",
                        "args": ["serve", ":8080"],
                        "readinessProbe": {
                            "httpGet": { "path": "/healthz", "port": 8080 }, "periodSeconds": 1,
                        },
                    }],
                },
            },
        },
    }))
    .expect("a valid deployment");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create the deployment");
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    let ready_ips = |want: usize| {
        let pods = pods.clone();
        async move {
            let list = pods
                .list(&ListParams::default().labels("app=probes"))
                .await
                .map_err(|e| e.to_string())?;
            let ips: Vec<String> = list
                .items
                .iter()
                .filter(|p| is_ready(p) && p.metadata.deletion_timestamp.is_none())
                .filter_map(|p| p.status.as_ref()?.pod_ip.clone())
                .collect();
            if ips.len() == want && list.items.len() == want {
                Ok(ips)
            } else {
                Err(format!("{} pods, ready on {ips:?}", list.items.len()))
            }
        }
    };
    wait_for(
        cluster,
        "one replica was not Ready",
        Duration::from_secs(90),
        || ready_ips(1),
    )
    .await;
    deployments
        .patch(
            "probes",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "replicas": 3 } })),
        )
        .await
        .expect("scale to 3");
    let mut ips = wait_for(
        cluster,
        "three replicas were not Ready",
        Duration::from_secs(90),
        || ready_ips(3),
    )
    .await;
    assert!(ips.iter().all(|ip| in_pod_range(ip)), "{ips:?}");
    ips.sort();
    ips.dedup();
    assert_eq!(ips.len(), 3, "three distinct pod IPs: {ips:?}");
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source; a node: root, containerd, runc): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s_node"
)]
async fn the_kubernetes_service_reaches_the_api_server_from_a_pod() {
    let Some(cluster) = cluster() else { return };
    let client = cluster.plane.client().await.expect("client");
    let ns = cluster
        .plane
        .namespace(&client, "node-service")
        .await
        .expect("namespace");
    let pod = probe_pod("api", &[("api", &["apiserver"], json!({}))]);
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create the pod");
    let service = format!("https://{}:443/version", node::KUBERNETES_SERVICE_IP);
    let log = wait_for(
        cluster,
        "the pod did not get /version through the kubernetes Service",
        Duration::from_secs(90),
        || async {
            let log = cluster
                .node
                .container_log(&ns, "api", "api")
                .map_err(|e| e.to_string())?;
            if log.contains(&format!("probe: GET {service}: 200 ")) {
                Ok(log)
            } else {
                Err(log)
            }
        },
    )
    .await;
    assert!(
        log.contains(&format!(
            "\"gitVersion\":\"{}\"",
            fleetgate_e2e::k8s::K8S_VERSION
        )),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source; a node: root, containerd, runc): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s_node"
)]
async fn a_host_port_forwards_to_the_pod() {
    let Some(cluster) = cluster() else { return };
    let client = cluster.plane.client().await.expect("client");
    let ns = cluster
        .plane
        .namespace(&client, "node-hostport")
        .await
        .expect("namespace");
    let host_port = free_port_below_ephemeral_range();
    let pod = probe_pod(
        "hostport",
        &[(
            "web",
            &["serve", ":8080"],
            json!({ "ports": [{ "containerPort": 8080, "hostPort": host_port }] }),
        )],
    );
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create the pod");
    // Until the container serves, the port is closed or the connection is reset.
    let answer = wait_for(
        cluster,
        "the host port did not answer with the pod's server",
        Duration::from_secs(90),
        || async move {
            let mut stream = tokio::net::TcpStream::connect((node::GATEWAY, host_port))
                .await
                .map_err(|e| e.to_string())?;
            stream
                .write_all(b"GET /healthz HTTP/1.0\r\n\r\n")
                .await
                .map_err(|e| e.to_string())?;
            let mut answer = String::new();
            stream
                .read_to_string(&mut answer)
                .await
                .map_err(|e| e.to_string())?;
            if answer.starts_with("HTTP/1.0 200") {
                Ok(answer)
            } else {
                Err(answer)
            }
        },
    )
    .await;
    assert!(answer.ends_with("ok\n"), "{answer}");

    // Deleted, the pod takes its forwarding with it (the kubelet's CNI DEL): the port is closed.
    pods.delete("hostport", &Default::default())
        .await
        .expect("delete the pod");
    wait_for(
        cluster,
        "the host port still answered after its pod was deleted",
        Duration::from_secs(60),
        || {
            let pods = pods.clone();
            async move {
                let gone = pods
                    .get_opt("hostport")
                    .await
                    .map_err(|e| e.to_string())?
                    .is_none();
                let closed = tokio::net::TcpStream::connect((node::GATEWAY, host_port))
                    .await
                    .is_err();
                if gone && closed {
                    Ok(())
                } else {
                    Err(format!(
                        "pod object present: {}, port open: {}",
                        !gone, !closed
                    ))
                }
            }
        },
    )
    .await;
}

/// A host port no `bind(port 0)` of another test can be handed while the hostPort rule lives:
/// free, and below the kernel's ephemeral range (`ip_local_port_range`). The rule DNATs every
/// local address on that port, 127.0.0.1 included, so a loopback server of a test binary that
/// runs while the node is being torn down must never sit on it.
fn free_port_below_ephemeral_range() -> u16 {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .expect("read ip_local_port_range");
    let low: u16 = range
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("the range's low end");
    assert!(
        low > 10_000,
        "an ephemeral range starting at {low} leaves no room below it"
    );
    // Start somewhere in the 8,000 ports below the range so two runs rarely try the same one.
    let span = 8_000u16.min(low - 2_000);
    let offset = (std::process::id() % u32::from(span)) as u16;
    (0..span)
        .map(|i| low - 1 - (offset + i) % span)
        .find(|&port| std::net::TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).is_ok())
        .expect("a free port below the ephemeral range")
}
