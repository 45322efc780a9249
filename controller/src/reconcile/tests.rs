//! The reconciler against the tower-test mocked API server (`crate::fixtures`): exact request
//! sequences, conflicts, server errors and timeouts a real API server cannot be made to show
//! on demand.
//!
//! Real-server twin: `tests/tests/k8s/controller.rs` reconciles on kube-apiserver (ConfigMap,
//! status for the generation, edits, `Valid=False` keeping the last good ConfigMap, garbage
//! collection) and `tests/tests/k8s/fleet.rs` writes status from real gates; the cases here
//! keep the faults and the exact calls.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::*;
use crate::fixtures::{Scenario, Seen, UID, mock_client, timeout_after_1s};

/// The simulated fleet: thousands of gates, ignored by default (a benchmark; see its doc).
mod fleet_sim;

fn context() -> (Arc<Context>, crate::fixtures::ApiServerVerifier) {
    let (client, verifier) = mock_client();
    let metrics = Metrics::unregistered().expect("metrics must register");
    (Arc::new(Context::new(client, metrics, None)), verifier)
}

fn invalid() -> FleetPolicy {
    FleetPolicy::test().with_spec(|s| s.egress.allow_cidrs = vec!["169.254.0.0/16".into()])
}

/// `fp` as the API server holds it after a successful reconcile: status applied.
fn settled(fp: FleetPolicy) -> FleetPolicy {
    let rendered = desired::render(&fp);
    let now = Time(Timestamp::from_second(1_000).expect("a test time must be valid"));
    let s = status::compute(&fp, &rendered, None, &now);
    fp.with_status(s)
}

fn rendered_config_map() -> ConfigMap {
    desired::render(&FleetPolicy::test())
        .expect("the test policy must render")
        .config_map
}

fn condition(body: &Value, kind: &str) -> Value {
    body.pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind).cloned())
        .unwrap_or_else(|| panic!("the status patch must carry {kind}"))
}

#[tokio::test]
async fn first_reconcile_applies_the_config_map_then_the_status() {
    let (ctx, verifier) = context();
    let want = desired::render(&FleetPolicy::test()).expect("the test policy must render");
    let want_cm = serde_json::to_value(&want.config_map).expect("must serialize");
    let policy_sha = want.policy_sha256.clone();
    let mock = verifier.run(Scenario::FirstApply, move |seen: &Seen| {
        if seen.uri == crate::fixtures::CM_APPLY_URI {
            assert_eq!(
                seen.body["apiVersion"], "v1",
                "the apply must name its apiVersion"
            );
            assert_eq!(
                seen.body["kind"], "ConfigMap",
                "the apply must name its kind"
            );
            assert_eq!(
                seen.body["data"], want_cm["data"],
                "the apply must carry the rendered files"
            );
            assert_eq!(
                seen.body["metadata"], want_cm["metadata"],
                "the apply must carry the rendered metadata"
            );
            assert_eq!(
                seen.body.pointer("/metadata/ownerReferences/0/uid"),
                Some(&json!(UID)),
                "the ConfigMap must be owned by the policy"
            );
        } else if seen.uri == crate::fixtures::STATUS_URI {
            assert_eq!(
                seen.body["apiVersion"], "fleetgate.dev/v1alpha1",
                "the status apply must name its apiVersion"
            );
            assert_eq!(
                seen.body["kind"], "FleetPolicy",
                "the status apply must name its kind"
            );
            assert_eq!(
                condition(&seen.body, "Valid")["status"],
                "True",
                "Valid must be True"
            );
            assert_eq!(
                condition(&seen.body, "Ready")["reason"],
                "Applied",
                "Ready must say Applied"
            );
            assert_eq!(
                seen.body.pointer("/status/observedGeneration"),
                Some(&json!(1)),
                "observedGeneration must be set"
            );
            assert_eq!(
                seen.body.pointer("/status/policySha256"),
                Some(&json!(policy_sha)),
                "the policy hash must be reported"
            );
            assert_eq!(
                seen.body.get("spec"),
                None,
                "a status apply must not carry the spec"
            );
        } else if seen.uri == crate::fixtures::EVENT_URI {
            assert_eq!(
                (seen.body["type"].as_str(), seen.body["reason"].as_str()),
                (Some("Normal"), Some("Applied")),
                "the event must be Normal/Applied"
            );
            assert_eq!(
                seen.body.pointer("/regarding/name"),
                Some(&json!("fleet")),
                "the event must be about the policy"
            );
        }
    });
    let action = reconcile(Arc::new(FleetPolicy::test()), ctx.clone())
        .await
        .expect("the first reconcile must succeed");
    timeout_after_1s(mock).await;
    assert_eq!(
        action,
        Action::requeue(Duration::from_secs(60)),
        "the next scrape must come after the default resync"
    );
    assert_eq!(
        ctx.metrics.writes_of(Write::ConfigMap),
        1,
        "one ConfigMap write must be counted"
    );
    assert_eq!(
        ctx.metrics.writes_of(Write::Status),
        1,
        "one status write must be counted"
    );
}

