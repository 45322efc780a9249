use serde_json::json;

use super::*;

fn key(role: &str, body: &serde_json::Value) -> TurnKey {
    turn_key(role, "/v1/chat/completions", body.to_string().as_bytes())
}

#[test]
fn the_anchor_is_the_latest_user_text_of_each_wire_shape() {
    let cases = [
        (
            "chat: the last user message",
            json!({"messages": [{"role": "system", "content": "sys"},
                {"role": "user", "content": "first"}, {"role": "assistant", "content": "a"},
                {"role": "user", "content": "second"}, {"role": "tool", "content": "result"}]}),
            Some("\"second\""),
        ),
        (
            "chat: a part list reads its first text part",
            json!({"messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:"}},
                {"type": "text", "text": "look"}, {"type": "text", "text": "more"}]}]}),
            Some("\"look\""),
        ),
        (
            "anthropic: a tool result alone keeps the user text before it",
            json!({"messages": [{"role": "user", "content": "ask"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"}]}]}),
            Some("\"ask\""),
        ),
        (
            "responses: input as the user's text",
            json!({"input": "hello"}),
            Some("\"hello\""),
        ),
        (
            "responses: input items",
            json!({"input": [{"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "query"}]}]}),
            Some("\"query\""),
        ),
        ("no user message", json!({"messages": []}), None),
        (
            "an empty user message",
            json!({"messages": [{"role": "user", "content": ""}]}),
            None,
        ),
    ];
    for (case, body, want) in cases {
        let text = body.to_string();
        assert_eq!(anchor(text.as_bytes()), want, "{case}");
    }
    assert_eq!(anchor(b"{\"messages\": ["), None, "malformed JSON");
    assert_eq!(anchor(b"[1]"), None, "not an object");
}

#[test]
fn a_title_call_and_the_turn_it_titles_share_a_turn_and_other_turns_do_not() {
    // What Hermes 0.20.1 sends for one `hermes -z "Say hi."` turn: the turn's completion and
    // the session-title call, both on the main runtime.
    let turn = json!({"model": "m", "stream": true, "tools": [{"type": "function",
        "function": {"name": "clarify"}}], "messages": [
        {"role": "system", "content": "You are Hermes Agent"},
        {"role": "user", "content": "Say hi."}]});
    let title = json!({"model": "m", "temperature": 0.3, "response_format": {"type": "json_schema"},
        "messages": [{"role": "system", "content": "You name chat sessions."},
        {"role": "user", "content": "Say hi."}]});
    assert_eq!(key("main", &turn), key("main", &title), "one turn");
    let next = json!({"model": "m", "messages": [{"role": "user", "content": "Say bye."}]});
    assert_ne!(
        key("main", &turn),
        key("main", &next),
        "another user message"
    );
    assert_ne!(key("main", &turn), key("delegation", &turn), "another role");
    assert_ne!(
        turn_key("main", "/v1/chat/completions", turn.to_string().as_bytes()),
        turn_key("main", "/v1/responses", turn.to_string().as_bytes()),
        "another path"
    );
    // A long message: keyed by its start, which a title call cut to 1000 characters keeps.
    let long = "x".repeat(5000);
    let full = json!({"messages": [{"role": "user", "content": long}]});
    let cut = json!({"messages": [{"role": "user", "content": &long[..1000]}]});
    assert_eq!(key("main", &full), key("main", &cut), "the start keys");
}

#[test]
fn without_a_user_message_only_the_same_body_is_the_same_turn() {
    let a = json!({"model": "rogue", "messages": []});
    let b = json!({"model": "rogue", "messages": [], "n": 2});
    assert_eq!(key("main", &a), key("main", &a), "a retry of the body");
    assert_ne!(key("main", &a), key("main", &b), "another body");
}

#[test]
fn a_turn_is_remembered_for_the_window_after_its_last_attempt_and_memory_is_bounded() {
    let turns = RefusedTurns::new();
    let t0 = Instant::now();
    let a = key(
        "main",
        &json!({"messages": [{"role": "user", "content": "a"}]}),
    );
    assert!(!turns.refused(a, t0), "the first refusal starts a turn");
    assert!(
        turns.refused(a, t0 + Duration::from_secs(1)),
        "a second attempt a second later"
    );
    assert!(
        turns.refused(a, t0 + Duration::from_secs(50)),
        "each attempt renews the window"
    );
    assert!(
        !turns.refused(
            a,
            t0 + Duration::from_secs(50) + TURN_WINDOW + Duration::from_secs(1)
        ),
        "past the window it is a new turn"
    );
    let turns = RefusedTurns::new();
    let first = key("main", &json!({"n": 0}));
    assert!(!turns.refused(first, t0));
    for n in 1..(MAX_TURNS + 10) {
        turns.refused(key("main", &json!({ "n": n })), t0);
    }
    assert_eq!(turns.len(), MAX_TURNS, "bounded");
    assert!(
        !turns.refused(first, t0),
        "the oldest turn was forgotten to make room"
    );
}
