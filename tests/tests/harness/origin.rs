//! The loopback origin serves every route kind as a real HTTP client sees it.

use std::io::Read as _;
use std::time::Duration;

use fleetgate_e2e::http::{self, HttpReply};
use fleetgate_e2e::origin::{self, FILLER_BYTE, Origin, Reply};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::time::Instant;

const PAGE: &str = "<html><body><h1>fleetgate</h1><p>a page worth compressing, compressing, \
                    compressing, compressing.</p></body></html>";

async fn get(origin: &Origin, path: &str) -> HttpReply {
    http::get(origin.addr(), path)
        .await
        .expect("the origin must answer")
}

/// Sends a bare GET and returns what arrives until EOF or until nothing came for `idle`.
async fn raw_get(origin: &Origin, path: &str, idle: Duration) -> (String, bool) {
    let mut stream = TcpStream::connect(origin.addr())
        .await
        .expect("the origin must accept connections");
    let request = format!("GET {path} HTTP/1.1\r\nHost: origin.test\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("the request must be written");
    let mut received = Vec::new();
    let mut buf = [0_u8; 4096];
    let reached_eof = loop {
        match tokio::time::timeout(idle, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break true,
            Ok(Ok(n)) => received.extend_from_slice(&buf[..n]),
            Err(_) => break false,
        }
    };
    (String::from_utf8_lossy(&received).into_owned(), reached_eof)
}

#[tokio::test]
async fn each_plain_route_kind_is_served_with_its_status_type_and_body() {
    let origin = origin::http1()
        .route("/text", "ok")
        .route("/page", Reply::html(PAGE))
        .route("/json", Reply::json(&serde_json::json!({"n": 1})))
        .route("/teapot", Reply::new(418, "text/x-tea", "short and stout"))
        .run()
        .await
        .expect("the origin must start");
    #[rustfmt::skip]
    let cases = [
        ("a &str route is plain text", "/text", 200, "text/plain; charset=utf-8", "ok"),
        ("an HTML page", "/page", 200, "text/html; charset=utf-8", PAGE),
        ("a JSON body", "/json", 200, "application/json", r#"{"n":1}"#),
        ("any status and type", "/teapot", 418, "text/x-tea", "short and stout"),
        ("a path without a route is 404", "/nowhere", 404, "text/plain; charset=utf-8",
            "no route for /nowhere"),
    ];
    for (case, path, status, content_type, body) in cases {
        let reply = get(&origin, path).await;
        let length = body.len().to_string();
        assert_eq!(reply.status.as_u16(), status, "{case}: status");
        assert_eq!(
            reply.header("content-type"),
            Some(content_type),
            "{case}: type"
        );
        assert_eq!(reply.text(), body, "{case}: body");
        assert_eq!(
            reply.header("content-length"),
            Some(length.as_str()),
            "{case}: length"
        );
    }
}

#[tokio::test]
async fn a_redirect_carries_its_location_and_modifiers_change_status_and_headers() {
    let origin = origin::http1()
        .route("/moved", Reply::redirect(307, "https://elsewhere.test/to"))
        .route(
            "/extra",
            Reply::text("x").header("x-origin", "yes").status(203),
        )
        .run()
        .await
        .expect("the origin must start");
    let moved = get(&origin, "/moved").await;
    assert_eq!(
        moved.status.as_u16(),
        307,
        "a redirect must keep its status"
    );
    assert_eq!(
        moved.header("location"),
        Some("https://elsewhere.test/to"),
        "Location"
    );
    assert!(moved.body.is_empty(), "a redirect has no body");
    let extra = get(&origin, "/extra").await;
    assert_eq!(
        extra.status.as_u16(),
        203,
        "status() must replace the status"
    );
    assert_eq!(
        extra.header("x-origin"),
        Some("yes"),
        "header() must add the header"
    );
}

#[tokio::test]
async fn gzip_and_brotli_bodies_decode_back_to_the_original() {
    let origin = origin::http1()
        .route("/gz", Reply::html(PAGE).gzip())
        .route("/br", Reply::html(PAGE).brotli())
        .run()
        .await
        .expect("the origin must start");
    let gz = get(&origin, "/gz").await;
    assert_eq!(
        gz.header("content-encoding"),
        Some("gzip"),
        "gzip must be announced"
    );
    assert_ne!(
        gz.body.as_ref(),
        PAGE.as_bytes(),
        "the gzip body must be encoded"
    );
    let mut decoded = String::new();
    flate2::read::GzDecoder::new(gz.body.as_ref())
        .read_to_string(&mut decoded)
        .expect("the gzip body must decode");
    assert_eq!(decoded, PAGE, "gzip must round-trip to the page");

    let br = get(&origin, "/br").await;
    assert_eq!(
        br.header("content-encoding"),
        Some("br"),
        "brotli must be announced"
    );
    assert_ne!(
        br.body.as_ref(),
        PAGE.as_bytes(),
        "the brotli body must be encoded"
    );
    let mut decoded = String::new();
    brotli::Decompressor::new(br.body.as_ref(), 4096)
        .read_to_string(&mut decoded)
        .expect("the brotli body must decode");
    assert_eq!(decoded, PAGE, "brotli must round-trip to the page");
}

#[tokio::test]
async fn a_sized_body_has_exactly_n_filler_bytes_with_or_without_content_length() {
    let len = 100_000;
    let origin = origin::http1()
        .route("/sized", Reply::sized("application/octet-stream", len))
        .route(
            "/chunked",
            Reply::sized("application/octet-stream", len).chunked(),
        )
        .run()
        .await
        .expect("the origin must start");
    let sized = get(&origin, "/sized").await;
    assert_eq!(
        sized.body.len(),
        len,
        "the body must be exactly {len} bytes"
    );
    assert!(
        sized.body.iter().all(|b| *b == FILLER_BYTE),
        "the body must be filler"
    );
    assert_eq!(
        sized.header("content-length"),
        Some("100000"),
        "the length must be declared"
    );
    let chunked = get(&origin, "/chunked").await;
    assert_eq!(
        chunked.body.len(),
        len,
        "the chunked body must be exactly {len} bytes"
    );
    assert_eq!(
        chunked.header("content-length"),
        None,
        "chunked must not declare a length"
    );
    assert_eq!(
        chunked.header("transfer-encoding"),
        Some("chunked"),
        "it must be chunked"
    );
}

#[tokio::test]
async fn a_hanging_route_sends_nothing_before_the_client_times_out() {
    let origin = origin::http1()
        .route("/hang", Reply::hang())
        .run()
        .await
        .expect("the origin must start");
    let attempt = tokio::time::timeout(
        Duration::from_millis(300),
        http::get(origin.addr(), "/hang"),
    );
    assert!(
        attempt.await.is_err(),
        "the client must time out waiting for headers"
    );
    assert_eq!(
        origin.hits("/hang"),
        1,
        "the hanging request must still be counted"
    );
}

#[tokio::test]
async fn a_delay_holds_the_headers_back_for_that_long() {
    let delay = Duration::from_millis(250);
    let origin = origin::http1()
        .route("/slow", Reply::text("late").delay(delay))
        .run()
        .await
        .expect("the origin must start");
    let started = Instant::now();
    let reply = get(&origin, "/slow").await;
    assert_eq!(reply.text(), "late", "the delayed reply must arrive");
    assert!(started.elapsed() >= delay, "the reply must wait {delay:?}");
}

#[tokio::test]
async fn a_stalled_body_sends_its_first_bytes_then_nothing_with_the_connection_open() {
    let reply = Reply::stall_mid_body("text/html", 1_000, "<html><body>first part");
    let origin = origin::http1()
        .route("/stall", reply)
        .run()
        .await
        .expect("the origin must start");
    let (received, eof) = raw_get(&origin, "/stall", Duration::from_millis(400)).await;
    assert!(
        received.contains("content-length: 1000"),
        "the full length must be declared: {received}"
    );
    assert!(
        received.ends_with("<html><body>first part"),
        "the first part must arrive: {received}"
    );
    assert!(!eof, "the connection must stay open while the body stalls");
}

#[tokio::test]
async fn a_short_body_closes_the_connection_before_the_declared_length() {
    let origin = origin::http1()
        .route("/short", Reply::short_body("text/plain", 100, "partial"))
        .run()
        .await
        .expect("the origin must start");
    let (received, eof) = raw_get(&origin, "/short", Duration::from_secs(5)).await;
    assert!(
        received.contains("content-length: 100"),
        "100 bytes must be declared: {received}"
    );
    assert!(
        received.ends_with("\r\n\r\npartial"),
        "only the partial body must arrive: {received}"
    );
    assert!(eof, "the origin must close the connection");
    let client = http::get(origin.addr(), "/short").await;
    assert!(
        client.is_err(),
        "a client must see the body as incomplete: {client:?}"
    );
}

#[tokio::test]
async fn hits_and_requests_are_recorded_per_path_with_their_headers() {
    let origin = origin::http1()
        .route("/a", "a")
        .run()
        .await
        .expect("the origin must start");
    get(&origin, "/a?x=1").await;
    let request = ::http::Request::get("/a?x=2")
        .header("host", "named.test:8080")
        .body(bytes::Bytes::new())
        .expect("the request must build");
    http::send(origin.addr(), request)
        .await
        .expect("the origin must answer");
    let body = serde_json::json!({"url": "https://example.test"});
    http::post_json(origin.addr(), "/b", &body)
        .await
        .expect("the origin must answer");
    assert_eq!(origin.hits("/a"), 2, "the query string must not split hits");
    assert_eq!(origin.hits("/b"), 1, "an unrouted path must be counted");
    assert_eq!(origin.total_hits(), 3, "every request must be counted");
    let requests = origin.requests();
    assert_eq!(
        requests[1].uri, "/a?x=2",
        "the target must be recorded as sent"
    );
    assert_eq!(
        requests[1].header("host"),
        Some("named.test:8080"),
        "Host must be recorded"
    );
    let last = origin.last_request().expect("a request must be recorded");
    assert_eq!(last.method, "POST", "the last request is the POST");
    assert_eq!(
        last.body,
        body.to_string(),
        "the request body must be recorded"
    );
    assert_eq!(
        last.header("host"),
        Some(origin.addr().to_string().as_str()),
        "default Host"
    );
}

#[tokio::test]
async fn set_route_changes_a_reply_while_the_origin_runs() {
    let origin = origin::http1()
        .route("/v", "one")
        .run()
        .await
        .expect("the origin must start");
    let before = get(&origin, "/v").await;
    origin.set_route("/v", Reply::new(503, "text/plain", "two"));
    let after = get(&origin, "/v").await;
    assert_eq!(before.text(), "one", "the first reply must be served");
    assert_eq!(
        (after.status.as_u16(), after.text().as_str()),
        (503, "two"),
        "then the new one"
    );
    assert_eq!(
        origin.url_with_host("named.test", "/v"),
        format!("http://named.test:{}/v", origin.addr().port()),
        "url_with_host must keep the origin's port"
    );
}
