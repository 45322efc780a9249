//! The forward proxy's own HTTP/1.1 handling, spoken to over raw TCP so every byte is under the
//! test's control: request bodies in both framings, `Expect: 100-continue`, ambiguous framing
//! (request smuggling) refused before any origin sees it, keep-alive with pipelining and `HEAD`,
//! chunked responses, HTTP/1.0 clients and responses cut short by the origin.

#![allow(clippy::expect_used, clippy::unwrap_used)]

#[path = "forward_proxy/support.rs"]
#[allow(dead_code)]
mod support;

use std::time::Duration;

use fleetgate_e2e::origin::Reply;
use support::{Fixture, GateOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

const WAIT: Duration = Duration::from_secs(10);

async fn fixture() -> Fixture {
    Fixture::start(GateOptions::default())
        .await
        .expect("the fixture (DNS, origins, gate) must start")
}

/// One response read off a client connection.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
}

/// Reads responses off one connection, keeping bytes past each message for the next.
struct Reader {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Reader {
    async fn connect(f: &Fixture) -> Self {
        let stream = TcpStream::connect(f.proxy)
            .await
            .expect("connect to the proxy");
        Self {
            stream,
            buf: Vec::new(),
        }
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
    }

    async fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 16 * 1024];
        let n = timeout(WAIT, self.stream.read(&mut chunk))
            .await
            .expect("the proxy must answer in time")
            .expect("read");
        self.buf.extend_from_slice(&chunk[..n]);
        n > 0
    }

    async fn take(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            assert!(self.fill().await, "connection closed mid-message");
        }
        self.buf.drain(..n).collect()
    }

    async fn line(&mut self) -> String {
        loop {
            if let Some(at) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = self.take(at + 2).await;
                return String::from_utf8_lossy(&line[..at]).into_owned();
            }
            assert!(self.fill().await, "connection closed mid-line");
        }
    }

    /// The next response; `bodyless` for answers to `HEAD`.
    async fn answer(&mut self, bodyless: bool) -> Answer {
        let mut head = String::new();
        loop {
            let line = self.line().await;
            if line.is_empty() {
                break;
            }
            head.push_str(&line);
            head.push('\n');
        }
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("a status line");
        let mut answer = Answer {
            status,
            head,
            body: Vec::new(),
        };
        if bodyless || status == 100 || status == 204 || status == 304 {
            return answer;
        }
        let chunked = answer
            .header("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
        if chunked {
            loop {
                let size = self.line().await;
                let size = usize::from_str_radix(size.split(';').next().unwrap().trim(), 16)
                    .expect("a chunk size");
                if size == 0 {
                    while !self.line().await.is_empty() {}
                    break;
                }
                let data = self.take(size).await;
                answer.body.extend_from_slice(&data);
                assert_eq!(self.take(2).await, b"\r\n");
            }
        } else if let Some(len) = answer.header("content-length") {
            let len: usize = len.parse().expect("a length");
            answer.body = self.take(len).await;
        } else {
            while self.fill().await {}
            answer.body = std::mem::take(&mut self.buf);
        }
        answer
    }

    /// Whether the proxy closed the connection (after any bytes still buffered).
    async fn closed(&mut self) -> bool {
        let mut chunk = [0u8; 64];
        matches!(
            timeout(WAIT, self.stream.read(&mut chunk)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }
}

fn target(f: &Fixture, path: &str) -> String {
    f.http_url("allowed.test", path)
}

#[tokio::test]
async fn request_bodies_cross_in_both_framings_and_the_gate_answers_expect() {
    let f = fixture().await;
    let url = target(&f, "/");
    let mut c = Reader::connect(&f).await;

    c.send(format!("POST {url} HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello").as_bytes())
        .await;
    let a = c.answer(false).await;
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(f.origin.last_request().expect("seen").body, "hello");

    c.send(
        format!(
            "POST {url} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
        )
        .as_bytes(),
    )
    .await;
    let a = c.answer(false).await;
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(f.origin.last_request().expect("seen").body, "hello world");

    // The client waits for 100 before sending its body; the gate sends it.
    c.send(
        format!(
            "PUT {url} HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"
        )
        .as_bytes(),
    )
    .await;
    let interim = c.answer(false).await;
    assert_eq!(interim.status, 100, "{interim:?}");
    c.send(b"body").await;
    let a = c.answer(false).await;
    assert_eq!(a.status, 200, "{a:?}");
    let seen = f.origin.last_request().expect("seen");
    assert_eq!(seen.body, "body");
    assert!(
        !seen.headers.contains_key("expect"),
        "the gate answered Expect; it must not reach the origin: {:?}",
        seen.headers
    );
    assert_eq!(f.origin.total_hits(), 3);
}

#[tokio::test]
async fn ambiguous_framing_is_refused_and_never_reaches_the_origin() {
    let f = fixture().await;
    let url = target(&f, "/");
    let smuggles = [
        "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
        "Content-Length: 5\r\nContent-Length: 6\r\n",
        "Transfer-Encoding: gzip\r\n",
        "Transfer-Encoding: chunked, gzip\r\n",
        "Content-Length: 0x5\r\n",
    ];
    for framing in smuggles {
        let mut c = Reader::connect(&f).await;
        c.send(
            format!(
                "POST {url} HTTP/1.1\r\nHost: x\r\n{framing}\r\n0\r\n\r\nGET {url} HTTP/1.1\r\n\r\n"
            )
            .as_bytes(),
        )
        .await;
        let a = c.answer(false).await;
        assert_eq!(a.status, 400, "{framing:?}: {a:?}");
        assert_eq!(
            a.header("x-fleetgate-error").as_deref(),
            Some("invalid_request")
        );
        assert!(
            c.closed().await,
            "{framing:?}: the connection must close, not read the rest as a request"
        );
    }
    let head = format!("GET {url} HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(70 * 1024));
    let mut c = Reader::connect(&f).await;
    c.send(head.as_bytes()).await;
    let a = c.answer(false).await;
    assert_eq!(a.status, 400, "an oversized head: {a:?}");
    assert_eq!(
        f.origin.total_hits(),
        0,
        "no smuggled request may reach the origin"
    );
}

#[tokio::test]
async fn one_client_connection_carries_keep_alive_pipelined_head_and_chunked_exchanges() {
    let f = fixture().await;
    f.origin
        .set_route("/chunked", Reply::text("streamed in chunks").chunked());
    let mut c = Reader::connect(&f).await;
    c.send(format!("GET {} HTTP/1.1\r\nHost: x\r\n\r\n", target(&f, "/")).as_bytes())
        .await;
    let a = c.answer(false).await;
    assert_eq!(a.body, b"hello from the origin");

    c.send(format!("HEAD {} HTTP/1.1\r\nHost: x\r\n\r\n", target(&f, "/big")).as_bytes())
        .await;
    let a = c.answer(true).await;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.header("content-length").as_deref(),
        Some("262144"),
        "HEAD keeps the length of the body it does not carry"
    );

    // Two requests in one write: answered in order.
    c.send(
        format!(
            "GET {} HTTP/1.1\r\nHost: x\r\n\r\nGET {} HTTP/1.1\r\nHost: x\r\n\r\n",
            target(&f, "/chunked"),
            target(&f, "/")
        )
        .as_bytes(),
    )
    .await;
    let first = c.answer(false).await;
    assert_eq!(first.body, b"streamed in chunks", "{first:?}");
    assert_eq!(
        first.header("transfer-encoding").as_deref(),
        Some("chunked")
    );
    let second = c.answer(false).await;
    assert_eq!(second.body, b"hello from the origin");

    c.send(
        format!(
            "GET {} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            target(&f, "/big")
        )
        .as_bytes(),
    )
    .await;
    let last = c.answer(false).await;
    assert_eq!(last.body.len(), 256 * 1024);
    assert_eq!(last.header("connection").as_deref(), Some("close"));
    assert!(c.closed().await, "Connection: close ends the connection");
    assert_eq!(f.origin.total_hits(), 5);
}

#[tokio::test]
async fn an_http10_client_gets_its_answer_and_the_connection_closes() {
    let f = fixture().await;
    f.origin
        .set_route("/chunked", Reply::text("no chunks for 1.0").chunked());
    let mut c = Reader::connect(&f).await;
    c.send(format!("GET {} HTTP/1.0\r\n\r\n", target(&f, "/chunked")).as_bytes())
        .await;
    let a = c.answer(false).await;
    assert_eq!(a.status, 200, "{a:?}");
    assert_ne!(
        a.header("transfer-encoding").as_deref(),
        Some("chunked"),
        "an HTTP/1.0 client cannot read chunks: {a:?}"
    );
    assert_eq!(a.body, b"no chunks for 1.0");
    assert!(c.closed().await);
}

#[tokio::test]
async fn a_response_cut_short_by_the_origin_closes_the_client_connection() {
    let f = fixture().await;
    f.origin
        .set_route("/short", Reply::short_body("text/plain", 100, "abc"));
    let mut c = Reader::connect(&f).await;
    c.send(format!("GET {} HTTP/1.1\r\nHost: x\r\n\r\n", target(&f, "/short")).as_bytes())
        .await;
    let mut head = String::new();
    loop {
        let line = c.line().await;
        if line.is_empty() {
            break;
        }
        head.push_str(&line);
        head.push('\n');
    }
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("content-length: 100"),
        "{head}"
    );
    while c.fill().await {}
    assert_eq!(
        c.buf, b"abc",
        "the client gets what arrived, then the close tells it the body is short"
    );
}

/// A listener for [`serve_closing`] and its accept counter.
async fn closing_origin() -> (
    tokio::net::TcpListener,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the origin");
    let accepts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    (listener, accepts)
}

/// A hand-driven origin: the first connection answers `first_conn` requests then closes (like
/// an origin whose keep-alive ran out); later connections answer every request.
async fn serve_closing(
    listener: tokio::net::TcpListener,
    accepts: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    first_conn: usize,
) {
    use std::sync::atomic::Ordering;
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            return;
        };
        let nth = accepts.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(async move {
            let mut buf = Vec::new();
            let mut answered = 0;
            loop {
                while let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    buf.drain(..at + 4);
                    answered += 1;
                    let body = format!("conn {nth} answer {answered}");
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                    if nth == 0 && answered == first_conn {
                        return; // closes the connection
                    }
                }
                let mut chunk = [0u8; 4096];
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
        });
    }
}

