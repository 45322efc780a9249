//! The keys a managed Hermes `config.yaml` pins: every dotted leaf path of its mapping. The
//! gate counts them in its report; the controller counts what it renders.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// The dotted leaf keys a mapping pins: recursion only into non-empty mappings, so an empty
/// mapping, a list, a scalar and null each count as one leaf.
pub fn pinned_keys(config: &Map<String, Value>) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    flatten(config, "", &mut keys);
    keys
}

fn flatten(map: &Map<String, Value>, prefix: &str, keys: &mut BTreeSet<String>) {
    for (key, value) in map {
        let dotted = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            Value::Object(inner) if !inner.is_empty() => flatten(inner, &dotted, keys),
            _ => {
                keys.insert(dotted);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pinned_keys_recurse_only_into_non_empty_mappings() {
        let config = json!({"a": {"b": {"c": 1}, "d": []}, "e": {}, "f": {"g": null}});
        let Value::Object(map) = config else {
            unreachable!("the literal is an object")
        };
        let keys: Vec<String> = pinned_keys(&map).into_iter().collect();
        assert_eq!(
            keys,
            ["a.b.c", "a.d", "e", "f.g"],
            "leaves must be dotted paths"
        );
    }
}
