//! The fleet policy applied to one request before it goes upstream: the path and endpoint
//! (a closed list in enforce mode), then the body of a judged endpoint: read without a tree
//! ([`super::scan`]), its model checked against `llm.allowedModels`, duplicate judged keys
//! refused, its provider-side tools judged ([`super::provider_tools`]), the role's pins
//! written. Observe mode counts the same decisions as "would" and forwards the request as
//! sent.
//!
//! Refusals are counted per attempt and per turn: a refused request that is a further attempt
//! of a turn refused moments before ([`super::turns`]) counts as an attempt only, and its
//! `llm.refusal` line says `retry_of_refusal: true`.

use std::cell::OnceCell;

use bytes::Bytes;
use tokio::time::Instant;

use super::endpoint::LlmEndpoint;
use super::enforce::{self, Edits, Rewrite};
use super::provider_tools;
use super::request_facts::{self, RequestFacts};
use super::scan::{self, ObjectScan, Rewriter};
use super::turns;
use super::{LlmContext, LlmError, LlmRoute, path};
use crate::live::runtime::Runtime;
use crate::policy::llm::{LlmMode, LlmPolicy, LlmProvider, ProviderToolsMode};

/// One request under judgement: the route's state, the policy of the moment, and — once it
/// is read — the body, which ties a refusal to its turn. Its `Debug` never shows the body.
pub(crate) struct Judge<'a> {
    /// The route's state.
    pub(crate) cx: &'a LlmContext,
    /// The policy of the moment.
    pub(crate) rt: &'a Runtime,
    /// The role and provider path.
    pub(crate) route: &'a LlmRoute,
    body: Option<&'a [u8]>,
    /// Whether this request is a further attempt of a refused turn, decided (and the turn
    /// recorded) at its first refusal.
    retry: OnceCell<bool>,
}

// === impl Judge ===

impl std::fmt::Debug for Judge<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Judge")
            .field("route", self.route)
            .field("body_bytes", &self.body.map(<[u8]>::len))
            .field("retry", &self.retry.get())
            .finish_non_exhaustive()
    }
}

impl<'a> Judge<'a> {
    /// A request whose body is not read (yet): its refusals are never further attempts.
    pub(crate) fn new(cx: &'a LlmContext, rt: &'a Runtime, route: &'a LlmRoute) -> Self {
        Self {
            cx,
            rt,
            route,
            body: None,
            retry: OnceCell::new(),
        }
    }

    /// The same request with its body read.
    pub(crate) fn with_body(&self, body: &'a [u8]) -> Self {
        Self {
            body: Some(body),
            ..Self::new(self.cx, self.rt, self.route)
        }
    }

    /// Whether this refused request is a further attempt of a turn refused within the
    /// window; the first call records its turn.
    fn retry_of_refusal(&self) -> bool {
        *self.retry.get_or_init(|| {
            self.body.is_some_and(|body| {
                let key = turns::turn_key(&self.route.role, &self.route.rest, body);
                self.cx.llm.turns.refused(key, Instant::now())
            })
        })
    }

    /// A request outside the fleet policy: counted and logged; in enforce mode refused (the
    /// error comes back), in observe mode counted as `would_refuse` and let through. `model`
    /// and `tool` name what was judged, for the log line.
    pub(crate) fn judge(
        &self,
        refusal: LlmError,
        model: Option<&str>,
        tool: Option<&str>,
    ) -> Result<(), LlmError> {
        let enforce = self.rt.policy.llm.mode == LlmMode::Enforce;
        let action = if enforce { "refused" } else { "would_refuse" };
        let retry = self.retry_of_refusal();
        count(self.cx, self.rt, self.route, refusal.code(), action, retry);
        let model = model.map(request_facts::shown).unwrap_or_default();
        let tool = tool.unwrap_or_default();
        tracing::warn!(
            event = "llm.refusal", role = %self.route.role, action, code = refusal.code(),
            model, tool, retry_of_refusal = retry, "request outside the fleet policy"
        );
        if enforce {
            self.cx
                .llm
                .observations
                .record_refused(&self.route.role, retry);
            return Err(refusal);
        }
        Ok(())
    }
}

/// The request after observation and enforcement, ready to go upstream.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// The body sent upstream.
    pub(crate) body: Bytes,
    /// What a completion call said about itself; `None` for every other call (judged
    /// endpoints that are not completions, model lists, named endpoints), which leaves the
    /// role's observation as it was.
    pub(crate) facts: Option<RequestFacts>,
    /// Pinned fields written (or, in observe mode, that would be).
    pub(crate) rewrites: Vec<Rewrite>,
}

