//! Every FleetPolicy example in `deploy/examples/` against the CRD the controller generates, as
//! the API server would judge it: the openAPIV3Schema (with the `jsonschema` crate) and the CEL
//! rules (`x-kubernetes-validations`, with kube's client-side CEL evaluator). Each invalid example
//! states the API server's refusal in a `# schema:` line, or `# schema: accepted` when only the
//! controller's own validation (its `# expect:` line) can refuse it.
//!
//! Real-server twin: `tests/tests/k8s/crds.rs` applies the same examples to kube-apiserver,
//! whose refusals must match the same `# schema:` lines; this file keeps the check offline.

// Helpers outside `#[test]` functions fail the test on broken setup, exactly as the tests do.
#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};

use fleetgate_controller::cli::render_text;
use fleetgate_controller::crd::FleetPolicy;
use kube::CustomResourceExt;
use serde::Deserialize;
use serde_json::Value;

fn examples(prefix: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("deploy/examples must exist")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "yaml")
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .collect();
    files.sort();
    files
}

fn schema() -> Value {
    serde_json::to_value(FleetPolicy::crd())
        .expect("the CRD must serialize")
        .pointer("/spec/versions/0/schema/openAPIV3Schema")
        .cloned()
        .expect("the CRD must carry an openAPIV3Schema")
}

/// The FleetPolicy documents of a file, as JSON.
fn policies(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("an example must be readable");
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).expect("an example must be YAML"))
        .filter(|doc| doc["kind"] == "FleetPolicy")
        .collect()
}

/// A `# <key>: ` comment line of an example.
fn annotation(path: &Path, key: &str) -> String {
    let text = std::fs::read_to_string(path).expect("an example must be readable");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("# {key}: ")))
        .map(String::from)
        .unwrap_or_else(|| panic!("{} must state `# {key}: …`", path.display()))
}

/// What the API server would say: schema errors (`<path>: <message>`), then CEL errors.
fn refusals(schema: &Value, object: &Value) -> Vec<String> {
    let validator = jsonschema::validator_for(schema).expect("the CRD schema must compile");
    let mut out: Vec<String> = validator
        .iter_errors(object)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    if let Err(errors) = kube::core::cel::Validator::new().validate(schema, object, None) {
        out.extend(errors.iter().map(ToString::to_string));
    }
    out
}

#[test]
fn every_valid_example_passes_the_crd_schema_and_its_cel_rules() {
    let schema = schema();
    let files = examples("valid-");
    assert!(
        files.len() >= 3,
        "deploy/examples must hold the valid examples"
    );
    for path in files {
        let docs = policies(&path);
        assert!(
            !docs.is_empty(),
            "{} must hold a FleetPolicy",
            path.display()
        );
        for doc in docs {
            let said = refusals(&schema, &doc);
            assert!(
                said.is_empty(),
                "{} must be accepted, got: {said:?}",
                path.display()
            );
        }
    }
}

#[test]
fn every_invalid_example_is_refused_by_the_schema_or_by_the_controller_as_annotated() {
    let schema = schema();
    let files = examples("invalid-");
    assert!(
        files.len() >= 5,
        "deploy/examples must hold the invalid examples"
    );
    let mut by_schema = 0;
    for path in files {
        let want = annotation(&path, "schema");
        let docs = policies(&path);
        assert_eq!(
            docs.len(),
            1,
            "{} must hold one FleetPolicy",
            path.display()
        );
        let said = refusals(&schema, &docs[0]);
        if want.starts_with("accepted") {
            assert!(
                said.is_empty(),
                "{} must pass the schema, got: {said:?}",
                path.display()
            );
            // Then the controller is the one refusing it, naming the field.
            let expect = annotation(&path, "expect");
            let text = std::fs::read_to_string(&path).expect("an example must be readable");
            let err = render_text("example", &text).expect_err(&format!(
                "{} must be refused by the controller",
                path.display()
            ));
            assert!(
                err.to_string().contains(&expect),
                "{} must be refused naming `{expect}`, got: {err}",
                path.display()
            );
        } else {
            by_schema += 1;
            assert!(
                said.iter().any(|s| s.contains(&want)),
                "{} must be refused with `{want}`, got: {said:?}",
                path.display()
            );
        }
    }
    assert!(
        by_schema >= 3,
        "the schema must refuse at least the enum, range and CEL examples"
    );
}

#[test]
fn a_cel_rule_refuses_what_the_plain_schema_lets_through() {
    let schema = schema();
    let cases: &[(&str, Value, bool)] = &[
        (
            "searxng with a baseURL",
            serde_json::json!({"searchBackend": "searxng", "vendors": {"searxng": {"baseURL": "http://s.example"}}}),
            true,
        ),
        (
            "searxng without vendors",
            serde_json::json!({"searchBackend": "searxng"}),
            false,
        ),
        (
            "searxng with an empty vendor",
            serde_json::json!({"searchBackend": "searxng", "vendors": {"searxng": {}}}),
            false,
        ),
        (
            "tavily without vendors",
            serde_json::json!({"searchBackend": "tavily"}),
            true,
        ),
    ];
    let validator = jsonschema::validator_for(&schema).expect("the CRD schema must compile");
    for (name, web, accepted) in cases {
        let object = serde_json::json!({
            "apiVersion": "fleetgate.dev/v1alpha1", "kind": "FleetPolicy",
            "metadata": {"name": "fleet"}, "spec": {"selector": {}, "web": web},
        });
        assert!(
            validator.is_valid(&object),
            "{name}: the plain schema must accept it"
        );
        let cel = kube::core::cel::Validator::new().validate(&schema, &object, None);
        assert_eq!(cel.is_ok(), *accepted, "{name}: CEL verdict, got {cel:?}");
    }
}
