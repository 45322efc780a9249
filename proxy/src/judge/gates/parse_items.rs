//! Gate E0: the items of an extract call — at most five, each a URL string or an object with
//! a string `url` (or `href`); anything else becomes a per-index error and order is kept.

use serde_json::Value;

use super::DenyReason;

/// Items beyond this many are dropped, as Hermes' handler does.
pub(crate) const MAX_ITEMS: usize = 5;

/// Parse the `urls` value of an extract call. Not a list → no items.
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) fn parse_items(urls: &Value) -> Vec<Result<String, DenyReason>> {
    let Value::Array(items) = urls else {
        return Vec::new();
    };
    items
        .iter()
        .take(MAX_ITEMS)
        .enumerate()
        .map(|(index, item)| item_url(item).ok_or(DenyReason::InvalidItem { index }))
        .collect()
}

/// The URL of one item: a non-blank string, or `url` (else `href` when `url` is falsy).
fn item_url(item: &Value) -> Option<String> {
    let candidate = match item {
        Value::String(s) => s.as_str(),
        Value::Object(map) => match map.get("url") {
            Some(v) if is_truthy(v) => v.as_str()?,
            _ => map.get("href")?.as_str()?,
        },
        _ => return None,
    };
    let trimmed = candidate.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_string())
}

/// Python truthiness of a JSON value.
fn is_truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn items_are_parsed_in_order_with_per_index_errors() {
        let got = parse_items(&json!([
            " https://a.example/ ",
            42,
            {"url": "https://b.example"},
            {"url": "", "href": "https://c.example"},
            {"url": 7},
            "https://dropped.example"
        ]));
        let want: Vec<Result<String, DenyReason>> = vec![
            Ok("https://a.example/".into()),
            Err(DenyReason::InvalidItem { index: 1 }),
            Ok("https://b.example".into()),
            Ok("https://c.example".into()),
            Err(DenyReason::InvalidItem { index: 4 }),
        ];
        assert_eq!(
            got, want,
            "items must keep order, cap at five and name bad indices"
        );
    }

    #[test]
    fn blank_strings_nulls_lists_and_non_lists_are_invalid_or_empty() {
        let got = parse_items(&json!(["   ", null, ["x"], {"href": 3}, {}]));
        assert!(
            got.iter().all(|r| r.is_err()),
            "blank, null, list and non-string objects must be invalid: {got:?}"
        );
        assert!(
            parse_items(&json!("https://x.example")).is_empty(),
            "a bare string is not a list"
        );
        assert!(
            parse_items(&json!({"url": "x"})).is_empty(),
            "an object is not a list"
        );
    }

    #[test]
    fn a_truthy_non_string_url_does_not_fall_back_to_href() {
        let got = parse_items(&json!([{"url": 5, "href": "https://h.example"}]));
        assert_eq!(got, vec![Err(DenyReason::InvalidItem { index: 0 })]);
    }
}
