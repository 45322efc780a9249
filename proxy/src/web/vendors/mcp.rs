//! The gate's MCP client: JSON-RPC over streamable HTTP, spoken through the shared vendor
//! [`HttpClient`] (its TLS, timeouts, body cap, retries and error wording).
//!
//! Two callers, two lifecycles, one wire format:
//! - [`call_tool`], the keyless tier (Exa's and Parallel's public endpoints): one `tools/call`
//!   POST and no initialize handshake, as Hermes sends it: `{"jsonrpc":"2.0","id":1,
//!   "method":"tools/call","params":{"name":<tool>,"arguments":{...}}}` with `Accept:
//!   application/json, text/event-stream`. The tool's answer is the first non-empty
//!   `result.content[].text`.
//! - [`Session`], watches (any MCP server, usually stateful): `initialize`, then
//!   `notifications/initialized`, then requests carrying `Mcp-Session-Id` (when the server gave
//!   one) and `MCP-Protocol-Version`, and a DELETE of the session at the end. A call returns
//!   the whole `CallToolResult`.
//!
//! An answer is either one JSON envelope or an event stream whose `data:` lines carry it (lines
//! split on CRLF, CR and LF only); a session stops reading a stream at the answer to its
//! request (matched by id), and does not wait for the body of the answer to a notification or
//! a DELETE. A JSON-RPC
//! `error`, a keyless `result.isError`, an envelope without text and any other shape are
//! failures with the wording below, never an empty success.

use serde_json::{Value, json};
use url::Url;

use super::client::{CallError, HttpClient};

/// What a streamable-HTTP MCP client accepts (both, in this order, as Hermes sends it).
const ACCEPT: &str = "application/json, text/event-stream";
/// The protocol version a session asks for: the newest with the initialize handshake. The
/// server answers with the version it speaks, and the session sends that one.
const PROTOCOL_VERSION: &str = "2025-11-25";
/// Headers the client sets itself; a caller's header of one of these names is refused.
pub(crate) const RESERVED_HEADERS: [&str; 4] = [
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// Why a tool call produced no answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum McpError {
    /// The HTTP exchange failed (status, timeout, transport, size).
    Call(CallError),
    /// The server answered, but with an error or an unusable envelope.
    Tool(String),
}

// === impl McpError ===

impl McpError {
    /// The failure in Hermes' words: `HTTP <code>: <body>`, `request failed: <detail>`, or the
    /// tool's own message.
    pub(crate) fn detail(&self) -> String {
        match self {
            Self::Call(e @ CallError::Status { .. }) => e.detail(),
            Self::Call(e) => format!("request failed: {}", e.detail()),
            Self::Tool(message) => message.clone(),
        }
    }
}

/// Call `tool` with `arguments` at the endpoint's URL in one POST (no initialize); the tool's
/// text answer.
pub(crate) async fn call_tool(
    http: &HttpClient,
    tool: &str,
    arguments: Value,
) -> Result<String, McpError> {
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": { "name": tool, "arguments": arguments },
    });
    let headers = [("accept", ACCEPT.to_string())];
    let bytes = http
        .post_json("", &headers, &body)
        .await
        .map_err(McpError::Call)?;
    tool_text(&bytes).map_err(McpError::Tool)
}

/// The tool's text from a plain JSON or an event-stream answer.
pub(crate) fn tool_text(body: &[u8]) -> Result<String, String> {
    let result = response_result(body, None)?;
    let texts: Vec<&str> = result
        .get("content")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let joined = texts.join("\n");
        return Err(if joined.trim().is_empty() {
            "MCP tool call failed".into()
        } else {
            joined
        });
    }
    texts
        .into_iter()
        .find(|t| !t.trim().is_empty())
        .map(str::to_string)
        .ok_or_else(|| "MCP response contained no text content".into())
}

/// The `result` object of the answer (to request `id`, when given) in a plain JSON or an
/// event-stream body; the JSON-RPC error's message, or why the body is no answer.
fn response_result(body: &[u8], id: Option<u64>) -> Result<Value, String> {
    let body = String::from_utf8_lossy(body);
    let envelope = match serde_json::from_str::<Value>(body.trim()) {
        Ok(envelope) => envelope,
        Err(_) => event_stream_envelope(&body, id).ok_or("Unrecognized MCP response shape")?,
    };
    if let Some(error) = envelope.get("error") {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| error.to_string());
        return Err(message);
    }
    match envelope.get("result") {
        Some(result) if result.is_object() => Ok(result.clone()),
        _ => Err("Unrecognized MCP response shape".into()),
    }
}

/// The first JSON-RPC answer (`result` or `error`, to request `id` when given) among the
/// `data:` lines of an event stream.
fn event_stream_envelope(body: &str, id: Option<u64>) -> Option<Value> {
    lines(body).find_map(|line| answer_line(line, id))
}

