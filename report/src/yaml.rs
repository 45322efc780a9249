//! Hermes config files (`config.yaml`) parsed into JSON values, with the failure modes named.
//!
//! Like Hermes' `yaml.safe_load(...) or {}`: a UTF-8 BOM is skipped, merge keys (`<<`) are
//! applied, and an empty document (empty file, only comments, `null`) means "no settings".
//! Known difference: YAML 1.1 booleans such as `yes`/`on` stay strings here.

use serde_json::{Map, Number, Value};

/// Why a config file gives no mapping.
#[derive(Debug, thiserror::Error)]
pub enum YamlError {
    /// The bytes are not UTF-8.
    #[error("not_utf8: {0}")]
    NotUtf8(#[from] std::str::Utf8Error),
    /// Empty file, only comments, or `null`.
    #[error("empty: the file holds no settings")]
    Empty,
    /// A YAML syntax or structure error.
    #[error("yaml_error: {0}")]
    Syntax(String),
    /// The top level is not a mapping.
    #[error("not_a_mapping: the top level is a {0}")]
    NotMapping(&'static str),
}

/// Parse `bytes` as a YAML document whose top level must be a mapping.
pub fn parse_mapping(bytes: &[u8]) -> Result<Map<String, Value>, YamlError> {
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let text = std::str::from_utf8(bytes)?;
    let mut value: serde_yaml::Value =
        serde_yaml::from_str(text).map_err(|err| YamlError::Syntax(err.to_string()))?;
    value
        .apply_merge()
        .map_err(|err| YamlError::Syntax(err.to_string()))?;
    match to_json(value)? {
        Value::Object(map) => Ok(map),
        Value::Null => Err(YamlError::Empty),
        Value::Array(_) => Err(YamlError::NotMapping("list")),
        Value::String(_) => Err(YamlError::NotMapping("string")),
        Value::Bool(_) => Err(YamlError::NotMapping("boolean")),
        Value::Number(_) => Err(YamlError::NotMapping("number")),
    }
}

/// Convert a YAML value to JSON; mapping keys become strings the way Python's `str()` would.
fn to_json(value: serde_yaml::Value) -> Result<Value, YamlError> {
    Ok(match value {
        serde_yaml::Value::Null => Value::Null,
        serde_yaml::Value::Bool(b) => Value::Bool(b),
        serde_yaml::Value::Number(n) => number(&n),
        serde_yaml::Value::String(s) => Value::String(s),
        serde_yaml::Value::Sequence(items) => {
            Value::Array(items.into_iter().map(to_json).collect::<Result<_, _>>()?)
        }
        serde_yaml::Value::Mapping(mapping) => {
            let mut map = Map::new();
            for (key, value) in mapping {
                map.insert(key_text(&key)?, to_json(value)?);
            }
            Value::Object(map)
        }
        // safe_load refuses application tags; so does the report.
        serde_yaml::Value::Tagged(tagged) => {
            return Err(YamlError::Syntax(format!("unsupported tag {}", tagged.tag)));
        }
    })
}

fn number(n: &serde_yaml::Number) -> Value {
    if let Some(i) = n.as_i64() {
        Value::Number(i.into())
    } else if let Some(u) = n.as_u64() {
        Value::Number(u.into())
    } else {
        n.as_f64()
            .and_then(Number::from_f64)
            .map_or(Value::Null, Value::Number)
    }
}

fn key_text(key: &serde_yaml::Value) -> Result<String, YamlError> {
    Ok(match key {
        serde_yaml::Value::String(s) => s.clone(),
        serde_yaml::Value::Bool(b) => if *b { "True" } else { "False" }.to_string(),
        serde_yaml::Value::Null => "None".to_string(),
        serde_yaml::Value::Number(n) => n.to_string(),
        _ => {
            return Err(YamlError::Syntax(
                "a mapping key is not a scalar".to_string(),
            ));
        }
    })
}
