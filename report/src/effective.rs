//! The effective Hermes config: defaults, then the user's `config.yaml`, then the managed
//! overlay, merged leaf by leaf (a list is one leaf), as Hermes' `load_config` builds it.
//!
//! Only the sections the report shows are seeded with Hermes' defaults (0.19:
//! `model: ""`, `agent.service_tier: ""`, `delegation.model/reasoning_effort: ""`,
//! `x_search.model: "grok-4.5"`, and `compression` as a section); merge behaviour for a key
//! depends only on whether the default at that key is a mapping, so the rest is not needed.
//! `${VAR}` references stay literal: the gate does not share the agent's environment.
//!
//! The three cron settings of Hermes 0.20.1 are shown as its scheduler reads them, not as
//! written: `cron.model_drift_guard` and `cron.preflight` are on unless the value is the
//! boolean `false` (a missing, malformed or non-boolean value keeps them on), and
//! `cron.script_timeout_seconds` is the whole seconds of a positive number (or numeric
//! string), else 3600. `HERMES_CRON_SCRIPT_TIMEOUT` in the agent's environment, which the
//! gate cannot see, would win over it. Hermes 0.19.0 has no drift guard and no preflight.

use std::path::Path;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value, json};

use super::jobs::truthy;
use super::yaml::{YamlError, parse_mapping};

/// The keys of `effective`, in report order.
pub const EFFECTIVE_KEYS: [&str; 11] = [
    "model.default",
    "model.provider",
    "agent.reasoning_effort",
    "agent.service_tier",
    "delegation.reasoning_effort",
    "delegation.model",
    "compression.threshold_tokens",
    "x_search.model",
    "cron.model_drift_guard",
    "cron.preflight",
    "cron.script_timeout_seconds",
];

/// Hermes' cron script timeout when none is configured (`_DEFAULT_SCRIPT_TIMEOUT`).
pub const DEFAULT_SCRIPT_TIMEOUT_SECONDS: i64 = 3600;

