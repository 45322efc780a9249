//! A table of invalid objects generated from a CRD's own schema: for every enum, pattern,
//! bound (minimum, maximum, length, item and property counts) under `spec`, one object that
//! breaks exactly that rule, with the field path the API server's refusal must name and the
//! words it uses for that kind of rule.

use serde_json::{Map, Value, json};

/// One invalid object and what its refusal must say.
#[derive(Debug, Clone)]
pub struct Violation {
    /// Which rule it breaks, e.g. `enum`, `pattern ^[a-z]+$`, `maximum 30`.
    pub rule: String,
    /// The field path as the API server prints it (`spec.web.charLimit`, `spec.x[0]`).
    pub field: String,
    /// The object's `spec`.
    pub spec: Value,
    /// Words the refusal must contain besides the field path.
    pub expect: String,
}

/// One step of a field path.
#[derive(Debug, Clone)]
enum Seg {
    Key(String),
    Index,
}

/// Every violation under `spec` of an `openAPIV3Schema`, starting from `base` (the smallest
/// valid spec); also how many rules were found that no generated value can break (patterns
/// every candidate matches), so the caller can report them.
pub fn violations(schema: &Value, base: &Value) -> (Vec<Violation>, Vec<String>) {
    let mut out = Vec::new();
    let mut unbroken = Vec::new();
    let spec = &schema["properties"]["spec"];
    walk(
        spec,
        &mut vec![Seg::Key("spec".into())],
        base,
        &mut out,
        &mut unbroken,
    );
    (out, unbroken)
}

fn walk(
    schema: &Value,
    path: &mut Vec<Seg>,
    base: &Value,
    out: &mut Vec<Violation>,
    unbroken: &mut Vec<String>,
) {
    let mut add = |rule: String, value: Value, expect: String| {
        out.push(Violation {
            rule,
            field: render(path),
            spec: place(base, &path[1..], value),
            expect,
        });
    };
    if let Some(members) = schema["enum"].as_array()
        && members.iter().all(Value::is_string)
    {
        add(
            "enum".into(),
            json!("not-a-member-of-the-enum"),
            "Unsupported value".into(),
        );
    }
    if let Some(pattern) = schema["pattern"].as_str() {
        match breaking_string(pattern, schema) {
            Some(s) => add(
                format!("pattern {pattern}"),
                json!(s),
                "should match".into(),
            ),
            None => unbroken.push(format!("{} pattern {pattern}", render(path))),
        }
    }
    if let Some(max) = schema["maxLength"].as_u64() {
        add(
            format!("maxLength {max}"),
            json!("a".repeat(usize::try_from(max + 1).unwrap_or(1))),
            "Too long".into(),
        );
    }
    if let Some(min) = schema["minLength"].as_u64().filter(|m| *m > 0) {
        add(format!("minLength {min}"), json!(""), "at least".into());
    }
    if let Some(min) = schema["minimum"].as_f64() {
        let exclusive = schema["exclusiveMinimum"].as_bool() == Some(true);
        let value = if exclusive { min } else { min - 1.0 };
        add(
            format!("minimum {min}"),
            number(schema, value),
            "should be greater than".into(),
        );
    }
    if let Some(max) = schema["maximum"].as_f64() {
        let exclusive = schema["exclusiveMaximum"].as_bool() == Some(true);
        let value = if exclusive { max } else { max + 1.0 };
        add(
            format!("maximum {max}"),
            number(schema, value),
            "should be less than".into(),
        );
    }
    if let Some(max) = schema["maxItems"].as_u64() {
        let items: Vec<Value> = (0..=max).map(|i| sample(&schema["items"], i)).collect();
        add(
            format!("maxItems {max}"),
            Value::Array(items),
            "Too many".into(),
        );
    }
    if let Some(min) = schema["minItems"].as_u64().filter(|m| *m > 0) {
        add(format!("minItems {min}"), json!([]), "at least".into());
    }
    if let Some(max) = schema["maxProperties"].as_u64() {
        let map: Map<String, Value> = (0..=max)
            .map(|i| (format!("k{i}"), sample(&schema["additionalProperties"], i)))
            .collect();
        add(
            format!("maxProperties {max}"),
            Value::Object(map),
            "Too many".into(),
        );
    }
    if let Some(props) = schema["properties"].as_object() {
        for (name, child) in props {
            path.push(Seg::Key(name.clone()));
            walk(child, path, base, out, unbroken);
            path.pop();
        }
    }
    if schema["items"].is_object() {
        path.push(Seg::Index);
        walk(&schema["items"], path, base, out, unbroken);
        path.pop();
    }
    if schema["additionalProperties"].is_object() {
        path.push(Seg::Key("k0".into()));
        walk(&schema["additionalProperties"], path, base, out, unbroken);
        path.pop();
    }
}

/// An integer schema gets an integer.
fn number(schema: &Value, value: f64) -> Value {
    if schema["type"] == "integer" {
        #[allow(clippy::cast_possible_truncation, reason = "schema bounds are small")]
        let n = value as i64;
        json!(n)
    } else {
        json!(value)
    }
}

/// A plausible value of `schema`, different for each `i` (list items, map values).
fn sample(schema: &Value, i: u64) -> Value {
    match schema["type"].as_str() {
        Some("integer") => json!(schema["minimum"].as_i64().unwrap_or(0)),
        Some("number") => json!(schema["minimum"].as_f64().unwrap_or(0.0)),
        Some("boolean") => json!(true),
        Some("object") => json!({}),
        Some("array") => json!([]),
        _ => match schema["enum"].as_array().and_then(|m| m.first()) {
            Some(first) => first.clone(),
            None => json!(format!("a{i}")),
        },
    }
}

/// A string the pattern does not match but whose length the schema allows (so the refusal is
/// the pattern's), from a few shapes no field of ours accepts.
fn breaking_string(pattern: &str, schema: &Value) -> Option<String> {
    let re = regex::Regex::new(pattern).ok()?;
    let min = schema["minLength"].as_u64().unwrap_or(0);
    let max = schema["maxLength"].as_u64().unwrap_or(u64::MAX);
    [
        "Not Valid!",
        "!",
        " ",
        "-",
        "UPPER",
        "a..b",
        "999999999999",
        "x/y\\z",
        "a b",
        "",
    ]
    .iter()
    .find(|c| {
        let len = u64::try_from(c.len()).unwrap_or(u64::MAX);
        !re.is_match(c) && (min..=max).contains(&len)
    })
    .map(|c| (*c).to_string())
}

/// `spec.a.b[0].c`, the API server's rendering.
fn render(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Index => s.push_str("[0]"),
        }
    }
    s
}

/// `base` with `value` at `path` (relative to `spec`), parents created as needed.
fn place(base: &Value, path: &[Seg], value: Value) -> Value {
    let mut root = base.clone();
    set(&mut root, path, value);
    root
}

fn set(node: &mut Value, path: &[Seg], value: Value) {
    let Some((first, rest)) = path.split_first() else {
        *node = value;
        return;
    };
    match first {
        Seg::Key(k) => {
            if !node.is_object() {
                *node = json!({});
            }
            if let Some(map) = node.as_object_mut() {
                let child = map.entry(k.clone()).or_insert(Value::Null);
                set(child, rest, value);
            }
        }
        Seg::Index => {
            let mut item = Value::Null;
            set(&mut item, rest, value);
            *node = json!([item]);
        }
    }
}
