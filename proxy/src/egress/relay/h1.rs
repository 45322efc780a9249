//! HTTP/1.1 framing for the forward proxy: message heads parsed with `httparse` over the
//! connection's own buffer, the body framing of RFC 9112 §6 decided strictly (ambiguous
//! framing is refused, never guessed), and bodies relayed re-framed.
//!
//! Nothing of the sender's framing crosses: heads are rebuilt field by field by the relay,
//! a length body is copied for exactly its length, and a chunked body is decoded and
//! re-encoded in canonical chunks with its extensions and trailers dropped ([`chunked`]).
//! So the server behind the gate finds message boundaries exactly where the gate found them.

use std::io;
use std::ops::Range;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName};
use prometheus::IntCounter;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{Instant, timeout_at};

pub(crate) mod chunked;

pub use chunked::{ChunkedDecoder, Encode};

/// The largest request or response head read before the message is refused.
pub(crate) const MAX_HEAD: usize = 64 * 1024;
/// The most header fields one head may carry.
pub(crate) const MAX_HEADERS: usize = 128;
/// How much a read asks for at once.
const READ_CHUNK: usize = 16 * 1024;

/// The methods the relay forwards (exactly as written: methods are case-sensitive). Others
/// are refused: servers disagree on extension and lower-case methods (one reads `get` as
/// `GET`, others refuse it), and an agent's web traffic needs none of them. `CONNECT` is the
/// forward proxy's tunnel, handled before the relay.
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) const METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"];

/// Hop-by-hop headers that never cross the proxy, besides those `Connection` lists.
pub(crate) const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Why a message could not be framed or relayed.
#[derive(Debug, thiserror::Error)]
pub enum FramingError {
    /// The head is not valid HTTP/1.x.
    #[error("malformed message head: {0}")]
    Head(httparse::Error),
    /// The head grew past [`MAX_HEAD`].
    #[error("message head larger than {MAX_HEAD} bytes")]
    HeadTooLarge,
    /// The framing headers are ambiguous or unsupported.
    #[error("{0}")]
    Framing(&'static str),
    /// A chunked body broke its encoding.
    #[error("malformed chunked body: {0}")]
    Chunked(&'static str),
    /// The peer closed before the message ended.
    #[error("connection closed before the message ended")]
    Truncated,
    /// Nothing moved for the idle limit.
    #[error("no bytes moved for {} s", .0.as_secs())]
    Idle(Duration),
    /// The exchange outlived its lifetime.
    #[error("the exchange passed its lifetime")]
    Lifetime,
    /// A socket failed.
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// A parsed request or response head; fields are ranges into its own bytes.
#[derive(Debug)]
pub struct Head {
    bytes: Bytes,
    /// Request: method; response: reason phrase.
    first: Range<usize>,
    /// Request: target; response: empty.
    target: Range<usize>,
    /// Response status code (0 for requests).
    pub(crate) status: u16,
    /// The minor version: `HTTP/1.0` or `HTTP/1.1`.
    pub(crate) minor: u8,
    fields: Vec<(Range<usize>, Range<usize>)>,
}

/// How a message's body is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body.
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the sender closes (responses only).
    UntilClose,
}

/// What a `Transfer-Encoding` header amounts to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TransferCoding {
    /// `chunked` alone.
    Chunked,
    /// Other codings beneath a final `chunked` (e.g. `gzip, chunked`).
    LayeredOnChunked,
    /// A final coding other than `chunked`.
    Other,
}

/// The idle and lifetime clock of one relayed exchange.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    /// Longest quiet spell between reads.
    pub(crate) idle: Duration,
    /// When the exchange must be over.
    pub(crate) deadline: Instant,
}

// === impl Head ===

