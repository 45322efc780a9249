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
