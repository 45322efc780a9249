//! The static install manifest `deploy/install.yaml` (rendered from the chart, drift-checked by
//! the chart tests) against the controller itself: the injector config the chart renders is one
//! the webhook accepts, and the webhook configuration calls the path the webhook serves.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::PathBuf;

use fleetgate_controller::webhook::InjectorConfig;
use serde::Deserialize;
use serde_yaml::Value;

fn manifest() -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/install.yaml");
    let text = std::fs::read_to_string(&path).expect("deploy/install.yaml must exist");
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).expect("every document must be YAML"))
        .filter(|v| !v.is_null())
        .collect()
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter()
        .filter(|d| d["kind"].as_str() == Some(kind))
        .collect()
}

#[test]
fn the_rendered_injector_config_is_accepted_by_the_webhook() {
    let docs = manifest();
    let injector = of_kind(&docs, "ConfigMap")
        .into_iter()
        .find_map(|cm| cm["data"]["injector.yaml"].as_str())
        .expect("the manifest must carry the injector ConfigMap");
    let cfg = InjectorConfig::parse(injector)
        .expect("the injector config rendered by the chart must parse in the webhook");
    assert_eq!(cfg.proxy_uid, 15000, "the gate must run as uid 15000");
    assert!(
        cfg.proxy_image.contains("fleetgate-proxy"),
        "the injected image must be the gate's: {}",
        cfg.proxy_image
    );
    let broken = injector.replace("hermesHomePath", "hermesHome");
    assert!(
        InjectorConfig::parse(&broken).is_err(),
        "a renamed key must be refused, so chart and webhook cannot drift silently"
    );
}

#[test]
fn the_webhook_configuration_calls_the_served_path() {
    let docs = manifest();
    let hooks = of_kind(&docs, "MutatingWebhookConfiguration");
    assert_eq!(hooks.len(), 1, "one webhook configuration per release");
    let path = hooks[0]["webhooks"][0]["clientConfig"]["service"]["path"]
        .as_str()
        .expect("the webhook must call a service path");
    assert_eq!(
        path,
        fleetgate_controller::webhook::MUTATE_PATH,
        "the chart must call the path the webhook serves"
    );
}
