//! The cron job store (`cron/jobs.json`), read the way Hermes' `list_jobs` reads it.
//!
//! Accepted shapes: `{"jobs": [...]}` (canonical), a bare list, and `{"jobs": {id: job}}` (an
//! id-keyed map, the inline `id` winning over the key). A UTF-8 BOM is skipped and raw
//! control characters inside strings are tolerated, as Hermes' lenient retry does. Any other
//! top-level shape is corruption and yields an error, never a panic. Records are normalised
//! for reading (`id`, `name`, `schedule_display`, pause state) without touching the file.

use std::path::Path;

use serde::Serialize;
use serde_json::{Map, Value};

use super::time::parse_iso;

/// What can keep a job's agent asleep on a fire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Gate {
    /// Script-only job: there is no agent at all.
    NoAgent,
    /// `monitor_script` / `monitor_url`: the agent runs only when the source changed.
    Monitor,
    /// A pre-run script, which gates only when it prints `{"wakeAgent": false}`.
    Script,
}

/// One cron job, normalised for reading.
#[derive(Clone, Debug, PartialEq)]
pub struct CronJob {
    /// Job id (`uuid4().hex[:12]` for jobs Hermes created).
    pub id: String,
    /// Display name (falls back to the prompt, first skill, script or id like Hermes).
    pub name: String,
    /// Enabled and not paused.
    pub enabled: bool,
    /// Human schedule (`every 15m`, a cron expression, a run-at time).
    pub schedule: String,
    /// Per-job provider pin.
    pub provider: Option<String>,
    /// Per-job model pin.
    pub model: Option<String>,
    /// Model captured at creation for an unpinned job.
    pub model_snapshot: Option<String>,
    /// Per-job reasoning effort pin (present only when set).
    pub reasoning_effort: Option<String>,
    /// Outcome of the last run (`ok`, `error`, ...).
    pub last_status: Option<String>,
    /// Consecutive agent failures.
    pub failure_streak: i64,
    /// Job state (`scheduled`, `paused`, `completed`, `error`).
    pub state: String,
    /// Creation time, Unix seconds.
    pub created_at: Option<f64>,
    /// What can keep the agent asleep.
    pub gate: Option<Gate>,
}

/// Why the job store could not be read.
#[derive(Debug, thiserror::Error)]
pub enum JobsError {
    /// The file exists but could not be read.
    #[error("failed to read cron/jobs.json: {0}")]
    Io(#[from] std::io::Error),
    /// The file is not JSON even with the lenient retry.
    #[error("failed to parse cron/jobs.json: {0}")]
    Json(#[from] serde_json::Error),
    /// The JSON has a top-level shape Hermes treats as corruption.
    #[error("failed to read cron/jobs.json: expected {{\"jobs\": [...]}}, got {0}")]
    Shape(&'static str),
}

/// Read `cron/jobs.json` under `home`; a missing file means no jobs.
pub fn load_jobs(home: &Path) -> Result<Vec<CronJob>, JobsError> {
    let path = home.join("cron").join("jobs.json");
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err.into()),
    };
    let text = String::from_utf8_lossy(&bytes);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let data: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(_) => serde_json::from_str(&escape_control_chars(text))?,
    };
    Ok(records(data)?.iter().map(normalize).collect())
}

fn records(data: Value) -> Result<Vec<Map<String, Value>>, JobsError> {
    let list = match data {
        Value::Object(mut top) => match top.remove("jobs") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(list)) => list,
            Some(Value::Object(by_id)) => flatten_id_map(by_id),
            Some(other) => return Err(JobsError::Shape(type_name(&other))),
        },
        Value::Array(list) => list,
        other => return Err(JobsError::Shape(type_name(&other))),
    };
    Ok(list
        .into_iter()
        .filter_map(|job| match job {
            Value::Object(map) => Some(map),
            _ => None,
        })
        .collect())
}

