//! Search hits as backends return them, in the key order each Hermes provider emits.
//!
//! Hermes' search rows carry the same four fields in one of two orders, and the order is part
//! of the agent-visible JSON: `web_hit` is `{url, title, description, position}` (exa,
//! parallel; firecrawl rows also lead with `url`), `title_hit` is
//! `{title, url, description, position}` (brave-free, searxng, tavily, xai). Positions are
//! 1-based and follow the kept rows.

use serde::ser::{Serialize, SerializeMap, Serializer};

pub(crate) use fleetgate_policy::backends::KeyOrder;

/// One search result row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchHit {
    /// Result title, or empty.
    pub(crate) title: String,
    /// Result URL.
    pub(crate) url: String,
    /// Snippet, excerpt or highlight text, or empty.
    pub(crate) description: String,
    /// 1-based rank among the rows returned.
    pub(crate) position: usize,
    /// How the row serializes.
    pub order: KeyOrder,
}

// === impl SearchHit ===

impl SearchHit {
    /// The row as a JSON object with its keys in `order`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

impl Serialize for SearchHit {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(4))?;
        match self.order {
            KeyOrder::WebHit => {
                map.serialize_entry("url", &self.url)?;
                map.serialize_entry("title", &self.title)?;
            }
            KeyOrder::TitleHit => {
                map.serialize_entry("title", &self.title)?;
                map.serialize_entry("url", &self.url)?;
            }
        }
        map.serialize_entry("description", &self.description)?;
        map.serialize_entry("position", &self.position)?;
        map.end()
    }
}

/// What a search produced: the rows and the vendor that served them (a ring member when the
/// keyless ring did).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Searched {
    /// The rows.
    pub hits: Vec<SearchHit>,
    /// The vendor that served them.
    pub(crate) served_by: crate::policy::backends::BackendKind,
}

impl crate::web::cache::memo::Memoizable for Searched {}

/// A row before numbering: title, url, description.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RawHit {
    pub(crate) title: String,
    pub(crate) url: String,
    pub(crate) description: String,
}

/// Number `rows` from 1 in `order`, keeping at most `limit`.
pub(crate) fn numbered(
    order: KeyOrder,
    rows: impl IntoIterator<Item = RawHit>,
    limit: usize,
) -> Vec<SearchHit> {
    rows.into_iter()
        .take(limit)
        .enumerate()
        .map(|(i, row)| SearchHit {
            title: row.title,
            url: row.url,
            description: row.description,
            position: i + 1,
            order,
        })
        .collect()
}

/// A JSON value as a string field: strings as they are, anything else empty.
pub(crate) fn text(value: Option<&serde_json::Value>) -> String {
    value
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Python's `str()` of a JSON field that defaults to "".
pub(crate) fn py_str(value: Option<&serde_json::Value>) -> String {
    use serde_json::Value;
    match value {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) => "None".to_string(),
        Some(Value::Bool(true)) => "True".to_string(),
        Some(Value::Bool(false)) => "False".to_string(),
        Some(other) => other.to_string(),
    }
}

/// Strings of a JSON array joined by `sep`; non-strings are skipped.
pub(crate) fn joined(value: Option<&serde_json::Value>, sep: &str) -> String {
    value
        .and_then(serde_json::Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(serde_json::Value::as_str)
                .collect::<Vec<_>>()
                .join(sep)
        })
        .unwrap_or_default()
}

/// The rows of a JSON array, or none.
pub(crate) fn rows(value: Option<&serde_json::Value>) -> &[serde_json::Value] {
    value
        .and_then(serde_json::Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_serialize_in_their_providers_key_order() {
        let cases = [
            (
                KeyOrder::WebHit,
                r#"{"url":"u","title":"t","description":"d","position":1}"#,
            ),
            (
                KeyOrder::TitleHit,
                r#"{"title":"t","url":"u","description":"d","position":1}"#,
            ),
        ];
        for (order, want) in cases {
            let raw = RawHit {
                title: "t".into(),
                url: "u".into(),
                description: "d".into(),
            };
            let hits = numbered(order, [raw], 5);
            let got = serde_json::to_string(&hits[0]).expect("a hit must serialize");
            assert_eq!(got, want, "{order:?} must keep its key order");
            assert_eq!(
                serde_json::to_string(&hits[0].to_json()).expect("value must serialize"),
                want,
                "{order:?} must keep its key order through serde_json::Value"
            );
        }
    }

    #[test]
    fn numbering_is_one_based_and_stops_at_the_limit() {
        let rows = (0..5).map(|i| RawHit {
            url: format!("https://e.com/{i}"),
            ..RawHit::default()
        });
        let hits = numbered(KeyOrder::TitleHit, rows, 3);
        let positions: Vec<_> = hits.iter().map(|h| (h.position, h.url.as_str())).collect();
        assert_eq!(
            positions,
            [
                (1, "https://e.com/0"),
                (2, "https://e.com/1"),
                (3, "https://e.com/2")
            ],
            "positions must count kept rows from 1"
        );
    }
}
