use std::path::PathBuf;

use super::*;

fn examples() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("deploy/examples must exist")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

fn file_name(p: &std::path::Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[test]
fn every_valid_example_renders_one_config_map() {
    let valid: Vec<PathBuf> = examples()
        .into_iter()
        .filter(|p| file_name(p).starts_with("valid-"))
        .collect();
    assert!(
        valid.len() >= 3,
        "deploy/examples must hold the valid examples"
    );
    for path in valid {
        let text = std::fs::read_to_string(&path).expect("an example must be readable");
        let docs = render_text(&file_name(&path), &text)
            .unwrap_or_else(|e| panic!("{} must render: {e}", path.display()));
        assert_eq!(
            docs.len(),
            1,
            "{} must render exactly one ConfigMap",
            path.display()
        );
        assert!(
            docs[0].starts_with("apiVersion: v1\nkind: ConfigMap\n"),
            "the ConfigMap must lead with apiVersion and kind"
        );
    }
}

#[test]
fn every_invalid_example_is_refused_with_its_expected_message() {
    let invalid: Vec<PathBuf> = examples()
        .into_iter()
        .filter(|p| file_name(p).starts_with("invalid-"))
        .collect();
    assert!(
        invalid.len() >= 4,
        "deploy/examples must hold the invalid examples"
    );
    for path in invalid {
        let text = std::fs::read_to_string(&path).expect("an example must be readable");
        let expect = text
            .lines()
            .find_map(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{} must state `# expect: <message>`", path.display()));
        let err = render_text(&file_name(&path), &text)
            .expect_err(&format!("{} must be refused", path.display()));
        assert!(
            err.to_string().contains(expect),
            "{} must be refused naming `{expect}`, got: {err}",
            path.display()
        );
    }
}

#[test]
fn documents_of_other_kinds_are_skipped() {
    let text = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: agents\n---\n\
                apiVersion: fleetgate.dev/v1alpha1\nkind: FleetPolicy\nmetadata:\n  name: a\nspec:\n  selector: {}\n";
    let docs = render_text("inline", text).expect("a mixed stream must render");
    assert_eq!(docs.len(), 1, "only the FleetPolicy must render");
    assert!(
        docs[0].contains("name: a-managed"),
        "the ConfigMap must be named after the policy"
    );
}

#[test]
fn a_broken_document_names_its_file_and_index() {
    let text = "kind: Namespace\n---\nkind: FleetPolicy\nspec: [1]\n";
    let err = render_text("broken.yaml", text).expect_err("a broken FleetPolicy must be refused");
    let message = err.to_string();
    assert!(
        message.contains("broken.yaml document 1"),
        "the error must name the file and document: {message}"
    );
}
