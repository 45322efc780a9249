//! Test builders and the mock API server (`ApiServerVerifier`) driven by a `Scenario` enum.

use std::collections::BTreeMap;

use http::{Method, Request, Response};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Client;
use kube::api::ObjectMeta;
use kube::client::Body;
use tower_test::mock::{Handle, SendResponse};

use crate::crd::{FleetPolicy, FleetPolicySpec, FleetPolicyStatus};

pub mod cluster;
pub mod fleet;

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

/// What the mock API server expects, call by call.
#[derive(Clone, Debug)]
pub enum Scenario {
    /// First reconcile of a valid policy: the ConfigMap is missing, so it is applied, an
    /// `Applied` event is published and the status is applied on `/status`.
    FirstApply,
    /// The stored ConfigMap and status already match: one read, no write.
    Steady(ConfigMap),
    /// The stored ConfigMap differs (edited by hand): it is re-applied and an event published;
    /// the status already matches.
    Repair(ConfigMap),
    /// An invalid spec: no ConfigMap call at all, a Warning event, `Valid=False` on `/status`.
    InvalidSpec,
    /// The ConfigMap apply is answered with this HTTP status code.
    ApplyFails(u16),
    /// A settled policy with fleet scraping on: ConfigMap read, pod list (one pod without an
    /// IP), token Secret read, then the status with the fleet fields.
    FleetScrape(ConfigMap),
    /// No call at all.
    RadioSilence,
}

/// The mock API server: answers the calls a [`Scenario`] expects and asserts on each.
#[allow(missing_debug_implementations)]
pub struct ApiServerVerifier(pub Handle<Request<Body>, Response<Body>>);

/// A client wired to a fresh mock API server.
pub fn mock_client() -> (Client, ApiServerVerifier) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    (Client::new(service, NS), ApiServerVerifier(handle))
}

/// Await the mock task, failing after 1 s (a call the scenario expected never came).
pub async fn timeout_after_1s(task: tokio::task::JoinHandle<()>) {
    tokio::time::timeout(std::time::Duration::from_secs(1), task)
        .await
        .expect("the mock API server must see every expected call within 1 s")
        .expect("the mock API server task must not panic");
}

/// The ConfigMap apply URI.
pub const CM_APPLY_URI: &str = "/api/v1/namespaces/agents/configmaps/fleet-managed?&force=true&fieldManager=fleetgate-controller";
/// The ConfigMap read URI.
pub const CM_GET_URI: &str = "/api/v1/namespaces/agents/configmaps/fleet-managed";
/// The status apply URI.
pub const STATUS_URI: &str = "/apis/fleetgate.dev/v1alpha1/namespaces/agents/fleetpolicies/fleet/status?&force=true&fieldManager=fleetgate-controller";
/// The selected pods list URI.
pub const PODS_URI: &str = "/api/v1/namespaces/agents/pods?&labelSelector=app%3Dhermes";
/// The report token Secret URI.
pub const SECRET_URI: &str = "/api/v1/namespaces/agents/secrets/fleetgate-report-token";
/// The event create URI.
pub const EVENT_URI: &str = "/apis/events.k8s.io/v1/namespaces/agents/events?";

/// A call the mock saw: method, URI and JSON body.
#[derive(Clone, Debug)]
pub struct Seen {
    /// HTTP method.
    pub method: Method,
    /// Path and query.
    pub uri: String,
    /// The JSON body (`Null` when empty).
    pub body: serde_json::Value,
}

