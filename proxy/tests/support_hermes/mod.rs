//! Helpers private to the Hermes differential test: the venv rules, the Python oracle run
//! and the seeded corpus.

pub mod corpus;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

/// One corpus string as Hermes saw it (field names are kept short in the oracle's JSON).
#[derive(Debug, Deserialize)]
pub struct Record {
    /// `_PREFIX_RE` (56-family set) match as a UTF-8 byte range.
    pub p: Option<(usize, usize)>,
    /// The first documented delta between the installed release and the 56-family set that
    /// changes this string's prefix result.
    pub d: Option<String>,
    /// `sensitive_query_param_name`.
    pub q: Option<String>,
    /// `normalize_url_for_request`.
    pub n: String,
    /// `urllib.parse.unquote`.
    pub u: String,
    /// `[hostname, idna]` when the normaliser IDNA-encodes a non-ASCII host.
    pub h: Option<(String, Option<String>)>,
    /// E1 decision for the string as an extract item: `invalid`, `secret`, `query:<key>`,
    /// `allow`.
    pub g: String,
}

/// Everything the oracle reports.
#[derive(Debug, Deserialize)]
pub struct OracleOutput {
    /// The installed Hermes version.
    pub version: String,
    /// The deltas that had to be applied to reach the 56-family set.
    pub deltas: Vec<String>,
    /// One record per corpus string, in order.
    pub records: Vec<Record>,
    /// Nanoseconds per bench URL for the 56-family regex.
    pub ns_spec: f64,
    /// Nanoseconds per bench URL for the installed `_PREFIX_RE`.
    pub ns_installed: f64,
    /// Nanoseconds per bench URL for Hermes' whole E1 sequence (normalise, four forms with
    /// the 56-family regex, query names).
    pub ns_e1: f64,
}

/// The venv from `FLEETGATE_VENV`, or `None` (after printing the skip line) when the test
/// may skip. Panics when `FLEETGATE_REQUIRE_VENV=1` and the venv is missing.
pub fn venv_or_skip() -> Option<PathBuf> {
    match std::env::var_os("FLEETGATE_VENV") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            assert!(
                dir.join("bin/python").exists(),
                "FLEETGATE_VENV={} must hold bin/python",
                dir.display()
            );
            Some(dir)
        }
        None => {
            let required = std::env::var("FLEETGATE_REQUIRE_VENV").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "FLEETGATE_REQUIRE_VENV=1 but FLEETGATE_VENV is not set"
            );
            println!("skipped: FLEETGATE_VENV not set (run tests/run)");
            None
        }
    }
}

/// Run the oracle once over `corpus` (and time it on `bench`) in an isolated Python.
pub fn run_oracle(venv: &Path, corpus: &[String], bench: &[String]) -> OracleOutput {
    let dir = tempfile::tempdir().expect("a temp dir must be creatable");
    let input = dir.path().join("in.json");
    let output = dir.path().join("out.json");
    let body = serde_json::json!({ "corpus": corpus, "bench": bench });
    std::fs::write(&input, body.to_string()).expect("the corpus must be writable");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support_hermes/oracle.py");
    let home = dir.path().join("hermes-home");
    std::fs::create_dir_all(&home).expect("the Hermes home must be creatable");
    let status = Command::new(venv.join("bin/python"))
        .args(["-I", "-B"])
        .arg(&script)
        .arg(&input)
        .arg(&output)
        .current_dir(dir.path())
        .env("HERMES_HOME", &home)
        .env("HOME", dir.path())
        .status()
        .expect("the venv python must start");
    assert!(
        status.success(),
        "the Hermes oracle must exit cleanly, got {status}"
    );
    let text = std::fs::read_to_string(&output).expect("the oracle must write its output");
    serde_json::from_str(&text).expect("the oracle output must be valid JSON")
}
