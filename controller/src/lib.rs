//! fleetgate controller: turns one `FleetPolicy` per namespace into the Hermes managed-scope
//! config and the gate policy, and writes back what the fleet really does.
//!
//! Three layers, each in its own module:
//!
//! 1. [`crd`]: the `FleetPolicy` custom resource (spec, status, CRD YAML).
//! 2. [`desired`]: pure `FleetPolicy` → ConfigMap rendering, validated with the gate's own
//!    policy parser so an invalid gate policy can never be rendered.
//! 3. [`reconcile`]: the I/O shell — server-side apply, status patch, events, error policy —
//!    with [`status`] computing conditions and [`metrics`] counting reconciles.

pub mod cli;
pub mod crd;
pub mod desired;
#[cfg(test)]
pub mod fixtures;

/// The gate policy `version` this controller renders (`fleetgate_proxy::policy`).
pub const RENDERED_POLICY_VERSION: &str = fleetgate_proxy::policy::POLICY_VERSION;
