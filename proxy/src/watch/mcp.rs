//! The MCP call of a watch: one `tools/call` over streamable HTTP (rmcp), after the server
//! URL has passed the egress gates.
//!
//! The URL runs E1 (secret URL), E2 (SSRF with the gate's own resolver) and E4 (blocklist)
//! exactly as an extract would; the HTTP client is then pinned to the addresses E2 checked,
//! so there is no second lookup to race. `egress.allowCIDRs` is how an in-cluster MCP
//! server is permitted.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;

use super::error::WatchError;
use crate::judge::admit::{self, Listener};
use crate::judge::metrics::ProxyMetrics;
use crate::live::runtime::Runtime;
use crate::policy::watch::WatchSpec;

/// Call the watch's tool; returns the documents to search for items (each text block, then
/// the structured content).
pub async fn call(
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
    let client = http_client(spec, &admission.addrs)?;
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
    let transport = StreamableHttpClientTransport::with_client(client, config);
    let exchange = async {
        let service = ().serve(transport).await.map_err(|e| {
            WatchError::Source(format!(
                "failed to open the MCP session with {url}: {}",
                root_cause(&e)
            ))
        })?;
        let params =
            CallToolRequestParams::new(spec.tool.clone()).with_arguments(spec.arguments.clone());
        let result = service.call_tool(params).await;
        let _ = service.cancel().await;
        result.map_err(|e| {
            WatchError::Source(format!(
                "failed to call tool {}: {}",
                spec.tool,
                root_cause(&e)
            ))
        })
    };
    let result = tokio::time::timeout(spec.timeout, exchange)
        .await
        .map_err(|_| {
            WatchError::Source(format!(
                "failed to call tool {}: timed out after {} s",
                spec.tool,
                spec.timeout.as_secs()
            ))
        })??;
    let value = serde_json::to_value(&result)
        .map_err(|e| WatchError::Source(format!("failed to read the tool result: {e}")))?;
    documents(&value, &spec.tool)
}

/// The innermost error of a chain, on one line: the SDK's outer layers name its own types.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The documents of a `CallToolResult` as JSON, or the tool's own error when `isError`.
pub fn documents(result: &Value, tool: &str) -> Result<Vec<Value>, WatchError> {
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

fn expand_headers(
    spec: &WatchSpec,
) -> Result<HashMap<http::HeaderName, http::HeaderValue>, WatchError> {
    let mut out = HashMap::new();
    for (name, template) in &spec.headers {
        let value =
            fleetgate_policy::header_template::expand(template).map_err(WatchError::Config)?;
        let name = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| WatchError::Config(format!("failed to use header {name}: {e}")))?;
        let value = http::HeaderValue::from_str(&value).map_err(|_| {
            WatchError::Config(format!("failed to use header {name}: invalid value"))
        })?;
        out.insert(name, value);
    }
    Ok(out)
}

/// A client that connects only to the checked addresses, follows no redirect, and uses the
/// gate's TLS roots.
fn http_client(
    spec: &WatchSpec,
    addresses: &[std::net::IpAddr],
) -> Result<reqwest013::Client, WatchError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| WatchError::Config(format!("failed to configure TLS: {e}")))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let mut builder = reqwest013::Client::builder()
        .tls_backend_preconfigured(tls)
        .no_proxy()
        .redirect(reqwest013::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .timeout(spec.timeout);
    if matches!(spec.server_url.host(), Some(url::Host::Domain(_))) && addresses.is_empty() {
        return Err(WatchError::Config(
            "failed to pin the MCP server: the gate checked no address".into(),
        ));
    }
    if let (Some(url::Host::Domain(host)), Some(port)) = (
        spec.server_url.host(),
        spec.server_url.port_or_known_default(),
    ) {
        let pinned: Vec<SocketAddr> = addresses
            .iter()
            .map(|ip| SocketAddr::new(*ip, port))
            .collect();
        builder = builder.resolve_to_addrs(host, &pinned);
    }
    builder
        .build()
        .map_err(|e| WatchError::Config(format!("failed to build the MCP client: {e}")))
}
