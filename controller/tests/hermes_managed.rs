//! A real client: Hermes 0.19.0 and 0.20.1 (one test per version) read the `config.yaml`
//! rendered from `deploy/examples/` as their managed scope and report the pinned values as
//! effective and managed, over a user config that tries to override them.
#![allow(clippy::expect_used)]

use std::path::PathBuf;

use fleetgate_e2e::hermes_matrix;
use fleetgate_e2e::venv::{self, Hermes};
use serde_json::{Value, json};

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .expect("the controller crate must sit inside the workspace")
}

/// `config.yaml` of the ConfigMap rendered from an example file.
fn rendered_managed_config(example: &str) -> String {
    let path = workspace().join("deploy/examples").join(example);
    let text = std::fs::read_to_string(&path).expect("the example must be readable");
    let docs =
        fleetgate_controller::cli::render_text(example, &text).expect("the example must render");
    let cm: Value = serde_yaml::from_str(&docs[0]).expect("the rendered ConfigMap must be YAML");
    cm.pointer("/data/config.yaml")
        .and_then(Value::as_str)
        .map(str::to_string)
        .expect("the ConfigMap must carry config.yaml")
}

hermes_matrix!(hermes_applies_the_rendered_managed_config_over_the_user_config);

async fn hermes_applies_the_rendered_managed_config_over_the_user_config(version: Hermes) {
    let Some(python) = version.python() else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let managed = dir.path().join("managed");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&managed).expect("the managed dir must be created");
    std::fs::create_dir_all(&home).expect("the home must be created");
    std::fs::write(
        managed.join("config.yaml"),
        rendered_managed_config("valid-full.yaml"),
    )
    .expect("the managed config must be written");
    // The user tries to route web calls elsewhere and to pick another model.
    std::fs::write(
        home.join("config.yaml"),
        "model:\n  default: some/other-model\nweb:\n  extract_backend: tavily\n  search_backend: brave-free\n",
    )
    .expect("the user config must be written");
    let script = std::fs::read_to_string(workspace().join("tests/python/hermes_managed.py"))
        .expect("the script must be readable");
    let keys = [
        "web.extract_backend",
        "web.search_backend",
        "model.default",
        "agent.reasoning_effort",
        "security.redact_secrets",
        "web.extract_timeout",
    ];
    let out = venv::run_python(
        &python,
        &script,
        &keys,
        &[
            (
                "HERMES_MANAGED_DIR",
                managed.to_str().expect("a temp path is UTF-8"),
            ),
            ("HERMES_HOME", home.to_str().expect("a temp path is UTF-8")),
        ],
    )
    .await
    .expect("python must run");
    assert!(
        out.status.success(),
        "{version}: the script must succeed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("the script must print JSON");
    assert_eq!(
        report["effective"],
        json!({
            "web.extract_backend": "firecrawl",
            "web.search_backend": "searxng",
            "model.default": "anthropic/claude-sonnet-4.5",
            "agent.reasoning_effort": "medium",
            "security.redact_secrets": true,
            "web.extract_timeout": 45,
        }),
        "{version} must see the pinned values, not the user's"
    );
    for key in keys {
        assert_eq!(
            report["is_managed"][key],
            json!(true),
            "{version} must report {key} as managed"
        );
    }
    // model.default, model.provider, agent.reasoning_effort, security.redact_secrets,
    // web.extract_timeout and the two web pins.
    let pinned = report["managed_keys"].as_array().map_or(0, Vec::len);
    assert_eq!(
        pinned, 7,
        "{version} must count the same pinned keys as the controller: {report}"
    );
}
