//! The Python venv with the real Hermes Agent that real-client tests drive: found through
//! `FLEETGATE_VENV`, skipped with a clear line when absent, and a hard failure when
//! `FLEETGATE_REQUIRE_VENV=1` (as `tests/run` sets) says it must be there.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use anyhow::Context as _;
use tokio::process::Command;

/// Environment variable naming the venv directory.
pub const VENV_ENV: &str = "FLEETGATE_VENV";
/// Environment variable that, set to `1`, turns a missing or broken venv into a failure.
pub const REQUIRE_VENV_ENV: &str = "FLEETGATE_REQUIRE_VENV";
/// How long one Python run may take (Hermes imports are slow on a cold cache).
pub const PYTHON_TIMEOUT: Duration = Duration::from_secs(120);

/// Why the venv cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VenvProblem {
    /// `FLEETGATE_VENV` is unset or empty.
    Unset,
    /// `FLEETGATE_VENV` is set, but `bin/python` is not a file under it.
    NoPython(PathBuf),
}

// === impl VenvProblem ===

impl std::fmt::Display for VenvProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unset => write!(f, "{VENV_ENV} not set (run tests/run)"),
            Self::NoPython(python) => write!(
                f,
                "{VENV_ENV} is broken: {} is missing (run tests/run)",
                python.display()
            ),
        }
    }
}

/// The venv's Python, or `None` after printing `skipped: <reason>` when the venv is missing.
///
/// # Panics
///
/// When `FLEETGATE_REQUIRE_VENV=1` and `FLEETGATE_VENV` is unset or has no `bin/python`.
#[allow(
    clippy::print_stdout,
    reason = "the skip line belongs in the test's output"
)]
pub fn hermes_python() -> Option<PathBuf> {
    let venv = std::env::var_os(VENV_ENV).map(PathBuf::from);
    let required = std::env::var_os(REQUIRE_VENV_ENV).is_some_and(|value| value == "1");
    match locate_python(venv.as_deref()) {
        Ok(python) => Some(python),
        Err(problem) if required => panic!("{REQUIRE_VENV_ENV}=1 but {problem}"),
        Err(problem) => {
            println!("skipped: {problem}");
            None
        }
    }
}

/// `<venv>/bin/python` if the venv directory is given and has one.
pub fn locate_python(venv: Option<&Path>) -> Result<PathBuf, VenvProblem> {
    let venv = venv
        .filter(|dir| !dir.as_os_str().is_empty())
        .ok_or(VenvProblem::Unset)?;
    let python = venv.join("bin").join("python");
    if python.is_file() {
        Ok(python)
    } else {
        Err(VenvProblem::NoPython(python))
    }
}

/// Runs `python -c script args...` with extra `env`, collecting its output within
/// [`PYTHON_TIMEOUT`] whatever its exit status. Async so in-process servers the script talks
/// to keep running meanwhile.
pub async fn run_python(
    python: &Path,
    script: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> anyhow::Result<Output> {
    let run = Command::new(python)
        .arg("-c")
        .arg(script)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(PYTHON_TIMEOUT, run)
        .await
        .with_context(|| format!("python script ran past {PYTHON_TIMEOUT:?}"))?
        .with_context(|| format!("failed to run {}", python.display()))
}
