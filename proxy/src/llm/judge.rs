//! The fleet policy applied to one request before it goes upstream: the path and endpoint
//! (a closed list in enforce mode), then the body of a judged endpoint: read without a tree
//! ([`super::scan`]), its model checked against `llm.allowedModels`, duplicate judged keys
//! refused, the role's pins written. Observe mode counts the same decisions as "would" and
//! forwards the request as sent.

use bytes::Bytes;

use super::endpoint::LlmEndpoint;
use super::enforce::{self, Edits, Rewrite};
use super::request_facts::{self, RequestFacts};
use super::scan::{self, ObjectScan, Rewriter};
use super::{LlmContext, LlmError, LlmRoute, path};
use crate::policy::llm::{LlmMode, LlmPolicy, LlmProvider};
use crate::runtime::Runtime;

/// The request after observation and enforcement, ready to go upstream.
#[derive(Debug)]
pub struct Prepared {
    /// The body sent upstream.
    pub body: Bytes,
    /// What a completion call said about itself; `None` for every other call (judged
    /// endpoints that are not completions, model lists, named endpoints), which leaves the
    /// role's observation as it was.
    pub facts: Option<RequestFacts>,
    /// Pinned fields written (or, in observe mode, that would be).
    pub rewrites: Vec<Rewrite>,
}

/// The endpoint of a request, judged by its decoded path: in enforce mode a path that is not
/// its own normal form, or an endpoint outside the closed list, is refused.
pub fn endpoint(
    cx: &LlmContext,
    rt: &Runtime,
    route: &LlmRoute,
    method: &http::Method,
) -> Result<LlmEndpoint, LlmError> {
    // Judged as a decoding provider routes it; in enforce mode only a path that is already
    // its own normal form goes out, so the path judged is the path sent.
    let judged_path = path::normalize(&route.rest);
    if !path::is_canonical(&route.rest) {
        let message = "fleetgate: the provider path must be plain: no percent-encoding, '.', '..' or empty segments, ';' or '\\'";
        judge(
            cx,
            rt,
            route,
            LlmError::PathNotCanonical(message.into()),
            None,
        )?;
    }
    let endpoint = LlmEndpoint::classify(method, &judged_path, &rt.policy.llm);
    if endpoint == LlmEndpoint::Unknown {
        let message = format!(
            "fleetgate: {method} on this path is not an endpoint the gate judges (completions, responses, messages, message batches, complete, embeddings, image generations, token counts, model lists); the fleet policy can name others in llm.extraEndpoints"
        );
        judge(cx, rt, route, LlmError::EndpointNotAllowed(message), None)?;
    }
    Ok(endpoint)
}

/// Judge the body of a judged endpoint and write the role's pins (enforce mode); every other
/// body is relayed untouched.
pub fn prepare(
    cx: &LlmContext,
    rt: &Runtime,
    route: &LlmRoute,
    provider: &LlmProvider,
    endpoint: LlmEndpoint,
    bytes: Bytes,
) -> Result<Prepared, LlmError> {
    let untouched = |body| Prepared {
        body,
        facts: None,
        rewrites: Vec::new(),
    };
    if !endpoint.is_judged() {
        return Ok(untouched(bytes));
    }
    let schema = match endpoint {
        LlmEndpoint::MessageBatch => &scan::BATCH,
        _ => &scan::COMPLETION,
    };
    let Some((text, scan)) = scan_body(&bytes, schema) else {
        let why = "fleetgate: the request is not a JSON object, so its model cannot be checked against the fleet policy";
        judge(cx, rt, route, LlmError::BadRequest(why.into()), None)?;
        return Ok(untouched(bytes));
    };
    refuse_duplicates(cx, rt, route, &scan, "")?;
    let judged = match endpoint {
        LlmEndpoint::MessageBatch => judge_batch(cx, rt, route, provider, text, &scan)?,
        _ => judge_request(cx, rt, route, provider, endpoint, text, &scan)?,
    };
    let (facts, rewrites, rewritten) = judged;
    let body = rewritten.map_or(bytes, Bytes::from);
    Ok(Prepared {
        body,
        facts,
        rewrites,
    })
}

/// What judging a body gives: the facts of a completion, the rewrites, the rewritten body.
type Judged = (Option<RequestFacts>, Vec<Rewrite>, Option<String>);

