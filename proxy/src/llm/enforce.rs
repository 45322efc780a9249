//! The managed scope applied on the wire: a model outside `llm.allowedModels` is refused, and
//! a role's pinned effort and service tier are written onto the request where that
//! provider's wire shape keeps them. In observe mode nothing changes; the same decisions are
//! returned so they can be logged and counted as "would".

use super::request_facts::{THINKING_BUDGETS, effort_of, shown};
use super::scan::{Member, ObjectScan, Rewriter, Splice, json_string};
use crate::policy::llm::{LlmPin, LlmPolicy, ProviderKind};

/// One field written onto a request.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) struct Rewrite {
    /// `reasoning_effort` or `service_tier`.
    pub(crate) field: &'static str,
    /// The value the agent sent, as shown ([`shown`]); `None` when absent.
    pub(crate) from: Option<String>,
    /// The pinned value written.
    pub(crate) to: String,
}

// === impl Rewrite ===

impl Rewrite {
    /// `field: from -> to`, for logs and the report.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{}: {} -> {}",
            self.field,
            self.from.as_deref().unwrap_or("unset"),
            self.to
        )
    }
}

/// Whether the request's model is refused, and the message a provider-shaped error carries.
pub(crate) fn model_refusal(policy: &LlmPolicy, model: Option<&str>) -> Option<String> {
    let model = model?;
    if policy.model_allowed(model) {
        return None;
    }
    let name = policy
        .policy_name
        .as_deref()
        .map(|n| format!("fleet policy '{n}'"))
        .unwrap_or_else(|| "the fleet policy".into());
    Some(format!(
        "fleetgate: model '{}' is not allowed by {name} (llm.allowedModels: {})",
        shown(model),
        policy.allowed_models.join(", ")
    ))
}

/// Edits of one object of the body: members set to a JSON text, removed, or edited inside.
#[derive(Debug, Default)]
pub(crate) struct Edits {
    entries: Vec<Entry>,
}

/// The edit of one member: as a whole (which wins), else inside it.
#[derive(Debug)]
struct Entry {
    key: &'static str,
    whole: Option<Whole>,
    inner: Edits,
}

#[derive(Debug)]
enum Whole {
    Set(String),
    Remove,
}

// === impl Edits ===

impl Edits {
    /// Whether nothing is edited.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Set member `key` to the JSON text `value` (replaced in place, else added at the end).
    fn set(&mut self, key: &'static str, value: String) {
        self.entry(key).whole = Some(Whole::Set(value));
    }

    fn set_str(&mut self, key: &'static str, value: &str) {
        self.set(key, json_string(value));
    }

    /// Remove member `key`.
    fn remove(&mut self, key: &'static str) {
        self.entry(key).whole = Some(Whole::Remove);
    }

    /// The edits inside the object member `key` holds.
    fn within(&mut self, key: &'static str) -> &mut Edits {
        &mut self.entry(key).inner
    }

    fn entry(&mut self, key: &'static str) -> &mut Entry {
        let i = match self.entries.iter().position(|e| e.key == key) {
            Some(i) => i,
            None => {
                self.entries.push(Entry {
                    key,
                    whole: None,
                    inner: Edits::default(),
                });
                self.entries.len() - 1
            }
        };
        &mut self.entries[i]
    }

    /// The splices that make these edits on the object `scan` of `body`.
    pub(crate) fn splices(&self, body: &str, scan: &ObjectScan<'_>, out: &mut Vec<Splice>) {
        let mut remaining = scan.count;
        let mut added = Vec::new();
        for entry in &self.entries {
            let member = scan.get(entry.key);
            match (&entry.whole, member) {
                (Some(Whole::Set(value)), Some(m)) => out.push(Splice {
                    range: m.start..m.start + m.raw.len(),
                    text: value.clone(),
                }),
                (Some(Whole::Set(value)), None) => {
                    added.push(format!("{}:{value}", json_string(entry.key)));
                }
                (Some(Whole::Remove), Some(m)) => {
                    out.push(Splice {
                        range: m.lead..removal_end(body, m),
                        text: String::new(),
                    });
                    remaining -= 1;
                }
                (None, Some(m)) => {
                    if let Some(object) = &m.object {
                        entry.inner.splices(body, object, out);
                    }
                }
                (Some(Whole::Remove) | None, None) => {}
            }
        }
        for member in added {
            let comma = if remaining > 0 { "," } else { "" };
            out.push(Splice {
                range: scan.close..scan.close,
                text: format!("{comma}{member}"),
            });
            remaining += 1;
        }
    }
}

/// Where removing `m` ends: its value's end, and for the first member also the comma after.
fn removal_end(body: &str, m: &Member<'_>) -> usize {
    let end = m.start + m.raw.len();
    if !m.first {
        return end;
    }
    let rest = body.as_bytes().get(end..).unwrap_or_default();
    match rest
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    {
        Some(i) if rest[i] == b',' => end + i + 1,
        _ => end,
    }
}

