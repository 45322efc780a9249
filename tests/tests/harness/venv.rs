//! The venv lookup: a clear problem for each way the venv can be missing, and a working Python
//! when it is there.

use std::path::Path;

use fleetgate_e2e::venv::{self, VenvProblem};

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
