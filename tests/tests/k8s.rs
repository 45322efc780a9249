//! fleetgate against a real Kubernetes control plane: etcd, kube-apiserver and
//! kube-controller-manager of the release `tests/k8s/` pins, built from source and started on
//! loopback by `fleetgate_e2e::k8s` (one per test binary, one namespace per test). Every case
//! asserts what the API server itself did — accepted, refused (and with which message),
//! stored, garbage-collected — through kube-rs, kubectl 1.37 and helm v4/v3 as a user would.
//! No kubelet and no scheduler: pods are stored, never run (where a case needs a pod's
//! status, the suite writes it as the kubelet would). The cases that stop control-plane
//! processes or change cluster-scoped policy run in `k8s_cluster_wide.rs`, on a control
//! plane of their own.
//!
//! Opt-in (fleetgate-e2e's feature `real-cluster`, which `tests/run` turns on): a plain `cargo
//! test` lists every case as ignored, naming the command that runs it. `tests/run k8s` runs the
//! real-cluster suites; `cargo test -p fleetgate-e2e --features real-cluster --test k8s` this
//! one; `tests/run k8s-up` starts the same control plane for a person. A missing control-plane
//! binary is built; a build that fails fails every case with go's own output.

// Helpers outside `#[test]` functions fail the test on broken setup, exactly as the tests do.
#![allow(clippy::expect_used, clippy::print_stdout)]

#[path = "k8s/admission.rs"]
mod admission;
#[path = "k8s/budget.rs"]
mod budget;
#[path = "k8s/charts.rs"]
mod charts;
#[path = "k8s/controller.rs"]
mod controller;
#[path = "k8s/crds.rs"]
mod crds;
#[path = "k8s/fleet.rs"]
mod fleet;
#[path = "k8s/golden.rs"]
mod golden;
#[path = "k8s/leader.rs"]
mod leader;
#[path = "k8s/rbac.rs"]
mod rbac;
#[allow(
    dead_code,
    reason = "shared with k8s_cluster_wide.rs, which uses the rest of it"
)]
#[path = "k8s/replica.rs"]
mod replica;
#[path = "k8s/support.rs"]
mod support;
#[path = "k8s/violations.rs"]
mod violations;
#[path = "k8s/webhook.rs"]
mod webhook;
