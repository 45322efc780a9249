//! The LLM route's request reader on arbitrary input: the top-level scan, the batch walk,
//! the pin splices and the path normaliser. Never panics; the scan accepts every JSON object
//! serde_json accepts and reads the same model from it (the last of a duplicated key, as a
//! map does); a pinned body is still one JSON object whose effort reads back as the pin; a
//! canonical path is its own normal form.

#![no_main]

use fleetgate_proxy::llm::request_facts::effort_of;
use fleetgate_proxy::llm::scan::{self, BATCH_ITEM, COMPLETION, scan_object};
use fleetgate_proxy::llm::{enforce, path};
use fleetgate_proxy::policy::llm::{LlmPin, ProviderKind};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const KINDS: [ProviderKind; 4] = [
    ProviderKind::OpenAi,
    ProviderKind::Anthropic,
    ProviderKind::OpenRouter,
    ProviderKind::Xai,
];

fn check_pins(text: &str) {
    let Ok(body) = scan_object(text, text, &COMPLETION) else {
        return;
    };
    if body.first_duplicate().is_some() {
        // Enforce mode refuses such a body before any pin is written.
        return;
    }
    for (i, kind) in KINDS.into_iter().enumerate() {
        let effort = ["none", "low", "high", "max"][(text.len() + i) % 4];
        let pin = LlmPin {
            effort: Some(effort.into()),
            service_tier: Some("flex".into()),
        };
        let path = ["/v1/chat/completions", "/v1/responses", "/v1/messages"][i % 3];
        let (_, rewritten) = enforce::rewrite(&pin, kind, path, text, &body);
        let Some(sent) = rewritten else { continue };
        let again = scan_object(&sent, &sent, &COMPLETION).expect("a pinned body is one JSON object");
        assert_eq!(
            again.str_at(&["model"]),
            body.str_at(&["model"]),
            "a pin never changes the model"
        );
        let (rest, _) = enforce::rewrite(&pin, kind, path, &sent, &again);
        assert!(rest.is_empty(), "a pinned body needs no further rewrite: {sent}");
        let read = effort_of(&again);
        assert!(read.is_some(), "the pinned effort reads back: {sent}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let scanned = scan_object(text, text, &COMPLETION);
    if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) {
        let body = scanned.as_ref().expect("every object serde_json reads scans");
        assert_eq!(
            body.str_at(&["model"]).as_deref(),
            map.get("model").and_then(Value::as_str),
            "the scan reads the model serde_json reads"
        );
    }
    check_pins(text);
    let _ = scan::for_each_item(text, |_, item| {
        let _ = scan_object(text, item, &BATCH_ITEM).map(|e| e.first_duplicate());
        Ok::<(), ()>(())
    });
    let normal = path::normalize(text);
    if path::is_canonical(text) {
        assert_eq!(normal, text, "a canonical path is its own normal form");
    }
    assert_eq!(path::normalize(&normal), path::normalize(&normal), "normalising is deterministic");
});
