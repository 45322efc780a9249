//! One LLM call through the gate: route → provider → bounded request read → observe →
//! enforce (refuse / pin) → key swap → upstream → streamed, observed response.

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use tokio::time::{Instant, timeout};

use super::LlmContext;
use super::body::{Finish, ObservingBody};
use super::endpoint::LlmEndpoint;
use super::judge;
use super::request_facts::{self, RequestFacts};
use super::{LlmBody, LlmError, LlmRoute};
use crate::egress::relay::h1::strip_hop_by_hop;
use crate::judge::respond::ERROR_HEADER;
use crate::live::runtime::Runtime;
use crate::policy::llm::{LlmMode, LlmProvider, ProviderKind};

/// Headers that carry a provider key; whatever the agent sends there never leaves the gate.
const KEY_HEADERS: &[&str] = &["authorization", "x-api-key", "api-key", "x-goog-api-key"];

/// Serve one `/llm/...` request.
pub(crate) async fn handle(cx: LlmContext, req: Request<Incoming>) -> Response<LlmBody> {
    let started = Instant::now();
    let rt = cx.gate.runtime.load_full();
    let Some(route) = LlmRoute::parse(req.uri().path()) else {
        return LlmError::NotFound(req.uri().path().to_string()).response(None);
    };
    let Some(provider) = rt.policy.llm.provider_for(&route.role).cloned() else {
        return LlmError::RoleNotConfigured(route.role).response(None);
    };
    match relay(&cx, &rt, &route, &provider, req, started).await {
        Ok(resp) => resp,
        Err(e) => {
            tracing::warn!(
                event = "llm.error", role = %route.role, provider = %provider.name,
                code = e.code(), error = %e, "llm request answered by the gate"
            );
            e.response(Some(provider.kind))
        }
    }
}

async fn relay(
    cx: &LlmContext,
    rt: &Runtime,
    route: &LlmRoute,
    provider: &LlmProvider,
    req: Request<Incoming>,
    started: Instant,
) -> Result<Response<LlmBody>, LlmError> {
    let (parts, body) = req.into_parts();
    let judge = judge::Judge::new(cx, rt, route);
    let endpoint = judge::endpoint(&judge, &parts.method)?;
    let limit = usize::try_from(rt.policy.llm.max_request_bytes).unwrap_or(usize::MAX);
    // The hold keeps the body's room in the listener's budget until the call is answered.
    let (bytes, _hold) = crate::judge::request_body::read_for(&parts, body, limit, "llm")
        .await
        .map_err(LlmError::from)
        .inspect_err(|e| {
            if matches!(e, LlmError::TooLarge(_)) {
                // Refused in either mode: a body the gate cannot read whole cannot be forwarded.
                judge::count_refusal(cx, rt, route, e.code(), "refused");
            }
        })?;
    let bytes = {
        let with_body = judge.with_body(&bytes);
        if endpoint != LlmEndpoint::Metadata {
            judge::budget(&with_body, crate::base::clock::now_secs())?;
        }
        judge::prompt_secrets(&with_body, bytes.clone())?
    };
    let prepared = judge::prepare(&judge, provider, endpoint, bytes)?;
    let key = read_key(provider)?;
    let url = upstream_url(provider, &route.rest, parts.uri.query());
    let own = cx.gate.own_listeners();
    let mut conn = cx
        .llm
        .upstreams
        .connect(rt, &cx.gate.metrics, &own, &url)
        .await?;
    let request = outbound(parts, &url, provider.kind, &key, prepared.body)?;
    let sent = conn.sender.send_request(request);
    let resp = timeout(provider.header_timeout, sent)
        .await
        .map_err(|_| LlmError::Timeout(provider.header_timeout.as_secs()))?
        .map_err(|e| LlmError::Protocol(e.to_string()))?;
    cx.llm.upstreams.checkin(conn);
    let Some(facts) = &prepared.facts else {
        // Not a completion: relayed as it came, the observation left as it was.
        let (mut parts, body) = resp.into_parts();
        strip_hop_by_hop(&mut parts.headers);
        parts.headers.remove(ERROR_HEADER);
        let body = body
            .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
            .boxed();
        return Ok(Response::from_parts(parts, body));
    };
    let applied = rt.policy.llm.mode == LlmMode::Enforce;
    let seq =
        cx.llm
            .observations
            .record_sent(&route.role, &facts.shown(), &prepared.rewrites, applied);
    Ok(inbound(
        cx,
        rt,
        route,
        provider.kind,
        facts,
        seq,
        resp,
        started,
    ))
}

