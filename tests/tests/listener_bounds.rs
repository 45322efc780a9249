//! The api and admin listeners against clients that never finish: request heads sent but
//! never ended, more connections than the listener takes, request bodies sent but for their
//! last byte, and more bodies at once than the listener's budget. Each is cut or refused in
//! bounded time and memory while the gate keeps serving everyone else. The peak and current
//! RSS of the gate under each flood are printed (`--nocapture`).

// A test crate: its helpers report failures by panicking.
#![allow(clippy::expect_used)]

use std::net::SocketAddr;
use std::time::Duration;

use fleetgate_e2e::gate::GateProcess;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

/// The gate's `VmHWM` (peak) and `VmRSS` (now), in KiB.
fn rss(gate: &GateProcess) -> (u64, u64) {
    let pid = gate.pid().expect("the gate runs");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} must be reported"))
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// Everything the gate sends on `stream` until it closes the connection or `within` passes
/// (then `None`).
async fn until_closed(stream: &mut TcpStream, within: Duration) -> Option<String> {
    let mut got = Vec::new();
    let read = timeout(within, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    read.ok()
        .map(|()| String::from_utf8_lossy(&got).into_owned())
}

/// A connection that has sent `bytes`, and nothing more.
async fn sent(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(bytes).await.expect("the gate reads");
    s
}

/// `GET <path>` on a fresh connection: the status line's code.
async fn status_of(addr: SocketAddr, path: &str) -> Option<u16> {
    let req = format!("GET {path} HTTP/1.1\r\nhost: gate\r\nconnection: close\r\n\r\n");
    let mut s = sent(addr, req.as_bytes()).await;
    let text = until_closed(&mut s, Duration::from_secs(5)).await?;
    text.get(9..12)?.parse().ok()
}

/// A request head of about `size` bytes that never ends (no blank line).
fn unfinished_head(size: usize) -> Vec<u8> {
    let mut head = b"GET /live HTTP/1.1\r\nhost: gate\r\nx-pad: ".to_vec();
    head.resize(size, b'a');
    head
}

fn policy(header_seconds: u32) -> String {
    format!(
        "version: v1\nlisten:\n  api: 127.0.0.1:0\n  admin: 127.0.0.1:0\n\
         store:\n  root: ${{WORK_DIR}}/volume\n\
         egress:\n  timeouts: {{headerSeconds: {header_seconds}}}\n"
    )
}

#[tokio::test]
async fn unfinished_heads_on_the_api_and_admin_listeners_are_cut_at_64_kib() {
    let gate = GateProcess::builder(&policy(30))
        .arg("--api-max-connections")
        .arg("300")
        .spawn()
        .await
        .expect("the gate starts");
    let (_, idle) = rss(&gate);
    // 250 connections each sending 300 KB of a head it never ends (the gate used to buffer
    // each for 30 s): each is answered 431 and closed once its head passes 64 KiB.
    let flood = 250;
    let started = Instant::now();
    let mut conns = Vec::new();
    for i in 0..flood {
        let addr = if i % 5 == 0 {
            gate.admin_addr()
        } else {
            gate.api_addr()
        };
        let mut s = TcpStream::connect(addr).await.expect("connect");
        // The gate may close mid-write once it has seen 64 KiB: a failed write is fine.
        let _ = s.write_all(&unfinished_head(300_000)).await;
        conns.push(s);
    }
    let (peak, _) = rss(&gate);
    for (i, s) in conns.iter_mut().enumerate() {
        let answer = until_closed(s, Duration::from_secs(10))
            .await
            .unwrap_or_else(|| panic!("connection {i} must be closed, not held"));
        assert!(
            answer.is_empty() || answer.starts_with("HTTP/1.1 431"),
            "connection {i}: an over-long head gets 431 (or a close): {answer:?}"
        );
    }
    let cut_in = started.elapsed();
    drop(conns);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (peak_after, now) = rss(&gate);
    eprintln!(
        "{flood} x 300 KB unfinished heads: idle RSS {idle} KiB, peak {} KiB (+{} KiB), RSS after {now} KiB, all cut in {cut_in:?}",
        peak.max(peak_after),
        peak.max(peak_after).saturating_sub(idle)
    );
    // 64 KiB a connection, not 300 KB: the flood stays far under what it sent (75 MB).
    assert!(
        peak.max(peak_after).saturating_sub(idle) < 48 * 1024,
        "the flood must not grow the gate by more than 48 MiB: idle {idle} KiB, peak {} KiB",
        peak.max(peak_after)
    );
    assert_eq!(status_of(gate.api_addr(), "/nope").await, Some(404));
    assert_eq!(status_of(gate.admin_addr(), "/live").await, Some(200));
}

#[tokio::test]
async fn a_head_that_stalls_is_closed_at_the_header_timeout() {
    let gate = GateProcess::spawn(&policy(1))
        .await
        .expect("the gate starts");
    for addr in [gate.api_addr(), gate.admin_addr()] {
        let started = Instant::now();
        let mut s = sent(addr, b"GET /live HTTP/1.1\r\nhost: ga").await;
        let closed = until_closed(&mut s, Duration::from_secs(5)).await;
        assert!(
            closed.is_some(),
            "{addr}: a head unfinished after the 1 s header timeout is closed (was: held 30 s)"
        );
        assert!(started.elapsed() < Duration::from_secs(4), "{addr}");
    }
    assert_eq!(status_of(gate.admin_addr(), "/live").await, Some(200));
}

#[tokio::test]
async fn a_connection_past_the_cap_is_refused_while_the_open_ones_are_served() {
    let gate = GateProcess::builder(&policy(20))
        .arg("--api-max-connections")
        .arg("8")
        .arg("--admin-max-connections")
        .arg("4")
        .spawn()
        .await
        .expect("the gate starts");
    for (addr, cap, name) in [(gate.api_addr(), 8, "api"), (gate.admin_addr(), 4, "admin")] {
        // `cap` connections that started a request and paused.
        let mut held = Vec::new();
        for _ in 0..cap {
            held.push(sent(addr, b"GET /live HTTP/1.1\r\n").await);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut over = sent(addr, b"GET /live HTTP/1.1\r\nhost: gate\r\n\r\n").await;
        let answer = until_closed(&mut over, Duration::from_secs(5))
            .await
            .expect("the connection past the cap is answered and closed");
        assert!(
            answer.starts_with("HTTP/1.1 503") && answer.contains("too_many_connections"),
            "{name}: past the cap: {answer:?}"
        );
        // The open ones still work.
        let first = &mut held[0];
        first
            .write_all(b"host: gate\r\nconnection: close\r\n\r\n")
            .await
            .expect("write");
        let answer = until_closed(first, Duration::from_secs(5))
            .await
            .expect("answered");
        let expected = if name == "api" {
            "HTTP/1.1 404"
        } else {
            "HTTP/1.1 200"
        };
        assert!(
            answer.starts_with(expected),
            "{name}: held connection: {answer:?}"
        );
        // Its place is free again once it closed.
        held.remove(0);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let path = if name == "api" { "/nope" } else { "/live" };
        assert!(
            status_of(addr, path).await.is_some_and(|s| s != 503),
            "{name}: a freed place takes a new connection"
        );
        drop(held);
    }
    let refused = gate
        .wait_for_json_log(
            |l| l["reason"] == "too_many_connections" && l["listener"] == "admin",
            Duration::from_secs(5),
        )
        .await
        .expect("a decision line for the refused connection");
    assert_eq!(refused["verdict"], "deny");
}

/// A POST of `declared` bytes to `path` that sends `send` of them (a gate that refuses the
/// body may close before all are written).
async fn partial_post(addr: SocketAddr, path: &str, declared: usize, send: usize) -> TcpStream {
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: gate\r\ncontent-type: application/json\r\n\
         content-length: {declared}\r\nconnection: close\r\n\r\n"
    );
    let mut s = sent(addr, head.as_bytes()).await;
    let body = vec![b' '; send];
    let _ = s.write_all(&body).await;
    s
}

#[tokio::test]
async fn an_unfinished_body_is_dropped_at_its_deadline_and_bodies_past_the_budget_get_503() {
    let yaml = format!(
        "{}llm:\n  roles:\n    main: oai\n  providers:\n    oai:\n      kind: openai\n      baseUrl: http://127.0.0.1:9/v1\n      keyFile: /nonexistent/key\n",
        policy(20)
    );
    let gate = GateProcess::builder(&yaml)
        .arg("--body-idle-timeout-ms")
        .arg("1000")
        .arg("--body-timeout-ms")
        .arg("3000")
        .arg("--body-budget-bytes")
        .arg("3500000")
        .spawn()
        .await
        .expect("the gate starts");
    let api = gate.api_addr();
    let (_, idle) = rss(&gate);

    // Sent but for its last byte: cut after the idle deadline, on both kinds of route.
    for path in ["/v1/extract", "/llm/main/v1/chat/completions"] {
        let started = Instant::now();
        let mut s = partial_post(api, path, 1_000_000, 999_999).await;
        let answer = until_closed(&mut s, Duration::from_secs(5))
            .await
            .unwrap_or_else(|| panic!("{path}: an unfinished body must be dropped"));
        assert!(
            answer.starts_with("HTTP/1.1 408") && answer.contains("body_timeout"),
            "{path}: {answer:?}"
        );
        let took = started.elapsed();
        assert!(took < Duration::from_secs(3), "{path}: cut after {took:?}");
    }

    // Three bodies of 1 MB held open take 3 MB of the 3.5 MB budget; the next is refused at
    // once, with a decision line, and the gate keeps serving.
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(partial_post(api, "/v1/extract", 1_000_000, 10).await);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    for path in ["/v1/extract", "/llm/main/v1/chat/completions"] {
        let mut over = partial_post(api, path, 1_000_000, 0).await;
        let answer = until_closed(&mut over, Duration::from_secs(2))
            .await
            .unwrap_or_else(|| panic!("{path}: a body past the budget is refused at once"));
        assert!(
            answer.starts_with("HTTP/1.1 503")
                && answer.contains("body_budget_exhausted")
                && answer.to_ascii_lowercase().contains("retry-after: 1"),
            "{path}: {answer:?}"
        );
    }
    let line = gate
        .wait_for_json_log(
            |l| l["reason"] == "body_budget_exhausted" && l["proxy_type"] == "llm",
            Duration::from_secs(5),
        )
        .await
        .expect("a decision line for the refused body");
    assert_eq!(line["verdict"], "deny");
    assert_eq!(line["listener"], "api");
    assert_eq!(line["url"], "/llm/main/v1/chat/completions");
    // Small requests still go through.
    assert_eq!(status_of(gate.admin_addr(), "/live").await, Some(200));
    let mut small = partial_post(api, "/v1/extract", 2, 2).await;
    let answer = until_closed(&mut small, Duration::from_secs(5))
        .await
        .expect("answered");
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer:?}");
    // The held bodies are dropped at their deadline and their room comes back.
    for s in &mut held {
        let answer = until_closed(s, Duration::from_secs(5)).await.expect("cut");
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
    }
    let mut after = partial_post(api, "/v1/extract", 1_000_000, 1_000_000).await;
    let answer = until_closed(&mut after, Duration::from_secs(5))
        .await
        .expect("answered");
    assert!(
        answer.starts_with("HTTP/1.1 400"),
        "the budget is free again: {answer:?}"
    );

    // A flood of 40 unfinished 1 MB bodies: at most the budget is held.
    let mut flood = Vec::new();
    for _ in 0..40 {
        flood.push(partial_post(api, "/v1/extract", 1_000_000, 999_999).await);
    }
    let (peak, _) = rss(&gate);
    let mut admitted = 0;
    for s in &mut flood {
        // Admitted bodies are cut at the deadline (408); the rest were refused at once (503,
        // or a reset when the refusal crossed the rest of the body on the wire).
        let answer = until_closed(s, Duration::from_secs(5)).await.expect("cut");
        admitted += usize::from(answer.starts_with("HTTP/1.1 408"));
    }
    let refused = 40 - admitted;
    drop(flood);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (peak_after, now) = rss(&gate);
    let peak = peak.max(peak_after);
    eprintln!(
        "40 x 1 MB unfinished bodies, 3.5 MB budget: {refused} refused 503; idle RSS {idle} KiB, peak {peak} KiB (+{} KiB), RSS after {now} KiB",
        peak.saturating_sub(idle)
    );
    assert!(
        admitted <= 3,
        "only what fits the budget is held: {admitted} admitted"
    );
    assert!(
        peak.saturating_sub(idle) < 24 * 1024,
        "40 unfinished bodies must not grow the gate by more than 24 MiB: idle {idle} KiB, peak {peak} KiB"
    );
}

