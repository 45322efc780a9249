//! `tests/run k8s-up`: start the control plane the real-cluster suite uses (etcd,
//! kube-apiserver, kube-controller-manager on loopback), print its kubeconfig and wait for
//! Ctrl-C, so a failing case can be replayed by hand with kubectl and helm.

use fleetgate_e2e::k8s::ControlPlane;

#[allow(
    clippy::print_stdout,
    reason = "the kubeconfig path is this program's output"
)]
fn main() -> anyhow::Result<()> {
    let plane = ControlPlane::start()?;
    println!("control plane up: {}", plane.api_url());
    println!("binaries: {}", plane.bin().display());
    println!("logs: {}", plane.dir().display());
    println!("export KUBECONFIG={}", plane.kubeconfig().display());
    println!("Ctrl-C stops it and removes {}", plane.dir().display());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(tokio::signal::ctrl_c())?;
    drop(plane);
    Ok(())
}
