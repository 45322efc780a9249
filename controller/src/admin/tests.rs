use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::metrics::{Metrics, Write};

async fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("the admin port must accept");
    let request = format!("GET {path} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("the request must be sent");
    let mut out = String::new();
    stream
        .read_to_string(&mut out)
        .await
        .expect("the answer must be readable");
    out
}

#[tokio::test]
async fn admin_serves_live_ready_and_metrics() {
    let registry = Registry::new();
    let metrics = Metrics::register(&registry).expect("metrics must register");
    metrics.wrote(Write::Status);
    let state = AdminState {
        registry,
        ready: Arc::default(),
        accept_errors: Some(metrics.accept_errors.clone()),
        api_answered_at: None,
        synced: Vec::new(),
    };
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("port 0 must bind");
    let addr = listener
        .local_addr()
        .expect("a bound listener has an address");
    let server = tokio::spawn(serve(listener, state.clone()));

    assert!(
        get(addr, "/live").await.starts_with("HTTP/1.1 200"),
        "/live must answer 200"
    );
    assert!(
        get(addr, "/ready").await.starts_with("HTTP/1.1 503"),
        "/ready must answer 503 before start"
    );
    state.ready.store(true, Ordering::Relaxed);
    assert!(
        get(addr, "/ready").await.starts_with("HTTP/1.1 200"),
        "/ready must answer 200 once started"
    );
    let body = get(addr, "/metrics").await;
    assert!(
        body.contains("fleetgate_controller_writes_total{object=\"status\"} 1"),
        "/metrics must show the counted write: {body}"
    );
    assert!(
        get(addr, "/nope").await.starts_with("HTTP/1.1 404"),
        "unknown paths must answer 404"
    );
    server.abort();
}

#[tokio::test]
async fn ready_needs_a_recent_answer_from_the_api_server() {
    let answered = Arc::new(std::sync::atomic::AtomicI64::new(0));
    let state = AdminState {
        ready: Arc::new(AtomicBool::new(true)),
        api_answered_at: Some(answered.clone()),
        ..AdminState::default()
    };
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("port 0 must bind");
    let addr = listener.local_addr().expect("address");
    let server = tokio::spawn(serve(listener, state));
    let never = get(addr, "/ready").await;
    assert!(
        never.starts_with("HTTP/1.1 503") && never.contains("has not answered yet"),
        "{never}"
    );
    answered.store(unix_now(), Ordering::Relaxed);
    assert!(
        get(addr, "/ready").await.starts_with("HTTP/1.1 200"),
        "a fresh answer makes it ready"
    );
    answered.store(unix_now() - 45, Ordering::Relaxed);
    let stale = get(addr, "/ready").await;
    assert!(
        stale.starts_with("HTTP/1.1 503") && stale.contains("has not answered for 4"),
        "an API server quiet for 45 s makes it unready: {stale}"
    );
    server.abort();
}

#[tokio::test]
async fn ready_waits_for_every_reflector_to_sync() {
    let (reconciler, webhook) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let state = AdminState {
        ready: Arc::new(AtomicBool::new(true)),
        synced: vec![
            ("the reconciler's FleetPolicy reflector", reconciler.clone()),
            ("the webhook's FleetPolicy reflector", webhook.clone()),
        ],
        ..AdminState::default()
    };
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("port 0 must bind");
    let addr = listener.local_addr().expect("address");
    let server = tokio::spawn(serve(listener, state));
    let first = get(addr, "/ready").await;
    assert!(
        first.starts_with("HTTP/1.1 503")
            && first.contains("reconciler's FleetPolicy reflector has not synced"),
        "{first}"
    );
    reconciler.store(true, Ordering::Relaxed);
    let second = get(addr, "/ready").await;
    assert!(
        second.starts_with("HTTP/1.1 503")
            && second.contains("webhook's FleetPolicy reflector has not synced"),
        "{second}"
    );
    webhook.store(true, Ordering::Relaxed);
    assert!(
        get(addr, "/ready").await.starts_with("HTTP/1.1 200"),
        "both synced makes it ready"
    );
    // A webhook whose reflector ended stops serving: not ready again.
    webhook.store(false, Ordering::Relaxed);
    assert!(get(addr, "/ready").await.starts_with("HTTP/1.1 503"));
    server.abort();
}
