//! Absolute-form HTTP/1.1 relay: the full URL gates (port allow-list, then E1, E2 and E4 in
//! the pipeline's one order), the loop check, a connection to a checked address, hop-by-hop
//! headers removed (RFC 9110 §7.6.1), `Proxy-Authorization` never forwarded, and both
//! messages re-framed: heads rebuilt, chunked bodies decoded and re-encoded with extensions and
//! trailers dropped, so the upstream frames exactly the request the gates decided on.
//!
//! The relay speaks HTTP/1.1 itself (`h1`) rather than through a client and a server stack:
//! one read and one write per direction for a small exchange, heads rewritten in one buffer,
//! length bodies copied straight from the read buffer.

use std::borrow::Cow;
use std::net::{IpAddr, SocketAddr};

use bytes::BytesMut;
use http::Uri;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{Instant, timeout_at};

use super::proxy::{ClientConn, Decision, Flow, ForwardProxy, Upstream};
use super::refusal::ProxyRefusal;
use crate::base::dialer::connect_pinned;
use crate::base::target_url::TargetUrl;
use crate::egress::relay::h1::{self, BodyMeter, Clock, Framing, FramingError, Head};
use crate::egress::relay::own_dial::OwnDial;
use crate::judge::admit::{self, Listener};
use crate::judge::gates::DenyReason;
use crate::judge::respond::ERROR_HEADER;
use crate::judge::telemetry;
use crate::live::runtime::Runtime;
use crate::web::vendors::Admitted;

/// An exchange whose response head arrived: what the client is sent next.
struct Exchange {
    upstream: Upstream,
    response: Head,
    framing: Framing,
    clock: Clock,
    /// Request body bytes relayed (decoded data of a chunked body).
    request_bytes: u64,
}

/// Why sending a request or reading its response head failed.
enum SendError {
    /// A kept connection was closed by the upstream before any response byte: safe to retry
    /// a request without a body on a fresh connection.
    KeptClosed,
    /// Anything else.
    Refused(ProxyRefusal),
}

impl From<ProxyRefusal> for SendError {
    fn from(refusal: ProxyRefusal) -> Self {
        Self::Refused(refusal)
    }
}

