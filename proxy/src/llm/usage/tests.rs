use super::*;

fn read(kind: ProviderKind, body: &str) -> Option<Usage> {
    let mut s = UsageScanner::new();
    s.feed(body.as_bytes());
    s.usage(kind)
}

/// The same body fed in pieces of every size from 1 to 9 bytes reads the same.
fn read_split(kind: ProviderKind, body: &str) -> Option<Usage> {
    let whole = read(kind, body);
    for size in 1..10 {
        let mut s = UsageScanner::new();
        for piece in body.as_bytes().chunks(size) {
            s.feed(piece);
        }
        assert_eq!(s.usage(kind), whole, "pieces of {size} bytes: {body}");
    }
    whole
}

#[test]
fn chat_completions_whole_and_streamed_subtract_the_cached_tokens() {
    let whole = r#"{"id":"x","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150,"prompt_tokens_details":{"cached_tokens":100},"completion_tokens_details":{"reasoning_tokens":12}}}"#;
    let want = Usage {
        input: 20,
        cache_read: 100,
        cache_write: 0,
        output: 30,
        reasoning: 12,
    };
    assert_eq!(read_split(ProviderKind::OpenAi, whole), Some(want));
    let streamed = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":null}\n\n\
        data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}],\"usage\":null}\n\n\
        data: {\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":30,\"prompt_tokens_details\":{\"cached_tokens\":100},\"completion_tokens_details\":{\"reasoning_tokens\":12}}}\n\n\
        data: [DONE]\n\n";
    assert_eq!(read_split(ProviderKind::OpenAi, streamed), Some(want));
}

#[test]
fn responses_read_the_completed_event() {
    let streamed = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n\
        event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"x\"}\n\n\
        event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"usage\":{\"input_tokens\":500,\"input_tokens_details\":{\"cached_tokens\":400},\"output_tokens\":70,\"output_tokens_details\":{\"reasoning_tokens\":64},\"total_tokens\":570}}}\n\n";
    assert_eq!(
        read_split(ProviderKind::OpenAi, streamed),
        Some(Usage {
            input: 100,
            cache_read: 400,
            cache_write: 0,
            output: 70,
            reasoning: 64
        })
    );
}

#[test]
fn anthropic_streams_take_input_from_message_start_and_output_from_the_last_delta() {
    let streamed = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":1000,\"cache_read_input_tokens\":2000,\"output_tokens\":1}}}\n\n\
        event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"the \\\"usage\\\": {\\\"output_tokens\\\": 999999} in prose\"}}\n\n\
        event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n\
        event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    assert_eq!(
        read_split(ProviderKind::Anthropic, streamed),
        Some(Usage {
            input: 25,
            cache_read: 2000,
            cache_write: 1000,
            output: 15,
            reasoning: 0
        }),
        "the escaped key inside the model's text is not a field"
    );
}

#[test]
fn an_answer_without_usage_is_none_never_zero() {
    for body in [
        "",
        r#"{"choices":[]}"#,
        r#"{"usage":null}"#,
        r#"{"usage":{}}"#,
        r#"{"type":"usage","usage":"none"}"#,
        "data: {\"choices\":[],\"usage\":null}\n\ndata: [DONE]\n\n",
    ] {
        assert_eq!(read_split(ProviderKind::OpenAi, body), None, "{body}");
    }
}

#[test]
fn an_oversized_usage_object_is_dropped_and_the_scan_goes_on() {
    let big = format!(
        r#"{{"usage":{{"prompt_tokens":1,"x":"{}"}},"more":{{"usage":{{"prompt_tokens":7,"completion_tokens":3}}}}}}"#,
        "a".repeat(MAX_OBJECT)
    );
    assert_eq!(
        read(ProviderKind::OpenAi, &big),
        Some(Usage {
            input: 7,
            cache_read: 0,
            cache_write: 0,
            output: 3,
            reasoning: 0
        })
    );
}

#[test]
fn a_key_split_after_a_backslash_is_still_text() {
    let mut s = UsageScanner::new();
    s.feed(br#"{"text":"a \"us"#);
    s.feed(br#"age\": {\"prompt_tokens\": 5}"}"#);
    assert_eq!(s.usage(ProviderKind::OpenAi), None);
}
