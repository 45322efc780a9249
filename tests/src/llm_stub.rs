//! Stub LLM providers on loopback: an OpenAI-compatible one (`/chat/completions`,
//! `/responses`) and an Anthropic one (`/messages`), each answering streamed (SSE) or whole,
//! with `service_tier` in the response (top level for OpenAI, `usage.service_tier` for
//! Anthropic). Every request is recorded (path, key headers, JSON body) so tests can check
//! what reached the provider.
//!
//! Scripted replies: a model named `tool:<name>` answers its first call with a tool call to
//! `<name>` (arguments from [`StubOptions::tool_args`]) and then, once the request carries
//! a tool result, with text; a model named `bulk:<bytes>` streams that many content bytes in
//! 1 KiB events (the throughput benchmark).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use futures_util::stream;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::background::BackgroundTasks;

/// Which wire the stub speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StubKind {
    /// OpenAI chat completions / responses.
    OpenAi,
    /// Anthropic messages.
    Anthropic,
}

/// What the stub answers.
#[derive(Clone, Debug)]
pub struct StubOptions {
    /// The wire.
    pub kind: StubKind,
    /// Served tier; `None` echoes the requested one (or `default`).
    pub served_tier: Option<String>,
    /// Delay between streamed events.
    pub event_delay: Duration,
    /// Arguments of scripted tool calls (`tool:<name>` models).
    pub tool_args: Value,
    /// Text of plain answers.
    pub text: String,
    /// The usage object of OpenAI chat answers (`None`: 10 prompt, 5 completion tokens).
    pub usage: Option<Value>,
    /// Whether a streamed chat answer carries usage in its last chunk (as with
    /// `stream_options.include_usage`); off, it carries none.
    pub stream_usage: bool,
    /// Chat answers call this tool (with [`Self::tool_args`]) until the conversation holds
    /// this many tool results, whatever the model: an agent run of several calls.
    pub tool_turns: Option<(String, usize)>,
}

impl StubOptions {
    /// Defaults for `kind`: echo the tier, no delay, answer "stub answer".
    pub fn new(kind: StubKind) -> Self {
        Self {
            kind,
            served_tier: None,
            event_delay: Duration::ZERO,
            tool_args: json!({}),
            text: "stub answer".into(),
            usage: None,
            stream_usage: true,
            tool_turns: None,
        }
    }
}

/// One request the stub received.
#[derive(Clone, Debug)]
pub struct SeenRequest {
    /// Request path.
    pub path: String,
    /// `authorization` header.
    pub authorization: Option<String>,
    /// `x-api-key` header.
    pub x_api_key: Option<String>,
    /// The JSON body (`Null` when not JSON, or larger than [`MAX_PARSED_BODY`]).
    pub body: Value,
    /// The body's size in bytes.
    pub body_len: usize,
    /// The body as received (empty when larger than [`MAX_PARSED_BODY`]).
    pub raw: Bytes,
}

/// Bodies above this size are recorded by length only: a test of the gate's memory sends
/// bodies whose JSON tree would cost the test process gigabytes.
pub const MAX_PARSED_BODY: usize = 1024 * 1024;

type StubBody = BoxBody<Bytes, Infallible>;

/// A running stub provider; stops on drop.
#[derive(Debug)]
pub struct StubProvider {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
    _tasks: BackgroundTasks,
}

// === impl StubProvider ===

