//! The mutating admission webhook that injects the fleetgate gate into agent pods.
//!
//! Same split as the controller: [`mutate()`] is pure (pod + the namespace's FleetPolicies +
//! [`InjectorConfig`] → a [`Decision`]), [`review()`] turns an `AdmissionReview` body into a
//! response body (still pure, given a [`PolicySource`]), and [`server`] is the I/O shell: a
//! rustls HTTPS listener with `POST /mutate-pods` and `GET /live`, certificates re-read when
//! their files change, FleetPolicies from a reflector store.
//!
//! What a pod gets: the `fleetgate-proxy` sidecar (restricted security context,
//! probes on the admin port), the managed `config.yaml` at `/etc/hermes` in the agent, the
//! gate's `/etc/fleetgate` (policy, report token, vendor keys, shared blocklists), the shared
//! cache volume, the Hermes home read-only at `/hermes` in the gate, the agent env that points
//! Hermes' web tools (and, in proxy mode, every HTTP client) at the gate, and in transparent
//! mode the `fleetgate-init` container that installs the iptables capture.

pub mod config;
pub mod egress_floor;
pub mod identity;
pub mod mutate;
mod patch;
pub mod review;
pub mod server;
mod sidecar;
#[cfg(test)]
mod tests;

pub use config::InjectorConfig;
pub use mutate::{Decision, Skip, mutate};
pub use review::{PolicySource, review};

/// Pod label that opts a pod in (`enabled`).
pub const INJECT_LABEL: &str = "fleetgate.dev/inject";
/// Pod annotation that opts a pod out (`disabled`); it wins over the label.
pub const INJECT_ANNOTATION: &str = "fleetgate.dev/inject";
/// Value of [`INJECT_LABEL`] that opts in.
pub const INJECT_ENABLED: &str = "enabled";
/// Value of [`INJECT_ANNOTATION`] that opts out.
pub const INJECT_DISABLED: &str = "disabled";
/// Annotation marking an injected pod, valued with the injector's version.
pub const INJECTED_ANNOTATION: &str = "fleetgate.dev/injected";
/// Annotation naming the FleetPolicy an injected pod follows.
pub const POLICY_ANNOTATION: &str = "fleetgate.dev/policy";
/// Annotation recording the egress mode an injected pod was given (`off`, `proxy`,
/// `transparent`): capture is fixed at pod creation, so the fleet status names pods injected
/// below what their policy now asks for.
pub const EGRESS_MODE_ANNOTATION: &str = "fleetgate.dev/egress-mode";
/// Version written into [`INJECTED_ANNOTATION`].
pub const INJECTOR_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Name of the gate sidecar container.
pub const PROXY_CONTAINER: &str = "fleetgate-proxy";
/// Name of the transparent-mode init container.
pub const INIT_CONTAINER: &str = "fleetgate-init";

/// Path of the mutating endpoint.
pub const MUTATE_PATH: &str = "/mutate-pods";