impl Head {
    /// Parse a request head off the front of `buf`; `None` while it is incomplete.
    pub fn parse_request(buf: &mut BytesMut) -> Result<Option<Self>, FramingError> {
        let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut fields);
        let parsed = req.parse(buf);
        let (first, target) = (req.method.unwrap_or_default(), req.path.unwrap_or_default());
        let line = (first.as_bytes(), target.as_bytes(), 0, req.version);
        let located = Self::locate(buf, parsed, line, req.headers)?;
        Ok(located.map(|(n, head)| head.split_off(buf, n)))
    }

    /// Parse a response head off the front of `buf`; `None` while it is incomplete.
    pub(crate) fn parse_response(buf: &mut BytesMut) -> Result<Option<Self>, FramingError> {
        let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut fields);
        let parsed = resp.parse(buf);
        let reason = resp.reason.unwrap_or_default().as_bytes();
        let line = (
            reason,
            &b""[..],
            resp.code.unwrap_or_default(),
            resp.version,
        );
        let located = Self::locate(buf, parsed, line, resp.headers)?;
        Ok(located.map(|(n, head)| head.split_off(buf, n)))
    }

    /// The length of the head `httparse` found and its fields as ranges into `buf` (the bytes
    /// are taken by [`Self::split_off`]). `line` is the start line's (method or reason, target,
    /// status, minor version).
    fn locate(
        buf: &BytesMut,
        parsed: httparse::Result<usize>,
        (first, target, status, minor): (&[u8], &[u8], u16, Option<u8>),
        headers: &[httparse::Header<'_>],
    ) -> Result<Option<(usize, Self)>, FramingError> {
        let n = match parsed {
            Ok(httparse::Status::Complete(n)) if n > MAX_HEAD => {
                return Err(FramingError::HeadTooLarge);
            }
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return incomplete(buf),
            Err(e) => return Err(FramingError::Head(e)),
        };
        let base = buf.as_ptr() as usize;
        // Empty slices (no target in a response) need not point into the buffer.
        let at = |s: &[u8]| match s.as_ptr() as usize {
            _ if s.is_empty() => 0..0,
            p => (p - base)..(p - base + s.len()),
        };
        let (first, target) = (at(first), at(target));
        let fields = headers
            .iter()
            .map(|h| (at(h.name.as_bytes()), at(h.value)))
            .collect();
        let head = Self {
            bytes: Bytes::new(),
            first,
            target,
            status,
            minor: minor.unwrap_or(1),
            fields,
        };
        Ok(Some((n, head)))
    }

    /// Take the head's `n` bytes off the front of `buf`.
    fn split_off(mut self, buf: &mut BytesMut, n: usize) -> Self {
        self.bytes = buf.split_to(n).freeze();
        self
    }

    fn text(&self, range: &Range<usize>) -> &str {
        // httparse checked these bytes are tokens / visible ASCII.
        std::str::from_utf8(&self.bytes[range.clone()]).unwrap_or("")
    }

    /// The whole head as received, start line to the blank line.
    pub(crate) fn raw(&self) -> &[u8] {
        &self.bytes
    }

    /// The request method.
    #[cfg_attr(fuzzing, visibility::make(pub))]
    pub(crate) fn method(&self) -> &str {
        self.text(&self.first)
    }

    /// The request target as sent.
    #[cfg_attr(fuzzing, visibility::make(pub))]
    pub(crate) fn target(&self) -> &str {
        self.text(&self.target)
    }

    /// The response reason phrase.
    pub(crate) fn reason(&self) -> &[u8] {
        &self.bytes[self.first.clone()]
    }

    /// Every header field in order, names as sent (as bytes: httparse checked they are
    /// tokens, and the relay compares and copies them without a UTF-8 check each).
    pub(crate) fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.fields
            .iter()
            .map(|(n, v)| (&self.bytes[n.clone()], &self.bytes[v.clone()]))
    }

    /// Every value of the header `name` (ASCII case-insensitive).
    pub(crate) fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.fields()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v)
    }

    /// The comma-separated tokens of every `Connection` header, lowercased.
    pub(crate) fn connection_tokens(&self) -> Vec<String> {
        self.values("connection")
            .flat_map(|v| v.split(|b| *b == b','))
            .map(|t| String::from_utf8_lossy(t.trim_ascii()).to_ascii_lowercase())
            .filter(|t| !t.is_empty())
            .collect()
    }

    /// Whether the sender asked to keep the connection open after this message.
    pub(crate) fn keep_alive(&self, tokens: &[String]) -> bool {
        if tokens.iter().any(|t| t == "close") {
            return false;
        }
        self.minor >= 1 || tokens.iter().any(|t| t == "keep-alive")
    }

    /// The body framing of a request: ambiguous framing is refused (request smuggling).
    pub fn request_framing(&self) -> Result<Framing, FramingError> {
        match (self.transfer_coding()?, self.content_length()?) {
            (Some(_), Some(_)) => Err(FramingError::Framing(
                "a request may not carry both Transfer-Encoding and Content-Length",
            )),
            (Some(_), None) if self.minor == 0 => Err(FramingError::Framing(
                "HTTP/1.0 requests may not use Transfer-Encoding",
            )),
            (Some(TransferCoding::Chunked), None) => Ok(Framing::Chunked),
            (Some(_), None) => Err(FramingError::Framing(
                "only Transfer-Encoding: chunked is relayed on requests",
            )),
            (None, Some(0)) | (None, None) => Ok(Framing::Empty),
            (None, Some(n)) => Ok(Framing::Length(n)),
        }
    }

    /// The rules a request must meet beyond its framing before it is relayed: a method of
    /// [`METHODS`]; no body on `GET` or `HEAD` (servers disagree on whether one is there, the
    /// root of "0.CL" desyncs); no expectation but `100-continue`.
    #[cfg_attr(fuzzing, visibility::make(pub))]
    pub(crate) fn check_request(&self, framing: Framing) -> Result<(), FramingError> {
        let method = self.method();
        if !METHODS.contains(&method) {
            return Err(FramingError::Framing(
                "the method is not relayed (GET, HEAD, POST, PUT, DELETE, OPTIONS and PATCH are)",
            ));
        }
        if matches!(method, "GET" | "HEAD") && framing != Framing::Empty {
            return Err(FramingError::Framing(
                "a GET or HEAD request with a body is not relayed",
            ));
        }
        let unknown_expectation = self
            .values("expect")
            .any(|v| !v.trim_ascii().eq_ignore_ascii_case(b"100-continue"));
        if unknown_expectation {
            return Err(FramingError::Framing(
                "an expectation other than 100-continue is not relayed",
            ));
        }
        Ok(())
    }

    /// The body framing of a response to a request with `method`.
    pub(crate) fn response_framing(&self, method: &str) -> Result<Framing, FramingError> {
        if method.eq_ignore_ascii_case("HEAD")
            || (100..200).contains(&self.status)
            || self.status == 204
            || self.status == 304
        {
            return Ok(Framing::Empty);
        }
        match self.transfer_coding()? {
            Some(TransferCoding::Chunked) => return Ok(Framing::Chunked),
            // Relayed, the codings beneath would lose their label (`transfer-encoding` is
            // restated as `chunked` alone).
            Some(TransferCoding::LayeredOnChunked) => {
                return Err(FramingError::Framing(
                    "only Transfer-Encoding: chunked is relayed on responses",
                ));
            }
            Some(TransferCoding::Other) => return Ok(Framing::UntilClose),
            None => {}
        }
        Ok(match self.content_length()? {
            Some(0) => Framing::Empty,
            Some(n) => Framing::Length(n),
            None => Framing::UntilClose,
        })
    }

    /// `None` without `Transfer-Encoding`; else what its codings amount to.
    fn transfer_coding(&self) -> Result<Option<TransferCoding>, FramingError> {
        let mut last: Option<&[u8]> = None;
        let mut count = 0;
        for value in self.values("transfer-encoding") {
            for coding in value.split(|b| *b == b',') {
                let coding = coding.trim_ascii();
                if !coding.is_empty() {
                    if last.is_some_and(|c| c.eq_ignore_ascii_case(b"chunked")) {
                        return Err(FramingError::Framing(
                            "chunked must be the final transfer-coding, applied once",
                        ));
                    }
                    last = Some(coding);
                    count += 1;
                }
            }
        }
        Ok(
            last.map(|c| match (c.eq_ignore_ascii_case(b"chunked"), count) {
                (true, 1) => TransferCoding::Chunked,
                (true, _) => TransferCoding::LayeredOnChunked,
                (false, _) => TransferCoding::Other,
            }),
        )
    }

    /// The one `Content-Length`; differing or malformed values are refused.
    fn content_length(&self) -> Result<Option<u64>, FramingError> {
        let mut found = None;
        for value in self.values("content-length") {
            for part in value.split(|b| *b == b',') {
                let part = part.trim_ascii();
                if part.is_empty() || part.len() > 19 || !part.iter().all(u8::is_ascii_digit) {
                    return Err(FramingError::Framing("Content-Length is not a number"));
                }
                let n = part
                    .iter()
                    .fold(0u64, |acc, d| acc * 10 + u64::from(d - b'0'));
                if found.is_some_and(|f| f != n) {
                    return Err(FramingError::Framing("conflicting Content-Length values"));
                }
                found = Some(n);
            }
        }
        Ok(found)
    }
}

