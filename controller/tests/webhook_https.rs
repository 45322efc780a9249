//! The real webhook server on a loopback port 0, serving a certificate from a throw-away rcgen
//! CA, driven by a client that trusts only that CA: AdmissionReviews in, decoded answers
//! checked (uid echoed, patch type, patch applied to the pod), plus the certificate reload.
//!
//! Real-server twin: `tests/tests/k8s/webhook.rs` has kube-apiserver call the controller's
//! webhook through the chart's `webhook.url` override and caBundle; this file keeps the
//! certificate reload and malformed-review cases a real API server never sends.
#![allow(clippy::expect_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use fleetgate_controller::crd::FleetPolicy;
use fleetgate_controller::webhook::server::{CertStore, serve};
use fleetgate_controller::webhook::{InjectorConfig, PolicySource};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};

const UID: &str = "6f1c2d3e-0000-4000-8000-00000000abcd";

struct Ca {
    pem: String,
    issuer: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

fn ca(name: &str) -> Ca {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let key = rcgen::KeyPair::generate().expect("a CA key must be generated");
    let issuer = rcgen::CertifiedIssuer::self_signed(params, key).expect("the CA must self-sign");
    Ca {
        pem: issuer.pem(),
        issuer,
    }
}

/// Write a leaf for `localhost` signed by `ca` as `cert.pem` / `key.pem` in `dir`.
fn write_leaf(ca: &Ca, dir: &Path) -> (PathBuf, PathBuf) {
    let key = rcgen::KeyPair::generate().expect("a leaf key must be generated");
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .expect("leaf params")
        .signed_by(&key, &ca.issuer)
        .expect("the leaf must be signed");
    let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert_path, leaf.pem()).expect("the cert must be written");
    std::fs::write(&key_path, key.serialize_pem()).expect("the key must be written");
    (cert_path, key_path)
}

fn golden(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/webhook")
        .join(name);
    std::fs::read_to_string(path).expect("a golden fixture must be readable")
}

fn policies() -> Arc<dyn PolicySource> {
    let fps: Vec<Arc<FleetPolicy>> =
        serde_yaml::Deserializer::from_str(&golden("fleetpolicies.yaml"))
            .map(|d| {
                Arc::new(FleetPolicy::deserialize(d).expect("a fixture FleetPolicy must parse"))
            })
            .collect();
    Arc::new(fps)
}

async fn start(certs: Arc<CertStore>) -> SocketAddr {
    let cfg =
        InjectorConfig::parse(&golden("injector.yaml")).expect("the injector config must parse");
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("port 0 must bind");
    let addr = listener.local_addr().expect("the listener has an address");
    let acceptor = certs.acceptor().expect("the acceptor must build");
    tokio::spawn(serve(listener, acceptor, cfg, policies(), None));
    addr
}

/// One HTTPS request to the webhook from a client trusting only `ca_pem`.
async fn call(
    addr: SocketAddr,
    ca_pem: &str,
    method: &str,
    path: &str,
    body: Vec<u8>,
) -> Result<(u16, Vec<u8>), String> {
    let mut roots = rustls::RootCertStore::empty();
    let ca = rustls::pki_types::CertificateDer::from_pem_slice(ca_pem.as_bytes())
        .expect("the CA PEM must parse");
    roots.add(ca).expect("the CA must be trusted");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("a server name");
    let tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::HOST, "localhost")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)))
        .expect("the request must build");
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, body.to_vec()))
}

fn review_of(pod: &Value, operation: &str, kind: &str) -> Vec<u8> {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": UID,
            "kind": {"group": "", "version": "v1", "kind": kind},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "agents",
            "operation": operation,
            "userInfo": {"username": "system:serviceaccount:agents:deployer"},
            "object": pod,
            "dryRun": false,
        }
    });
    serde_json::to_vec(&review).expect("the review must serialize")
}

fn pod(case: &str) -> Value {
    serde_yaml::from_str(&golden(&format!("{case}.pod.yaml"))).expect("a fixture pod must be YAML")
}

fn response(body: &[u8]) -> Value {
    let v: Value = serde_json::from_slice(body).expect("the answer must be JSON");
    assert_eq!(
        v["apiVersion"], "admission.k8s.io/v1",
        "the answer must be an AdmissionReview v1"
    );
    assert_eq!(
        v["kind"], "AdmissionReview",
        "the answer must be an AdmissionReview"
    );
    v["response"].clone()
}