/// Relay one absolute-form request (or a captured origin-form one), or refuse it; one
/// decision line either way.
pub(super) async fn handle(proxy: &ForwardProxy, conn: &mut ClientConn, head: &Head) -> Flow {
    let started = Instant::now();
    // One policy from the request's first gate to its last, whatever a reload does meanwhile.
    let rt = proxy.gate.runtime.load_full();
    let target = match conn.original {
        None => Ok(Cow::Borrowed(head.target())),
        Some(original) => {
            let tunnelled = conn.tunnel.is_some();
            capture_target(&rt, head, original, tunnelled).map(Cow::Owned)
        }
    };
    let mut logged = LoggedUrl {
        raw: target.as_deref().unwrap_or(head.target()),
        checked: None,
    };
    let tokens = head.connection_tokens();
    let client_keep = head.keep_alive(&tokens);
    let framing = head
        .request_framing()
        .and_then(|f| head.check_request(f).map(|()| f));
    let exchanged = match (&framing, &target) {
        (Err(e), _) => Err(ProxyRefusal::BadRequest(e.to_string())),
        (Ok(_), Err(refusal)) => Err(refusal.clone()),
        (Ok(framing), Ok(raw)) => {
            let request = Request {
                head,
                raw,
                tokens: &tokens,
                framing: *framing,
                started,
            };
            exchange(proxy, &rt, conn, request, &mut logged.checked).await
        }
    };
    let mut decision = Decision::new("http", &logged, conn, started);
    decision.method = Some(head.method());
    let mut ex = match exchanged {
        Ok(ex) => ex,
        Err(refusal) => {
            decision.refusal = Some(&refusal);
            proxy.decide(&decision);
            // An unread request body would be taken for the next request: close instead.
            // A captured client believes it talks to the origin: close after any refusal.
            let close =
                !client_keep || !matches!(framing, Ok(Framing::Empty)) || conn.original.is_some();
            if refusal.write_to(&mut conn.stream, close).await.is_err() || close {
                return Flow::Close;
            }
            return Flow::KeepAlive;
        }
    };
    decision.upstream = Some(ex.upstream.addr);
    decision.upstream_status = Some(ex.response.status);
    decision.request_bytes = Some(ex.request_bytes);
    proxy.decide(&decision);
    let resp_tokens = ex.response.connection_tokens();
    // An HTTP/1.0 request goes upstream as HTTP/1.0 with `connection: close`: never reused.
    let upstream_keep = ex.response.keep_alive(&resp_tokens)
        && ex.framing != Framing::UntilClose
        && head.minor >= 1;
    // An HTTP/1.0 client cannot read chunks: it gets the decoded data and the close.
    let identity = ex.framing == Framing::Chunked && head.minor == 0;
    let close = !client_keep || ex.framing == Framing::UntilClose || identity || proxy.stopping();
    let (client_framing, encode) = match identity {
        true => (Framing::UntilClose, h1::Encode::Identity),
        false => (ex.framing, h1::Encode::Chunked),
    };
    let out = h1::Outgoing {
        head: inbound_head(&ex.response, &resp_tokens, client_framing, close),
        framing: ex.framing,
        encode,
    };
    let mut meter = BodyMeter {
        counter: &proxy.counters.bytes_out,
        bytes: 0,
    };
    let up = &mut ex.upstream;
    let relayed = h1::relay_body(
        &mut up.stream,
        &mut up.buf,
        &mut conn.stream,
        out,
        ex.clock,
        &mut meter,
    )
    .await;
    match relayed {
        Ok(true) => {
            if upstream_keep && ex.upstream.buf.is_empty() {
                conn.upstream = Some(ex.upstream);
            }
            if close { Flow::Close } else { Flow::KeepAlive }
        }
        Ok(false) => Flow::Close,
        Err(e) => {
            tracing::debug!(error = %e, listener = proxy.listener, url = %logged, "relayed response cut short");
            Flow::Close
        }
    }
}

/// One request as the relay sees it: its head, the URL the gates decide about (the
/// absolute-form target, or a captured request's URL built from its `Host`), its
/// `Connection` tokens and body framing.
struct Request<'a> {
    head: &'a Head,
    raw: &'a str,
    tokens: &'a [String],
    framing: Framing,
    started: Instant,
}

