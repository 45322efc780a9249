//! The venv lookup: a clear problem for each way the venv can be missing, and a working Python
//! when it is there.

use std::path::Path;

use fleetgate_e2e::venv::{self, Hermes, VenvProblem};

#[test]
fn locate_python_names_the_problem_for_each_missing_venv() {
    let empty = tempfile::tempdir().expect("a temp dir must be created");
    let complete = tempfile::tempdir().expect("a temp dir must be created");
    let python = complete.path().join("bin/python");
    std::fs::create_dir_all(complete.path().join("bin")).expect("bin/ must be created");
    std::fs::write(&python, "").expect("bin/python must be created");
    let cases = [
        ("unset", None, Err(VenvProblem::Unset)),
        (
            "set but empty",
            Some(Path::new("")),
            Err(VenvProblem::Unset),
        ),
        (
            "a dir without bin/python",
            Some(empty.path()),
            Err(VenvProblem::NoPython(empty.path().join("bin/python"))),
        ),
        (
            "a dir with bin/python",
            Some(complete.path()),
            Ok(python.clone()),
        ),
    ];
    for (case, dir, expected) in cases {
        assert_eq!(venv::locate_python(dir), expected, "{case}");
    }
    assert_eq!(
        VenvProblem::Unset.to_string(),
        "FLEETGATE_VENV not set (run tests/run)",
        "the skip reason must be the documented one"
    );
}

#[test]
fn locate_hermes_accepts_only_a_venv_holding_the_release_it_names() {
    let dir = tempfile::tempdir().expect("a temp dir must be created");
    let python = dir.path().join("bin/python");
    std::fs::create_dir_all(dir.path().join("bin")).expect("bin/ must be created");
    std::fs::write(&python, "").expect("bin/python must be created");
    let site = dir.path().join("lib/python3.11/site-packages");
    std::fs::create_dir_all(site.join(Hermes::V0_19_0.dist_info())).expect("a dist-info");
    assert_eq!(
        venv::locate_hermes(Hermes::V0_19_0, Some(dir.path())),
        Ok(python.clone()),
        "the venv holds 0.19.0"
    );
    assert_eq!(
        venv::locate_hermes(Hermes::V0_20_1, Some(dir.path())),
        Err(VenvProblem::WrongRelease(
            Hermes::V0_20_1,
            dir.path().to_path_buf()
        )),
        "0.19.0's venv is not 0.20.1's"
    );
    assert_eq!(
        venv::locate_hermes(Hermes::V0_20_1, None),
        Err(VenvProblem::VersionUnset(Hermes::V0_20_1))
    );
    assert_eq!(
        VenvProblem::VersionUnset(Hermes::V0_20_1).to_string(),
        "FLEETGATE_VENV_HERMES_0_20_1 not set, so Hermes 0.20.1 is not installed (run tests/run)",
        "the skip reason names the variable and the version"
    );
    assert_eq!(
        (Hermes::V0_19_0.cli(&python), Hermes::V0_20_1.cli(&python)),
        (
            dir.path().join("bin/hermes"),
            dir.path().join("bin/hermesx")
        ),
        "each release's console script"
    );
}

/// Each pinned venv, when installed, runs the release it is named for.
#[tokio::test]
async fn each_pinned_venv_runs_its_own_hermes_release() {
    for hermes in Hermes::ALL {
        let Some(python) = hermes.python() else {
            continue;
        };
        let script = "import hermes_cli; print(hermes_cli.__version__)";
        let output = venv::run_python(&python, script, &[], &[])
            .await
            .expect("the venv python must run");
        assert_eq!(
            String::from_utf8_lossy(&output.stdout).trim(),
            hermes.version(),
            "{hermes}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[tokio::test]
async fn run_python_passes_arguments_and_environment_to_the_venv_python() {
    let Some(python) = venv::hermes_python() else {
        return;
    };
    let script = "import os, sys; print(sys.argv[1:], os.environ['FLEETGATE_PROBE'])";
    let output = venv::run_python(&python, script, &["a", "b c"], &[("FLEETGATE_PROBE", "42")])
        .await
        .expect("the venv python must run");
    assert!(
        output.status.success(),
        "the script must succeed: {output:?}"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        stdout, "['a', 'b c'] 42\n",
        "arguments and environment must reach python"
    );
}
