//! The LLM route end to end: the real gate binary between a client and stub providers
//! (OpenAI-compatible and Anthropic, streamed and whole). What reaches the provider (the
//! gate's key, never the agent's; pinned fields), what the agent gets back (byte for byte,
//! SSE chunk by chunk), what `/v1/report` and `/metrics` say per role, the provider-side tools
//! a request names, and refusals per turn.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::print_stdout)]

#[path = "llm_route/support.rs"]
mod support;

#[path = "llm_route/hermes.rs"]
mod hermes;

#[path = "llm_route/bench.rs"]
mod bench;

#[path = "llm_route/hardening.rs"]
mod hardening;

#[path = "llm_route/tools_and_turns.rs"]
mod tools_and_turns;

#[path = "llm_route/spend.rs"]
mod spend;

#[path = "llm_route/hermes_cost.rs"]
mod hermes_cost;

#[path = "llm_route/hermes_cron_cost.rs"]
mod hermes_cron_cost;

use std::time::Duration;

use bytes::Bytes;
use fleetgate_e2e::gate::GateProcess;
use fleetgate_e2e::llm_stub::{StubKind, StubOptions, StubProvider};
use http_body_util::BodyExt as _;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use support::{GATE_KEY, Secrets, call, metrics, observed, policy, provider};
use tokio::time::Instant;

async fn gate_with(
    stubs: &[(&str, &str, &StubProvider)],
    llm_tail: &str,
) -> (Secrets, GateProcess) {
    gate_logging(stubs, llm_tail, None).await
}

/// [`gate_with`], the gate logging under `rust_log` (`RUST_LOG`) when given.
async fn gate_logging(
    stubs: &[(&str, &str, &StubProvider)],
    llm_tail: &str,
    rust_log: Option<&str>,
) -> (Secrets, GateProcess) {
    let secrets = Secrets::new();
    let key = secrets.path("key");
    let providers: String = stubs
        .iter()
        .map(|(name, kind, stub)| provider(name, kind, &stub.base_url(), &key))
        .collect();
    let ports: Vec<u16> = stubs.iter().map(|(_, _, s)| s.addr().port()).collect();
    let yaml = policy(
        &secrets,
        &ports,
        &format!("  providers:\n{providers}{llm_tail}"),
    );
    let mut builder = GateProcess::builder(&yaml);
    if let Some(filter) = rust_log {
        builder = builder.env("RUST_LOG", filter);
    }
    let gate = builder.spawn().await.expect("the gate must start");
    (secrets, gate)
}