/// Gate, dial (or reuse), send the request and its body, and read the response head.
async fn exchange(
    proxy: &ForwardProxy,
    rt: &Runtime,
    conn: &mut ClientConn,
    request: Request<'_>,
    checked: &mut Option<TargetUrl>,
) -> Result<Exchange, ProxyRefusal> {
    let Request {
        head,
        raw,
        tokens,
        framing,
        started,
    } = request;
    let Admitted { target, addrs } = admit(proxy, rt, raw).await?;
    let port = target.port().unwrap_or(80);
    if target.canonical().is_none() {
        return Err(ProxyRefusal::Protocol(
            "failed to build the upstream URL".into(),
        ));
    }
    // Moved, not cloned: the log line formats it from here.
    let target: &TargetUrl = checked.insert(target);
    admit::no_loop(&proxy.gate.metrics, &proxy.own, &addrs, port).map_err(gate_refusal)?;
    let limits = proxy.limits.effective(&rt.policy);
    let clock = Clock {
        idle: limits.idle,
        deadline: started + limits.lifetime,
    };
    // `check_request` let through no expectation but `100-continue`.
    let expect = framing != Framing::Empty && head.values("expect").next().is_some();
    let request = outbound_head(head, target, tokens, framing)?;
    if expect {
        // The gate answers the client's `Expect` itself, then streams the body.
        conn.stream
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .map_err(|e| ProxyRefusal::Protocol(format!("failed to answer Expect: {e}")))?;
    }
    let mut request = Some(request);
    loop {
        // A kept connection that closed, or holds bytes nobody asked for (an answer to a
        // request the gate never sent), is dropped: responses match requests one to one.
        let kept = conn.upstream.take().filter(|up| !up.looks_closed());
        let (mut upstream, kept) = checkout(kept, &addrs, port, limits.connect).await?;
        let Some(bytes) = request.take() else {
            return Err(ProxyRefusal::Protocol(
                "failed to resend the request".into(),
            ));
        };
        let retry = (kept && framing == Framing::Empty).then(|| bytes.clone());
        let sent = send(proxy, conn, &mut upstream, bytes, framing, clock).await;
        let (read, request_bytes) = match sent {
            Ok(n) => {
                let read = read_response_head(&mut upstream, head.method(), limits.header);
                (read.await, n)
            }
            Err(e) => {
                // A request cut off inside its body is reset, not closed: a server that
                // treats a clean close as the end of the body would run a request the gates
                // answered with a refusal.
                let _ = upstream.stream.set_zero_linger();
                (Err(e), 0)
            }
        };
        // A gate's refusal (or no answer) may be this gate refusing its own upstream
        // connection, sent back by the capture rules: then the request loops. The registry is
        // asked only then, not on every relayed response.
        let refused = match &read {
            Ok(response) => response.values(ERROR_HEADER).next().is_some(),
            Err(_) => true,
        };
        if refused && upstream.own.came_back() {
            return Err(ProxyRefusal::CameBack {
                target: upstream.addr,
            });
        }
        match read {
            Ok(response) => {
                let framing = response
                    .response_framing(head.method())
                    .map_err(|e| ProxyRefusal::Protocol(e.to_string()))?;
                return Ok(Exchange {
                    upstream,
                    response,
                    framing,
                    clock,
                    request_bytes,
                });
            }
            Err(SendError::KeptClosed) if retry.is_some() => request = retry,
            Err(SendError::KeptClosed) => {
                return Err(ProxyRefusal::Protocol(
                    "the upstream closed the connection before responding".into(),
                ));
            }
            Err(SendError::Refused(refusal)) => return Err(refusal),
        }
    }
}

/// Write the request head and its body to the upstream; the body bytes relayed.
async fn send(
    proxy: &ForwardProxy,
    conn: &mut ClientConn,
    upstream: &mut Upstream,
    head: Vec<u8>,
    framing: Framing,
    clock: Clock,
) -> Result<u64, SendError> {
    if framing == Framing::Empty {
        return upstream
            .stream
            .write_all(&head)
            .await
            .map(|()| 0)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset => {
                    SendError::KeptClosed
                }
                _ => ProxyRefusal::Protocol(format!("failed to send the request: {e}")).into(),
            });
    }
    let mut meter = BodyMeter {
        counter: &proxy.counters.bytes_in,
        bytes: 0,
    };
    let out = h1::Outgoing {
        head,
        framing,
        encode: h1::Encode::Chunked,
    };
    h1::relay_body(
        &mut conn.stream,
        &mut conn.buf,
        &mut upstream.stream,
        out,
        clock,
        &mut meter,
    )
    .await
    .map(|_| meter.bytes)
    .map_err(|e| match e {
        FramingError::Io(e) => ProxyRefusal::Protocol(format!("failed to send the request: {e}")),
        other => ProxyRefusal::BadRequest(format!("failed to relay the request body: {other}")),
    })
    .map_err(SendError::Refused)
}

