//! fleetgate-proxy: the egress gate that sits next to every Hermes Agent.
#![doc = include_str!("../../README.md")]

pub mod admin;
pub mod assemble;
pub mod cli;
pub mod context;
pub mod gates;
pub mod metrics;
pub mod pipeline;
pub mod policy;
pub mod reload;
pub mod report;
pub mod resolve;
pub mod respond;
pub mod runtime;
pub mod server;
pub mod telemetry;
pub mod url_form;
pub mod vendors;
