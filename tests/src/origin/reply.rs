//! What an origin route answers: status, headers and a body that may be encoded, generated,
//! delayed, stalled, cut short or never sent at all.

use std::convert::Infallible;
use std::io::Write as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, LOCATION};
use hyper::Response;
use hyper::body::{Body, Frame, SizeHint};

/// The byte a generated body ([`Reply::sized`]) is made of.
pub const FILLER_BYTE: u8 = b'a';
/// Generated bodies go out in frames of this size.
const FILLER_CHUNK: usize = 16 * 1024;
static FILLER: [u8; FILLER_CHUNK] = [FILLER_BYTE; FILLER_CHUNK];

/// One route's scripted response. Build it with a constructor, then adjust it with the
/// modifiers (`header`, `status`, `delay`, `chunked`, `gzip`, `brotli`).
#[derive(Clone, Debug)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: ReplyBody,
    encoding: Option<Encoding>,
    delay: Duration,
    chunked: bool,
}

/// How the body bytes are produced and how the body ends.
#[derive(Clone, Debug)]
enum ReplyBody {
    Full(Bytes),
    Filler(usize),
    Hang,
    Stall { sent: Bytes, declared: u64 },
    Short { sent: Bytes, declared: u64 },
}

/// A `Content-Encoding` the origin applies to the body bytes before sending them.
#[derive(Clone, Copy, Debug)]
enum Encoding {
    Gzip,
    Brotli,
}

/// The body type the origin serves: some bytes, then either the end or a stall.
#[derive(Debug)]
pub(super) struct ScriptedBody {
    head: Option<Bytes>,
    filler_left: usize,
    exact_len: Option<u64>,
    stall_at_end: bool,
}

// === impl Reply ===

impl Reply {
    /// A response with `status`, a `Content-Type` and a complete body with `Content-Length`.
    pub fn new(status: u16, content_type: &str, body: impl Into<Bytes>) -> Self {
        Self::with_body(status, ReplyBody::Full(body.into()))
            .header(CONTENT_TYPE.as_str(), content_type)
    }

    /// `200 text/plain; charset=utf-8`.
    pub fn text(body: impl Into<Bytes>) -> Self {
        Self::new(200, "text/plain; charset=utf-8", body)
    }

    /// `200 text/html; charset=utf-8`.
    pub fn html(body: impl Into<Bytes>) -> Self {
        Self::new(200, "text/html; charset=utf-8", body)
    }

    /// `200 application/json` with `value` serialised.
    pub fn json(value: &serde_json::Value) -> Self {
        Self::new(200, "application/json", value.to_string())
    }

    /// A redirect: `status` (301, 302, 303, 307, 308) with `Location: location` and no body.
    pub fn redirect(status: u16, location: &str) -> Self {
        Self::with_body(status, ReplyBody::Full(Bytes::new())).header(LOCATION.as_str(), location)
    }

    /// `200` with a generated body of exactly `len` bytes of [`FILLER_BYTE`], streamed in 16 KiB
    /// frames (so large bodies cost no memory) with `Content-Length: len`.
    pub fn sized(content_type: &str, len: usize) -> Self {
        Self::with_body(200, ReplyBody::Filler(len)).header(CONTENT_TYPE.as_str(), content_type)
    }

    /// Never sends the response headers: the client waits until its own timeout.
    pub fn hang() -> Self {
        Self::with_body(200, ReplyBody::Hang)
    }

    /// `200` declaring `Content-Length: declared_len`, sending `sent`, then stalling forever with
    /// the connection open (a body that stops arriving mid-way).
    pub fn stall_mid_body(content_type: &str, declared_len: u64, sent: impl Into<Bytes>) -> Self {
        let body = ReplyBody::Stall {
            sent: sent.into(),
            declared: declared_len,
        };
        Self::with_body(200, body).header(CONTENT_TYPE.as_str(), content_type)
    }

    /// `200` declaring `Content-Length: declared_len` but sending only `sent` before closing the
    /// connection (a truncated body).
    pub fn short_body(content_type: &str, declared_len: u64, sent: impl Into<Bytes>) -> Self {
        let body = ReplyBody::Short {
            sent: sent.into(),
            declared: declared_len,
        };
        Self::with_body(200, body).header(CONTENT_TYPE.as_str(), content_type)
    }

