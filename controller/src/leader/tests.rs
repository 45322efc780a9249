//! Leader election against the stateful fake cluster (`crate::fixtures::cluster`): several
//! replicas in one process, leases that stop renewing, deposed leaders, fenced writes — timings
//! a real API server cannot be made to show on demand.
//!
//! Real-server twins: `tests/tests/k8s/leader.rs` (`kill -9` of the holder on a real Lease,
//! failover measured) and `tests/tests/k8s_cluster_wide/outage.rs` (the API server stopped
//! for 30 s and etcd restarted: only the holder writes, one write per edit). The cases here
//! keep the fencing faults.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use kube::runtime::controller::Action;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};

use super::*;
use crate::crd::FleetPolicy;
use crate::fixtures::cluster::FakeCluster;
use crate::reconcile::{Context, reconcile};

/// Short leases keep the takeover tests to a few seconds.
const DURATION: Duration = Duration::from_secs(3);
const GRACE: Duration = Duration::from_secs(1);

fn lease(identity: &str) -> LeaseConfig {
    LeaseConfig {
        name: "fleetgate-controller".into(),
        namespace: crate::fixtures::NS.into(),
        identity: identity.into(),
        duration: DURATION,
        grace: GRACE,
    }
}

struct Replica {
    leader: Leadership,
    election: Election,
    ctx: Arc<Context>,
    metrics: Metrics,
}

async fn replica(cluster: &FakeCluster, identity: &str) -> Replica {
    let client = cluster.client(identity);
    let metrics = Metrics::unregistered().expect("metrics must register");
    let (leader, election) =
        Leadership::elect(client.clone(), lease(identity), Some(metrics.clone()))
            .await
            .expect("the replica must join the election");
    let ctx =
        Context::new(client, metrics.clone(), Some(identity.into())).with_leader(leader.clone());
    Replica {
        leader,
        election,
        ctx: Arc::new(ctx),
        metrics,
    }
}

/// Wait until `check` holds, failing after `limit`; returns how long it took.
async fn until(limit: Duration, what: &str, check: impl Fn() -> bool) -> Duration {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < limit, "{what} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    start.elapsed()
}

fn writes_by(cluster: &FakeCluster, identity: &str) -> Vec<&'static str> {
    cluster
        .writes()
        .into_iter()
        .filter(|(who, _)| who == identity)
        .map(|(_, what)| what)
        .collect()
}

#[tokio::test]
async fn of_two_replicas_only_the_one_holding_the_lease_writes() {
    let cluster = FakeCluster::default();
    let a = replica(&cluster, "a").await;
    until(
        DURATION,
        "the first replica must take the free lease",
        || a.leader.is_leader(),
    )
    .await;
    let b = replica(&cluster, "b").await;
    // Let b look at the lease a few times.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!b.leader.is_leader(), "the second replica must follow");
    assert_eq!(
        cluster.holder().as_deref(),
        Some("a"),
        "the Lease must name a"
    );

    let fp = Arc::new(FleetPolicy::test());
    let followed = reconcile(fp.clone(), b.ctx.clone())
        .await
        .expect("a follower's reconcile must not fail");
    assert_eq!(followed, Action::await_change(), "a follower must wait");
    assert!(
        writes_by(&cluster, "b").is_empty(),
        "a follower must write nothing"
    );
    assert_eq!(
        b.metrics.runs.get(),
        0,
        "a follower must not count a reconcile"
    );

    reconcile(fp, a.ctx.clone())
        .await
        .expect("the leader's reconcile must succeed");
    assert_eq!(
        writes_by(&cluster, "a"),
        vec!["config_map", "event", "status"],
        "the leader must apply the ConfigMap, publish the event and write the status"
    );
    assert_eq!(a.metrics.leader.get(), 1, "the leader's gauge must be 1");
    assert_eq!(b.metrics.leader.get(), 0, "the follower's gauge must be 0");
    assert_eq!(
        a.metrics
            .lease_transitions
            .with_label_values(&["acquired"])
            .get(),
        1,
        "one acquisition must be counted"
    );
    a.election.step_down().await;
    b.election.step_down().await;
}

