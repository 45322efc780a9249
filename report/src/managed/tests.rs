use serde_json::json;

use super::*;

fn scope_with(config: Option<&[u8]>) -> (tempfile::TempDir, ManagedScope) {
    let dir = tempfile::tempdir().expect("a temp managed dir must be created");
    if let Some(bytes) = config {
        std::fs::write(dir.path().join("config.yaml"), bytes).expect("config must be written");
    }
    let scope = load(&ManagedDir::At(dir.path().to_path_buf()));
    (dir, scope)
}

#[test]
fn each_failure_mode_of_the_managed_file_is_named_and_pins_nothing() {
    let cases: [(&str, &[u8], &str); 7] = [
        ("an empty file", b"", "empty"),
        ("only comments", b"# nothing pinned yet\n", "empty"),
        ("a null document", b"null\n", "empty"),
        (
            "invalid UTF-8",
            b"model:\n  default: \xff\xfe\n",
            "not_utf8",
        ),
        ("a YAML syntax error", b"model: [unclosed\n", "yaml_error"),
        ("a list at the top", b"- model\n- agent\n", "not_a_mapping"),
        ("a scalar at the top", b"just words\n", "not_a_mapping"),
    ];
    for (why, bytes, code) in cases {
        let (_dir, scope) = scope_with(Some(bytes));
        let error = scope.state.error.clone().unwrap_or_default();
        assert!(
            error.starts_with(code),
            "{why} must report {code}, got {error:?}"
        );
        assert_eq!(scope.state.keys, 0, "{why} must pin no key");
        assert!(scope.config.is_empty(), "{why} must overlay nothing");
        assert_eq!(
            scope.state.sha256.as_deref(),
            Some(hex::encode(Sha256::digest(bytes)).as_str()),
            "{why} must still digest the raw bytes"
        );
    }
}

#[cfg(unix)]
#[test]
fn an_unreadable_managed_file_is_named_unless_running_as_root() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, _) = scope_with(Some(b"model: {default: x}\n"));
    let path = dir.path().join("config.yaml");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).expect("chmod");
    if std::fs::read(&path).is_ok() {
        println!("skipped: running as root, permissions do not stop reads");
        return;
    }
    let scope = load(&ManagedDir::At(dir.path().to_path_buf()));
    let error = scope.state.error.unwrap_or_default();
    assert!(
        error.starts_with("unreadable"),
        "a permission error must be named, got {error:?}"
    );
    assert_eq!(
        (scope.state.keys, scope.state.sha256),
        (0, None),
        "nothing read, nothing pinned"
    );
}

#[test]
fn a_valid_managed_file_counts_its_pinned_leaves() {
    let yaml = b"model:\n  default: grok-4.6\n  provider: xai\nsecurity:\n  redact_secrets: true\n\
plugins:\n  enabled: [fleet-policy]\nempty_section: {}\nunset: null\n";
    let (dir, scope) = scope_with(Some(yaml));
    assert_eq!(scope.state.error, None, "a valid file must apply");
    assert_eq!(
        scope.state.dir,
        Some(dir.path().display().to_string()),
        "the dir is reported"
    );
    assert_eq!(
        scope.state.keys, 6,
        "leaves: 2 model, 1 security, 1 list, 1 empty map, 1 null"
    );
    assert_eq!(
        scope.config["model"],
        json!({"default": "grok-4.6", "provider": "xai"}),
        "parsed"
    );
}

#[test]
fn the_directory_resolves_only_when_it_exists() {
    let (dir, scope) = scope_with(None);
    assert_eq!(
        scope.state.dir,
        Some(dir.path().display().to_string()),
        "dir without config"
    );
    assert_eq!(
        (scope.state.keys, scope.state.sha256, scope.state.error),
        (0, None, None),
        "empty"
    );
    let gone = dir.path().join("missing");
    assert_eq!(
        resolve_dir(&ManagedDir::At(gone)),
        None,
        "a missing dir is no scope"
    );
    assert_eq!(resolve_dir(&ManagedDir::Off), None, "off is no scope");
    assert_eq!(
        load(&ManagedDir::Off).state,
        ManagedState::default(),
        "no scope, all null"
    );
}