impl ApiServerVerifier {
    /// Serve `scenario` in a task; `check` sees every call in order for extra assertions.
    pub fn run(
        self,
        scenario: Scenario,
        check: impl Fn(&Seen) + Send + Sync + 'static,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut v = self;
            match scenario {
                Scenario::FirstApply => {
                    v.answer(Method::GET, CM_GET_URI, &check, not_found()).await;
                    v.echo(Method::PATCH, CM_APPLY_URI, &check).await;
                    v.answer(Method::POST, EVENT_URI, &check, event_created())
                        .await;
                    v.status(&check).await;
                }
                Scenario::Steady(cm) => {
                    v.answer(Method::GET, CM_GET_URI, &check, ok_json(&cm))
                        .await;
                }
                Scenario::Repair(cm) => {
                    v.answer(Method::GET, CM_GET_URI, &check, ok_json(&cm))
                        .await;
                    v.echo(Method::PATCH, CM_APPLY_URI, &check).await;
                    v.answer(Method::POST, EVENT_URI, &check, event_created())
                        .await;
                }
                Scenario::InvalidSpec => {
                    v.answer(Method::POST, EVENT_URI, &check, event_created())
                        .await;
                    v.status(&check).await;
                }
                Scenario::ApplyFails(code) => {
                    v.answer(Method::GET, CM_GET_URI, &check, not_found()).await;
                    v.answer(Method::PATCH, CM_APPLY_URI, &check, failure(code))
                        .await;
                }
                Scenario::FleetScrape(cm) => {
                    // The first reconcile starts the poll; the poll's end brings the second,
                    // which writes the status with its view.
                    v.answer(Method::GET, CM_GET_URI, &check, ok_json(&cm))
                        .await;
                    v.answer(Method::GET, PODS_URI, &check, ok_json(&pending_pods()))
                        .await;
                    v.answer(Method::GET, SECRET_URI, &check, ok_json(&token_secret()))
                        .await;
                    v.answer(Method::GET, CM_GET_URI, &check, ok_json(&cm))
                        .await;
                    v.status(&check).await;
                }
                Scenario::RadioSilence => {}
            }
        })
    }

    async fn next(
        &mut self,
        method: Method,
        uri: &str,
        check: &impl Fn(&Seen),
    ) -> (Seen, SendResponse<Response<Body>>) {
        let (request, send) = self
            .0
            .next_request()
            .await
            .unwrap_or_else(|| panic!("the controller must call {method} {uri}"));
        let seen = Seen {
            method: request.method().clone(),
            uri: request.uri().to_string(),
            body: {
                let bytes = request
                    .into_body()
                    .collect_bytes()
                    .await
                    .expect("a request body must be readable");
                serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null)
            },
        };
        assert_eq!(
            (&seen.method, seen.uri.as_str()),
            (&method, uri),
            "the controller must call {method} {uri} next"
        );
        check(&seen);
        (seen, send)
    }

    async fn answer(
        &mut self,
        method: Method,
        uri: &str,
        check: &impl Fn(&Seen),
        response: Response<Body>,
    ) {
        let (_, send) = self.next(method, uri, check).await;
        send.send_response(response);
    }

    /// Answer a status apply with the test object carrying the applied status.
    async fn status(&mut self, check: &impl Fn(&Seen)) {
        let (seen, send) = self.next(Method::PATCH, STATUS_URI, check).await;
        let mut object =
            serde_json::to_value(FleetPolicy::test()).expect("the test object must serialize");
        object["status"] = seen.body["status"].clone();
        send.send_response(ok_json(&object));
    }

    /// Answer an apply the way the API server does: with the applied object.
    async fn echo(&mut self, method: Method, uri: &str, check: &impl Fn(&Seen)) {
        let (seen, send) = self.next(method, uri, check).await;
        send.send_response(ok_json(&seen.body));
    }
}

fn ok_json(value: &impl serde::Serialize) -> Response<Body> {
    let bytes = serde_json::to_vec(value).expect("a mock answer must serialize");
    Response::builder()
        .status(200)
        .body(Body::from(bytes))
        .expect("a mock answer must build")
}

fn status_body(code: u16, reason: &str, message: &str) -> Response<Body> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    });
    Response::builder()
        .status(code)
        .body(Body::from(
            serde_json::to_vec(&body).expect("a Status must serialize"),
        ))
        .expect("a mock answer must build")
}

fn not_found() -> Response<Body> {
    status_body(404, "NotFound", "configmaps \"fleet-managed\" not found")
}

fn failure(code: u16) -> Response<Body> {
    match code {
        409 => status_body(
            409,
            "Conflict",
            "Apply failed with 1 conflict: conflict with \"kubectl\"",
        ),
        _ => status_body(code, "InternalError", "etcdserver: request timed out"),
    }
}

fn event_created() -> Response<Body> {
    ok_json(
        &serde_json::json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "fleet.1", "namespace": NS}}),
    )
}

fn pending_pods() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "7"},
        "items": [{"metadata": {"name": "agent-0", "namespace": NS, "labels": {"app": "hermes"}}, "status": {"phase": "Pending"}}]
    })
}

fn token_secret() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "fleetgate-report-token", "namespace": NS},
        "data": {"token": "czNjcmV0"}
    })
}
