//! The keyless tier behind the gate, end to end: a stub for each ring member on its keyless
//! wire format (Exa and Parallel over MCP with plain-JSON and event-stream answers, Firecrawl's
//! REST without a key, Keenable's public routes), the ring serving `web.backend: keyless` from
//! a rotating cursor, and the ring rescuing a failed backend with Hermes' failover rules.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::net::IpAddr;

use fleetgate_e2e::dns::StubDns;
use fleetgate_e2e::gate::GateProcess;
use fleetgate_e2e::http;
use fleetgate_e2e::origin::{self, Origin, Reply};
use serde_json::{Value, json};

const PUBLIC: &str = "93.184.215.14";

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// An MCP `tools/call` answer carrying `text`, as plain JSON.
fn mcp_json(text: &str) -> Reply {
    Reply::json(
        &json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}}),
    )
}

/// The same answer as an event stream.
fn mcp_sse(text: &str) -> Reply {
    let envelope =
        json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}});
    Reply::new(
        200,
        "text/event-stream",
        format!("event: message\r\ndata: {envelope}\r\n\r\n"),
    )
}

fn exa_search_text(title: &str) -> String {
    format!(
        "Title: {title}\nURL: https://exa.example/{title}\nPublished: 2026-01-01\nHighlights:\nfrom exa\n---\nTitle: no url"
    )
}

fn parallel_search_text(title: &str) -> String {
    json!({"results": [{"url": format!("https://parallel.example/{title}"), "title": title, "excerpts": ["from", "parallel"]}]}).to_string()
}

/// The four ring members, each answering success for search and extract.
struct Ring {
    exa: Origin,
    parallel: Origin,
    firecrawl: Origin,
    keenable: Origin,
}

impl Ring {
    async fn start() -> Self {
        let exa = origin::http1()
            .route("/mcp", mcp_json(&exa_search_text("exa")))
            .run()
            .await
            .unwrap();
        let parallel = origin::http1()
            .route("/mcp", mcp_sse(&parallel_search_text("parallel")))
            .run()
            .await
            .unwrap();
        let firecrawl = origin::http1()
            .route(
                "/v2/search",
                Reply::json(&json!({"success": true, "data": {"web": [
                    {"url": "https://firecrawl.example/r", "title": "firecrawl", "description": "from firecrawl"}]}})),
            )
            .route(
                "/v2/scrape",
                Reply::json(&json!({"success": true, "data": {"markdown": "# Firecrawl page\n\nkeyless", "metadata": {"title": "Firecrawl page"}}})),
            )
            .run()
            .await
            .unwrap();
        let keenable = origin::http1()
            .route(
                "/v1/search/public",
                Reply::json(&json!({"results": [{"title": "keenable", "url": "https://keenable.example/r", "snippet": "from keenable"}]})),
            )
            .route(
                "/v1/fetch/public",
                Reply::json(&json!({"title": "Keenable page", "content": "# Keenable page\n\nkeyless"})),
            )
            .run()
            .await
            .unwrap();
        Self {
            exa,
            parallel,
            firecrawl,
            keenable,
        }
    }

