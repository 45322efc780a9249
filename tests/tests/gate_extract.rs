//! The gate core end to end: a real `fleetgate-proxy serve` process, a real stub DNS server
//! and loopback origins. Loopback is reachable only through `egress.allowCIDRs`, exactly as an
//! operator opens an internal service.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::print_stdout)]

use std::net::IpAddr;
use std::time::Duration;

use fleetgate_e2e::dns::{DnsReply, StubDns};
use fleetgate_e2e::gate::{GateProcess, loopback_policy};
use fleetgate_e2e::http;
use fleetgate_e2e::origin::{self, Origin, Reply};
use serde_json::{Value, json};

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address must parse")
}

/// A policy that resolves through `dns` and opens only 127.0.0.1 for the loopback origins.
fn policy(dns: &StubDns, extra: &str) -> String {
    loopback_policy(dns.addr(), extra)
}

async fn extract(gate: &GateProcess, urls: Value) -> (u16, Value) {
    let reply = http::post_json(gate.api_addr(), "/v1/extract", &json!({"urls": urls}))
        .await
        .expect("the api listener must answer");
    let body = reply.json().expect("the api must answer JSON");
    (reply.status.as_u16(), body)
}

fn row(body: &Value, i: usize) -> &Value {
    &body["results"][i]
}

