//! Absolute-form HTTP/1.1 relay: the full URL gates (port allow-list, then E1, E2 and E4 in
//! the pipeline's one order), the loop check, a connection to a checked address, hop-by-hop
//! headers removed (RFC 9110 §7.6.1), `Proxy-Authorization` never forwarded, and the response
//! streamed back frame by frame.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, Uri, Version};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::time::{Instant, timeout};
use url::Position;

use super::listener::{Decision, ForwardProxy, LISTENER};
use super::meter::MeteredBody;
use super::refusal::{ProxyBody, ProxyRefusal};
use crate::connect::connect_pinned;
use crate::gates::DenyReason;
use crate::metrics::ProxyMetrics;
use crate::pipeline::Pipeline;
use crate::respond::ERROR_HEADER;
use crate::runtime::Runtime;
use crate::telemetry;
use crate::vendors::{Admitted, HopGate};

/// How long a kept upstream connection may take to become ready for the next request.
const REUSE_READY_TIMEOUT: Duration = Duration::from_secs(1);

/// Hop-by-hop headers that never cross the proxy, besides those `Connection` lists.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The upstream connection a client connection keeps between its requests.
#[derive(Debug)]
pub(super) struct Upstream {
    addr: SocketAddr,
    sender: SendRequest<ProxyBody>,
}

/// One client connection's kept upstream (HTTP/1 serves its requests one at a time).
pub(super) type UpstreamSlot = Arc<Mutex<Option<Upstream>>>;

/// Relay one absolute-form request, or refuse it; one decision line either way.
pub(super) async fn handle(
    proxy: &ForwardProxy,
    req: Request<Incoming>,
    client: SocketAddr,
    slot: &UpstreamSlot,
) -> Response<ProxyBody> {
    let started = Instant::now();
    let mut logged = LoggedUrl {
        raw: req.uri().clone(),
        checked: None,
    };
    let relayed = relay(proxy, req, slot, started, &mut logged.checked).await;
    let mut decision = Decision {
        proxy_type: "http",
        target: &logged,
        client,
        started,
        refusal: None,
        upstream: None,
        upstream_status: None,
    };
    match relayed {
        Ok((resp, upstream)) => {
            decision.upstream = Some(upstream);
            decision.upstream_status = Some(resp.status().as_u16());
            proxy.decide(&decision);
            resp
        }
        Err(refusal) => {
            decision.refusal = Some(&refusal);
            proxy.decide(&decision);
            refusal.response()
        }
    }
}

async fn relay(
    proxy: &ForwardProxy,
    req: Request<Incoming>,
    slot: &UpstreamSlot,
    started: Instant,
    checked: &mut Option<url::Url>,
) -> Result<(Response<ProxyBody>, SocketAddr), ProxyRefusal> {
    let rt = proxy.shared.runtime.load_full();
    let Admitted { target, addrs } = admit(proxy, &rt, req.uri()).await?;
    let port = target.port().unwrap_or(80);
    // Moved, not cloned: the log line formats it from here.
    let url: &url::Url = checked.insert(
        target
            .parsed
            .ok_or_else(|| ProxyRefusal::Protocol("failed to build the upstream URL".into()))?,
    );
    if let Some(target) = proxy.own.first_loop(&addrs, port) {
        return Err(ProxyRefusal::Loop { target });
    }
    let limits = proxy.limits.effective(&rt.policy);
    let (mut sender, addr) = checkout(slot, &addrs, port, limits.connect).await?;
    let deadline = started + limits.lifetime;
    let request = outbound(proxy, req, url, (limits.idle, deadline))?;
    let resp = timeout(limits.header, sender.send_request(request))
        .await
        .map_err(|_| ProxyRefusal::HeaderTimeout(limits.header))?
        .map_err(|e| ProxyRefusal::Protocol(e.to_string()))?;
    if let Ok(mut kept) = slot.lock() {
        *kept = Some(Upstream { addr, sender });
    }
    Ok((inbound(proxy, resp, (limits.idle, deadline)), addr))
}

