use serde_json::json;

use super::*;

fn ids(docs: &[Value], field: &str) -> Vec<String> {
    extract(docs, field)
        .items
        .into_iter()
        .map(|i| i.id)
        .collect()
}

#[test]
fn items_are_the_outermost_objects_with_a_scalar_id_at_any_depth() {
    let cases: Vec<(&str, Vec<Value>, Vec<&str>)> = vec![
        (
            "a flat list",
            vec![json!([{"id": "a"}, {"id": "b"}])],
            vec!["a", "b"],
        ),
        (
            "nested under envelopes",
            vec![json!({"data": {"results": [{"resp": {"messages": [{"id": 7}, {"id": 8}]}}]}})],
            vec!["7", "8"],
        ),
        (
            "outermost only: an item's children are not items",
            vec![json!([{"id": "t1", "replies": [{"id": "r1"}, {"id": "r2"}]}])],
            vec!["t1"],
        ),
        (
            "JSON embedded in a string is searched",
            vec![json!({"text": "{\"items\": [{\"id\": \"x\"}, {\"id\": \"y\"}]}"})],
            vec!["x", "y"],
        ),
        (
            "a text block that is itself JSON",
            vec![json!("[{\"id\": 1}, {\"id\": 2}]")],
            vec!["1", "2"],
        ),
        (
            "embedded twice (JSON in a string in a string)",
            vec![
                json!({"r": serde_json::to_string(&json!({"d": "[{\"id\": \"deep\"}]"})).expect("must serialise")}),
            ],
            vec!["deep"],
        ),
        (
            "null, object and list ids are not ids; the search goes on inside",
            vec![json!([{"id": null, "x": {"id": "in"}}, {"id": {"v": 1}}, {"id": []}])],
            vec!["in"],
        ),
        (
            "duplicates across documents count once",
            vec![
                json!([{"id": "a"}]),
                json!({"result": [{"id": "a"}, {"id": "b"}]}),
            ],
            vec!["a", "b"],
        ),
        (
            "plain text has no items",
            vec![json!("no news today")],
            vec![],
        ),
    ];
    for (name, docs, want) in cases {
        assert_eq!(ids(&docs, "id"), want, "{name}: ids must match");
    }
}

#[test]
fn the_envelope_reports_errors_only_outside_the_items() {
    let cases: Vec<(&str, Value, bool)> = vec![
        (
            "successful false",
            json!({"successful": false, "data": []}),
            true,
        ),
        (
            "non-empty error",
            json!({"error": "rate limited", "data": []}),
            true,
        ),
        ("error object", json!({"error": {"code": 429}}), true),
        (
            "null error",
            json!({"error": null, "successful": true, "data": [{"id": 1}]}),
            false,
        ),
        (
            "empty error",
            json!({"error": "", "data": [{"id": 1}]}),
            false,
        ),
        (
            "an item's own error field is data",
            json!([{"id": 1, "error": "bounced"}]),
            false,
        ),
        (
            "embedded envelope",
            json!("{\"successful\": false, \"error\": \"bad key\"}"),
            true,
        ),
    ];
    for (name, doc, want) in cases {
        let got = extract(&[doc], "id").envelope_error;
        assert_eq!(
            got.is_some(),
            want,
            "{name}: envelope error must be {want}, got {got:?}"
        );
    }
}

#[test]
fn lines_join_show_fields_by_path_or_by_search() {
    let item = Item {
        id: "m1".into(),
        value: json!({"id": "m1", "subject": "Hello\n  world", "from": {"name": "Ann", "addr": "a@x"},
                      "labels": ["inbox", "work"], "n": 3}),
    };
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["subject"], "Hello world"),
        (vec!["from.name", "subject"], "Ann | Hello world"),
        (vec!["addr"], "a@x"),
        (vec!["labels.1", "n"], "work | 3"),
        (vec!["missing"], "m1"),
        (vec![], "m1"),
    ];
    for (fields, want) in cases {
        let fields: Vec<String> = fields.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            line(&item, &fields),
            want,
            "fields {fields:?} must print {want}"
        );
    }
}

#[test]
fn a_long_line_is_cut() {
    let item = Item {
        id: "x".into(),
        value: json!({"id": "x", "s": "a".repeat(1000)}),
    };
    let l = line(&item, &["s".to_string()]);
    assert_eq!(
        l.chars().count(),
        MAX_LINE_CHARS,
        "the line must be cut to the cap"
    );
    assert!(l.ends_with('…'), "a cut line must end with an ellipsis");
}

#[test]
fn render_caps_the_lines_and_counts_the_rest() {
    let lines: Vec<String> = (1..=4).map(|i| format!("item {i}")).collect();
    let cases: Vec<(&[String], usize, String)> = vec![
        (&[], 5, "{\"wakeAgent\": false}\n".to_string()),
        (&lines[..2], 5, "item 1\nitem 2\n".to_string()),
        (&lines, 2, "item 1\nitem 2\n… and 2 more\n".to_string()),
    ];
    for (lines, max, want) in cases {
        assert_eq!(
            render(lines, max),
            want,
            "{} lines at max {max}",
            lines.len()
        );
    }
}