    /// Adds a response header (repeatable; names are not validated until the reply is served,
    /// where an invalid one turns into a `500`).
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Replaces the status code.
    pub fn status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }

    /// Waits `delay` before sending the response headers.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Sends the body with `Transfer-Encoding: chunked` instead of a `Content-Length`.
    pub fn chunked(mut self) -> Self {
        self.chunked = true;
        self
    }

    /// Gzip-compresses the body bytes and sets `Content-Encoding: gzip`.
    pub fn gzip(mut self) -> Self {
        self.encoding = Some(Encoding::Gzip);
        self
    }

    /// Brotli-compresses the body bytes and sets `Content-Encoding: br`.
    pub fn brotli(mut self) -> Self {
        self.encoding = Some(Encoding::Brotli);
        self
    }

    fn with_body(status: u16, body: ReplyBody) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body,
            encoding: None,
            delay: Duration::ZERO,
            chunked: false,
        }
    }

    /// Produces the response, after the delay; a hanging reply never returns.
    pub(super) async fn render(&self) -> Response<ScriptedBody> {
        if matches!(self.body, ReplyBody::Hang) {
            std::future::pending::<()>().await;
        }
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        self.build().unwrap_or_else(|error| {
            let message = format!("origin reply is invalid: {error}");
            let mut response = Response::new(ScriptedBody::complete(message.into(), true));
            *response.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
            response
        })
    }

    fn build(&self) -> anyhow::Result<Response<ScriptedBody>> {
        let mut builder = Response::builder().status(self.status);
        for (name, value) in &self.headers {
            builder = builder.header(name, value);
        }
        if let Some(encoding) = self.encoding {
            builder = builder.header(CONTENT_ENCODING, encoding.token());
        }
        let (body, declared) = self.body_parts()?;
        if let Some(declared) = declared {
            builder = builder.header(CONTENT_LENGTH, declared);
        }
        Ok(builder.body(body)?)
    }

    /// The body, plus a `Content-Length` to declare when it differs from what is sent.
    fn body_parts(&self) -> std::io::Result<(ScriptedBody, Option<u64>)> {
        let exact = !self.chunked;
        Ok(match &self.body {
            ReplyBody::Hang => (ScriptedBody::complete(Bytes::new(), exact), None),
            ReplyBody::Full(bytes) => (ScriptedBody::complete(self.encode(bytes)?, exact), None),
            ReplyBody::Filler(len) if self.encoding.is_none() => {
                (ScriptedBody::filler(*len, exact), None)
            }
            ReplyBody::Filler(len) => {
                let bytes = Bytes::from(vec![FILLER_BYTE; *len]);
                (ScriptedBody::complete(self.encode(&bytes)?, exact), None)
            }
            ReplyBody::Stall { sent, declared } => (
                ScriptedBody::partial(self.encode(sent)?, true),
                Some(*declared),
            ),
            ReplyBody::Short { sent, declared } => (
                ScriptedBody::partial(self.encode(sent)?, false),
                Some(*declared),
            ),
        })
    }

    fn encode(&self, data: &Bytes) -> std::io::Result<Bytes> {
        match self.encoding {
            None => Ok(data.clone()),
            Some(Encoding::Gzip) => {
                let level = flate2::Compression::default();
                let mut encoder = flate2::write::GzEncoder::new(Vec::new(), level);
                encoder.write_all(data)?;
                Ok(encoder.finish()?.into())
            }
            Some(Encoding::Brotli) => {
                let mut encoder = brotli::CompressorWriter::new(Vec::new(), 4096, 5, 22);
                encoder.write_all(data)?;
                Ok(encoder.into_inner().into())
            }
        }
    }
}

impl From<&str> for Reply {
    /// A plain-text `200` with this body.
    fn from(body: &str) -> Self {
        Self::text(body.to_owned())
    }
}

impl From<String> for Reply {
    /// A plain-text `200` with this body.
    fn from(body: String) -> Self {
        Self::text(body)
    }
}

// === impl Encoding ===

impl Encoding {
    fn token(self) -> &'static str {
        match self {
            Self::Gzip => "gzip",
            Self::Brotli => "br",
        }
    }
}

// === impl ScriptedBody ===

impl ScriptedBody {
    /// All of `bytes`, then the end; with `exact`, hyper sends a `Content-Length`.
    fn complete(bytes: Bytes, exact: bool) -> Self {
        let exact_len = exact.then_some(bytes.len() as u64);
        Self {
            head: Some(bytes),
            filler_left: 0,
            exact_len,
            stall_at_end: false,
        }
    }

    /// `len` generated bytes, then the end.
    fn filler(len: usize, exact: bool) -> Self {
        Self {
            head: None,
            filler_left: len,
            exact_len: exact.then_some(len as u64),
            stall_at_end: false,
        }
    }

    /// Some bytes under a declared length they do not reach, then a stall or the end.
    fn partial(sent: Bytes, stall_at_end: bool) -> Self {
        Self {
            head: Some(sent),
            filler_left: 0,
            exact_len: None,
            stall_at_end,
        }
    }
}

impl Body for ScriptedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if let Some(head) = this.head.take().filter(|head| !head.is_empty()) {
            return Poll::Ready(Some(Ok(Frame::data(head))));
        }
        if this.filler_left > 0 {
            let len = this.filler_left.min(FILLER_CHUNK);
            this.filler_left -= len;
            let chunk = Bytes::from_static(FILLER.get(..len).unwrap_or_default());
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        if this.stall_at_end {
            // Never woken: the body stays open until the connection is dropped.
            return Poll::Pending;
        }
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.head.as_ref().is_none_or(Bytes::is_empty)
            && self.filler_left == 0
            && !self.stall_at_end
    }

    fn size_hint(&self) -> SizeHint {
        self.exact_len
            .map_or_else(SizeHint::new, SizeHint::with_exact)
    }
}
