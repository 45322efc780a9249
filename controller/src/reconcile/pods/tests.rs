use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use kube::runtime::reflector;
use kube::runtime::watcher::Event;

use super::*;

fn pod(ns: &str, name: &str, app: &str, ip: Option<&str>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            labels: Some(BTreeMap::from([("app".to_string(), app.to_string())])),
            annotations: Some(BTreeMap::from([
                ("fleetgate.dev/injected".to_string(), "true".to_string()),
                (
                    EGRESS_MODE_ANNOTATION.to_string(),
                    "transparent".to_string(),
                ),
            ])),
            generate_name: Some("agent-".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "agent".into(),
                image: Some("localhost/hermes-agent:0.19.0".into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            pod_ip: ip.map(str::to_string),
            phase: Some("Running".into()),
            ..PodStatus::default()
        }),
    }
}

fn selector(app: &str) -> Selector {
    Selector::try_from(LabelSelector {
        match_labels: Some(BTreeMap::from([("app".to_string(), app.to_string())])),
        ..LabelSelector::default()
    })
    .expect("selector")
}

#[test]
fn trimming_keeps_what_a_reconcile_reads_and_drops_the_rest() {
    let mut p = pod("team-a", "agent-1", "hermes", Some("10.244.0.7"));
    trim(&mut p);
    assert_eq!(p.metadata.name.as_deref(), Some("agent-1"));
    assert_eq!(p.metadata.namespace.as_deref(), Some("team-a"));
    assert_eq!(p.labels().get("app").map(String::as_str), Some("hermes"));
    assert!(p.spec.is_none(), "the spec is not read");
    assert_eq!(
        egress_modes([&p]),
        vec![("agent-1".to_string(), Some("transparent".to_string()))],
        "the egress mode annotation is kept for the capture check"
    );
    assert_eq!(p.annotations().len(), 1, "no other annotation is kept");
    assert!(p.metadata.generate_name.is_none());
    let status = p.status.as_ref().expect("the pod IP is kept");
    assert_eq!(status.pod_ip.as_deref(), Some("10.244.0.7"));
    assert!(status.phase.is_none());
    let mut without_ip = pod("team-a", "agent-2", "hermes", None);
    trim(&mut without_ip);
    assert!(without_ip.status.is_none());
}

#[test]
fn the_index_answers_only_after_the_first_list_and_then_from_memory() {
    let index = PodIndex::default();
    assert!(
        index.selected("team-a", &selector("hermes")).is_none(),
        "no watch yet: the caller lists"
    );
    let (store, mut writer) = reflector::store();
    let synced = Arc::new(AtomicBool::new(false));
    index.attach(store, synced.clone());
    writer.apply_watcher_event(&Event::Init);
    let mut deleting = pod("team-a", "agent-0", "hermes", Some("10.244.0.9"));
    deleting.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    for mut p in [
        pod("team-a", "agent-b", "hermes", Some("10.244.0.3")),
        pod("team-a", "agent-a", "hermes", None),
        pod("team-a", "other", "web", Some("10.244.0.4")),
        pod("team-b", "agent-c", "hermes", Some("10.244.0.5")),
        deleting,
    ] {
        trim(&mut p);
        writer.apply_watcher_event(&Event::InitApply(p));
    }
    writer.apply_watcher_event(&Event::InitDone);
    assert!(
        index.selected("team-a", &selector("hermes")).is_none(),
        "the store is not trusted before the watch says it listed"
    );
    synced.store(true, Ordering::Release);
    let pods = index
        .selected("team-a", &selector("hermes"))
        .expect("listed");
    let targets = scrape_targets(pods.iter().map(Arc::as_ref), 15190);
    let got: Vec<(String, Option<SocketAddr>)> =
        targets.into_iter().map(|t| (t.pod, t.addr)).collect();
    assert_eq!(
        got,
        vec![
            ("agent-a".to_string(), None),
            (
                "agent-b".to_string(),
                Some("10.244.0.3:15190".parse().expect("addr"))
            ),
        ],
        "this namespace's selected pods in name order, the one being deleted left out"
    );
    let mut gone = pod("team-a", "agent-b", "hermes", Some("10.244.0.3"));
    trim(&mut gone);
    writer.apply_watcher_event(&Event::Delete(gone));
    let left = index
        .selected("team-a", &selector("hermes"))
        .expect("listed");
    let names: Vec<String> = left.iter().map(|p| p.name_any()).collect();
    assert_eq!(
        names,
        ["agent-0", "agent-a"],
        "a deleted pod leaves the index (one being deleted stays until it is gone)"
    );
}
