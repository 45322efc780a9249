//! The gate runner against `fake_gate.sh`, a script that behaves like `fleetgate-proxy`'s
//! startup (listening line on stdout, JSON log lines on stderr) in several ways.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use fleetgate_e2e::gate::{self, GateProcess, WORK_DIR_PLACEHOLDER};

fn fake_gate() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/harness/fake_gate.sh")
}

fn addr(text: &str) -> SocketAddr {
    text.parse().expect("test addresses must parse")
}

async fn spawn_fake(policy: &str) -> GateProcess {
    GateProcess::builder(policy)
        .binary(fake_gate())
        .arg("--extra")
        .spawn()
        .await
        .expect("the fake gate must start")
}

#[tokio::test]
async fn spawn_exposes_every_listener_of_the_listening_line() {
    let gate = spawn_fake("version: 1\n").await;
    assert_eq!(gate.api_addr(), addr("127.0.0.1:4101"), "api");
    assert_eq!(gate.admin_addr(), addr("127.0.0.1:4102"), "admin");
    #[rustfmt::skip]
    let cases = [
        ("a listener beyond api and admin is kept", "proxy", Some(addr("[::1]:4103"))),
        ("api is also reachable by name", "api", Some(addr("127.0.0.1:4101"))),
        ("an absent listener is None", "transparent", None),
    ];
    for (case, name, expected) in cases {
        assert_eq!(gate.listener(name), expected, "{case}");
    }
    assert_eq!(gate.listeners().len(), 3, "exactly the three listeners");
}

#[tokio::test]
async fn spawn_writes_the_policy_with_the_work_dir_filled_in_and_passes_it_to_serve() {
    let gate = spawn_fake(&format!("cache_dir: {WORK_DIR_PLACEHOLDER}/cache\n")).await;
    let written = std::fs::read_to_string(gate.policy_path()).expect("the policy must exist");
    let cache = gate.work_dir().join("cache");
    assert_eq!(
        written,
        format!("cache_dir: {}\n", cache.display()),
        "the placeholder"
    );
    let argv = format!(
        "argv: serve --policy {} --extra",
        gate.policy_path().display()
    );
    let seen = gate
        .wait_for_log(|line| line.starts_with("argv:"), Duration::from_secs(5))
        .await
        .expect("the argv line must be logged");
    assert_eq!(
        seen, argv,
        "serve --policy <file> and the extra args must be passed"
    );
}

#[tokio::test]
async fn spawn_captures_stderr_lines_including_ones_logged_later() {
    let gate = spawn_fake("version: 1\n").await;
    let decision = gate
        .wait_for_json_log(|line| line["verdict"] == "deny", Duration::from_secs(5))
        .await
        .expect("the late decision line must be captured");
    assert_eq!(
        decision["reason"], "ip_private_range",
        "the matching line is returned"
    );
    let events: Vec<_> = gate
        .json_logs()
        .into_iter()
        .map(|l| l["event"].clone())
        .collect();
    assert_eq!(
        events,
        ["starting", "egress.decision"],
        "JSON lines only, in order"
    );
    let stderr = gate.stderr_log();
    assert!(
        stderr.starts_with("argv: serve"),
        "stderr_log holds every line: {stderr}"
    );
    assert_eq!(
        stderr.lines().count(),
        3,
        "argv and two JSON lines: {stderr}"
    );
    assert_eq!(
        gate.stdout_log(),
        "after listening\n",
        "stdout after the line is kept"
    );
}

#[tokio::test]
async fn spawn_fails_with_a_clear_message_when_the_gate_does_not_start() {
    #[rustfmt::skip]
    let cases = [
        ("an early exit quotes stderr and the status", "exit",
            ["closed stdout", "exit status: 64", "failed to load policy: missing version"]),
        ("a non-JSON first line", "garbage",
            ["failed to parse the gate's first stdout line", "hello, not json", "argv: serve"]),
        ("a line without the admin listener", "no-admin",
            ["no `admin` listener", "api", "127.0.0.1:4101"]),
        ("silence past the startup timeout", "silent",
            ["no listening line within 500ms", "argv: serve", "gate stderr"]),
    ];
    for (case, mode, needles) in cases {
        let started = GateProcess::builder("version: 1\n")
            .binary(fake_gate())
            .env("FAKE_GATE_MODE", mode)
            .startup_timeout(Duration::from_millis(500))
            .spawn()
            .await;
        let error = format!("{:#}", started.expect_err("the gate must fail to start"));
        for needle in needles {
            assert!(
                error.contains(needle),
                "{case}: the error must mention {needle:?}: {error}"
            );
        }
    }
}

