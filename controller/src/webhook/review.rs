//! `AdmissionReview` v1 in, `AdmissionReview` v1 out: parse the request, look up the
//! namespace's FleetPolicies, run [`mutate()`](super::mutate()), and encode the answer (uid
//! echoed, base64 `JSONPatch`, refusals as `allowed: false` with code 403, malformed reviews as
//! HTTP 400).

use std::sync::Arc;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Pod;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionReview, Operation};
use kube::runtime::reflector::Store;
use serde_json::{Value, json};

use super::{Decision, InjectorConfig, Skip, mutate};
use crate::crd::FleetPolicy;

/// Where the webhook reads the FleetPolicies of a namespace from.
pub trait PolicySource: Send + Sync {
    /// The FleetPolicies of `namespace` (others may be returned; they are ignored).
    fn policies(&self, namespace: &str) -> Vec<Arc<FleetPolicy>>;
}

impl PolicySource for Store<FleetPolicy> {
    fn policies(&self, namespace: &str) -> Vec<Arc<FleetPolicy>> {
        self.state()
            .into_iter()
            .filter(|fp| fp.metadata.namespace.as_deref() == Some(namespace))
            .collect()
    }
}

impl PolicySource for Vec<Arc<FleetPolicy>> {
    fn policies(&self, namespace: &str) -> Vec<Arc<FleetPolicy>> {
        self.iter()
            .filter(|fp| fp.metadata.namespace.as_deref() == Some(namespace))
            .cloned()
            .collect()
    }
}

/// The HTTP answer to one review.
#[derive(Debug, PartialEq)]
pub struct Reviewed {
    /// HTTP status: 200, or 400 for a review that cannot be read.
    pub status: u16,
    /// The `AdmissionReview` JSON.
    pub body: Vec<u8>,
    /// What happened, for the log line: `patched`, `refused`, `malformed` or a [`Skip`] name.
    pub outcome: &'static str,
    /// The refusal message or the FleetPolicy applied, for the log line.
    pub detail: String,
}

/// Answer the `AdmissionReview` in `body`.
pub fn review(body: &[u8], source: &dyn PolicySource, cfg: &InjectorConfig) -> Reviewed {
    let req = match parse(body) {
        Ok(req) => req,
        Err(message) => return malformed(message),
    };
    let is_pod = req.kind.group.is_empty() && req.kind.kind == "Pod";
    let is_create = matches!(req.operation, Operation::Create) && req.sub_resource.is_none();
    let object = req.object.as_ref().filter(|_| is_pod && is_create);
    let Some(object) = object else {
        return answer(&req.uid, &Decision::Unchanged(Skip::NotAPodCreate));
    };
    let pod: Pod = match serde_json::to_value(object).and_then(serde_json::from_value) {
        Ok(pod) => pod,
        Err(e) => return malformed(format!("failed to read the pod in the review: {e}")),
    };
    let namespace = req
        .namespace
        .clone()
        .or_else(|| pod.metadata.namespace.clone())
        .unwrap_or_default();
    let policies = source.policies(&namespace);
    let refs: Vec<&FleetPolicy> = policies.iter().map(Arc::as_ref).collect();
    answer(&req.uid, &mutate(&pod, &namespace, &refs, cfg))
}

fn parse(body: &[u8]) -> Result<AdmissionRequest<DynamicObject>, String> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body)
        .map_err(|e| format!("failed to parse the AdmissionReview: {e}"))?;
    if review.types.api_version != "admission.k8s.io/v1" {
        return Err(format!(
            "failed to accept the AdmissionReview: apiVersion {:?}; this webhook speaks admission.k8s.io/v1 (set admissionReviewVersions: [v1])",
            review.types.api_version
        ));
    }
    review
        .try_into()
        .map_err(|_| "failed to read the AdmissionReview: it has no request".to_string())
}

fn answer(uid: &str, decision: &Decision) -> Reviewed {
    let (response, outcome, detail) = match decision {
        Decision::Unchanged(skip) => (
            json!({"uid": uid, "allowed": true}),
            skip.as_str(),
            String::new(),
        ),
        Decision::Patch { policy, ops } => {
            let patch = serde_json::to_vec(ops).unwrap_or_default();
            let encoded = base64::engine::general_purpose::STANDARD.encode(patch);
            (
                json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": encoded}),
                "patched",
                policy.clone(),
            )
        }
        Decision::Refuse(message) => (
            json!({"uid": uid, "allowed": false, "status": {
                "status": "Failure", "code": 403, "reason": "Forbidden", "message": message}}),
            "refused",
            message.clone(),
        ),
    };
    Reviewed {
        status: 200,
        body: envelope(response),
        outcome,
        detail,
    }
}

fn malformed(message: String) -> Reviewed {
    let response = json!({"uid": "", "allowed": false, "status": {
        "status": "Failure", "code": 400, "reason": "BadRequest", "message": message}});
    Reviewed {
        status: 400,
        body: envelope(response),
        outcome: "malformed",
        detail: message,
    }
}

fn envelope(response: Value) -> Vec<u8> {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response,
    });
    serde_json::to_vec(&review).unwrap_or_default()
}