    fn members(&self) -> [(&'static str, &Origin); 4] {
        [
            ("exa", &self.exa),
            ("parallel", &self.parallel),
            ("firecrawl", &self.firecrawl),
            ("keenable", &self.keenable),
        ]
    }

    /// `web.vendors` entries pointing each member's keyless endpoint at its stub, with the
    /// extra lines `extra(name)` gives each.
    fn vendors(&self, extra: impl Fn(&str) -> String) -> String {
        let mut out = String::from("  vendors:\n");
        for (name, stub) in self.members() {
            let path = if matches!(name, "exa" | "parallel") {
                "/mcp"
            } else {
                ""
            };
            out.push_str(&format!(
                "    {name}:\n      keylessUrl: http://{}{path}\n      retries: 0\n{}",
                stub.addr(),
                extra(name)
            ));
        }
        out
    }

    /// Every request any member received, as text.
    fn everything_seen(&self) -> String {
        let mut all = String::new();
        for (_, stub) in self.members() {
            for r in stub.requests() {
                all.push_str(&r.uri.to_string());
                all.push_str(&String::from_utf8_lossy(&r.body));
            }
        }
        all
    }
}

async fn gate(dns: &StubDns, web: &str) -> GateProcess {
    let policy = format!(
        "version: v1\nlisten:\n  api: 127.0.0.1:0\n  admin: 127.0.0.1:0\n\
         egress:\n  allowCIDRs: [\"127.0.0.1/32\"]\n  resolver:\n    nameservers: [\"{}\"]\n    attempts: 1\n\
         websiteBlocklist:\n  domains: [\"blocked.test\"]\n\
         store:\n  root: ${{WORK_DIR}}/volume\nweb:\n{web}",
        dns.addr()
    );
    GateProcess::spawn(&policy).await.unwrap()
}

async fn post(gate: &GateProcess, path: &str, body: Value) -> Value {
    http::post_json(gate.api_addr(), path, &body)
        .await
        .unwrap()
        .json()
        .unwrap()
}

async fn dns() -> StubDns {
    StubDns::builder()
        .answer("docs.example.test", [ip(PUBLIC)])
        .answer("blocked.test", [ip(PUBLIC)])
        .start()
        .await
        .unwrap()
}

fn tool_call(stub: &Origin) -> Value {
    serde_json::from_slice(&stub.last_request().unwrap().body).unwrap()
}

#[tokio::test]
async fn the_keyless_backend_starts_each_call_at_the_next_member_in_its_wire_format() {
    let dns = dns().await;
    let ring = Ring::start().await;
    let web = format!(
        "  searchBackend: keyless\n{}",
        ring.vendors(|_| String::new())
    );
    let gate = gate(&dns, &web).await;
    let mut served = Vec::new();
    for i in 0..8 {
        // Distinct queries: the memo would answer a repeated one.
        let body = post(
            &gate,
            "/v1/search",
            json!({"query": format!("fleet {i}"), "limit": 3}),
        )
        .await;
        assert_eq!(body["success"], true, "{body}");
        let by = body["served_by"].as_str().unwrap().to_string();
        assert_eq!(
            body["data"]["web"][0]["description"],
            format!("from {by}"),
            "{body}"
        );
        served.push(by);
    }
    let ring_order = ["exa", "parallel", "firecrawl", "keenable"];
    let at = |n: &str| ring_order.iter().position(|m| *m == n).unwrap();
    for pair in served.windows(2) {
        assert_eq!(
            (at(&pair[0]) + 1) % 4,
            at(&pair[1]),
            "each call starts one member further: {served:?}"
        );
    }
    for (name, stub) in ring.members() {
        assert_eq!(stub.total_hits(), 2, "{name} served two of eight calls");
    }
    // Exa: one tools/call POST, no handshake, the MCP Accept header.
    let exa = tool_call(&ring.exa);
    assert_eq!(exa["method"], "tools/call");
    assert_eq!(exa["params"]["name"], "web_search_exa");
    assert_eq!(
        exa["params"]["arguments"]["numResults"], 10,
        "the memo's bucket for a limit of 3"
    );
    let seen = ring.exa.last_request().unwrap();
    assert_eq!(
        seen.headers.get("accept").unwrap(),
        "application/json, text/event-stream"
    );
    assert!(seen.headers.get("authorization").is_none());
    // Parallel: the same random session id on every call of this process.
    let sessions: Vec<Value> = ring
        .parallel
        .requests()
        .iter()
        .map(|r| {
            serde_json::from_slice::<Value>(&r.body).unwrap()["params"]["arguments"]["session_id"]
                .clone()
        })
        .collect();
    assert!(
        sessions[0].as_str().is_some_and(|s| s.len() == 32),
        "{sessions:?}"
    );
    assert_eq!(sessions[0], sessions[1], "one session id per process");
    // Firecrawl and Keenable: their public REST routes, no key.
    let fc = ring.firecrawl.last_request().unwrap();
    assert_eq!(fc.uri.path(), "/v2/search");
    assert!(fc.headers.get("authorization").is_none());
    assert_eq!(ring.keenable.hits("/v1/search/public"), 2);
    // The SearXNG front a real Hermes searches through: the ring answers there too.
    let sx: Value = http::get(gate.api_addr(), "/searxng/search?q=front&format=json")
        .await
        .unwrap()
        .json()
        .unwrap();
    let engine = sx["results"][0]["engine"].as_str().unwrap();
    assert_eq!(
        sx["results"][0]["content"],
        format!("from {engine}"),
        "{sx}"
    );
    assert_eq!(
        at(engine),
        (at(&served[7]) + 1) % 4,
        "the front's call is the ninth turn of the cursor"
    );
}

#[tokio::test]
async fn search_rescue_fails_over_on_rate_limits_and_refusals_and_stops_on_a_404() {
    let dns = dns().await;
    let ring = Ring::start().await;
    // Tavily without a key fails; the ring rescues it, pinned at its first member.
    let web = format!(
        "  searchBackend: tavily\n  rescue: [keyless]\n{}",
        ring.vendors(|_| String::new())
    );
    let gate = gate(&dns, &web).await;
    ring.exa
        .set_route("/mcp", Reply::text("slow down").status(429));
    ring.parallel.set_route(
        "/mcp",
        Reply::json(&json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "Rate limit exceeded"}})),
    );
    ring.firecrawl
        .set_route("/v2/search", Reply::text("payment required").status(402));
    let body = post(&gate, "/v1/search", json!({"query": "fleet", "limit": 1})).await;
    assert_eq!(body["success"], true, "{body}");
    assert_eq!(body["served_by"], "keenable", "{body}");
    assert_eq!(body["data"]["rescued_from"], "tavily");
    let note = body["data"]["backend_error"].as_str().unwrap();
    assert!(
        note.starts_with("Configured backend 'tavily' failed this call (TAVILY_API_KEY")
            && note.ends_with(
                "result served by the keyless free tier. The next call will use 'tavily' again."
            ),
        "{note}"
    );
    for (name, stub) in ring.members() {
        assert_eq!(stub.total_hits(), 1, "{name} was asked once");
    }

    // A rescued answer is not memoized: the same query walks again.
    let again = post(&gate, "/v1/search", json!({"query": "fleet", "limit": 1})).await;
    assert_eq!(again["cached"], false, "{again}");
    assert_eq!(ring.keenable.total_hits(), 2);

    // A 404 is neither rate-limit-ish nor a refusal: the walk stops at exa.
    ring.exa
        .set_route("/mcp", Reply::text("no such tool").status(404));
    let stopped = post(&gate, "/v1/search", json!({"query": "other", "limit": 1})).await;
    assert_eq!(stopped["success"], false, "{stopped}");
    let error = stopped["error"].as_str().unwrap();
    assert!(
        error.contains("(keyless rescue also failed: Keyless Exa search failed: HTTP 404: no such tool. Set EXA_API_KEY (exa.ai) or another web backend via `hermes tools` for reliable service.)"),
        "{error}"
    );
    assert_eq!(
        ring.parallel.total_hits(),
        2,
        "parallel is not asked after a 404"
    );

    // Every member throttled: the last error names the exhausted walk.
    ring.exa.set_route("/mcp", Reply::text("busy").status(429));
    ring.keenable.set_route(
        "/v1/search/public",
        Reply::text("Too Many Requests").status(429),
    );
    let exhausted = post(&gate, "/v1/search", json!({"query": "third", "limit": 1})).await;
    let error = exhausted["error"].as_str().unwrap();
    assert!(
        error.ends_with("(all keyless vendors unavailable: exa, parallel, firecrawl, keenable))"),
        "{error}"
    );
}