/// The endpoint of a request, judged by its decoded path: in enforce mode a path that is not
/// its own normal form, or an endpoint outside the closed list, is refused.
pub(crate) fn endpoint(j: &Judge<'_>, method: &http::Method) -> Result<LlmEndpoint, LlmError> {
    let (route, rt) = (j.route, j.rt);
    // Judged as a decoding provider routes it; in enforce mode only a path that is already
    // its own normal form goes out, so the path judged is the path sent.
    let judged_path = path::normalize(&route.rest);
    if !path::is_canonical(&route.rest) {
        let message = "fleetgate: the provider path must be plain: no percent-encoding, '.', '..' or empty segments, ';' or '\\'";
        j.judge(LlmError::PathNotCanonical(message.into()), None, None)?;
    }
    let endpoint = LlmEndpoint::classify(method, &judged_path, &rt.policy.llm);
    if endpoint == LlmEndpoint::Unknown {
        let message = format!(
            "fleetgate: {method} on this path is not an endpoint the gate judges (completions, responses, messages, message batches, complete, embeddings, image generations, token counts, model lists); the fleet policy can name others in llm.extraEndpoints"
        );
        j.judge(LlmError::EndpointNotAllowed(message), None, None)?;
    }
    Ok(endpoint)
}

/// Judge the body of a judged endpoint and write the role's pins (enforce mode); every other
/// body is relayed untouched.
pub(crate) fn prepare(
    j: &Judge<'_>,
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
    let j = j.with_body(&bytes);
    let Some((text, scan)) = scan_body(&bytes, schema) else {
        let why = "fleetgate: the request is not a JSON object, so its model cannot be checked against the fleet policy";
        j.judge(LlmError::BadRequest(why.into()), None, None)?;
        return Ok(untouched(bytes.clone()));
    };
    refuse_duplicates(&j, &scan, "")?;
    let judged = match endpoint {
        LlmEndpoint::MessageBatch => judge_batch(&j, provider, text, &scan)?,
        _ => judge_request(&j, provider, endpoint, text, &scan)?,
    };
    let (facts, rewrites, rewritten) = judged;
    let body = rewritten.map_or_else(|| bytes.clone(), Bytes::from);
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
    j: &Judge<'_>,
    provider: &LlmProvider,
    endpoint: LlmEndpoint,
    text: &str,
    scan: &ObjectScan<'_>,
) -> Result<Judged, LlmError> {
    let (rt, route) = (j.rt, j.route);
    let policy = &rt.policy.llm;
    let model = scan.str_at(&["model"]);
    judge_model(j, model.as_deref(), "the request")?;
    if endpoint != LlmEndpoint::Completion {
        return Ok((None, Vec::new(), None));
    }
    judge_tools(j, text, scan, "")?;
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
    log_rewrites(j.cx, rt, route, &rewrites);
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
    j: &Judge<'_>,
    provider: &LlmProvider,
    text: &str,
    scan: &ObjectScan<'_>,
) -> Result<Judged, LlmError> {
    let (rt, route) = (j.rt, j.route);
    let policy = &rt.policy.llm;
    let enforce = policy.mode == LlmMode::Enforce;
    let pin = policy.pin_for(&route.role);
    let Some(requests) = scan.get("requests").filter(|m| m.raw.starts_with('[')) else {
        let why = "fleetgate: the message batch has no `requests` array, so its models cannot be checked against the fleet policy";
        j.judge(LlmError::BadRequest(why.into()), None, None)?;
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
            refuse_duplicates(j, entry, &format!("requests[{i}]."))?;
        }
        let Some(params) = entry.as_ref().and_then(|e| e.get("params")) else {
            let why = format!(
                "fleetgate: {what} is not an object with a `params` object, so its model cannot be checked against the fleet policy"
            );
            return j.judge(LlmError::BadRequest(why), None, None);
        };
        let Some(params) = &params.object else {
            let why = format!("fleetgate: the `params` of {what} is not an object");
            return j.judge(LlmError::BadRequest(why), None, None);
        };
        let model = params.str_at(&["model"]);
        judge_model(j, model.as_deref(), &what)?;
        judge_tools(j, text, params, &format!("requests[{i}].params."))?;
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
            j.judge(LlmError::BadRequest(why.into()), None, None)?;
        }
    }
    log_rewrites(j.cx, rt, route, &rewrites);
    Ok((None, rewrites, rewriter.map(Rewriter::finish)))
}

/// Refuse (or count) a judged key seen twice in `scan`; `at` prefixes the reported path.
fn refuse_duplicates(j: &Judge<'_>, scan: &ObjectScan<'_>, at: &str) -> Result<(), LlmError> {
    let Some(key) = scan.first_duplicate() else {
        return Ok(());
    };
    refuse_duplicate(j, &format!("{at}{key}"))
}

