//! One admission for every listener, end to end with the real gate binary: the same refused
//! targets sent through the extract API (the `direct` backend), an absolute-form request on
//! the forward proxy and a CONNECT get the same code on every listener that can carry them,
//! one `egress.decision` line each with the same fields, and one counted refusal each.
//!
//! The differences that remain are the admission table's: a CONNECT sees no URL (no query to
//! hold a secret) and names a token in a host label `secret_in_host` where a URL listener's E1
//! names the whole URL; the extract API refuses a secret for the whole call.

// Helpers outside `#[test]` functions fail the test on broken setup, exactly as the tests do.
#![allow(clippy::expect_used)]

#[path = "forward_proxy/support.rs"]
#[allow(dead_code)]
mod support;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use support::{Fixture, GateOptions, raw_connect};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    Extract,
    ForwardHttp,
    Connect,
}

/// An absolute-form request written byte for byte (no client canonicalises the host); the
/// status and the head.
async fn raw_get(proxy: SocketAddr, url: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(proxy).await.expect("the proxy accepts");
    let authority = url
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_default();
    let request = format!("GET {url} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("the request is written");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer).to_string();
    let head = text
        .split("\r\n\r\n")
        .next()
        .unwrap_or_default()
        .to_string();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head)
}

fn header_code(head: &str) -> Option<String> {
    head.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("x-fleetgate-error")
            .then(|| v.trim().to_string())
    })
}

/// Send `target` through `via`; the code the client read.
async fn send(f: &Fixture, via: Via, url: &str, authority: &str) -> String {
    match via {
        Via::Extract => {
            let body: Value = fleetgate_e2e::http::post_json(
                f.gate.api_addr(),
                "/v1/extract",
                &json!({"urls": [url]}),
            )
            .await
            .expect("the api answers")
            .json()
            .expect("JSON");
            body["code"]
                .as_str()
                .or_else(|| body["results"][0]["code"].as_str())
                .unwrap_or_else(|| panic!("no code for {url}: {body}"))
                .to_string()
        }
        Via::ForwardHttp => {
            let (status, head) = raw_get(f.proxy, url).await;
            assert_eq!(status, 403, "{url}: {head}");
            header_code(&head).unwrap_or_else(|| panic!("no code header: {head}"))
        }
        Via::Connect => {
            let (status, head, _stream) = raw_connect(f.proxy, authority)
                .await
                .expect("the proxy answers the CONNECT");
            assert_eq!(status, 403, "{authority}: {head}");
            header_code(&head).unwrap_or_else(|| panic!("no code header: {head}"))
        }
    }
}

/// The decision lines written so far for `code`.
fn lines_for(f: &Fixture, code: &str) -> Vec<Value> {
    f.gate
        .json_logs()
        .into_iter()
        .filter(|l| l["target"] == "egress.decision" && l["reason"] == code)
        .collect()
}

/// Refusals of `code` counted so far by the gates (the loop check is one).
async fn refusals(f: &Fixture, code: &str) -> f64 {
    f.metric(
        "fleetgate_gate_decisions_total",
        &[("verdict", "deny"), ("reason", code)],
    )
    .await
    .expect("metrics")
}

#[tokio::test]
async fn refused_targets_get_one_code_one_line_and_one_count_on_every_listener() {
    let f = Fixture::start(GateOptions::default())
        .await
        .expect("the fixture (DNS, origins, gate) must start");
    let plain = f.origin.addr().port();
    let tls = f.tls.addr.port();
    let own = f.proxy.port();
    let secret = "sk-abcdefghijklmnopqrstuvwxyz012345";
    // (name, URL for the URL listeners, authority for CONNECT, code per listener)
    let cases: Vec<(&str, String, String, [Option<&str>; 3])> = vec![
        (
            "metadata address",
            format!("http://metadata.test:{plain}/latest"),
            format!("metadata.test:{tls}"),
            [Some("ip_cloud_metadata"); 3],
        ),
        (
            "private range",
            format!("http://private.test:{plain}/"),
            format!("private.test:{tls}"),
            [Some("ip_private_range"); 3],
        ),
        (
            "DNS failure",
            format!("http://nowhere.test:{plain}/"),
            format!("nowhere.test:{tls}"),
            [Some("dns_failure"); 3],
        ),
        (
            "blocklisted host",
            format!("http://blocked.test:{plain}/"),
            format!("blocked.test:{tls}"),
            [Some("blocked_by_policy"); 3],
        ),
        (
            "secret in the URL",
            format!("http://allowed.test:{plain}/?q={secret}"),
            String::new(),
            [Some("secret_in_url"), Some("secret_in_url"), None],
        ),
        (
            "secret in a host label",
            format!("http://AKIAABCDEFGHIJKLMNOP.allowed.test:{plain}/"),
            format!("AKIAABCDEFGHIJKLMNOP.allowed.test:{tls}"),
            [
                Some("secret_in_url"),
                Some("secret_in_url"),
                Some("secret_in_host"),
            ],
        ),
        (
            "port off the list",
            "http://allowed.test:9/".to_string(),
            "allowed.test:9".to_string(),
            [Some("port_not_allowed"); 3],
        ),
        (
            "a loop to the gate itself",
            format!("http://self.test:{own}/"),
            format!("self.test:{own}"),
            // The forward proxy's own port is on the fixture's port list, so the extract
            // API's own fetch meets the loop check, not the port list.
            [Some("proxy_loop"); 3],
        ),
    ];
    let mut fields: Option<BTreeSet<String>> = None;
    for (name, url, authority, codes) in &cases {
        for (via, want) in [Via::Extract, Via::ForwardHttp, Via::Connect]
            .into_iter()
            .zip(codes)
        {
            let Some(want) = want else { continue };
            let lines_before = lines_for(&f, want).len();
            let counted_before = refusals(&f, want).await;
            let got = send(&f, via, url, authority).await;
            assert_eq!(&got, want, "{name} through {via:?}");
            // The line is written off the request path: wait for it.
            let mut lines = lines_for(&f, want);
            for _ in 0..100 {
                if lines.len() > lines_before {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                lines = lines_for(&f, want);
            }
            assert_eq!(
                lines.len(),
                lines_before + 1,
                "{name} through {via:?}: one decision line"
            );
            let line = lines.last().expect("a line");
            assert_eq!(line["verdict"], "deny", "{line}");
            assert!(line["client"].is_string(), "{name} through {via:?}: {line}");
            let keys: BTreeSet<String> = line
                .as_object()
                .expect("an object")
                .keys()
                .filter(|k| !matches!(k.as_str(), "timestamp" | "fields" | "span"))
                .cloned()
                .collect();
            match &fields {
                None => fields = Some(keys),
                Some(first) => assert_eq!(&keys, first, "{name} through {via:?}: same fields"),
            }
            assert_eq!(
                refusals(&f, want).await,
                counted_before + 1.0,
                "{name} through {via:?}: one counted refusal"
            );
        }
    }
}
