//! `fleetgate-controller render --baseline`: every valid FleetPolicy example rendered under the
//! example ClusterFleetPolicy matches its golden file (what the controller would write, with
//! the tightened fields as comments), a baseline that leaves no port refuses the render as its
//! `# expect:` line says, and every baseline example passes the ClusterFleetPolicy CRD's schema
//! and CEL rules. `FLEETGATE_UPDATE_GOLDEN=1` rewrites the golden files.

// Helpers outside `#[test]` functions fail the test on broken setup, exactly as the tests do.
#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};

use fleetgate_controller::cli::{baselines_of, render_files_with};
use fleetgate_controller::crd::cluster_fleet_policy::ClusterFleetPolicy;
use kube::CustomResourceExt;
use serde::Deserialize;
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn examples(prefix: &str) -> Vec<PathBuf> {
    let dir = root().join("deploy/examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("deploy/examples must exist")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .collect();
    files.sort();
    files
}

fn name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[test]
fn every_valid_example_under_the_platform_baseline_renders_as_its_golden_file() {
    let baseline = root().join("deploy/examples/baseline-platform.yaml");
    let update = std::env::var_os("FLEETGATE_UPDATE_GOLDEN").is_some_and(|v| v == "1");
    let valid = examples("valid-");
    assert!(
        valid.len() >= 3,
        "deploy/examples must hold the valid examples"
    );
    for example in valid {
        let rendered = render_files_with(std::slice::from_ref(&example), &[&baseline])
            .unwrap_or_else(|e| {
                panic!("{} must render under the baseline: {e}", example.display())
            });
        let golden = root()
            .join("controller/tests/golden/baseline")
            .join(name(&example));
        if update {
            std::fs::create_dir_all(golden.parent().expect("a parent"))
                .expect("the golden directory must be writable");
            std::fs::write(&golden, &rendered).expect("the golden file must be writable");
            continue;
        }
        let want = std::fs::read_to_string(&golden).unwrap_or_default();
        assert!(
            rendered == want,
            "{} under the baseline differs from {}; rerun with FLEETGATE_UPDATE_GOLDEN=1 and review the diff:\n{rendered}",
            example.display(),
            golden.display()
        );
        let without = render_files_with(std::slice::from_ref(&example), &[] as &[&Path])
            .expect("the example must render without a baseline");
        assert_ne!(rendered, without, "the baseline must change every example");
    }
}

#[test]
fn the_minimal_example_is_raised_bound_and_given_the_baselines_rules() {
    let rendered = render_files_with(
        &[root().join("deploy/examples/valid-minimal.yaml")],
        &[root().join("deploy/examples/baseline-platform.yaml")],
    )
    .expect("the minimal example must render");
    for want in [
        "'*.casino.example'",
        "corp_live_",
        "ports:\n      - 80\n      - 443",
        "forwardProxy: 127.0.0.1:15181",
    ] {
        assert!(rendered.contains(want), "missing {want:?} in:\n{rendered}");
    }
}

#[test]
fn a_baseline_that_leaves_no_port_refuses_the_render_as_annotated() {
    for baseline in examples("baseline-").into_iter().filter(|p| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .contains("# expect: ")
    }) {
        let text = std::fs::read_to_string(&baseline).expect("readable");
        let expect = text
            .lines()
            .find_map(|l| l.strip_prefix("# expect: "))
            .expect("an expect line");
        let err = render_files_with(
            &[root().join("deploy/examples/valid-full.yaml")],
            &[&baseline],
        )
        .expect_err("the render must be refused");
        assert!(
            err.to_string().contains(expect),
            "{} must refuse naming `{expect}`, got: {err}",
            baseline.display()
        );
    }
}

#[test]
fn every_baseline_example_passes_the_crd_schema_and_its_cel_rules() {
    let schema = serde_json::to_value(ClusterFleetPolicy::crd())
        .expect("the CRD must serialize")
        .pointer("/spec/versions/0/schema/openAPIV3Schema")
        .cloned()
        .expect("the CRD must carry a schema");
    let validator = jsonschema::validator_for(&schema).expect("the CRD schema must compile");
    let files = examples("baseline-");
    assert!(
        files.len() >= 2,
        "deploy/examples must hold the baseline examples"
    );
    for path in files {
        let text = std::fs::read_to_string(&path).expect("readable");
        assert!(
            !baselines_of("example", &text).expect("parses").is_empty(),
            "{} must hold a ClusterFleetPolicy",
            path.display()
        );
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let object = Value::deserialize(doc).expect("YAML");
            let errors: Vec<String> = validator
                .iter_errors(&object)
                .map(|e| e.to_string())
                .collect();
            assert!(errors.is_empty(), "{}: {errors:?}", path.display());
            let cel = kube::core::cel::Validator::new().validate(&schema, &object, None);
            assert!(cel.is_ok(), "{}: {cel:?}", path.display());
        }
    }
    // The schema can refuse: an unknown minimum mode and a port out of range.
    let bad = serde_json::json!({
        "apiVersion": "fleetgate.dev/v1alpha1", "kind": "ClusterFleetPolicy",
        "metadata": {"name": "bad"},
        "spec": {"egress": {"minimumMode": "off", "ports": [0]}},
    });
    let errors: Vec<String> = validator.iter_errors(&bad).map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
}
