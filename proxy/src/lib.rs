//! fleetgate-proxy: the egress gate that sits next to every Hermes Agent.
//!
//! The gate applies the Hermes web_extract gate stack outside the agent process, where a
//! prompt-injected or misconfigured agent cannot switch it off. Every request out of the pod
//! enters through one listener, is admitted by the same gates, and leaves through the relay,
//! the web tools' pipeline or the LLM route.
//!
//! The crate is in wings, each importing only the wings beneath it (the order is held by
//! `tests/tests/module_layers.rs`):
//!
//! ```text
//!  composition  app (wiring), cli (the commands), api (the local API's routes),
//!               admin (/v1/status, /v1/report), report_gauges; the init container's
//!               capture rules are a crate of their own (`fleetgate-iptables`)
//!      │
//!  features     llm (the LLM route)        watch (watches over MCP and feeds)
//!      │
//!  egress       forward (HTTP proxy, CONNECT)   transparent (iptables capture)   relay
//!      │
//!  live         runtime = the gates' Rules + the web tools, swapped whole on reload; GateState
//!      │
//!  web          pipeline: E0 parse ─► E1 ─► E2 ─► E3 backend ─► E4 ─► E5 cache ─► E6 vendors
//!               ─► E7 assemble; vendors, cache, assemble, vendor_fronts
//!      │
//!  judge        admit: the gates a listener's GateRow names, in one order
//!               (E1 secret URL ─► secret in host ─► egress.ports ─► E2 SSRF ─► E4 blocklist,
//!               then no_loop on the address about to be dialled); gates decide, none dials;
//!               metrics, telemetry (the decision line), respond (the only error → HTTP mapping)
//!      │
//!  base         clock, dialer, file_write, json_escape, resolve, shards, target_url, url_form
//! ```
//!
//! [`web::pipeline`] is the one place that orders the extract stages; [`judge::admit`] the one
//! place that says which gate runs for which listener; [`judge::gates`] decide,
//! [`web::vendors`] fetch, [`web::assemble`] shapes the page, [`judge::respond`] is the only
//! error → HTTP mapping. [`policy`] is the file the controller renders; [`report`] reads a
//! Hermes home. The crate's API is what `main.rs`, the tests and the benches use; the rest is
//! `pub(crate)`.

/// The accept loop every listener shares ([`fleetgate_accept`]).
pub use fleetgate_accept as accept;
/// The capture rules of the init container, `init-iptables` ([`fleetgate_iptables`]).
pub use fleetgate_iptables as iptables;
/// The policy file and the static facts shared with the controller ([`fleetgate_policy`]).
pub use fleetgate_policy as policy;
/// Fleet reports over a Hermes home ([`fleetgate_report`]).
pub use fleetgate_report as report;

// The wings, bottom to top.
pub mod base;
pub mod egress;
pub mod judge;
pub mod live;
pub mod llm;
pub mod watch;
pub mod web;

// The composition root.
pub mod admin;
pub mod api;
pub mod app;
pub mod cli;
pub mod report_gauges;
