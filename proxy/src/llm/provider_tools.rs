//! Provider-side tools: tools a request asks the provider to run itself — a web search, a
//! page fetch, code execution, a remote MCP server. They fetch at the provider, where no
//! fleetgate gate sees what is fetched, so the route judges them per role
//! (`llm.providerTools`: `allow`, `observe`, `refuse`).
//!
//! Read from a completion request:
//!
//! - every `tools[]` entry whose `type` is not a tool the client runs: OpenAI's built-in
//!   `web_search` / `web_search_preview` / `file_search` / `code_interpreter` / `mcp` /
//!   `image_generation`, xAI's `x_search` and `web_search`, Anthropic's server tools
//!   (`web_search_20250305`, `web_fetch_20250910`, `code_execution_…`), and any type the gate
//!   does not know (fail closed). Client tools are `function`, `custom`, an entry without a
//!   `type` (Anthropic's own tools), and the tools whose calls the client executes (`computer…`,
//!   `bash_…`, `text_editor_…`, `memory_…`, `local_shell`, `shell`, `apply_patch`);
//! - OpenAI chat's `web_search_options` (the search models), xAI's `search_parameters` (Live
//!   Search, unless `mode` is `off`), OpenRouter's `web` plugin and its `:online` model suffix.
//!
//! Each is counted under a bounded label (the type without its date suffix when known, else
//! `other`); the name as sent is shown in logs and refusals only after [`shown`].

use super::request_facts::shown;
use super::scan::{self, ObjectScan, Schema};

/// One provider-side tool of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProviderTool {
    /// The tool as the request names it (`tools[].type`, or the member that asks for it),
    /// fit for a log line ([`shown`]).
    pub(crate) name: String,
    /// Its metric label: one of [`LABELS`].
    pub(crate) label: &'static str,
}

/// Metric labels of provider-side tools; any other tool counts as `other`.
pub(crate) const LABELS: &[&str] = &[
    "web_search",
    "web_search_preview",
    "web_fetch",
    "x_search",
    "live_search",
    "web_plugin",
    "file_search",
    "code_interpreter",
    "code_execution",
    "image_generation",
    "mcp",
    "google_search",
    "url_context",
    "other",
];

/// Tool types the client runs (after their date suffix is cut).
const CLIENT_TYPES: &[&str] = &[
    "function",
    "custom",
    "computer",
    "computer_use",
    "computer_use_preview",
    "bash",
    "text_editor",
    "memory",
    "local_shell",
    "shell",
    "apply_patch",
];

/// One `tools[]` entry, as far as it is judged.
pub(crate) static TOOL: Schema = Schema {
    keys: &[("type", None)],
};

/// One `plugins[]` entry (OpenRouter).
static PLUGIN: Schema = Schema {
    keys: &[("id", None)],
};

/// The provider-side tools of the completion request `scan` (of `body`), in the order they
/// appear, each once; `Err` names a `tools[]` entry with its `type` twice (providers differ on
/// which copy counts).
pub(crate) fn of(body: &str, scan: &ObjectScan<'_>) -> Result<Vec<ProviderTool>, String> {
    let mut found: Vec<ProviderTool> = Vec::new();
    let mut add = |name: &str, label: &'static str| {
        let name = shown(name);
        if !found.iter().any(|t| t.name == name) {
            found.push(ProviderTool { name, label });
        }
    };
    if let Some(tools) = scan.get("tools").filter(|m| m.raw.starts_with('[')) {
        let mut duplicate = None;
        let _ = scan::for_each_item(tools.raw, |i, item| {
            let Some(entry) = item
                .starts_with('{')
                .then(|| scan::scan_object(body, item, &TOOL).ok())
                .flatten()
            else {
                return Ok(());
            };
            if entry.duplicate.is_some() {
                duplicate = Some(format!("tools[{i}].type"));
                return Err(());
            }
            let Some(kind) = entry.str_at(&["type"]) else {
                return Ok(());
            };
            let base = undated(&kind);
            if !CLIENT_TYPES.contains(&base) {
                add(&kind, label(base));
            }
            Ok(())
        });
        if let Some(duplicate) = duplicate {
            return Err(duplicate);
        }
    }
    if scan.has("web_search_options") {
        add("web_search_options", "web_search");
    }
    if let Some(params) = scan.get("search_parameters") {
        let off = params
            .object
            .as_ref()
            .and_then(|p| p.str_at(&["mode"]))
            .is_some_and(|mode| mode == "off");
        if !off {
            add("search_parameters", "live_search");
        }
    }
    if let Some(plugins) = scan.get("plugins").filter(|m| m.raw.starts_with('[')) {
        let mut web = false;
        let _ = scan::for_each_item(plugins.raw, |_, item| {
            web |= item
                .starts_with('{')
                .then(|| scan::scan_object(body, item, &PLUGIN).ok())
                .flatten()
                .and_then(|p| p.str_at(&["id"]))
                .is_some_and(|id| id == "web");
            Ok::<(), ()>(())
        });
        if web {
            add("plugins:web", "web_plugin");
        }
    }
    if scan
        .str_at(&["model"])
        .is_some_and(|m| m.ends_with(":online"))
    {
        add("model:online", "web_plugin");
    }
    Ok(found)
}

/// The label of a provider-side tool type without its date suffix.
fn label(base: &str) -> &'static str {
    LABELS
        .iter()
        .find(|l| **l == base)
        .copied()
        .unwrap_or("other")
}

/// `kind` without a trailing version date: `_20250305`, `_2025_03_11` or `-2025-03-11`.
pub(crate) fn undated(kind: &str) -> &str {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some((head, tail)) = kind.rsplit_once('_')
        && tail.len() == 8
        && digits(tail)
    {
        return head;
    }
    for sep in ['_', '-'] {
        let mut parts = kind.rsplitn(4, sep);
        let (day, month, year, head) = (parts.next(), parts.next(), parts.next(), parts.next());
        if let (Some(d), Some(m), Some(y), Some(head)) = (day, month, year, head)
            && d.len() == 2
            && m.len() == 2
            && y.len() == 4
            && [d, m, y].into_iter().all(digits)
        {
            return head;
        }
    }
    kind
}

#[cfg(test)]
mod tests;