#[tokio::test]
async fn a_pod_review_over_https_gets_a_patch_that_injects_the_gate() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let authority = ca("fleetgate webhook test CA");
    let (cert, key) = write_leaf(&authority, dir.path());
    let addr = start(Arc::new(
        CertStore::load(&cert, &key).expect("the cert must load"),
    ))
    .await;

    let input = pod("default");
    let (status, body) = call(
        addr,
        &authority.pem,
        "POST",
        "/mutate-pods",
        review_of(&input, "CREATE", "Pod"),
    )
    .await
    .expect("the review must be answered");
    assert_eq!(status, 200, "a readable review must be answered with 200");
    let resp = response(&body);
    assert_eq!(resp["uid"], UID, "the uid must be echoed");
    assert_eq!(resp["allowed"], true, "an injectable pod must be allowed");
    assert_eq!(
        resp["patchType"], "JSONPatch",
        "the patch type must be JSONPatch"
    );
    let raw = base64::engine::general_purpose::STANDARD
        .decode(
            resp["patch"]
                .as_str()
                .expect("the patch must be a base64 string"),
        )
        .expect("the patch must be base64");
    let ops: Value = serde_json::from_slice(&raw).expect("the decoded patch must be JSON");
    let want: Value =
        serde_json::from_str(&golden("default.patch.json")).expect("the golden patch is JSON");
    assert_eq!(ops, want, "the patch must be the golden default patch");
    let patch: json_patch::Patch = serde_json::from_value(ops).expect("the patch must be RFC 6902");
    let mut doc = input.clone();
    json_patch::patch(&mut doc, &patch).expect("the patch must apply to the pod");
    let names: Vec<&str> = doc["spec"]["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["hermes", "fleetgate-proxy"],
        "the gate must be added after the agent"
    );
}

#[tokio::test]
async fn other_reviews_are_allowed_unchanged_refused_or_rejected() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let authority = ca("fleetgate webhook test CA");
    let (cert, key) = write_leaf(&authority, dir.path());
    let addr = start(Arc::new(
        CertStore::load(&cert, &key).expect("the cert must load"),
    ))
    .await;
    let mut unlabelled_policy = pod("default");
    unlabelled_policy["metadata"]["labels"]["app"] = json!("not-an-agent");
    let mut host_network = pod("default");
    host_network["spec"]["hostNetwork"] = json!(true);
    // (what, review body, HTTP status, allowed, refusal message)
    type Case = (
        &'static str,
        Vec<u8>,
        u16,
        Option<bool>,
        Option<&'static str>,
    );
    let cases: Vec<Case> = vec![
        (
            "an UPDATE",
            review_of(&pod("default"), "UPDATE", "Pod"),
            200,
            Some(true),
            None,
        ),
        (
            "another kind",
            review_of(
                &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}),
                "CREATE",
                "Service",
            ),
            200,
            Some(true),
            None,
        ),
        (
            "a pod no FleetPolicy selects",
            review_of(&unlabelled_policy, "CREATE", "Pod"),
            200,
            Some(false),
            Some("no FleetPolicy in namespace agents selects this pod"),
        ),
        (
            "a hostNetwork pod",
            review_of(&host_network, "CREATE", "Pod"),
            200,
            Some(false),
            Some("hostNetwork"),
        ),
        (
            "a malformed review",
            b"{\"kind\": \"AdmissionReview\"".to_vec(),
            400,
            Some(false),
            None,
        ),
    ];
    for (what, body, want_status, want_allowed, want_message) in cases {
        let (status, answer) = call(addr, &authority.pem, "POST", "/mutate-pods", body)
            .await
            .expect("the review must be answered");
        assert_eq!(
            status, want_status,
            "{what} must be answered with {want_status}"
        );
        let resp = response(&answer);
        assert_eq!(
            resp["allowed"].as_bool(),
            want_allowed,
            "{what}: allowed must be {want_allowed:?}"
        );
        assert!(resp.get("patch").is_none(), "{what} must carry no patch");
        if let Some(message) = want_message {
            assert_eq!(resp["uid"], UID, "{what}: the uid must be echoed");
            assert_eq!(
                resp["status"]["code"], 403,
                "{what}: a refusal must carry code 403"
            );
            let text = resp["status"]["message"].as_str().unwrap_or_default();
            assert!(
                text.contains(message),
                "{what}: the message must say {message:?}, got {text:?}"
            );
        }
    }
    let (status, body) = call(addr, &authority.pem, "GET", "/live", Vec::new())
        .await
        .expect("/live must answer");
    assert_eq!(
        (status, body.as_slice()),
        (200, b"live\n".as_slice()),
        "/live must answer 200"
    );
}

#[tokio::test]
async fn a_rotated_certificate_is_served_after_reload() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (old_ca, new_ca) = (ca("old CA"), ca("new CA"));
    let (cert, key) = write_leaf(&old_ca, dir.path());
    let store = Arc::new(CertStore::load(&cert, &key).expect("the cert must load"));
    let addr = start(store.clone()).await;
    call(addr, &old_ca.pem, "GET", "/live", Vec::new())
        .await
        .expect("the old CA must be trusted before the rotation");

    // A coarse file clock may give the rewrite the same mtime; wait it out.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    write_leaf(&new_ca, dir.path());
    assert!(
        store.reload_if_changed().expect("the new pair must load"),
        "a changed pair must be reloaded"
    );
    assert!(
        !store
            .reload_if_changed()
            .expect("an unchanged pair is fine"),
        "an unchanged pair must not be reloaded again"
    );
    call(addr, &new_ca.pem, "GET", "/live", Vec::new())
        .await
        .expect("the new certificate must be served");
    let old = call(addr, &old_ca.pem, "GET", "/live", Vec::new()).await;
    assert!(
        old.is_err(),
        "a client trusting only the old CA must now fail the handshake"
    );
}
