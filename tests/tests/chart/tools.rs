//! The Kubernetes tools the chart tests drive (helm v4, helm v3, kubernetes-validate), found
//! through the environment `tests/run` exports; rendering, validating and parsing helpers.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde::Deserialize as _;
use serde_json::Value;

/// helm v4 binary.
pub const HELM_ENV: &str = "FLEETGATE_HELM";
/// helm v3 binary.
pub const HELM3_ENV: &str = "FLEETGATE_HELM3";
/// kubernetes-validate binary.
pub const VALIDATE_ENV: &str = "FLEETGATE_K8S_VALIDATE";
/// Set to `1`, a missing tool fails the test instead of skipping it.
pub const REQUIRE_ENV: &str = "FLEETGATE_REQUIRE_K8S_TOOLS";
/// The Kubernetes versions every render is validated against (oldest supported, current).
pub const KUBE_VERSIONS: [&str; 2] = ["1.30.0", "1.33.0"];

/// Paths of the three tools.
#[derive(Clone, Debug)]
pub struct Tools {
    /// helm v4.
    pub helm: PathBuf,
    /// helm v3.
    pub helm3: PathBuf,
    /// kubernetes-validate.
    pub validate: PathBuf,
}

/// The tools, or `None` after printing `skipped: …` when one is not configured.
///
/// # Panics
///
/// When `FLEETGATE_REQUIRE_K8S_TOOLS=1` and a tool is missing.
#[allow(
    clippy::print_stdout,
    reason = "the skip line belongs in the test's output"
)]
pub fn tools() -> Option<Tools> {
    let required = std::env::var_os(REQUIRE_ENV).is_some_and(|v| v == "1");
    let find = |var: &str| -> Result<PathBuf, String> {
        match std::env::var_os(var).map(PathBuf::from) {
            Some(p) if p.is_file() => Ok(p),
            Some(p) => Err(format!(
                "{var}={} is not a file (run tests/run)",
                p.display()
            )),
            None => Err(format!("{var} not set (run tests/run)")),
        }
    };
    let found = (|| {
        Ok::<_, String>(Tools {
            helm: find(HELM_ENV)?,
            helm3: find(HELM3_ENV)?,
            validate: find(VALIDATE_ENV)?,
        })
    })();
    match found {
        Ok(tools) => Some(tools),
        Err(problem) if required => panic!("{REQUIRE_ENV}=1 but {problem}"),
        Err(problem) => {
            println!("skipped: {problem}");
            None
        }
    }
}

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .expect("the tests crate must sit inside the workspace")
}

/// The chart folder.
pub fn chart() -> PathBuf {
    workspace().join("charts/fleetgate")
}

/// A values file of the test matrix (`tests/tests/chart/values/<name>`).
pub fn values_file(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/chart/values")
        .join(name)
        .display()
        .to_string()
}

/// Run a command, returning its output whatever the status.
pub fn run(program: &Path, args: &[String], stdin: Option<&str>) -> Output {
    let mut child = Command::new(program)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{} must start: {e}", program.display()));
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes())
            .expect("the tool must read its stdin");
    }
    child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("{} must finish: {e}", program.display()))
}

/// Combined stdout and stderr, for messages.
pub fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `helm template <release> charts/fleetgate --namespace <ns> --include-crds <extra…>`.
pub fn template(helm: &Path, release: &str, ns: &str, extra: &[String]) -> Output {
    let mut args: Vec<String> = vec![
        "template".into(),
        release.into(),
        chart().display().to_string(),
        "--namespace".into(),
        ns.into(),
        "--include-crds".into(),
    ];
    args.extend(extra.iter().cloned());
    run(helm, &args, None)
}

/// Render and require success; the rendered YAML stream.
pub fn render(helm: &Path, release: &str, ns: &str, extra: &[String]) -> String {
    let out = template(helm, release, ns, extra);
    assert!(
        out.status.success(),
        "helm template {extra:?} in {ns} must succeed: {}",
        text(&out)
    );
    String::from_utf8(out.stdout).expect("helm must print UTF-8")
}

/// Every non-empty document of a YAML stream as JSON.
pub fn documents(yaml: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(yaml)
        .map(|doc| Value::deserialize(doc).expect("the render must be valid YAML"))
        .filter(|doc| !doc.is_null())
        .collect()
}

/// The one object of `kind` (and `name`, when given) in the documents.
pub fn find<'a>(docs: &'a [Value], kind: &str, name: Option<&str>) -> &'a Value {
    let matches: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == kind && name.is_none_or(|n| d["metadata"]["name"] == n))
        .collect();
    assert_eq!(
        matches.len(),
        1,
        "the render must hold exactly one {kind} {name:?}"
    );
    matches[0]
}

/// `kubernetes-validate --strict -k <version> -` over a YAML stream.
pub fn validate(tools: &Tools, yaml: &str, version: &str) -> Output {
    let args: Vec<String> = ["--strict", "-k", version, "-"]
        .iter()
        .map(|s| (*s).to_string())
        .collect();
    run(&tools.validate, &args, Some(yaml))
}

/// Owned argument list from string slices.
pub fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_string()).collect()
}