fn refuse_duplicate(j: &Judge<'_>, key: &str) -> Result<(), LlmError> {
    let message = format!(
        "fleetgate: the request has the key '{key}' more than once; providers differ on which one counts, so the gate cannot judge it"
    );
    j.judge(LlmError::DuplicateKey(message), None, None)
}

/// Judge the provider-side tools of the request object `scan` (the request, or a batch
/// entry's `params` at `at`) as `llm.providerTools` says for the role: `allow` reads nothing,
/// `observe` counts and logs each tool, `refuse` refuses the request naming every tool (in
/// observe mode: counts it as `would_refuse`).
fn judge_tools(j: &Judge<'_>, body: &str, scan: &ObjectScan<'_>, at: &str) -> Result<(), LlmError> {
    let (rt, route) = (j.rt, j.route);
    let mode = rt.policy.llm.provider_tools_for(&route.role);
    if mode == ProviderToolsMode::Allow {
        return Ok(());
    }
    let tools = match provider_tools::of(body, scan) {
        Ok(tools) => tools,
        Err(key) => return refuse_duplicate(j, &format!("{at}{key}")),
    };
    if tools.is_empty() {
        return Ok(());
    }
    let enforce = rt.policy.llm.mode == LlmMode::Enforce;
    let action = match (mode, enforce) {
        (ProviderToolsMode::Refuse, true) => "refused",
        (ProviderToolsMode::Refuse, false) => "would_refuse",
        _ => "observed",
    };
    let role_label = request_facts::role_label(&rt.policy.llm, &route.role);
    for tool in &tools {
        j.cx.llm
            .metrics
            .provider_tools
            .with_label_values(&[role_label.as_str(), tool.label, action])
            .inc();
        if mode == ProviderToolsMode::Observe {
            tracing::info!(
                event = "llm.provider_tool", role = %route.role, action, tool = %tool.name,
                label = tool.label, "a provider-side tool: the provider fetches what no gate sees"
            );
        }
    }
    if mode != ProviderToolsMode::Refuse {
        return Ok(());
    }
    let names: Vec<String> = tools.iter().map(|t| format!("'{}'", t.name)).collect();
    let policy = rt
        .policy
        .llm
        .policy_name
        .as_deref()
        .map(|n| format!("fleet policy '{n}'"))
        .unwrap_or_else(|| "the fleet policy".into());
    let message = format!(
        "fleetgate: the provider-side tool {} is not allowed for role '{}' by {policy} (llm.providerTools: refuse): the provider would fetch what no gate sees",
        names.join(", "),
        route.role
    );
    let shown = tools
        .iter()
        .map(|t| t.name.as_str())
        .collect::<Vec<_>>()
        .join(",");
    j.judge(
        LlmError::ProviderToolNotAllowed(message),
        None,
        Some(shown.as_str()),
    )
}

/// Refuse (or count) a model outside `llm.allowedModels`, or a missing one when the list is
/// set (a provider would fall back to its own default). `what` names the request.
fn judge_model(j: &Judge<'_>, model: Option<&str>, what: &str) -> Result<(), LlmError> {
    let policy: &LlmPolicy = &j.rt.policy.llm;
    match (model, policy.allowed_models.is_empty()) {
        (Some(model), _) => match enforce::model_refusal(policy, Some(model)) {
            Some(message) => j.judge(LlmError::ModelNotAllowed(message), Some(model), None),
            None => Ok(()),
        },
        (None, false) => {
            let message = format!(
                "fleetgate: {what} names no model (or not as a string); the fleet policy allows only {}",
                policy.allowed_models.join(", ")
            );
            j.judge(LlmError::ModelMissing(message), None, None)
        }
        (None, true) => Ok(()),
    }
}

/// Count a refusal (`refused`) or a would-be one (`would_refuse`) of `code` for the role,
/// decided before the body is read (so never a further attempt of a refused turn).
pub(crate) fn count_refusal(
    cx: &LlmContext,
    rt: &Runtime,
    route: &LlmRoute,
    code: &str,
    action: &str,
) {
    count(cx, rt, route, code, action, false);
}

