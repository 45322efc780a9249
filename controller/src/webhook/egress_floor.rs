//! The cluster's egress floor on the webhook's FleetPolicies: a namespace's egress mode raised
//! to the `minimumMode` of the ClusterFleetPolicies ([`ClusterBaselines`]) before a pod is
//! injected, so the webhook and the reconciler agree on the mode a namespace runs.

use std::sync::Arc;

use super::review::PolicySource;
use crate::cluster_baselines::ClusterBaselines;
use crate::crd::FleetPolicy;
use crate::desired::tighten::egress_mode;

/// The webhook's FleetPolicies with the egress mode raised to the baselines' floor, so a pod
/// of a namespace that asks for `off` under `minimumMode: proxy` is injected with the proxy.
#[derive(Debug)]
pub struct EgressFloor<S> {
    /// The FleetPolicies.
    pub policies: S,
    /// The baselines.
    pub baselines: ClusterBaselines,
}

impl<S: PolicySource> PolicySource for EgressFloor<S> {
    fn policies(&self, namespace: &str) -> Vec<Arc<FleetPolicy>> {
        let baselines = self.baselines.current().unwrap_or_default();
        self.policies
            .policies(namespace)
            .into_iter()
            .map(|fp| {
                let mode = egress_mode(&baselines, &fp.spec);
                if fp.spec.egress.mode.unwrap_or(crate::crd::EgressMode::Proxy) == mode {
                    return fp;
                }
                let mut raised = FleetPolicy::clone(&fp);
                raised.spec.egress.mode = Some(mode);
                Arc::new(raised)
            })
            .collect()
    }
}
