//! fleetgate controller.
//!
//! Reconciles one `FleetPolicy` per namespace into the Hermes managed-scope config and the
//! gate policy. This crate currently exposes only the version of the gate policy format it
//! renders; the CRD, reconcile loop and webhook land with the controller work.

/// The gate policy `version` this controller renders (`fleetgate_proxy::policy`).
pub const RENDERED_POLICY_VERSION: &str = fleetgate_proxy::policy::POLICY_VERSION;