/// Count one refused attempt, and the refused turn unless it is a further attempt of one.
fn count(cx: &LlmContext, rt: &Runtime, route: &LlmRoute, code: &str, action: &str, retry: bool) {
    let role_label = request_facts::role_label(&rt.policy.llm, &route.role);
    let labels = [role_label.as_str(), code, action];
    let metrics = &cx.llm.metrics;
    metrics.refusal_attempts.with_label_values(&labels).inc();
    if !retry {
        metrics.refusals.with_label_values(&labels).inc();
    }
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

/// The role's budgets, before the call goes upstream: over a budget, the call is refused
/// with `llm_budget_exceeded` (429; `Retry-After` when a tokens-per-minute window frees up
/// within the minute, none for a daily dollar budget) in enforce mode and
/// counted as `would_refuse` in observe mode.
pub(crate) fn budget(j: &Judge<'_>, now: u64) -> Result<(), LlmError> {
    let policy = &j.rt.policy.llm;
    let Err(over) = j.cx.llm.spend.check(&j.route.role, &policy.budgets, now) else {
        return Ok(());
    };
    let by = policy
        .policy_name
        .as_deref()
        .map(|n| format!("fleet policy '{n}'"))
        .unwrap_or_else(|| "the fleet policy".into());
    let message = match over.limit {
        "tokens_per_minute" => format!(
            "fleetgate: role '{}' used {} tokens in the last minute, its {} budget under {by} is {} tokens per minute; retry in {} s",
            over.role, over.used, over.scope, over.cap, over.retry_after
        ),
        "spend_file_unreadable" => format!(
            "fleetgate: role '{}' has a daily budget of ${:.2} under {by}, and the gate's spend file could not be read, so today's spend is unknown: calls are refused until 00:00 UTC (the operator can check the gate's log)",
            over.role, over.cap
        ),
        _ => format!(
            "fleetgate: the daily {} budget of role '{}' under {by} is spent (${:.2} of ${:.2}); it resets at 00:00 UTC",
            over.scope,
            over.role,
            over.used.max(over.cap),
            over.cap
        ),
    };
    let retry_after = (over.limit == "tokens_per_minute").then_some(over.retry_after);
    j.judge(LlmError::BudgetExceeded(message, retry_after), None, None)
}

/// Secrets in the request body ([`super::prompt_secrets`]), as `llm.secrets` says: `refuse`
/// refuses the request naming the rule (in observe mode: counted as `would_refuse`),
/// `redact` sends the body with each secret replaced (refused when one cannot be),
/// `observe` counts and logs. Rules of rule files in report mode only count. Returns the
/// body to judge and send.
pub(crate) fn prompt_secrets(j: &Judge<'_>, bytes: Bytes) -> Result<Bytes, LlmError> {
    use super::prompt_secrets::{Finding, scan};
    use crate::policy::llm::SecretsMode;
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return Ok(bytes);
    };
    let Finding::Secrets {
        rules,
        report_only,
        redacted,
    } = scan(text, &j.rt.policy.secrets)
    else {
        return Ok(bytes);
    };
    let policy = &j.rt.policy.llm;
    let enforce = policy.mode == LlmMode::Enforce;
    let action = match (report_only, policy.secrets, enforce) {
        (true, ..) | (false, SecretsMode::Observe, _) => "observed",
        (false, SecretsMode::Refuse, true) => "refused",
        (false, SecretsMode::Refuse, false) => "would_refuse",
        (false, SecretsMode::Redact, true) if redacted.is_some() => "redacted",
        (false, SecretsMode::Redact, true) => "refused",
        (false, SecretsMode::Redact, false) => "would_redact",
    };
    let role_label = request_facts::role_label(policy, &j.route.role);
    for rule in &rules {
        j.cx.llm
            .metrics
            .prompt_secrets
            .with_label_values(&[role_label.as_str(), rule.as_str(), action])
            .inc();
    }
    let shown = rules.join(",");
    tracing::warn!(
        event = "llm.prompt_secret", role = %j.route.role, action, rules = %shown,
        "a secret in the request body"
    );
    match action {
        "redacted" => Ok(redacted.map(Bytes::from).unwrap_or(bytes)),
        "refused" | "would_refuse" => {
            let by = policy
                .policy_name
                .as_deref()
                .map(|n| format!("fleet policy '{n}'"))
                .unwrap_or_else(|| "the fleet policy".into());
            let named: Vec<String> = rules.iter().map(|r| format!("'{r}'")).collect();
            let why = match policy.secrets {
                SecretsMode::Redact => format!(
                    "{by} redacts secrets in prompts (llm.secrets: redact), but this one cannot be replaced in place (it is written with JSON escapes)"
                ),
                _ => format!("{by} refuses secrets in prompts (llm.secrets: refuse)"),
            };
            let message = format!(
                "fleetgate: the request holds a secret matching rule {} in its prompt; {why}. Remove it and retry",
                named.join(", ")
            );
            j.judge(LlmError::SecretInPrompt(message), None, None)?;
            Ok(bytes)
        }
        _ => Ok(bytes),
    }
}
