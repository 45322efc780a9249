//! fleetgate controller: turns one `FleetPolicy` per namespace into the Hermes managed-scope
//! config and the gate policy, and writes back what the fleet really does.
//!
//! Three layers, each in its own module:
//!
//! 1. [`crd`]: the `FleetPolicy` custom resource (spec, status, CRD YAML).
//! 2. [`desired`]: pure `FleetPolicy` → ConfigMap rendering, validated with the gate's own
//!    policy parser so an invalid gate policy can never be rendered; [`status`] computes the
//!    conditions, also pure.
//! 3. [`reconcile`]: the I/O shell — server-side apply, status patch, events, error policy —
//!    with [`metrics`] counting reconciles, failures and writes; [`controller_loop`] brings
//!    each FleetPolicy to it (watches, requeues, the upkeep of what is kept per object).
//!
//! The fleet status follows the same split: [`fleet_poll`] decides when a FleetPolicy's gates
//! are polled and keeps the view its reconcile writes, [`gate_poll`] fetches `/v1/status` and
//! `/v1/report` from every selected pod's gate (I/O, bounded and with deadlines), [`fleet`]
//! aggregates the answers (pure). [`cli`] holds the command line and the offline subcommands
//! (`crd`, `render`), [`app`] runs it (the binary's `main` is one call), [`admin`] the
//! `/live` `/ready` `/metrics` listener, [`leader`] the election that lets one replica of
//! several reconcile and write while every replica serves the webhook, [`cluster_baselines`] the
//! cluster-wide `ClusterFleetPolicy` objects every FleetPolicy is tightened by.

pub mod admin;
pub mod app;
pub mod budgets;
pub mod cli;
pub mod cluster_baselines;
pub mod controller_loop;
pub mod crd;
pub mod desired;
#[cfg(test)]
pub mod fixtures;
pub mod fleet;
pub mod fleet_poll;
pub mod gate_poll;
pub mod leader;
pub mod metrics;
pub mod reconcile;
pub mod status;
pub mod watch_backoff;
pub mod webhook;

/// The gate policy `version` this controller renders (`fleetgate_policy`).
pub const RENDERED_POLICY_VERSION: &str = fleetgate_policy::POLICY_VERSION;

/// Why a reconcile failed. An invalid spec is not an error: it is reported as `Valid=False`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the API server failed (conflict, server error, transport).
    #[error("failed to {action}: {source}")]
    Kube {
        /// What the controller was doing (`apply the managed ConfigMap`, ...).
        action: &'static str,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// An object could not be turned into a patch body.
    #[error("failed to serialize {what}: {source}")]
    Serialize {
        /// The object.
        what: &'static str,
        /// The serializer error.
        #[source]
        source: serde_json::Error,
    },
    /// `spec.selector` cannot be turned into a label selector.
    #[error("failed to use spec.selector: {0}")]
    Selector(String),
    /// This replica may not write: it does not hold the lease, or cannot show it still does.
    /// Not a failure: the reconcile ends without writing and the leader does the work.
    #[error("failed to write: {0}")]
    Fenced(#[from] crate::leader::Fenced),
    /// The controller reads cluster baselines but has not listed them yet (or cannot): it
    /// renders nothing rather than a policy the baselines may forbid.
    #[error(
        "failed to render: the ClusterFleetPolicies are not listed yet (is the ClusterFleetPolicy CRD installed and readable?)"
    )]
    BaselineUnavailable,
    /// The FleetPolicy lacks a field every stored object has.
    #[error("failed to reconcile: the FleetPolicy has no {0}")]
    MissingObjectKey(&'static str),
}

/// Result of the controller's fallible operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

// === impl Error ===

impl Error {
    /// Stable snake_case code for logs and the `error` metric label.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Kube { source, .. } => match source {
                kube::Error::Api(status) if status.code == 409 => "api_conflict",
                kube::Error::Api(status) if status.code >= 500 => "api_server_error",
                kube::Error::Api(_) => "api_refused",
                _ => "api_unreachable",
            },
            Self::Serialize { .. } => "serialize",
            Self::Selector(_) => "invalid_selector",
            Self::Fenced(_) => "fenced",
            Self::BaselineUnavailable => "baseline_unavailable",
            Self::MissingObjectKey(_) => "missing_object_key",
        }
    }

    /// Every code [`Error::code`] can return.
    pub const ALL_CODES: &'static [&'static str] = &[
        "api_conflict",
        "api_server_error",
        "api_refused",
        "api_unreachable",
        "serialize",
        "invalid_selector",
        "fenced",
        "baseline_unavailable",
        "missing_object_key",
    ];
}
