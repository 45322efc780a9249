//! What a CONNECT tunnel may carry. Its first bytes are judged once, by the sniffer transparent
//! capture uses: a TLS ClientHello is gated on its server name (secret in host, the blocklist,
//! and the name must be the CONNECT host or resolve to the dialled address), an HTTP/1 request
//! head goes to the relay and is gated request by request, and anything else is refused unless
//! `egress.rawTunnelPorts` lists the port. Real loopback origins (a byte recorder and a rustls
//! TLS origin that records every ClientHello's name), the stub DNS zone, a rustls client.

#![allow(clippy::expect_used, clippy::unwrap_used)]

#[path = "forward_proxy/support.rs"]
#[allow(dead_code)]
mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use support::{Fixture, GateOptions, raw_connect};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

const WAIT: Duration = Duration::from_secs(10);
/// How long a refused tunnel may stay open (the sniff bound in these policies is 1 to 5 s).
const CLOSE_WAIT: Duration = Duration::from_secs(7);
/// A GitHub token shape the secret rules know: it must never appear in a log line.
const TOKEN: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";

/// Every byte a recording origin received, per accepted connection.
#[derive(Clone, Default)]
struct Recorded {
    conns: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Recorded {
    fn bytes(&self) -> Vec<u8> {
        self.conns.lock().unwrap().concat()
    }
}

/// An origin that records every byte, writes `banner` first when given (a server that speaks
/// first), and answers each request head with `200 ok`.
async fn recording_origin(banner: Option<&'static [u8]>) -> (u16, Recorded) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let rec = Recorded::default();
    let shared = rec.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let rec = shared.clone();
            tokio::spawn(async move {
                let index = {
                    let mut conns = rec.conns.lock().unwrap();
                    conns.push(Vec::new());
                    conns.len() - 1
                };
                if let Some(banner) = banner
                    && stream.write_all(banner).await.is_err()
                {
                    return;
                }
                let mut pending = Vec::new();
                let mut chunk = [0u8; 16 * 1024];
                loop {
                    let n = match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    rec.conns.lock().unwrap()[index].extend_from_slice(&chunk[..n]);
                    pending.extend_from_slice(&chunk[..n]);
                    if let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        pending.drain(..end + 4);
                        let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                        if stream.write_all(reply).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (port, rec)
}

async fn fixture(ports: &[u16], egress_extra: &str) -> Fixture {
    Fixture::start(GateOptions {
        ports: ports.to_vec(),
        egress_extra: egress_extra.to_string(),
        ..GateOptions::default()
    })
    .await
    .expect("the fixture must start")
}

/// `CONNECT authority`, which the gates must allow.
async fn tunnel(f: &Fixture, authority: &str) -> TcpStream {
    let (status, head, stream) = raw_connect(f.proxy, authority).await.expect("CONNECT");
    assert_eq!(status, 200, "CONNECT {authority} must open: {head}");
    stream.set_nodelay(true).expect("nodelay");
    stream
}

/// Everything the gate sends until it closes the connection, and whether it closed it within
/// [`CLOSE_WAIT`].
async fn read_until_close(stream: &mut TcpStream) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    let closed = timeout(CLOSE_WAIT, async {
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await
    .is_ok();
    (out, closed)
}

/// Everything the gate sends until it closes the connection, which it must.
async fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    let (out, closed) = read_until_close(stream).await;
    assert!(
        closed,
        "the gate must close the tunnel; it sent {:?}",
        String::from_utf8_lossy(&out)
    );
    out
}

/// The decision lines of refused CONNECTs so far.
fn refused_connects(f: &Fixture) -> Vec<serde_json::Value> {
    f.gate
        .json_logs()
        .into_iter()
        .filter(|l| {
            l["target"] == "egress.decision"
                && l["proxy_type"] == "connect"
                && l["verdict"] == "deny"
        })
        .collect()
}

async fn wait_for_refusals(f: &Fixture, n: usize) -> Vec<serde_json::Value> {
    support::eventually(WAIT, || refused_connects(f).len() >= n)
        .await
        .unwrap_or_else(|_| panic!("{n} refusals must be logged: {:#?}", refused_connects(f)));
    refused_connects(f)
}

fn assert_no_log_repeats(f: &Fixture, secret: &str) {
    let logs = format!("{}\n{}", f.gate.stderr_log(), f.gate.stdout_log());
    assert!(
        !logs.contains(secret) && !logs.contains(&secret.to_ascii_lowercase()),
        "no log line may repeat the refused token"
    );
}

#[tokio::test]
async fn bytes_that_are_neither_tls_nor_an_accepted_request_line_are_refused_and_reach_no_origin() {
    let (port, origin) = recording_origin(None).await;
    let f = fixture(&[port], "").await;
    let request = format!("GET /x?token={TOKEN} HTTP/1.1\r\nHost: blocked.test\r\n\r\n");
    let mut payloads: Vec<(String, Vec<u8>)> = Vec::new();
    // SP, HT, VT, FF, the four C0 separators Python's str.split() takes for whitespace, CR,
    // LF, NUL and DEL, each before an otherwise valid request.
    let leads = [
        b' ', b'\t', 0x0b, 0x0c, 0x1c, 0x1d, 0x1e, 0x1f, b'\r', b'\n', 0x00, 0x7f,
    ];
    for lead in leads {
        let payload = [&[lead][..], request.as_bytes()].concat();
        payloads.push((format!("leading byte {lead:#04x}"), payload));
    }
    payloads.push(("leading CRLF".into(), format!("\r\n{request}").into_bytes()));
    let lines = [
        (
            "a tab after the method",
            format!("GET\t/x?token={TOKEN} HTTP/1.1"),
        ),
        (
            "a VT after the method",
            format!("GET\x0b/x?token={TOKEN} HTTP/1.1"),
        ),
        (
            "a lowercase method",
            format!("get /x?token={TOKEN} HTTP/1.1"),
        ),
        (
            "a mixed-case method",
            format!("Get /x?token={TOKEN} HTTP/1.1"),
        ),
        (
            "an FS before the version",
            format!("GET /x?token={TOKEN}\x1cHTTP/1.1"),
        ),
        (
            "two spaces after the method",
            format!("GET  /x?token={TOKEN} HTTP/1.1"),
        ),
        (
            "a method the relay does not forward",
            format!("FETCH /x?token={TOKEN} HTTP/1.1"),
        ),
        ("no version", format!("GET /x?token={TOKEN}")),
    ];
    for (what, line) in lines {
        let payload = format!("{line}\r\nHost: blocked.test\r\n\r\n").into_bytes();
        payloads.push((what.to_string(), payload));
    }
    for (what, payload) in &payloads {
        let mut s = tunnel(&f, &format!("allowed.test:{port}")).await;
        s.write_all(payload).await.expect("write into the tunnel");
        let (reply, closed) = read_until_close(&mut s).await;
        let text = String::from_utf8_lossy(&reply);
        // A refusal is a clean close, or the gate's own 400 when the bytes start like HTTP.
        assert!(
            reply.is_empty() || text.starts_with("HTTP/1.1 400 "),
            "{what}: only the gate may answer, got {text:?}"
        );
        assert!(closed, "{what}: the gate must close the tunnel");
    }
    assert_eq!(
        String::from_utf8_lossy(&origin.bytes()),
        "",
        "the origin must receive no byte of any payload"
    );
    let refused = wait_for_refusals(&f, payloads.len()).await;
    for line in &refused {
        let reason = line["reason"].as_str().unwrap_or_default();
        assert!(
            ["unrecognised_protocol", "sniff_malformed"].contains(&reason),
            "each payload is refused by the sniffer: {line}"
        );
        assert_eq!(line["gate"], "sniff", "{line}");
    }
    assert_eq!(refused.len(), payloads.len(), "one line per tunnel");
    assert_no_log_repeats(&f, TOKEN);
}

#[tokio::test]
async fn a_request_head_sent_a_few_bytes_at_a_time_is_still_judged_whole() {
    let (port, origin) = recording_origin(None).await;
    let f = fixture(&[port], "").await;
    let mut s = tunnel(&f, &format!("allowed.test:{port}")).await;
    let head = format!("GET /slow HTTP/1.1\r\nHost: allowed.test:{port}\r\n\r\n");
    for piece in head.as_bytes().chunks(3) {
        s.write_all(piece).await.expect("write");
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    let mut reply = [0u8; 256];
    let n = timeout(WAIT, s.read(&mut reply))
        .await
        .expect("an answer")
        .expect("read");
    let text = String::from_utf8_lossy(&reply[..n]);
    assert!(text.starts_with("HTTP/1.1 200 "), "{text}");
    assert!(
        String::from_utf8_lossy(&origin.bytes()).starts_with("GET /slow HTTP/1.1\r\n"),
        "the relay sends the request it parsed"
    );
    // The same request for a blocklisted name, just as slow, is refused by the relay's gates.
    let mut s = tunnel(&f, &format!("allowed.test:{port}")).await;
    let head = format!("GET /slow HTTP/1.1\r\nHost: blocked.test:{port}\r\n\r\n");
    for piece in head.as_bytes().chunks(3) {
        s.write_all(piece).await.expect("write");
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    let text = String::from_utf8_lossy(&read_to_close(&mut s).await).to_string();
    assert!(text.starts_with("HTTP/1.1 403 "), "{text}");
    assert!(
        text.contains("x-fleetgate-error: blocked_by_policy"),
        "{text}"
    );
}

#[tokio::test]
async fn a_stalled_or_oversized_first_message_is_refused_at_its_bounds() {
    let (port, origin) = recording_origin(None).await;
    let f = fixture(&[port], "  timeouts:\n    headerSeconds: 1\n").await;
    let authority = format!("allowed.test:{port}");
    // Stalled inside the request line: refused once the head timeout passes.
    let mut s = tunnel(&f, &authority).await;
    s.write_all(b"GET /x HTT").await.expect("write");
    let text = String::from_utf8_lossy(&read_to_close(&mut s).await).to_string();
    assert!(text.starts_with("HTTP/1.1 408 "), "{text}");
    // Nothing at all: closed at the same bound.
    let mut s = tunnel(&f, &authority).await;
    assert_eq!(
        read_to_close(&mut s).await,
        b"",
        "a silent tunnel is closed"
    );
    // A head that never ends: refused at the sniffer's 32 KiB.
    let mut s = tunnel(&f, &authority).await;
    let mut endless = b"GET / HTTP/1.1\r\n".to_vec();
    while endless.len() < 40 * 1024 {
        endless.extend_from_slice(b"X-Pad: aaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    }
    let _ = s.write_all(&endless).await;
    let text = String::from_utf8_lossy(&read_to_close(&mut s).await).to_string();
    assert!(text.starts_with("HTTP/1.1 400 "), "{text}");
    // A ClientHello announcing 100 000 bytes: refused before they arrive, with a clean close.
    let mut s = tunnel(&f, &authority).await;
    let mut huge = vec![22, 3, 1, 0x40, 0x00, 1];
    huge.extend_from_slice(&100_000u32.to_be_bytes()[1..]);
    s.write_all(&huge).await.expect("write");
    assert_eq!(
        read_to_close(&mut s).await,
        b"",
        "a TLS refusal sends nothing"
    );
    let reasons: Vec<String> = wait_for_refusals(&f, 4)
        .await
        .iter()
        .map(|l| l["reason"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        reasons,
        [
            "sniff_timeout",
            "sniff_timeout",
            "sniff_too_large",
            "sniff_too_large"
        ],
        "each bound has its code"
    );
    assert_eq!(origin.bytes(), b"", "the origin receives nothing");
}

#[tokio::test]
async fn raw_bytes_cross_only_on_ports_the_policy_lists_in_raw_tunnel_ports() {
    let (raw_port, raw_origin) = recording_origin(None).await;
    let (banner_port, banner_origin) = recording_origin(Some(b"SSH-2.0-test\r\n")).await;
    let (closed_port, closed_origin) = recording_origin(Some(b"SSH-2.0-test\r\n")).await;
    let extra = format!(
        "  rawTunnelPorts: [{raw_port}, {banner_port}]\n  timeouts:\n    headerSeconds: 1\n"
    );
    let f = fixture(&[raw_port, banner_port, closed_port], &extra).await;
    // A client-first protocol on a raw port crosses as bytes.
    let mut s = tunnel(&f, &format!("allowed.test:{raw_port}")).await;
    s.write_all(b"\x00\x01 raw protocol").await.expect("write");
    support::eventually(WAIT, || raw_origin.bytes() == b"\x00\x01 raw protocol")
        .await
        .expect("the raw bytes must reach the origin unchanged");
    drop(s);
    // A server-first protocol on a raw port: the banner comes back, the answer goes out.
    let mut s = tunnel(&f, &format!("allowed.test:{banner_port}")).await;
    let mut banner = [0u8; 14];
    timeout(WAIT, s.read_exact(&mut banner))
        .await
        .expect("the banner in time")
        .expect("the banner");
    assert_eq!(&banner, b"SSH-2.0-test\r\n");
    s.write_all(b"SSH-2.0-client\r\n").await.expect("write");
    support::eventually(WAIT, || banner_origin.bytes() == b"SSH-2.0-client\r\n")
        .await
        .expect("the client's answer must reach the origin");
    drop(s);
    // A ClientHello on a raw port is still judged on its server name.
    let mut s = tunnel(&f, &format!("allowed.test:{raw_port}")).await;
    s.write_all(&client_hello("blocked.test"))
        .await
        .expect("write");
    assert_eq!(
        read_to_close(&mut s).await,
        b"",
        "refused with a clean close"
    );
    // On a port the policy does not list, the same server-first protocol is refused: its
    // banner never reaches the client, and the client's bytes never reach it.
    let mut s = tunnel(&f, &format!("allowed.test:{closed_port}")).await;
    assert_eq!(read_to_close(&mut s).await, b"", "nothing crosses");
    let mut s = tunnel(&f, &format!("allowed.test:{closed_port}")).await;
    s.write_all(b"\x00\x01 raw protocol").await.expect("write");
    assert_eq!(read_to_close(&mut s).await, b"", "nothing crosses");
    assert_eq!(
        closed_origin.bytes(),
        b"",
        "the closed port's origin gets nothing"
    );
    let raw_seen = raw_origin.bytes();
    assert_eq!(
        raw_seen, b"\x00\x01 raw protocol",
        "no ClientHello byte crossed"
    );
    let reasons: Vec<String> = wait_for_refusals(&f, 3)
        .await
        .iter()
        .map(|l| l["reason"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        reasons,
        [
            "blocked_by_policy",
            "sniff_timeout",
            "unrecognised_protocol"
        ]
    );
}

/// The first flight rustls sends for `name`, as one record.
fn client_hello(name: &str) -> Vec<u8> {
    let config = rustls_config(None, true);
    let server = ServerName::try_from(name.to_string()).expect("a valid name");
    let mut conn = rustls::ClientConnection::new(config, server).expect("a client connection");
    let mut out = Vec::new();
    conn.write_tls(&mut out).expect("the ClientHello");
    out
}

/// A rustls client trusting `ca` (none: no roots, for ClientHellos that go nowhere).
fn rustls_config(ca: Option<&std::path::Path>, sni: bool) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = ca {
        let cert = CertificateDer::from_pem_file(ca).expect("the test CA");
        roots.add(cert).expect("the CA must load");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("default versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.enable_sni = sni;
    Arc::new(config)
}

/// `GET /` over TLS to `name` on a tunnel; the response, or why the handshake failed.
async fn https_get(
    stream: TcpStream,
    config: Arc<rustls::ClientConfig>,
    name: &str,
) -> anyhow::Result<String> {
    let server = ServerName::try_from(name.to_string())?;
    let connector = tokio_rustls::TlsConnector::from(config);
    let mut tls = timeout(WAIT, connector.connect(server, stream)).await??;
    tls.write_all(b"GET / HTTP/1.1\r\nHost: secure.test\r\nConnection: close\r\n\r\n")
        .await?;
    let mut out = Vec::new();
    let _ = timeout(WAIT, tls.read_to_end(&mut out)).await?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// A TLS client driven by hand: its ClientHello is cut into TLS records of `record` bytes, each
/// record written in two TCP segments with a pause between every write, then the handshake and
/// `GET /` continue normally. Returns the response.
async fn https_get_split(
    mut stream: TcpStream,
    config: Arc<rustls::ClientConfig>,
    name: &str,
    record: usize,
) -> anyhow::Result<String> {
    use std::io::{Read, Write};
    let server = ServerName::try_from(name.to_string())?;
    let mut tls = rustls::ClientConnection::new(config, server)?;
    let mut hello = Vec::new();
    tls.write_tls(&mut hello)?;
    anyhow::ensure!(hello[0] == 22, "the first flight is one handshake record");
    for part in hello[5..].chunks(record) {
        let mut bytes = vec![22, 3, 1];
        bytes.extend_from_slice(&u16::try_from(part.len())?.to_be_bytes());
        bytes.extend_from_slice(part);
        let (a, b) = bytes.split_at(bytes.len() / 2);
        for segment in [a, b] {
            stream.write_all(segment).await?;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    tls.writer()
        .write_all(b"GET / HTTP/1.1\r\nHost: secure.test\r\nConnection: close\r\n\r\n")?;
    let mut response = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        while tls.wants_write() {
            let mut out = Vec::new();
            tls.write_tls(&mut out)?;
            stream.write_all(&out).await?;
        }
        let n = timeout(WAIT, stream.read(&mut buf)).await??;
        if n == 0 {
            anyhow::ensure!(
                !tls.is_handshaking(),
                "the connection closed in the handshake"
            );
            break;
        }
        tls.read_tls(&mut &buf[..n])?;
        tls.process_new_packets()?;
        let mut plain = Vec::new();
        match tls.reader().read_to_end(&mut plain) {
            Ok(_) => {
                response.extend_from_slice(&plain);
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                response.extend_from_slice(&plain);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(String::from_utf8_lossy(&response).into_owned())
}

/// The decision line of the CONNECT whose `sni` field starts with `sni`.
async fn connect_line(f: &Fixture, sni: &str) -> serde_json::Value {
    f.gate
        .wait_for_json_log(
            |l| {
                l["target"] == "egress.decision"
                    && l["proxy_type"] == "connect"
                    && l["sni"].as_str().is_some_and(|v| v.starts_with(sni))
            },
            WAIT,
        )
        .await
        .unwrap_or_else(|e| panic!("a CONNECT line with sni {sni}: {e}"))
}

#[tokio::test]
async fn a_client_hello_is_gated_on_its_server_name_like_a_host() {
    let f = fixture(&[], "").await;
    let tls_port = f.tls.addr.port();
    let config = rustls_config(Some(&f.tls.ca_path), true);
    let cases = [
        ("blocked.test", "blocked_by_policy", "blocked.test"),
        ("secure.test", "sni_mismatch", "secure.test"),
        (
            &*format!("{TOKEN}.allowed.test"),
            "secret_in_host",
            "[redacted:",
        ),
    ];
    for (sni, code, logged) in cases {
        let s = tunnel(&f, &format!("allowed.test:{tls_port}")).await;
        let got = https_get(s, config.clone(), sni).await;
        assert!(got.is_err(), "SNI {sni} must not get through: {got:?}");
        let line = connect_line(&f, logged).await;
        assert_eq!(line["verdict"], "deny", "{line}");
        assert_eq!(line["reason"], code, "{line}");
        assert_eq!(
            line["url"],
            format!("allowed.test:{tls_port}").as_str(),
            "{line}"
        );
    }
    assert_eq!(
        f.tls.server_names(),
        Vec::<Option<String>>::new(),
        "no refused ClientHello reaches the origin"
    );
    assert_eq!(f.origin.total_hits(), 0);
    assert_no_log_repeats(&f, TOKEN);
    // The name the tunnel was opened for goes through, and is logged.
    let s = tunnel(&f, &format!("allowed.test:{tls_port}")).await;
    let body = https_get(s, config, "allowed.test").await.expect("relayed");
    assert!(body.ends_with("hello from the origin"), "{body}");
    let line = connect_line(&f, "allowed.test").await;
    assert_eq!(line["verdict"], "allow", "{line}");
}

#[tokio::test]
async fn a_connect_to_an_ip_literal_is_judged_on_the_server_name_it_carries() {
    let f = fixture(&[], "").await;
    let authority = format!("127.0.0.1:{}", f.tls.addr.port());
    let config = rustls_config(Some(&f.tls.ca_path), true);
    // The blocklisted host's address, with its name: the name is what the blocklist judges.
    let s = tunnel(&f, &authority).await;
    let got = https_get(s, config.clone(), "blocked.test").await;
    assert!(got.is_err(), "a blocklisted SNI must be refused: {got:?}");
    let line = connect_line(&f, "blocked.test").await;
    assert_eq!(line["reason"], "blocked_by_policy", "{line}");
    // A name that resolves to a refused address.
    let s = tunnel(&f, &authority).await;
    assert!(https_get(s, config.clone(), "private.test").await.is_err());
    let line = connect_line(&f, "private.test").await;
    assert_eq!(line["reason"], "ip_private_range", "{line}");
    assert!(
        f.tls.server_names().is_empty(),
        "{:?}",
        f.tls.server_names()
    );
    // A name that resolves to the dialled address is relayed.
    let s = tunnel(&f, &authority).await;
    let body = https_get(s, config, "secure.test").await.expect("relayed");
    assert!(body.ends_with("hello from the origin"), "{body}");
    let line = connect_line(&f, "secure.test").await;
    assert_eq!(line["verdict"], "allow", "{line}");
    assert_eq!(f.tls.server_names(), vec![Some("secure.test".to_string())]);
}

#[tokio::test]
async fn a_client_hello_split_across_records_and_segments_is_read_whole() {
    let f = fixture(&[], "").await;
    let authority = format!("allowed.test:{}", f.tls.addr.port());
    let config = rustls_config(Some(&f.tls.ca_path), true);
    let s = tunnel(&f, &authority).await;
    let got = https_get_split(s, config.clone(), "blocked.test", 48).await;
    assert!(
        got.as_ref().map_or(true, String::is_empty),
        "a split ClientHello naming a blocklisted host must be refused: {got:?}"
    );
    let line = connect_line(&f, "blocked.test").await;
    assert_eq!(line["reason"], "blocked_by_policy", "{line}");
    assert!(
        f.tls.server_names().is_empty(),
        "{:?}",
        f.tls.server_names()
    );
    let s = tunnel(&f, &authority).await;
    let body = https_get_split(s, config, "allowed.test", 48)
        .await
        .expect("a split ClientHello for the tunnel's host is relayed");
    assert!(body.ends_with("hello from the origin"), "{body}");
    assert_eq!(f.tls.server_names(), vec![Some("allowed.test".to_string())]);
}

#[tokio::test]
async fn a_client_hello_without_a_server_name_goes_to_the_connect_target() {
    let f = fixture(&[], "").await;
    let s = tunnel(&f, &format!("secure.test:{}", f.tls.addr.port())).await;
    let config = rustls_config(Some(&f.tls.ca_path), false);
    let body = https_get(s, config, "secure.test").await.expect("relayed");
    assert!(body.ends_with("hello from the origin"), "{body}");
    assert_eq!(
        f.tls.server_names(),
        vec![None],
        "no SNI reached the origin"
    );
    let line = f
        .gate
        .wait_for_json_log(
            |l| l["target"] == "egress.decision" && l["proxy_type"] == "connect",
            WAIT,
        )
        .await
        .expect("the CONNECT line");
    assert_eq!(line["verdict"], "allow", "{line}");
    assert_eq!(
        line.get("sni"),
        Some(&serde_json::Value::Null),
        "the line carries sni, null without one: {line}"
    );
}

/// An origin that reads a whole connection (until the client's end), keeps it, then answers
/// `answer` and closes.
async fn half_close_origin(answer: Vec<u8>) -> (u16, tokio::sync::oneshot::Receiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.expect("accept");
        let mut got = Vec::new();
        stream.read_to_end(&mut got).await.expect("read to the end");
        let _ = tx.send(got);
        stream.write_all(&answer).await.expect("answer");
    });
    (port, rx)
}

/// `fleetgate_listener_bytes_total` of the forward proxy in `direction`.
async fn tunnel_bytes(f: &Fixture, direction: &str) -> f64 {
    f.metric(
        "fleetgate_listener_bytes_total",
        &[("listener", "forward_proxy"), ("direction", direction)],
    )
    .await
    .expect("metrics")
}

/// Bytes that show loss or reordering.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1] ^ seed)
        .collect()
}

#[tokio::test]
async fn a_judged_tls_tunnel_moves_megabytes_both_ways_half_closes_and_counts_every_byte() {
    let answer = pattern(5 << 20, 7);
    let (port, received) = half_close_origin(answer.clone()).await;
    let f = fixture(&[port], "").await;
    let (in0, out0) = (tunnel_bytes(&f, "in").await, tunnel_bytes(&f, "out").await);
    let mut s = tunnel(&f, &format!("allowed.test:{port}")).await;
    // The first message is judged (a ClientHello for the CONNECT host); past it the tunnel is
    // opaque, so megabytes of anything follow.
    let mut sent = client_hello("allowed.test");
    sent.extend(pattern(6 << 20, 3));
    s.write_all(&sent).await.expect("write");
    s.shutdown().await.expect("half-close");
    let mut back = Vec::new();
    timeout(WAIT, s.read_to_end(&mut back))
        .await
        .expect("the answer in time")
        .expect("read the answer");
    let got = timeout(WAIT, received)
        .await
        .expect("in time")
        .expect("origin");
    assert!(
        got == sent,
        "every byte reaches the origin, in order, then the end"
    );
    assert!(
        back == answer,
        "the origin's answer after the client's end reaches the client"
    );
    // Each byte is counted as it leaves the gate, before its end is passed on.
    let bytes_in = tunnel_bytes(&f, "in").await - in0;
    let bytes_out = tunnel_bytes(&f, "out").await - out0;
    assert_eq!(
        (bytes_in, bytes_out),
        (sent.len() as f64, answer.len() as f64),
        "every byte is counted, each way"
    );
}