/// One request object (a completion, or a model-only call): the model, then the pins.
fn judge_request(
    cx: &LlmContext,
    rt: &Runtime,
    route: &LlmRoute,
    provider: &LlmProvider,
    endpoint: LlmEndpoint,
    text: &str,
    scan: &ObjectScan<'_>,
) -> Result<Judged, LlmError> {
    let policy = &rt.policy.llm;
    let model = scan.str_at(&["model"]);
    judge_model(cx, rt, route, model.as_deref(), "the request")?;
    if endpoint != LlmEndpoint::Completion {
        return Ok((None, Vec::new(), None));
    }
    let facts = RequestFacts::of(scan);
    let enforce = policy.mode == LlmMode::Enforce;
    let (rewrites, rewritten) = match policy.pin_for(&route.role) {
        Some(pin) if enforce => enforce::rewrite(pin, provider.kind, &route.rest, text, scan),
        Some(pin) => (
            enforce::pin_rewrites(pin, provider.kind, &route.rest, scan, None),
            None,
        ),
        None => (Vec::new(), None),
    };
    log_rewrites(cx, rt, route, &rewrites);
    let facts = match &rewritten {
        Some(body) => scan_body(body.as_bytes(), &scan::COMPLETION)
            .map(|(_, scan)| RequestFacts::of(&scan))
            .unwrap_or(facts),
        None => facts,
    };
    Ok((Some(facts), rewrites, rewritten))
}

/// An Anthropic message batch: every entry must be an object whose `params` is a request
/// the policy allows; the role's pins are written into each one. Entries are judged as they
/// are read, so a batch costs no more than one entry's record.
fn judge_batch(
    cx: &LlmContext,
    rt: &Runtime,
    route: &LlmRoute,
    provider: &LlmProvider,
    text: &str,
    scan: &ObjectScan<'_>,
) -> Result<Judged, LlmError> {
    let policy = &rt.policy.llm;
    let enforce = policy.mode == LlmMode::Enforce;
    let pin = policy.pin_for(&route.role);
    let Some(requests) = scan.get("requests").filter(|m| m.raw.starts_with('[')) else {
        let why = "fleetgate: the message batch has no `requests` array, so its models cannot be checked against the fleet policy";
        judge(cx, rt, route, LlmError::BadRequest(why.into()), None)?;
        return Ok((None, Vec::new(), None));
    };
    let mut rewriter: Option<Rewriter<'_>> = None;
    let mut rewrites: Vec<Rewrite> = Vec::new();
    let walked = scan::for_each_item(requests.raw, |i, item| {
        let what = format!("batch request {i}");
        let entry = item
            .starts_with('{')
            .then(|| scan::scan_object(text, item, &scan::BATCH_ITEM).ok())
            .flatten();
        if let Some(entry) = &entry {
            refuse_duplicates(cx, rt, route, entry, &format!("requests[{i}]."))?;
        }
        let Some(params) = entry.as_ref().and_then(|e| e.get("params")) else {
            let why = format!(
                "fleetgate: {what} is not an object with a `params` object, so its model cannot be checked against the fleet policy"
            );
            return judge(cx, rt, route, LlmError::BadRequest(why), None);
        };
        let Some(params) = &params.object else {
            let why = format!("fleetgate: the `params` of {what} is not an object");
            return judge(cx, rt, route, LlmError::BadRequest(why), None);
        };
        let model = params.str_at(&["model"]);
        judge_model(cx, rt, route, model.as_deref(), &what)?;
        let Some(pin) = pin else {
            return Ok(());
        };
        let mut edits = Edits::default();
        let edit = enforce.then_some(&mut edits);
        for r in enforce::pin_rewrites(pin, provider.kind, "/v1/messages", params, edit) {
            if !rewrites.iter().any(|have| have.field == r.field) {
                rewrites.push(r);
            }
        }
        if !edits.is_empty() {
            let mut splices = Vec::new();
            edits.splices(text, params, &mut splices);
            rewriter
                .get_or_insert_with(|| Rewriter::new(text))
                .apply(splices);
        }
        Ok(())
    });
    match walked {
        Ok(judged) => judged?,
        Err(_) => {
            let why = "fleetgate: the message batch's `requests` is not a JSON array";
            judge(cx, rt, route, LlmError::BadRequest(why.into()), None)?;
        }
    }
    log_rewrites(cx, rt, route, &rewrites);
    Ok((None, rewrites, rewriter.map(Rewriter::finish)))
}