impl StubProvider {
    /// Start a stub on `127.0.0.1:0`.
    pub async fn start(options: StubOptions) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("failed to bind the stub provider")?;
        let addr = listener.local_addr()?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = BackgroundTasks::default();
        let options = Arc::new(options);
        let seen_accept = seen.clone();
        tasks.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let (options, seen) = (options.clone(), seen_accept.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |req| {
                        let (options, seen) = (options.clone(), seen.clone());
                        async move { Ok::<_, Infallible>(answer(&options, &seen, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Self {
            addr,
            seen,
            _tasks: tasks,
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<SeenRequest> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

async fn answer(
    options: &StubOptions,
    seen: &Mutex<Vec<SeenRequest>>,
    req: Request<Incoming>,
) -> Response<StubBody> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let (authorization, x_api_key) = (header("authorization"), header("x-api-key"));
    let is_get = req.method() == http::Method::GET;
    let path = req.uri().path().to_string();
    let bytes = match req.into_body().collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let body: Value = if bytes.len() <= MAX_PARSED_BODY {
        serde_json::from_slice(&bytes).unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    if let Ok(mut s) = seen.lock() {
        s.push(SeenRequest {
            path: path.clone(),
            authorization,
            x_api_key,
            body: body.clone(),
            body_len: bytes.len(),
            raw: if bytes.len() <= MAX_PARSED_BODY {
                bytes.clone()
            } else {
                Bytes::new()
            },
        });
    }
    if is_get {
        return whole(json!({"object": "list", "data": [{"id": "stub-model", "object": "model"}]}));
    }
    let events = match options.kind {
        StubKind::OpenAi if path.ends_with("/responses") => responses_events(options, &body),
        StubKind::OpenAi => chat_events(options, &body),
        StubKind::Anthropic => messages_events(options, &body),
    };
    if body["stream"] == json!(true) {
        sse(events.stream, options.event_delay)
    } else {
        whole(events.whole)
    }
}

/// A reply in both forms.
struct Events {
    whole: Value,
    stream: Vec<String>,
}

fn served(options: &StubOptions, body: &Value) -> String {
    options
        .served_tier
        .clone()
        .or_else(|| body["service_tier"].as_str().map(str::to_string))
        .unwrap_or_else(|| "default".into())
}

/// The scripted reply: a tool call, bulk text, or the plain answer.
enum Script {
    Tool(String),
    Text(String),
}

fn script(options: &StubOptions, body: &Value, tool_results: usize) -> Script {
    let model = body["model"].as_str().unwrap_or("");
    if let Some(name) = model.strip_prefix("tool:")
        && tool_results == 0
    {
        return Script::Tool(name.to_string());
    }
    if let Some((name, turns)) = &options.tool_turns
        && tool_results < *turns
    {
        return Script::Tool(name.clone());
    }
    if let Some(n) = model
        .strip_prefix("bulk:")
        .and_then(|n| n.parse::<usize>().ok())
    {
        return Script::Text("x".repeat(n));
    }
    Script::Text(options.text.clone())
}

fn chat_events(options: &StubOptions, body: &Value) -> Events {
    let model = body["model"].clone();
    let tier = served(options, body);
    let tool_results = body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
    let usage = options.usage.clone().unwrap_or_else(
        || json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}),
    );
    let (message, delta_chunks, finish) = match script(options, body, tool_results) {
        Script::Tool(name) => {
            let id = format!("call_{}", tool_results + 1);
            let call = json!({"id": id, "type": "function",
                "function": {"name": name, "arguments": options.tool_args.to_string()}});
            let msg = json!({"role": "assistant", "content": null, "tool_calls": [call]});
            let delta = json!({"role": "assistant", "tool_calls": [{"index": 0, "id": id,
                "type": "function", "function": {"name": name, "arguments": options.tool_args.to_string()}}]});
            (msg, vec![delta], "tool_calls")
        }
        Script::Text(text) => {
            let deltas = text
                .as_bytes()
                .chunks(1024)
                .map(|c| json!({"content": String::from_utf8_lossy(c)}))
                .collect();
            (
                json!({"role": "assistant", "content": text}),
                deltas,
                "stop",
            )
        }
    };
    let whole = json!({"id": "chatcmpl-stub", "object": "chat.completion", "created": 1,
        "model": model, "service_tier": tier, "usage": usage,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}]});
    let mut stream: Vec<String> = delta_chunks
        .into_iter()
        .map(|d| {
            json!({"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 1,
                "model": model, "choices": [{"index": 0, "delta": d, "finish_reason": null}]})
            .to_string()
        })
        .collect();
    let last_usage = if options.stream_usage {
        usage.clone()
    } else {
        Value::Null
    };
    stream.push(
        json!({"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 1,
            "model": model, "service_tier": tier, "usage": last_usage,
            "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        .to_string(),
    );
    stream.push("[DONE]".into());
    Events {
        whole,
        stream: stream
            .into_iter()
            .map(|d| format!("data: {d}\n\n"))
            .collect(),
    }
}

fn responses_events(options: &StubOptions, body: &Value) -> Events {
    let tier = served(options, body);
    let text = match script(options, body, usize::MAX) {
        Script::Text(t) | Script::Tool(t) => t,
    };
    // The chat usage of the options in the responses API's names (input includes the cached
    // tokens there too).
    let chat = options
        .usage
        .clone()
        .unwrap_or_else(|| json!({"prompt_tokens": 10, "completion_tokens": 5}));
    let usage = json!({
        "input_tokens": chat["prompt_tokens"],
        "input_tokens_details": {"cached_tokens": chat["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap_or(0)},
        "output_tokens": chat["completion_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": chat["prompt_tokens"].as_u64().unwrap_or(0) + chat["completion_tokens"].as_u64().unwrap_or(0),
    });
    let whole = json!({"id": "resp_stub", "object": "response", "status": "completed",
        "model": body["model"], "service_tier": tier, "usage": usage,
        "output": [{"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": text}]}]});
    let stream = vec![
        format!(
            "event: response.output_text.delta\ndata: {}\n\n",
            json!({"type": "response.output_text.delta", "delta": text})
        ),
        format!(
            "event: response.completed\ndata: {}\n\n",
            json!({"type": "response.completed", "response": whole})
        ),
    ];
    Events { whole, stream }
}

fn messages_events(options: &StubOptions, body: &Value) -> Events {
    let tier = served(options, body);
    let text = match script(options, body, usize::MAX) {
        Script::Text(t) | Script::Tool(t) => t,
    };
    let usage = json!({"input_tokens": 10, "output_tokens": 5, "service_tier": tier});
    let whole = json!({"id": "msg_stub", "type": "message", "role": "assistant",
        "model": body["model"], "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "stop_sequence": null, "usage": usage});
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let stream = vec![
        event(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_stub",
            "type": "message", "role": "assistant", "model": body["model"], "content": [],
            "stop_reason": null, "usage": {"input_tokens": 10, "output_tokens": 0}}}),
        ),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": text}}),
        ),
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        event(
            "message_delta",
            json!({"type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": usage}),
        ),
        event("message_stop", json!({"type": "message_stop"})),
    ];
    Events { whole, stream }
}

fn whole(value: Value) -> Response<StubBody> {
    let body = http_body_util::Full::new(Bytes::from(value.to_string())).boxed();
    let mut resp = Response::new(body);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    resp
}

fn sse(events: Vec<String>, delay: Duration) -> Response<StubBody> {
    let frames = stream::unfold(
        (events.into_iter(), true),
        move |(mut it, first)| async move {
            let next = it.next()?;
            if !first && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Some((
                Ok::<_, Infallible>(Frame::data(Bytes::from(next))),
                (it, false),
            ))
        },
    );
    let mut resp = Response::new(StreamBody::new(frames).boxed());
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/event-stream"),
    );
    resp
}
