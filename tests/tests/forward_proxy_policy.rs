//! The egress policy fields end to end with the real gate binary: `egress.maxTunnels` caps
//! CONNECT tunnels (and `--max-tunnels` overrides it), `egress.timeouts.idleSeconds` closes
//! idle tunnels, and `egress.ports` refuses the extract pipeline's own fetches (the `direct`
//! backend and its redirects) with the same code as a CONNECT to that port.

// Helpers outside `#[test]` functions fail the test on broken setup, exactly as the tests do.
#![allow(clippy::expect_used)]

#[path = "forward_proxy/support.rs"]
#[allow(dead_code)]
mod support;

use std::time::Duration;

use fleetgate_e2e::origin::Reply;
use serde_json::json;
use support::{Fixture, GateOptions, raw_connect};
use tokio::io::AsyncReadExt;

async fn fixture(args: &[&str], egress_extra: &str) -> Fixture {
    let options = GateOptions {
        args: args.iter().map(|a| (*a).to_string()).collect(),
        egress_extra: egress_extra.to_string(),
        ..GateOptions::default()
    };
    Fixture::start(options)
        .await
        .expect("the fixture (DNS, origins, gate) must start")
}

#[tokio::test]
async fn the_policy_tunnel_cap_refuses_past_its_size_and_the_flag_overrides_it() {
    let cases = [
        ("policy cap of 1", vec![], 1),
        (
            "flag of 2 over a policy cap of 1",
            vec!["--max-tunnels", "2"],
            2,
        ),
    ];
    for (name, args, fits) in cases {
        let f = fixture(&args, "  maxTunnels: 1\n").await;
        let target = format!("allowed.test:{}", f.origin.addr().port());
        let mut open = Vec::new();
        for _ in 0..fits {
            let (status, head, stream) = raw_connect(f.proxy, &target).await.expect("CONNECT");
            assert_eq!(
                status, 200,
                "{name}: a tunnel under the cap must open: {head}"
            );
            open.push(stream);
        }
        let (status, head, _) = raw_connect(f.proxy, &target).await.expect("CONNECT");
        assert_eq!(
            status, 429,
            "{name}: one tunnel past the cap must be refused: {head}"
        );
        assert!(
            head.to_ascii_lowercase()
                .contains("x-fleetgate-error: too_many_tunnels"),
            "{name}: the refusal must carry its code: {head}"
        );
    }
}

#[tokio::test]
async fn the_policy_idle_timeout_closes_an_idle_tunnel() {
    let f = fixture(&[], "  timeouts:\n    idleSeconds: 1\n").await;
    let target = format!("allowed.test:{}", f.origin.addr().port());
    let (status, head, mut idle) = raw_connect(f.proxy, &target).await.expect("CONNECT");
    assert_eq!(status, 200, "the tunnel must open: {head}");
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(4), idle.read(&mut buf))
        .await
        .expect("an idle tunnel must be closed after egress.timeouts.idleSeconds")
        .unwrap_or(0);
    assert_eq!(n, 0, "an idle tunnel ends with EOF");
}

