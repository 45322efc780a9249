//! Decisions: the gates, the one admission every listener goes through, and how a decision
//! is counted, logged and (when it refuses) answered.
//!
//! - [`gates`]: each gate decides about one URL or host and never builds a response;
//! - [`rules`]: what the gates need from one policy (the policy, the resolver, the compiled
//!   blocklist), built once per policy;
//! - [`admit`]: which gate runs for which listener, in one order, over [`rules::Rules`];
//! - [`metrics`]: every metric of the gate, registered once;
//! - [`telemetry`]: tracing setup and the canonical decision line;
//! - [`request_body`]: request bodies of the api and admin listeners, read under their caps;
//! - [`respond`]: the only place where refusals become HTTP responses.
//!
//! May import: [`crate::base`]. Nothing of the wings above (web, live, egress, llm, watch).

pub(crate) mod admit;
pub mod gates;
pub mod metrics;
pub(crate) mod request_body;
pub(crate) mod respond;
pub(crate) mod rules;
pub mod telemetry;
