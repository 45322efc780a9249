use serde_json::{Value, json};

use super::*;
use crate::llm::scan::COMPLETION;

/// Tools found: (name shown, label).
type Found = Vec<(String, &'static str)>;

fn tools_of(body: &Value) -> Result<Found, String> {
    let text = body.to_string();
    let scan = scan::scan_object(&text, &text, &COMPLETION).expect("a JSON object");
    of(&text, &scan).map(|tools| tools.into_iter().map(|t| (t.name, t.label)).collect())
}

fn named(pairs: &[(&str, &'static str)]) -> Found {
    pairs.iter().map(|(n, l)| (n.to_string(), *l)).collect()
}

#[test]
fn provider_side_tools_of_each_wire_are_found_and_client_tools_are_not() {
    let function =
        json!({"type": "function", "function": {"name": "web_search", "parameters": {}}});
    let cases: Vec<(&str, Value, Found)> = vec![
        (
            "Hermes' chat turn: function tools only, one named web_search",
            json!({"model": "m", "tools": [function, {"type": "function", "function": {"name": "clarify"}}]}),
            vec![],
        ),
        (
            "Hermes' x_search tool (xAI responses)",
            json!({"model": "grok", "input": [], "tools": [{"type": "x_search", "allowed_x_handles": ["a"]}], "store": false}),
            named(&[("x_search", "x_search")]),
        ),
        (
            "Hermes on xAI responses with the native search",
            json!({"model": "grok", "tools": [{"type": "function", "name": "clarify"}, {"type": "web_search"}]}),
            named(&[("web_search", "web_search")]),
        ),
        (
            "OpenAI responses built-ins, dated and not",
            json!({"tools": [{"type": "web_search_preview_2025_03_11"}, {"type": "file_search", "vector_store_ids": []},
                {"type": "mcp", "server_url": "https://mcp.example/"}, {"type": "code_interpreter"},
                {"type": "image_generation"}, {"type": "web_search_preview"}]}),
            named(&[
                ("web_search_preview_2025_03_11", "web_search_preview"),
                ("file_search", "file_search"),
                ("mcp", "mcp"),
                ("code_interpreter", "code_interpreter"),
                ("image_generation", "image_generation"),
                ("web_search_preview", "web_search_preview"),
            ]),
        ),
        (
            "Anthropic server tools beside its client tools",
            json!({"tools": [{"name": "get_weather", "input_schema": {}},
                {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
                {"type": "web_fetch_20250910", "name": "web_fetch"},
                {"type": "code_execution_20250825", "name": "code_execution"},
                {"type": "bash_20250124", "name": "bash"}, {"type": "text_editor_20250728", "name": "e"},
                {"type": "computer_20250124", "name": "computer"}, {"type": "memory_20250818", "name": "memory"}]}),
            named(&[
                ("web_search_20250305", "web_search"),
                ("web_fetch_20250910", "web_fetch"),
                ("code_execution_20250825", "code_execution"),
            ]),
        ),
        (
            "OpenAI client-run tools",
            json!({"tools": [{"type": "custom", "name": "x"}, {"type": "computer_use_preview"},
                {"type": "local_shell"}, {"type": "shell"}, {"type": "apply_patch"}]}),
            vec![],
        ),
        (
            "an unknown type fails closed, counted as other",
            json!({"tools": [{"type": "browse_the_web_2031"}]}),
            named(&[("browse_the_web_2031", "other")]),
        ),
        (
            "the same tool twice is named once",
            json!({"tools": [{"type": "web_search"}, {"type": "web_search"}]}),
            named(&[("web_search", "web_search")]),
        ),
        (
            "chat search models, Live Search, OpenRouter's web plugin and :online",
            json!({"model": "openai/gpt-5:online", "web_search_options": {}, "search_parameters": {"mode": "auto"},
                "plugins": [{"id": "file-parser"}, {"id": "web", "max_results": 3}]}),
            named(&[
                ("web_search_options", "web_search"),
                ("search_parameters", "live_search"),
                ("plugins:web", "web_plugin"),
                ("model:online", "web_plugin"),
            ]),
        ),
        (
            "Live Search switched off, other plugins",
            json!({"search_parameters": {"mode": "off"}, "plugins": [{"id": "file-parser"}]}),
            vec![],
        ),
        (
            "tools that are not a list, entries that are not objects or have no string type",
            json!({"tools": [1, "web_search", {"type": 3}, {"name": "x"}]}),
            vec![],
        ),
    ];
    for (case, body, want) in cases {
        assert_eq!(tools_of(&body), Ok(want), "{case}");
    }
    assert_eq!(
        tools_of(&json!({"tools": {"type": "web_search"}})),
        Ok(vec![]),
        "tools as an object is no list"
    );
}

#[test]
fn a_tool_entry_with_its_type_twice_is_named_for_the_duplicate_refusal() {
    let text = r#"{"model":"m","tools":[{"type":"function","name":"f"},{"type":"function","type":"web_search"}]}"#;
    let scan = scan::scan_object(text, text, &COMPLETION).expect("a JSON object");
    assert_eq!(of(text, &scan), Err("tools[1].type".to_string()));
}

#[test]
fn a_secret_in_a_tool_type_never_reaches_the_name_shown() {
    let token = format!("ghp_{}", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8");
    let got = tools_of(&json!({"tools": [{"type": token}]})).expect("tools");
    assert_eq!(got.len(), 1);
    assert!(!got[0].0.contains(&token), "{got:?}");
    assert!(got[0].0.contains("[redacted:"), "{got:?}");
    assert_eq!(got[0].1, "other");
}

#[test]
fn date_suffixes_are_cut_in_the_three_spellings_providers_use() {
    for (kind, want) in [
        ("web_search_20250305", "web_search"),
        ("web_search_preview_2025_03_11", "web_search_preview"),
        ("web_search-2025-08-26", "web_search"),
        ("web_search", "web_search"),
        ("x_search", "x_search"),
        ("v_1234567", "v_1234567"),
        ("tool_2025_3_11", "tool_2025_3_11"),
    ] {
        assert_eq!(undated(kind), want, "{kind}");
    }
}
