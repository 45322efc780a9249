//! Test builders and the mock API server (`ApiServerVerifier`) driven by a `Scenario` enum.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::ObjectMeta;

use crate::crd::{FleetPolicy, FleetPolicySpec, FleetPolicyStatus};

/// Namespace of the test FleetPolicy.
pub const NS: &str = "agents";
/// Name of the test FleetPolicy.
pub const NAME: &str = "fleet";
/// uid of the test FleetPolicy.
pub const UID: &str = "5b3c2a8e-0000-4000-8000-000000000001";

impl FleetPolicy {
    /// A valid FleetPolicy `agents/fleet` selecting `app=hermes`, generation 1, no status.
    pub fn test() -> Self {
        let mut fp = FleetPolicy::new(
            NAME,
            FleetPolicySpec {
                selector: LabelSelector {
                    match_labels: Some(BTreeMap::from([("app".into(), "hermes".into())])),
                    ..LabelSelector::default()
                },
                ..FleetPolicySpec::default()
            },
        );
        fp.metadata = ObjectMeta {
            name: Some(NAME.into()),
            namespace: Some(NS.into()),
            uid: Some(UID.into()),
            generation: Some(1),
            resource_version: Some("100".into()),
            ..ObjectMeta::default()
        };
        fp
    }

    /// The same object with its spec edited by `edit`.
    pub fn with_spec(mut self, edit: impl FnOnce(&mut FleetPolicySpec)) -> Self {
        edit(&mut self.spec);
        self
    }

    /// The same object with `status`.
    pub fn with_status(mut self, status: FleetPolicyStatus) -> Self {
        self.status = Some(status);
        self
    }
}
