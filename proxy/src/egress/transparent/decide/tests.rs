//! The transparent gate order against a stub DNS server: which name is refused by which gate,
//! and that the dial targets are the checked answers on the original port.

use std::net::SocketAddr;
use std::sync::Arc;

use fleetgate_e2e::dns::StubDns;

use super::*;
use crate::egress::relay::sniff::{Protocol, Sniffed};
use crate::policy::Policy;

async fn stub_dns() -> StubDns {
    StubDns::builder()
        .answer("ok.example", ["127.0.0.1".parse().unwrap()])
        .answer("internal.example", ["10.1.2.3".parse().unwrap()])
        .answer("blocked.example", ["127.0.0.1".parse().unwrap()])
        .answer("report.example", ["127.0.0.1".parse().unwrap()])
        .start()
        .await
        .expect("the stub DNS server must start")
}

fn runtime(dns: &StubDns, mode: &str) -> Arc<Runtime> {
    let yaml = format!(
        "version: v1\n\
         egress:\n  allowCIDRs: [\"127.0.0.1/32\"]\n  ports: [443, 8080]\n  resolver:\n    nameservers: [\"{}\"]\n    timeoutMs: 1000\n    attempts: 1\n\
         websiteBlocklist:\n  enabled: true\n  mode: {mode}\n  domains: [\"blocked.example\"]\n",
        dns.addr()
    );
    let policy = Policy::parse(yaml.as_bytes(), std::path::Path::new("."))
        .expect("the test policy must be valid");
    Runtime::build(policy).expect("the runtime must build")
}

fn sniffed(protocol: Protocol, raw: Option<&str>, path: Option<&str>) -> Sniffed {
    let name = raw.map(|r| {
        crate::egress::relay::sniff::canonical_name(r, protocol).expect("test name must be valid")
    });
    Sniffed {
        protocol,
        raw_name: raw.map(str::to_string),
        name,
        port: None,
        path: path.map(str::to_string),
    }
}

fn original(port: u16) -> SocketAddr {
    SocketAddr::from(([203, 0, 113, 9], port))
}

#[tokio::test]
async fn each_gate_refuses_its_own_case() {
    let dns = stub_dns().await;
    let rt = runtime(&dns, "enforce");
    let metrics = ProxyMetrics::unregistered().unwrap();
    let tls = Protocol::Tls;
    let cases = [
        (
            "AWS key id in SNI (case kept)",
            sniffed(tls, Some("AKIAABCDEFGHIJKLMNOP.evil.example"), None),
            443,
            "secret_url",
            "secret_in_host",
        ),
        (
            "token in the first HTTP URL",
            sniffed(Protocol::Http, Some("ok.example"), Some("/?api_key=abc123")),
            8080,
            "secret_url",
            "sensitive_query_param",
        ),
        (
            "port off the list",
            sniffed(tls, Some("ok.example"), None),
            22,
            "port",
            "port_not_allowed",
        ),
        (
            "name resolving to 10.x",
            sniffed(tls, Some("internal.example"), None),
            443,
            "ssrf",
            "ip_private_range",
        ),
        (
            "metadata name",
            sniffed(tls, Some("metadata.google.internal"), None),
            443,
            "ssrf",
            "blocked_hostname",
        ),
        (
            "unknown name",
            sniffed(tls, Some("nx.example"), None),
            443,
            "ssrf",
            "dns_failure",
        ),
        (
            "blocklisted name",
            sniffed(tls, Some("blocked.example"), None),
            443,
            "website_blocklist",
            "blocked_by_policy",
        ),
        (
            "no SNI",
            sniffed(tls, None, None),
            443,
            "sniff",
            "no_target_name",
        ),
        (
            "IP literal Host",
            sniffed(Protocol::Http, Some("203.0.113.9"), Some("/")),
            8080,
            "sniff",
            "no_target_name",
        ),
    ];
    for (what, sniffed, port, gate, code) in cases {
        let got = admit(&rt, &metrics, &sniffed, original(port), false).await;
        match got {
            Err(refusal) => assert_eq!(
                (refusal.gate(), refusal.code()),
                (gate, code),
                "{what} must be refused by {gate}"
            ),
            Ok(a) => panic!("{what} must be refused, was admitted to {:?}", a.addrs),
        }
    }
}

#[tokio::test]
async fn an_allowed_name_dials_its_checked_answer_on_the_original_port() {
    let dns = stub_dns().await;
    let rt = runtime(&dns, "enforce");
    let metrics = ProxyMetrics::unregistered().unwrap();
    let sniffed = sniffed(Protocol::Tls, Some("OK.example"), None);
    let admission = admit(&rt, &metrics, &sniffed, original(443), false)
        .await
        .expect("an allowed name must be admitted");
    assert_eq!(admission.host, "ok.example");
    assert_eq!(
        (admission.addrs, admission.port),
        (vec!["127.0.0.1".parse::<std::net::IpAddr>().unwrap()], 443),
        "the gate must dial its own answer on the original port, never 203.0.113.9"
    );
    let ssrf_allows = metrics
        .gate_decisions
        .with_label_values(&["ssrf", "allow", "ok"])
        .get();
    assert_eq!(ssrf_allows, 1, "the SSRF decision must be counted");
}

#[tokio::test]
async fn report_mode_lets_a_blocklisted_name_through_and_counts_it() {
    let dns = stub_dns().await;
    let rt = runtime(&dns, "report");
    let metrics = ProxyMetrics::unregistered().unwrap();
    let sniffed = sniffed(Protocol::Tls, Some("blocked.example"), None);
    let admission = admit(&rt, &metrics, &sniffed, original(443), false).await;
    assert!(
        admission.is_ok(),
        "report mode must not refuse: {admission:?}"
    );
    let reported = metrics
        .gate_decisions
        .with_label_values(&["website_blocklist", "report", "blocked_by_policy"])
        .get();
    assert_eq!(
        reported, 1,
        "the would-be refusal must be counted as report"
    );
}

#[tokio::test]
async fn raw_ip_egress_checks_the_original_address_when_allowed() {
    let dns = stub_dns().await;
    let rt = runtime(&dns, "enforce");
    let metrics = ProxyMetrics::unregistered().unwrap();
    let no_name = sniffed(Protocol::Tls, None, None);
    let loopback = SocketAddr::from(([127, 0, 0, 1], 443));
    let admitted = admit(&rt, &metrics, &no_name, loopback, true).await;
    assert_eq!(
        admitted.map(|a| (a.addrs, a.port)),
        Ok((vec![loopback.ip()], 443)),
        "with raw IPs allowed, an allowed original address is dialed as is"
    );
    let private = SocketAddr::from(([10, 0, 0, 1], 443));
    let refused = admit(&rt, &metrics, &no_name, private, true).await;
    assert_eq!(
        refused.map_err(|r| (r.gate(), r.code())),
        Err(("ssrf", "ip_private_range")),
        "with raw IPs allowed, the original address still goes through the address table"
    );
    assert!(
        !rt.policy.egress.limits.allow_raw_ip,
        "raw-IP egress must be off unless the policy opens it"
    );
}

#[test]
fn the_raw_ip_switch_follows_the_policy_field() {
    for (yaml, want) in [
        ("version: v1\n", false),
        ("version: v1\negress:\n  allowRawIP: false\n", false),
        ("version: v1\negress:\n  allowRawIP: true\n", true),
    ] {
        let policy = Policy::parse(yaml.as_bytes(), std::path::Path::new("."))
            .expect("the test policy must be valid");
        assert_eq!(policy.egress.limits.allow_raw_ip, want, "{yaml}");
    }
}