fn flatten_id_map(by_id: Map<String, Value>) -> Vec<Value> {
    by_id
        .into_iter()
        .filter_map(|(key, job)| match job {
            Value::Object(mut map) => {
                map.entry("id").or_insert(Value::String(key));
                Some(Value::Object(map))
            }
            _ => None,
        })
        .collect()
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

fn normalize(job: &Map<String, Value>) -> CronJob {
    let id = text(job.get("id"))
        .or_else(|| text(job.get("job_id")))
        .unwrap_or_else(|| "unknown".to_string());
    let enabled_flag = job.get("enabled").is_none_or(truthy);
    let state = text(job.get("state"))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| if enabled_flag { "scheduled" } else { "paused" }.to_string());
    let paused = state == "paused" || job.get("paused_at").is_some_and(truthy);
    CronJob {
        name: display_name(job, &id),
        enabled: enabled_flag && !paused,
        schedule: schedule_display(job),
        provider: text(job.get("provider")),
        model: text(job.get("model")),
        model_snapshot: text(job.get("model_snapshot")),
        reasoning_effort: text(job.get("reasoning_effort")),
        last_status: text(job.get("last_status")),
        failure_streak: job
            .get("failure_streak")
            .and_then(Value::as_i64)
            .unwrap_or(0),
        state,
        created_at: job
            .get("created_at")
            .and_then(Value::as_str)
            .and_then(parse_iso),
        gate: gate(job),
        id,
    }
}

fn gate(job: &Map<String, Value>) -> Option<Gate> {
    let set = |key: &str| job.get(key).is_some_and(truthy);
    if set("no_agent") {
        Some(Gate::NoAgent)
    } else if set("monitor_script") || set("monitor_url") {
        Some(Gate::Monitor)
    } else if set("script") {
        Some(Gate::Script)
    } else {
        None
    }
}

fn display_name(job: &Map<String, Value>, id: &str) -> String {
    let name = text(job.get("name")).unwrap_or_default();
    if !name.trim().is_empty() {
        return name.trim().to_string();
    }
    let prompt = text(job.get("prompt")).unwrap_or_default();
    let first_skill = match job.get("skills") {
        Some(Value::Array(skills)) => skills.first().and_then(|s| text(Some(s))),
        _ => None,
    }
    .or_else(|| text(job.get("skill")));
    let script = text(job.get("script")).unwrap_or_default();
    let label = [
        Some(prompt),
        first_skill,
        Some(script.trim().to_string()),
        Some(id.into()),
    ]
    .into_iter()
    .flatten()
    .find(|s| !s.is_empty())
    .unwrap_or_else(|| "cron job".to_string());
    let short: String = label.chars().take(50).collect();
    let short = short.trim();
    if short.is_empty() {
        "cron job".to_string()
    } else {
        short.to_string()
    }
}

fn schedule_display(job: &Map<String, Value>) -> String {
    if let Some(display) = text(job.get("schedule_display")).filter(|s| !s.trim().is_empty()) {
        return display.trim().to_string();
    }
    match job.get("schedule") {
        Some(Value::Object(schedule)) => ["display", "value", "expr", "run_at"]
            .iter()
            .filter_map(|key| text(schedule.get(*key)))
            .map(|s| s.trim().to_string())
            .find(|s| !s.is_empty())
            .unwrap_or_else(|| "?".to_string()),
        Some(Value::Null) | None => "?".to_string(),
        Some(other) => text(Some(other)).unwrap_or_else(|| "?".to_string()),
    }
}

/// A JSON value as Python's `str()` of it would read for scalars; `None` for null/absent.
fn text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(if *b { "True" } else { "False" }.to_string()),
        other => Some(other.to_string()),
    }
}

/// Python truthiness of a JSON value.
pub fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Escape raw control characters inside JSON strings (what `json.loads(strict=False)` allows).
fn escape_control_chars(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string && !escaped && (c as u32) < 0x20 {
            out.push_str(&format!("\\u{:04x}", c as u32));
            continue;
        }
        match c {
            '"' if !escaped => in_string = !in_string,
            _ => {}
        }
        escaped = in_string && !escaped && c == '\\';
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests;
