//! fleetgate-proxy: the egress gate that sits next to every Hermes Agent.
//!
//! The gate applies the Hermes web_extract gate stack outside the agent process, where a
//! prompt-injected or misconfigured agent cannot switch it off:
//!
//! ```text
//!  request ─► E0 parse items ─► E1 secret URL ─► E2 SSRF (own resolver) ─► E3 backend
//!          ─► E4 website blocklist ─► E5 shared cache ─► E6 vendor / direct fetch ─► E7 assemble
//! ```
//!
//! [`pipeline`] is the one place that orders the stages; [`gates`] decide, [`vendors`]
//! fetch, [`assemble`] shapes the page, [`respond`] is the only error → HTTP mapping.
//! [`policy`] is the file the controller renders; [`report`] reads a Hermes home.

/// The accept loop every listener shares ([`fleetgate_accept`]).
pub use fleetgate_accept as accept;
pub mod admin;
pub mod admit;
pub mod app;
pub mod assemble;
pub mod cache;
pub mod cli;
pub mod clock;
pub mod context;
pub mod dialer;
pub mod forward;
pub mod front;
pub mod gates;
pub mod iptables;
pub mod llm;
pub mod metrics;
pub mod pipeline;
/// The policy file and the static facts shared with the controller ([`fleetgate_policy`]).
pub use fleetgate_policy as policy;
pub mod relay;
pub mod reload;
/// Fleet reports over a Hermes home ([`fleetgate_report`]).
pub use fleetgate_report as report;
pub mod report_gauges;
pub mod resolve;
pub mod respond;
pub mod runtime;
pub mod server;
pub mod state;
pub mod telemetry;
pub mod transparent;
pub mod url_form;
pub mod vendors;
pub mod watch;
