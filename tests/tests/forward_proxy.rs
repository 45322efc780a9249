//! The forward proxy end to end: the real gate binary, the Debian `curl` through
//! `http_proxy`/`HTTPS_PROXY`, loopback origins (plain and TLS with an rcgen CA) whose names
//! resolve through the stub DNS server. Allowed traffic, every refusal class, DNS rebinding,
//! the tunnel cap, loops, idle timeout, SIGTERM drain and the listener metrics; and Hermes
//! 0.20.1's cron `monitor_url` through the proxy (`forward_proxy/hermes_monitor.rs`).

// Helpers outside `#[test]` functions fail the test on broken setup, exactly as the tests do.
#![allow(clippy::expect_used)]

#[path = "forward_proxy/support.rs"]
mod support;

#[path = "forward_proxy/hermes_monitor.rs"]
mod hermes_monitor;

use std::time::Duration;

use support::{Fixture, GateOptions, eventually, raw_connect};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const LOG_WAIT: Duration = Duration::from_secs(5);

async fn fixture() -> Fixture {
    Fixture::start(GateOptions::default())
        .await
        .expect("the fixture (DNS, origins, gate) must start")
}

async fn fixture_with(args: &[&str]) -> Fixture {
    let options = GateOptions {
        args: args.iter().map(|a| (*a).to_string()).collect(),
        ..GateOptions::default()
    };
    Fixture::start(options)
        .await
        .expect("the fixture must start")
}

#[tokio::test]
async fn allowed_http_is_relayed_with_host_kept_and_hop_headers_and_proxy_credentials_dropped() {
    let f = fixture().await;
    let url = f.http_url("allowed.test", "/");
    let run = f
        .curl(
            &url,
            &[
                "--proxy-user",
                "agent:hunter2",
                "-H",
                "Connection: X-Hop",
                "-H",
                "X-Hop: 1",
                "-H",
                "X-End: kept",
            ],
        )
        .await
        .expect("curl must run");
    assert_eq!(run.status, 200, "an allowed URL must be relayed: {run:?}");
    assert_eq!(run.body, "hello from the origin");
    let seen = f
        .origin
        .last_request()
        .expect("the origin must see the request");
    let host = format!("allowed.test:{}", f.origin.addr().port());
    assert_eq!(
        seen.headers["host"],
        host.as_str(),
        "Host must name the target"
    );
    assert_eq!(seen.uri.to_string(), "/", "the origin must get origin-form");
    assert_eq!(
        seen.headers["x-end"], "kept",
        "end-to-end headers must cross"
    );
    for hop in [
        "proxy-authorization",
        "proxy-connection",
        "connection",
        "x-hop",
    ] {
        assert!(
            !seen.headers.contains_key(hop),
            "{hop} must not reach the origin: {:?}",
            seen.headers
        );
    }
    let line = f
        .gate
        .wait_for_json_log(
            |l| l["target"] == "egress.decision" && l["proxy_type"] == "http",
            LOG_WAIT,
        )
        .await
        .expect("one decision line per request");
    assert_eq!(line["verdict"], "allow");
    assert_eq!(line["upstream_status"], 200);
    assert_eq!(line["upstream"], f.origin.addr().to_string().as_str());

    let forged = f
        .curl(&f.http_url("allowed.test", "/forged"), &[])
        .await
        .expect("curl must run");
    assert_eq!(forged.status, 200);
    assert!(
        !forged
            .headers
            .to_ascii_lowercase()
            .contains("x-fleetgate-error"),
        "an upstream must not forge a gate refusal header: {}",
        forged.headers
    );
}

#[tokio::test]
async fn allowed_https_goes_through_a_connect_tunnel_to_the_tls_origin() {
    let f = fixture().await;
    let run = f
        .curl(&f.https_url("secure.test", "/"), &[])
        .await
        .expect("curl must run");
    assert_eq!(run.connect_status, 200, "the tunnel must open: {run:?}");
    assert_eq!(run.status, 200, "the TLS exchange must succeed: {run:?}");
    assert_eq!(run.body, "hello from the origin");
    assert_eq!(
        f.origin.hits("/"),
        1,
        "the request must reach the origin once"
    );
    let line = f
        .gate
        .wait_for_json_log(
            |l| l["target"] == "egress.decision" && l["proxy_type"] == "connect",
            LOG_WAIT,
        )
        .await
        .expect("the CONNECT must be logged");
    assert_eq!(line["verdict"], "allow");
    assert_eq!(
        line["url"],
        format!("secure.test:{}", f.tls.addr.port()).as_str(),
        "the log names the canonical authority"
    );
    assert_eq!(
        line["sni"], "secure.test",
        "the line names the ClientHello's server name"
    );
    assert_eq!(
        f.tls.server_names(),
        vec![Some("secure.test".to_string())],
        "the origin must see curl's one ClientHello"
    );
}

