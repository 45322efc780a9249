//! The LLM route against hostile agents: bodies built to blow up a JSON tree, paths that
//! decode to another endpoint, endpoints that run a model outside the judged ones, duplicate
//! keys, and model strings built to grow `/metrics` or leak a secret.

use fleetgate_e2e::gate::GateProcess;
use fleetgate_e2e::llm_stub::{StubKind, StubOptions, StubProvider};
use serde_json::Value;

use super::gate_with;
use super::support::{metrics, post};

/// The gate's peak resident set so far (`VmHWM`), in bytes.
fn peak_rss(gate: &GateProcess) -> u64 {
    let pid = gate.pid().expect("the gate runs");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM must be reported");
    kib * 1024
}

/// `{"model":"<model>","x":[0,0,…]}` of about `size` bytes: each `0,` is one JSON value, the
/// shape that costs a tree dozens of times its size.
fn amplifying_body(model: &str, size: usize) -> Vec<u8> {
    let mut body = format!(r#"{{"model":"{model}","reasoning_effort":"low","x":["#).into_bytes();
    while body.len() < size {
        body.extend_from_slice(b"0,");
    }
    body.extend_from_slice(b"0]}");
    body
}

#[tokio::test]
async fn judging_a_large_body_costs_a_small_multiple_of_its_size_not_a_json_tree() {
    let stub = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let tail = "  mode: enforce\n  roles:\n    main: oai\n  allowedModels: [stub-model]\n\
                \x20 pins:\n    main:\n      effort: high\n";
    let (_secrets, gate) = gate_with(&[("oai", "openai", &stub)], tail).await;
    let path = "/llm/main/v1/chat/completions";
    let baseline = peak_rss(&gate);
    for (mib, model, status) in [
        (7, "gpt-rogue", 403),
        (28, "gpt-rogue", 403),
        (28, "stub-model", 200),
    ] {
        let size = mib * 1024 * 1024;
        let reply = post(&gate, path, amplifying_body(model, size)).await;
        assert_eq!(reply.status, status, "{mib} MiB {model}: {}", reply.text());
        let grown = peak_rss(&gate).saturating_sub(baseline);
        // The body buffered, its contiguous copy and a rewrite; a tree of it is ~30x.
        let bound = 4 * size as u64 + 32 * 1024 * 1024;
        assert!(
            grown <= bound,
            "a {mib} MiB body ({model}) must not grow the gate's peak RSS by more than {} MiB; it grew {} MiB",
            bound >> 20,
            grown >> 20
        );
    }
    let seen = stub.requests();
    assert_eq!(seen.len(), 1, "only the allowed body reaches the provider");
    assert!(
        seen[0].body_len >= 28 * 1024 * 1024,
        "the allowed body is forwarded whole: {} bytes",
        seen[0].body_len
    );
}

#[tokio::test]
async fn a_body_over_the_route_cap_gets_a_413_in_the_provider_error_shape() {
    let openai = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let anthropic = StubProvider::start(StubOptions::new(StubKind::Anthropic))
        .await
        .expect("stub");
    let tail = "  mode: enforce\n  roles:\n    main: oai\n    delegation: claude\n\
                \x20 maxRequestBytes: 65536\n";
    let (_secrets, gate) = gate_with(
        &[
            ("oai", "openai", &openai),
            ("claude", "anthropic", &anthropic),
        ],
        tail,
    )
    .await;
    let body = amplifying_body("stub-model", 200 * 1024);
    for (path, type_at, want_type) in [
        (
            "/llm/main/v1/chat/completions",
            "/error/type",
            "invalid_request_error",
        ),
        (
            "/llm/delegation/v1/messages",
            "/error/type",
            "request_too_large",
        ),
    ] {
        let reply = post(&gate, path, body.clone()).await;
        assert_eq!(reply.status, 413, "{path}: {}", reply.text());
        assert_eq!(
            reply.header("x-fleetgate-error"),
            Some("payload_too_large"),
            "{path}: code header"
        );
        let json: Value = reply.json().expect("a JSON error");
        assert_eq!(
            json.pointer(type_at).and_then(Value::as_str),
            Some(want_type),
            "{path}: {json}"
        );
        let message = json
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or("");
        assert!(
            message.contains("65536"),
            "{path}: the message names the cap: {json}"
        );
    }
    let small = post(
        &gate,
        "/llm/main/v1/chat/completions",
        amplifying_body("stub-model", 1024),
    )
    .await;
    assert_eq!(
        small.status,
        200,
        "a body under the cap passes: {}",
        small.text()
    );
    assert_eq!(
        openai.requests().len() + anthropic.requests().len(),
        1,
        "only the small body reaches a provider"
    );
    let text = metrics(&gate).await;
    assert!(
        text.contains(r#"fleetgate_llm_refusals_total{action="refused",code="payload_too_large",role="main"} 1"#),
        "a body over the cap is counted as a refusal:\n{text}"
    );
}

#[tokio::test]
async fn a_judged_key_sent_twice_is_refused_in_enforce_mode_and_counted_in_observe_mode() {
    let stub = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let bodies: [&'static str; 5] = [
        r#"{"model":"gpt-rogue","model":"stub-model","messages":[]}"#,
        r#"{"model":"stub-model","messages":[],"model":"stub-model"}"#,
        r#"{"model":"gpt-rogue","mod\u0065l":"stub-model","messages":[]}"#,
        r#"{"model":"stub-model","reasoning_effort":"low","reasoning_effort":"high"}"#,
        r#"{"model":"stub-model","reasoning":{"effort":"xhigh","effort":"high"}}"#,
    ];
    let tail = "  mode: enforce\n  roles:\n    main: oai\n  allowedModels: [stub-model]\n\
                \x20 pins:\n    main:\n      effort: high\n";
    let (_secrets, gate) = gate_with(&[("oai", "openai", &stub)], tail).await;
    for body in bodies {
        let reply = post(&gate, "/llm/main/v1/chat/completions", body).await;
        assert_eq!(reply.status, 400, "{body}: {}", reply.text());
        assert_eq!(
            reply.header("x-fleetgate-error"),
            Some("llm_duplicate_key"),
            "{body}: code"
        );
        let message = reply.json().expect("JSON error")["error"]["message"].to_string();
        assert!(
            message.contains("more than once"),
            "{body}: a clear message: {message}"
        );
    }
    assert!(
        stub.requests().is_empty(),
        "no body with a duplicate judged key reaches the provider: {:?}",
        stub.requests()
    );
    drop(gate);
    let tail = "  roles:\n    main: oai\n  allowedModels: [stub-model]\n";
    let (_secrets, gate) = gate_with(&[("oai", "openai", &stub)], tail).await;
    for body in bodies {
        let reply = post(&gate, "/llm/main/v1/chat/completions", body).await;
        assert_eq!(
            reply.status,
            200,
            "observe mode forwards {body}: {}",
            reply.text()
        );
    }
    let text = metrics(&gate).await;
    assert!(
        text.contains(r#"fleetgate_llm_refusals_total{action="would_refuse",code="llm_duplicate_key",role="main"} 5"#),
        "observe mode counts what enforce would refuse:\n{text}"
    );
}

/// Paths that a decoding provider routes to a completion endpoint, though not written as one.
const DISGUISED_PATHS: [&str; 10] = [
    "/llm/main/v1/chat/complet%69ons",
    "/llm/main/v1/chat/%63ompletions",
    "/llm/main/v1/me%73sages",
    "/llm/main/v1/./chat/completions",
    "/llm/main/v1/x/../chat/completions",
    "/llm/main/v1/chat%2Fcompletions",
    "/llm/main/v1//chat/completions",
    "/llm/main/v1/chat/completions;x",
    "/llm/main/v1/%2e%2e/v1/chat/completions",
    "/llm/main/v1/chat/complet%2569ons",
];

#[tokio::test]
async fn a_path_that_decodes_to_an_endpoint_is_refused_in_enforce_mode_and_judged_in_observe_mode()
{
    let stub = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let tail = "  mode: enforce\n  roles:\n    main: oai\n  allowedModels: [stub-model]\n";
    let (_secrets, gate) = gate_with(&[("oai", "openai", &stub)], tail).await;
    let rogue = r#"{"model":"gpt-rogue","messages":[]}"#;
    for path in DISGUISED_PATHS {
        let reply = post(&gate, path, rogue).await;
        assert_eq!(reply.status, 400, "{path}: {}", reply.text());
        assert_eq!(
            reply.header("x-fleetgate-error"),
            Some("llm_path_not_canonical"),
            "{path}: code"
        );
    }
    assert!(
        stub.requests().is_empty(),
        "no disguised path reaches the provider: {:?}",
        stub.requests().iter().map(|r| &r.path).collect::<Vec<_>>()
    );
    let plain = post(
        &gate,
        "/llm/main/v1/chat/completions",
        r#"{"model":"stub-model"}"#,
    )
    .await;
    assert_eq!(plain.status, 200, "a plain path passes: {}", plain.text());
    drop(gate);
    let tail = "  roles:\n    main: oai\n  allowedModels: [stub-model]\n";
    let (_secrets, gate) = gate_with(&[("oai", "openai", &stub)], tail).await;
    for path in DISGUISED_PATHS {
        post(&gate, path, rogue).await;
    }
    let text = metrics(&gate).await;
    // Every path but the double-encoded one decodes once to a completion endpoint.
    for want in [
        r#"fleetgate_llm_refusals_total{action="would_refuse",code="llm_path_not_canonical",role="main"} 10"#,
        r#"fleetgate_llm_refusals_total{action="would_refuse",code="llm_model_not_allowed",role="main"} 9"#,
    ] {
        assert!(
            text.contains(want),
            "observe mode judges the decoded path: {want}\n{text}"
        );
    }
}

#[tokio::test]
async fn enforce_mode_judges_every_endpoint_that_runs_a_model_and_refuses_the_rest() {
    let stub = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let tail = "  mode: enforce\n  roles:\n    main: oai\n  allowedModels: [stub-model]\n\
                \x20 pins:\n    main:\n      effort: high\n\
                \x20 extraEndpoints: [\"GET /v1/batches/*\"]\n";
    let (_secrets, gate) = gate_with(&[("oai", "openai", &stub)], tail).await;
    let refused: [(&str, &'static str, u16, &str); 9] = [
        (
            "/llm/main/v1/complete",
            r#"{"model":"gpt-rogue","prompt":"x"}"#,
            403,
            "llm_model_not_allowed",
        ),
        (
            "/llm/main/v1/embeddings",
            r#"{"model":"gpt-rogue","input":"x"}"#,
            403,
            "llm_model_not_allowed",
        ),
        (
            "/llm/main/v1/images/generations",
            r#"{"model":"gpt-rogue","prompt":"x"}"#,
            403,
            "llm_model_not_allowed",
        ),
        (
            "/llm/main/v1/images/generations",
            r#"{"prompt":"x"}"#,
            400,
            "llm_model_missing",
        ),
        (
            "/llm/main/v1/messages/batches",
            r#"{"requests":[{"custom_id":"a","params":{"model":"stub-model"}},{"custom_id":"b","params":{"model":"gpt-rogue"}}]}"#,
            403,
            "llm_model_not_allowed",
        ),
        (
            "/llm/main/v1/messages/batches",
            r#"{"requests":[{"custom_id":"a","params":{"model":"stub-model","model":"gpt-rogue"}}]}"#,
            400,
            "llm_duplicate_key",
        ),
        (
            "/llm/main/v1/batches",
            r#"{"input_file_id":"file-1","endpoint":"/v1/chat/completions","completion_window":"24h"}"#,
            403,
            "llm_endpoint_not_allowed",
        ),
        (
            "/llm/main/v1/files",
            r#"{"purpose":"batch"}"#,
            403,
            "llm_endpoint_not_allowed",
        ),
        (
            "/llm/main/v1/audio/speech",
            r#"{"model":"gpt-rogue","input":"x"}"#,
            403,
            "llm_endpoint_not_allowed",
        ),
    ];
    for (path, body, status, code) in refused {
        let reply = post(&gate, path, body).await;
        assert_eq!(reply.status, status, "{path} {body}: {}", reply.text());
        assert_eq!(
            reply.header("x-fleetgate-error"),
            Some(code),
            "{path} {body}: code"
        );
    }
    let get_batches = fleetgate_e2e::http::get(gate.api_addr(), "/llm/main/v1/batches")
        .await
        .expect("get");
    assert_eq!(
        get_batches.status,
        403,
        "an unnamed GET is refused: {}",
        get_batches.text()
    );
    assert!(
        stub.requests().is_empty(),
        "nothing outside the policy reaches the provider: {:?}",
        stub.requests().iter().map(|r| &r.path).collect::<Vec<_>>()
    );
    let named = fleetgate_e2e::http::get(gate.api_addr(), "/llm/main/v1/batches/b1")
        .await
        .expect("get");
    assert_eq!(
        named.status,
        200,
        "a named endpoint passes: {}",
        named.text()
    );
    let batch = r#"{"requests":[{"custom_id":"a","params":{"model":"stub-model","max_tokens":5}},
        {"custom_id":"b","params":{"model":"stub-model","output_config":{"effort":"low"}}}]}"#;
    let reply = post(&gate, "/llm/main/v1/messages/batches", batch).await;
    assert_eq!(
        reply.status,
        200,
        "an allowed batch passes: {}",
        reply.text()
    );
    let embed = post(
        &gate,
        "/llm/main/v1/embeddings",
        r#"{"model":"stub-model","input":"x"}"#,
    )
    .await;
    assert_eq!(
        embed.status,
        200,
        "an allowed embedding passes: {}",
        embed.text()
    );
    let seen = stub.requests();
    let sent = &seen
        .iter()
        .find(|r| r.path == "/v1/messages/batches")
        .expect("the batch reaches the provider")
        .body;
    assert_eq!(
        sent["requests"][0]["params"]["reasoning_effort"], "high",
        "the pin is written into each request of the batch: {sent}"
    );
    assert_eq!(
        sent["requests"][1]["params"]["output_config"]["effort"], "high",
        "an existing effort field is rewritten in place: {sent}"
    );
    assert_eq!(
        seen.iter()
            .find(|r| r.path == "/v1/embeddings")
            .map(|r| r.body.clone()),
        Some(serde_json::json!({"model": "stub-model", "input": "x"})),
        "a model-only call is not pinned"
    );
}

/// Lines of the `/metrics` text that are series of `family`.
fn series(text: &str, family: &str) -> usize {
    text.lines()
        .filter(|l| l.starts_with(family) && l[family.len()..].starts_with('{'))
        .count()
}

#[tokio::test]
async fn agent_chosen_model_strings_never_become_labels_nor_show_their_secrets() {
    let stub = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let token = format!("ghp_{}", "a1B2".repeat(9));
    let key = "sk-proj-0123456789abcdefABCDEF0123456789abcdef";
    let tail = "  roles:\n    main: oai\n  allowedModels: [gpt-main, \"claude-*\"]\n";
    let (_secrets, gate) = gate_with(&[("oai", "openai", &stub)], tail).await;
    let path = "/llm/main/v1/chat/completions";
    let first = post(&gate, path, r#"{"model":"claude-first"}"#).await;
    assert_eq!(first.status, 200, "{}", first.text());
    let before = metrics(&gate).await;
    let family = "fleetgate_llm_requests_total";
    let mut models: Vec<String> = (0..10)
        .map(|i| format!("claude-{i}-{}", "x".repeat(4 * 1024 * 1024)))
        .collect();
    models.push(format!("claude-{key}"));
    models.push(format!("claude-{token}"));
    for model in &models {
        let body = serde_json::json!({"model": model, "messages": []}).to_string();
        let reply = post(&gate, path, body).await;
        assert_eq!(reply.status, 200, "observe mode forwards {}", &model[..20]);
    }
    let after = metrics(&gate).await;
    assert_eq!(
        series(&after, family),
        series(&before, family),
        "distinct model strings add no series:\n{after}"
    );
    // Two of the model strings hold secrets: the prompt scan counts them per rule id and
    // (observe mode) as would-be refusals, a bounded set of new rows. Everything else must
    // stay the size it was.
    let by_rule = [
        "fleetgate_llm_prompt_secrets_total",
        "fleetgate_llm_refusals_total",
        "fleetgate_llm_refusal_attempts_total",
    ];
    let rest = |text: &str| -> usize {
        text.lines()
            .filter(|l| {
                !by_rule
                    .iter()
                    .any(|f| l.split_whitespace().any(|w| w.starts_with(f)))
            })
            .map(|l| l.len() + 1)
            .sum()
    };
    assert!(
        rest(&after) <= rest(&before) + 256,
        "/metrics must not grow with model strings: {} -> {} bytes",
        rest(&before),
        rest(&after)
    );
    assert_eq!(
        series(&after, "fleetgate_llm_prompt_secrets_total"),
        2,
        "one row per secret rule:\n{after}"
    );
    assert!(
        after.contains(r#"fleetgate_llm_refusals_total{action="would_refuse",code="llm_secret_in_prompt",role="main"} 2"#),
        "the secrets count as would-be refusals:\n{after}"
    );
    assert!(
        after.contains(r#"fleetgate_llm_requests_total{effort="unset",model="claude-*",role="main",tier="unset"} 13"#),
        "every claude model counts under the pattern that admits it:\n{after}"
    );
    let report = super::support::observed(&gate).await.to_string();
    for secret in [key, token.as_str()] {
        assert!(!after.contains(secret), "/metrics must not show {secret}");
        assert!(
            !report.contains(secret),
            "/v1/report must not show {secret}: {report}"
        );
    }
    assert!(
        report.contains("[redacted:"),
        "the report shows the model redacted: {report}"
    );
    assert!(
        report.len() < 4096,
        "the report shows a bounded model string: {} bytes",
        report.len()
    );
    drop(gate);
    let tail = "  mode: enforce\n  roles:\n    main: oai\n  allowedModels: [gpt-main]\n";
    let (_secrets, gate) = gate_with(&[("oai", "openai", &stub)], tail).await;
    for model in [format!("gpt-{key}"), format!("gpt-{token}")] {
        let body = serde_json::json!({"model": model, "messages": []}).to_string();
        let reply = post(&gate, path, body).await;
        assert_eq!(reply.status, 403, "{}", reply.text());
        for secret in [key, token.as_str()] {
            assert!(
                !reply.text().contains(secret),
                "the refusal must not repeat {secret}: {}",
                reply.text()
            );
        }
    }
    // Log lines reach the harness through the gate's writer thread: wait for both.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    while gate.stderr_log().matches("llm.refusal").count() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "both refusals must be logged:\n{}",
            gate.stderr_log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let log = gate.stderr_log();
    for secret in [key, token.as_str()] {
        assert!(
            !log.contains(secret),
            "the log must not show {secret}:\n{log}"
        );
    }
}
