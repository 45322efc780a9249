//! Golden tests of the injector (linkerd style): an input pod YAML under
//! `tests/golden/webhook/` gives exactly the committed `<case>.patch.json`; every patched pod
//! parses as a `Pod`, keeps its own volumes, mounts and env without duplicate names, and passes
//! `kubernetes-validate --strict -k 1.33.0`. `FLEETGATE_UPDATE_GOLDEN=1` rewrites the files.
//!
//! Real-server twin: `tests/tests/k8s/golden.rs` creates the golden pods through
//! kube-apiserver's admission chain with the webhook serving and compares the stored pods with
//! these files field by field.
#![allow(clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use fleetgate_controller::crd::FleetPolicy;
use fleetgate_controller::webhook::{Decision, InjectorConfig, Skip, mutate};
use k8s_openapi::api::core::v1::Pod;
use serde::Deserialize;
use serde_json::Value;

/// Binary of `kubernetes-validate` (tests/run installs it and exports this).
const VALIDATE_ENV: &str = "FLEETGATE_K8S_VALIDATE";
/// Set to `1`, a missing validator fails the test instead of skipping the check.
const REQUIRE_ENV: &str = "FLEETGATE_REQUIRE_K8S_TOOLS";

enum Expect {
    Golden,
    Unchanged(Skip),
}

const CASES: &[(&str, Expect)] = &[
    ("default", Expect::Golden),
    ("transparent", Expect::Golden),
    ("existing", Expect::Golden),
    ("opt-out", Expect::Unchanged(Skip::OptedOut)),
    ("already-injected", Expect::Unchanged(Skip::AlreadyInjected)),
];

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/webhook")
}

fn read(name: &str) -> String {
    std::fs::read_to_string(dir().join(name)).expect("a golden fixture must be readable")
}

fn policies() -> Vec<FleetPolicy> {
    serde_yaml::Deserializer::from_str(&read("fleetpolicies.yaml"))
        .map(|doc| FleetPolicy::deserialize(doc).expect("a fixture FleetPolicy must parse"))
        .collect()
}

fn config() -> InjectorConfig {
    InjectorConfig::parse(&read("injector.yaml")).expect("the fixture injector config must parse")
}

fn pod_json(case: &str) -> Value {
    serde_yaml::from_str(&read(&format!("{case}.pod.yaml"))).expect("a fixture pod must be YAML")
}

fn decide(case: &str) -> Decision {
    let pod: Pod = serde_json::from_value(pod_json(case)).expect("a fixture pod must be a Pod");
    let fps = policies();
    let refs: Vec<&FleetPolicy> = fps.iter().collect();
    mutate(&pod, "agents", &refs, &config())
}

fn patched(case: &str, ops: &Value) -> Value {
    let patch: json_patch::Patch =
        serde_json::from_value(ops.clone()).expect("the ops must be an RFC 6902 patch");
    let mut doc = pod_json(case);
    json_patch::patch(&mut doc, &patch).expect("the patch must apply to the input pod");
    doc
}

#[test]
fn every_case_gives_its_golden_decision() {
    let update = std::env::var_os("FLEETGATE_UPDATE_GOLDEN").is_some_and(|v| v == "1");
    for (case, expect) in CASES {
        let decision = decide(case);
        match (expect, decision) {
            (Expect::Unchanged(want), got) => {
                assert_eq!(
                    got,
                    Decision::Unchanged(*want),
                    "{case} must pass unchanged"
                );
            }
            (Expect::Golden, Decision::Patch { ops, .. }) => {
                let got = serde_json::to_string_pretty(&ops).expect("ops must serialize") + "\n";
                let file = dir().join(format!("{case}.patch.json"));
                if update {
                    std::fs::write(&file, &got).expect("the golden file must be writable");
                }
                let want = std::fs::read_to_string(&file).unwrap_or_default();
                assert_eq!(got, want, "{case}: the patch must equal {}", file.display());
            }
            (Expect::Golden, other) => panic!("{case} must be patched, got {other:?}"),
        }
    }
}

#[test]
fn every_golden_patch_gives_a_valid_pod_without_duplicate_names() {
    for (case, expect) in CASES {
        let Expect::Golden = expect else { continue };
        let ops: Value = serde_json::from_str(&read(&format!("{case}.patch.json")))
            .expect("the golden patch must be JSON");
        let doc = patched(case, &ops);
        let pod: Pod = serde_json::from_value(doc.clone()).expect("the patched pod must be a Pod");
        let spec = pod.spec.expect("the patched pod must keep its spec");
        let volumes: Vec<&str> = spec
            .volumes
            .iter()
            .flatten()
            .map(|v| v.name.as_str())
            .collect();
        assert_unique(case, "volume", &volumes);
        for c in spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
        {
            let env: Vec<&str> = c.env.iter().flatten().map(|e| e.name.as_str()).collect();
            assert_unique(case, "env var", &env);
            let paths: Vec<&str> = c
                .volume_mounts
                .iter()
                .flatten()
                .map(|m| m.mount_path.as_str())
                .collect();
            assert_unique(case, "mount path", &paths);
            for m in c.volume_mounts.iter().flatten() {
                assert!(
                    volumes.contains(&m.name.as_str()),
                    "{case}: mount {} must name a volume",
                    m.name
                );
            }
        }
        let input: Pod = serde_json::from_value(pod_json(case)).expect("the input must be a Pod");
        let before = input.spec.expect("the input has a spec");
        for v in before.volumes.iter().flatten() {
            assert!(
                volumes.contains(&v.name.as_str()),
                "{case}: volume {} must be kept",
                v.name
            );
        }
        validate(case, &doc);
    }
}

fn assert_unique(case: &str, what: &str, names: &[&str]) {
    let mut sorted = names.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(
        sorted.len(),
        names.len(),
        "{case}: every {what} must be unique: {names:?}"
    );
}

/// Run `kubernetes-validate --strict -k 1.33.0` on the pod, or skip when it is not installed.
#[allow(
    clippy::print_stdout,
    reason = "the skip line belongs in the test's output"
)]
fn validate(case: &str, doc: &Value) {
    let Some(bin) = std::env::var_os(VALIDATE_ENV).filter(|v| !v.is_empty()) else {
        let required = std::env::var_os(REQUIRE_ENV).is_some_and(|v| v == "1");
        assert!(!required, "{REQUIRE_ENV}=1 but {VALIDATE_ENV} is not set");
        println!("skipped: {VALIDATE_ENV} not set (run tests/run); {case} not schema-validated");
        return;
    };
    assert!(
        Path::new(&bin).is_file(),
        "{VALIDATE_ENV} must name the kubernetes-validate binary"
    );
    let mut child = Command::new(&bin)
        .args(["--strict", "-k", "1.33.0", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubernetes-validate must start");
    // The validator needs a name; the API server derives it from generateName.
    let mut doc = doc.clone();
    if doc.pointer("/metadata/name").is_none() {
        let base = doc
            .pointer("/metadata/generateName")
            .and_then(Value::as_str)
            .unwrap_or("pod-");
        doc["metadata"]["name"] = Value::String(format!("{base}x7k2q"));
    }
    let text = serde_json::to_vec(&doc).expect("the pod must serialize");
    child
        .stdin
        .take()
        .expect("stdin must be piped")
        .write_all(&text)
        .expect("the pod must be written to kubernetes-validate");
    let out = child
        .wait_with_output()
        .expect("kubernetes-validate must finish");
    assert!(
        out.status.success(),
        "{case}: the patched pod must pass kubernetes-validate --strict: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
