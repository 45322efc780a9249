//! Side-by-side benchmark (ignored by default; `tests/bench/llm_route.sh` runs it on release
//! builds): the same client talks to the stub provider directly and through the gate's LLM
//! route, on one kept-alive connection each. Added time to the first SSE byte (median over
//! many small streamed calls) and throughput of a 1 MiB streamed answer.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use fleetgate_e2e::gate::GateProcess;
use fleetgate_e2e::llm_stub::{StubKind, StubOptions, StubProvider};
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::time::Instant;

use super::support::{Secrets, policy, provider};

const TTFB_CALLS: usize = 300;
const BULK_CALLS: usize = 20;
const BULK_BYTES: usize = 1024 * 1024;

async fn client(addr: SocketAddr) -> SendRequest<Full<Bytes>> {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    sender
}

/// One streamed call: (time to the first body byte, total time, body bytes).
async fn call(
    sender: &mut SendRequest<Full<Bytes>>,
    path: &str,
    model: &str,
) -> (Duration, Duration, usize) {
    let body = json!({"model": model, "stream": true, "messages": []}).to_string();
    let req = http::Request::post(path)
        .header("host", "bench")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .expect("request");
    sender.ready().await.expect("ready");
    let started = Instant::now();
    let resp = sender.send_request(req).await.expect("response");
    let mut body = resp.into_body();
    let (mut first, mut bytes) = (None, 0);
    while let Some(frame) = body.frame().await {
        if let Some(d) = frame.expect("frame").data_ref() {
            first.get_or_insert_with(|| started.elapsed());
            bytes += d.len();
        }
    }
    (first.unwrap_or_default(), started.elapsed(), bytes)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

async fn measure(addr: SocketAddr, path: &str) -> (Duration, f64) {
    let mut sender = client(addr).await;
    for _ in 0..20 {
        call(&mut sender, path, "warm").await;
    }
    let mut firsts = Vec::with_capacity(TTFB_CALLS);
    for _ in 0..TTFB_CALLS {
        firsts.push(call(&mut sender, path, "small").await.0);
    }
    let model = format!("bulk:{BULK_BYTES}");
    let (mut total, mut bytes) = (Duration::ZERO, 0);
    for _ in 0..BULK_CALLS {
        let (_, t, b) = call(&mut sender, path, &model).await;
        total += t;
        bytes += b;
    }
    (median(firsts), bytes as f64 / total.as_secs_f64() / 1e6)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run tests/bench/llm_route.sh"]
async fn bench_llm_route_against_the_stub_direct_and_through_the_gate() {
    let stub = StubProvider::start(StubOptions::new(StubKind::OpenAi))
        .await
        .expect("stub");
    let secrets = Secrets::new();
    let llm = format!(
        "  providers:\n{}  roles:\n    main: stub\n",
        provider("stub", "openai", &stub.base_url(), &secrets.path("key"))
    );
    let yaml = policy(&secrets, &[stub.addr().port()], &llm);
    let gate = GateProcess::spawn(&yaml)
        .await
        .expect("the gate must start");
    let (direct_ttfb, direct_mbps) = measure(stub.addr(), "/v1/chat/completions").await;
    let (gate_ttfb, gate_mbps) = measure(gate.api_addr(), "/llm/main/v1/chat/completions").await;
    let added = gate_ttfb.saturating_sub(direct_ttfb);
    println!(
        "{}",
        json!({
            "ttfb_median_us": {"direct": direct_ttfb.as_micros() as u64, "gate": gate_ttfb.as_micros() as u64,
                               "added": added.as_micros() as u64,
                               "ratio": gate_ttfb.as_secs_f64() / direct_ttfb.as_secs_f64()},
            "stream_1mib_mb_per_s": {"direct": direct_mbps, "gate": gate_mbps, "ratio": gate_mbps / direct_mbps},
            "calls": {"ttfb": TTFB_CALLS, "bulk": BULK_CALLS},
        })
    );
    assert!(
        gate_mbps > 0.0 && direct_mbps > 0.0,
        "both paths must stream"
    );
}
