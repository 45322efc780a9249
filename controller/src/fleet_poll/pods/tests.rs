use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use kube::core::SelectorExt;
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
fn an_entry_keeps_what_a_reconcile_reads() {
    let mut p = pod("team-a", "agent-1", "hermes", Some("10.244.0.7"));
    p.metadata.labels = Some(BTreeMap::from([
        ("tier".to_string(), "b".to_string()),
        ("app".to_string(), "hermes".to_string()),
    ]));
    let entry = PodEntry::from_pod(&p);
    assert_eq!(
        entry.labels.as_ref(),
        [
            ("app".to_string(), "hermes".to_string()),
            ("tier".to_string(), "b".to_string())
        ],
        "the labels, sorted by key"
    );
    assert_eq!(entry.ip, Some("10.244.0.7".parse().expect("ip")));
    assert_eq!(entry.egress_mode.as_deref(), Some("transparent"));
    assert!(!entry.deleting);
    let without_ip = PodEntry::from_pod(&pod("team-a", "agent-2", "hermes", None));
    assert!(without_ip.ip.is_none());
    let bad_ip = PodEntry::from_pod(&pod("team-a", "agent-3", "hermes", Some("not-an-ip")));
    assert!(bad_ip.ip.is_none(), "an unparsable IP is no address");
}

#[test]
fn the_index_matches_labels_as_kube_selectors_do() {
    let labels = BTreeMap::from([
        ("app".to_string(), "hermes".to_string()),
        ("tier".to_string(), "b".to_string()),
        ("zone".to_string(), "".to_string()),
    ]);
    let sorted: Vec<(String, String)> = labels.clone().into_iter().collect();
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
    let expressions = [
        Expression::In("app".into(), set(&["hermes", "web"])),
        Expression::In("app".into(), set(&["web"])),
        Expression::In("nope".into(), set(&["x"])),
        Expression::NotIn("tier".into(), set(&["a"])),
        Expression::NotIn("tier".into(), set(&["b"])),
        Expression::NotIn("nope".into(), set(&["x"])),
        Expression::Equal("zone".into(), "".into()),
        Expression::Equal("app".into(), "web".into()),
        Expression::NotEqual("app".into(), "web".into()),
        Expression::NotEqual("app".into(), "hermes".into()),
        Expression::NotEqual("nope".into(), "x".into()),
        Expression::Exists("tier".into()),
        Expression::Exists("nope".into()),
        Expression::DoesNotExist("nope".into()),
        Expression::DoesNotExist("app".into()),
    ];
    for e in &expressions {
        assert_eq!(matches(e, &sorted), SelectorExt::matches(e, &labels), "{e}");
    }
    assert!(matches(&Expression::DoesNotExist("a".into()), &[]));
}

#[test]
fn the_index_answers_only_after_the_first_list_and_then_from_memory() {
    let index = PodIndex::default();
    assert!(
        index.selected("team-a", &selector("hermes")).is_none(),
        "no watch yet: the caller lists"
    );
    index.apply(&Event::Init);
    let mut deleting = pod("team-a", "agent-0", "hermes", Some("10.244.0.9"));
    deleting.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    for p in [
        pod("team-a", "agent-b", "hermes", Some("10.244.0.3")),
        pod("team-a", "agent-a", "hermes", None),
        pod("team-a", "other", "web", Some("10.244.0.4")),
        pod("team-b", "agent-c", "hermes", Some("10.244.0.5")),
        deleting,
    ] {
        index.apply(&Event::InitApply(p));
    }
    assert!(
        index.selected("team-a", &selector("hermes")).is_none(),
        "the index is not trusted before the watch says it listed"
    );
    index.apply(&Event::InitDone);
    let pods = index
        .selected("team-a", &selector("hermes"))
        .expect("listed");
    let targets = scrape_targets(&pods, 15190);
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
    assert_eq!(
        egress_modes(&pods),
        vec![
            ("agent-a".to_string(), Some("transparent".to_string())),
            ("agent-b".to_string(), Some("transparent".to_string())),
        ]
    );
    index.apply(&Event::Delete(pod(
        "team-a",
        "agent-b",
        "hermes",
        Some("10.244.0.3"),
    )));
    let left = index
        .selected("team-a", &selector("hermes"))
        .expect("listed");
    let names: Vec<&str> = left.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["agent-0", "agent-a"],
        "a deleted pod leaves the index (one being deleted stays until it is gone)"
    );
    index.apply(&Event::Apply(pod(
        "team-a",
        "agent-a",
        "hermes",
        Some("10.244.0.8"),
    )));
    let updated = index
        .selected("team-a", &selector("hermes"))
        .expect("listed");
    assert_eq!(updated[1].ip, Some("10.244.0.8".parse().expect("ip")));
    assert_eq!(
        index.selected("team-c", &selector("hermes")),
        Some(Vec::new()),
        "a namespace without pods selects none"
    );
}

#[test]
fn a_relist_replaces_the_index_when_it_completes() {
    let index = PodIndex::default();
    index.apply(&Event::Init);
    index.apply(&Event::InitApply(pod("team-a", "agent-a", "hermes", None)));
    index.apply(&Event::InitDone);
    index.apply(&Event::Init);
    index.apply(&Event::InitApply(pod("team-a", "agent-b", "hermes", None)));
    let names = |index: &PodIndex| -> Vec<String> {
        index
            .selected("team-a", &selector("hermes"))
            .expect("listed")
            .into_iter()
            .map(|p| p.name)
            .collect()
    };
    assert_eq!(names(&index), ["agent-a"], "the last complete list serves");
    index.apply(&Event::InitDone);
    assert_eq!(names(&index), ["agent-b"], "the new list replaces it whole");
}

#[test]
fn a_listed_pod_reads_as_an_indexed_one() {
    let mut p = pod("team-a", "agent-1", "hermes", Some("10.244.0.7"));
    p.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    assert_eq!(
        SelectedPod::from_pod(&p),
        SelectedPod {
            name: "agent-1".into(),
            ip: Some("10.244.0.7".parse().expect("ip")),
            egress_mode: Some("transparent".into()),
            deleting: true,
        }
    );
}