#[tokio::test]
async fn refusals_are_403_with_the_code_header_and_never_reach_an_origin() {
    let f = fixture().await;
    let secret_host = "ghp_abcdefghij1234567890.allowed.test";
    let cases = [
        (f.http_url("private.test", "/"), "ip_private_range"),
        (f.https_url("private.test", "/"), "ip_private_range"),
        (f.http_url("metadata.test", "/"), "ip_cloud_metadata"),
        (f.http_url("blocked.test", "/"), "blocked_by_policy"),
        (f.https_url("blocked.test", "/"), "blocked_by_policy"),
        ("http://allowed.test:22/".to_string(), "port_not_allowed"),
        ("https://allowed.test:22/".to_string(), "port_not_allowed"),
        (
            f.http_url("allowed.test", "/?token=abc"),
            "sensitive_query_param",
        ),
        (
            f.http_url("allowed.test", "/v1/sk-abcdefghijklmnop1234"),
            "secret_in_url",
        ),
        (f.https_url(secret_host, "/"), "secret_in_host"),
    ];
    for (url, code) in &cases {
        let run = f.curl(url, &[]).await.expect("curl must run");
        let via_connect = url.starts_with("https://");
        let status = if via_connect {
            run.connect_status
        } else {
            run.status
        };
        assert_eq!(status, 403, "{url} must be refused with 403: {run:?}");
        assert!(
            run.has_header("x-fleetgate-error", code),
            "{url} must carry x-fleetgate-error: {code}: {}",
            run.headers
        );
        let proxy_type = if via_connect { "connect" } else { "http" };
        f.gate
            .wait_for_json_log(
                |l| {
                    l["target"] == "egress.decision"
                        && l["reason"] == *code
                        && l["proxy_type"] == proxy_type
                        && l["verdict"] == "deny"
                },
                LOG_WAIT,
            )
            .await
            .unwrap_or_else(|e| panic!("{url} must log a {proxy_type} deny with {code}: {e}"));
    }
    assert_eq!(
        f.origin.total_hits(),
        0,
        "no refused request may reach an origin"
    );
    assert_eq!(
        f.dns.queries(secret_host),
        0,
        "a secret in a host label must be refused before DNS"
    );
}

#[tokio::test]
async fn dns_rebinding_never_lets_the_gate_dial_the_private_answer() {
    let f = fixture().await;
    let mut allowed = 0;
    let mut refused = 0;
    for i in 0..6 {
        let url = if i % 2 == 0 {
            f.http_url("rebind.test", "/")
        } else {
            f.https_url("rebind.test", "/")
        };
        let run = f.curl(&url, &[]).await.expect("curl must run");
        let status = if url.starts_with("https") {
            run.connect_status
        } else {
            run.status
        };
        match status {
            200 => allowed += 1,
            403 => {
                assert!(
                    run.has_header("x-fleetgate-error", "ip_private_range"),
                    "a rebound answer must be refused as private: {run:?}"
                );
                refused += 1;
            }
            other => panic!("{url}: unexpected status {other}: {run:?}"),
        }
    }
    assert!(
        allowed > 0 && refused > 0,
        "both answers must be seen ({allowed} allowed, {refused} refused)"
    );
    assert_eq!(
        f.origin.hits("/"),
        allowed,
        "every allowed request and only those reach the origin"
    );
    assert!(
        f.dns.queries("rebind.test") >= 6,
        "every request must resolve anew"
    );
    let dialled_private = f
        .gate
        .json_logs()
        .iter()
        .any(|l| l["upstream"].as_str().is_some_and(|u| u.starts_with("10.")));
    assert!(
        !dialled_private,
        "the gate must never dial the private answer"
    );
}

