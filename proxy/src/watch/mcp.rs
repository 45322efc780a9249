//! The MCP call of a watch: one `tools/call` in an MCP session over streamable HTTP (the gate's
//! MCP client, [`crate::web::vendors::mcp`]), after the server URL has passed the egress gates.
//!
//! The URL runs E1 (secret URL), E2 (SSRF with the gate's own resolver) and E4 (blocklist)
//! exactly as an extract would; the HTTP client is then pinned to the addresses E2 checked,
//! so there is no second lookup to race. `egress.allowCIDRs` is how an in-cluster MCP
//! server is permitted.

use std::net::SocketAddr;

use serde_json::Value;

use super::error::WatchError;
use crate::judge::admit::{self, Listener};
use crate::judge::metrics::ProxyMetrics;
use crate::live::runtime::Runtime;
use crate::policy::watch::WatchSpec;
use crate::web::vendors::Endpoint;
use crate::web::vendors::client::{CallError, HttpClient};
use crate::web::vendors::mcp::{self, McpError, Session};

/// The largest answer a watch reads from its MCP server, in bytes.
const MAX_ANSWER_BYTES: u64 = 16 * 1024 * 1024;

/// Call the watch's tool; returns the documents to search for items (each text block, then
/// the structured content).
pub(crate) async fn call(
    rt: &Runtime,
    metrics: &ProxyMetrics,
    own: &crate::base::dialer::OwnListeners,
    spec: &WatchSpec,
) -> Result<Vec<Value>, WatchError> {
    let url = spec.server_url.as_str();
    let target = crate::base::target_url::TargetUrl::new(url);
    let refused = |r: admit::GateRefusal| WatchError::Refused {
        code: r.reason.code(),
        message: r.reason.message(),
    };
    let admission = admit::url(rt, metrics, Listener::Watch, &target)
        .await
        .map_err(refused)?;
    let port = target.port().unwrap_or(80);
    admit::no_loop(metrics, own, &admission.addrs, port).map_err(refused)?;
    let headers = expand_headers(spec)?;
    let http = http_client(spec, &admission.addrs)?;
    let timed_out = || {
        WatchError::Source(format!(
            "failed to call tool {}: timed out after {} s",
            spec.tool,
            spec.timeout.as_secs()
        ))
    };
    let exchange = async {
        let mut session = Session::open(&http, spec.server_url.clone(), &headers)
            .await
            .map_err(|e| match e {
                McpError::Call(CallError::Timeout(_)) => timed_out(),
                e => WatchError::Source(format!(
                    "failed to open the MCP session with {url}: {}",
                    cause(&e)
                )),
            })?;
        let arguments = Value::Object(spec.arguments.clone());
        let result = session.call_tool(&spec.tool, arguments).await;
        session.close().await;
        result.map_err(|e| match e {
            McpError::Call(CallError::Timeout(_)) => timed_out(),
            e => WatchError::Source(format!("failed to call tool {}: {}", spec.tool, cause(&e))),
        })
    };
    let result = tokio::time::timeout(spec.timeout, exchange)
        .await
        .map_err(|_| timed_out())??;
    documents(&result, &spec.tool)
}

/// Why the MCP exchange failed, on one line (the error line of a watch is a single line): the
/// HTTP status and excerpt, the transport's error, or the server's JSON-RPC message.
fn cause(e: &McpError) -> String {
    let text = match e {
        McpError::Call(call) => call.detail(),
        McpError::Tool(message) => message.clone(),
    };
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The documents of a `CallToolResult` as JSON, or the tool's own error when `isError`.
pub(crate) fn documents(result: &Value, tool: &str) -> Result<Vec<Value>, WatchError> {
    let texts: Vec<Value> = result
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b.get("text").cloned())
                .collect()
        })
        .unwrap_or_default();
    if result.get("isError") == Some(&Value::Bool(true)) {
        let text: Vec<&str> = texts.iter().filter_map(Value::as_str).collect();
        return Err(WatchError::Source(format!(
            "tool {tool} returned an error: {}",
            text.join(" ")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        )));
    }
    let mut docs = texts;
    docs.extend(result.get("structuredContent").cloned());
    Ok(docs)
}

/// The watch's headers, expanded and checked; a header the MCP client sets itself is refused.
fn expand_headers(spec: &WatchSpec) -> Result<Vec<(String, String)>, WatchError> {
    let mut out = Vec::new();
    for (name, template) in &spec.headers {
        let value =
            fleetgate_policy::header_template::expand(template).map_err(WatchError::Config)?;
        let name = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| WatchError::Config(format!("failed to use header {name}: {e}")))?;
        http::HeaderValue::from_str(&value).map_err(|_| {
            WatchError::Config(format!("failed to use header {name}: invalid value"))
        })?;
        if mcp::RESERVED_HEADERS.contains(&name.as_str()) {
            return Err(WatchError::Source(format!(
                "failed to open the MCP session with {}: header {name} is set by the MCP client",
                spec.server_url
            )));
        }
        out.push((name.as_str().to_string(), value));
    }
    Ok(out)
}

/// A client that connects only to the checked addresses, follows no redirect, uses the
/// gate's TLS roots, and makes one attempt per request within the watch's timeout.
fn http_client(spec: &WatchSpec, addresses: &[std::net::IpAddr]) -> Result<HttpClient, WatchError> {
    let mut endpoint = Endpoint::new(spec.server_url.clone());
    endpoint.timeout = spec.timeout;
    endpoint.max_body_bytes = MAX_ANSWER_BYTES;
    endpoint.retries = 0;
    match (
        spec.server_url.host(),
        spec.server_url.port_or_known_default(),
    ) {
        (Some(url::Host::Domain(_)), _) if addresses.is_empty() => Err(WatchError::Config(
            "failed to pin the MCP server: the gate checked no address".into(),
        )),
        (Some(url::Host::Domain(host)), Some(port)) => {
            let pinned: Vec<SocketAddr> = addresses
                .iter()
                .map(|ip| SocketAddr::new(*ip, port))
                .collect();
            Ok(HttpClient::pinned(endpoint, host, &pinned))
        }
        _ => Ok(HttpClient::new(endpoint)),
    }
}