#[tokio::test]
async fn wait_for_log_fails_after_its_timeout_when_no_line_matches() {
    let gate = GateProcess::builder("version: 1\n")
        .binary(fake_gate())
        .spawn()
        .await
        .expect("the fake gate must start");
    let missing = gate
        .wait_for_log(
            |line| line.contains("never logged"),
            Duration::from_millis(200),
        )
        .await;
    let error = format!("{:#}", missing.expect_err("no line matches"));
    assert!(
        error.contains("no gate log line matched within 200ms"),
        "{error}"
    );
}

#[tokio::test]
async fn terminate_stops_the_gate_and_reports_how_it_ended() {
    let mut gate = GateProcess::builder("version: 1\n")
        .binary(fake_gate())
        .spawn()
        .await
        .expect("the fake gate must start");
    assert!(gate.pid().is_some(), "a running gate has a pid");
    let status = gate
        .terminate(Duration::from_secs(5))
        .await
        .expect("the gate must stop on SIGTERM");
    assert_eq!(
        status.code(),
        None,
        "the fake gate is ended by the signal, not an exit code"
    );
    assert_eq!(gate.pid(), None, "a reaped gate has no pid");
}

#[tokio::test]
async fn run_cli_returns_the_output_and_exit_status_of_a_subcommand() {
    let args = ["check-policy", "/tmp/policy.yaml"];
    let output = gate::run_cli_with(&fake_gate(), &args, &[("FAKE_GATE_MODE", "cli")])
        .await
        .expect("the subcommand must run");
    assert_eq!(
        output.status.code(),
        Some(3),
        "the exit status must be kept"
    );
    assert_eq!(
        output.stdout, b"cli: check-policy /tmp/policy.yaml\n",
        "stdout must be kept"
    );
    assert_eq!(output.stderr, b"cli stderr\n", "stderr must be kept");
}

#[test]
fn the_listening_line_parses_into_named_addresses_or_fails_with_the_reason() {
    let parsed = gate::parse_listening_line(
        r#"{"listening":{"api":"127.0.0.1:1","admin":"127.0.0.1:2"},"version":"0.1.0"}"#,
    )
    .expect("a well-formed line must parse");
    let names: Vec<&str> = parsed.keys().map(String::as_str).collect();
    assert_eq!(names, ["admin", "api"], "one entry per listener");
    assert_eq!(parsed["api"], addr("127.0.0.1:1"), "the api address");
    let cases = [
        ("not JSON", "listening on 1", "failed to parse"),
        (
            "no listening object",
            r#"{"listen":{}}"#,
            "no `listening` object",
        ),
        (
            "an address that is not one",
            r#"{"listening":{"api":"localhost"}}"#,
            "`api` is not",
        ),
        (
            "an address that is a number",
            r#"{"listening":{"api":8080}}"#,
            "`api` is not",
        ),
    ];
    for (case, line, reason) in cases {
        let error = format!("{:#}", gate::parse_listening_line(line).expect_err(case));
        assert!(
            error.contains(reason),
            "{case}: the error must say {reason:?}: {error}"
        );
    }
}

#[tokio::test]
async fn the_gate_binary_is_found_or_built_and_runs() {
    let binary = tokio::task::spawn_blocking(gate::gate_binary)
        .await
        .expect("the locate task must not panic")
        .expect("the gate binary must be found or built");
    assert!(binary.is_file(), "{} must be a file", binary.display());
    let output = gate::run_cli_with(&binary, &["--help"], &[])
        .await
        .expect("the gate binary must run");
    assert!(
        output.status.code().is_some(),
        "the gate must exit on its own: {output:?}"
    );
}
