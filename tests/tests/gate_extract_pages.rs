//! What the agent reads of a page, end to end through a real `fleetgate-proxy serve`: legacy
//! encodings decoded as a browser decodes them (HTTP charset, `<meta>` prescan, detection),
//! a `<meta charset>` never emptying the page, a page without text an `empty_content` error,
//! and main content by default with the whole page on request (policy, `/v1/extract`, the
//! Firecrawl and Tavily fronts).
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::print_stdout)]

use std::net::IpAddr;

use fleetgate_e2e::dns::StubDns;
use fleetgate_e2e::gate::{GateProcess, loopback_policy};
use fleetgate_e2e::http;
use fleetgate_e2e::origin::{self, Origin, Reply};
use fleetgate_e2e::pages::{BOILERPLATE, news_page};
use serde_json::{Value, json};

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address must parse")
}

/// The loopback policy, the extract cache off unless `web` turns it on.
fn policy(dns: &StubDns, web: &str) -> String {
    let web = if web.contains("cache:") {
        web.to_string()
    } else {
        format!("  cache:\n    enabled: false\n{web}")
    };
    loopback_policy(dns.addr(), &format!("web:\n{web}"))
}

async fn setup(routes: Vec<(String, Reply)>, extra: &str) -> (StubDns, Origin, GateProcess) {
    let dns = StubDns::builder()
        .answer("origin.test", [ip("127.0.0.1")])
        .start()
        .await
        .unwrap();
    let mut builder = origin::http1();
    for (path, reply) in routes {
        builder = builder.route(&path, reply);
    }
    let origin = builder.run().await.expect("origin must start");
    let gate = GateProcess::spawn(&policy(&dns, extra))
        .await
        .expect("gate must start");
    (dns, origin, gate)
}

async fn post(gate: &GateProcess, path: &str, body: &Value) -> (u16, Value) {
    let reply = http::post_json(gate.api_addr(), path, body)
        .await
        .expect("the api listener must answer");
    let json = reply.json().expect("the api must answer JSON");
    (reply.status.as_u16(), json)
}

/// A page of prose in `text`, with a `<meta>` naming `meta` when given.
fn page(title: &str, text: &str, meta: Option<&str>) -> String {
    let meta = meta
        .map(|m| format!("<meta charset=\"{m}\">"))
        .unwrap_or_default();
    format!(
        "<!DOCTYPE html><html><head>{meta}<title>{title}</title></head><body>\
         <article><h1>{title}</h1><p>{text}</p><p>{text}</p></article></body></html>"
    )
}

/// Each legacy encoding with a sentence it can encode.
const ENCODINGS: &[(&str, &str)] = &[
    (
        "windows-1252",
        "Le café crème brûlée à la française coûte dix-huit euros — très cher, garçon.",
    ),
    (
        "ISO-8859-2",
        "Zażółć gęślą jaźń. Příliš žluťoučký kůň úpěl ďábelské ódy, řekl Šimon.",
    ),
    (
        "Shift_JIS",
        "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。何でも薄暗いじめじめした所でニャーニャー泣いていた事だけは記憶している。",
    ),
    (
        "EUC-KR",
        "대한민국은 민주공화국이다. 대한민국의 주권은 국민에게 있고, 모든 권력은 국민으로부터 나온다. 국가는 법률이 정하는 바에 의하여 재외국민을 보호할 의무를 진다.",
    ),
    (
        "GBK",
        "中华人民共和国是工人阶级领导的、以工农联盟为基础的人民民主专政的社会主义国家。社会主义制度是中华人民共和国的根本制度。",
    ),
    (
        "windows-1251",
        "Съешь же ещё этих мягких французских булок, да выпей чаю. В чащах юга жил бы цитрус? Да, но фальшивый экземпляр!",
    ),
];

fn encode(label: &str, text: &str) -> Vec<u8> {
    let encoding = encoding_rs::Encoding::for_label(label.as_bytes()).expect("known label");
    let (bytes, _, unmappable) = encoding.encode(text);
    assert!(!unmappable, "{label} must encode the sample");
    bytes.into_owned()
}

