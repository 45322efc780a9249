//! Finding the `fleetgate-proxy` binary the e2e tests run, and building it once per test
//! process when it is missing or older than the proxy sources.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::SystemTime;

/// Environment variable naming the gate binary to run instead of the workspace build.
pub const GATE_BIN_ENV: &str = "FLEETGATE_PROXY_BIN";
const PACKAGE: &str = "fleetgate-proxy";
/// How much of a failed build's stderr the error quotes.
const BUILD_LOG_TAIL_LINES: usize = 60;

/// The outcome of the one build per test process (errors as text so the result is clonable).
static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// The gate binary: `$FLEETGATE_PROXY_BIN` if set, else `<target dir>/debug/fleetgate-proxy`,
/// built first with `cargo build -p fleetgate-proxy --bin fleetgate-proxy` (once per process,
/// `$CARGO` if set) when it is missing or older than `proxy/` sources, `Cargo.toml` or
/// `Cargo.lock`. Blocks while building; async callers use [`super::GateProcess`], which runs
/// this on a blocking thread.
pub fn gate_binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os(GATE_BIN_ENV).filter(|value| !value.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    BUILT
        .get_or_init(|| ensure_built(&workspace_root(), &default_binary_path()))
        .clone()
        .map_err(anyhow::Error::msg)
}

/// `<target dir>/debug/fleetgate-proxy`, the target dir being `$CARGO_TARGET_DIR` (a relative
/// one is taken from the workspace root) or `<workspace>/target`.
pub fn default_binary_path() -> PathBuf {
    let root = workspace_root();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .filter(|value| !value.is_empty())
        .map_or_else(|| root.join("target"), |dir| root.join(dir));
    target.join("debug").join(PACKAGE)
}

fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}

fn ensure_built(root: &Path, binary: &Path) -> Result<PathBuf, String> {
    if is_fresh(root, binary) {
        return Ok(binary.to_path_buf());
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let output = std::process::Command::new(&cargo)
        .args(["build", "-p", PACKAGE, "--bin", PACKAGE])
        .current_dir(root)
        .output()
        .map_err(|error| format!("failed to run {cargo:?} to build {PACKAGE}: {error}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        let tail = lines[lines.len().saturating_sub(BUILD_LOG_TAIL_LINES)..].join("\n");
        return Err(format!(
            "failed to build the gate with `cargo build -p {PACKAGE} --bin {PACKAGE}` \
             ({}); set {GATE_BIN_ENV} to use a prebuilt binary. cargo said:\n{tail}",
            output.status
        ));
    }
    if !binary.is_file() {
        return Err(format!(
            "failed to find the gate at {} after building it (is CARGO_TARGET_DIR the same \
             for the build and the tests?)",
            binary.display()
        ));
    }
    Ok(binary.to_path_buf())
}

/// Whether `binary` exists and is newer than every input of the proxy build (the proxy and
/// the workspace crates it is built from).
fn is_fresh(root: &Path, binary: &Path) -> bool {
    let Some(built) = modified(binary) else {
        return false;
    };
    let inputs = [
        root.join("proxy"),
        root.join("report"),
        root.join("accept"),
        root.join("policy"),
        root.join("Cargo.toml"),
        root.join("Cargo.lock"),
    ];
    inputs
        .iter()
        .filter_map(|input| newest_modification(input))
        .all(|changed| changed <= built)
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path)
        .and_then(|meta| meta.modified())
        .ok()
}

/// The newest modification time of `path` or of any file below it.
fn newest_modification(path: &Path) -> Option<SystemTime> {
    let own = modified(path);
    let Ok(entries) = std::fs::read_dir(path) else {
        return own;
    };
    entries
        .filter_map(Result::ok)
        // Directories named `target` hold build output, not inputs.
        .filter(|entry| entry.file_name() != "target")
        .filter_map(|entry| newest_modification(&entry.path()))
        .chain(own)
        .max()
}