#[tokio::test]
async fn the_upstream_is_kept_between_requests_and_a_closed_one_is_redialled() {
    let (listener, accepts) = closing_origin().await;
    let port = listener.local_addr().expect("addr").port();
    let f = Fixture::start(GateOptions {
        ports: vec![port],
        ..GateOptions::default()
    })
    .await
    .expect("the fixture must start");
    let origin = tokio::spawn(serve_closing(listener, accepts.clone(), 2));
    let url = format!("http://allowed.test:{port}/");
    let mut c = Reader::connect(&f).await;
    for want in ["conn 0 answer 1", "conn 0 answer 2"] {
        c.send(format!("GET {url} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .await;
        let a = c.answer(false).await;
        assert_eq!(String::from_utf8_lossy(&a.body), want, "{a:?}");
    }
    assert_eq!(
        accepts.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "two requests of one client connection share one upstream connection"
    );
    // The origin closed its side after the second answer; the next request must not fail.
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.send(format!("GET {url} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await;
    let a = c.answer(false).await;
    assert_eq!(a.status, 200, "a closed kept upstream is redialled: {a:?}");
    assert_eq!(String::from_utf8_lossy(&a.body), "conn 1 answer 1");
    assert_eq!(accepts.load(std::sync::atomic::Ordering::SeqCst), 2);
    origin.abort();
}

/// What a [`recording_origin`] saw: every connection's bytes, and how many requests it answered.
#[derive(Clone, Default)]
struct Recorded {
    conns: std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    answered: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Recorded {
    fn all(&self) -> String {
        let conns = self.conns.lock().unwrap();
        conns
            .iter()
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect::<Vec<_>>()
            .join("\n--- next connection ---\n")
    }

    fn answered(&self) -> usize {
        self.answered.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// An origin that records every byte it receives, answers each complete request (a head, then
/// for a chunked request the bytes up to `0\r\n\r\n`) with `200 ok`, and, when `unasked` is
/// given, writes it 50 ms after each answer: bytes no request asked for.
async fn recording_origin(unasked: Option<&'static [u8]>) -> (u16, Recorded) {
    use std::sync::atomic::Ordering;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the origin");
    let port = listener.local_addr().expect("addr").port();
    let rec = Recorded::default();
    let shared = rec.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let rec = shared.clone();
            let index = {
                let mut conns = rec.conns.lock().unwrap();
                conns.push(Vec::new());
                conns.len() - 1
            };
            tokio::spawn(async move {
                let mut pending = Vec::new();
                let mut chunk = [0u8; 16 * 1024];
                loop {
                    let n = match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    rec.conns.lock().unwrap()[index].extend_from_slice(&chunk[..n]);
                    pending.extend_from_slice(&chunk[..n]);
                    let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    let head = String::from_utf8_lossy(&pending[..end]).to_ascii_lowercase();
                    if head.contains("transfer-encoding: chunked")
                        && !pending.ends_with(b"0\r\n\r\n")
                    {
                        continue;
                    }
                    pending.clear();
                    rec.answered.fetch_add(1, Ordering::SeqCst);
                    let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                    if stream.write_all(reply).await.is_err() {
                        return;
                    }
                    if let Some(extra) = unasked {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        let _ = stream.write_all(extra).await;
                    }
                }
            });
        }
    });
    (port, rec)
}

async fn fixture_with_port(port: u16) -> Fixture {
    Fixture::start(GateOptions {
        ports: vec![port],
        ..GateOptions::default()
    })
    .await
    .expect("the fixture must start")
}

#[tokio::test]
async fn a_trailer_section_never_carries_a_request_or_a_field_to_the_origin() {
    let (port, rec) = recording_origin(None).await;
    let f = fixture_with_port(port).await;
    let url = format!("http://allowed.test:{port}/");
    // A request line as the trailer section: refused by the trailer grammar.
    let mut c = Reader::connect(&f).await;
    c.send(format!("POST {url} HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nGET /x?token=abc HTTP/1.1\r\nHost: blocked.test\r\n\r\n").as_bytes()).await;
    let a = c.answer(false).await;
    assert_eq!(a.status, 400, "{a:?}");
    assert_eq!(
        a.header("x-fleetgate-error").as_deref(),
        Some("invalid_request")
    );
    assert!(c.closed().await, "a broken body ends the connection");

    // Well-formed trailers, one of them the request again behind `X:`, others naming Host,
    // Proxy-Authorization and a hop-by-hop field: parsed and dropped.
    let mut c = Reader::connect(&f).await;
    c.send(format!("POST {url} HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=\"q\"\r\nabc\r\n0\r\nX:GET /x?token=abc HTTP/1.1\r\nHost: blocked.test\r\nProxy-Authorization: Basic dTpw\r\nConnection: close\r\n\r\nGET {url}again HTTP/1.1\r\nHost: allowed.test\r\n\r\n").as_bytes()).await;
    let first = c.answer(false).await;
    assert_eq!(first.status, 200, "{first:?}");
    let second = c.answer(false).await;
    assert_eq!(second.status, 200, "{second:?}");
    let seen = rec.all();
    for leaked in [
        "token=abc",
        "blocked.test",
        "Proxy-Authorization",
        "ext=",
        "X:GET",
    ] {
        assert!(
            !seen.contains(leaked),
            "{leaked:?} must not reach the origin; it saw:\n{seen}"
        );
    }
    assert!(
        seen.contains("\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET /again HTTP/1.1\r\n"),
        "the body is re-framed canonically and the next request follows it: {seen}"
    );
    assert_eq!(
        rec.answered(),
        2,
        "exactly the two requests the gate allowed"
    );
    let allowed = || {
        f.gate
            .json_logs()
            .into_iter()
            .filter(|l| l["message"] == "egress.decision" && l["verdict"] == "allow")
            .count()
    };
    support::eventually(WAIT, || allowed() >= 2)
        .await
        .expect("the decision lines must be written");
    assert_eq!(allowed(), 2, "one allowed decision per forwarded request");
}

#[tokio::test]
async fn chunk_size_lines_outside_the_grammar_are_refused_before_a_request_completes() {
    let (port, rec) = recording_origin(None).await;
    let f = fixture_with_port(port).await;
    let url = format!("http://allowed.test:{port}/");
    for body in [
        "1 0\r\nx\r\n0\r\n\r\n",
        "1 ; a = b\r\nx\r\n0\r\n\r\n",
        "2 erfrferferf\r\nxx\r\n0\r\n\r\n",
        "0x1\r\nx\r\n0\r\n\r\n",
        "1\nx\r\n0\r\n\r\n",
    ] {
        let mut c = Reader::connect(&f).await;
        c.send(
            format!("POST {url} HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n{body}")
                .as_bytes(),
        )
        .await;
        let a = c.answer(false).await;
        assert_eq!(a.status, 400, "{body:?}: {a:?}");
        assert_eq!(
            a.header("x-fleetgate-error").as_deref(),
            Some("invalid_request"),
            "{body:?}"
        );
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        rec.answered(),
        0,
        "the origin never received a complete request: {}",
        rec.all()
    );
}

#[tokio::test]
async fn a_kept_upstream_holding_bytes_nobody_asked_for_is_never_reused() {
    let unasked = b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled";
    let (port, rec) = recording_origin(Some(unasked)).await;
    let f = fixture_with_port(port).await;
    let url = format!("http://allowed.test:{port}/");
    let mut c = Reader::connect(&f).await;
    for round in 0..3 {
        c.send(format!("GET {url} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes())
            .await;
        let a = c.answer(false).await;
        assert_eq!(a.body, b"ok", "round {round}: {a:?}");
        // Let the unasked answer arrive on the kept connection.
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert_eq!(
        rec.conns.lock().unwrap().len(),
        3,
        "each kept upstream held unasked bytes, so each request dialled anew"
    );
}

#[tokio::test]
async fn every_unreadable_request_head_is_logged_and_counted_as_a_refusal() {
    let f = fixture().await;
    let before = f
        .metric(
            "fleetgate_listener_refusals_total",
            &[("listener", "forward_proxy"), ("code", "invalid_request")],
        )
        .await
        .expect("metrics");
    let heads: [&[u8]; 4] = [
        b"GET http://a/\x01 HTTP/1.1\r\n\r\n",
        b"GET http://a/ HTTP/1.1\r\nBad Name: x\r\n\r\n",
        b"GET http://a/ HTTP/9.9\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
    ];
    for head in heads {
        let mut c = Reader::connect(&f).await;
        c.send(head).await;
        let a = c.answer(false).await;
        assert_eq!(a.status, 400, "{head:?}: {a:?}");
    }
    let after = f
        .metric(
            "fleetgate_listener_refusals_total",
            &[("listener", "forward_proxy"), ("code", "invalid_request")],
        )
        .await
        .expect("metrics");
    assert_eq!(after - before, heads.len() as f64, "one count per refusal");
    support::eventually(WAIT, || {
        f.gate
            .json_logs()
            .iter()
            .filter(|l| l["message"] == "egress.decision" && l["reason"] == "invalid_request")
            .count()
            == heads.len()
    })
    .await
    .expect("one decision line per refused head");
}

#[tokio::test]
async fn plain_http_inside_a_connect_tunnel_is_gated_request_by_request() {
    let (port, rec) = recording_origin(None).await;
    let f = fixture_with_port(port).await;
    let mut c = Reader::connect(&f).await;
    c.send(
        format!("CONNECT allowed.test:{port} HTTP/1.1\r\nHost: allowed.test:{port}\r\n\r\n")
            .as_bytes(),
    )
    .await;
    let established = c.line().await;
    assert!(established.starts_with("HTTP/1.1 200"), "{established}");
    assert_eq!(c.line().await, "");
    // An allowed request inside the tunnel is relayed and logged on its own.
    c.send(format!("GET /inside HTTP/1.1\r\nHost: allowed.test:{port}\r\n\r\n").as_bytes())
        .await;
    let a = c.answer(false).await;
    assert_eq!(a.body, b"ok", "{a:?}");
    // A request for a blocklisted name sharing the address is refused, not tunnelled.
    c.send(format!("GET /admin HTTP/1.1\r\nHost: blocked.test:{port}\r\n\r\n").as_bytes())
        .await;
    let a = c.answer(false).await;
    assert_eq!(a.status, 403, "{a:?}");
    assert_eq!(
        a.header("x-fleetgate-error").as_deref(),
        Some("blocked_by_policy")
    );
    let seen = rec.all();
    assert!(seen.contains("GET /inside HTTP/1.1"), "{seen}");
    assert!(
        !seen.contains("blocked.test"),
        "the blocked request must not reach the origin: {seen}"
    );
}
