//! Items of a tool result: which JSON objects are items, their ids, their printed lines and
//! the run's text output.
//!
//! Items are the outermost objects that carry a scalar id field, at any depth, including
//! inside JSON documents embedded as strings; an item is never searched for nested items.
//! Outside the items, `successful: false` or a non-empty `error` marks the whole result as
//! failed.

use std::collections::HashSet;

use serde_json::Value;

#[cfg(test)]
mod tests;

/// Embedded JSON is followed at most this deep, so a hostile result cannot exhaust the stack.
const MAX_DEPTH: usize = 64;
/// Longest printed item line, in characters.
pub(crate) const MAX_LINE_CHARS: usize = 300;
/// The output that keeps the agent asleep.
pub(crate) const NO_WAKE: &str = r#"{"wakeAgent": false}"#;

/// One item of a tool result.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Item {
    /// The id as text (a number is its JSON text).
    pub(crate) id: String,
    /// The item object.
    pub(crate) value: Value,
}

/// Items found in a result, and the envelope error when the result reports one.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Extracted {
    /// Items in result order, unique by id (the first occurrence wins).
    pub(crate) items: Vec<Item>,
    /// The first `successful: false` / non-empty `error` seen outside the items.
    pub(crate) envelope_error: Option<String>,
}

/// Find the items of `docs` (the tool's text blocks and structured content).
pub(crate) fn extract(docs: &[Value], id_field: &str) -> Extracted {
    let mut out = Extracted::default();
    let mut seen = HashSet::new();
    for doc in docs {
        walk(doc, id_field, 0, &mut out, &mut seen);
    }
    out
}

fn walk(v: &Value, id_field: &str, depth: usize, out: &mut Extracted, seen: &mut HashSet<String>) {
    if depth > MAX_DEPTH {
        return;
    }
    match v {
        Value::Object(map) => {
            if let Some(id) = map.get(id_field).and_then(scalar_text) {
                if seen.insert(id.clone()) {
                    out.items.push(Item {
                        id,
                        value: v.clone(),
                    });
                }
                return;
            }
            if out.envelope_error.is_none() {
                out.envelope_error = envelope_error(map);
            }
            for child in map.values() {
                walk(child, id_field, depth + 1, out, seen);
            }
        }
        Value::Array(list) => {
            for child in list {
                walk(child, id_field, depth + 1, out, seen);
            }
        }
        Value::String(s) => {
            let t = s.trim_start();
            if (t.starts_with('{') || t.starts_with('['))
                && let Ok(inner) = serde_json::from_str::<Value>(t)
            {
                walk(&inner, id_field, depth + 1, out, seen);
            }
        }
        _ => {}
    }
}

/// The id of an item: a string, number or boolean; `null`, objects and lists are not ids.
fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn envelope_error(map: &serde_json::Map<String, Value>) -> Option<String> {
    let error = map.get("error").filter(|e| !is_empty(e)).map(|e| match e {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    });
    if map.get("successful") == Some(&Value::Bool(false)) {
        return Some(error.unwrap_or_else(|| "successful: false".into()));
    }
    error
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::String(s) => s.trim().is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// The printed line of an item: its `show_fields` joined by ` | `, or its id when none of
/// them is present. Whitespace is folded and the line is cut to [`MAX_LINE_CHARS`].
pub(crate) fn line(item: &Item, show_fields: &[String]) -> String {
    let parts: Vec<String> = show_fields
        .iter()
        .filter_map(|f| field(&item.value, f))
        .filter_map(|v| match v {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        })
        .collect();
    let text = if parts.is_empty() {
        item.id.clone()
    } else {
        parts.join(" | ")
    };
    short(&text)
}

/// `a.b` follows a path (a number indexes a list); a bare name is the item's own key, else
/// the first such key found breadth-first in the item.
fn field<'a>(item: &'a Value, name: &str) -> Option<&'a Value> {
    if name.contains('.') {
        return name.split('.').try_fold(item, |v, seg| match v {
            Value::Object(m) => m.get(seg),
            Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        });
    }
    let mut queue = std::collections::VecDeque::from([item]);
    while let Some(v) = queue.pop_front() {
        match v {
            Value::Object(m) => {
                if let Some(found) = m.get(name) {
                    return Some(found);
                }
                queue.extend(m.values());
            }
            Value::Array(a) => queue.extend(a.iter()),
            _ => {}
        }
    }
    None
}

fn short(text: &str) -> String {
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if folded.chars().count() <= MAX_LINE_CHARS {
        return folded;
    }
    let mut cut: String = folded.chars().take(MAX_LINE_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// The run's output: at most `max_new` lines plus `… and N more`, or [`NO_WAKE`].
pub(crate) fn render(lines: &[String], max_new: usize) -> String {
    if lines.is_empty() {
        return format!("{NO_WAKE}\n");
    }
    let mut out = String::new();
    for l in lines.iter().take(max_new) {
        out.push_str(l);
        out.push('\n');
    }
    if lines.len() > max_new {
        out.push_str(&format!("… and {} more\n", lines.len() - max_new));
    }
    out
}
