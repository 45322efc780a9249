//! The `xai` backend: Grok's server-side `web_search` tool on xAI's Responses API (search only).
//!
//! `POST {base}/responses` (base default `https://api.x.ai/v1`) with `Authorization: Bearer`,
//! body `{model, input: [{role: user, content: <prompt>}], tools: [{type: web_search,
//! filters?}], include: ["no_inline_citations"]}`. The prompt asks for a JSON object
//! `{"results": [{title, url, description}]}`; rows come from that object (whole text, then the
//! outermost `{…}`), else from `url_citation` annotations, else from `citations`.

use serde_json::{Value, json};

use super::client::VendorErrorKind;
use super::client::{self, CallError, Endpoint, HttpClient, VendorError};
use super::search::{self, KeyOrder, RawHit, SearchHit};

/// Hermes' default model for web search.
pub(crate) const DEFAULT_MODEL: &str = "grok-build-0.1";
/// The error when no key is set.
pub(crate) const MISSING_KEY: &str = "No xAI credentials found. Set XAI_API_KEY.";
/// Hermes' error when both domain lists are set.
pub(crate) const BOTH_DOMAIN_LISTS: &str = "web.xai.allowed_domains and web.xai.excluded_domains \
     cannot both be set (xAI restriction).";
/// xAI accepts at most this many domains per filter list.
const MAX_DOMAINS: usize = 5;
/// Characters of message text kept before a citation as its description.
const CITATION_CONTEXT: usize = 200;
const NAME: &str = "xai";

/// `web.xai` settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct XaiOptions {
    /// Model; [`DEFAULT_MODEL`] when unset or blank.
    pub(crate) model: Option<String>,
    /// Only search these domains (at most 5 are sent).
    pub(crate) allowed_domains: Vec<String>,
    /// Never search these domains (at most 5 are sent).
    pub(crate) excluded_domains: Vec<String>,
}

/// An xAI web search client.
#[derive(Clone, Debug)]
pub struct XaiClient {
    http: HttpClient,
    options: XaiOptions,
}

// === impl XaiClient ===

impl XaiClient {
    /// A client for `endpoint` with default options.
    pub(crate) fn new(endpoint: Endpoint) -> Self {
        Self {
            http: HttpClient::new(endpoint),
            options: XaiOptions::default(),
        }
    }

    /// The same client with `options`.
    pub(crate) fn with_options(mut self, options: XaiOptions) -> Self {
        self.options = options;
        self
    }

    /// Whether the key is set.
    pub(crate) fn available(&self) -> bool {
        self.http.endpoint().key().is_some()
    }

