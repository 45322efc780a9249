//! fleetgate-proxy: the egress gate that sits next to every Hermes Agent.
#![doc = include_str!("../../README.md")]

pub mod assemble;
pub mod context;
pub mod gates;
pub mod policy;
pub mod report;
pub mod url_form;