#[tokio::test]
async fn the_config_maps_own_watch_event_does_not_write_the_status_again() {
    let (ctx, verifier) = context();
    let mock = verifier.run(Scenario::FirstApply, |_: &Seen| {});
    let stale = Arc::new(FleetPolicy::test());
    reconcile(stale.clone(), ctx.clone())
        .await
        .expect("the first reconcile must succeed");
    timeout_after_1s(mock).await;
    // The ConfigMap's watch event re-triggers a reconcile before the watch has delivered the
    // status patch: the object still has no status. Only the ConfigMap is read.
    let (client, verifier) = crate::fixtures::mock_client();
    let ctx = Arc::new(Context {
        client,
        ..(*ctx).clone()
    });
    let mock = verifier.run(Scenario::Steady(rendered_config_map()), |_: &Seen| {});
    let again = tokio::time::timeout(Duration::from_secs(2), reconcile(stale, ctx.clone()))
        .await
        .expect("the second reconcile must not wait on a status write the mock does not expect")
        .expect("the second reconcile must succeed");
    timeout_after_1s(mock).await;
    assert_eq!(again, Action::requeue(Duration::from_secs(60)));
    assert_eq!(
        ctx.metrics.writes_of(Write::Status),
        1,
        "one change writes the status once"
    );
}

#[tokio::test]
async fn nothing_is_written_when_nothing_changed() {
    let (ctx, verifier) = context();
    let mock = verifier.run(Scenario::Steady(rendered_config_map()), |_: &Seen| {});
    reconcile(Arc::new(settled(FleetPolicy::test())), ctx.clone())
        .await
        .expect("a steady reconcile must succeed");
    timeout_after_1s(mock).await;
    assert_eq!(
        ctx.metrics.writes_of(Write::ConfigMap) + ctx.metrics.writes_of(Write::Status),
        0,
        "a steady policy must write nothing"
    );
    assert_eq!(ctx.metrics.runs.get(), 1, "the run must be counted");
}

#[tokio::test]
async fn a_hand_edited_config_map_is_re_applied() {
    let (ctx, verifier) = context();
    let mut edited = rendered_config_map();
    edited.data = Some(BTreeMap::from([(
        "policy.yaml".to_string(),
        "version: v1\n".to_string(),
    )]));
    let mock = verifier.run(Scenario::Repair(edited), |_: &Seen| {});
    reconcile(Arc::new(settled(FleetPolicy::test())), ctx.clone())
        .await
        .expect("a repair reconcile must succeed");
    timeout_after_1s(mock).await;
    assert_eq!(
        ctx.metrics.writes_of(Write::ConfigMap),
        1,
        "the edited ConfigMap must be re-applied"
    );
    assert_eq!(
        ctx.metrics.writes_of(Write::Status),
        0,
        "an unchanged status must not be written"
    );
}

#[tokio::test]
async fn an_invalid_spec_leaves_the_config_map_and_sets_valid_false() {
    let (ctx, verifier) = context();
    let mock = verifier.run(Scenario::InvalidSpec, |seen: &Seen| {
        if seen.uri == crate::fixtures::STATUS_URI {
            let valid = condition(&seen.body, "Valid");
            assert_eq!(
                (valid["status"].as_str(), valid["reason"].as_str()),
                (Some("False"), Some("InvalidSpec")),
                "Valid must be False/InvalidSpec"
            );
            let message = valid["message"].as_str().unwrap_or_default();
            assert!(
                message.contains("spec.egress.allowCIDRs[0]"),
                "the reason must name the field: {message}"
            );
            assert_eq!(
                condition(&seen.body, "Ready")["reason"],
                "KeptLastGood",
                "Ready must say the last good ConfigMap stays"
            );
        } else {
            assert_eq!(
                (seen.body["type"].as_str(), seen.body["reason"].as_str()),
                (Some("Warning"), Some("InvalidSpec")),
                "the event must be Warning/InvalidSpec"
            );
        }
    });
    reconcile(Arc::new(invalid()), ctx.clone())
        .await
        .expect("an invalid spec is reported, not an error");
    timeout_after_1s(mock).await;
    assert_eq!(
        ctx.metrics.writes_of(Write::ConfigMap),
        0,
        "an invalid spec must never touch the ConfigMap"
    );
    assert_eq!(
        ctx.metrics.invalid_specs.get(),
        1,
        "the invalid spec must be counted"
    );
}

