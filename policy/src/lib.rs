//! fleetgate's policy: the gate policy file and the static facts both the gate and the
//! controller decide with — the backend catalogue ([`backends`]), the address table of gate E2
//! ([`addr`]), the secret rules of gate E1 ([`secret_rules`]), watch header templates
//! ([`header_template`]) and the keys a managed Hermes config pins ([`managed`]). No I/O beyond
//! reading rule files named in a policy; no network, no SQLite.
//!
//! The gate policy file: YAML with `version: v1`, camelCase keys, unknown keys refused.
//!
//! Parsed in two layers: [`raw::RawPolicy`] is the file as written (serde,
//! `deny_unknown_fields`); [`Policy`] is the validated domain value every other module reads.
//! Validation collects every problem, each naming the field and the fix, so
//! `fleetgate-proxy check-policy` shows them all at once. The controller renders this file
//! (`fleetgate_controller`), so it is part of the wire contract between the two crates.

pub mod addr;
pub mod backends;
pub mod egress;
mod error;
pub mod file;
pub mod header_template;
pub mod llm;
pub mod managed;
mod policy;
pub mod raw;
pub mod secret_rules;
#[cfg(test)]
mod tests;
mod validate;
pub mod watch;

pub use error::{FieldError, PolicyError};
pub use policy::*;