#[tokio::test]
async fn openai_calls_stream_and_return_whole_with_the_gate_key_and_are_observed_per_role() {
    let stub = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let tail = "  roles:\n    main: oai\n    delegation: oai\n  allowedModels: [gpt-main]\n";
    let (_secrets, gate) = gate_with(&[("oai", "openai", &stub)], tail).await;
    let whole = call(
        gate.api_addr(),
        "/llm/main/v1/chat/completions",
        &json!({"model": "gpt-main", "reasoning_effort": "high", "service_tier": "priority",
                "messages": [{"role": "user", "content": "hi"}]}),
        ("authorization", "Bearer agent-held-key"),
    )
    .await;
    assert_eq!(
        whole.status,
        200,
        "a whole answer must pass: {}",
        whole.text()
    );
    assert_eq!(
        whole.json().unwrap()["service_tier"],
        "priority",
        "the body must pass unchanged"
    );
    let streamed = call(
        gate.api_addr(),
        "/llm/delegation/v1/chat/completions?x=1",
        &json!({"model": "gpt-sub", "reasoning": {"effort": "low"}, "stream": true, "messages": []}),
        ("x-api-key", "agent-held-key"),
    )
    .await;
    assert!(
        streamed.text().ends_with("data: [DONE]\n\n"),
        "SSE must pass: {}",
        streamed.text()
    );
    let seen = stub.requests();
    assert_eq!(seen.len(), 2, "both calls must reach the provider");
    for r in &seen {
        assert_eq!(
            r.authorization.as_deref(),
            Some(format!("Bearer {GATE_KEY}").as_str()),
            "gate key"
        );
        assert_eq!(r.x_api_key, None, "the agent's key header must be dropped");
    }
    assert_eq!(
        seen[1].path, "/v1/chat/completions",
        "the path after the role is kept"
    );
    let obs = observed(&gate).await;
    let want_main = json!({"model": "gpt-main", "reasoning_effort": "high",
        "service_tier": "priority", "response_service_tier": "priority"});
    let want_sub = json!({"model": "gpt-sub", "reasoning_effort": "low",
        "service_tier": null, "response_service_tier": "default"});
    for (role, want) in [("main", want_main), ("delegation", want_sub)] {
        for key in [
            "model",
            "reasoning_effort",
            "service_tier",
            "response_service_tier",
        ] {
            assert_eq!(obs[role][key], want[key], "observed.{role}.{key}: {obs}");
        }
        assert_eq!(
            obs[role]["gate"]["requests"], 1,
            "one request counted for {role}"
        );
    }
    let text = metrics(&gate).await;
    assert!(
        text.contains(r#"fleetgate_llm_requests_total{effort="high",model="gpt-main",role="main",tier="priority"} 1"#),
        "a named model keeps its label:\n{text}"
    );
    assert!(
        text.contains(r#"fleetgate_llm_requests_total{effort="low",model="other",role="delegation",tier="unset"} 1"#),
        "an unnamed model counts as other:\n{text}"
    );
}

#[tokio::test]
async fn anthropic_calls_get_the_key_as_x_api_key_and_the_served_tier_from_usage() {
    let mut options = StubOptions::new(StubKind::Anthropic);
    options.served_tier = Some("standard".into());
    let stub = StubProvider::start(options).await.expect("stub");
    let tail = "  roles:\n    auxiliary: claude\n";
    let (_secrets, gate) = gate_with(&[("claude", "anthropic", &stub)], tail).await;
    for stream in [false, true] {
        let reply = call(
            gate.api_addr(),
            "/llm/auxiliary/title_generation/v1/messages",
            &json!({"model": "claude-x", "stream": stream, "max_tokens": 10,
                    "thinking": {"type": "enabled", "budget_tokens": 16000}, "messages": []}),
            ("x-api-key", "agent-held-key"),
        )
        .await;
        assert_eq!(reply.status, 200, "stream={stream}: {}", reply.text());
        let obs = observed(&gate).await;
        let entry = &obs["auxiliary:title_generation"];
        assert_eq!(
            entry["reasoning_effort"], "budget:16000",
            "budget effort: {obs}"
        );
        assert_eq!(
            entry["response_service_tier"], "standard",
            "stream={stream}: {obs}"
        );
    }
    for r in stub.requests() {
        assert_eq!(
            r.x_api_key.as_deref(),
            Some(GATE_KEY),
            "the gate's key as x-api-key"
        );
        assert_eq!(r.authorization, None, "no bearer for Anthropic");
    }
}

#[tokio::test]
async fn sse_events_reach_the_client_as_the_provider_sends_them() {
    let mut options = StubOptions::new(StubKind::OpenAi);
    options.event_delay = Duration::from_millis(300);
    options.text = "x".repeat(3000);
    let stub = StubProvider::start(options).await.expect("stub");
    let (_secrets, gate) =
        gate_with(&[("oai", "openai", &stub)], "  roles:\n    main: oai\n").await;
    let stream = tokio::net::TcpStream::connect(gate.api_addr())
        .await
        .expect("connect");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let body = json!({"model": "m", "stream": true, "messages": []}).to_string();
    let req = http::Request::post("/llm/main/v1/chat/completions")
        .header("host", "gate")
        .body(http_body_util::Full::new(Bytes::from(body)))
        .expect("request");
    let started = Instant::now();
    let resp = sender.send_request(req).await.expect("response head");
    let mut body = resp.into_body();
    let mut arrivals = Vec::new();
    while let Some(frame) = body.frame().await {
        if frame.expect("frame").data_ref().is_some() {
            arrivals.push(started.elapsed());
        }
    }
    // 3 content events + the final chunk + [DONE], 300 ms apart.
    let first = arrivals.first().copied().expect("at least one event");
    let last = arrivals.last().copied().expect("at least one event");
    assert!(
        first < Duration::from_millis(250),
        "the first event must not wait: {arrivals:?}"
    );
    assert!(
        last >= Duration::from_millis(1100),
        "later events arrive later: {arrivals:?}"
    );
    assert!(
        arrivals.len() >= 4,
        "events must arrive separately: {arrivals:?}"
    );
}

#[tokio::test]
async fn enforce_mode_refuses_a_disallowed_model_and_rewrites_a_pinned_effort() {
    let stub = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let tail = "  mode: enforce\n  policyName: team-a\n  roles:\n    main: oai\n\
                \x20 allowedModels: [gpt-ok]\n  pins:\n    main:\n      effort: high\n      serviceTier: flex\n";
    let (_secrets, gate) = gate_with(&[("oai", "openai", &stub)], tail).await;
    let refused = call(
        gate.api_addr(),
        "/llm/main/v1/chat/completions",
        &json!({"model": "gpt-rogue", "messages": []}),
        ("authorization", "Bearer x"),
    )
    .await;
    assert_eq!(
        refused.status,
        403,
        "a disallowed model is refused: {}",
        refused.text()
    );
    assert_eq!(
        refused.header("x-fleetgate-error"),
        Some("llm_model_not_allowed"),
        "code header"
    );
    let message = refused.json().unwrap()["error"]["message"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        message.contains("team-a") && message.contains("gpt-rogue"),
        "names the policy: {message}"
    );
    assert!(
        stub.requests().is_empty(),
        "a refused call never reaches the provider"
    );
    let ok = call(
        gate.api_addr(),
        "/llm/main/v1/chat/completions",
        &json!({"model": "gpt-ok", "reasoning_effort": "low", "messages": []}),
        ("authorization", "Bearer x"),
    )
    .await;
    assert_eq!(ok.status, 200, "an allowed model passes: {}", ok.text());
    let sent = &stub.requests()[0].body;
    assert_eq!(
        sent["reasoning_effort"], "high",
        "the pinned effort is written: {sent}"
    );
    assert_eq!(
        sent["service_tier"], "flex",
        "the pinned tier is written: {sent}"
    );
    let obs = observed(&gate).await;
    let main: &Value = &obs["main"];
    assert_eq!(
        main["reasoning_effort"], "high",
        "observed after the rewrite: {obs}"
    );
    assert_eq!(main["response_service_tier"], "flex", "served tier: {obs}");
    assert_eq!(main["gate"]["refused"], 1, "one refusal counted: {obs}");
    assert_eq!(main["gate"]["rewritten"], 1, "one rewritten request: {obs}");
    assert_eq!(
        main["gate"]["last_rewrites"],
        json!([
            "reasoning_effort: low -> high",
            "service_tier: unset -> flex"
        ]),
        "the rewrites are named: {obs}"
    );
    let text = metrics(&gate).await;
    assert!(
        text.contains(r#"fleetgate_llm_rewrites_total{action="rewritten",field="reasoning_effort",role="main"} 1"#),
        "the rewrite is counted:\n{text}"
    );
    // Log lines reach the harness through the gate's writer thread and a pipe: wait for them.
    for event in ["llm.rewrite", "llm.refusal"] {
        let logged = gate
            .wait_for_log(|line| line.contains(event), Duration::from_secs(5))
            .await;
        assert!(
            logged.is_ok(),
            "{event} must be logged:\n{}",
            gate.stderr_log()
        );
    }
}

#[tokio::test]
async fn observe_mode_passes_everything_and_counts_what_enforce_would_do() {
    let stub = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let tail = "  roles:\n    main: oai\n  allowedModels: [gpt-ok]\n  pins:\n    main:\n      effort: high\n";
    let (_secrets, gate) = gate_with(&[("oai", "openai", &stub)], tail).await;
    let body = json!({"model": "gpt-rogue", "reasoning_effort": "low", "messages": []});
    let reply = call(
        gate.api_addr(),
        "/llm/main/v1/chat/completions",
        &body,
        ("authorization", "Bearer x"),
    )
    .await;
    assert_eq!(
        reply.status,
        200,
        "observe mode never refuses: {}",
        reply.text()
    );
    assert_eq!(stub.requests()[0].body, body, "observe mode never rewrites");
    assert_counted(&gate, &[
        r#"fleetgate_llm_refusals_total{action="would_refuse",code="llm_model_not_allowed",role="main"} 1"#,
        r#"fleetgate_llm_rewrites_total{action="would_rewrite",field="reasoning_effort",role="main"} 1"#,
    ])
    .await;
}

#[tokio::test]
async fn unknown_roles_and_unconfigured_roles_are_answered_by_the_gate() {
    let stub = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let (_secrets, gate) =
        gate_with(&[("oai", "openai", &stub)], "  roles:\n    main: oai\n").await;
    let cases = [
        ("/llm/sneaky/v1/chat/completions", 404, "not_found"),
        (
            "/llm/cron/v1/chat/completions",
            404,
            "llm_role_not_configured",
        ),
    ];
    for (path, status, code) in cases {
        let reply = call(
            gate.api_addr(),
            path,
            &json!({"model": "m"}),
            ("authorization", "Bearer x"),
        )
        .await;
        assert_eq!(reply.status, status, "{path}: {}", reply.text());
        assert_eq!(reply.header("x-fleetgate-error"), Some(code), "{path} code");
    }
    assert!(stub.requests().is_empty(), "nothing reaches the provider");
}

/// Every series line in `wants` is on the gate's `/metrics`.
async fn assert_counted(gate: &GateProcess, wants: &[&str]) {
    let text = metrics(gate).await;
    for want in wants {
        assert!(text.contains(want), "{want} must be counted:\n{text}");
    }
}

/// POST raw `body` bytes to `path` on the api listener.
async fn call_raw(
    api: std::net::SocketAddr,
    path: &str,
    body: &'static [u8],
) -> fleetgate_e2e::http::HttpReply {
    let req = http::Request::post(path)
        .header("content-type", "application/json")
        .header("authorization", "Bearer x")
        .body(Bytes::from_static(body))
        .expect("request");
    fleetgate_e2e::http::send(api, req)
        .await
        .expect("the gate must answer")
}

/// Completion bodies whose model cannot be judged, with the code enforce mode answers.
const UNJUDGED: [(&[u8], &str); 4] = [
    (br#"{"messages":[]}"#, "llm_model_missing"),
    (br#"{"model":null,"messages":[]}"#, "llm_model_missing"),
    (
        br#"{"model":["gpt-rogue"],"messages":[]}"#,
        "llm_model_missing",
    ),
    (br#"{"model":"gpt-rogue","messages":[]"#, "invalid_request"),
];

#[tokio::test]
async fn enforce_mode_refuses_a_completion_whose_model_cannot_be_judged() {
    let stub = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let tail = "  mode: enforce\n  roles:\n    main: oai\n  allowedModels: [stub-model]\n";
    let (_secrets, gate) = gate_with(&[("oai", "openai", &stub)], tail).await;
    for path in ["/llm/main/v1/chat/completions", "/llm/main/v1/responses"] {
        for (body, code) in UNJUDGED {
            let reply = call_raw(gate.api_addr(), path, body).await;
            let shown = String::from_utf8_lossy(body);
            assert_eq!(reply.status, 400, "{path} {shown}: {}", reply.text());
            assert_eq!(
                reply.header("x-fleetgate-error"),
                Some(code),
                "{path} {shown}"
            );
            assert_eq!(
                reply.json().unwrap()["error"]["code"],
                code,
                "the provider's error shape carries the code: {}",
                reply.text()
            );
        }
    }
    assert!(
        stub.requests().is_empty(),
        "nothing the gate cannot judge reaches the provider: {:?}",
        stub.requests()
    );
    assert_counted(&gate, &[
        r#"fleetgate_llm_refusals_total{action="refused",code="llm_model_missing",role="main"} 6"#,
        r#"fleetgate_llm_refusals_total{action="refused",code="invalid_request",role="main"} 2"#,
    ])
    .await;
}

#[tokio::test]
async fn observe_mode_forwards_an_unjudged_completion_and_counts_it() {
    let stub = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let tail = "  roles:\n    main: oai\n  allowedModels: [stub-model]\n";
    let (_secrets, gate) = gate_with(&[("oai", "openai", &stub)], tail).await;
    for (body, _) in UNJUDGED {
        let reply = call_raw(gate.api_addr(), "/llm/main/v1/chat/completions", body).await;
        assert_eq!(reply.status, 200, "observe mode forwards: {}", reply.text());
    }
    assert_eq!(stub.requests().len(), 4, "every call reaches the provider");
    assert_eq!(
        stub.requests()[3].body,
        Value::Null,
        "the malformed body is relayed as sent (the stub reads it as no JSON)"
    );
    assert_counted(&gate, &[
        r#"fleetgate_llm_refusals_total{action="would_refuse",code="llm_model_missing",role="main"} 3"#,
        r#"fleetgate_llm_refusals_total{action="would_refuse",code="invalid_request",role="main"} 1"#,
    ])
    .await;
}

#[tokio::test]
async fn metadata_calls_neither_blank_the_observation_nor_carry_the_pins() {
    let stub = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let tail = "  mode: enforce\n  roles:\n    main: oai\n  allowedModels: [stub-model]\n\
                \x20 pins:\n    main:\n      effort: high\n      serviceTier: flex\n";
    let (_secrets, gate) = gate_with(&[("oai", "openai", &stub)], tail).await;
    let streamed = call(
        gate.api_addr(),
        "/llm/main/v1/chat/completions",
        &json!({"model": "stub-model", "stream": true, "messages": []}),
        ("authorization", "Bearer x"),
    )
    .await;
    assert!(
        streamed.text().ends_with("data: [DONE]\n\n"),
        "{}",
        streamed.text()
    );
    // What Hermes sends before every completion.
    for path in [
        "/llm/main/api/v1/models",
        "/llm/main/api/v1/models",
        "/llm/main/api/v1/models",
    ] {
        let reply = fleetgate_e2e::http::get(gate.api_addr(), path)
            .await
            .expect("get");
        assert_eq!(reply.status, 200, "{path}");
    }
    let show = call(
        gate.api_addr(),
        "/llm/main/api/show",
        &json!({"name": "stub-model"}),
        ("authorization", "Bearer x"),
    )
    .await;
    assert_eq!(show.status, 200, "{}", show.text());
    for path in ["/llm/main/v1/models/stub-model", "/llm/main/v1/models"] {
        let reply = fleetgate_e2e::http::get(gate.api_addr(), path)
            .await
            .expect("get");
        assert_eq!(reply.status, 200, "{path}");
    }
    let obs = observed(&gate).await;
    let main = &obs["main"];
    let got = json!([
        main["model"],
        main["reasoning_effort"],
        main["service_tier"],
        main["response_service_tier"]
    ]);
    assert_eq!(
        got,
        json!(["stub-model", "high", "flex", "flex"]),
        "the completion's observation survives the metadata calls: {obs}"
    );
    assert_eq!(
        main["gate"]["requests"], 1,
        "only the completion is counted: {obs}"
    );
    let seen = stub.requests();
    let show_seen = seen
        .iter()
        .find(|r| r.path == "/api/show")
        .expect("POST /api/show reaches the provider");
    assert_eq!(
        show_seen.body,
        json!({"name": "stub-model"}),
        "a metadata POST passes unchanged under pins"
    );
    assert_eq!(seen.len(), 7, "all seven calls reach the provider");
}
