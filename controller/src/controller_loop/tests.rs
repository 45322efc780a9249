//! Which FleetPolicies a pod's change requeues. The loop itself runs in
//! `crate::cluster_baselines`' tests (against a mocked API server) and in
//! `tests/tests/k8s/controller.rs` (on kube-apiserver).

use std::collections::BTreeMap;

use super::*;

#[test]
fn pods_requeue_the_policies_selecting_them() {
    let mine = Arc::new(FleetPolicy::test());
    let mut other_ns = FleetPolicy::test();
    other_ns.metadata.namespace = Some("elsewhere".into());
    let policies = vec![mine, Arc::new(other_ns)];
    let pod = |ns: &str, app: &str| Pod {
        metadata: kube::api::ObjectMeta {
            name: Some("agent-0".into()),
            namespace: Some(ns.into()),
            labels: Some(BTreeMap::from([("app".to_string(), app.to_string())])),
            ..Default::default()
        },
        ..Default::default()
    };
    let cases = [
        ("agents", "hermes", 1),
        ("agents", "web", 0),
        ("other", "hermes", 0),
    ];
    for (ns, app, want) in cases {
        let got = policies_selecting(&policies, &pod(ns, app));
        assert_eq!(
            got.len(),
            want,
            "a pod app={app} in {ns} must requeue {want} policies"
        );
    }
}