/// Read the upstream's response head, skipping interim (1xx) responses.
async fn read_response_head(
    upstream: &mut Upstream,
    method: &str,
    header_timeout: std::time::Duration,
) -> Result<Head, SendError> {
    let until = Instant::now() + header_timeout;
    let mut seen = false;
    loop {
        let parsed = Head::parse_response(&mut upstream.buf)
            .map_err(|e| ProxyRefusal::Protocol(e.to_string()))?;
        if let Some(head) = parsed {
            seen = true;
            match head.status {
                101 => {
                    return Err(ProxyRefusal::Protocol(format!(
                        "the upstream switched protocols on a {method} request that asked for no upgrade"
                    ))
                    .into());
                }
                100..=199 => continue,
                _ => return Ok(head),
            }
        }
        upstream.buf.reserve(8 * 1024);
        let read = timeout_at(until, upstream.stream.read_buf(&mut upstream.buf))
            .await
            .map_err(|_| ProxyRefusal::HeaderTimeout(header_timeout))?;
        match read {
            Ok(0) if !seen && upstream.buf.is_empty() => return Err(SendError::KeptClosed),
            Ok(0) => {
                return Err(ProxyRefusal::Protocol(
                    "the upstream closed the connection inside the response head".into(),
                )
                .into());
            }
            Ok(_) => {}
            Err(e) if !seen && matches!(e.kind(), std::io::ErrorKind::ConnectionReset) => {
                return Err(SendError::KeptClosed);
            }
            Err(e) => {
                return Err(
                    ProxyRefusal::Protocol(format!("failed to read the response: {e}")).into(),
                );
            }
        }
    }
}

/// The request URL as logs may show it (`scheme://host[:port]/path`: no query, fragment or
/// userinfo), formatted only when a line is written: from the checked URL once the gates
/// parsed it, else from the raw request target.
struct LoggedUrl<'a> {
    raw: &'a str,
    checked: Option<TargetUrl>,
}

impl std::fmt::Display for LoggedUrl<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some(target) = &self.checked else {
            return f.write_str(&telemetry::redact_url(self.raw));
        };
        // Without userinfo the serialisation up to the path is `scheme://host[:port]/path`
        // already (the parser leaves out a default port as `port()` does): one slice.
        if let Some(prefix) = target.scheme_host_path() {
            return f.write_str(prefix);
        }
        let Some(url) = target.parsed() else {
            return f.write_str(&telemetry::redact_url(self.raw));
        };
        write!(f, "{}://{}", url.scheme(), url.host_str().unwrap_or(""))?;
        if let Some(port) = url.port() {
            write!(f, ":{port}")?;
        }
        f.write_str(url.path())
    }
}

/// The URL a captured request stands for: `http://<Host>:<original port><path>`, read from
/// its head by the transparent listener's own sniffer (one `Host`, strict grammar, the same
/// canonical name rules as the connection's first head). A request without a host name (no
/// `Host`, or an IP literal) goes to the original address only when raw-IP egress is on;
/// inside a CONNECT tunnel an IP-literal `Host` is gated as the URL's host, as the forward
/// proxy gates `GET http://<ip>/`.
fn capture_target(
    rt: &Runtime,
    head: &Head,
    original: SocketAddr,
    tunnelled: bool,
) -> Result<String, ProxyRefusal> {
    use crate::egress::capture_refusal::CaptureRefusal;
    use crate::egress::relay::sniff::{self, Progress, Protocol, SniffError, TargetName};
    let sniffed = match sniff::sniff(head.raw()) {
        Ok(Progress::Done(sniffed)) => sniffed,
        // The relay's parser found the end of the head; the sniffer did not (bare LF).
        Ok(Progress::NeedMore) => {
            return Err(ProxyRefusal::Capture(CaptureRefusal::Sniff(
                SniffError::Malformed {
                    protocol: Protocol::Http,
                    detail: "a request head not ended by CRLF CRLF",
                },
            )));
        }
        Err(e) => return Err(ProxyRefusal::Capture(CaptureRefusal::Sniff(e))),
    };
    let host = match (&sniffed.name, sniffed.raw_name) {
        (Some(TargetName::Domain(_)), Some(raw)) => raw,
        // Inside a CONNECT tunnel the client chose to name an address, as in an absolute-form
        // URL: the URL gates decide about it like any other.
        (Some(TargetName::Ip(ip)), _) if tunnelled => match ip.to_canonical() {
            IpAddr::V4(ip) => ip.to_string(),
            IpAddr::V6(ip) => format!("[{ip}]"),
        },
        _ if rt.policy.egress.limits.allow_raw_ip => match original.ip().to_canonical() {
            IpAddr::V4(ip) => ip.to_string(),
            IpAddr::V6(ip) => format!("[{ip}]"),
        },
        _ => return Err(ProxyRefusal::Capture(CaptureRefusal::NoTargetName)),
    };
    let path = sniffed.path.as_deref().unwrap_or("/");
    Ok(format!("http://{host}:{}{path}", original.port()))
}

