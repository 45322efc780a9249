//! Watches in the policy: the `watches:` list and `watch.pinnedServerUrl`, as written and as
//! validated.
//!
//! A watch names one read tool on a streamable-HTTP MCP server and the field that identifies
//! an item; the gate reports only ids it has not seen before. When an administrator pins the
//! server URL, every watch uses it and any other endpoint refuses the policy.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::FieldError;

/// Default number of item lines printed per run.
pub const DEFAULT_MAX_NEW: usize = 5;
/// Default bound on the ids stored per watch.
pub const DEFAULT_MAX_SEEN: usize = 1000;
/// Default MCP call timeout.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 60;

/// `watch:` as written.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawWatchSettings {
    /// The only MCP endpoint watches may call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinned_server_url: Option<String>,
}

/// One entry of `watches:` as written.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawWatch {
    /// Name; the route is `/v1/watch/<name>` and the state `<store.root>/watch/<name>.json`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Streamable-HTTP MCP endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_url: Option<String>,
    /// Tool to call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Tool arguments (a mapping).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<serde_json::Value>,
    /// Field that identifies an item.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id_field: Option<String>,
    /// Fields printed per new item.
    #[serde(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub show_fields: Vec<String>,
    /// Item lines per run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_new: Option<i64>,
    /// Bound on stored ids.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_seen: Option<i64>,
    /// HTTP headers; `${VAR}` and `${file:/path}` are expanded at call time.
    #[serde(default)]
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Call timeout in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i64>,
}

/// A validated watch.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchSpec {
    /// Name (`[a-z0-9][a-z0-9_-]*`, at most 63 characters).
    pub name: String,
    /// The endpoint: the watch's own, or the pinned one.
    pub server_url: url::Url,
    /// Tool to call.
    pub tool: String,
    /// Tool arguments. Default `{}`.
    pub arguments: serde_json::Map<String, serde_json::Value>,
    /// Field that identifies an item.
    pub id_field: String,
    /// Fields printed per new item: `a.b` follows a path, a bare name is searched in the item.
    pub show_fields: Vec<String>,
    /// Item lines per run, 1..=100. Default 5.
    pub max_new: usize,
    /// Bound on stored ids, 1..=100000. Default 1000.
    pub max_seen: usize,
    /// Header templates, expanded at call time.
    pub headers: Vec<(String, String)>,
    /// Call timeout, 1..=600 s. Default 60 s.
    pub timeout: Duration,
}

/// Validate `watch:` and `watches:`, pushing every problem into `errors`.
pub fn validate(
    settings: &RawWatchSettings,
    raw: &[RawWatch],
    errors: &mut Vec<FieldError>,
) -> Vec<WatchSpec> {
    let mut err = |field: String, message: String| errors.push(FieldError { field, message });
    let pinned = match settings.pinned_server_url.as_deref().map(parse_http_url) {
        None => None,
        Some(Ok(u)) => Some(u),
        Some(Err(m)) => {
            err("watch.pinnedServerUrl".into(), m);
            None
        }
    };
    let mut out: Vec<WatchSpec> = Vec::new();
    for (i, w) in raw.iter().enumerate() {
        let field = |f: &str| format!("watches[{i}].{f}");
        let name = w.name.clone().unwrap_or_default();
        if let Err(m) = check_name(&name) {
            err(field("name"), m);
        } else if out.iter().any(|o| o.name == name) {
            err(field("name"), format!("duplicate watch name '{name}'"));
        }
        let server_url = server_url(
            w.server_url.as_deref(),
            pinned.as_ref(),
            settings.pinned_server_url.is_some(),
            &field("serverUrl"),
            &mut err,
        );
        let tool = non_empty(&w.tool).ok_or_else(|| {
            err(field("tool"), "missing; name the read tool to call".into());
        });
        let id_field = non_empty(&w.id_field).ok_or_else(|| {
            err(
                field("idField"),
                "missing; name the field that identifies an item".into(),
            );
        });
        let arguments = arguments(w.arguments.as_ref(), &field("arguments"), &mut err);
        let mut bounded = |f: &str, v: Option<i64>, default: usize, max: usize| match v {
            None => default,
            Some(n) if n >= 1 && n as u64 <= max as u64 => n as usize,
            Some(n) => {
                err(
                    field(f),
                    format!("{n} is out of range; set 1..{max} (default {default})"),
                );
                default
            }
        };
        let max_new = bounded("maxNew", w.max_new, DEFAULT_MAX_NEW, 100);
        let max_seen = bounded("maxSeen", w.max_seen, DEFAULT_MAX_SEEN, 100_000);
        let timeout = bounded(
            "timeoutSeconds",
            w.timeout_seconds,
            DEFAULT_TIMEOUT_SECONDS as usize,
            600,
        );
        for (key, value) in &w.headers {
            if let Err(m) = check_header(key, value) {
                err(field(&format!("headers.{key}")), m);
            }
        }
        if let (Some(server_url), Ok(tool), Ok(id_field)) = (server_url, tool, id_field) {
            out.push(WatchSpec {
                name,
                server_url,
                tool,
                arguments,
                id_field,
                show_fields: w.show_fields.clone(),
                max_new,
                max_seen,
                headers: w.headers.clone().into_iter().collect(),
                timeout: Duration::from_secs(timeout as u64),
            });
        }
    }
    out
}