/// The encoding table: each encoding served with a charset header, with only a `<meta>`,
/// and with no declaration at all (the detector's guess, on pages long enough to tell).
#[tokio::test]
async fn legacy_encodings_are_decoded_with_and_without_a_charset_header() {
    let mut routes = Vec::new();
    for (label, text) in ENCODINGS {
        let header = encode(label, &page("Sample", text, None));
        let meta = encode(label, &page("Sample", text, Some(label)));
        routes.push((
            format!("/{label}/header"),
            Reply::new(200, &format!("text/html; charset={label}"), header.clone()),
        ));
        routes.push((format!("/{label}/meta"), Reply::new(200, "text/html", meta)));
        routes.push((
            format!("/{label}/none"),
            Reply::new(200, "text/html", header),
        ));
    }
    let (_dns, origin, gate) = setup(routes, "").await;
    let mut table = vec!["| encoding | charset header | `<meta>` only | undeclared |".to_string()];
    let mut wrong = Vec::new();
    for (label, text) in ENCODINGS {
        let mut cells = vec![label.to_string()];
        for how in ["header", "meta", "none"] {
            let url = origin.url_with_host("origin.test", &format!("/{label}/{how}"));
            let (status, body) = post(&gate, "/v1/extract", &json!({"urls": [url]})).await;
            assert_eq!(status, 200, "{body}");
            let content = body["results"][0]["content"].as_str().unwrap_or("");
            let ok = content.contains(text);
            if !ok {
                wrong.push(format!("{label}/{how}: {content:?}"));
            }
            cells.push(if ok { "decoded" } else { "wrong" }.to_string());
        }
        table.push(format!("| {} |", cells.join(" | ")));
    }
    println!("{}", table.join("\n"));
    assert!(wrong.is_empty(), "misdecoded pages: {wrong:#?}");
}

#[tokio::test]
async fn a_meta_charset_never_empties_the_page_and_a_page_without_text_is_an_error() {
    let routes = vec![
        (
            "/meta".to_string(),
            Reply::html(
                "<html><head><meta charset=\"utf-8\"><title>Kept title</title></head>\
                 <body><p>MARKER text here</p></body></html>",
            ),
        ),
        (
            "/http-equiv".to_string(),
            Reply::html(
                "<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=utf-8\">\
                 </head><body><p>SECOND marker</p></body></html>",
            ),
        ),
        (
            "/shell".to_string(),
            Reply::html(
                "<html><head><title>App</title><script>boot()</script></head>\
                 <body><div id=\"root\"></div><script src=\"/app.js\"></script></body></html>",
            ),
        ),
    ];
    let (_dns, origin, gate) = setup(routes, "").await;
    let urls: Vec<String> = ["/meta", "/http-equiv", "/shell"]
        .iter()
        .map(|p| origin.url_with_host("origin.test", p))
        .collect();
    let (status, body) = post(&gate, "/v1/extract", &json!({"urls": urls})).await;
    assert_eq!(status, 200, "{body}");
    let rows = body["results"].as_array().expect("rows");
    assert_eq!(rows[0]["content"], "MARKER text here", "{body}");
    assert_eq!(rows[0]["title"], "Kept title", "{body}");
    assert_eq!(rows[0]["error"], Value::Null);
    assert_eq!(rows[1]["content"], "SECOND marker", "{body}");
    // The script-rendered shell: an error with its own code, never an empty success.
    assert_eq!(rows[2]["code"], "empty_content", "{body}");
    assert!(
        rows[2]["error"]
            .as_str()
            .is_some_and(|e| e.contains("no extractable text")),
        "{body}"
    );
    // The Firecrawl front answers it as an unprocessable page.
    let (status, body) = post(&gate, "/v2/scrape", &json!({"url": urls[2]})).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["code"], "empty_content", "{body}");
}

#[tokio::test]
async fn links_and_images_reach_the_agent_absolute_against_the_page_it_landed_on() {
    let prose = "The guide explains, step by step, how the pieces fit together, and why they do.";
    let routes = vec![
        (
            "/old/guide".to_string(),
            Reply::redirect(301, "/docs/guide/part-1.html"),
        ),
        (
            "/docs/guide/part-1.html".to_string(),
            Reply::html(format!(
                "<html><head><title>Guide</title></head><body><article><h1>Guide</h1>\
                 <p>{prose} Read <a href=\"part-2.html\">the next part</a> or \
                 <a href=\"/docs/\">the index</a>.</p><p>{prose}</p>\
                 <img src=\"img/diagram.png\" alt=\"A diagram of the pieces\"></article></body></html>"
            )),
        ),
    ];
    let (_dns, origin, gate) = setup(routes, "").await;
    let url = origin.url_with_host("origin.test", "/old/guide");
    let landed = origin.url_with_host("origin.test", "/docs/guide/");
    let (status, body) = post(&gate, "/v1/extract", &json!({"urls": [url]})).await;
    assert_eq!(status, 200, "{body}");
    let content = body["results"][0]["content"].as_str().expect("content");
    // Resolved against the page the redirect led to, not the URL the agent asked for.
    for expected in [
        format!("[the next part]({landed}part-2.html)"),
        format!(
            "[the index]({})",
            origin.url_with_host("origin.test", "/docs/")
        ),
        format!("![A diagram of the pieces]({landed}img/diagram.png)"),
    ] {
        assert!(content.contains(&expected), "{expected}:\n{content}");
    }
    // The Firecrawl front hands Hermes the same markdown.
    let (status, body) = post(&gate, "/v2/scrape", &json!({"url": url})).await;
    assert_eq!(status, 200, "{body}");
    let markdown = body["data"]["markdown"].as_str().expect("markdown");
    assert!(
        markdown.contains(&format!("[the next part]({landed}part-2.html)")),
        "{markdown}"
    );
}

