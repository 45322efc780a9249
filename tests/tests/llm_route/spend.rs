//! What each call costs and what the gate stops: usage read from the provider's answers
//! (whole, streamed, Anthropic, none), dollars from the price table, pod budgets in enforce
//! and observe mode across a restart and an unreadable spend file, tokens per minute, and
//! secrets in prompts refused, redacted or passed byte for byte.

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use fleetgate_e2e::llm_stub::{StubKind, StubOptions, StubProvider};
use serde_json::{Value, json};

use super::gate_with;
use super::support::{metrics, post};

#[path = "../../../proxy/tests/support_secrets/mod.rs"]
mod support_secrets;

/// The value of the `/metrics` series `line_prefix` (family and labels, as rendered).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() <= b * 1e-9 + 1e-15)
}

/// One gpt-5 call of the stub's default usage (10 prompt, 5 completion tokens) at the
/// built-in price ($1.25 and $10 per million).
const GPT5_CALL: f64 = (10.0 * 1.25 + 5.0 * 10.0) / 1e6;

#[tokio::test]
async fn usage_and_cost_are_counted_per_call_and_an_answer_without_usage_is_unknown() {
    let oai = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let ant = StubProvider::start(StubOptions::new(StubKind::Anthropic))
        .await
        .expect("stub");
    let mut quiet = StubOptions::new(StubKind::OpenAi);
    quiet.stream_usage = false;
    let quiet = StubProvider::start(quiet).await.expect("stub");
    let tail = "  roles:\n    main: oai\n    cron: ant\n    delegation: quiet\n  allowedModels: [gpt-5, \"claude-*\"]\n";
    // The per-call usage line is at debug level.
    let (_secrets, gate) = super::gate_logging(
        &[
            ("oai", "openai", &oai),
            ("ant", "anthropic", &ant),
            ("quiet", "openai", &quiet),
        ],
        tail,
        Some("info,fleetgate_proxy::llm::body=debug"),
    )
    .await;
    let chat = "/llm/main/v1/chat/completions";
    for stream in [false, true] {
        let body = json!({"model": "gpt-5", "stream": stream, "messages": [{"role": "user", "content": "hi"}]});
        let reply = post(&gate, chat, body.to_string()).await;
        assert_eq!(reply.status, 200, "{}", reply.text());
    }
    let body = json!({"model": "claude-sonnet-4-6", "stream": true, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
    let reply = post(&gate, "/llm/cron/v1/messages", body.to_string()).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let body = json!({"model": "gpt-5", "stream": true, "messages": []});
    let reply = post(
        &gate,
        "/llm/delegation/v1/chat/completions",
        body.to_string(),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    // The body's end is counted once the gate has relayed it; give the last one a moment.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let text = metrics(&gate).await;
    let cost = |role: &str, model: &str| {
        value(
            &text,
            &format!(r#"fleetgate_llm_cost_usd_total{{model="{model}",role="{role}"}}"#),
        )
    };
    assert!(
        close(cost("main", "gpt-5"), 2.0 * GPT5_CALL),
        "main: {:?}\n{text}",
        cost("main", "gpt-5")
    );
    let claude = (10.0 * 3.0 + 5.0 * 15.0) / 1e6;
    assert!(
        close(cost("cron", "claude-*"), claude),
        "cron: {:?}\n{text}",
        cost("cron", "claude-*")
    );
    for (series, want) in [
        (
            r#"fleetgate_llm_tokens_total{model="gpt-5",role="main",type="input"}"#,
            20.0,
        ),
        (
            r#"fleetgate_llm_tokens_total{model="gpt-5",role="main",type="output"}"#,
            10.0,
        ),
        (
            r#"gen_ai_client_token_usage_count{gen_ai_request_model="gpt-5",gen_ai_token_type="input",role="main"}"#,
            2.0,
        ),
        (
            r#"gen_ai_client_token_usage_sum{gen_ai_request_model="gpt-5",gen_ai_token_type="output",role="main"}"#,
            10.0,
        ),
        (
            r#"fleetgate_llm_usage_unknown_total{reason="no_usage",role="delegation"}"#,
            1.0,
        ),
        (r#"fleetgate_llm_spend_usd{role="main"}"#, 2.0 * GPT5_CALL),
    ] {
        assert!(
            close(value(&text, series), want),
            "{series} = {want}:\n{text}"
        );
    }
    assert_eq!(cost("delegation", "gpt-5"), None, "no usage, no dollars");
    let lines: Vec<Value> = gate
        .json_logs()
        .into_iter()
        .filter(|l| l["fields"]["event"] == "llm.usage" || l["event"] == "llm.usage")
        .collect();
    assert_eq!(lines.len(), 4, "one usage line per call: {lines:?}");
}

fn budget_tail(spend_file: &Path, mode: &str, budget: &str) -> String {
    format!(
        "  mode: {mode}\n  roles:\n    main: oai\n  spendFile: {}\n  budgets:\n    pod:\n      main: {budget}\n",
        spend_file.display()
    )
}

async fn spent_calls(path: &Path, calls: u64) {
    for _ in 0..100 {
        let read = std::fs::read(path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
        if read.is_some_and(|v| v["roles"]["main"]["calls"] == calls) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "the spend file never showed {calls} calls: {:?}",
        std::fs::read_to_string(path)
    );
}

#[tokio::test]
async fn a_pod_budget_refuses_in_the_providers_shape_survives_a_restart_and_observe_mode_counts() {
    let oai = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let dir = tempfile::tempdir().expect("dir");
    let spend = dir.path().join("spend.json");
    let cap = "{dailyUsd: 0.0001}";
    let chat = "/llm/main/v1/chat/completions";
    let body =
        json!({"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]}).to_string();
    let (_s, gate) = gate_with(
        &[("oai", "openai", &oai)],
        &budget_tail(&spend, "enforce", cap),
    )
    .await;
    for _ in 0..2 {
        let reply = post(&gate, chat, body.clone()).await;
        assert_eq!(reply.status, 200, "under the cap: {}", reply.text());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let refused = post(&gate, chat, body.clone()).await;
    assert_eq!(refused.status, 429, "{}", refused.text());
    assert_eq!(refused.headers["x-fleetgate-error"], "llm_budget_exceeded");
    // No Retry-After for a daily budget: agents cap the wait (Hermes at 600 s) and retry
    // into the same refusal; the message names the reset.
    assert!(
        refused.headers.get("retry-after").is_none(),
        "a daily budget says when in its message: {:?}",
        refused.headers
    );
    let err = &refused.json().unwrap()["error"];
    assert_eq!(err["code"], "llm_budget_exceeded");
    assert_eq!(
        err["type"], "rate_limit_exceeded",
        "OpenAI's 429 shape: {err}"
    );
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("daily pod budget of role 'main'") && message.contains("00:00 UTC"),
        "{message}"
    );
    assert_eq!(
        oai.requests().len(),
        2,
        "the refused call never reached the provider"
    );
    spent_calls(&spend, 2).await;
    drop(gate);

    let (_s, gate) = gate_with(
        &[("oai", "openai", &oai)],
        &budget_tail(&spend, "enforce", cap),
    )
    .await;
    let again = post(&gate, chat, body.clone()).await;
    assert_eq!(
        again.status,
        429,
        "spend survives a restart: {}",
        again.text()
    );
    drop(gate);

    let (_s, gate) = gate_with(
        &[("oai", "openai", &oai)],
        &budget_tail(&spend, "observe", cap),
    )
    .await;
    let passed = post(&gate, chat, body.clone()).await;
    assert_eq!(
        passed.status,
        200,
        "observe mode forwards: {}",
        passed.text()
    );
    let text = metrics(&gate).await;
    assert!(
        text.contains(r#"fleetgate_llm_refusals_total{action="would_refuse",code="llm_budget_exceeded",role="main"} 1"#),
        "observe mode counts it:\n{text}"
    );
    drop(gate);

    std::fs::write(&spend, b"{\"version\":1,\"day\":").expect("torn file");
    let (_s, gate) = gate_with(
        &[("oai", "openai", &oai)],
        &budget_tail(&spend, "enforce", "{dailyUsd: 100}"),
    )
    .await;
    let strict = post(&gate, chat, body.clone()).await;
    assert_eq!(
        strict.status,
        429,
        "an unreadable file keeps the stricter state: {}",
        strict.text()
    );
    assert!(
        strict.text().contains("spend file could not be read"),
        "{}",
        strict.text()
    );
}

#[tokio::test]
async fn tokens_per_minute_refuses_until_the_minute_frees_up() {
    let oai = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let dir = tempfile::tempdir().expect("dir");
    let tail = budget_tail(
        &dir.path().join("spend.json"),
        "enforce",
        "{tokensPerMinute: 20}",
    );
    let (_s, gate) = gate_with(&[("oai", "openai", &oai)], &tail).await;
    let body = json!({"model": "m", "messages": []}).to_string();
    let chat = "/llm/main/v1/chat/completions";
    for _ in 0..2 {
        assert_eq!(post(&gate, chat, body.clone()).await.status, 200);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let refused = post(&gate, chat, body.clone()).await;
    assert_eq!(
        refused.status,
        429,
        "30 tokens in the minute, 20 allowed: {}",
        refused.text()
    );
    let retry: u64 = refused.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "within the minute: {retry}");
    assert!(
        refused.text().contains("tokens per minute"),
        "{}",
        refused.text()
    );
}

/// Tokens of every format the URL gate's tests use, plus Hermes' own prefix families.
fn secret_corpus() -> Vec<String> {
    use support_secrets::*;
    let mut all: Vec<String> = leak_material().into_iter().map(|(t, _)| t).collect();
    all.push(jwt(7));
    all.push(format!("ghp_{}", random(ALNUM, 36, 41)));
    all.push(format!("sk-proj-{}", random(ALNUM, 48, 42)));
    all.push(format!("sk-ant-api03-{}", random(B64URL, 93, 43)));
    all.push(format!("AKIA{}", random(UPPER_DIGIT, 16, 44)));
    all.push(format!(
        "xoxb-{}-{}",
        random("0123456789", 12, 45),
        random(ALNUM, 24, 46)
    ));
    all.push(format!("AIza{}", random(B64URL, 35, 47)));
    all
}

fn prompt(i: usize, token: &str) -> String {
    // Half in a user message, half in a tool result; a system prompt around both.
    let messages = if i.is_multiple_of(2) {
        json!([{"role": "system", "content": "You are the ops agent."},
               {"role": "user", "content": format!("deploy with {token} please")}])
    } else {
        json!([{"role": "system", "content": "You are the ops agent."},
               {"role": "user", "content": "read the config"},
               {"role": "tool", "tool_call_id": "c1", "content": format!("API_TOKEN={token}\nREGION=eu")}])
    };
    json!({"model": "gpt-5", "messages": messages}).to_string()
}

#[tokio::test]
async fn secrets_in_prompts_are_refused_or_redacted_never_repeated_and_clean_prompts_pass_byte_for_byte()
 {
    let oai = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let corpus = secret_corpus();
    let chat = "/llm/main/v1/chat/completions";
    let (_s, gate) = gate_with(
        &[("oai", "openai", &oai)],
        "  mode: enforce\n  policyName: fp\n  roles:\n    main: oai\n",
    )
    .await;
    for (i, token) in corpus.iter().enumerate() {
        let reply = post(&gate, chat, prompt(i, token)).await;
        assert_eq!(reply.status, 403, "{token}: {}", reply.text());
        assert_eq!(reply.headers["x-fleetgate-error"], "llm_secret_in_prompt");
        let text = reply.text();
        assert!(
            text.contains("matching rule '") && text.contains("llm.secrets: refuse"),
            "{text}"
        );
        assert!(
            !text.contains(token.as_str()),
            "the refusal repeats the secret: {text}"
        );
    }
    assert!(
        oai.requests().is_empty(),
        "no refused prompt reached the provider"
    );
    let clean = json!({"model": "gpt-5", "messages": [
        {"role": "user", "content": "rotate the api key and the token every 90 days; caf\u{e9} \\u00e9 ok"}]})
    .to_string();
    assert_eq!(post(&gate, chat, clean.clone()).await.status, 200);
    assert_eq!(
        oai.requests()[0].raw,
        Bytes::from(clean.clone()),
        "a clean prompt reaches the provider byte for byte"
    );
    let logs = gate.stderr_log();
    let text = metrics(&gate).await;
    for token in &corpus {
        assert!(!logs.contains(token.as_str()), "a log line repeats {token}");
        assert!(!text.contains(token.as_str()), "/metrics repeats {token}");
    }
    drop(gate);

    let (_s, gate) = gate_with(
        &[("oai", "openai", &oai)],
        "  mode: enforce\n  secrets: redact\n  roles:\n    main: oai\n",
    )
    .await;
    let rule_re = regex::Regex::new(r"\[redacted:[a-z0-9-]+\]").unwrap();
    for (i, token) in corpus.iter().enumerate() {
        let sent_body = prompt(i, token);
        let reply = post(&gate, chat, sent_body.clone()).await;
        assert_eq!(reply.status, 200, "{token}: {}", reply.text());
        let seen = oai.requests();
        let raw = String::from_utf8(seen.last().unwrap().raw.to_vec()).unwrap();
        assert!(
            !raw.contains(token.as_str()),
            "{token} reached the provider: {raw}"
        );
        let found = rule_re
            .find(&raw)
            .unwrap_or_else(|| panic!("no redaction in {raw}"));
        let (before, after) = (&raw[..found.start()], &raw[found.end()..]);
        assert!(
            sent_body.starts_with(before) && sent_body.ends_with(after),
            "only the secret is replaced: {raw}"
        );
    }
    let logs = gate.stderr_log();
    for token in &corpus {
        assert!(!logs.contains(token.as_str()), "a log line repeats {token}");
    }
}
