//! Helpers shared by the report integration tests: the Hermes venv and home snapshots.
// Each test crate uses a subset; helpers panic on broken fixtures like the tests do, and the
// skip line is the documented way to say a venv test did not run.
#![allow(dead_code, clippy::expect_used, clippy::print_stdout)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The pinned Hermes releases, with the variable naming each one's venv (as `tests/run` sets
/// them; `fleetgate_e2e::venv::Hermes` outside this crate).
pub const HERMES_VENVS: [(&str, &str); 2] = [
    ("0.19.0", "FLEETGATE_VENV"),
    ("0.20.1", "FLEETGATE_VENV_HERMES_0_20_1"),
];

/// The Python of the venv holding Hermes `version`, or `None` (with the skip line printed)
/// when that venv is not configured. With `FLEETGATE_REQUIRE_VENV=1` a missing venv fails the
/// test instead; a venv holding another release always does.
pub fn hermes_python(version: &str) -> Option<PathBuf> {
    let (_, var) = HERMES_VENVS
        .iter()
        .find(|(v, _)| *v == version)
        .expect("a pinned Hermes version");
    let Some(venv) = std::env::var_os(var).filter(|v| !v.is_empty()) else {
        assert!(
            std::env::var("FLEETGATE_REQUIRE_VENV").as_deref() != Ok("1"),
            "{var} must be set when FLEETGATE_REQUIRE_VENV=1 (run tests/run)"
        );
        println!("skipped: {var} not set, so Hermes {version} is not installed (run tests/run)");
        return None;
    };
    let python = PathBuf::from(venv).join("bin").join("python");
    assert!(python.exists(), "{var} must contain bin/python: {python:?}");
    let out = std::process::Command::new(&python)
        .args([
            "-I",
            "-c",
            "import hermes_cli; print(hermes_cli.__version__)",
        ])
        .output()
        .expect("the venv python must run");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        version,
        "{var} must hold Hermes {version}"
    );
    Some(python)
}

/// The workspace root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the proxy crate has a parent")
        .into()
}

/// Every file under `dir` with its bytes (relative paths).
pub fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current).expect("the home must be listable") {
            let path = entry.expect("entries must be readable").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("home files must be readable");
                let relative = path
                    .strip_prefix(dir)
                    .expect("under the home")
                    .to_path_buf();
                files.insert(relative, bytes);
            }
        }
    }
    files
}

/// Assert two snapshots are identical, naming the first difference.
pub fn assert_unchanged(before: &BTreeMap<PathBuf, Vec<u8>>, after: &BTreeMap<PathBuf, Vec<u8>>) {
    let names = |s: &BTreeMap<PathBuf, Vec<u8>>| s.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(after),
        names(before),
        "the report must create or delete no file"
    );
    for (path, bytes) in before {
        assert!(after[path] == *bytes, "the report must not change {path:?}");
    }
}