#[tokio::test]
async fn an_invalid_spec_already_reported_is_left_alone() {
    let (ctx, verifier) = context();
    let mock = verifier.run(Scenario::RadioSilence, |_: &Seen| {});
    reconcile(Arc::new(settled(invalid())), ctx.clone())
        .await
        .expect("an invalid spec is reported, not an error");
    timeout_after_1s(mock).await;
    assert_eq!(
        ctx.metrics.writes_of(Write::Status),
        0,
        "a reported invalid spec must not be rewritten (no event storm)"
    );
}

#[tokio::test]
async fn api_failures_are_errors_retried_with_backoff() {
    for (code, want_code) in [(409, "api_conflict"), (500, "api_server_error")] {
        let (ctx, verifier) = context();
        let mock = verifier.run(Scenario::ApplyFails(code), |_: &Seen| {});
        let fp = Arc::new(FleetPolicy::test());
        let err = reconcile(fp.clone(), ctx.clone())
            .await
            .expect_err("a failed apply must fail the reconcile");
        timeout_after_1s(mock).await;
        assert_eq!(err.code(), want_code, "HTTP {code} must map to {want_code}");
        assert!(
            err.to_string()
                .starts_with("failed to apply the managed ConfigMap"),
            "the error must say what failed: {err}"
        );
        let first = error_policy(fp.clone(), &err, ctx.clone());
        let second = error_policy(fp.clone(), &err, ctx.clone());
        assert_eq!(
            first,
            Action::requeue(Duration::from_secs(5)),
            "the first retry must come after 5 s"
        );
        assert_eq!(
            second,
            Action::requeue(Duration::from_secs(10)),
            "the second retry must back off"
        );
        let failures = ctx.metrics.failures.with_label_values(&[want_code]).get();
        assert_eq!(failures, 2, "failures must be counted by code");
    }
}

#[test]
fn backoff_doubles_up_to_five_minutes() {
    let cases = [
        (0, 5),
        (1, 5),
        (2, 10),
        (3, 20),
        (6, 160),
        (7, 300),
        (1000, 300),
    ];
    for (failures, secs) in cases {
        assert_eq!(
            backoff_delay(failures),
            Duration::from_secs(secs),
            "{failures} failures must wait {secs} s"
        );
    }
}

#[test]
fn error_codes_are_unique_snake_case() {
    let re = regex::Regex::new("^[a-z0-9_]+$").expect("the pattern must compile");
    let mut seen = std::collections::BTreeSet::new();
    for code in crate::Error::ALL_CODES {
        assert!(re.is_match(code), "{code} must be snake_case");
        assert!(seen.insert(code), "{code} must be unique");
    }
    let missing = crate::Error::MissingObjectKey("metadata.namespace");
    assert!(
        crate::Error::ALL_CODES.contains(&missing.code()),
        "every code must be listed"
    );
}

