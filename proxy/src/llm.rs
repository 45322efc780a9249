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

pub mod body;
pub mod boxed_body;
pub mod endpoint;
pub mod enforce;
pub mod error;
pub mod judge;
pub mod metrics;
pub mod observation_store;
pub mod path;
pub mod prompt_secrets;
pub mod provider_tools;
pub mod proxy;
pub mod request_facts;
pub mod scan;
pub mod spend;
pub mod tier;
pub mod turns;
pub mod upstream;
pub mod usage;

pub use boxed_body::{LlmBody, full};
pub use error::LlmError;
pub use proxy::handle;

/// Path prefix of the route.
pub const PREFIX: &str = "/llm/";

/// Live state of the route: the observations, the metrics and the upstream pool.
#[derive(Debug)]
pub struct LlmState {
    /// Last observation per role.
    pub observations: observation_store::ObservationStore,
    /// Metrics.
    pub metrics: metrics::LlmMetrics,
    /// TLS and kept connections.
    pub upstreams: upstream::Upstreams,
    /// The refused turns of the last minute.
    pub turns: turns::RefusedTurns,
    /// This pod's spend today, against its budgets.
    pub spend: Arc<spend::SpendLedger>,
}

/// What one LLM request reads: the gate's state and the route's own.
#[derive(Clone, Debug)]
pub struct LlmContext {
    /// The runtime, the gate metrics, the bound listeners.
    pub gate: Arc<GateState>,
    /// Observations, route metrics, the upstream pool.
    pub llm: Arc<LlmState>,
}

// === impl LlmState ===

impl LlmState {
    /// Fresh state with metrics registered in `reg`, the spend kept in `spend`.
    pub fn register(
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
pub struct LlmRoute {
    /// Role key (`main`, `auxiliary:vision`, ...).
    pub role: String,
    /// The provider path after the role, starting with `/`.
    pub rest: String,
}

// === impl LlmRoute ===

impl LlmRoute {
    /// Parse a request path; `None` when it names no role.
    pub fn parse(path: &str) -> Option<Self> {
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
