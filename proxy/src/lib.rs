//! fleetgate-proxy: the egress gate that sits next to every Hermes Agent.
//!
//! The gate applies the Hermes web_extract gate stack outside the agent process, where a
//! prompt-injected or misconfigured agent cannot switch it off. Every request out of the pod
//! enters through one of three listeners, is admitted by the same gates, and leaves through
//! the relay or the extract pipeline:
//!
//! ```text
//!  listeners    forward::listener (HTTP proxy, CONNECT)   transparent::listener (iptables capture)
//!               api (/v1/extract, vendor_fronts, /llm, /v1/watch)
//!                   │                                          │ relay::sniff (SNI | Host)
//!                   ▼                                          ▼
//!  admit        admit::url / admit::host: the gates a listener's GateRow names, in one order
//!                   │   E1 secret URL ─► secret in host ─► egress.ports ─► E2 SSRF ─► E4 blocklist
//!                   │   then admit::no_loop on the address about to be dialled
//!                   ▼
//!  gates        gates::{secret_url, ssrf, website_blocklist}: each decides, none dials
//!                   │
//!        ┌──────────┴─────────────────────────────┐
//!        ▼                                        ▼
//!  relay        forward::{http, connect},     pipeline (api): E0 parse ─► E1 ─► E2 ─► E3 backend
//!               transparent::splice over           ─► E4 ─► E5 cache ─► E6 vendors ─► E7 assemble
//!               relay::{h1, meter, limits};   llm: the provider call, judged and relayed
//!               refusals via relay::h1        respond: the only error → HTTP mapping
//! ```
//!
//! [`pipeline`] is the one place that orders the extract stages; [`admit`] the one place that
//! says which gate runs for which listener; [`gates`] decide, [`vendors`] fetch, [`assemble`]
//! shapes the page, [`respond`] is the only error → HTTP mapping. [`policy`] is the file the
//! controller renders; [`report`] reads a Hermes home.

/// The accept loop every listener shares ([`fleetgate_accept`]).
pub use fleetgate_accept as accept;
/// The policy file and the static facts shared with the controller ([`fleetgate_policy`]).
pub use fleetgate_policy as policy;

pub mod admin;
pub mod admit;
pub mod api;
pub mod app;
pub mod assemble;
pub mod cache;
pub mod cli;
pub mod clock;
pub mod dialer;
pub mod file_write;
pub mod forward;
pub mod gates;
pub mod iptables;
pub mod json_escape;
pub mod llm;
pub mod metrics;
pub mod pipeline;
pub mod relay;
pub mod reload;
/// Fleet reports over a Hermes home ([`fleetgate_report`]).
pub use fleetgate_report as report;
pub mod report_gauges;
pub mod request_body;
pub mod resolve;
pub mod respond;
pub mod runtime;
pub mod shards;
pub mod state;
pub mod target_url;
pub mod telemetry;
pub mod transparent;
pub mod url_form;
pub mod vendor_fronts;
pub mod vendors;
pub mod watch;