/// The rewrites `pin` asks for on the completion request `body`; with `edits`, the edits that
/// make them are recorded there.
pub(crate) fn pin_rewrites(
    pin: &LlmPin,
    kind: ProviderKind,
    path: &str,
    body: &ObjectScan<'_>,
    mut edits: Option<&mut Edits>,
) -> Vec<Rewrite> {
    let mut out = Vec::new();
    if let Some(want) = &pin.effort {
        let have = effort_of(body);
        if !same_effort(have.as_deref(), want) {
            if let Some(edits) = edits.as_deref_mut() {
                write_effort(body, edits, kind, path, want);
            }
            out.push(Rewrite {
                field: "reasoning_effort",
                from: have.as_deref().map(shown),
                to: want.clone(),
            });
        }
    }
    if let Some(want) = &pin.service_tier {
        let have = body.str_at(&["service_tier"]);
        if have.as_deref() != Some(want.as_str()) {
            if let Some(edits) = edits {
                edits.set_str("service_tier", want);
            }
            out.push(Rewrite {
                field: "service_tier",
                from: have.as_deref().map(shown),
                to: want.clone(),
            });
        }
    }
    out
}

/// The rewrites `pin` asks for on the completion request `text` (scanned as `scan`), and the
/// rewritten body when there is any: the members the pin writes change, every other byte
/// stays as sent.
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) fn rewrite(
    pin: &LlmPin,
    kind: ProviderKind,
    path: &str,
    text: &str,
    scan: &ObjectScan<'_>,
) -> (Vec<Rewrite>, Option<String>) {
    let mut edits = Edits::default();
    let rewrites = pin_rewrites(pin, kind, path, scan, Some(&mut edits));
    if edits.is_empty() {
        return (rewrites, None);
    }
    let mut splices = Vec::new();
    edits.splices(text, scan, &mut splices);
    let mut body = Rewriter::new(text);
    body.apply(splices);
    (rewrites, Some(body.finish()))
}

/// Whether the effort on the wire already is `want` (a thinking budget counts as its level).
fn same_effort(have: Option<&str>, want: &str) -> bool {
    let Some(have) = have else {
        return false;
    };
    have == want
        || THINKING_BUDGETS
            .iter()
            .any(|(level, budget)| *level == want && have == format!("budget:{budget}"))
}

/// Write `effort` into every place the body already keeps one; when it keeps none, into the
/// place the provider kind reads.
fn write_effort(
    body: &ObjectScan<'_>,
    edits: &mut Edits,
    kind: ProviderKind,
    path: &str,
    effort: &str,
) {
    let mut wrote = false;
    if body.has("reasoning_effort") {
        edits.set_str("reasoning_effort", effort);
        wrote = true;
    }
    if let Some(r) = body.object("reasoning") {
        set_reasoning(r, edits.within("reasoning"), effort);
        wrote = true;
    }
    if let Some(r) = body
        .object("extra_body")
        .and_then(|e| e.object("reasoning"))
    {
        set_reasoning(r, edits.within("extra_body").within("reasoning"), effort);
        wrote = true;
    }
    if body.object("output_config").is_some() {
        edits.within("output_config").set_str("effort", effort);
        wrote = true;
    }
    if body.has("thinking") {
        write_thinking(body, edits, effort);
        wrote = true;
    }
    if wrote {
        return;
    }
    let object = |effort: &str| format!("{{\"effort\":{}}}", json_string(effort));
    match kind {
        ProviderKind::Anthropic if effort == "none" => write_thinking(body, edits, effort),
        ProviderKind::Anthropic => edits.set("output_config", object(effort)),
        ProviderKind::OpenRouter => edits.set("reasoning", object(effort)),
        ProviderKind::OpenAi if path.trim_end_matches('/').ends_with("/responses") => {
            edits.set("reasoning", object(effort));
        }
        ProviderKind::OpenAi | ProviderKind::Xai => edits.set_str("reasoning_effort", effort),
    }
}

fn set_reasoning(r: &ObjectScan<'_>, edits: &mut Edits, effort: &str) {
    if effort == "none" && r.has("enabled") {
        edits.set("enabled", "false".into());
        edits.remove("effort");
        return;
    }
    if r.has("enabled") {
        edits.set("enabled", "true".into());
    }
    edits.set_str("effort", effort);
}

/// Anthropic thinking: a budget for the levels that have one, adaptive + `output_config`
/// for the others, disabled for `none`.
fn write_thinking(body: &ObjectScan<'_>, edits: &mut Edits, effort: &str) {
    if effort == "none" {
        edits.set("thinking", r#"{"type":"disabled"}"#.into());
        edits.remove("output_config");
        return;
    }
    match THINKING_BUDGETS.iter().find(|(level, _)| *level == effort) {
        Some((_, budget)) if !body.has("output_config") => edits.set(
            "thinking",
            format!(r#"{{"type":"enabled","budget_tokens":{budget}}}"#),
        ),
        _ => {
            edits.set("thinking", r#"{"type":"adaptive"}"#.into());
            edits.set(
                "output_config",
                format!("{{\"effort\":{}}}", json_string(effort)),
            );
        }
    }
}

#[cfg(test)]
mod tests;