#[tokio::test]
async fn fleet_scraping_writes_pod_counts_and_propagation() {
    let (ctx, verifier) = context();
    let ctx = Arc::new((*ctx).clone().with_fleet(FleetConfig {
        token_secret: "fleetgate-report-token".into(),
        token_key: "token".into(),
        admin_port: 15190,
        per_pod_timeout: Duration::from_millis(200),
        concurrency: 4,
    }));
    let mock = verifier.run(
        Scenario::FleetScrape(rendered_config_map()),
        |seen: &Seen| {
            if seen.uri == crate::fixtures::STATUS_URI {
                assert_eq!(
                    seen.body.pointer("/status/pods"),
                    Some(&json!({"selected": 1, "reporting": 0, "current": 0})),
                    "the pod counts must be written"
                );
                let propagated = condition(&seen.body, "Propagated");
                assert_eq!(
                    (propagated["status"].as_str(), propagated["reason"].as_str()),
                    (Some("False"), Some("PodsNotReporting")),
                    "a pod without IP must not count as propagated"
                );
                assert!(
                    propagated["message"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("agent-0"),
                    "the pod must be named"
                );
                assert_eq!(
                    condition(&seen.body, "Ready")["status"],
                    "False",
                    "Ready must wait for propagation"
                );
            }
        },
    );
    let (tx, mut polled) = tokio::sync::mpsc::unbounded_channel();
    ctx.polls().notify(tx);
    let fp = Arc::new(settled(FleetPolicy::test()));
    reconcile(fp.clone(), ctx.clone())
        .await
        .expect("the reconcile starting the poll must succeed");
    let done = tokio::time::timeout(Duration::from_secs(1), polled.recv())
        .await
        .expect("the poll ends within its deadline");
    assert_eq!(
        done.map(|r| r.name),
        Some(fp.name_any()),
        "a finished poll requeues its FleetPolicy"
    );
    reconcile(fp, ctx.clone())
        .await
        .expect("the reconcile writing the view must succeed");
    timeout_after_1s(mock).await;
    assert_eq!(
        ctx.metrics
            .scrape_failures
            .with_label_values(&["no_address"])
            .get(),
        1,
        "the unscrapable pod must be counted"
    );
    let fp = FleetPolicy::test();
    let labels = [
        fp.namespace().unwrap_or_default(),
        fp.name_any(),
        "selected".to_string(),
    ];
    assert_eq!(
        ctx.metrics
            .fleet_pods
            .with_label_values(&[&labels[0], &labels[1], &labels[2]])
            .get(),
        1,
        "the fleet gauges must show the selected pod"
    );
}

mod secret_rules {
    use super::*;
    use crate::crd::SharedListRef;
    use crate::fixtures::cluster::FakeCluster;

    fn with_rules() -> FleetPolicy {
        FleetPolicy::test().with_spec(|s| {
            s.secrets.rules_config_maps = vec![SharedListRef {
                config_map: "corp-rules".into(),
                key: "rules.toml".into(),
            }];
        })
    }

    fn valid_condition(cluster: &FakeCluster) -> Value {
        let status = cluster.last_status().expect("a status must be written");
        status["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Valid").cloned())
            .expect("the status must carry Valid")
    }

    fn writes_of(cluster: &FakeCluster, what: &str) -> usize {
        cluster.writes().iter().filter(|(_, w)| *w == what).count()
    }

    #[tokio::test]
    async fn a_secret_rules_config_map_that_does_not_compile_keeps_the_last_good_config_map() {
        let cluster = FakeCluster::default();
        cluster.put_config_map(
            "corp-rules",
            &[(
                "rules.toml",
                "[[rules]]\nid = \"corp-broken\"\nregex = '''corp_([a-z'''\n",
            )],
        );
        let metrics = Metrics::unregistered().expect("metrics");
        let ctx = Arc::new(Context::new(cluster.client("c"), metrics, None));
        reconcile(Arc::new(with_rules()), ctx.clone())
            .await
            .expect("an invalid spec is not a failure");
        assert_eq!(
            writes_of(&cluster, "config_map"),
            0,
            "nothing may be applied"
        );
        let valid = valid_condition(&cluster);
        assert_eq!(valid["status"], "False");
        let message = valid["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("spec.secrets.rulesConfigMaps[0]")
                && message.contains("corp-broken")
                && message.contains("invalid regex"),
            "Valid must name the field, the rule and the reason: {message}"
        );

        // Fixed: the next reconcile applies the ConfigMap.
        cluster.put_config_map(
            "corp-rules",
            &[(
                "rules.toml",
                "[[rules]]\nid = \"corp-token\"\nregex = '''corp_[a-z0-9]{24}'''\n",
            )],
        );
        reconcile(Arc::new(with_rules()), ctx)
            .await
            .expect("the reconcile must succeed");
        assert_eq!(
            writes_of(&cluster, "config_map"),
            1,
            "the fixed rules apply"
        );
        assert_eq!(valid_condition(&cluster)["status"], "True");
    }

    #[tokio::test]
    async fn a_missing_secret_rules_config_map_is_an_invalid_spec() {
        let cluster = FakeCluster::default();
        let metrics = Metrics::unregistered().expect("metrics");
        let ctx = Arc::new(Context::new(cluster.client("c"), metrics, None));
        reconcile(Arc::new(with_rules()), ctx)
            .await
            .expect("an invalid spec is not a failure");
        assert_eq!(writes_of(&cluster, "config_map"), 0);
        let message = valid_condition(&cluster)["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(message.contains("has no key \"rules.toml\""), "{message}");
    }
}
