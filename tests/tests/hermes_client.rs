//! Real clients against a real gate: Hermes Agent's own `web_extract` (firecrawl backend,
//! `FIRECRAWL_API_URL` pointing at the gate) and `web_search`, and the firecrawl SDK Hermes
//! pins, each test once per pinned Hermes (0.19.0 and 0.20.1, `hermes_matrix!`).
//!
//! Hermes resolves every URL's host itself before calling its backend, and this machine has no
//! public DNS. The Hermes process therefore runs in its own mount namespace (`unshare -m`) with
//! a bind-mounted hosts file that maps the test names to a public address; Hermes never
//! connects there, it only talks to the gate on loopback. The gate resolves the same names
//! through the stub DNS server to the loopback origin. Nothing on the machine is changed.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::print_stdout)]

use std::net::IpAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use fleetgate_e2e::dns::StubDns;
use fleetgate_e2e::gate::GateProcess;
use fleetgate_e2e::hermes_matrix;
use fleetgate_e2e::origin::{self, Reply};
use fleetgate_e2e::pages;
use fleetgate_e2e::venv::{self, Hermes};
use serde_json::Value;

const NAMES: &[&str] = &["docs.fleet.test", "meta.fleet.test", "ads.fleet.test"];

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address must parse")
}

fn script(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("python")
        .join(name)
        .display()
        .to_string()
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

async fn setup() -> (StubDns, origin::Origin, GateProcess) {
    let dns = StubDns::builder()
        .answer("docs.fleet.test", [ip("127.0.0.1")])
        .answer("ads.fleet.test", [ip("127.0.0.1")])
        .answer("meta.fleet.test", [ip("169.254.169.254")])
        .start()
        .await
        .expect("stub DNS must start");
    let page = format!(
        "<html><head><title>Fleet Docs</title></head><body><main><h1>Fleet docs</h1>{}</main></body></html>",
        (0..400)
            .map(|i| format!("<p>Paragraph {i} about running agents safely.</p>"))
            .collect::<String>()
    );
    let origin = origin::http1()
        .route("/guide", Reply::html(page))
        .route("/ad", Reply::html("<p>advert</p>"))
        .route("/news", Reply::html(pages::news_page()))
        .run()
        .await
        .expect("origin must start");
    let policy = format!(
        "version: v1\nlisten:\n  api: 127.0.0.1:0\n  admin: 127.0.0.1:0\n\
         egress:\n  allowCIDRs: [\"127.0.0.1/32\"]\n  resolver:\n    nameservers: [\"{}\"]\n    attempts: 1\n\
         websiteBlocklist:\n  domains: [ads.fleet.test]\n\
         store:\n  root: ${{WORK_DIR}}/volume\n",
        dns.addr()
    );
    let gate = GateProcess::spawn(&policy).await.expect("gate must start");
    (dns, origin, gate)
}

hermes_matrix!(
    hermes_web_extract_goes_through_the_gate_and_sees_its_refusals,
    the_firecrawl_sdk_scrapes_through_the_gate_front,
    hermes_web_search_goes_through_the_gate_searxng_front,
    hermes_web_search_reaches_ddgs_and_the_keyless_ring_through_the_gate,
);

async fn hermes_web_extract_goes_through_the_gate_and_sees_its_refusals(version: Hermes) {
    let Some(python) = version.python() else {
        return;
    };
    if !is_root() {
        // tests/run runs as root and requires the real clients: there this is a failure.
        assert!(
            std::env::var_os(venv::REQUIRE_VENV_ENV).is_none_or(|value| value != "1"),
            "{}=1 but this test needs root for unshare -m",
            venv::REQUIRE_VENV_ENV
        );
        println!("skipped: needs root for unshare -m (CI runs as root)");
        return;
    }
    let (_dns, origin, gate) = setup().await;
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts");
    std::fs::write(
        &hosts,
        format!("127.0.0.1 localhost\n93.184.215.14 {}\n", NAMES.join(" ")),
    )
    .unwrap();
    let home = dir.path().join("hermes");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.yaml"),
        "web:\n  extract_backend: firecrawl\n",
    )
    .unwrap();
    let port = origin.addr().port();
    let urls = [
        format!("http://docs.fleet.test:{port}/guide"),
        format!("http://meta.fleet.test:{port}/latest/meta-data/"),
        format!("http://ads.fleet.test:{port}/ad"),
        format!("http://docs.fleet.test:{port}/news"),
    ];
    let shell = format!(
        "mount --bind {} /etc/hosts && exec \"$0\" \"$@\"",
        hosts.display()
    );
    let out = tokio::process::Command::new("unshare")
        .args(["-m", "sh", "-c", &shell])
        .arg(&python)
        .arg(script("hermes_web_extract.py"))
        .arg("3000")
        .args(&urls)
        .env("HERMES_HOME", &home)
        .envs(venv::HERMES_ENV)
        .env("FIRECRAWL_API_URL", format!("http://{}", gate.api_addr()))
        .env_remove("HTTPS_PROXY")
        .env_remove("HTTP_PROXY")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("Hermes must finish")
        .expect("unshare must run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{version} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json_start = stdout.find('{').expect("Hermes must print JSON");
    let result: Value =
        serde_json::from_str(&stdout[json_start..]).expect("Hermes' result must be JSON");
    let rows = result["results"]
        .as_array()
        .unwrap_or_else(|| panic!("results expected: {result}"));
    assert_eq!(rows.len(), 4, "{result}");

    let docs = &rows[0];
    assert_eq!(
        docs["error"],
        Value::Null,
        "the page must arrive through the gate: {result}"
    );
    assert_eq!(docs["title"], "Fleet Docs");
    let content = docs["content"].as_str().unwrap();
    assert!(content.starts_with("# Fleet docs"), "{content:.200}");
    assert!(
        content.contains("[TRUNCATED]"),
        "Hermes truncates the long page at 3000 chars"
    );
    assert_eq!(origin.hits("/guide"), 1, "the gate fetched the page once");

    let meta = rows[1]["error"].as_str().unwrap_or_default();
    assert!(
        meta.contains("Blocked: URL targets a private or internal network address")
            && meta.contains("ip_cloud_metadata"),
        "Hermes must see the gate's SSRF refusal and code: {meta}"
    );
    let ads = rows[2]["error"].as_str().unwrap_or_default();
    assert!(
        ads.contains(
            "Blocked by website policy: 'ads.fleet.test' matched rule 'ads.fleet.test' from config"
        ),
        "Hermes must see the gate's blocklist refusal: {ads}"
    );
    assert_eq!(origin.hits("/ad"), 0, "a blocklisted page is never fetched");

    // A page full of boilerplate: Hermes reads the article, not the navigation around it.
    let news = rows[3]["content"].as_str().unwrap_or_default();
    assert_eq!(news.matches("ARTICLE ").count(), 4, "{result}");
    for marker in pages::BOILERPLATE {
        assert!(!news.contains(marker), "{marker} reached Hermes: {news}");
    }
}

/// The firecrawl SDK each Hermes release pins (`hermes-agent[firecrawl]`).
async fn the_firecrawl_sdk_scrapes_through_the_gate_front(version: Hermes) {
    let Some(python) = version.python() else {
        return;
    };
    let (_dns, origin, gate) = setup().await;
    let port = origin.addr().port();
    let out = venv::run_python(
        &python,
        &std::fs::read_to_string(script("firecrawl_sdk_scrape.py")).unwrap(),
        &[
            &format!("http://{}", gate.api_addr()),
            &format!("http://docs.fleet.test:{port}/guide"),
            &format!("http://meta.fleet.test:{port}/"),
        ],
        &[],
    )
    .await
    .expect("python must run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(
        lines.len(),
        2,
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(lines[0]["ok"], true, "{stdout}");
    assert_eq!(lines[0]["title"], "Fleet Docs");
    assert!(
        lines[0]["markdown"]
            .as_str()
            .unwrap()
            .contains("Paragraph 399"),
        "the SDK gets the whole page"
    );
    assert_eq!(lines[0]["statusCode"], 200);
    assert_eq!(lines[1]["ok"], false);
    let err = lines[1]["error"].as_str().unwrap();
    assert!(
        err.contains("private or internal network address")
            && err.contains("fleetgate: ip_cloud_metadata"),
        "{err}"
    );
}

/// Hermes' own `web_search` (its searxng backend, `SEARXNG_URL` at the gate's SearXNG front)
/// against a gate whose `web:` section is `web`; Hermes' JSON result, or `None` when the
/// version's venv is not there.
async fn hermes_search_through_the_searxng_front(
    version: Hermes,
    web: &str,
    limit: &str,
) -> Option<Value> {
    let python = version.python()?;
    let dns = StubDns::builder()
        .start()
        .await
        .expect("stub DNS must start");
    let policy = format!(
        "version: v1\nlisten:\n  api: 127.0.0.1:0\n  admin: 127.0.0.1:0\n\
         egress:\n  resolver:\n    nameservers: [\"{}\"]\n\
         web:\n{web}\
         store:\n  root: ${{WORK_DIR}}/volume\n",
        dns.addr()
    );
    let gate = GateProcess::spawn(&policy).await.expect("gate must start");
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hermes");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.yaml"),
        "web:\n  search_backend: searxng\n",
    )
    .unwrap();
    let out = venv::run_python(
        &python,
        &std::fs::read_to_string(script("hermes_web_search.py")).unwrap(),
        &[limit, "fleet gate"],
        &[
            ("HERMES_HOME", home.to_str().unwrap()),
            (
                "SEARXNG_URL",
                &format!("http://{}/searxng", gate.api_addr()),
            ),
        ],
    )
    .await
    .expect("python must run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let start = stdout.find('{').unwrap_or_else(|| {
        panic!(
            "no JSON: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    Some(serde_json::from_str(&stdout[start..]).expect("Hermes prints JSON"))
}

async fn hermes_web_search_goes_through_the_gate_searxng_front(version: Hermes) {
    let searx = origin::http1()
        .route(
            "/search",
            Reply::json(&serde_json::json!({"results": [
                {"title": "Fleet guide", "url": "https://docs.example/guide", "content": "how to run agents", "score": 2.0},
                {"title": "Other", "url": "https://other.example/", "content": "less relevant", "score": 1.0}
            ]})),
        )
        .run()
        .await
        .expect("stub SearXNG must start");
    let web = format!(
        "  searchBackend: searxng\n  vendors:\n    searxng:\n      baseUrl: http://{}\n",
        searx.addr()
    );
    let Some(result) = hermes_search_through_the_searxng_front(version, &web, "1").await else {
        return;
    };
    assert_eq!(result["success"], true, "{result}");
    let web = result["data"]["web"].as_array().expect("rows");
    assert_eq!(web.len(), 1, "Hermes cuts to its limit: {result}");
    assert_eq!(web[0]["url"], "https://docs.example/guide");
    assert_eq!(web[0]["title"], "Fleet guide");
    assert_eq!(
        searx.hits("/search"),
        1,
        "the search went through the gate to the configured backend"
    );
}

async fn hermes_web_search_reaches_ddgs_and_the_keyless_ring_through_the_gate(version: Hermes) {
    let ddg = origin::http1()
        .route(
            "/html/",
            Reply::text(
                r#"<html><body><div class="result web-result"><h2>
                <a class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fduck.example%2F">Duck</a></h2>
                <a class="result__snippet">from ddgs</a></div></body></html>"#,
            ),
        )
        .run()
        .await
        .expect("stub DuckDuckGo must start");
    let web = format!(
        "  searchBackend: ddgs\n  vendors:\n    ddgs:\n      baseUrl: http://{}\n",
        ddg.addr()
    );
    let Some(result) = hermes_search_through_the_searxng_front(version, &web, "3").await else {
        return;
    };
    assert_eq!(
        result["data"]["web"][0]["url"], "https://duck.example/",
        "{result}"
    );
    assert_eq!(
        result["data"]["web"][0]["description"], "from ddgs",
        "{result}"
    );

    // The ring with one free member: Exa's MCP endpoint answers an event stream.
    let envelope = serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text",
        "text": "Title: Ring hit\nURL: https://exa.example/ring\nHighlights:\nfrom the ring"}]}});
    let exa = origin::http1()
        .route(
            "/mcp",
            Reply::new(200, "text/event-stream", format!("data: {envelope}\n\n")),
        )
        .run()
        .await
        .expect("stub Exa must start");
    let mut web = format!(
        "  searchBackend: keyless\n  vendors:\n    exa:\n      keylessUrl: http://{}/mcp\n",
        exa.addr()
    );
    for paid in ["parallel", "firecrawl", "keenable"] {
        web.push_str(&format!("    {paid}:\n      tier: paid\n"));
    }
    let result = hermes_search_through_the_searxng_front(version, &web, "3")
        .await
        .expect("the venv is there");
    assert_eq!(
        result["data"]["web"][0]["url"], "https://exa.example/ring",
        "{result}"
    );
    assert_eq!(
        result["data"]["web"][0]["description"], "from the ring",
        "{result}"
    );
    assert_eq!(exa.hits("/mcp"), 1);
}