/// `watches[i].serverUrl`: the pinned endpoint when `watch.pinnedServerUrl` is set (another URL
/// is refused), else the watch's own; `None` after an error.
fn server_url(
    given: Option<&str>,
    pinned: Option<&url::Url>,
    pinned_set: bool,
    field: &str,
    err: &mut impl FnMut(String, String),
) -> Option<url::Url> {
    match (given, pinned) {
        (Some(s), Some(p)) => match parse_http_url(s) {
            Ok(u) if u == *p => Some(u),
            _ => {
                err(
                    field.to_string(),
                    format!(
                        "'{s}' is refused: watch.pinnedServerUrl pins the MCP endpoint to {p}; omit serverUrl"
                    ),
                );
                None
            }
        },
        (None, Some(p)) => Some(p.clone()),
        (Some(s), None) => parse_http_url(s)
            .map_err(|m| err(field.to_string(), m))
            .ok(),
        (None, None) if pinned_set => None,
        (None, None) => {
            err(
                field.to_string(),
                "missing; set the MCP endpoint, e.g. `http://mcp.tools.svc:8787/mcp`".into(),
            );
            None
        }
    }
}

/// `watches[i].arguments`: a mapping of tool arguments, empty when absent or after an error.
fn arguments(
    given: Option<&serde_json::Value>,
    field: &str,
    err: &mut impl FnMut(String, String),
) -> serde_json::Map<String, serde_json::Value> {
    match given {
        None => serde_json::Map::new(),
        Some(serde_json::Value::Object(m)) => m.clone(),
        Some(_) => {
            err(
                field.to_string(),
                "must be a mapping of tool arguments".into(),
            );
            serde_json::Map::new()
        }
    }
}

fn non_empty(v: &Option<String>) -> Option<String> {
    v.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn parse_http_url(s: &str) -> Result<url::Url, String> {
    match url::Url::parse(s.trim()) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(u),
        _ => Err(format!(
            "'{s}' is not an absolute http(s) URL; write e.g. `http://mcp.tools.svc:8787/mcp`"
        )),
    }
}

/// Check a watch name: it becomes a route segment and a file name.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "'{name}' is not a valid watch name; use lowercase letters, digits, '-' and '_' (at most 63, starting with a letter or digit)"
        ))
    }
}

fn check_header(key: &str, value: &str) -> Result<(), String> {
    if http::HeaderName::from_bytes(key.as_bytes()).is_err() {
        return Err(format!("'{key}' is not a valid HTTP header name"));
    }
    crate::header_template::check_template(value)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::Policy;

    fn fields(yaml: &str) -> Vec<String> {
        match Policy::parse(yaml.as_bytes(), Path::new("/")) {
            Ok(_) => Vec::new(),
            Err(e) => e.errors.into_iter().map(|e| e.field).collect(),
        }
    }

    #[test]
    fn watch_fields_are_checked_and_each_problem_names_its_field() {
        let w = "version: v1\nwatches:\n  - ";
        let cases: &[(&str, String, &[&str])] = &[
            ("a complete watch", format!("{w}{{name: a, serverUrl: 'http://m:1/mcp', tool: t, idField: id}}"), &[]),
            ("missing endpoint, tool and id", format!("{w}{{name: a}}"), &["watches[0].serverUrl", "watches[0].tool", "watches[0].idField"]),
            ("bad name", format!("{w}{{name: 'A b', serverUrl: 'http://m/mcp', tool: t, idField: id}}"), &["watches[0].name"]),
            ("not http", format!("{w}{{name: a, serverUrl: 'ftp://m/x', tool: t, idField: id}}"), &["watches[0].serverUrl"]),
            ("maxNew out of range", format!("{w}{{name: a, serverUrl: 'http://m/mcp', tool: t, idField: id, maxNew: 0}}"), &["watches[0].maxNew"]),
            ("arguments not a mapping", format!("{w}{{name: a, serverUrl: 'http://m/mcp', tool: t, idField: id, arguments: [1]}}"), &["watches[0].arguments"]),
            ("bad header template", format!("{w}{{name: a, serverUrl: 'http://m/mcp', tool: t, idField: id, headers: {{X-K: '${{oops'}}}}"), &["watches[0].headers.X-K"]),
            (
                "another endpoint than the pinned one",
                "version: v1\nwatch: {pinnedServerUrl: 'http://m/mcp'}\nwatches:\n  - {name: a, serverUrl: 'http://n/mcp', tool: t, idField: id}".to_string(),
                &["watches[0].serverUrl"],
            ),
            (
                "the pinned endpoint fills an omitted one",
                "version: v1\nwatch: {pinnedServerUrl: 'http://m/mcp'}\nwatches:\n  - {name: a, tool: t, idField: id}".to_string(),
                &[],
            ),
            (
                "duplicate names",
                format!("{w}{{name: a, serverUrl: 'http://m/mcp', tool: t, idField: id}}\n  - {{name: a, serverUrl: 'http://m/mcp', tool: t, idField: id}}"),
                &["watches[1].name"],
            ),
        ];
        for (name, yaml, want) in cases {
            assert_eq!(fields(yaml), *want, "{name}: the refused fields must match");
        }
    }
}
