//! Vendor backends behind the gate, end to end: a stub Firecrawl as the extract backend (with
//! the shared cache and rescue), a stub SearXNG as the search backend behind every search
//! front, and two gate processes sharing one cache folder.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::net::IpAddr;

use fleetgate_e2e::dns::StubDns;
use fleetgate_e2e::gate::GateProcess;
use fleetgate_e2e::http;
use fleetgate_e2e::origin::{self, Origin, Reply};
use serde_json::{Value, json};

const PUBLIC: &str = "93.184.215.14";
const MARKDOWN: &str = "# Vendor page\n\nServed by the stub vendor.";

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

async fn firecrawl_stub(status: u16) -> Origin {
    let ok = json!({"success": true, "data": {"markdown": MARKDOWN, "metadata": {"title": "Vendor", "statusCode": 200}}});
    let reply = if status == 200 {
        Reply::json(&ok)
    } else {
        Reply::json(&json!({"success": false, "error": "vendor exploded"})).status(status)
    };
    origin::http1()
        .route("/v2/scrape", reply)
        .run()
        .await
        .unwrap()
}

fn policy(dns: &StubDns, extra: &str) -> String {
    format!(
        "version: v1\nlisten:\n  api: 127.0.0.1:0\n  admin: 127.0.0.1:0\n\
         egress:\n  allowCIDRs: [\"127.0.0.1/32\"]\n  resolver:\n    nameservers: [\"{}\"]\n    attempts: 1\n\
         store:\n  root: ${{WORK_DIR}}/volume\n{extra}",
        dns.addr()
    )
}

fn firecrawl_policy(dns: &StubDns, stub: &Origin, root: Option<&str>, rescue: &str) -> String {
    let mut p = policy(
        dns,
        &format!(
            "web:\n  extractBackend: firecrawl\n  rescue: {rescue}\n  vendors:\n    firecrawl:\n      baseUrl: http://{}\n      retries: 0\n",
            stub.addr()
        ),
    );
    if let Some(root) = root {
        p = p.replace("${WORK_DIR}/volume", root);
    }
    p
}

async fn extract(gate: &GateProcess, urls: Value) -> Value {
    post(gate, "/v1/extract", json!({"urls": urls})).await
}

/// POST `body` to `path` on the gate's API and read the JSON answer.
async fn post(gate: &GateProcess, path: &str, body: Value) -> Value {
    http::post_json(gate.api_addr(), path, &body)
        .await
        .unwrap()
        .json()
        .unwrap()
}

/// A gate whose `web:` section is `web` and whose vendor `name` is the stub at `stub`.
async fn gate_with(dns: &StubDns, web: &str, name: &str, stub: &Origin) -> GateProcess {
    let section = format!(
        "web:\n{web}  vendors:\n    {name}:\n      baseUrl: http://{}\n      retries: 0\n",
        stub.addr()
    );
    GateProcess::spawn(&policy(dns, &section)).await.unwrap()
}

