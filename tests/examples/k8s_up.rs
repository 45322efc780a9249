//! `tests/run k8s-up`: start the control plane the real-cluster suite uses (etcd,
//! kube-apiserver, kube-controller-manager on loopback), print its kubeconfig and wait for
//! Ctrl-C, so a failing case can be replayed by hand with kubectl and helm.
//!
//! `tests/run k8s-up --node` (as root) adds a real node: kube-scheduler, a kubelet, containerd
//! and runc on a CNI bridge (`fleetgate_e2e::k8s::node`), with the probe image
//! (`localhost/fleetgate-node-probe:1`) and any image archives given after `--node`
//! imported; Ctrl-C also removes what the node added to the machine.

use std::path::PathBuf;

use fleetgate_e2e::k8s::ControlPlane;
use fleetgate_e2e::k8s::node::{Node, NodeOptions};

#[allow(
    clippy::print_stdout,
    reason = "the kubeconfig path is this program's output"
)]
fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let with_node = args.next().as_deref() == Some("--node");
    let images: Vec<PathBuf> = args.map(PathBuf::from).collect();
    let plane = if with_node {
        ControlPlane::start_for_node()?
    } else {
        ControlPlane::start()?
    };
    println!("control plane up: {}", plane.api_url());
    println!("binaries: {}", plane.bin().display());
    println!("logs: {}", plane.dir().display());
    let node = if with_node {
        let started = std::time::SystemTime::now();
        let mut options = NodeOptions::probe()?;
        options.images.extend(images);
        let node = Node::start(&plane, options)?;
        println!(
            "node {} Ready in {:.1} s: pods {} (gateway {}), containerd {}",
            node.name(),
            started.elapsed().unwrap_or_default().as_secs_f64(),
            node.pod_cidr(),
            node.gateway(),
            node.containerd_socket().display()
        );
        println!("pod logs: {}", node.pod_logs_dir().display());
        println!(
            "images: ctr -a {} -n k8s.io images ls",
            node.containerd_socket().display()
        );
        Some(node)
    } else {
        None
    };
    println!("export KUBECONFIG={}", plane.kubeconfig().display());
    println!("Ctrl-C stops it and removes {}", plane.dir().display());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(tokio::signal::ctrl_c())?;
    drop(node);
    drop(plane);
    Ok(())
}