/// The provider key: the Secret file (trimmed), else the environment variable.
fn read_key(provider: &LlmProvider) -> Result<String, LlmError> {
    let from_file = provider
        .key_file
        .as_ref()
        .and_then(|p| crate::policy::file::read_regular_to_string(p).ok());
    let from_env = || {
        provider
            .key_env
            .as_ref()
            .and_then(|v| std::env::var(v).ok())
    };
    from_file
        .or_else(from_env)
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
        .ok_or_else(|| LlmError::KeyUnavailable(provider.name.clone()))
}

/// `baseUrl` + the path after the role + the query.
pub(crate) fn upstream_url(provider: &LlmProvider, rest: &str, query: Option<&str>) -> url::Url {
    let mut url = provider.base_url.clone();
    let path = format!("{}{rest}", provider.base_url.path().trim_end_matches('/'));
    url.set_path(&path);
    url.set_query(query);
    url
}

/// The upstream request: origin-form target, the provider's `Host`, the agent's headers
/// minus hop-by-hop and key headers, the gate's key, an identity encoding (so the served
/// tier can be read), and the (possibly rewritten) body.
fn outbound(
    parts: http::request::Parts,
    url: &url::Url,
    kind: ProviderKind,
    key: &str,
    body: Bytes,
) -> Result<Request<Full<Bytes>>, LlmError> {
    let bad = |what: &str| LlmError::Protocol(format!("failed to build the upstream {what}"));
    let mut headers = parts.headers;
    strip_hop_by_hop(&mut headers);
    for name in KEY_HEADERS {
        headers.remove(*name);
    }
    headers.remove(header::CONTENT_LENGTH);
    let authority = &url[url::Position::BeforeHost..url::Position::AfterPort];
    headers.insert(
        header::HOST,
        HeaderValue::from_str(authority).map_err(|_| bad("Host header"))?,
    );
    headers.insert(
        header::ACCEPT_ENCODING,
        HeaderValue::from_static("identity"),
    );
    insert_key(&mut headers, kind, key).map_err(|_| bad("key header"))?;
    let target = &url[url::Position::BeforePath..url::Position::AfterQuery];
    let mut req = Request::builder()
        .method(parts.method)
        .uri(target)
        .body(Full::new(body))
        .map_err(|_| bad("request"))?;
    *req.headers_mut() = headers;
    Ok(req)
}

fn insert_key(
    headers: &mut HeaderMap,
    kind: ProviderKind,
    key: &str,
) -> Result<(), http::header::InvalidHeaderValue> {
    let (name, value) = match kind {
        ProviderKind::Anthropic => (HeaderName::from_static("x-api-key"), key.to_string()),
        _ => (header::AUTHORIZATION, format!("Bearer {key}")),
    };
    let mut value = HeaderValue::from_str(&value)?;
    value.set_sensitive(true);
    headers.insert(name, value);
    Ok(())
}

/// The response for the agent: hop-by-hop headers and any forged `x-fleetgate-error`
/// removed, the body streamed through the tier scanner; the request counted.
#[allow(clippy::too_many_arguments)]
fn inbound(
    cx: &LlmContext,
    rt: &Runtime,
    route: &LlmRoute,
    kind: ProviderKind,
    facts: &RequestFacts,
    seq: u64,
    resp: Response<Incoming>,
    started: Instant,
) -> Response<LlmBody> {
    let policy = &rt.policy.llm;
    let role_label = request_facts::role_label(policy, &route.role);
    let model = request_facts::model_label(policy, facts.model.as_deref());
    let m = &cx.llm.metrics;
    m.requests
        .with_label_values(&[
            role_label.as_str(),
            model.as_str(),
            request_facts::effort_label(facts.effort.as_deref()),
            request_facts::tier_label(facts.service_tier.as_deref()),
        ])
        .inc();
    m.first_byte
        .with_label_values(&[role_label.as_str()])
        .observe(started.elapsed().as_secs_f64());
    let (mut parts, body) = resp.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    parts.headers.remove(ERROR_HEADER);
    let finish = Finish {
        cx: cx.clone(),
        role: route.role.clone(),
        role_label,
        model_label: model,
        model: facts.model.clone(),
        requested_tier: facts.service_tier.clone(),
        kind,
        seq,
        status_class: status_class(parts.status),
        pinned_tier: policy
            .pin_for(&route.role)
            .and_then(|pin| pin.service_tier.clone()),
    };
    let body = ObservingBody::new(body, finish)
        .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
        .boxed();
    Response::from_parts(parts, body)
}

fn status_class(status: http::StatusCode) -> &'static str {
    match status.as_u16() {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}
