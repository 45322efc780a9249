//! The MCP transport of the keyless tier: one `tools/call` POST, no initialize handshake.
//!
//! Exa's and Parallel's public endpoints speak the Model Context Protocol over streamable HTTP.
//! A keyless call is a single JSON-RPC request `{"jsonrpc":"2.0","id":1,"method":"tools/call",
//! "params":{"name":<tool>,"arguments":{...}}}` with `Accept: application/json,
//! text/event-stream`; the answer is either one JSON envelope or an event stream whose `data:`
//! lines carry it (lines split on CRLF, CR and LF only). The tool's answer is the first
//! non-empty `result.content[].text`. A JSON-RPC `error`, `result.isError`, an envelope without
//! text and any other shape are failures with the wording below, never an empty success.

use serde_json::{Value, json};

use crate::web::vendors::client::{CallError, HttpClient};

/// Why a tool call produced no text.
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

/// Call `tool` with `arguments` at the endpoint's URL; the tool's text answer.
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
    let headers = [("accept", "application/json, text/event-stream".to_string())];
    let bytes = http
        .post_json("", &headers, &body)
        .await
        .map_err(McpError::Call)?;
    tool_text(&bytes).map_err(McpError::Tool)
}

/// The tool's text from a plain JSON or an event-stream answer.
pub(crate) fn tool_text(body: &[u8]) -> Result<String, String> {
    let body = String::from_utf8_lossy(body);
    let envelope = match serde_json::from_str::<Value>(body.trim()) {
        Ok(envelope) => envelope,
        Err(_) => event_stream_envelope(&body).ok_or("Unrecognized MCP response shape")?,
    };
    if let Some(error) = envelope.get("error") {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| error.to_string());
        return Err(message);
    }
    let Some(result) = envelope.get("result").filter(|r| r.is_object()) else {
        return Err("Unrecognized MCP response shape".into());
    };
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

/// The first JSON-RPC envelope (`result` or `error`) among the `data:` lines of an event stream.
fn event_stream_envelope(body: &str) -> Option<Value> {
    body.split("\r\n")
        .flat_map(|l| l.split(['\r', '\n']))
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|v| v.get("result").is_some() || v.get("error").is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_json_and_event_stream_answers_give_the_first_text() {
        let plain = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":""},{"type":"text","text":"hello"}]}}"#;
        assert_eq!(tool_text(plain).as_deref(), Ok("hello"));
        for sep in ["\n", "\r\n", "\r"] {
            let sse = format!(
                "event: message{sep}data: {{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"from sse\"}}]}}}}{sep}{sep}"
            );
            assert_eq!(
                tool_text(sse.as_bytes()).as_deref(),
                Ok("from sse"),
                "separator {sep:?}"
            );
        }
    }

    #[test]
    fn errors_and_odd_envelopes_are_failures_with_their_wording() {
        let cases: [(&[u8], &str); 5] = [
            (
                br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"rate limit exceeded"}}"#,
                "rate limit exceeded",
            ),
            (
                br#"{"result":{"isError":true,"content":[{"type":"text","text":"bad query"}]}}"#,
                "bad query",
            ),
            (br#"{"result":{"isError":true}}"#, "MCP tool call failed"),
            (
                br#"{"result":{"content":[{"type":"image","data":"x"}]}}"#,
                "MCP response contained no text content",
            ),
            (b"<html>maintenance</html>", "Unrecognized MCP response shape"),
        ];
        for (body, want) in cases {
            assert_eq!(
                tool_text(body),
                Err(want.to_string()),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