#[tokio::test]
async fn the_direct_backend_and_its_redirects_refuse_ports_off_the_allow_list_like_connect() {
    let f = fixture(&[], "").await;
    f.origin.set_route(
        "/to-port-22",
        Reply::redirect(302, "http://allowed.test:22/inner"),
    );
    let urls = json!([
        "http://allowed.test:22/direct",
        f.http_url("allowed.test", "/to-port-22"),
        f.http_url("allowed.test", "/"),
    ]);
    let reply =
        fleetgate_e2e::http::post_json(f.gate.api_addr(), "/v1/extract", &json!({ "urls": urls }))
            .await
            .expect("the extract call must answer");
    let body = reply.json().expect("the extract answer must be JSON");
    let rows = body["results"].as_array().expect("results must be a list");
    let codes: Vec<&str> = rows
        .iter()
        .map(|r| r["code"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        codes[..2],
        ["port_not_allowed", "port_not_allowed"],
        "a first hop or a redirect to a port off egress.ports must be refused: {body}"
    );
    assert!(
        rows[2]["error"].is_null(),
        "a URL on an allowed port must still be fetched: {body}"
    );
    assert_eq!(
        f.origin.hits("/to-port-22"),
        1,
        "the redirecting hop itself is on an allowed port"
    );
    let (status, head, _) = raw_connect(f.proxy, "allowed.test:22")
        .await
        .expect("CONNECT");
    assert_eq!(status, 403, "CONNECT to port 22 must be refused: {head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("x-fleetgate-error: port_not_allowed"),
        "CONNECT must refuse with the same code as the extract pipeline: {head}"
    );
}

/// CPU time (user + system, in clock ticks) the process `pid` has used so far.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the gate's stat");
    // Fields after the command name (which sits in parentheses): utime and stime are the
    // 12th and 13th of them.
    let rest = stat.rsplit_once(')').expect("a stat line").1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

#[tokio::test]
async fn out_of_descriptors_the_listener_backs_off_quietly_and_recovers() {
    let f = fixture(&[], "").await;
    let pid = f.gate.pid().expect("the gate's pid");
    let limited = std::process::Command::new("prlimit")
        .args(["--pid", &pid.to_string(), "--nofile=256:256"])
        .status();
    if !limited.is_ok_and(|s| s.success()) {
        eprintln!("skipped: prlimit could not lower the gate's descriptor limit");
        return;
    }
    // 400 idle clients: the gate holds what its 256 descriptors allow, the rest wait in the
    // backlog while every accept fails with EMFILE.
    let mut idle = Vec::new();
    for _ in 0..400 {
        idle.push(
            tokio::net::TcpStream::connect(f.proxy)
                .await
                .expect("the kernel accepts into the backlog"),
        );
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (log_before, cpu_before) = (f.gate.stderr_log().len(), cpu_ticks(pid));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (log_after, cpu_after) = (f.gate.stderr_log().len(), cpu_ticks(pid));
    let failures = f
        .metric(
            "fleetgate_listener_accept_errors_total",
            &[("listener", "forward_proxy"), ("kind", "resource")],
        )
        .await;
    drop(idle);
    eprintln!(
        "3 s out of descriptors: stderr +{} bytes, {} CPU ticks",
        log_after - log_before,
        cpu_after - cpu_before
    );
    assert!(
        log_after - log_before < 2048,
        "stderr grew {} bytes in 3 s of exhaustion",
        log_after - log_before
    );
    // 3 s is 300 ticks at the usual 100 Hz; a spinning loop takes nearly all of them.
    assert!(
        cpu_after - cpu_before < 45,
        "the gate used {} ticks of CPU in 3 s while out of descriptors",
        cpu_after - cpu_before
    );
    // Once the clients are gone the listener serves again.
    let mut served = false;
    for _ in 0..50 {
        let run = f.curl(&f.http_url("allowed.test", "/"), &[]).await;
        if run.is_ok_and(|r| r.status == 200) {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served, "a request must succeed once connections close");
    let failures = failures.unwrap_or(0.0);
    assert!(
        failures >= 1.0
            || f.metric(
                "fleetgate_listener_accept_errors_total",
                &[("listener", "forward_proxy"), ("kind", "resource")],
            )
            .await
            .expect("metrics")
                >= 1.0,
        "failed accepts must be counted"
    );
}

#[tokio::test]
async fn past_max_connections_a_new_connection_gets_503_and_the_cap_frees_on_close() {
    let f = fixture(&[], "  maxConnections: 2\n").await;
    let held = [
        tokio::net::TcpStream::connect(f.proxy)
            .await
            .expect("first"),
        tokio::net::TcpStream::connect(f.proxy)
            .await
            .expect("second"),
    ];
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut third = tokio::net::TcpStream::connect(f.proxy)
        .await
        .expect("the third connects");
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(5), third.read_to_string(&mut answer))
        .await
        .expect("the refusal arrives")
        .expect("read");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.contains("x-fleetgate-error: too_many_connections"),
        "{answer}"
    );
    assert!(answer.contains("retry-after: 1"), "{answer}");
    let refused = f
        .metric(
            "fleetgate_listener_refusals_total",
            &[
                ("listener", "forward_proxy"),
                ("code", "too_many_connections"),
            ],
        )
        .await
        .expect("metrics");
    assert_eq!(refused, 1.0, "the refusal is counted");
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let run = f
        .curl(&f.http_url("allowed.test", "/"), &[])
        .await
        .expect("curl runs");
    assert_eq!(run.status, 200, "closed connections free the cap: {run:?}");
}
