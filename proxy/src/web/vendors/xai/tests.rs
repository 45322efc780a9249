use super::*;

fn message(text: &str, annotations: Value) -> Value {
    json!({
        "output": [
            { "type": "reasoning", "content": [] },
            { "type": "message", "content": [
                { "type": "output_text", "text": text, "annotations": annotations }
            ]}
        ]
    })
}

fn urls(rows: &[RawHit]) -> Vec<&str> {
    rows.iter().map(|r| r.url.as_str()).collect()
}

#[test]
fn a_clean_json_answer_gives_its_rows_without_urlless_ones() {
    let text = r#"{"results":[{"title":" A ","url":"https://a","description":"d"},
        {"title":"no url"},{"title":"B","url":"https://b"}]}"#;
    let rows = results(&message(text, json!([])), 10);
    assert_eq!(
        urls(&rows),
        ["https://a", "https://b"],
        "rows without a URL must be dropped"
    );
    assert_eq!(rows[0].title, "A", "fields must be trimmed");
}

#[test]
fn prose_around_the_json_object_is_tolerated() {
    let text = "Here you go:\n{\"results\":[{\"url\":\"https://a\"}]}\nDone.";
    let rows = results(&message(text, json!([])), 10);
    assert_eq!(urls(&rows), ["https://a"]);
}

#[test]
fn the_json_limit_applies_before_dropping_rows() {
    let text = r#"{"results":[{"title":"x"},{"url":"https://a"},{"url":"https://b"}]}"#;
    let rows = results(&message(text, json!([])), 2);
    assert_eq!(
        urls(&rows),
        ["https://a"],
        "Hermes slices to the limit first"
    );
}

#[test]
fn citations_in_the_text_are_used_when_there_is_no_json() {
    let text = "Rust is a language. See the book.";
    let start = text.find("See").expect("marker must exist") as u64;
    let annotations = json!([
        { "type": "url_citation", "url": "https://r", "start_index": start, "end_index": start + 3 },
        { "type": "url_citation", "url": "https://r", "start_index": 0, "end_index": 1 },
        { "type": "file_citation", "url": "https://f" },
        { "type": "url_citation", "url": "https://s" },
    ]);
    let rows = results(&message(text, annotations), 10);
    assert_eq!(
        urls(&rows),
        ["https://r", "https://s"],
        "duplicates and other types must go"
    );
    assert_eq!(
        rows[0].description, "Rust is a language.",
        "text before the citation"
    );
    assert_eq!(rows[1].description, "", "no indices, no description");
}

#[test]
fn the_citations_list_is_the_last_resort() {
    let mut answer = message("no json here", json!([]));
    answer["citations"] = json!(["https://a", " ", 3, "https://b", "https://c"]);
    let rows = results(&answer, 4);
    assert_eq!(
        urls(&rows),
        ["https://a", "https://b"],
        "blank and non-string entries dropped"
    );
}

#[test]
fn the_body_carries_model_filters_and_the_no_citation_flag() {
    let endpoint = Endpoint::new(
        url::Url::parse(
            crate::web::vendors::BackendKind::Xai
                .default_base_url()
                .unwrap_or_default(),
        )
        .expect("base must parse"),
    );
    let client = XaiClient::new(endpoint.clone()).with_options(XaiOptions {
        model: Some(" grok-4 ".into()),
        allowed_domains: (1..=7).map(|i| format!("d{i}.com")).collect(),
        excluded_domains: vec![" ".into()],
    });
    let body = client.body("rust", 3).expect("one list must be accepted");
    assert_eq!(body["model"], "grok-4");
    assert_eq!(body["include"], json!(["no_inline_citations"]));
    let allowed = body["tools"][0]["filters"]["allowed_domains"]
        .as_array()
        .expect("allowed domains must be sent");
    assert_eq!(allowed.len(), 5, "at most five domains");
    let prompt = body["input"][0]["content"]
        .as_str()
        .expect("prompt must be text");
    assert!(prompt.contains("at most 3 results") && prompt.ends_with("Query: rust"));

    let both = XaiClient::new(endpoint).with_options(XaiOptions {
        allowed_domains: vec!["a.com".into()],
        excluded_domains: vec!["b.com".into()],
        ..XaiOptions::default()
    });
    let err = both.body("q", 1).expect_err("both lists must be refused");
    assert_eq!(err.message, BOTH_DOMAIN_LISTS);
}