fn assert_main(content: &str) {
    assert!(content.contains("# Tram network to grow"), "{content}");
    assert_eq!(content.matches("ARTICLE ").count(), 4, "{content}");
    for b in BOILERPLATE {
        assert!(!content.contains(b), "{b} must be left out:\n{content}");
    }
}

fn assert_full(content: &str) {
    assert_eq!(content.matches("ARTICLE ").count(), 4, "{content}");
    for b in BOILERPLATE {
        assert!(
            content.contains(b),
            "{b} must be kept on the whole page:\n{content}"
        );
    }
}

#[tokio::test]
async fn main_content_by_default_and_the_whole_page_on_request() {
    let routes = vec![("/news".to_string(), Reply::html(news_page()))];
    let (_dns, origin, gate) = setup(routes, "").await;
    let url = origin.url_with_host("origin.test", "/news");

    let (_, body) = post(&gate, "/v1/extract", &json!({"urls": [url]})).await;
    assert_main(body["results"][0]["content"].as_str().unwrap());
    let (_, body) = post(
        &gate,
        "/v1/extract",
        &json!({"urls": [url], "only_main_content": false}),
    )
    .await;
    assert_full(body["results"][0]["content"].as_str().unwrap());

    let (status, body) = post(
        &gate,
        "/v2/scrape",
        &json!({"url": url, "formats": ["markdown"]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_main(body["data"]["markdown"].as_str().unwrap());
    let (_, body) = post(
        &gate,
        "/v2/scrape",
        &json!({"url": url, "onlyMainContent": false}),
    )
    .await;
    assert_full(body["data"]["markdown"].as_str().unwrap());
    let (status, body) = post(
        &gate,
        "/v2/scrape",
        &json!({"url": url, "onlyMainContent": "no"}),
    )
    .await;
    assert_eq!(status, 400, "{body}");

    let (_, body) = post(&gate, "/tavily/extract", &json!({"urls": [url]})).await;
    assert_main(body["results"][0]["raw_content"].as_str().unwrap());
    let (_, body) = post(
        &gate,
        "/tavily/extract",
        &json!({"urls": [url], "extract_depth": "advanced"}),
    )
    .await;
    assert_full(body["results"][0]["raw_content"].as_str().unwrap());
}

#[tokio::test]
async fn the_policy_default_can_be_the_whole_page_and_cache_entries_keep_scopes_apart() {
    let routes = vec![("/news".to_string(), Reply::html(news_page()))];
    let dns = StubDns::builder()
        .answer("origin.test", [ip("127.0.0.1")])
        .start()
        .await
        .unwrap();
    let origin = routes
        .into_iter()
        .fold(origin::http1(), |b, (p, r)| b.route(&p, r))
        .run()
        .await
        .unwrap();
    // The whole page by default, with the cache on: each scope has its own entry.
    let text = policy(
        &dns,
        "  cache:\n    enabled: true\n  onlyMainContent: false\n",
    );
    let gate = GateProcess::spawn(&text).await.expect("gate must start");
    let url = origin.url_with_host("origin.test", "/news");
    let (_, body) = post(&gate, "/v1/extract", &json!({"urls": [url]})).await;
    assert_full(body["results"][0]["content"].as_str().unwrap());
    let (_, body) = post(
        &gate,
        "/v1/extract",
        &json!({"urls": [url], "only_main_content": true}),
    )
    .await;
    let row = &body["results"][0];
    assert_main(row["content"].as_str().unwrap());
    assert_ne!(
        row["cached"], true,
        "a whole-page entry must not answer a main-content call"
    );
    let (_, body) = post(&gate, "/v1/extract", &json!({"urls": [url]})).await;
    assert_full(body["results"][0]["content"].as_str().unwrap());
}
