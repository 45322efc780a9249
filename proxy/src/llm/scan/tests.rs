use serde_json::{Value, json};

use super::*;

fn scan(text: &str) -> ObjectScan<'_> {
    scan_object(text, text, &COMPLETION).expect("the body must scan")
}

#[test]
fn only_the_judged_members_are_kept_and_keys_are_compared_decoded() {
    let text = r#" { "x": [0, {"model": "inner"}, "s"], "mod\u0065l" : "gpt-x",
        "reasoning": {"effort": "low", "summary": {"a": [1]}}, "n": null } "#;
    let s = scan(text);
    assert_eq!(s.count, 4, "every member must be counted");
    let keys: Vec<&str> = s.members.iter().map(|m| m.key).collect();
    assert_eq!(keys, ["model", "reasoning"], "only judged keys are kept");
    assert_eq!(
        s.str_at(&["model"]).as_deref(),
        Some("gpt-x"),
        "an escaped key is the key it decodes to"
    );
    assert_eq!(
        s.str_at(&["reasoning", "effort"]).as_deref(),
        Some("low"),
        "a judged object is read inside"
    );
    assert_eq!(&text[s.close..=s.close], "}", "close points at the brace");
    let model = s.get("model").expect("model is kept");
    assert_eq!(
        &text[model.start..model.start + model.raw.len()],
        "\"gpt-x\"",
        "the value's place is known"
    );
}

#[test]
fn a_huge_value_that_is_not_judged_is_skipped_without_being_kept() {
    let mut text = String::from(r#"{"model":"x","x":["#);
    for _ in 0..200_000 {
        text.push_str("[0,{\"model\":\"y\"}],");
    }
    text.push_str("0]}");
    let s = scan(&text);
    assert_eq!(s.members.len(), 1, "the skipped array leaves no record");
    assert_eq!(
        s.str_at(&["model"]).as_deref(),
        Some("x"),
        "the model is read"
    );
}

#[test]
fn anything_but_exactly_one_json_object_is_refused() {
    for text in [
        "",
        "[]",
        "\"model\"",
        r#"{"model":"x"} {"model":"y"}"#,
        r#"{"model":"x""#,
        r#"{"model":"x",}"#,
        r#"{"model":"x","y":[1,]}"#,
        r#"{"model":"x","y":NaN}"#,
        r#"{'model':'x'}"#,
        "\u{feff}{\"model\":\"x\"}",
        "{\"model\":\"x\"}\u{a0}",
    ] {
        assert!(
            scan_object(text, text, &COMPLETION).is_err(),
            "{text:?} must not scan"
        );
    }
}

#[test]
fn a_judged_key_seen_twice_is_recorded_at_its_path_and_the_last_value_kept() {
    let cases = [
        (r#"{"model":"a","model":"b"}"#, Some("model")),
        (r#"{"model":"a","mod\u0065l":"b"}"#, Some("model")),
        (
            r#"{"model":"b","reasoning":{"effort":"a","effort":"b"}}"#,
            Some("reasoning.effort"),
        ),
        (
            r#"{"model":"b","extra_body":{"reasoning":{"enabled":true,"enabled":false}}}"#,
            Some("extra_body.reasoning.enabled"),
        ),
        (r#"{"model":"b","x":1,"x":2}"#, None),
        (r#"{"model":"b","x":{"model":"a"}}"#, None),
    ];
    for (text, want) in cases {
        let s = scan(text);
        assert_eq!(s.first_duplicate().as_deref(), want, "{text}");
        assert_eq!(
            s.str_at(&["model"]).as_deref(),
            Some("b"),
            "{text}: the last value is kept"
        );
    }
}

#[test]
fn splices_change_only_their_range_and_keep_the_rest_byte_for_byte() {
    let text = r#"{ "model" : "m",  "keep": [1, 2] ,"tier":"x" }"#;
    let s = scan(text);
    let model = s.get("model").expect("model");
    let mut body = Rewriter::new(text);
    body.apply(vec![
        Splice {
            range: s.close..s.close,
            text: ",\"b\":2".into(),
        },
        Splice {
            range: model.start..model.start + model.raw.len(),
            text: "\"n\"".into(),
        },
        Splice {
            range: s.close..s.close,
            text: ",\"c\":3".into(),
        },
    ]);
    assert_eq!(
        body.finish(),
        r#"{ "model" : "n",  "keep": [1, 2] ,"tier":"x" ,"b":2,"c":3}"#,
        "splices apply in place order, insertions in their order"
    );
}

#[test]
fn array_items_are_visited_in_order_and_a_stop_ends_the_walk() {
    let text = r#"[{"a":1}, 2 , "x", [3]]"#;
    let mut seen = Vec::new();
    let walked = for_each_item(text, |i, item| {
        seen.push((i, item.to_string()));
        if i == 2 { Err("stop") } else { Ok(()) }
    })
    .expect("the array is well formed");
    assert_eq!(walked, Err("stop"), "the callback's error comes back");
    assert_eq!(
        seen,
        [
            (0, r#"{"a":1}"#.into()),
            (1, "2".into()),
            (2, "\"x\"".into())
        ],
        "items up to the stop, as written"
    );
    assert!(
        for_each_item(r#"[1,"#, |_, _| Ok::<(), ()>(())).is_err(),
        "a broken array is an error"
    );
    assert!(
        for_each_item(r#"{"a":1}"#, |_, _| Ok::<(), ()>(())).is_err(),
        "an object is not an array"
    );
}

#[test]
fn json_strings_are_escaped() {
    let s = json_string("a\"b\\c\n");
    assert_eq!(
        serde_json::from_str::<Value>(&s).expect("valid JSON"),
        json!("a\"b\\c\n"),
        "the literal must decode to the text"
    );
}