/// The lines of an event stream: split on CRLF, CR and LF.
fn lines(body: &str) -> impl Iterator<Item = &str> {
    body.split("\r\n").flat_map(|l| l.split(['\r', '\n']))
}

/// The envelope on one `data:` line when it answers (request `id`, when given).
fn answer_line(line: &str, id: Option<u64>) -> Option<Value> {
    let data = line.strip_prefix("data:")?;
    let envelope = serde_json::from_str::<Value>(data.trim()).ok()?;
    let answers = envelope.get("result").is_some() || envelope.get("error").is_some();
    let ours = id.is_none_or(|id| envelope.get("id").and_then(Value::as_u64) == Some(id));
    (answers && ours).then_some(envelope)
}

/// Whether an event stream read so far (`body`, of which `before` bytes were seen already)
/// holds the answer to request `id` on a complete line.
fn holds_answer(body: &[u8], before: usize, id: u64) -> bool {
    let is_break = |b: &u8| matches!(b, b'\r' | b'\n');
    // Only lines completed by the new bytes: from the last break before them to the last
    // break among them.
    let Some(end) = body[before..].iter().rposition(is_break) else {
        return false;
    };
    let start = body[..before]
        .iter()
        .rposition(is_break)
        .map_or(0, |i| i + 1);
    let done = String::from_utf8_lossy(&body[start..before + end]);
    lines(&done).any(|line| answer_line(line, Some(id)).is_some())
}

/// An MCP session: opened with the initialize handshake, closed with [`Session::close`].
#[derive(Debug)]
pub(crate) struct Session<'a> {
    http: &'a HttpClient,
    url: Url,
    /// The caller's headers, then the session's own.
    headers: Vec<(&'a str, String)>,
    next_id: u64,
    session_id: Option<String>,
}

// === impl Session ===

impl<'a> Session<'a> {
    /// Initialize a session with the server at `url` (used as given, query included),
    /// sending `headers` on every request (none may be one of [`RESERVED_HEADERS`]).
    pub(crate) async fn open(
        http: &'a HttpClient,
        url: Url,
        headers: &'a [(String, String)],
    ) -> Result<Session<'a>, McpError> {
        let mut session = Session {
            http,
            url,
            headers: headers
                .iter()
                .map(|(name, value)| (name.as_str(), value.clone()))
                .collect(),
            next_id: 0,
            session_id: None,
        };
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": { "name": "fleetgate", "version": env!("CARGO_PKG_VERSION") },
        });
        let (answer, session_id) = session.request("initialize", params).await?;
        let version = answer
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                McpError::Tool("the initialize answer names no protocol version".into())
            })?
            .to_string();
        session.session_id = session_id;
        if let Some(id) = &session.session_id {
            session.headers.push(("mcp-session-id", id.clone()));
        }
        session.headers.push(("mcp-protocol-version", version));
        let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        session.post(&initialized, None).await?;
        Ok(session)
    }

    /// Call `tool` with `arguments`; the whole `CallToolResult` (an `isError` result is the
    /// caller's to read).
    pub(crate) async fn call_tool(
        &mut self,
        tool: &str,
        arguments: Value,
    ) -> Result<Value, McpError> {
        let params = json!({ "name": tool, "arguments": arguments });
        let (result, _) = self.request("tools/call", params).await?;
        Ok(result)
    }

    /// End the session on the server (a DELETE, when it gave a session id); a server that
    /// refuses or does not support it changes nothing.
    pub(crate) async fn close(self) {
        if self.session_id.is_some()
            && let Err(e) = self.http.delete(&self.url, &self.headers).await
        {
            tracing::debug!(error = %e.detail(), "the MCP server did not end the session");
        }
    }

    /// One request; its `result` and the `Mcp-Session-Id` the answer carried.
    async fn request(
        &mut self,
        method: &str,
        params: Value,
    ) -> Result<(Value, Option<String>), McpError> {
        let id = self.next_id;
        self.next_id += 1;
        let message = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let answer = self.post(&message, Some(id)).await?;
        let session_id = answer
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let result = response_result(&answer.body, Some(id)).map_err(McpError::Tool)?;
        Ok((result, session_id))
    }

    async fn post(
        &self,
        message: &Value,
        id: Option<u64>,
    ) -> Result<super::client::Answer, McpError> {
        let mut headers = vec![("accept", ACCEPT.to_string())];
        headers.extend(self.headers.iter().cloned());
        // A notification's answer carries nothing to wait for (202, or a stream to leave).
        let enough = move |body: &[u8], before: usize| match id {
            Some(id) => holds_answer(body, before, id),
            None => true,
        };
        self.http
            .post_json_to(&self.url, &headers, message, &enough)
            .await
            .map_err(McpError::Call)
    }
}

#[cfg(test)]
mod tests;