#[tokio::test]
async fn extract_rescue_moves_on_only_when_every_row_is_rate_limited_and_is_never_cached() {
    let dns = dns().await;
    let ring = Ring::start().await;
    let primary = origin::http1()
        .route(
            "/v2/scrape",
            Reply::json(&json!({"success": false, "error": "Insufficient credits"})).status(402),
        )
        .run()
        .await
        .unwrap();
    // Keyed Firecrawl (a self-hosted base URL) fails; the ring starts at Firecrawl's keyless
    // route, then keenable, exa, parallel.
    let vendors = ring.vendors(|name| match name {
        "firecrawl" => format!("      baseUrl: http://{}\n", primary.addr()),
        _ => String::new(),
    });
    let web = format!("  extractBackend: firecrawl\n  rescue: [keyless]\n{vendors}");
    let gate = gate(&dns, &web).await;
    ring.firecrawl
        .set_route("/v2/scrape", Reply::text("rate limit").status(429));
    ring.keenable.set_route(
        "/v1/fetch/public",
        Reply::text("Too Many Requests").status(429),
    );
    ring.exa.set_route(
        "/mcp",
        Reply::json(&json!({"jsonrpc": "2.0", "id": 1, "result": {"isError": true, "content": [{"type": "text", "text": "quota exceeded"}]}})),
    );
    // Parallel answers one page and fails the other for a reason that is not a rate limit.
    ring.parallel.set_route(
        "/mcp",
        mcp_sse(
            &json!({"results": [{"url": "https://docs.example.test/a", "title": "A", "full_content": "# A\n\nfrom parallel"}],
                    "errors": [{"url": "https://docs.example.test/b", "error_type": "fetch_failed"}]})
            .to_string(),
        ),
    );
    let urls = json!([
        "https://docs.example.test/a",
        "https://docs.example.test/b",
        "https://blocked.test/secret-plan"
    ]);
    let body = post(&gate, "/v1/extract", json!({"urls": urls})).await;
    let rows = body["results"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{body}");
    assert_eq!(rows[0]["served_by"], "parallel", "{body}");
    assert_eq!(rows[0]["rescued_from"], "firecrawl");
    assert!(
        rows[0]["content"]
            .as_str()
            .unwrap()
            .contains("from parallel")
    );
    assert!(
        rows[0]["backend_error"]
            .as_str()
            .unwrap()
            .contains("Insufficient credits"),
        "{body}"
    );
    // The row parallel failed keeps firecrawl's own error.
    assert!(
        rows[1]["error"]
            .as_str()
            .unwrap()
            .contains("Insufficient credits"),
        "{body}"
    );
    assert!(rows[2]["blocked_by_policy"].is_object(), "{body}");
    let parallel_call = tool_call(&ring.parallel);
    assert_eq!(parallel_call["params"]["name"], "web_fetch");
    assert_eq!(
        parallel_call["params"]["arguments"]["objective"],
        "Full page content"
    );
    assert!(
        !ring.everything_seen().contains("blocked.test"),
        "a blocklisted URL reaches no ring vendor"
    );
    for (name, stub) in ring.members() {
        assert!(stub.total_hits() >= 1, "{name} was walked");
    }

    // Rescued pages are never cached: the same call asks the configured backend again.
    let before = primary.hits("/v2/scrape");
    let again = post(
        &gate,
        "/v1/extract",
        json!({"urls": ["https://docs.example.test/a"]}),
    )
    .await;
    assert_eq!(again["results"][0]["cached"], false, "{again}");
    assert!(
        primary.hits("/v2/scrape") > before,
        "the primary is asked again"
    );
}

#[tokio::test]
async fn keyless_exa_extracts_one_url_per_tool_call_and_a_paid_ring_says_so() {
    let dns = dns().await;
    let ring = Ring::start().await;
    ring.exa
        .set_route("/mcp", mcp_json("# Exa page\n\nfetched without a key"));
    // Exa is keyless on its free tier; every other member is pinned to its paid tier.
    let web = format!(
        "  extractBackend: exa\n  searchBackend: tavily\n  rescue: [keyless]\n{}",
        ring.vendors(|name| match name {
            "exa" => "      tier: free\n".to_string(),
            _ => "      tier: paid\n".to_string(),
        })
    );
    let gate = gate(&dns, &web).await;
    let body = post(
        &gate,
        "/v1/extract",
        json!({"urls": ["https://docs.example.test/a", "https://docs.example.test/b"]}),
    )
    .await;
    let rows = body["results"].as_array().unwrap();
    assert_eq!(rows[0]["title"], "Exa page", "{body}");
    assert_eq!(rows[0]["served_by"], "exa");
    assert_eq!(ring.exa.total_hits(), 2, "one web_fetch_exa call per URL");
    let call = tool_call(&ring.exa);
    assert_eq!(call["params"]["name"], "web_fetch_exa");
    assert_eq!(
        call["params"]["arguments"]["urls"],
        json!(["https://docs.example.test/b"])
    );

    // Search through Tavily without a key fails; the rescue walk is exa alone.
    let search = post(&gate, "/v1/search", json!({"query": "fleet"})).await;
    assert_eq!(search["served_by"], "exa", "{search}");
    assert_eq!(
        ring.parallel.total_hits(),
        0,
        "paid members are never walked"
    );
    assert_eq!(ring.firecrawl.total_hits(), 0);
    assert_eq!(ring.keenable.total_hits(), 0);
}

#[tokio::test]
async fn a_ring_of_paid_members_gives_the_pinned_message() {
    let dns = dns().await;
    let ring = Ring::start().await;
    let web = format!(
        "  searchBackend: tavily\n  rescue: [keyless]\n{}",
        ring.vendors(|_| "      tier: paid\n".to_string())
    );
    let gate = gate(&dns, &web).await;
    let body = post(&gate, "/v1/search", json!({"query": "fleet"})).await;
    let error = body["error"].as_str().unwrap();
    assert!(
        error.ends_with(
            "(keyless rescue also failed: All keyless web providers are pinned to paid tiers.)"
        ),
        "{error}"
    );
    for (name, stub) in ring.members() {
        assert_eq!(stub.total_hits(), 0, "{name} is paid and never called");
    }
}

#[tokio::test]
async fn firecrawl_without_a_key_scrapes_keylessly_behind_the_firecrawl_front() {
    let dns = dns().await;
    let ring = Ring::start().await;
    // No key and no self-hosted base URL: tier auto calls Firecrawl's keyless REST API.
    let web = format!(
        "  extractBackend: firecrawl\n  rescue: []\n{}",
        ring.vendors(|_| String::new())
    );
    let gate = gate(&dns, &web).await;
    let body = post(
        &gate,
        "/v2/scrape",
        json!({"url": "https://docs.example.test/guide", "formats": ["markdown"]}),
    )
    .await;
    assert_eq!(body["success"], true, "{body}");
    assert!(
        body["data"]["markdown"]
            .as_str()
            .unwrap()
            .contains("keyless"),
        "{body}"
    );
    let seen = ring.firecrawl.last_request().unwrap();
    assert_eq!(seen.uri.path(), "/v2/scrape");
    assert!(
        seen.headers.get("authorization").is_none(),
        "no key is sent"
    );
    let sent: Value = serde_json::from_slice(&seen.body).unwrap();
    assert_eq!(
        sent,
        json!({"url": "https://docs.example.test/guide", "formats": ["markdown"]}),
        "the keyless scrape sends no waitFor"
    );
    // The status page says which backend is called without a key.
    let status: Value = http::get(gate.admin_addr(), "/v1/status")
        .await
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(
        status["backends"]["available"]["firecrawl"]["keyless"], true,
        "{status}"
    );
    // A refused URL gets the gate's answer; Firecrawl never sees it.
    let refused = post(
        &gate,
        "/v2/scrape",
        json!({"url": "https://blocked.test/plan"}),
    )
    .await;
    assert_eq!(refused["success"], false, "{refused}");
    assert_eq!(ring.firecrawl.hits("/v2/scrape"), 1);

    // Firecrawl's keyless failure reads as Hermes words it.
    ring.firecrawl
        .set_route("/v2/scrape", Reply::text("upstream busy").status(503));
    let failed = post(
        &gate,
        "/v1/extract",
        json!({"urls": ["https://docs.example.test/other"]}),
    )
    .await;
    assert_eq!(
        failed["results"][0]["error"],
        "Keyless Firecrawl extract failed: HTTP 503: upstream busy. Set FIRECRAWL_API_KEY (firecrawl.dev) for reliable service.",
        "{failed}"
    );
}