#[tokio::test]
async fn when_the_holder_stops_renewing_the_other_replica_takes_over_and_writes() {
    let cluster = FakeCluster::default();
    let a = replica(&cluster, "a").await;
    until(DURATION, "the first replica must lead", || {
        a.leader.is_leader()
    })
    .await;
    let b = replica(&cluster, "b").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!b.leader.is_leader(), "the second replica must follow");

    // a freezes: nothing it sends reaches the API server any more.
    cluster.cut_off("a", true);
    // The takeover comes at most one lease duration after a's last renewal, plus the up to
    // 1 s the lease crate waits at random before taking an expired lease (no two replicas
    // then race for it), plus polling.
    let took = until(
        DURATION + Duration::from_millis(2_500),
        "the follower must take the lease over",
        || b.leader.is_leader(),
    )
    .await;
    assert_eq!(
        cluster.holder().as_deref(),
        Some("b"),
        "the Lease must name b"
    );
    eprintln!("takeover after the holder froze: {took:?} (lease duration {DURATION:?})");
    assert!(
        a.leader.is_leader(),
        "the frozen replica cannot know yet: it still believes it leads"
    );

    reconcile(Arc::new(FleetPolicy::test()), b.ctx.clone())
        .await
        .expect("the new leader's reconcile must succeed");
    assert_eq!(
        writes_by(&cluster, "b"),
        vec!["config_map", "event", "status"],
        "the new leader must write"
    );

    // a is still cut off: its reconcile fails on the first read and writes nothing.
    let frozen = reconcile(Arc::new(FleetPolicy::test()), a.ctx.clone()).await;
    assert!(frozen.is_err(), "a cut-off replica's reconcile must fail");
    // a thaws and reconciles at once, before or after its election noticed the loss: either
    // way the write is fenced (deposed) or skipped (not the leader).
    cluster.cut_off("a", false);
    reconcile(Arc::new(FleetPolicy::test()), a.ctx.clone())
        .await
        .expect("a fenced reconcile is not a failure");
    assert!(
        writes_by(&cluster, "a").is_empty(),
        "the deposed replica must not write: {:?}",
        cluster.writes()
    );
    assert_eq!(a.metrics.failures.with_label_values(&["fenced"]).get(), 0);

    // The crate learns at its next look that b holds the lease.
    until(
        DURATION * 2,
        "the thawed replica must learn it lost the lease",
        || !a.leader.is_leader(),
    )
    .await;
    assert_eq!(
        a.metrics
            .lease_transitions
            .with_label_values(&["lost"])
            .get(),
        1,
        "the loss must be counted"
    );
    assert_eq!(a.metrics.leader.get(), 0, "the deposed gauge must be 0");
    a.election.step_down().await;
    b.election.step_down().await;
}

#[tokio::test]
async fn a_deposed_leader_that_still_believes_it_leads_stops_before_its_next_write() {
    let cluster = FakeCluster::default();
    let a = replica(&cluster, "a").await;
    until(DURATION, "the replica must lead", || a.leader.is_leader()).await;
    // Another replica has taken the lease; a's election has not looked again yet (it renews
    // only `grace` before the lease runs out).
    cluster.take_lease("b", DURATION.as_secs());
    assert!(a.leader.is_leader(), "a must still believe it leads");
    reconcile(Arc::new(FleetPolicy::test()), a.ctx.clone())
        .await
        .expect("a fenced reconcile is not a failure");
    assert!(
        writes_by(&cluster, "a").is_empty(),
        "a deposed leader must not write: {:?}",
        cluster.writes()
    );
    assert_eq!(
        a.metrics
            .fenced_writes
            .with_label_values(&["deposed"])
            .get(),
        1,
        "the write must be fenced as deposed"
    );
    a.election.step_down().await;
}

#[tokio::test]
async fn a_lease_naming_this_replica_but_not_renewed_in_time_fences_the_write() {
    let cluster = FakeCluster::default();
    let a = replica(&cluster, "a").await;
    until(DURATION, "the replica must lead", || a.leader.is_leader()).await;
    // The Lease names a, but its last renewal is older than the lease duration: another
    // replica may already have taken it under its own clock.
    cluster.renewed_ago("a", DURATION.as_secs(), Duration::from_secs(10));
    let fenced = a.leader.confirm().await;
    assert!(
        matches!(fenced, Err(Fenced::Unconfirmed { .. })),
        "a lapsed renewal must not confirm: {fenced:?}"
    );
    // The reconcile that met it comes back soon: the replica still leads, so no acquisition
    // would ever reconcile this FleetPolicy again (found at 500 FleetPolicies on a loaded API
    // server: 98 of them never got a status).
    let again = reconcile(Arc::new(FleetPolicy::test()), a.ctx.clone())
        .await
        .expect("a fenced reconcile is not a failure");
    assert_eq!(
        again,
        Action::requeue(crate::reconcile::UNCONFIRMED_RETRY),
        "an unconfirmed lease must retry the write, not wait for a change"
    );
    assert_eq!(
        a.metrics
            .fenced_writes
            .with_label_values(&["unconfirmed"])
            .get(),
        2,
        "both fenced writes must be counted"
    );
    a.election.step_down().await;
}

#[tokio::test]
async fn a_confirmed_lease_is_read_again_only_when_its_renewal_may_have_run_out() {
    let cluster = FakeCluster::default();
    let a = replica(&cluster, "a").await;
    until(DURATION, "the replica must lead", || a.leader.is_leader()).await;
    let before = cluster.lease_reads("a");
    a.leader
        .confirm()
        .await
        .expect("a fresh leader must confirm");
    a.leader
        .confirm()
        .await
        .expect("a second write must confirm");
    a.leader
        .confirm()
        .await
        .expect("a third write must confirm");
    assert_eq!(
        cluster.lease_reads("a") - before,
        1,
        "three writes within one renewal must read the Lease once"
    );
    a.election.step_down().await;
}