/// `effective` of the status report: the keys in order, null when unset (the cron settings
/// as Hermes reads them, never null).
#[derive(Clone, Debug, PartialEq)]
pub struct Effective(pub Vec<(&'static str, Value)>);

impl Serialize for Effective {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// The merged config tree and, when the user's `config.yaml` could not be used, why.
#[derive(Clone, Debug, Default)]
pub struct MergedConfig {
    /// Defaults + user config + managed overlay.
    pub tree: Map<String, Value>,
    /// Why the user config was ignored (Hermes then serves the defaults).
    pub user_error: Option<String>,
}

/// Build the merged config of `home` with the `managed` overlay.
pub fn merge_config(home: &Path, managed: &Map<String, Value>) -> MergedConfig {
    let mut merged = MergedConfig {
        tree: defaults(),
        user_error: None,
    };
    match read_user_config(home) {
        Ok(Some(user)) => {
            deep_merge(&mut merged.tree, &user);
            normalize_root_model_keys(&mut merged.tree);
        }
        Ok(None) => {}
        Err(err) => merged.user_error = Some(format!("config.yaml: {err}")),
    }
    deep_merge(&mut merged.tree, managed);
    merged
}

fn read_user_config(home: &Path) -> Result<Option<Map<String, Value>>, YamlError> {
    let bytes = match std::fs::read(home.join("config.yaml")) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(YamlError::Syntax(format!("unreadable: {err}"))),
    };
    match parse_mapping(&bytes) {
        Ok(map) => Ok(Some(map)),
        // `safe_load(f) or {}`: an empty document is an empty config, not an error.
        Err(YamlError::Empty) => Ok(None),
        Err(err) => Err(err),
    }
}

fn defaults() -> Map<String, Value> {
    let tree = json!({
        "model": "",
        "agent": {"service_tier": ""},
        "delegation": {"model": "", "provider": "", "reasoning_effort": ""},
        "compression": {"threshold": 0.5},
        "x_search": {"model": "grok-4.5", "reasoning_effort": null},
        "cron": {"model": "", "model_provider": ""},
    });
    match tree {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Hermes' `_deep_merge`: mapping over mapping recurses, null over a mapping is ignored,
/// anything else (scalar, list, mapping over a scalar) replaces.
pub fn deep_merge(base: &mut Map<String, Value>, over: &Map<String, Value>) {
    for (key, value) in over {
        match (base.get_mut(key), value) {
            (Some(Value::Object(inner)), Value::Object(over_inner)) => {
                deep_merge(inner, over_inner)
            }
            (Some(Value::Object(_)), Value::Null) => {}
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// Hermes' `_normalize_root_model_keys`: root `provider`/`base_url`/`context_length` move
/// under `model` when empty there, `api_base` aliases `base_url`, and `model.model` /
/// `model.name` become `model.default`.
pub fn normalize_root_model_keys(config: &mut Map<String, Value>) {
    let model_in = config.get("model");
    let model_dict = model_in.and_then(Value::as_object);
    let has_alias = model_dict
        .and_then(|m| m.get("api_base"))
        .is_some_and(truthy);
    let needs_canon = model_dict
        .is_some_and(|m| m.get("model").is_some_and(truthy) || m.get("name").is_some_and(truthy));
    let has_root = ["provider", "base_url", "context_length", "api_base"]
        .iter()
        .any(|k| config.get(*k).is_some_and(truthy));
    if !has_root && !has_alias && !needs_canon {
        return;
    }
    let mut model = match config.get("model") {
        Some(Value::Object(m)) => m.clone(),
        Some(v) if truthy(v) => Map::from_iter([("default".to_string(), v.clone())]),
        _ => Map::new(),
    };
    for key in ["provider", "base_url", "context_length"] {
        if let Some(root) = config.remove(key).filter(truthy)
            && !model.get(key).is_some_and(truthy)
        {
            model.insert(key.to_string(), root);
        }
    }
    let aliases = [config.remove("api_base"), model.remove("api_base")];
    for alias in aliases.into_iter().flatten().filter(truthy) {
        if !model.get("base_url").is_some_and(truthy) {
            model.insert("base_url".to_string(), alias);
        }
    }
    canonicalize_model_id(&mut model);
    config.insert("model".to_string(), Value::Object(model));
}

fn canonicalize_model_id(model: &mut Map<String, Value>) {
    let has_default = |m: &Map<String, Value>| m.get("default").is_some_and(truthy);
    if !has_default(model) {
        let alias = [model.get("model"), model.get("name")]
            .into_iter()
            .flatten()
            .find(|v| truthy(v))
            .cloned();
        if let Some(alias) = alias {
            model.insert("default".to_string(), alias);
        }
    }
    if has_default(model) {
        model.remove("model");
        model.remove("name");
    }
}

/// The effective keys of a merged tree. A root `model` that is a non-empty string is the
/// model id Hermes runs with, so it is shown as `model.default`; the cron settings are shown
/// as the scheduler reads them.
pub fn effective(tree: &Map<String, Value>) -> Effective {
    Effective(
        EFFECTIVE_KEYS
            .iter()
            .map(|key| {
                let value = lookup(tree, key);
                let read = match *key {
                    // `cron_config.get(key, True) is not False`
                    "cron.model_drift_guard" | "cron.preflight" => {
                        Value::Bool(value != Value::Bool(false))
                    }
                    "cron.script_timeout_seconds" => script_timeout_seconds(&value).into(),
                    _ => value,
                };
                (*key, read)
            })
            .collect(),
    )
}

/// Hermes' `_get_script_timeout` on a configured value: `int(float(value))` when that works
/// and is positive, else the default.
pub fn script_timeout_seconds(value: &Value) -> i64 {
    let seconds = match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().replace('_', "").parse::<f64>().ok(),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        _ => None,
    };
    match seconds {
        Some(s) if s.is_finite() && s.trunc() >= 1.0 && s.trunc() <= i64::MAX as f64 => {
            s.trunc() as i64
        }
        _ => DEFAULT_SCRIPT_TIMEOUT_SECONDS,
    }
}

/// A dotted key of a merged tree; null when a step is missing or not a mapping.
pub fn lookup(tree: &Map<String, Value>, dotted: &str) -> Value {
    if dotted == "model.default"
        && let Some(Value::String(model)) = tree.get("model")
    {
        return if model.is_empty() {
            Value::Null
        } else {
            Value::String(model.clone())
        };
    }
    let mut node = tree;
    let mut parts = dotted.split('.').peekable();
    while let Some(part) = parts.next() {
        match (node.get(part), parts.peek().is_some()) {
            (Some(Value::Object(inner)), true) => node = inner,
            (Some(value), false) => return value.clone(),
            _ => return Value::Null,
        }
    }
    Value::Null
}

#[cfg(test)]
mod tests;
