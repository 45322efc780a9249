//! E1 runs before any DNS query, on every form of the host: a stub DNS server that logs every
//! query sees none for a URL E1 refuses (tokens in host labels written upper-case or in
//! fullwidth forms included), while an ordinary URL is resolved (so the stub does see
//! queries). And the E2 details: a host with `_` is refused with its own code before DNS; a
//! name whose server never answers is given up after `timeoutMs × attempts`, with `attempts`
//! tries; the metadata floor has one code in every embedded-IPv4 form.

// A test crate: its helpers report failures by panicking.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use fleetgate_e2e::dns::{DnsReply, StubDns};
use fleetgate_proxy::judge::metrics::ProxyMetrics;
use fleetgate_proxy::live::runtime::Runtime;
use fleetgate_proxy::policy::Policy;
use fleetgate_proxy::web::pipeline::Pipeline;
use hickory_proto::rr::RecordType;

fn runtime(dns: &StubDns, timeout_ms: u64, attempts: u32) -> std::sync::Arc<Runtime> {
    let yaml = format!(
        "version: v1\negress:\n  resolver:\n    nameservers: [\"{}\"]\n    timeoutMs: {timeout_ms}\n    attempts: {attempts}\n",
        dns.addr()
    );
    let policy = Policy::parse(yaml.as_bytes(), std::path::Path::new("."))
        .expect("the test policy must be valid");
    Runtime::build(policy).expect("the runtime must build")
}

/// `ghp_` + 36 characters, written in fullwidth forms.
fn fullwidth(ascii: &str) -> String {
    ascii
        .chars()
        .map(|c| char::from_u32(c as u32 - 0x21 + 0xFF01).unwrap_or(c))
        .collect()
}

#[tokio::test]
async fn no_dns_query_is_sent_for_a_url_e1_refuses() {
    let dns = StubDns::builder()
        .answer("control.example", ["93.184.216.34".parse().unwrap()])
        .start()
        .await
        .expect("the stub DNS server must start");
    let rt = runtime(&dns, 1000, 1);
    let metrics = ProxyMetrics::unregistered().expect("metrics");
    let pipeline = Pipeline::new(&rt.rules, &rt.web, &metrics);
    let hex = "0123456789abcdef0123456789abcdef01234567";
    let ghp = "ghp_Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78";
    // (URL, the name a resolver would have been asked)
    let refused = [
        (
            format!("https://GLPTT-{}.example.com/", hex.to_uppercase()),
            format!("glptt-{hex}.example.com"),
        ),
        (
            format!("https://{}.example.com/", fullwidth(ghp)),
            format!("{}.example.com", ghp.to_lowercase()),
        ),
        (
            format!("https://{ghp}.example.com/"),
            format!("{}.example.com", ghp.to_lowercase()),
        ),
        (
            "https://ASIAY34FZKBOKMUTVV7A.example.com/".to_string(),
            "asiay34fzkbokmutvv7a.example.com".to_string(),
        ),
        (
            "https://hooks.example.com/?access_token=abc".to_string(),
            "hooks.example.com".to_string(),
        ),
        (
            "https://e.example.com/%2573k-abcdefghijkl".to_string(),
            "e.example.com".to_string(),
        ),
    ];
    for (url, name) in &refused {
        let check = pipeline.check_url(url).await;
        let code = check.refusal.as_ref().map(|r| r.code());
        assert!(
            matches!(code, Some("secret_in_url" | "sensitive_query_param")),
            "{url} must be refused by E1, got {code:?}"
        );
        assert_eq!(dns.queries(name), 0, "{url}: no query may leave for {name}");
    }
    let control = pipeline.check_url("https://control.example/").await;
    assert!(control.refusal.is_none(), "{control:?}");
    assert!(
        dns.queries("control.example") > 0,
        "the stub must see the queries of a URL that passes E1"
    );
}

#[tokio::test]
async fn a_host_with_an_underscore_is_refused_with_its_own_code_before_dns() {
    let dns = StubDns::builder().start().await.expect("stub DNS");
    let rt = runtime(&dns, 1000, 1);
    let metrics = ProxyMetrics::unregistered().expect("metrics");
    let check = Pipeline::new(&rt.rules, &rt.web, &metrics)
        .check_url("https://my_service.example.com/")
        .await;
    let refusal = check.refusal.expect("refused");
    assert_eq!(refusal.code(), "hostname_underscore");
    assert!(
        !refusal.message().contains("my_service"),
        "the message must not repeat the name: {}",
        refusal.message()
    );
    assert_eq!(dns.queries("my_service.example.com"), 0);
}

#[tokio::test]
async fn a_silent_name_server_is_given_up_after_timeout_times_attempts() {
    let dns = StubDns::builder()
        .name("silent.example", vec![DnsReply::Drop; 64])
        .start()
        .await
        .expect("stub DNS");
    let rt = runtime(&dns, 300, 2);
    let metrics = ProxyMetrics::unregistered().expect("metrics");
    let started = tokio::time::Instant::now();
    let check = Pipeline::new(&rt.rules, &rt.web, &metrics)
        .check_url("https://silent.example/")
        .await;
    let took = started.elapsed();
    assert_eq!(
        check.refusal.as_ref().map(|r| r.code()),
        Some("dns_failure"),
        "{check:?}"
    );
    // The bound is 300 ms × 2; generous slack for a loaded machine, far below the 3 rounds
    // of the resolver's own retry count.
    assert!(
        took < std::time::Duration::from_millis(1_500),
        "given up after {took:?}"
    );
    for record in [RecordType::A, RecordType::AAAA] {
        let sent = dns.queries_of("silent.example", record);
        assert!(
            (1..=2).contains(&sent),
            "attempts: 2 means at most 2 {record} queries, got {sent}"
        );
    }
}

#[tokio::test]
async fn the_metadata_floor_has_one_code_in_every_embedded_form() {
    let dns = StubDns::builder().start().await.expect("stub DNS");
    let rt = runtime(&dns, 1000, 1);
    let metrics = ProxyMetrics::unregistered().expect("metrics");
    let pipeline = Pipeline::new(&rt.rules, &rt.web, &metrics);
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "http://[::169.254.169.254]/",
        "http://[::ffff:0:169.254.169.254]/",
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://[2002:a9fe:a9fe::1]/",
        "http://[2001:0:4136:e378:8000:63bf:5601:5601]/",
    ] {
        let check = pipeline.check_url(url).await;
        assert_eq!(
            check.refusal.as_ref().map(|r| r.code()),
            Some("ip_cloud_metadata"),
            "{url}"
        );
    }
}
