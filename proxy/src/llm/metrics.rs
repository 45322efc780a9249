//! The LLM route's metrics. Label values are bounded: roles and tasks from a fixed set,
//! models only when the policy names them (else `other`), efforts and tiers from their
//! vocabularies (else `other`).

use prometheus::{
    CounterVec, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry,
};

/// Metrics of the LLM route.
#[derive(Clone, Debug)]
pub(crate) struct LlmMetrics {
    /// `fleetgate_llm_requests_total{role,model,effort,tier}`: requests sent upstream, with
    /// the effort and requested tier on the wire.
    pub(crate) requests: IntCounterVec,
    /// `fleetgate_llm_responses_total{role,status_class,served_tier}`: responses by the tier
    /// the provider says it served.
    pub(crate) responses: IntCounterVec,
    /// `fleetgate_llm_rewrites_total{role,field,action}`: pinned fields written (`rewritten`)
    /// or, in observe mode, that would have been (`would_rewrite`).
    pub(crate) rewrites: IntCounterVec,
    /// `fleetgate_llm_refusals_total{role,code,action}`: refused turns (`refused`) or, in
    /// observe mode, turns enforce mode would refuse (`would_refuse`): a further attempt of a
    /// turn refused within the last minute is not counted again ([`super::turns`]).
    pub(crate) refusals: IntCounterVec,
    /// `fleetgate_llm_refusal_attempts_total{role,code,action}`: every refused (or would-be
    /// refused) request, further attempts of a turn included.
    pub(crate) refusal_attempts: IntCounterVec,
    /// `fleetgate_llm_provider_tools_total{role,tool,action}`: requests naming a provider-side
    /// tool, per tool label ([`super::provider_tools::LABELS`]), `observed`, `refused` or
    /// `would_refuse`.
    pub(crate) provider_tools: IntCounterVec,
    /// `fleetgate_llm_time_to_first_byte_seconds{role}`: request start to the response head.
    pub(crate) first_byte: HistogramVec,
    /// `fleetgate_llm_tier_mismatches_total{role,served_tier}`: responses whose served tier
    /// differs from the tier pinned for the role (the provider downgraded, or the pin was not
    /// applied in observe mode).
    pub(crate) tier_mismatches: IntCounterVec,
    /// `gen_ai_client_token_usage{gen_ai_token_type,gen_ai_request_model,role}`: the
    /// OpenTelemetry GenAI histogram `gen_ai.client.token.usage` of each answered call, with
    /// `gen_ai_token_type` `input` (uncached input, cache reads and cache writes, as the
    /// provider bills them) or `output`.
    pub(crate) token_usage: HistogramVec,
    /// `fleetgate_llm_tokens_total{role,model,type}`: tokens by `input` (uncached),
    /// `cache_read`, `cache_write`, `output` and `reasoning` (part of `output`).
    pub(crate) tokens: IntCounterVec,
    /// `fleetgate_llm_cost_usd_total{role,model}`: dollars of the answered calls (usage ×
    /// `llm.prices`).
    pub(crate) cost: CounterVec,
    /// `fleetgate_llm_usage_unknown_total{role,reason}`: answered calls whose cost is not
    /// counted: `no_usage` (the answer carried none) or `unpriced` (no price for the model).
    pub(crate) usage_unknown: IntCounterVec,
    /// `fleetgate_llm_spend_usd{role}`: this pod's spend today (UTC), per budget role.
    pub(crate) spend: GaugeVec,
    /// `fleetgate_llm_budget_usd{role,scope}`: the daily dollar budgets (`pod`, `namespace`).
    pub(crate) budget: GaugeVec,
    /// `fleetgate_llm_prompt_secrets_total{role,rule,action}`: requests whose prompt held a
    /// secret, per rule: `refused`, `would_refuse`, `redacted`, `would_redact`, `observed`.
    pub(crate) prompt_secrets: IntCounterVec,
}

// === impl LlmMetrics ===