/// The request URL as logs may show it (`scheme://host[:port]/path`: no query, fragment or
/// userinfo), formatted only when a line is written: from the checked URL once the gates
/// parsed it, else from the raw request target.
struct LoggedUrl {
    raw: Uri,
    checked: Option<url::Url>,
}

impl std::fmt::Display for LoggedUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some(url) = &self.checked else {
            return f.write_str(&telemetry::redact_url(&self.raw.to_string()));
        };
        write!(f, "{}://{}", url.scheme(), url.host_str().unwrap_or(""))?;
        if let Some(port) = url.port() {
            write!(f, ":{port}")?;
        }
        f.write_str(url.path())
    }
}

/// The scheme rules of this listener, the port allow-list, then the pipeline's URL gates.
async fn admit(proxy: &ForwardProxy, rt: &Runtime, uri: &Uri) -> Result<Admitted, ProxyRefusal> {
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => {
            return Err(ProxyRefusal::BadRequest(
                "https:// URLs go through a CONNECT tunnel (set HTTPS_PROXY to this listener); absolute-form https is not relayed".into(),
            ));
        }
        Some(other) => {
            return Err(ProxyRefusal::Gate(DenyReason::UnsupportedScheme {
                scheme: other.to_ascii_lowercase(),
            }));
        }
        None => {
            return Err(ProxyRefusal::BadRequest(
                "this is fleetgate's forward proxy: send absolute-form requests (GET http://host/path) or CONNECT host:port; origin-form requests are not served here".into(),
            ));
        }
    }
    // Before any DNS: the port of the request line, then again the canonical one.
    check_port(proxy, rt, uri.port_u16().unwrap_or(80))?;
    let admitted = Pipeline::new(rt, &proxy.shared.metrics)
        .admit(&uri.to_string())
        .await
        .map_err(ProxyRefusal::Gate)?;
    if let Some(port) = admitted.target.port() {
        check_port(proxy, rt, port)?;
    }
    Ok(admitted)
}

fn check_port(proxy: &ForwardProxy, rt: &Runtime, port: u16) -> Result<(), ProxyRefusal> {
    if rt.policy.egress.ports.contains(&port) {
        count_gate(&proxy.shared.metrics, "port", None);
        return Ok(());
    }
    let reason = DenyReason::PortNotAllowed { port };
    count_gate(&proxy.shared.metrics, "port", Some(&reason));
    Err(ProxyRefusal::Gate(reason))
}

/// Count one decision of a gate this module runs itself, like the pipeline counts its own.
pub(super) fn count_gate(metrics: &ProxyMetrics, gate: &str, refused: Option<&DenyReason>) {
    let (verdict, reason) = match refused {
        Some(r) => ("deny", r.code()),
        None => ("allow", "ok"),
    };
    metrics
        .gate_decisions
        .with_label_values(&[gate, verdict, reason])
        .inc();
}

/// The kept upstream when it is still open and went to one of this request's checked
/// addresses; otherwise a new pinned connection.
async fn checkout(
    slot: &UpstreamSlot,
    addrs: &[IpAddr],
    port: u16,
    connect_timeout: Duration,
) -> Result<(SendRequest<ProxyBody>, SocketAddr), ProxyRefusal> {
    let kept = slot.lock().ok().and_then(|mut s| s.take());
    if let Some(mut up) = kept {
        let same_target = up.addr.port() == port && addrs.contains(&up.addr.ip());
        // The common case, an idle kept connection, needs no timer.
        if same_target && up.sender.is_ready() {
            return Ok((up.sender, up.addr));
        }
        if same_target
            && !up.sender.is_closed()
            && matches!(
                timeout(REUSE_READY_TIMEOUT, up.sender.ready()).await,
                Ok(Ok(()))
            )
        {
            return Ok((up.sender, up.addr));
        }
    }
    let stream = connect_pinned(addrs, port, connect_timeout)
        .await
        .map_err(ProxyRefusal::Connect)?;
    let addr = stream
        .peer_addr()
        .map_err(|e| ProxyRefusal::Protocol(format!("failed to read the upstream address: {e}")))?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| ProxyRefusal::Protocol(e.to_string()))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, listener = LISTENER, "upstream connection ended with an error");
        }
    });
    Ok((sender, addr))
}

