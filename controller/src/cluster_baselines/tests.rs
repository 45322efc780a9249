//! The controller loop under cluster baselines, against a mocked API server holding three
//! namespaces: a baseline change re-renders every namespace once, a namespace asking for
//! `egress.mode: off` under `minimumMode: proxy` is raised with the condition saying so, a
//! refusal keeps the last good ConfigMap, and unreadable baselines render nothing.
//!
//! Real-server twin: `tests/tests/k8s_cluster_wide/baseline.rs` (a baseline chart raising a
//! namespace, a conflicting ClusterFleetPolicy keeping its last good ConfigMap, on
//! kube-apiserver); the cases here keep unreadable baselines and the three-namespace fan-out.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::*;
use crate::controller_loop;
use crate::crd::cluster_fleet_policy::{ClusterFleetPolicySpec, MinimumMode};
use crate::crd::{EgressMode, FleetPolicy};
use crate::fixtures::fleet::FleetCluster;
use crate::metrics::Metrics;
use crate::reconcile::Context;
use crate::webhook::PolicySource;
use crate::webhook::egress_floor::EgressFloor;

const NAMESPACES: [&str; 3] = ["team-a", "team-b", "team-c"];

fn policies() -> Vec<FleetPolicy> {
    NAMESPACES
        .iter()
        .map(|ns| {
            let mut fp = FleetPolicy::test();
            fp.metadata.namespace = Some(ns.to_string());
            fp.metadata.uid = Some(format!("uid-{ns}"));
            if *ns == "team-b" {
                fp.spec.egress.mode = Some(EgressMode::Off);
            }
            fp
        })
        .collect()
}

fn baseline(name: &str, edit: impl FnOnce(&mut ClusterFleetPolicySpec)) -> ClusterFleetPolicy {
    let mut spec = ClusterFleetPolicySpec::default();
    edit(&mut spec);
    ClusterFleetPolicy::new(name, spec)
}

struct Running {
    metrics: Metrics,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn start(cluster: &FleetCluster) -> Running {
    let client = cluster.client();
    let metrics = Metrics::unregistered().expect("metrics must register");
    let (view, changes, reflector) = ClusterBaselines::watch(client.clone());
    let ctx = Context::new(client, metrics.clone(), None).with_baselines(view);
    let run = tokio::spawn(async move {
        controller_loop::run(
            Arc::new(ctx),
            None,
            Arc::new(AtomicBool::new(false)),
            changes,
        )
        .await;
    });
    Running {
        metrics,
        tasks: vec![run, reflector],
    }
}

async fn until(limit: Duration, what: &str, check: impl Fn() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < limit, "{what} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Wait until every namespace's ConfigMap has been written `times` times.
async fn every_namespace_written(cluster: &FleetCluster, times: usize) {
    until(Duration::from_secs(10), "every namespace written", || {
        NAMESPACES
            .iter()
            .all(|ns| cluster.config_map_writes(ns) == times)
    })
    .await;
}

fn condition(status: &Value, kind: &str) -> Value {
    status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind).cloned())
        .unwrap_or(Value::Null)
}

fn message(status: &Value, kind: &str) -> String {
    condition(status, kind)["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn a_baseline_change_re_renders_every_namespace_once_and_raises_the_one_asking_for_off() {
    let cluster = FleetCluster::with_policies(policies());
    let _running = start(&cluster).await;
    let limit = Duration::from_secs(10);
    every_namespace_written(&cluster, 1).await;
    let off = cluster
        .policy_yaml("team-b", "fleet-managed")
        .expect("team-b has a policy");
    assert!(
        !off.contains("forwardProxy"),
        "off renders no forward proxy yet"
    );
    let status = cluster.last_status("team-b", "fleet").expect("a status");
    assert_eq!(condition(&status, "Baseline")["reason"], "NoBaseline");

    cluster.put_baseline(baseline("platform", |b| {
        b.egress.minimum_mode = Some(MinimumMode::Proxy);
        b.website_blocklist.domains = vec!["*.casino.example".into()];
    }));
    every_namespace_written(&cluster, 2).await;
    let raised = cluster
        .policy_yaml("team-b", "fleet-managed")
        .expect("team-b has a policy");
    assert!(
        raised.contains("forwardProxy"),
        "team-b now runs the forward proxy:\n{raised}"
    );
    for ns in NAMESPACES {
        let yaml = cluster.policy_yaml(ns, "fleet-managed").unwrap_or_default();
        assert!(
            yaml.contains("*.casino.example"),
            "{ns} carries the baseline's rule:\n{yaml}"
        );
    }
    until(limit, "the raised namespace's condition", || {
        cluster
            .last_status("team-b", "fleet")
            .is_some_and(|s| condition(&s, "Baseline")["reason"] == "Applied")
    })
    .await;
    let status = cluster.last_status("team-b", "fleet").expect("a status");
    assert_eq!(condition(&status, "Baseline")["status"], "True");
    let said = message(&status, "Baseline");
    assert!(said.contains("platform (generation 1)"), "{said}");
    assert!(
        said.contains("spec.egress.mode: off raised to proxy"),
        "{said}"
    );
    let a = cluster.last_status("team-a", "fleet").expect("a status");
    assert!(
        !message(&a, "Baseline").contains("spec.egress.mode"),
        "team-a was not raised"
    );

    // Nothing more is written once every namespace runs the new render.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for ns in NAMESPACES {
        assert_eq!(
            cluster.config_map_writes(ns),
            2,
            "{ns} is written once per change"
        );
    }
}