async fn html_origin() -> Origin {
    origin::http1()
        .route(
            "/",
            Reply::html(
                "<html><head><title>Loopback Page</title></head><body><nav>menu</nav>\
                 <main><h1>Hello gate</h1><p>Body text.</p></main></body></html>",
            ),
        )
        .route(
            "/to-metadata",
            Reply::redirect(302, "http://169.254.169.254/latest/meta-data/"),
        )
        .route("/hang", Reply::hang())
        .route(
            "/png",
            Reply::new(200, "image/png", &b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"[..]),
        )
        .route("/gz", Reply::text("compressed words ".repeat(50)).gzip())
        .route("/br", Reply::text("brotli words ".repeat(50)).brotli())
        .run()
        .await
        .expect("origin must start")
}

#[tokio::test]
async fn an_allowed_origin_is_fetched_through_the_checked_address_and_converted() {
    let dns = StubDns::builder()
        .answer("origin.test", [ip("127.0.0.1")])
        .start()
        .await
        .unwrap();
    let origin = html_origin().await;
    let gate = GateProcess::spawn(&policy(&dns, ""))
        .await
        .expect("gate must start");
    let url = origin.url_with_host("origin.test", "/");
    let (status, body) = extract(&gate, json!([url])).await;
    assert_eq!(status, 200, "{body}");
    let r = row(&body, 0);
    assert_eq!(r["error"], Value::Null, "the page must be fetched: {body}");
    assert_eq!(r["title"], "Loopback Page");
    assert!(
        r["content"].as_str().unwrap().starts_with("# Hello gate"),
        "{body}"
    );
    assert!(
        !r["content"].as_str().unwrap().contains("menu"),
        "navigation must be dropped"
    );
    assert_eq!(r["served_by"], "direct");
    assert_eq!(r["cached"], false);
    let seen = origin
        .last_request()
        .expect("the origin must see the request");
    assert_eq!(
        seen.header("host"),
        Some(format!("origin.test:{}", origin.addr().port()).as_str()),
        "the Host header must carry the name, while the socket went to the checked address"
    );
    gate.wait_for_json_log(
        |l| l["gate"] == "vendor" && l["verdict"] == "allow" && l["vendor"] == "direct",
        Duration::from_secs(5),
    )
    .await
    .expect("one canonical allow line must be logged");
}

/// A page whose tables are misnested (text and rows where the parser must foster-parent
/// them) converts, and the parser's complaints about the page stay out of the gate's log:
/// whoever serves a page must not be able to write a log line per tag.
#[tokio::test]
async fn a_misnested_page_converts_without_a_log_line_per_tag() {
    let dns = StubDns::builder()
        .answer("origin.test", [ip("127.0.0.1")])
        .start()
        .await
        .unwrap();
    let cell = "<table>stray text<p>fostered</p><tr><td>cell</td></tr></table>".repeat(50);
    let page = format!(
        "<html><body><article><h1>Misnested</h1><p>The article's own words, long enough to \
         read as prose, with a comma, and another.</p>{cell}</article></body></html>"
    );
    let origin = origin::http1()
        .route("/misnested", Reply::html(page))
        .run()
        .await
        .expect("origin must start");
    let gate = GateProcess::spawn(&policy(&dns, ""))
        .await
        .expect("gate must start");
    let (status, body) = extract(
        &gate,
        json!([origin.url_with_host("origin.test", "/misnested")]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let content = row(&body, 0)["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(content.contains("The article's own words"), "{body}");
    gate.wait_for_json_log(
        |l| l["gate"] == "vendor" && l["verdict"] == "allow",
        Duration::from_secs(5),
    )
    .await
    .expect("the decision line must be logged");
    let log = gate.stderr_log();
    let parser_lines = log.lines().filter(|l| l.contains("html5ever")).count();
    assert_eq!(
        parser_lines, 0,
        "the page parser's warnings must not reach the log:\n{:.600}",
        log
    );
}

#[tokio::test]
async fn a_name_with_one_private_answer_among_several_is_refused_and_never_dialled() {
    let dns = StubDns::builder()
        .answer("mixed.test", [ip("127.0.0.1"), ip("10.0.0.7")])
        .start()
        .await
        .unwrap();
    let origin = html_origin().await;
    let gate = GateProcess::spawn(&policy(&dns, "")).await.unwrap();
    let (_, body) = extract(&gate, json!([origin.url_with_host("mixed.test", "/")])).await;
    let r = row(&body, 0);
    assert_eq!(r["code"], "ip_private_range", "{body}");
    assert_eq!(
        r["error"],
        "Blocked: URL targets a private or internal network address"
    );
    assert_eq!(
        origin.total_hits(),
        0,
        "a refused name must never be dialled"
    );
}

#[tokio::test]
async fn nxdomain_and_servfail_are_reported_as_dns_failures() {
    let dns = StubDns::builder()
        .name("broken.test", [DnsReply::ServFail])
        .start()
        .await
        .unwrap();
    let gate = GateProcess::spawn(&policy(&dns, "")).await.unwrap();
    let (_, body) = extract(
        &gate,
        json!(["http://missing.test/", "http://broken.test/"]),
    )
    .await;
    for i in 0..2 {
        let r = row(&body, i);
        assert_eq!(r["code"], "dns_failure", "{body}");
        let msg = r["error"].as_str().unwrap();
        assert!(
            msg.starts_with("Blocked: DNS resolution failed for"),
            "{msg}"
        );
        assert!(
            !msg.contains("private"),
            "a DNS failure is not a private address: {msg}"
        );
    }
    assert!(
        row(&body, 0)["error"]
            .as_str()
            .unwrap()
            .contains("NXDOMAIN"),
        "{body}"
    );
}

#[tokio::test]
async fn rebinding_answers_never_reach_the_private_address() {
    // The first lookup answers loopback (allowed), every later one a private address.
    let dns = StubDns::builder()
        .name(
            "rebind.test",
            [
                DnsReply::Answer(vec![ip("127.0.0.1")]),
                DnsReply::Answer(vec![ip("10.0.0.9")]),
            ],
        )
        .start()
        .await
        .unwrap();
    let origin = html_origin().await;
    let gate = GateProcess::spawn(&policy(&dns, "")).await.unwrap();
    let url = origin.url_with_host("rebind.test", "/");
    let (_, first) = extract(&gate, json!([url])).await;
    assert_eq!(
        row(&first, 0)["error"],
        Value::Null,
        "the checked answer is dialled: {first}"
    );
    assert_eq!(origin.hits("/"), 1);
    let a_queries = dns.queries_of("rebind.test", hickory_proto::rr::RecordType::A);
    assert_eq!(
        a_queries, 1,
        "one extract must resolve the name exactly once (no second lookup at connect)"
    );
    let (_, second) = extract(&gate, json!([url])).await;
    assert_eq!(row(&second, 0)["code"], "ip_private_range", "{second}");
    assert_eq!(
        origin.hits("/"),
        1,
        "the rebound answer must never be dialled"
    );
}

#[tokio::test]
async fn a_redirect_to_the_metadata_address_is_refused_at_the_hop() {
    let dns = StubDns::builder()
        .answer("origin.test", [ip("127.0.0.1")])
        .start()
        .await
        .unwrap();
    let origin = html_origin().await;
    let gate = GateProcess::spawn(&policy(&dns, "")).await.unwrap();
    let (_, body) = extract(
        &gate,
        json!([origin.url_with_host("origin.test", "/to-metadata")]),
    )
    .await;
    assert_eq!(row(&body, 0)["code"], "ip_cloud_metadata", "{body}");
    assert_eq!(origin.hits("/to-metadata"), 1);
}

#[tokio::test]
async fn a_secret_refuses_the_whole_call_before_any_dns_query() {
    let dns = StubDns::builder()
        .answer("origin.test", [ip("127.0.0.1")])
        .start()
        .await
        .unwrap();
    let origin = html_origin().await;
    let gate = GateProcess::spawn(&policy(&dns, "")).await.unwrap();
    let clean = origin.url_with_host("origin.test", "/");
    let (status, body) = extract(
        &gate,
        json!([clean, "https://origin.test/?q=sk-abcdefghijklmnop"]),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["success"], false);
    assert_eq!(body["code"], "secret_in_url");
    assert_eq!(
        body["error"],
        "Blocked: URL contains what appears to be an API key or token. Secrets must not be sent in URLs."
    );
    let (_, body) = extract(&gate, json!([clean, "https://origin.test/login?token=abc"])).await;
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("credential-like query parameter (token)"),
        "{body}"
    );
    assert_eq!(
        dns.queries("origin.test"),
        0,
        "a refused call must not even resolve"
    );
    assert_eq!(origin.total_hits(), 0);
    let logs = gate.stderr_log();
    assert!(
        !logs.contains("sk-abcdefghijklmnop") && !logs.contains("token=abc"),
        "secrets must not be logged"
    );
}

#[tokio::test]
async fn invalid_items_keep_their_index_and_the_call_caps_at_five() {
    let dns = StubDns::builder()
        .answer("origin.test", [ip("127.0.0.1")])
        .start()
        .await
        .unwrap();
    let origin = html_origin().await;
    let gate = GateProcess::spawn(&policy(&dns, "")).await.unwrap();
    let good = origin.url_with_host("origin.test", "/");
    let (_, body) = extract(
        &gate,
        json!([42, good, {"href": good}, null, "http://10.1.1.1/", good]),
    )
    .await;
    let rows = body["results"].as_array().unwrap();
    assert_eq!(
        rows.len(),
        5,
        "only the first five items are processed: {body}"
    );
    assert_eq!(rows[0]["code"], "invalid_item");
    assert!(
        rows[0]["error"]
            .as_str()
            .unwrap()
            .starts_with("Invalid URL item at index 0")
    );
    assert_eq!(rows[1]["error"], Value::Null);
    assert_eq!(
        rows[2]["error"],
        Value::Null,
        "an {{href}} object is a URL item"
    );
    assert_eq!(rows[3]["code"], "invalid_item");
    assert_eq!(rows[4]["code"], "ip_private_range");
    assert_eq!(origin.hits("/"), 2);
}

#[tokio::test]
async fn the_blocklist_refuses_with_its_rule_and_source_and_reloads_live() {
    let dns = StubDns::builder()
        .answer("origin.test", [ip("127.0.0.1")])
        .answer("news.other.test", [ip("127.0.0.1")])
        .start()
        .await
        .unwrap();
    let origin = html_origin().await;
    let extra =
        "websiteBlocklist:\n  domains: [\"origin.test\"]\n  sharedFiles: [\"lists/shared.txt\"]\n";
    let gate = GateProcess::builder(&policy(&dns, extra))
        .arg("--reload-interval-ms")
        .arg("200")
        .spawn()
        .await
        .unwrap();
    let (_, body) = extract(&gate, json!([origin.url_with_host("origin.test", "/")])).await;
    let r = row(&body, 0);
    assert_eq!(r["code"], "blocked_by_policy", "{body}");
    assert_eq!(
        r["blocked_by_policy"],
        json!({"host": "origin.test", "rule": "origin.test", "source": "config"})
    );
    assert_eq!(
        origin.total_hits(),
        0,
        "a blocklisted page must never be fetched"
    );

    // A shared list appears later: the gate picks it up without a restart.
    let lists = gate.work_dir().join("lists");
    std::fs::create_dir_all(&lists).unwrap();
    std::fs::write(lists.join("shared.txt"), "# corp list\nother.test\n").unwrap();
    let other = origin.url_with_host("news.other.test", "/");
    let mut refused = Value::Null;
    // Up to 20 s: the reload polls every 200 ms, but this binary's deep-nesting case can hold
    // both cores of a 2-core machine for seconds.
    for _ in 0..200 {
        let (_, body) = extract(&gate, json!([other])).await;
        if row(&body, 0)["code"] == "blocked_by_policy" {
            refused = row(&body, 0).clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        refused["blocked_by_policy"]["rule"], "other.test",
        "the shared rule must take effect: {refused}"
    );
    assert!(
        refused["blocked_by_policy"]["source"]
            .as_str()
            .unwrap()
            .ends_with("lists/shared.txt")
    );
}

#[tokio::test]
async fn an_invalid_policy_edit_keeps_the_last_good_policy_and_is_counted() {
    let dns = StubDns::builder()
        .answer("origin.test", [ip("127.0.0.1")])
        .start()
        .await
        .unwrap();
    let origin = html_origin().await;
    let good = policy(&dns, "");
    let gate = GateProcess::builder(&good)
        .arg("--reload-interval-ms")
        .arg("200")
        .spawn()
        .await
        .unwrap();
    let url = origin.url_with_host("origin.test", "/");
    std::fs::write(gate.policy_path(), "version: v1\nweb:\n  charLimit: 5\n").unwrap();
    gate.wait_for_json_log(
        |l| l["message"] == "policy reload refused; keeping the last good policy",
        Duration::from_secs(20),
    )
    .await
    .expect("the refusal must be logged");
    let (_, body) = extract(&gate, json!([url])).await;
    assert_eq!(
        row(&body, 0)["error"],
        Value::Null,
        "the last good policy must keep serving: {body}"
    );
    let metrics = http::get(gate.admin_addr(), "/metrics")
        .await
        .unwrap()
        .text();
    assert!(
        metrics.contains("fleetgate_policy_reloads_total{result=\"invalid\"} 1"),
        "the refused reload must be counted:\n{metrics}"
    );
    // A valid edit (blocklisting the origin) takes effect.
    let blocked = good.replace(
        "version: v1\n",
        "version: v1\nwebsiteBlocklist:\n  domains: [origin.test]\n",
    );
    std::fs::write(gate.policy_path(), blocked).unwrap();
    gate.wait_for_json_log(
        |l| l["message"] == "policy reloaded",
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    let (_, body) = extract(&gate, json!([url])).await;
    assert_eq!(row(&body, 0)["code"], "blocked_by_policy", "{body}");
}

#[tokio::test]
async fn a_long_page_is_truncated_with_the_footer_and_stored_on_the_volume() {
    let dns = StubDns::builder()
        .answer("origin.test", [ip("127.0.0.1")])
        .start()
        .await
        .unwrap();
    let page: String = (0..2000)
        .map(|i| format!("line {i} of the long page\n"))
        .collect();
    let origin = origin::http1()
        .route("/long.md", Reply::new(200, "text/markdown", page.clone()))
        .run()
        .await
        .unwrap();
    let gate = GateProcess::spawn(&policy(&dns, "")).await.unwrap();
    let reply = http::post_json(
        gate.api_addr(),
        "/v1/extract",
        &json!({"urls": [origin.url_with_host("origin.test", "/long.md")], "char_limit": 2000}),
    )
    .await
    .unwrap();
    let body = reply.json().unwrap();
    let content = row(&body, 0)["content"].as_str().unwrap().to_string();
    assert!(
        content.contains("[... middle omitted — see footer ...]"),
        "{content}"
    );
    assert!(
        content.contains("──────── [TRUNCATED] ────────"),
        "{content}"
    );
    let path_line = content
        .lines()
        .find_map(|l| l.strip_prefix("Full text saved to: "))
        .expect("the footer must name the stored file");
    assert!(
        path_line.starts_with("/opt/data/cache/fleetgate/store/origin.test-"),
        "{path_line}"
    );
    let file_name = path_line.rsplit('/').next().unwrap();
    let stored = std::fs::read_to_string(gate.work_dir().join("volume/store").join(file_name))
        .expect("the full text must be on the volume");
    assert_eq!(
        stored.trim_end(),
        page.trim_end(),
        "the store keeps the complete page"
    );
}

#[tokio::test]
async fn hangs_binary_bodies_and_encodings_are_handled_per_item() {
    let dns = StubDns::builder()
        .answer("origin.test", [ip("127.0.0.1")])
        .start()
        .await
        .unwrap();
    let origin = html_origin().await;
    let gate = GateProcess::spawn(&policy(&dns, "")).await.unwrap();
    let u = |p: &str| origin.url_with_host("origin.test", p);
    let (_, body) = extract(&gate, json!([u("/hang"), u("/png"), u("/gz"), u("/br")])).await;
    assert_eq!(row(&body, 0)["code"], "upstream_timeout", "{body}");
    assert_eq!(row(&body, 1)["code"], "binary_content", "{body}");
    assert!(
        row(&body, 1)["error"].as_str().unwrap().contains("PNG"),
        "{body}"
    );
    assert!(
        row(&body, 2)["content"]
            .as_str()
            .unwrap()
            .starts_with("compressed words"),
        "{body}"
    );
    assert!(
        row(&body, 3)["content"]
            .as_str()
            .unwrap()
            .starts_with("brotli words"),
        "{body}"
    );
}

#[tokio::test]
async fn decisions_move_the_metrics_and_admin_endpoints_answer() {
    let dns = StubDns::builder().start().await.unwrap();
    let gate = GateProcess::spawn(&policy(&dns, "")).await.unwrap();
    let _ = extract(
        &gate,
        json!(["http://169.254.169.254/", "http://10.0.0.1/"]),
    )
    .await;
    let metrics = http::get(gate.admin_addr(), "/metrics")
        .await
        .unwrap()
        .text();
    for want in [
        "fleetgate_gate_decisions_total{gate=\"ssrf\",reason=\"ip_cloud_metadata\",verdict=\"deny\"} 1",
        "fleetgate_gate_decisions_total{gate=\"ssrf\",reason=\"ip_private_range\",verdict=\"deny\"} 1",
        "fleetgate_extract_items_total{outcome=\"ip_private_range\"} 1",
    ] {
        assert!(metrics.contains(want), "missing {want}:\n{metrics}");
    }
    assert_eq!(
        http::get(gate.admin_addr(), "/live")
            .await
            .unwrap()
            .status
            .as_u16(),
        200
    );
    assert_eq!(
        http::get(gate.admin_addr(), "/ready")
            .await
            .unwrap()
            .status
            .as_u16(),
        200
    );
    let status = http::get(gate.admin_addr(), "/v1/status")
        .await
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(status["backends"]["extract"], "direct");
    assert_eq!(status["policy"]["sha256"].as_str().unwrap().len(), 64);
    let bad = http::post_json(gate.api_addr(), "/v1/extract", &json!({"nope": 1}))
        .await
        .unwrap();
    assert_eq!(bad.status.as_u16(), 400);
    assert_eq!(bad.header("x-fleetgate-error"), Some("invalid_request"));
}

/// Each line of `check-url`'s output, parsed.
fn json_lines(stdout: &[u8]) -> Vec<Value> {
    std::str::from_utf8(stdout)
        .expect("the output must be UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line must be JSON"))
        .collect()
}

/// The stub DNS (`origin.test` → 127.0.0.1) and a policy file using it, for `check-url`.
async fn check_url_setup() -> (StubDns, tempfile::TempDir, std::path::PathBuf) {
    let dns = StubDns::builder()
        .answer("origin.test", [ip("127.0.0.1")])
        .start()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let policy_path = dir.path().join("policy.yaml");
    std::fs::write(
        &policy_path,
        policy(&dns, "").replace("${WORK_DIR}", dir.path().to_str().unwrap()),
    )
    .unwrap();
    (dns, dir, policy_path)
}

#[tokio::test]
async fn check_url_prints_one_line_per_url_with_verdict_scope_and_addresses() {
    let (_dns, _dir, policy_path) = check_url_setup().await;
    let out = GateProcess::run_cli(&[
        "check-url",
        "--policy",
        policy_path.to_str().unwrap(),
        "http://origin.test/",
        "http://[::ffff:169.254.169.254]/",
        "https://x.test/?api_key=123",
    ])
    .await
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "a refused URL makes the exit code 1"
    );
    let lines = json_lines(&out.stdout);
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["verdict"], "allow", "{lines:?}");
    assert_eq!(lines[0]["addresses"], json!(["127.0.0.1"]));
    assert_eq!(lines[1]["verdict"], "deny");
    assert_eq!(
        lines[1]["code"], "ip_cloud_metadata",
        "IPv4-mapped metadata must be unwrapped"
    );
    assert_eq!(lines[1]["scope"], "item");
    assert_eq!(lines[2]["code"], "sensitive_query_param");
    assert_eq!(lines[2]["scope"], "call");
    std::fs::write(&policy_path, "version: v1\nweb:\n  charLimit: 1\n").unwrap();
    let bad = GateProcess::run_cli(&[
        "check-url",
        "--policy",
        policy_path.to_str().unwrap(),
        "http://a.test/",
    ])
    .await
    .unwrap();
    assert_eq!(bad.status.code(), Some(2), "a bad policy exits 2");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("web.charLimit"));
}

/// `check-url -` reads the URLs from stdin, one per line: the same lines as the arguments give,
/// blank lines and `\r\n` ends taken in stride, a line that is not UTF-8 named by its number
/// (never echoed) and not checked, exit 2 then; a list far past a command line's size works.
#[tokio::test]
async fn check_url_reads_a_list_from_stdin_with_the_same_lines_as_arguments() {
    let (_dns, _dir, policy_path) = check_url_setup().await;
    let policy = policy_path.to_str().unwrap();
    let urls = [
        "http://origin.test/",
        "http://[::ffff:169.254.169.254]/",
        "https://x.test/?api_key=123",
    ];
    let mut args = vec!["check-url", "--policy", policy];
    args.extend(urls);
    let by_args = GateProcess::run_cli(&args).await.unwrap();
    let input = format!("{}\n\n{}\r\n   \n{}", urls[0], urls[1], urls[2]);
    let by_stdin =
        GateProcess::run_cli_stdin(&["check-url", "--policy", policy, "-"], input.as_bytes())
            .await
            .unwrap();
    assert_eq!(
        by_stdin.status.code(),
        Some(1),
        "a refused URL makes the exit code 1"
    );
    assert_eq!(
        String::from_utf8_lossy(&by_stdin.stdout),
        String::from_utf8_lossy(&by_args.stdout),
        "stdin and arguments must give the same lines"
    );
    assert_eq!(by_args.stdout.iter().filter(|b| **b == b'\n').count(), 3);

    // A line that is not UTF-8: reported by number, the others still checked, exit 2.
    let mut input = b"http://origin.test/a\nhttps://x.test/?k=sk-\xff\xfe-secretpart\n".to_vec();
    input.extend_from_slice(b"http://origin.test/b\n");
    let mixed = GateProcess::run_cli_stdin(&["check-url", "--policy", policy, "-"], &input)
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&mixed.stderr);
    assert_eq!(
        mixed.status.code(),
        Some(2),
        "unreadable input exits 2: {stderr}"
    );
    assert!(stderr.contains("stdin line 2 is not UTF-8"), "{stderr}");
    assert!(
        !stderr.contains("secretpart"),
        "the line is never echoed: {stderr}"
    );
    let lines = json_lines(&mixed.stdout);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[1]["url"], "http://origin.test/b");

    // Far more URLs than one command line holds (about 2 MB here), answered in order.
    let many: String = (0..5_000)
        .map(|i| format!("http://origin.test/page/{i}/{}\n", "x".repeat(450)))
        .collect();
    assert!(many.len() > 2 * 1024 * 1024, "more than ARG_MAX");
    let big = GateProcess::run_cli_stdin(&["check-url", "--policy", policy, "-"], many.as_bytes())
        .await
        .unwrap();
    assert_eq!(
        big.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&big.stderr)
    );
    let out = String::from_utf8(big.stdout).unwrap();
    assert_eq!(out.lines().count(), 5_000);
    assert!(
        out.lines()
            .last()
            .unwrap()
            .starts_with("{\"url\":\"http://origin.test/page/4999/"),
        "the last line is the last URL"
    );
}

