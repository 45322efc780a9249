//! The LLM route: `/llm/<role>/...` on the api listener reverse-proxies an agent's provider
//! calls to the provider `llm.roles.<role>` names, so the gate sees — per role — the model,
//! the reasoning effort and the service tier really sent, and the tier really served.
//!
//! Roles are `main`, `delegation`, `cron` and `auxiliary/<task>` (observed as
//! `auxiliary:<task>`, the observer's name). The gate holds the provider key and adds it;
//! any key the agent sends is dropped. The request body is buffered (bounded) to be read and,
//! in enforce mode, rewritten; the response streams back frame by frame, SSE included, with
//! the served tier scanned as it passes ([`tier`]). [`proxy`] is the request path,
//! [`judge`] and [`enforce`] the refusals and pins, [`provider_tools`] the tools a provider
//! runs itself, [`turns`] which refusals are one turn's, [`observation_store`] the last
//! observation per role.

use crate::live::state::GateState;
use crate::policy::llm::role_key;

use std::sync::Arc;

pub(crate) mod body;
pub(crate) mod boxed_body;
pub(crate) mod endpoint;
#[cfg(fuzzing)]
pub mod enforce;
#[cfg(not(fuzzing))]
pub(crate) mod enforce;
pub(crate) mod error;
pub(crate) mod judge;
pub(crate) mod metrics;
pub(crate) mod observation_store;
#[cfg(fuzzing)]
pub mod path;
#[cfg(not(fuzzing))]
pub(crate) mod path;
pub mod prompt_secrets;
pub(crate) mod provider_tools;
pub(crate) mod proxy;
#[cfg(fuzzing)]
pub mod request_facts;
#[cfg(not(fuzzing))]
pub(crate) mod request_facts;
#[cfg(fuzzing)]
pub mod scan;
#[cfg(not(fuzzing))]
pub(crate) mod scan;
pub(crate) mod spend;
pub(crate) mod tier;
pub(crate) mod turns;
pub(crate) mod upstream;
pub(crate) mod usage;

pub(crate) use boxed_body::LlmBody;
pub(crate) use error::LlmError;
pub(crate) use proxy::handle;

/// Path prefix of the route.
pub(crate) const PREFIX: &str = "/llm/";

/// Live state of the route: the observations, the metrics and the upstream pool.
#[derive(Debug)]
pub(crate) struct LlmState {
    /// Last observation per role.
    pub(crate) observations: observation_store::ObservationStore,
    /// Metrics.
    pub(crate) metrics: metrics::LlmMetrics,
    /// TLS and kept connections.
    pub(crate) upstreams: upstream::Upstreams,
    /// The refused turns of the last minute.
    pub(crate) turns: turns::RefusedTurns,
    /// This pod's spend today, against its budgets.
    pub(crate) spend: Arc<spend::SpendLedger>,
}

/// What one LLM request reads: the gate's state and the route's own.
#[derive(Clone, Debug)]
pub(crate) struct LlmContext {
    /// The runtime, the gate metrics, the bound listeners.
    pub(crate) gate: Arc<GateState>,
    /// Observations, route metrics, the upstream pool.
    pub(crate) llm: Arc<LlmState>,
}

// === impl LlmState ===

impl LlmState {
    /// Fresh state with metrics registered in `reg`, the spend kept in `spend`.
    pub(crate) fn register(
        reg: &prometheus::Registry,
        spend: spend::SpendLedger,
    ) -> prometheus::Result<Self> {
        Ok(Self {
            observations: observation_store::ObservationStore::new(),
            metrics: metrics::LlmMetrics::register(reg)?,
            upstreams: upstream::Upstreams::new(),
            turns: turns::RefusedTurns::new(),
            spend: Arc::new(spend),
        })
    }
}

/// A parsed `/llm/<role>/<rest>` path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LlmRoute {
    /// Role key (`main`, `auxiliary:vision`, ...).
    pub(crate) role: String,
    /// The provider path after the role, starting with `/`.
    pub(crate) rest: String,
}

// === impl LlmRoute ===

impl LlmRoute {
    /// Parse a request path; `None` when it names no role.
    pub(crate) fn parse(path: &str) -> Option<Self> {
        let tail = path.strip_prefix(PREFIX)?;
        let (role, rest) = match tail.split_once('/') {
            Some(("auxiliary", after)) => {
                let (task, rest) = after.split_once('/').unwrap_or((after, ""));
                (format!("auxiliary:{task}"), rest)
            }
            Some((role, rest)) => (role.to_string(), rest),
            None => (tail.to_string(), ""),
        };
        let role = role_key(&role).filter(|r| r != "auxiliary" && r != "default")?;
        Some(Self {
            role,
            rest: format!("/{rest}"),
        })
    }
}

#[cfg(test)]
mod tests;