#[tokio::test]
async fn a_baseline_that_leaves_no_port_is_a_conflict_and_the_last_good_config_map_stays() {
    let cluster = FleetCluster::with_policies(policies());
    let _running = start(&cluster).await;
    let limit = Duration::from_secs(10);
    every_namespace_written(&cluster, 1).await;
    let before = cluster.policy_yaml("team-a", "fleet-managed");
    cluster.put_baseline(baseline("ssh-only", |b| b.egress.ports = Some(vec![22])));
    until(limit, "the conflict condition", || {
        cluster
            .last_status("team-a", "fleet")
            .is_some_and(|s| condition(&s, "Baseline")["reason"] == "Conflict")
    })
    .await;
    let status = cluster.last_status("team-a", "fleet").expect("a status");
    assert_eq!(condition(&status, "Baseline")["status"], "False");
    assert!(message(&status, "Baseline").contains("spec.egress.ports"));
    assert_eq!(condition(&status, "Ready")["reason"], "KeptLastGood");
    assert_eq!(cluster.config_map_writes("team-a"), 1, "nothing is applied");
    assert_eq!(cluster.policy_yaml("team-a", "fleet-managed"), before);
}

#[tokio::test]
async fn baselines_that_cannot_be_listed_render_nothing() {
    let cluster = FleetCluster::with_policies(policies());
    cluster.forbid_baselines();
    let running = start(&cluster).await;
    let failures = || {
        running
            .metrics
            .failures
            .with_label_values(&["baseline_unavailable"])
            .get()
    };
    until(
        Duration::from_secs(10),
        "a failed reconcile per namespace",
        || failures() >= 3,
    )
    .await;
    for ns in NAMESPACES {
        assert_eq!(cluster.config_map_writes(ns), 0, "{ns} renders nothing");
        assert!(
            cluster.last_status(ns, "fleet").is_none(),
            "{ns} writes no status"
        );
    }
}

#[test]
fn the_webhook_injects_the_baselines_floor_for_a_namespace_asking_for_less() {
    use crate::webhook::mutate::{Decision, mutate};
    let source = EgressFloor {
        policies: policies().into_iter().map(Arc::new).collect::<Vec<_>>(),
        baselines: ClusterBaselines::fixed(vec![baseline("capture-all", |b| {
            b.egress.minimum_mode = Some(MinimumMode::Transparent)
        })]),
    };
    let raised = source.policies("team-b");
    assert_eq!(raised.len(), 1);
    assert_eq!(raised[0].spec.egress.mode, Some(EgressMode::Transparent));
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "agent-0", "namespace": "team-b",
                     "labels": {"app": "hermes", "fleetgate.dev/inject": "enabled"}},
        // A uid of its own: under capture the image's user is refused.
        "spec": {"containers": [{"name": "hermes", "image": "hermes:0.19.0",
                                 "securityContext": {"runAsUser": 1000}}]}
    }))
    .expect("a pod");
    let cfg = crate::webhook::config::InjectorConfig::with_image(
        "ghcr.io/fleetgate/fleetgate-proxy:0.1.0",
    );
    let Decision::Patch { ops, .. } = mutate(&pod, "team-b", &[raised[0].as_ref()], &cfg) else {
        panic!("the pod must be patched");
    };
    assert!(
        ops.iter().any(|o| o.path == "/spec/initContainers"),
        "the raised pod gets the capture init container"
    );
    let unraised = EgressFloor {
        policies: policies().into_iter().map(Arc::new).collect::<Vec<_>>(),
        baselines: ClusterBaselines::fixed(Vec::new()),
    };
    assert_eq!(
        unraised.policies("team-b")[0].spec.egress.mode,
        Some(EgressMode::Off),
        "without a baseline the namespace's mode stands"
    );
}