    /// Search; rows are `{title, url, description, position}`, limit clamped to 1..=100.
    pub(crate) async fn search(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<Vec<SearchHit>, VendorError> {
        let limit = limit.clamp(1, 100);
        let key = self
            .http
            .endpoint()
            .key()
            .ok_or_else(|| VendorError::not_configured(NAME, MISSING_KEY))?;
        let body = self.body(query, limit)?;
        let headers = [("authorization", format!("Bearer {key}"))];
        let bytes = self
            .http
            .post_json("/responses", &headers, &body)
            .await
            .map_err(|e| call_error(&e))?;
        let answer = client::parse_json(&bytes).map_err(|_| {
            VendorError::bad_response(NAME, "Could not parse xAI Responses API reply as JSON")
        })?;
        if let Some(error) = answer.get("error").filter(|e| e.is_object()) {
            let message = [error.get("message"), error.get("code")]
                .into_iter()
                .map(search::text)
                .find(|s| !s.is_empty())
                .unwrap_or_else(|| "unknown error".to_string());
            return Err(VendorError::bad_response(
                NAME,
                format!("xAI returned an error: {message}"),
            ));
        }
        Ok(search::numbered(
            KeyOrder::TitleHit,
            results(&answer, limit),
            limit,
        ))
    }

    /// The Responses API request body.
    pub(crate) fn body(&self, query: &str, limit: usize) -> Result<Value, VendorError> {
        let allowed = domains(&self.options.allowed_domains);
        let excluded = domains(&self.options.excluded_domains);
        let mut tool = json!({ "type": "web_search" });
        match (allowed.is_empty(), excluded.is_empty()) {
            (false, false) => {
                return Err(VendorError::not_configured(NAME, BOTH_DOMAIN_LISTS));
            }
            (false, true) => tool["filters"] = json!({ "allowed_domains": allowed }),
            (true, false) => tool["filters"] = json!({ "excluded_domains": excluded }),
            (true, true) => {}
        }
        let model = self
            .options
            .model
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .unwrap_or(DEFAULT_MODEL);
        Ok(json!({
            "model": model,
            "input": [{ "role": "user", "content": prompt(query, limit) }],
            "tools": [tool],
            "include": ["no_inline_citations"],
        }))
    }
}

/// The instruction that makes Grok answer as a search engine with parseable JSON.
pub(crate) fn prompt(query: &str, limit: usize) -> String {
    format!(
        "Search the web with the web_search tool for the query below. Answer with one JSON \
         object and nothing else (no prose, no code fences, no citation links), shaped as \
         {{\"results\": [{{\"title\": \"...\", \"url\": \"https://...\", \"description\": \
         \"one or two sentences\"}}]}}. Give at most {limit} results, most relevant first, \
         each with an absolute https:// URL; when nothing fits, answer {{\"results\": []}}.\n\n\
         Query: {query}"
    )
}

fn domains(list: &[String]) -> Vec<&str> {
    list.iter()
        .map(|d| d.trim())
        .filter(|d| !d.is_empty())
        .take(MAX_DOMAINS)
        .collect()
}

fn call_error(err: &CallError) -> VendorError {
    match err {
        CallError::Status {
            status, excerpt, ..
        } => VendorError {
            backend: NAME,
            kind: err.kind(),
            status: Some(*status),
            message: format!("xAI web search returned HTTP {status}: {excerpt}")
                .trim_end()
                .to_string(),
        },
        CallError::TooLarge(_) => VendorError::new(
            NAME,
            VendorErrorKind::BodyTooLarge,
            format!("xAI returned an oversized response: {}", err.detail()),
        ),
        _ => VendorError::new(
            NAME,
            err.kind(),
            format!("Could not reach xAI: {}", err.detail()),
        ),
    }
}

/// Rows from the answer: the JSON object, else citations in the text, else `citations`.
fn results(answer: &Value, limit: usize) -> Vec<RawHit> {
    let (texts, annotations) = output_text(answer);
    if let Some(rows) = texts.iter().find_map(|t| json_results(t, limit)) {
        return rows;
    }
    let rows = annotation_results(&annotations, &texts.join("\n"), limit);
    if !rows.is_empty() {
        return rows;
    }
    search::rows(answer.get("citations"))
        .iter()
        .take(limit)
        .filter_map(Value::as_str)
        .filter(|u| !u.trim().is_empty())
        .map(|u| RawHit {
            url: u.to_string(),
            ..RawHit::default()
        })
        .collect()
}

/// The non-blank `output_text` blocks of `message` items, and their annotations.
fn output_text(answer: &Value) -> (Vec<String>, Vec<Value>) {
    let mut texts = Vec::new();
    let mut annotations = Vec::new();
    let messages = search::rows(answer.get("output"))
        .iter()
        .filter(|item| item.get("type").and_then(Value::as_str) == Some("message"));
    for item in messages {
        let chunks = search::rows(item.get("content"))
            .iter()
            .filter(|c| c.get("type").and_then(Value::as_str) == Some("output_text"));
        for chunk in chunks {
            if let Some(text) = chunk.get("text").and_then(Value::as_str)
                && !text.trim().is_empty()
            {
                texts.push(text.to_string());
            }
            annotations.extend(
                search::rows(chunk.get("annotations"))
                    .iter()
                    .filter(|a| a.is_object())
                    .cloned(),
            );
        }
    }
    (texts, annotations)
}

/// Rows of a `{"results": [...]}` object in `text`; `None` when there is none with a URL.
fn json_results(text: &str, limit: usize) -> Option<Vec<RawHit>> {
    let outer = match (text.find('{'), text.rfind('}')) {
        (Some(start), Some(end)) if start < end => Some(&text[start..=end]),
        _ => None,
    };
    [Some(text), outer.filter(|o| *o != text)]
        .into_iter()
        .flatten()
        .find_map(|candidate| {
            let parsed: Value = serde_json::from_str(candidate).ok()?;
            let rows: Vec<RawHit> = parsed
                .get("results")?
                .as_array()?
                .iter()
                .take(limit)
                .filter_map(|row| {
                    let url = text_of(row.get("url"));
                    (!url.is_empty()).then(|| RawHit {
                        title: text_of(row.get("title")),
                        url,
                        description: text_of(row.get("description")),
                    })
                })
                .collect();
            (!rows.is_empty()).then_some(rows)
        })
}

/// A row field as Python's `str(...).strip()`.
fn text_of(value: Option<&Value>) -> String {
    search::py_str(value).trim().to_string()
}

/// Rows from `url_citation` annotations, deduplicated, with the text before each as context.
fn annotation_results(annotations: &[Value], text: &str, limit: usize) -> Vec<RawHit> {
    let chars: Vec<char> = text.chars().collect();
    let mut rows: Vec<RawHit> = Vec::new();
    for ann in annotations {
        if ann.get("type").and_then(Value::as_str) != Some("url_citation") {
            continue;
        }
        let url = text_of(ann.get("url"));
        if url.is_empty() || rows.iter().any(|r| r.url == url) {
            continue;
        }
        let start = ann.get("start_index").and_then(Value::as_u64);
        let end = ann.get("end_index").and_then(Value::as_u64);
        let description = match (start, end) {
            (Some(s), Some(e)) if s < e && e as usize <= chars.len() => {
                let s = s as usize;
                let from = s.saturating_sub(CITATION_CONTEXT);
                chars[from..s].iter().collect::<String>().trim().to_string()
            }
            _ => String::new(),
        };
        rows.push(RawHit {
            title: String::new(),
            url,
            description,
        });
        if rows.len() >= limit {
            break;
        }
    }
    rows
}

#[cfg(test)]
mod tests;
