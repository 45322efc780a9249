//! Real-cluster cases that change what every namespace shares — the control plane's own
//! processes and cluster-scoped policy — on a control plane of this test binary's own, so
//! they cannot disturb the `k8s` suite's cases; here they run one at a time ([`serial`]).
//!
//! - `outage`: two controller replicas ride out a 30 s API server outage and an etcd restart;
//!   only the Lease holder ever writes.
//! - `baseline`: a ClusterFleetPolicy read with `--cluster-baseline` raises a namespace; a
//!   conflicting one keeps the namespace's last good ConfigMap.
//!
//! `tests/run k8s` runs it with the suite; opt-in like it (feature `real-cluster`: ignored under
//! a plain `cargo test`).

#![allow(clippy::expect_used, clippy::print_stdout)]

#[path = "k8s_cluster_wide/baseline.rs"]
mod baseline;
#[path = "k8s_cluster_wide/outage.rs"]
mod outage;
#[path = "k8s/replica.rs"]
mod replica;
#[allow(
    dead_code,
    reason = "shared with the k8s suite, of which this binary uses a part"
)]
#[path = "k8s/support.rs"]
mod support;

/// Held by each case for its whole run: they change what the others would read.
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    SERIAL.lock().await
}
