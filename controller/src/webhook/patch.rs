//! JSON patch (RFC 6902) operations as the injector emits them, and the helpers that add to
//! arrays and maps which may be absent from the pod.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One JSON patch operation (`add` or `replace`; the injector never removes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PatchOp {
    /// `add` or `replace`.
    pub op: String,
    /// JSON pointer into the pod.
    pub path: String,
    /// The value written there.
    pub value: Value,
}

/// The operations of one patch, in order.
#[derive(Debug, Default)]
pub struct Ops(pub Vec<PatchOp>);

impl Ops {
    /// `add` `value` at `path`.
    pub fn add(&mut self, path: impl Into<String>, value: Value) {
        self.0.push(PatchOp {
            op: "add".into(),
            path: path.into(),
            value,
        });
    }

    /// `replace` the value at `path`.
    pub fn replace(&mut self, path: impl Into<String>, value: Value) {
        self.0.push(PatchOp {
            op: "replace".into(),
            path: path.into(),
            value,
        });
    }

    /// Append `items` to the array at `path`; an absent array is created whole by one `add`.
    pub fn append(&mut self, path: &str, present: bool, items: Vec<Value>) {
        if items.is_empty() {
            return;
        }
        if present {
            for item in items {
                self.add(format!("{path}/-"), item);
            }
        } else {
            self.add(path, Value::Array(items));
        }
    }

    /// Insert `item` first in the list at `path` (`/0`); an absent list is created holding it.
    pub fn prepend(&mut self, path: &str, present: bool, item: Value) {
        if present {
            self.add(format!("{path}/0"), item);
        } else {
            self.add(path, Value::Array(vec![item]));
        }
    }

    /// Set `entries` in the string map at `path`; an absent map is created whole by one `add`.
    pub fn set_entries(&mut self, path: &str, present: bool, entries: &[(&str, &str)]) {
        if present {
            for (k, v) in entries {
                self.add(format!("{path}/{}", escape(k)), Value::String((*v).into()));
            }
        } else {
            let map = entries
                .iter()
                .map(|(k, v)| ((*k).to_string(), Value::String((*v).to_string())))
                .collect();
            self.add(path, Value::Object(map));
        }
    }
}

/// A JSON pointer reference token for `key` (`~` → `~0`, `/` → `~1`).
pub fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}