/// A request body of tiny JSON values (`[0,0,…]`): a megabyte is half a million values, some
/// 50 MB as a tree. Sixty of them at once, all inside the body budget, are refused with `400`
/// after one counting pass and never become trees: the gate grows by a small multiple of the
/// bytes it holds, not by gigabytes.
#[tokio::test]
async fn request_bodies_of_tiny_json_values_are_refused_before_a_tree_is_built() {
    let gate = GateProcess::builder(&policy(20))
        .spawn()
        .await
        .expect("the gate starts");
    let api = gate.api_addr();
    let (_, idle) = rss(&gate);
    let mut body = br#"{"urls":["http://example.test/"],"formats":["markdown"],"x":["#.to_vec();
    while body.len() < 1_000_000 {
        body.extend_from_slice(b"0,");
    }
    body.extend_from_slice(b"0]}");
    let head = format!(
        "POST /v1/extract HTTP/1.1\r\nhost: gate\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let mut request = head.into_bytes();
    request.extend_from_slice(&body);
    let sends = (0..60).map(|_| {
        let request = request.clone();
        tokio::spawn(async move {
            let mut s = sent(api, &request).await;
            until_closed(&mut s, Duration::from_secs(30)).await
        })
    });
    let started = Instant::now();
    let answers = futures_util::future::join_all(sends).await;
    let took = started.elapsed();
    let (peak, now) = rss(&gate);
    eprintln!(
        "60 x 1 MB bodies of tiny JSON values, answered in {took:?}: idle RSS {idle} KiB, peak {peak} KiB (+{} KiB), RSS after {now} KiB",
        peak.saturating_sub(idle)
    );
    for answer in answers {
        let answer = answer.expect("the task").expect("answered and closed");
        assert!(
            answer.starts_with("HTTP/1.1 400") && answer.contains("more than 20000 JSON values"),
            "{:.300}",
            answer
        );
    }
    assert!(
        peak.saturating_sub(idle) < 256 * 1024,
        "60 MB of request bodies must not grow the gate by more than 256 MiB: idle {idle} KiB, peak {peak} KiB"
    );
    // A real request still goes through the parser (and is answered on its merits).
    let ok = br#"{"urls":["http://127.0.0.1:9/"]}"#;
    let mut small = format!(
        "POST /v1/extract HTTP/1.1\r\nhost: gate\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        ok.len()
    )
    .into_bytes();
    small.extend_from_slice(ok);
    let mut s = sent(api, &small).await;
    let answer = until_closed(&mut s, Duration::from_secs(30))
        .await
        .expect("answered");
    assert!(!answer.contains("JSON values"), "{answer:.300}");
}