/// The scheme rules of this listener, the port allow-list, then the pipeline's URL gates.
async fn admit(proxy: &ForwardProxy, rt: &Runtime, raw: &str) -> Result<Admitted, ProxyRefusal> {
    let uri: Uri = raw.parse().map_err(|_| {
        ProxyRefusal::BadRequest(format!(
            "the request target is not a valid URI: {}",
            telemetry::redact_url(raw)
        ))
    })?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => {
            return Err(ProxyRefusal::BadRequest(
                "https:// URLs go through a CONNECT tunnel (set HTTPS_PROXY to this listener); absolute-form https is not relayed".into(),
            ));
        }
        Some(other) => {
            return Err(ProxyRefusal::Gate(DenyReason::UnsupportedScheme {
                scheme: other.to_ascii_lowercase(),
            }));
        }
        None => {
            return Err(ProxyRefusal::BadRequest(
                "this is fleetgate's forward proxy: send absolute-form requests (GET http://host/path) or CONNECT host:port; origin-form requests are not served here".into(),
            ));
        }
    }
    // Before any parse of the URL: the port of the request line; `admit` checks the canonical
    // one again with the other gates.
    let metrics = &proxy.gate.metrics;
    let listener = Listener::ForwardHttp;
    admit::port(rt, metrics, listener, uri.port_u16().unwrap_or(80)).map_err(gate_refusal)?;
    let target = TargetUrl::new(raw);
    let admission = admit::url(rt, metrics, listener, &target)
        .await
        .map_err(gate_refusal)?;
    Ok(Admitted {
        target,
        addrs: admission.addrs,
    })
}

fn gate_refusal(refusal: admit::GateRefusal) -> ProxyRefusal {
    ProxyRefusal::Gate(refusal.reason)
}

/// The kept upstream when it went to one of this request's checked addresses (`true`);
/// otherwise a new pinned connection (`false`).
async fn checkout(
    kept: Option<Upstream>,
    addrs: &[IpAddr],
    port: u16,
    connect_timeout: std::time::Duration,
) -> Result<(Upstream, bool), ProxyRefusal> {
    if let Some(up) = kept
        && up.addr.port() == port
        && addrs.contains(&up.addr.ip())
    {
        return Ok((up, true));
    }
    let stream = connect_pinned(addrs, port, connect_timeout)
        .await
        .map_err(ProxyRefusal::Connect)?;
    let addr = stream
        .peer_addr()
        .map_err(|e| ProxyRefusal::Protocol(format!("failed to read the upstream address: {e}")))?;
    let own = OwnDial::register(&stream);
    Ok((
        Upstream {
            stream,
            addr,
            buf: BytesMut::with_capacity(8 * 1024),
            own,
        },
        false,
    ))
}