impl LlmMetrics {
    /// Create and register the metrics in `reg`.
    pub(crate) fn register(reg: &Registry) -> prometheus::Result<Self> {
        let counter = |name: &str, help: &str, labels: &[&str]| {
            IntCounterVec::new(Opts::new(name, help), labels)
        };
        let m = Self {
            requests: counter(
                "fleetgate_llm_requests_total",
                "LLM requests sent upstream by role, model, effort and requested tier.",
                &["role", "model", "effort", "tier"],
            )?,
            responses: counter(
                "fleetgate_llm_responses_total",
                "LLM responses by role, status class and served tier.",
                &["role", "status_class", "served_tier"],
            )?,
            rewrites: counter(
                "fleetgate_llm_rewrites_total",
                "Pinned fields written onto LLM requests (or that would be, in observe mode).",
                &["role", "field", "action"],
            )?,
            refusals: counter(
                "fleetgate_llm_refusals_total",
                "LLM turns refused (or that would be, in observe mode) by code; further attempts of a refused turn are not counted again.",
                &["role", "code", "action"],
            )?,
            refusal_attempts: counter(
                "fleetgate_llm_refusal_attempts_total",
                "LLM requests refused (or that would be, in observe mode) by code, every attempt counted.",
                &["role", "code", "action"],
            )?,
            provider_tools: counter(
                "fleetgate_llm_provider_tools_total",
                "LLM requests naming a provider-side tool (the provider fetches what no gate sees), by tool and action.",
                &["role", "tool", "action"],
            )?,
            tier_mismatches: counter(
                "fleetgate_llm_tier_mismatches_total",
                "LLM responses served on a tier other than the role's pinned tier.",
                &["role", "served_tier"],
            )?,
            first_byte: HistogramVec::new(
                HistogramOpts::new(
                    "fleetgate_llm_time_to_first_byte_seconds",
                    "Time from an LLM request to the upstream response head, by role.",
                )
                .buckets(vec![
                    0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                ]),
                &["role"],
            )?,
            token_usage: HistogramVec::new(
                HistogramOpts::new(
                    "gen_ai_client_token_usage",
                    "Tokens per answered LLM call (OpenTelemetry gen_ai.client.token.usage), by token type, model and role.",
                )
                .buckets(vec![
                    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262_144.0,
                    1_048_576.0, 4_194_304.0, 16_777_216.0, 67_108_864.0,
                ]),
                &["gen_ai_token_type", "gen_ai_request_model", "role"],
            )?,
            tokens: counter(
                "fleetgate_llm_tokens_total",
                "Tokens of answered LLM calls by role, model and type (input, cache_read, cache_write, output, reasoning).",
                &["role", "model", "type"],
            )?,
            cost: CounterVec::new(
                Opts::new(
                    "fleetgate_llm_cost_usd_total",
                    "Dollars of answered LLM calls (provider usage times llm.prices) by role and model.",
                ),
                &["role", "model"],
            )?,
            usage_unknown: counter(
                "fleetgate_llm_usage_unknown_total",
                "Answered LLM calls whose cost is not counted: no usage in the answer, or no price for the model.",
                &["role", "reason"],
            )?,
            spend: GaugeVec::new(
                Opts::new(
                    "fleetgate_llm_spend_usd",
                    "This pod's LLM spend today (UTC day) per budget role.",
                ),
                &["role"],
            )?,
            budget: GaugeVec::new(
                Opts::new(
                    "fleetgate_llm_budget_usd",
                    "Daily LLM dollar budgets per budget role and scope (pod, namespace).",
                ),
                &["role", "scope"],
            )?,
            prompt_secrets: counter(
                "fleetgate_llm_prompt_secrets_total",
                "LLM requests whose prompt held a secret, by rule and action.",
                &["role", "rule", "action"],
            )?,
        };
        reg.register(Box::new(m.token_usage.clone()))?;
        reg.register(Box::new(m.tokens.clone()))?;
        reg.register(Box::new(m.cost.clone()))?;
        reg.register(Box::new(m.usage_unknown.clone()))?;
        reg.register(Box::new(m.spend.clone()))?;
        reg.register(Box::new(m.budget.clone()))?;
        reg.register(Box::new(m.prompt_secrets.clone()))?;
        reg.register(Box::new(m.requests.clone()))?;
        reg.register(Box::new(m.responses.clone()))?;
        reg.register(Box::new(m.rewrites.clone()))?;
        reg.register(Box::new(m.refusals.clone()))?;
        reg.register(Box::new(m.refusal_attempts.clone()))?;
        reg.register(Box::new(m.provider_tools.clone()))?;
        reg.register(Box::new(m.first_byte.clone()))?;
        reg.register(Box::new(m.tier_mismatches.clone()))?;
        Ok(m)
    }
}