#[tokio::test]
async fn a_vendor_page_is_cached_on_the_volume_and_the_hit_is_visible() {
    let dns = StubDns::builder()
        .answer("docs.example.test", [ip(PUBLIC)])
        .start()
        .await
        .unwrap();
    let stub = firecrawl_stub(200).await;
    let gate = GateProcess::builder(&firecrawl_policy(&dns, &stub, None, "[]"))
        .env("FIRECRAWL_API_KEY", "fc-test-key-123")
        .spawn()
        .await
        .unwrap();
    let url = "https://docs.example.test/guide";
    let first = extract(&gate, json!([url])).await;
    assert_eq!(first["results"][0]["content"], MARKDOWN, "{first}");
    assert_eq!(first["results"][0]["served_by"], "firecrawl");
    assert_eq!(first["results"][0]["cached"], false);
    let seen = stub.last_request().unwrap();
    assert_eq!(
        seen.header("authorization"),
        Some("Bearer fc-test-key-123"),
        "the gate holds the key"
    );
    let sent: Value = serde_json::from_slice(&seen.body).unwrap();
    assert_eq!(sent["url"], url);

    // The write is in the background: poll until the hit shows.
    let mut second = Value::Null;
    for _ in 0..50 {
        second = extract(&gate, json!([url])).await;
        if second["results"][0]["cached"] == true {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(second["results"][0]["cached"], true, "{second}");
    assert!(second["results"][0]["cache_age_s"].is_u64(), "{second}");
    assert_eq!(second["results"][0]["content"], MARKDOWN);
    let calls = stub.hits("/v2/scrape");
    let polls_before_hit = calls - 1;
    assert!(calls >= 1, "the vendor is called for the miss");
    let third = extract(&gate, json!([url])).await;
    assert_eq!(third["results"][0]["cached"], true);
    assert_eq!(
        stub.hits("/v2/scrape"),
        1 + polls_before_hit,
        "a hit must not call the vendor"
    );
    // Background writes of the polling misses may still hold a temp file; count entries only.
    let files: Vec<_> = std::fs::read_dir(gate.work_dir().join("volume/extract"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".cache.md"))
        .collect();
    assert_eq!(files.len(), 1, "one content-addressed entry");
    let name = files[0].file_name().into_string().unwrap();
    assert!(
        name.starts_with("docs.example.test-") && name.ends_with(".cache.md"),
        "{name}"
    );

    // A cache hit never skips a gate: blocklisting the host refuses the cached page too.
    let metrics = http::get(gate.admin_addr(), "/metrics")
        .await
        .unwrap()
        .text();
    assert!(
        metrics.contains("fleetgate_cache_lookups_total{outcome=\"hit\"}"),
        "{metrics}"
    );
}

#[tokio::test]
async fn when_the_vendor_fails_every_url_one_rescue_pass_serves_and_is_marked() {
    let dns = StubDns::builder()
        .answer("site.test", [ip("127.0.0.1")])
        .start()
        .await
        .unwrap();
    let stub = firecrawl_stub(500).await;
    let page = origin::http1()
        .route("/", Reply::html("<main><h1>Rescued</h1></main>"))
        .run()
        .await
        .unwrap();
    let gate = GateProcess::builder(&firecrawl_policy(&dns, &stub, None, "[direct]"))
        .env("FIRECRAWL_API_KEY", "fc-test-key-123")
        .spawn()
        .await
        .unwrap();
    let url = page.url_with_host("site.test", "/");
    let body = extract(&gate, json!([url])).await;
    let row = &body["results"][0];
    assert_eq!(row["error"], Value::Null, "{body}");
    assert_eq!(row["served_by"], "direct");
    assert_eq!(row["rescued_from"], "firecrawl");
    assert!(
        row["backend_error"].as_str().unwrap().contains("500"),
        "{body}"
    );
    assert_eq!(row["cached"], false);
    assert!(
        !gate.work_dir().join("volume/extract").exists()
            || std::fs::read_dir(gate.work_dir().join("volume/extract"))
                .unwrap()
                .next()
                .is_none(),
        "rescued pages are never cached"
    );
}

#[tokio::test]
async fn an_exhausted_rescue_keeps_the_vendor_error_and_names_the_rescue_failure() {
    let dns = StubDns::builder()
        .answer("site.test", [ip("127.0.0.1")])
        .start()
        .await
        .unwrap();
    let stub = firecrawl_stub(500).await;
    let gate = GateProcess::builder(&firecrawl_policy(&dns, &stub, None, "[direct]"))
        .env("FIRECRAWL_API_KEY", "fc-test-key-123")
        .spawn()
        .await
        .unwrap();
    // Nothing listens on port 9 of loopback: the direct rescue fails too.
    let body = extract(&gate, json!(["http://site.test:9/"])).await;
    let error = body["results"][0]["error"].as_str().unwrap();
    assert!(error.contains("500"), "the vendor's error stays: {error}");
    assert!(error.contains("(rescue via direct also failed:"), "{error}");
}

#[tokio::test]
async fn every_search_front_serves_the_configured_backend_through_the_memo() {
    let dns = StubDns::builder().start().await.unwrap();
    let searx = origin::http1()
        .route(
            "/search",
            Reply::json(&json!({"results": [
                {"title": "Second", "url": "https://b.example/", "content": "b text", "score": 0.5},
                {"title": "First", "url": "https://a.example/", "content": "a text", "score": 0.9}
            ]})),
        )
        .run()
        .await
        .unwrap();
    let gate = GateProcess::spawn(&policy(
        &dns,
        &format!(
            "web:\n  searchBackend: searxng\n  vendors:\n    searxng:\n      baseUrl: http://{}\n",
            searx.addr()
        ),
    ))
    .await
    .unwrap();
    let native = post(
        &gate,
        "/v1/search",
        json!({"query": "Fleet Gate", "limit": 1}),
    )
    .await;
    assert_eq!(native["success"], true, "{native}");
    assert_eq!(
        native["data"]["web"],
        json!([{"title": "First", "url": "https://a.example/", "description": "a text", "position": 1}]),
        "SearXNG rows are sorted by score, sliced to the limit, in title_hit key order"
    );
    assert_eq!(native["served_by"], "searxng");
    let seen = searx.last_request().unwrap();
    let uri = seen.uri.to_string();
    assert!(
        uri.contains("q=Fleet+Gate") || uri.contains("q=Fleet%20Gate"),
        "{uri}"
    );

    // Same query modulo case and spaces, another front: a memo hit, the vendor is not called again.
    let tavily = post(
        &gate,
        "/tavily/search",
        json!({"query": "  fleet   gate ", "max_results": 2}),
    )
    .await;
    assert_eq!(tavily["results"].as_array().unwrap().len(), 2, "{tavily}");
    assert_eq!(tavily["results"][0]["content"], "a text");
    assert_eq!(
        searx.hits("/search"),
        1,
        "the memo must serve the second call"
    );

    let sx = http::get(gate.api_addr(), "/searxng/search?q=other&format=json")
        .await
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(sx["results"][0]["url"], "https://a.example/", "{sx}");
    // SearXNG serves a full bucket of 20; a Firecrawl search for 15 lands in the same bucket.
    let fc = post(&gate, "/v2/search", json!({"query": "other", "limit": 15})).await;
    assert_eq!(fc["data"]["web"][1]["url"], "https://b.example/", "{fc}");
    assert_eq!(searx.hits("/search"), 2, "one call per (query, bucket)");
}

#[tokio::test]
async fn two_gates_sharing_one_cache_folder_never_serve_a_partial_entry() {
    let dns = StubDns::builder()
        .answer("a.example.test", [ip(PUBLIC)])
        .answer("b.example.test", [ip(PUBLIC)])
        .start()
        .await
        .unwrap();
    let stub = firecrawl_stub(200).await;
    let shared = tempfile::tempdir().unwrap();
    let root = shared.path().to_str().unwrap().to_string();
    let mut gates = Vec::new();
    for _ in 0..2 {
        let policy = firecrawl_policy(&dns, &stub, Some(&root), "[]")
            .replace("web:\n", "web:\n  cache:\n    maxEntries: 4\n");
        gates.push(
            GateProcess::builder(&policy)
                .env("FIRECRAWL_API_KEY", "fc-k")
                .spawn()
                .await
                .unwrap(),
        );
    }
    let mut results = Vec::new();
    for round in 0..30 {
        // Four calls at a time, two per gate, on overlapping keys.
        let mut calls = Vec::new();
        for (g, gate) in gates.iter().enumerate() {
            for k in 0..2 {
                let host = if (round + g + k) % 2 == 0 { "a" } else { "b" };
                let url = format!("https://{host}.example.test/p{}", (round + k) % 6);
                calls.push(extract(gate, json!([url])));
            }
        }
        results.extend(futures_util::future::join_all(calls).await);
    }
    let mut hits = 0;
    for body in &results {
        let row = &body["results"][0];
        assert_eq!(row["error"], Value::Null, "{body}");
        assert_eq!(
            row["content"], MARKDOWN,
            "every answer, hit or miss, is the whole page"
        );
        hits += usize::from(row["cached"] == true);
    }
    assert!(hits > 0, "the gates must share entries");
    let entries = std::fs::read_dir(shared.path().join("extract"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".cache.md"))
        .count();
    assert!(
        entries <= 12,
        "entries stay near the bound (4 + sweep slack per process): {entries}"
    );
}

#[tokio::test]
async fn keyless_keenable_serves_extract_and_search_behind_the_fronts_and_the_gates_come_first() {
    let dns = StubDns::builder()
        .answer("docs.example.test", [ip(PUBLIC)])
        .answer("meta.example.test", [ip("169.254.169.254")])
        .start()
        .await
        .unwrap();
    let keenable = origin::http1()
        .route(
            "/v1/fetch/public",
            Reply::json(
                &json!({"url": "https://docs.example.test/guide", "title": "Guide",
                                "content": MARKDOWN}),
            ),
        )
        .route(
            "/v1/search/public",
            Reply::json(&json!({"results": [
                {"title": "First", "url": "https://a.example/", "snippet": "a text"}]})),
        )
        .run()
        .await
        .unwrap();
    let web = "  extractBackend: keenable\n  searchBackend: keenable\n";
    let gate = gate_with(&dns, web, "keenable", &keenable).await;

    let body = extract(
        &gate,
        json!([
            "https://docs.example.test/guide",
            "http://meta.example.test/latest"
        ]),
    )
    .await;
    let results = body["results"].as_array().unwrap();
    assert_eq!(results[0]["content"], MARKDOWN, "{body}");
    assert_eq!(results[0]["served_by"], "keenable", "{body}");
    assert_eq!(results[1]["code"], "ip_cloud_metadata", "{body}");
    assert_eq!(
        keenable.hits("/v1/fetch/public"),
        1,
        "a URL the gates refuse never reaches the keyless vendor"
    );
    let seen = keenable.last_request().unwrap();
    assert!(
        seen.headers.get("authorization").is_none(),
        "no key is configured, none is sent"
    );
    assert_eq!(
        seen.headers
            .get("x-keenable-title")
            .and_then(|v| v.to_str().ok()),
        Some("hermes-agent")
    );

    let firecrawl = post(
        &gate,
        "/v2/search",
        json!({"query": "fleet gate", "limit": 3}),
    )
    .await;
    assert_eq!(
        firecrawl["data"]["web"][0]["url"], "https://a.example/",
        "{firecrawl}"
    );
    let tavily = post(
        &gate,
        "/tavily/search",
        json!({"query": "fleet gate", "max_results": 3}),
    )
    .await;
    assert_eq!(tavily["results"][0]["content"], "a text", "{tavily}");
    assert_eq!(
        keenable.hits("/v1/search/public"),
        1,
        "the memo serves the second front"
    );
}

#[tokio::test]
async fn ddgs_serves_the_searxng_front_and_a_changed_layout_is_a_vendor_error() {
    let dns = StubDns::builder().start().await.unwrap();
    let page = r#"<html><body><div class="result web-result"><h2>
        <a class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fa.example%2F">First</a></h2>
        <a class="result__snippet">a text</a></div></body></html>"#;
    let ddg = origin::http1()
        .route("/html/", Reply::text(page))
        .run()
        .await
        .unwrap();
    let gate = gate_with(&dns, "  searchBackend: ddgs\n", "ddgs", &ddg).await;
    let sx = http::get(gate.api_addr(), "/searxng/search?q=fleet&format=json")
        .await
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(sx["results"][0]["url"], "https://a.example/", "{sx}");
    assert_eq!(sx["results"][0]["content"], "a text", "{sx}");

    let changed = origin::http1()
        .route(
            "/html/",
            Reply::text("<html><body><p>new look</p></body></html>"),
        )
        .run()
        .await
        .unwrap();
    let gate = gate_with(&dns, "  searchBackend: ddgs\n", "ddgs", &changed).await;
    let reply = http::post_json(gate.api_addr(), "/v1/search", &json!({"query": "fleet"}))
        .await
        .unwrap();
    let body: Value = reply.json().unwrap();
    assert_eq!(body["success"], false, "{body}");
    assert_eq!(
        reply.header("x-fleetgate-error"),
        Some("vendor_bad_response"),
        "{body}"
    );
}

/// A Firecrawl stub that reports `source` as where the page ended up (the vendor followed a
/// redirect there).
fn scrape_reply(source: &str) -> Reply {
    Reply::json(
        &json!({"success": true, "data": {"markdown": MARKDOWN, "metadata": {
        "title": "Vendor", "statusCode": 200, "sourceURL": source}}}),
    )
}

/// Extract `url` until a row comes back from the cache (the write is in the background).
async fn extract_until_cached(gate: &GateProcess, url: &str) -> Value {
    let mut body = Value::Null;
    for _ in 0..50 {
        body = extract(gate, json!([url])).await;
        if body["results"][0]["cached"] == true {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    body
}

fn cache_entries(gate: &GateProcess) -> Vec<String> {
    std::fs::read_dir(gate.work_dir().join("volume/extract"))
        .map(|dir| {
            dir.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".cache.md"))
                .collect()
        })
        .unwrap_or_default()
}

/// A hit re-admits every stored hop under the policy of the day: a page cached through a
/// redirect to a host blocklisted since is not served, and the fresh fetch is refused.
#[tokio::test]
async fn a_cached_page_whose_redirect_host_is_blocklisted_since_is_not_served() {
    let dns = StubDns::builder()
        .answer("docs.example.test", [ip(PUBLIC)])
        .answer("moved.example.test", [ip(PUBLIC)])
        .start()
        .await
        .unwrap();
    let stub = origin::http1()
        .route("/v2/scrape", scrape_reply("https://moved.example.test/new"))
        .run()
        .await
        .unwrap();
    let gate = GateProcess::builder(&firecrawl_policy(&dns, &stub, None, "[]"))
        .env("FIRECRAWL_API_KEY", "fc-test-key-123")
        .arg("--reload-interval-ms")
        .arg("200")
        .spawn()
        .await
        .unwrap();
    let url = "https://docs.example.test/guide";
    let hit = extract_until_cached(&gate, url).await;
    assert_eq!(hit["results"][0]["cached"], true, "{hit}");
    assert_eq!(hit["results"][0]["url"], "https://moved.example.test/new");

    let policy = std::fs::read_to_string(gate.policy_path()).unwrap();
    let blocked = policy.replacen(
        "version: v1\n",
        "version: v1\nwebsiteBlocklist:\n  domains: [moved.example.test]\n",
        1,
    );
    std::fs::write(gate.policy_path(), blocked).unwrap();
    gate.wait_for_json_log(
        |l| l["message"] == "policy reloaded",
        std::time::Duration::from_secs(5),
    )
    .await
    .unwrap();
    let calls = stub.hits("/v2/scrape");
    let body = extract(&gate, json!([url])).await;
    let row = &body["results"][0];
    assert_ne!(row["cached"], true, "a refused hop is never served: {body}");
    assert_eq!(row["code"], "blocked_by_policy", "{body}");
    assert_eq!(
        stub.hits("/v2/scrape"),
        calls + 1,
        "the page is fetched afresh"
    );
    let metrics = http::get(gate.admin_addr(), "/metrics")
        .await
        .unwrap()
        .text();
    assert!(
        metrics.contains("fleetgate_cache_lookups_total{outcome=\"refused_hop\"} 1"),
        "{metrics}"
    );
}

/// A public URL whose page came through an internal host opened by an `allowCIDRs`
/// exception is never stored on the shared volume: a policy without the exception (another
/// pod, or this one after an edit) must not read the internal page back.
#[tokio::test]
async fn a_page_reached_through_an_allowcidrs_exception_is_never_stored() {
    let dns = StubDns::builder()
        .answer("docs.example.test", [ip(PUBLIC)])
        .answer("control.example.test", [ip(PUBLIC)])
        .answer("intranet.example.test", [ip("10.20.30.40")])
        .start()
        .await
        .unwrap();
    let stub = origin::http1()
        .route(
            "/v2/scrape",
            scrape_reply("https://intranet.example.test/payroll"),
        )
        .run()
        .await
        .unwrap();
    let yaml = firecrawl_policy(&dns, &stub, None, "[]").replace(
        "allowCIDRs: [\"127.0.0.1/32\"]",
        "allowCIDRs: [\"127.0.0.1/32\", \"10.20.30.40/32\"]",
    );
    let gate = GateProcess::builder(&yaml)
        .env("FIRECRAWL_API_KEY", "fc-test-key-123")
        .spawn()
        .await
        .unwrap();
    let internal = "https://docs.example.test/handbook";
    let first = extract(&gate, json!([internal])).await;
    assert_eq!(
        first["results"][0]["url"], "https://intranet.example.test/payroll",
        "the exception lets the page through: {first}"
    );
    // A control page with a public chain is stored; once it is served from the cache, every
    // background write issued before it has had its turn.
    let control = "https://control.example.test/page";
    stub.set_route("/v2/scrape", scrape_reply(control));
    let hit = extract_until_cached(&gate, control).await;
    assert_eq!(hit["results"][0]["cached"], true, "{hit}");
    let entries = cache_entries(&gate);
    assert_eq!(
        entries.len(),
        1,
        "only the control page is stored: {entries:?}"
    );
    assert!(
        entries[0].starts_with("control.example.test-"),
        "{entries:?}"
    );
    stub.set_route(
        "/v2/scrape",
        scrape_reply("https://intranet.example.test/payroll"),
    );
    let again = extract(&gate, json!([internal])).await;
    assert_eq!(again["results"][0]["cached"], false, "{again}");
}