#[tokio::test]
async fn stepping_down_releases_the_lease_so_the_follower_takes_over_at_once() {
    let cluster = FakeCluster::default();
    let a = replica(&cluster, "a").await;
    until(DURATION, "the replica must lead", || a.leader.is_leader()).await;
    let b = replica(&cluster, "b").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let a_leader = a.leader.clone();
    a.election.step_down().await;
    assert!(
        !a_leader.is_leader(),
        "a replica that stepped down must not lead"
    );
    assert_eq!(a.metrics.leader.get(), 0, "its gauge must drop at once");
    // The follower sleeps until the lease would have run out at the latest, then sees it free.
    until(
        DURATION + Duration::from_secs(2),
        "the follower must take over",
        || b.leader.is_leader(),
    )
    .await;
    b.election.step_down().await;
}

#[test]
fn lease_settings_are_checked_before_the_election_starts() {
    let bad = |duration: u64, grace: u64, identity: &str| LeaseConfig {
        duration: Duration::from_secs(duration),
        grace: Duration::from_secs(grace),
        identity: identity.into(),
        ..lease("a")
    };
    assert!(
        bad(15, 5, "pod-0").validate().is_ok(),
        "the defaults must pass"
    );
    for (d, g) in [(5, 5), (5, 0), (0, 0), (3, 4)] {
        assert!(
            bad(d, g, "pod-0").validate().is_err(),
            "duration {d} s with grace {g} s must be refused"
        );
    }
    assert!(
        bad(15, 5, " ").validate().is_err(),
        "an empty identity must be refused"
    );
}

// --- every replica serves the webhook ---

fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/webhook")
        .join(name)
}

/// A throw-away CA and a `localhost` leaf written to `dir`; returns the CA PEM.
fn certificates(dir: &std::path::Path) -> String {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().expect("a CA key");
    let issuer = rcgen::CertifiedIssuer::self_signed(params, key).expect("the CA must self-sign");
    let leaf_key = rcgen::KeyPair::generate().expect("a leaf key");
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .expect("leaf params")
        .signed_by(&leaf_key, &issuer)
        .expect("the leaf must be signed");
    std::fs::write(dir.join("tls.crt"), leaf.pem()).expect("the cert must be written");
    std::fs::write(dir.join("tls.key"), leaf_key.serialize_pem()).expect("the key");
    issuer.pem()
}

async fn review(addr: SocketAddr, ca_pem: &str) -> Value {
    let mut roots = rustls::RootCertStore::empty();
    let ca = rustls::pki_types::CertificateDer::from_pem_slice(ca_pem.as_bytes()).expect("CA PEM");
    roots.add(ca).expect("the CA must be trusted");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("a server name");
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("the TLS handshake must succeed");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .expect("the HTTP handshake must succeed");
    tokio::spawn(conn);
    let pod: Value = serde_yaml::from_str(
        &std::fs::read_to_string(golden("default.pod.yaml")).expect("the fixture pod"),
    )
    .expect("the fixture pod must be YAML");
    let body = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "6f1c2d3e-0000-4000-8000-00000000abcd",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "agents", "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:agents:deployer"},
            "object": pod, "dryRun": false,
        }
    });
    let req = http::Request::builder()
        .method("POST")
        .uri(crate::webhook::MUTATE_PATH)
        .header(http::header::HOST, "localhost")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("the request must build");
    let resp = sender
        .send_request(req)
        .await
        .expect("the webhook must answer");
    let bytes = resp.into_body().collect().await.expect("a body").to_bytes();
    let answer: Value = serde_json::from_slice(&bytes).expect("the answer must be JSON");
    answer["response"].clone()
}

#[tokio::test]
async fn every_replica_answers_the_webhook_whatever_the_lease_state() {
    let cluster = FakeCluster::default();
    let a = replica(&cluster, "a").await;
    until(DURATION, "a must lead", || a.leader.is_leader()).await;
    let b = replica(&cluster, "b").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!b.leader.is_leader(), "b must follow");

    let dir = tempfile::tempdir().expect("a temp dir");
    let ca = certificates(dir.path());
    for identity in ["a", "b"] {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let setup = crate::webhook::server::Setup::from_args(
            addr,
            Some(&dir.path().join("tls.crt")),
            Some(&dir.path().join("tls.key")),
            Some(&golden("injector.yaml")),
        )
        .expect("the webhook setup must load")
        .expect("a certificate turns the webhook on");
        let serving = setup.serving();
        let task = setup
            .spawn(cluster.client(identity), Some("agents"), None, None)
            .await
            .expect("the webhook must start");
        until(
            Duration::from_secs(5),
            "the webhook must sync and serve",
            || serving.load(Ordering::Relaxed),
        )
        .await;
        let response = review(addr, &ca).await;
        assert_eq!(
            response["allowed"], true,
            "replica {identity} must admit the pod: {response}"
        );
        assert_eq!(
            response["patchType"],
            "JSONPatch",
            "replica {identity} (leading: {}) must inject the gate: {response}",
            identity == "a"
        );
        task.abort();
    }
    a.election.step_down().await;
    b.election.step_down().await;
}