/// The request as the upstream sees it: origin-form target of the checked URL, `Host` from
/// that URL (RFC 9112 §3.2.2), hop-by-hop and proxy credentials removed, body streamed.
fn outbound(
    proxy: &ForwardProxy,
    req: Request<Incoming>,
    url: &url::Url,
    (idle, deadline): (Duration, Instant),
) -> Result<Request<ProxyBody>, ProxyRefusal> {
    let bad = |what: &str| ProxyRefusal::Protocol(format!("failed to build the upstream {what}"));
    let authority = &url[Position::BeforeHost..Position::AfterPort];
    let (mut parts, body) = req.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    parts.headers.insert(
        header::HOST,
        HeaderValue::from_str(authority).map_err(|_| bad("Host header"))?,
    );
    parts.uri = url[Position::BeforePath..Position::AfterQuery]
        .parse()
        .map_err(|_| bad("request target"))?;
    parts.version = Version::HTTP_11;
    parts.extensions = http::Extensions::new();
    let counter = proxy.counters.bytes_in.clone();
    let body = MeteredBody::new(body, counter, idle, deadline).boxed();
    Ok(Request::from_parts(parts, body))
}

/// The response as the client sees it: hop-by-hop headers and any upstream-forged
/// `x-fleetgate-error` removed, body streamed with the idle and lifetime limits.
fn inbound(
    proxy: &ForwardProxy,
    resp: Response<Incoming>,
    (idle, deadline): (Duration, Instant),
) -> Response<ProxyBody> {
    let (mut parts, body) = resp.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    parts.headers.remove(ERROR_HEADER);
    parts.extensions = http::Extensions::new();
    let counter = proxy.counters.bytes_out.clone();
    let body = MeteredBody::new(body, counter, idle, deadline).boxed();
    Response::from_parts(parts, body)
}

/// Remove the headers `Connection` names, then the fixed hop-by-hop set.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let listed: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in listed {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(*name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logged_urls_match_the_telemetry_redaction_with_or_without_a_checked_parse() {
        let cases = [
            "http://u:p@Example.COM:8080/a/b?token=x#frag",
            "http://example.com/",
            "http://127.0.0.1:80/x?y",
        ];
        for raw in cases {
            let uri: Uri = raw.parse().expect("test URI must parse");
            let want = telemetry::redact_url(raw);
            let unchecked = LoggedUrl {
                raw: uri.clone(),
                checked: None,
            };
            let checked = LoggedUrl {
                raw: uri,
                checked: Some(url::Url::parse(raw).expect("test URL must parse")),
            };
            assert_eq!(unchecked.to_string(), want, "{raw} before the gates");
            assert_eq!(checked.to_string(), want, "{raw} after the gates");
        }
    }

    #[test]
    fn hop_by_hop_headers_and_proxy_credentials_never_cross() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("connection", "keep-alive, X-Secret-Hop"),
            ("x-secret-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("proxy-connection", "keep-alive"),
            ("proxy-authorization", "Basic dTpw"),
            ("te", "trailers"),
            ("trailer", "x-sum"),
            ("upgrade", "websocket"),
            ("accept", "text/html"),
            ("authorization", "Bearer end-to-end"),
        ] {
            h.append(
                HeaderName::from_static(k),
                HeaderValue::from_str(v).expect("test header value"),
            );
        }
        strip_hop_by_hop(&mut h);
        let mut left: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        left.sort_unstable();
        assert_eq!(
            left,
            vec!["accept", "authorization"],
            "only end-to-end headers may remain"
        );
    }
}