/// Refuse (or count) a judged key seen twice in `scan`; `at` prefixes the reported path.
fn refuse_duplicates(
    cx: &LlmContext,
    rt: &Runtime,
    route: &LlmRoute,
    scan: &ObjectScan<'_>,
    at: &str,
) -> Result<(), LlmError> {
    let Some(key) = scan.first_duplicate() else {
        return Ok(());
    };
    let message = format!(
        "fleetgate: the request has the key '{at}{key}' more than once; providers differ on which one counts, so the gate cannot judge it"
    );
    judge(cx, rt, route, LlmError::DuplicateKey(message), None)
}

/// Refuse (or count) a model outside `llm.allowedModels`, or a missing one when the list is
/// set (a provider would fall back to its own default). `what` names the request.
fn judge_model(
    cx: &LlmContext,
    rt: &Runtime,
    route: &LlmRoute,
    model: Option<&str>,
    what: &str,
) -> Result<(), LlmError> {
    let policy: &LlmPolicy = &rt.policy.llm;
    match (model, policy.allowed_models.is_empty()) {
        (Some(model), _) => match enforce::model_refusal(policy, Some(model)) {
            Some(message) => judge(
                cx,
                rt,
                route,
                LlmError::ModelNotAllowed(message),
                Some(model),
            ),
            None => Ok(()),
        },
        (None, false) => {
            let message = format!(
                "fleetgate: {what} names no model (or not as a string); the fleet policy allows only {}",
                policy.allowed_models.join(", ")
            );
            judge(cx, rt, route, LlmError::ModelMissing(message), None)
        }
        (None, true) => Ok(()),
    }
}

/// A request outside the fleet policy: counted and logged; in enforce mode refused (the
/// error comes back), in observe mode counted as `would_refuse` and let through.
pub fn judge(
    cx: &LlmContext,
    rt: &Runtime,
    route: &LlmRoute,
    refusal: LlmError,
    model: Option<&str>,
) -> Result<(), LlmError> {
    let enforce = rt.policy.llm.mode == LlmMode::Enforce;
    let action = if enforce { "refused" } else { "would_refuse" };
    count_refusal(cx, rt, route, refusal.code(), action);
    let model = model.map(request_facts::shown).unwrap_or_default();
    tracing::warn!(
        event = "llm.refusal", role = %route.role, action, code = refusal.code(),
        model, "request outside the fleet policy"
    );
    if enforce {
        cx.llm.observations.record_refused(&route.role);
        return Err(refusal);
    }
    Ok(())
}

/// Count a refusal (`refused`) or a would-be one (`would_refuse`) of `code` for the role.
pub fn count_refusal(cx: &LlmContext, rt: &Runtime, route: &LlmRoute, code: &str, action: &str) {
    let role_label = request_facts::role_label(&rt.policy.llm, &route.role);
    cx.llm
        .metrics
        .refusals
        .with_label_values(&[role_label.as_str(), code, action])
        .inc();
}

/// The body scanned for what `schema` judges: `None` when it is not UTF-8 holding exactly
/// one JSON object.
fn scan_body<'a>(
    bytes: &'a [u8],
    schema: &'static scan::Schema,
) -> Option<(&'a str, ObjectScan<'a>)> {
    let text = std::str::from_utf8(bytes).ok()?;
    let scan = scan::scan_object(text, text, schema).ok()?;
    Some((text, scan))
}

fn log_rewrites(cx: &LlmContext, rt: &Runtime, route: &LlmRoute, rewrites: &[Rewrite]) {
    let enforce = rt.policy.llm.mode == LlmMode::Enforce;
    let action = if enforce {
        "rewritten"
    } else {
        "would_rewrite"
    };
    let role_label = request_facts::role_label(&rt.policy.llm, &route.role);
    for r in rewrites {
        cx.llm
            .metrics
            .rewrites
            .with_label_values(&[role_label.as_str(), r.field, action])
            .inc();
        tracing::info!(
            event = "llm.rewrite", role = %route.role, action, field = r.field,
            from = r.from.as_deref().unwrap_or("unset"), to = %r.to, "pinned field"
        );
    }
}