fn incomplete<T>(buf: &BytesMut) -> Result<Option<T>, FramingError> {
    if buf.len() > MAX_HEAD {
        Err(FramingError::HeadTooLarge)
    } else {
        Ok(None)
    }
}

/// Whether the header `name` is hop-by-hop here: the fixed set or one `Connection` lists.
pub(crate) fn is_hop_by_hop(name: &[u8], listed: &[String]) -> bool {
    HOP_BY_HOP
        .iter()
        .any(|h| h.as_bytes().eq_ignore_ascii_case(name))
        || listed
            .iter()
            .any(|l| l.as_bytes().eq_ignore_ascii_case(name))
}

/// Append `name: value\r\n`.
pub(crate) fn put_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// A refusal the gate answers itself (any listener's `{"error": {"code", "message"}}`
/// response), its body read whole, as the HTTP/1.1 bytes of [`encode_response`]: the one
/// wire form of the forward proxy's and the capture's refusals.
pub(crate) async fn encode_refusal<B>(response: http::Response<B>, close: bool) -> Vec<u8>
where
    B: hyper::body::Body<Data = Bytes>,
{
    use http_body_util::BodyExt;
    let (parts, body) = response.into_parts();
    let body = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    encode_response(&parts, &body, close)
}

/// A whole response the gate answers itself, as HTTP/1.1 bytes: the status line, the fields
/// of `parts` except framing and `connection`, the `content-length` of `body`, and
/// `connection: close` when `close`, then `body`.
pub(crate) fn encode_response(parts: &http::response::Parts, body: &[u8], close: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + body.len());
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(parts.status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(
        parts
            .status
            .canonical_reason()
            .unwrap_or("Refused")
            .as_bytes(),
    );
    out.extend_from_slice(b"\r\n");
    for (name, value) in &parts.headers {
        if name != http::header::CONTENT_LENGTH
            && name != http::header::TRANSFER_ENCODING
            && name != http::header::CONNECTION
        {
            put_field(&mut out, name.as_str().as_bytes(), value.as_bytes());
        }
    }
    put_framing(&mut out, Framing::Length(body.len() as u64));
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

/// Append the framing field of `framing` (nothing for `Empty` and `UntilClose`).
pub(crate) fn put_framing(out: &mut Vec<u8>, framing: Framing) {
    match framing {
        Framing::Length(n) => {
            out.extend_from_slice(b"content-length: ");
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        Framing::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        Framing::Empty | Framing::UntilClose => {}
    }
}

/// Where a relayed body's bytes are counted.
#[derive(Debug)]
pub(crate) struct BodyMeter<'a> {
    /// The listener byte counter of this direction.
    pub(crate) counter: &'a IntCounter,
    /// Body bytes relayed so far.
    pub(crate) bytes: u64,
}

/// What goes out ahead of and around a relayed body: the head already built, how the sender
/// framed the body, and how a chunked one is re-encoded.
#[derive(Debug)]
pub(crate) struct Outgoing {
    /// The rebuilt head (possibly empty); sent with the first body bytes.
    pub(crate) head: Vec<u8>,
    /// The body framing the sender used.
    pub(crate) framing: Framing,
    /// How a chunked body is written out (canonical chunks, or the data alone).
    pub(crate) encode: Encode,
}

/// Write `out.head` followed by the body framed by `out.framing`, read from `src` after what
/// `buf` already holds, re-framed: a length body is copied for exactly its length, a chunked
/// one decoded and re-encoded. Returns `true` when the body ended at a message boundary
/// (bytes past it stay in `buf`), `false` when it ended with the sender's close.
pub(crate) async fn relay_body<R, W>(
    src: &mut R,
    buf: &mut BytesMut,
    dst: &mut W,
    out: Outgoing,
    clock: Clock,
    meter: &mut BodyMeter<'_>,
) -> Result<bool, FramingError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let Outgoing {
        head: mut pending,
        framing,
        encode,
    } = out;
    let mut left = match framing {
        Framing::Empty => {
            dst.write_all(&pending).await?;
            return Ok(true);
        }
        Framing::Length(n) => n,
        Framing::Chunked | Framing::UntilClose => u64::MAX,
    };
    let mut chunked = (framing == Framing::Chunked).then(ChunkedDecoder::default);
    loop {
        if buf.is_empty() && !pending.is_empty() {
            // Nothing of the body is here yet: the head goes out on its own.
            dst.write_all(&pending).await?;
            pending.clear();
        }
        if !buf.is_empty() {
            let (take, data, done) = match &mut chunked {
                Some(decoder) => {
                    // Decoded data is re-framed into `pending`, after the head if it waits.
                    let d = decoder.decode(buf, &mut pending, encode)?;
                    (d.consumed, d.data, d.done)
                }
                None => {
                    let take = left.min(buf.len() as u64) as usize;
                    left -= take as u64;
                    if pending.is_empty() {
                        dst.write_all(&buf[..take]).await?;
                    } else {
                        pending.extend_from_slice(&buf[..take]);
                    }
                    (
                        take,
                        take,
                        matches!(framing, Framing::Length(_)) && left == 0,
                    )
                }
            };
            if !pending.is_empty() {
                dst.write_all(&pending).await?;
                pending.clear();
            }
            buf.advance(take);
            meter.bytes += data as u64;
            meter.counter.inc_by(data as u64);
            if done {
                return Ok(true);
            }
        }
        buf.reserve(READ_CHUNK);
        let until = clock.deadline.min(Instant::now() + clock.idle);
        let n = match timeout_at(until, src.read_buf(buf)).await {
            Ok(read) => read?,
            Err(_) if until == clock.deadline => return Err(FramingError::Lifetime),
            Err(_) => return Err(FramingError::Idle(clock.idle)),
        };
        if n == 0 {
            return match framing {
                Framing::UntilClose => Ok(false),
                _ => Err(FramingError::Truncated),
            };
        }
    }
}

/// Remove the headers `Connection` names, then the fixed hop-by-hop set (for relays that hold
/// a parsed [`HeaderMap`]).
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let listed: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in listed {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(*name);
    }
}

#[cfg(test)]
mod tests;