/// `depth` levels of `open`, the innermost text, then the closing tags.
fn nested_page(open: &str, close: &str, depth: usize) -> String {
    let mut page = String::from("<html><head><title>Deep</title></head><body>");
    page.push_str(&open.repeat(depth));
    page.push_str("innermost words");
    page.push_str(&close.repeat(depth));
    page.push_str("<p>tail text</p></body></html>");
    page
}

/// A page of 200,000 nested `<div>` once aborted the gate (a recursive walk overflowed a
/// worker's stack) or stalled every listener for minutes (a quadratic tree build on the async
/// workers). Two at once now convert, `/live` answers while they run, and the gate lives on.
#[tokio::test]
async fn deeply_nested_pages_neither_crash_nor_stall_the_gate() {
    let dns = StubDns::builder()
        .answer("origin.test", [ip("127.0.0.1")])
        .start()
        .await
        .unwrap();
    let origin = origin::http1()
        .route(
            "/divs",
            Reply::html(nested_page("<div>", "</div>", 200_000)),
        )
        .route(
            "/tables",
            Reply::html(nested_page("<table><tr><td>", "</td></tr></table>", 10_000)),
        )
        .route(
            "/inline",
            Reply::html(nested_page("<b><i>", "</i></b>", 100_000)),
        )
        .run()
        .await
        .unwrap();
    // Debug builds convert slowly on a loaded machine: the fetch budget is not what is tested.
    let yaml = policy(
        &dns,
        "web:\n  charLimit: 100000\n  cache:\n    enabled: false\n",
    )
    .replace("totalTimeoutMs: 4000", "totalTimeoutMs: 120000");
    let gate = GateProcess::spawn(&yaml).await.unwrap();
    let urls = ["/divs", "/tables", "/inline"].map(|p| origin.url_with_host("origin.test", p));
    let calls = [
        extract(&gate, json!([urls[0]])),
        extract(&gate, json!([urls[0]])),
        extract(&gate, json!([urls[1], urls[2]])),
    ];
    let live = async {
        // The admin listener answers while the pages convert.
        let mut answered = 0;
        for _ in 0..5 {
            let reply = tokio::time::timeout(
                Duration::from_secs(2),
                http::get(gate.admin_addr(), "/live"),
            )
            .await
            .expect("/live must answer within 2 s while pages convert")
            .expect("/live must answer");
            answered += usize::from(reply.status.as_u16() == 200);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        answered
    };
    let (bodies, answered) = tokio::join!(futures_util::future::join_all(calls), live);
    assert_eq!(answered, 5, "/live must answer 200 every time");
    for (status, body) in &bodies {
        assert_eq!(*status, 200, "{body}");
        for r in body["results"].as_array().expect("results") {
            let content = r["content"].as_str().unwrap_or_default();
            assert!(
                content.contains("innermost words") && content.contains("tail text"),
                "every nested page converts with its text kept: {:.300}",
                r
            );
        }
    }
    let reply = http::get(gate.admin_addr(), "/live").await.unwrap();
    assert_eq!(reply.status.as_u16(), 200, "the gate lives on");

    // SIGTERM while two more pages convert: the gate stops within its grace period.
    let mut gate = gate;
    let api = gate.api_addr();
    for _ in 0..2 {
        let url = urls[0].clone();
        tokio::spawn(async move {
            let _ = http::post_json(api, "/v1/extract", &json!({"urls": [url]})).await;
        });
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let status = gate
        .terminate(Duration::from_secs(15))
        .await
        .expect("SIGTERM must stop the gate within its grace period");
    assert!(
        status.code().is_some(),
        "the gate exits, not killed: {status:?}"
    );
}