/// The request head as the upstream sees it: origin-form target of the checked URL, `Host`
/// from that URL (RFC 9112 §3.2.2), hop-by-hop headers and proxy credentials removed, the
/// body framing restated (`content-length: 0` when the client sent it or the method defines
/// content: some servers refuse a `POST` without a length), `Expect` dropped (the gate answers it), and
/// `connection: close` on an HTTP/1.0 request.
fn outbound_head(
    head: &Head,
    url: &TargetUrl,
    tokens: &[String],
    framing: Framing,
) -> Result<Vec<u8>, ProxyRefusal> {
    let (Some(authority), Some(target)) = (url.authority(), url.request_target()) else {
        return Err(ProxyRefusal::Protocol(
            "failed to build the upstream request target".into(),
        ));
    };
    if authority.bytes().any(|b| b <= b' ' || b == 0x7f)
        || target.bytes().any(|b| b <= b' ' || b == 0x7f)
    {
        return Err(ProxyRefusal::Protocol(
            "failed to build the upstream request target".into(),
        ));
    }
    let mut out = Vec::with_capacity(256 + target.len());
    out.extend_from_slice(head.method().as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    // An HTTP/1.0 client cannot read chunked responses: ask the upstream in its version.
    out.extend_from_slice(if head.minor == 0 {
        b" HTTP/1.0\r\n"
    } else {
        b" HTTP/1.1\r\n"
    });
    h1::put_field(&mut out, b"host", authority.as_bytes());
    let mut had_length = false;
    for (name, value) in head.fields() {
        let length = name.eq_ignore_ascii_case(b"content-length");
        had_length |= length;
        let skip = length
            || name.eq_ignore_ascii_case(b"host")
            || name.eq_ignore_ascii_case(b"expect")
            || h1::is_hop_by_hop(name, tokens);
        if !skip {
            h1::put_field(&mut out, name, value);
        }
    }
    // RFC 9110 §8.6: a length is sent when the method defines content (some servers refuse
    // a POST without one) or the client sent one.
    let defines_content = matches!(head.method(), "POST" | "PUT" | "PATCH");
    match framing {
        Framing::Empty if had_length || defines_content => {
            h1::put_framing(&mut out, Framing::Length(0));
        }
        framing => h1::put_framing(&mut out, framing),
    }
    if head.minor == 0 {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    Ok(out)
}

/// The response head as the client sees it: hop-by-hop headers and any upstream-forged
/// `x-fleetgate-error` removed, the body framing restated, `connection: close` when the
/// client connection ends after this response.
fn inbound_head(resp: &Head, tokens: &[String], framing: Framing, close: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(itoa::Buffer::new().format(resp.status).as_bytes());
    out.push(b' ');
    out.extend_from_slice(resp.reason());
    out.extend_from_slice(b"\r\n");
    let restated = !matches!(framing, Framing::Empty);
    for (name, value) in resp.fields() {
        let skip = (restated && name.eq_ignore_ascii_case(b"content-length"))
            || name.eq_ignore_ascii_case(ERROR_HEADER.as_bytes())
            || h1::is_hop_by_hop(name, tokens);
        if !skip {
            h1::put_field(&mut out, name, value);
        }
    }
    h1::put_framing(&mut out, framing);
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logged_urls_match_the_telemetry_redaction_with_or_without_a_checked_parse() {
        let cases = [
            "http://u:p@Example.COM:8080/a/b?token=x#frag",
            "http://example.com/",
            "http://127.0.0.1:80/x?y",
            "https://[2001:db8::1]:8443/p?q",
            "https://example.com:443/x",
            "http://u@example.com/a",
            "http://:p@example.com/a",
            "http://example.com/a%20b/c#f",
            "http://example.com",
        ];
        for raw in cases {
            let want = telemetry::redact_url(raw);
            let unchecked = LoggedUrl { raw, checked: None };
            let checked = LoggedUrl {
                raw,
                checked: Some(TargetUrl::new(raw)),
            };
            assert_eq!(unchecked.to_string(), want, "{raw} before the gates");
            assert_eq!(checked.to_string(), want, "{raw} after the gates");
        }
    }
}