#[tokio::test]
async fn past_the_tunnel_cap_a_connect_gets_429_with_retry_after_until_a_tunnel_closes() {
    let f = fixture_with(&["--max-tunnels", "2"]).await;
    let target = format!("allowed.test:{}", f.origin.addr().port());
    let (s1, _, first) = raw_connect(f.proxy, &target).await.expect("first CONNECT");
    let (s2, _, _second) = raw_connect(f.proxy, &target).await.expect("second CONNECT");
    assert_eq!((s1, s2), (200, 200), "two tunnels fit under a cap of two");
    let run = f
        .curl(&f.https_url("secure.test", "/"), &[])
        .await
        .expect("curl must run");
    assert_eq!(
        run.connect_status, 429,
        "a third tunnel must be refused: {run:?}"
    );
    assert!(run.has_header("retry-after", "1"), "{}", run.headers);
    assert!(
        run.has_header("x-fleetgate-error", "too_many_tunnels"),
        "{}",
        run.headers
    );
    let active = f
        .metric(
            "fleetgate_listener_active_tunnels",
            &[("listener", "forward_proxy")],
        )
        .await
        .expect("metrics");
    assert_eq!(active, 2.0, "the gauge must show the two open tunnels");
    // Every listener thread counts the connections it holds: the two tunnels, the scrape's
    // own connection, and at most the refused one not yet closed.
    let mut open = 0.0;
    for shard in ["0", "1"] {
        open += f
            .metric("fleetgate_shard_connections", &[("shard", shard)])
            .await
            .expect("metrics");
    }
    assert!(
        (3.0..=4.0).contains(&open),
        "the listener threads hold the two tunnels and the scrape: {open}"
    );
    drop(first);
    let mut reopened = None;
    for _ in 0..50 {
        let run = f
            .curl(&f.https_url("secure.test", "/"), &[])
            .await
            .expect("curl");
        if run.connect_status == 200 {
            reopened = Some(run);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let run = reopened.expect("a closed tunnel must free its slot");
    assert_eq!(run.status, 200, "{run:?}");
}

#[tokio::test]
async fn requests_to_the_gates_own_listeners_are_refused_as_loops() {
    let f = fixture().await;
    let port = f.proxy.port();
    let (status, head, _) = raw_connect(f.proxy, &format!("self.test:{port}"))
        .await
        .expect("CONNECT must be answered");
    assert_eq!(status, 403, "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("x-fleetgate-error: proxy_loop"),
        "{head}"
    );
    let run = f
        .curl(&format!("http://127.0.0.1:{port}/"), &[])
        .await
        .expect("curl must run");
    assert_eq!(run.status, 403, "{run:?}");
    assert!(
        run.has_header("x-fleetgate-error", "proxy_loop"),
        "{}",
        run.headers
    );
    let line = f
        .gate
        .wait_for_json_log(|l| l["reason"] == "proxy_loop", LOG_WAIT)
        .await
        .expect("the loop must be logged");
    assert_eq!(line["gate"], "proxy_loop");
}

#[tokio::test]
async fn sigterm_lets_an_in_flight_slow_request_finish_then_stops_accepting() {
    let mut f = fixture().await;
    let (proxy, ca) = (f.proxy, f.tls.ca_path.clone());
    let url = f.http_url("allowed.test", "/slow");
    let slow = tokio::spawn(async move { support::curl_via(proxy, &ca, &url, &[]).await });
    eventually(Duration::from_secs(5), || f.origin.hits("/slow") == 1)
        .await
        .expect("the slow request must reach the origin");
    let status = f
        .gate
        .terminate(Duration::from_secs(10))
        .await
        .expect("the gate must exit after draining");
    assert!(status.success(), "a drained gate exits 0: {status}");
    let run = slow.await.expect("join").expect("curl must run");
    assert_eq!(
        run.status, 200,
        "the in-flight request must complete: {run:?}"
    );
    assert_eq!(run.body, "slow but complete");
    assert!(
        tokio::net::TcpStream::connect(proxy).await.is_err(),
        "a drained gate accepts no new connection"
    );
}

#[tokio::test]
async fn an_idle_tunnel_is_closed_after_the_idle_timeout_and_an_active_one_is_not() {
    let f = fixture_with(&["--tunnel-idle-timeout-ms", "400"]).await;
    let target = format!("allowed.test:{}", f.origin.addr().port());
    let (status, _, mut idle) = raw_connect(f.proxy, &target).await.expect("CONNECT");
    assert_eq!(status, 200);
    let (status, _, mut active) = raw_connect(f.proxy, &target).await.expect("CONNECT");
    assert_eq!(status, 200);
    let request = b"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
    for _ in 0..4 {
        active
            .write_all(request)
            .await
            .expect("write through the tunnel");
        let mut buf = [0u8; 512];
        let n = active
            .read(&mut buf)
            .await
            .expect("read through the tunnel");
        assert!(n > 0, "an active tunnel must stay open");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(3), idle.read(&mut buf))
        .await
        .expect("the idle tunnel must be closed by the gate")
        .unwrap_or(0);
    assert_eq!(n, 0, "an idle tunnel ends with EOF");
}

#[tokio::test]
async fn origin_form_and_malformed_connect_requests_are_refused() {
    let f = fixture().await;
    let reply = fleetgate_e2e::http::get(f.proxy, "/")
        .await
        .expect("GET / must be answered");
    assert_eq!(reply.status.as_u16(), 400);
    assert_eq!(reply.header("x-fleetgate-error"), Some("invalid_request"));
    assert!(reply.text().contains("absolute-form"), "{}", reply.text());
    let port = f.origin.addr().port();
    for authority in [format!("[allowed.test]:{port}"), "allowed.test".to_string()] {
        let (status, head, _) = raw_connect(f.proxy, &authority).await.expect("answered");
        assert!(
            status == 400 || status == 403,
            "CONNECT {authority} must be refused: {head}"
        );
    }
    assert_eq!(f.origin.total_hits(), 0);
}

#[tokio::test]
async fn listener_metrics_count_connections_bytes_refusals_and_tunnels() {
    let f = fixture().await;
    let lbl = ("listener", "forward_proxy");
    let ok = f
        .curl(&f.http_url("allowed.test", "/big"), &[])
        .await
        .expect("curl");
    assert_eq!(ok.status, 200);
    let no = f.curl("http://allowed.test:22/", &[]).await.expect("curl");
    assert_eq!(no.status, 403);
    let target = format!("allowed.test:{}", f.origin.addr().port());
    let (_, _, mut tunnel) = raw_connect(f.proxy, &target).await.expect("CONNECT");
    let gauge = f
        .metric("fleetgate_listener_active_tunnels", &[lbl])
        .await
        .expect("metrics");
    assert_eq!(gauge, 1.0, "one tunnel is open");
    tunnel
        .write_all(b"POST / HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
        .await
        .expect("write");
    let mut response = Vec::new();
    tunnel.read_to_end(&mut response).await.expect("read");
    assert!(String::from_utf8_lossy(&response).contains("hello from the origin"));
    drop(tunnel);
    let connections = f
        .metric("fleetgate_listener_connections_total", &[lbl])
        .await
        .expect("m");
    assert!(
        connections >= 3.0,
        "three client connections at least, got {connections}"
    );
    let bytes_out = f
        .metric(
            "fleetgate_listener_bytes_total",
            &[lbl, ("direction", "out")],
        )
        .await
        .expect("m");
    assert!(
        bytes_out >= 256.0 * 1024.0,
        "the big body must be counted out, got {bytes_out}"
    );
    let bytes_in = f
        .metric(
            "fleetgate_listener_bytes_total",
            &[lbl, ("direction", "in")],
        )
        .await
        .expect("m");
    // Plain HTTP inside the tunnel goes through the relay, which counts body bytes.
    assert!(
        bytes_in >= 5.0,
        "the tunnelled request body must be counted in"
    );
    let refused = f
        .metric(
            "fleetgate_listener_refusals_total",
            &[lbl, ("code", "port_not_allowed")],
        )
        .await
        .expect("m");
    assert_eq!(refused, 1.0, "one port refusal");
    let mut closed = false;
    for _ in 0..50 {
        if f.metric("fleetgate_listener_active_tunnels", &[lbl])
            .await
            .expect("m")
            == 0.0
        {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        closed,
        "the gauge must drop back to zero when the tunnel ends"
    );
}
