//! Provider-side tools and refused turns on the wire, with requests shaped as the clients send
//! them: OpenAI's responses built-ins, Anthropic's server tools (which Hermes never sends, so
//! only here), a message batch, Hermes' own function tools; and a refused request sent again,
//! which is one refused turn of two attempts.

use fleetgate_e2e::llm_stub::{StubKind, StubOptions, StubProvider};
use serde_json::{Value, json};

use super::gate_with;
use super::support::{call, metrics, observed};

/// The value of `series` on `/metrics` text, 0 when absent.
fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Hermes 0.20.1's function tools as its chat turn sends them (one named `web_search`, which
/// Hermes runs itself through its own web backend).
fn hermes_function_tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "web_search", "description": "Search the web",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}},
        {"type": "function", "function": {"name": "clarify", "description": "Ask the user",
            "parameters": {"type": "object", "properties": {}}}}
    ])
}

#[tokio::test]
async fn provider_side_tools_are_refused_in_the_provider_shape_and_client_tools_pass() {
    let openai = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let anthropic = StubProvider::start(StubOptions::new(StubKind::Anthropic))
        .await
        .expect("stub");
    let tail = "  mode: enforce\n  policyName: team-a\n  roles:\n    main: oai\n    delegation: oai\n    cron: claude\n\
                \x20 providerTools:\n    main: refuse\n    cron: refuse\n    delegation: allow\n";
    let (_secrets, gate) = gate_with(
        &[
            ("oai", "openai", &openai),
            ("claude", "anthropic", &anthropic),
        ],
        tail,
    )
    .await;
    // OpenAI responses with a built-in search: 403 in OpenAI's shape, naming the tool.
    let responses = call(
        gate.api_addr(),
        "/llm/main/v1/responses",
        &json!({"model": "gpt-5", "input": "find fleet news",
                "tools": [{"type": "function", "name": "clarify", "parameters": {}},
                          {"type": "web_search_preview_2025_03_11", "search_context_size": "low"}]}),
        ("authorization", "Bearer x"),
    )
    .await;
    assert_eq!(responses.status, 403, "{}", responses.text());
    assert_eq!(
        responses.header("x-fleetgate-error"),
        Some("llm_provider_tool_not_allowed")
    );
    let error = responses.json().expect("JSON")["error"].clone();
    assert_eq!(
        (&error["type"], &error["param"], &error["code"]),
        (
            &json!("permission_error"),
            &json!("tools"),
            &json!("llm_provider_tool_not_allowed")
        ),
        "OpenAI's error shape: {error}"
    );
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("'web_search_preview_2025_03_11'")
            && message.contains("role 'main'")
            && message.contains("team-a"),
        "the message names the tool, the role and the policy: {message}"
    );
    // Anthropic messages with its server tools beside a client tool: Anthropic's shape.
    let messages = call(
        gate.api_addr(),
        "/llm/cron/v1/messages",
        &json!({"model": "claude-x", "max_tokens": 64,
                "messages": [{"role": "user", "content": "what changed?"}],
                "tools": [{"name": "get_weather", "input_schema": {"type": "object"}},
                          {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
                          {"type": "web_fetch_20250910", "name": "web_fetch"}]}),
        ("x-api-key", "agent-key"),
    )
    .await;
    assert_eq!(messages.status, 403, "{}", messages.text());
    let body = messages.json().expect("JSON");
    assert_eq!(body["type"], "error", "Anthropic's error shape: {body}");
    assert_eq!(body["error"]["type"], "permission_error", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("'web_search_20250305', 'web_fetch_20250910'"),
        "every provider-side tool is named: {message}"
    );
    // A batch entry asking for one.
    let batch = call(
        gate.api_addr(),
        "/llm/cron/v1/messages/batches",
        &json!({"requests": [
            {"custom_id": "a", "params": {"model": "claude-x", "max_tokens": 8, "messages": []}},
            {"custom_id": "b", "params": {"model": "claude-x", "max_tokens": 8, "messages": [],
                "tools": [{"type": "code_execution_20250825", "name": "code_execution"}]}}]}),
        ("x-api-key", "agent-key"),
    )
    .await;
    assert_eq!(batch.status, 403, "{}", batch.text());
    assert!(
        batch.text().contains("'code_execution_20250825'"),
        "{}",
        batch.text()
    );
    assert!(
        openai.requests().is_empty() && anthropic.requests().is_empty(),
        "no refused call reaches a provider"
    );
    // Hermes' own chat turn: function tools only, relayed.
    let hermes = call(
        gate.api_addr(),
        "/llm/main/v1/chat/completions",
        &json!({"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}],
                "tools": hermes_function_tools()}),
        ("authorization", "Bearer x"),
    )
    .await;
    assert_eq!(hermes.status, 200, "client tools pass: {}", hermes.text());
    // `allow` reads no tools at all.
    let allowed = call(
        gate.api_addr(),
        "/llm/delegation/v1/responses",
        &json!({"model": "gpt-5", "input": "x", "tools": [{"type": "web_search"}]}),
        ("authorization", "Bearer x"),
    )
    .await;
    assert_eq!(allowed.status, 200, "allowed: {}", allowed.text());
    let text = metrics(&gate).await;
    for (series, want) in [
        (
            r#"fleetgate_llm_provider_tools_total{action="refused",role="main",tool="web_search_preview"}"#,
            1.0,
        ),
        (
            r#"fleetgate_llm_provider_tools_total{action="refused",role="cron",tool="web_search"}"#,
            1.0,
        ),
        (
            r#"fleetgate_llm_provider_tools_total{action="refused",role="cron",tool="web_fetch"}"#,
            1.0,
        ),
        (
            r#"fleetgate_llm_provider_tools_total{action="refused",role="cron",tool="code_execution"}"#,
            1.0,
        ),
        (
            r#"fleetgate_llm_refusals_total{action="refused",code="llm_provider_tool_not_allowed",role="cron"}"#,
            2.0,
        ),
    ] {
        assert_eq!(value(&text, series), want, "{series}\n{text}");
    }
    assert!(
        !text.contains(r#"role="delegation",tool="#),
        "an allowed role is not counted:\n{text}"
    );
}

#[tokio::test]
async fn observe_mode_and_the_observe_default_count_provider_side_tools_and_relay_them() {
    let stub = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let tail = "  roles:\n    main: oai\n    delegation: oai\n  providerTools:\n    main: refuse\n";
    let (_secrets, gate) = gate_with(&[("oai", "openai", &stub)], tail).await;
    for role in ["main", "delegation"] {
        let reply = call(
            gate.api_addr(),
            &format!("/llm/{role}/v1/responses"),
            &json!({"model": "grok-4", "input": [], "tools": [{"type": "x_search"}, {"type": "web_search"}]}),
            ("authorization", "Bearer x"),
        )
        .await;
        assert_eq!(reply.status, 200, "{role}: relayed: {}", reply.text());
    }
    assert_eq!(stub.requests().len(), 2, "both reach the provider as sent");
    let text = metrics(&gate).await;
    for (series, want) in [
        (
            r#"fleetgate_llm_provider_tools_total{action="would_refuse",role="main",tool="x_search"}"#,
            1.0,
        ),
        (
            r#"fleetgate_llm_provider_tools_total{action="would_refuse",role="main",tool="web_search"}"#,
            1.0,
        ),
        (
            r#"fleetgate_llm_refusals_total{action="would_refuse",code="llm_provider_tool_not_allowed",role="main"}"#,
            1.0,
        ),
        (
            r#"fleetgate_llm_provider_tools_total{action="observed",role="delegation",tool="x_search"}"#,
            1.0,
        ),
        (
            r#"fleetgate_llm_provider_tools_total{action="observed",role="delegation",tool="web_search"}"#,
            1.0,
        ),
    ] {
        assert_eq!(value(&text, series), want, "{series}\n{text}");
    }
}

#[tokio::test]
async fn a_refused_request_sent_again_is_one_refused_turn_of_two_attempts() {
    let stub = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let tail = "  mode: enforce\n  roles:\n    main: oai\n  allowedModels: [gpt-ok]\n";
    let (_secrets, gate) = gate_with(&[("oai", "openai", &stub)], tail).await;
    let ask = |text: &str, system: &str| {
        json!({"model": "gpt-rogue", "messages": [{"role": "system", "content": system},
            {"role": "user", "content": text}]})
    };
    // One turn: the same body twice (a client's retry), then another call with the same user
    // message (a title call); then a second turn.
    for body in [
        ask("Say hi.", "You are an agent."),
        ask("Say hi.", "You are an agent."),
        ask("Say hi.", "You name chat sessions."),
        ask("Say bye.", "You are an agent."),
    ] {
        let reply = call(
            gate.api_addr(),
            "/llm/main/v1/chat/completions",
            &body,
            ("authorization", "Bearer x"),
        )
        .await;
        assert_eq!(reply.status, 403, "{}", reply.text());
    }
    let labels = r#"{action="refused",code="llm_model_not_allowed",role="main"}"#;
    let text = metrics(&gate).await;
    assert_eq!(
        (
            value(&text, &format!("fleetgate_llm_refusals_total{labels}")),
            value(
                &text,
                &format!("fleetgate_llm_refusal_attempts_total{labels}")
            )
        ),
        (2.0, 4.0),
        "two turns of four attempts:\n{text}"
    );
    let obs = observed(&gate).await;
    let counters = &obs["main"]["gate"];
    assert_eq!(
        (&counters["refused"], &counters["refused_attempts"]),
        (&json!(2), &json!(4)),
        "the report counts the same: {obs}"
    );
    let flags = {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let flags: Vec<Value> = gate
                .json_logs()
                .into_iter()
                .filter(|l| l["event"] == "llm.refusal")
                .map(|l| l["retry_of_refusal"].clone())
                .collect();
            if flags.len() >= 4 || tokio::time::Instant::now() > deadline {
                break flags;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    assert_eq!(
        flags,
        [json!(false), json!(true), json!(true), json!(false)],
        "the decision lines tell the attempts apart"
    );
}
