//! The built-in `direct` backend: the gate fetches the page itself.
//!
//! It dials only the addresses E2 checked (no second DNS lookup), follows at most
//! `fetch.maxRedirects` redirects and sends every hop back through the URL gates, enforces
//! connect / header / total timeouts and a body cap, decompresses gzip and brotli, and turns
//! HTML into markdown. Text, markdown and JSON pass through.

use std::io::Read;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode, header};
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

use super::html::{self, Scope};
use super::page::{Admitted, Hop, HopGate, Page, VendorFailure};
use crate::policy::FetchPolicy;

/// The `direct` backend.
#[derive(Clone)]
pub struct DirectFetcher {
    tls: tokio_rustls::TlsConnector,
    limits: FetchPolicy,
}

impl std::fmt::Debug for DirectFetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectFetcher")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// A response head and raw body of one hop.
struct HopResponse {
    status: StatusCode,
    headers: http::HeaderMap,
    body: Bytes,
}

// === impl DirectFetcher ===

impl DirectFetcher {
    /// A fetcher trusting the bundled web PKI roots.
    pub(crate) fn new(limits: FetchPolicy) -> Self {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map(|b| b.with_root_certificates(roots).with_no_client_auth());
        let config = match config {
            Ok(c) => c,
            // The ring provider always supports the default versions; keep a usable value anyway.
            Err(_) => rustls::ClientConfig::builder()
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth(),
        };
        Self {
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
            limits,
        }
    }

    /// Fetch an admitted target, re-gating every redirect hop through `gate`; an HTML page
    /// is converted with `scope` (its main content, or the whole page).
    pub(crate) async fn fetch<G: HopGate>(
        &self,
        first: Admitted,
        gate: &G,
        scope: Scope,
    ) -> Result<Page, VendorFailure> {
        let total = self.limits.total_timeout;
        let deadline = Instant::now() + total;
        match timeout(total, self.follow(first, gate, scope, deadline)).await {
            Ok(result) => result,
            Err(_) => Err(VendorFailure::Timeout {
                phase: "total",
                seconds: total.as_secs(),
            }),
        }
    }

    async fn follow<G: HopGate>(
        &self,
        first: Admitted,
        gate: &G,
        scope: Scope,
        deadline: Instant,
    ) -> Result<Page, VendorFailure> {
        let mut hop = first;
        let mut hops = Vec::new();
        for _ in 0..=self.limits.max_redirects {
            let response = self.fetch_once(&hop).await?;
            let Some(location) = redirect_location(&response) else {
                let mut page = self.to_page(&hop, response, scope, deadline).await?;
                page.hops = hops;
                return Ok(page);
            };
            let next = hop
                .target
                .parsed()
                .and_then(|base| base.join(&location).ok())
                .map(|u| u.to_string())
                .unwrap_or(location);
            hop = gate.admit(&next).await.map_err(VendorFailure::Refused)?;
            hops.push(Hop {
                url: hop.target.normalized.clone(),
                addrs: hop.addrs.clone(),
            });
        }
        Err(VendorFailure::TooManyRedirects(self.limits.max_redirects))
    }

    async fn fetch_once(&self, hop: &Admitted) -> Result<HopResponse, VendorFailure> {
        let url = hop
            .target
            .parsed()
            .ok_or_else(|| VendorFailure::Protocol("the admitted URL does not parse".into()))?;
        let host = hop.target.host.clone().unwrap_or_default();
        let port = url.port_or_known_default().unwrap_or(80);
        let tcp = self.connect(&host, &hop.addrs, port).await?;
        let mut path = url.path().to_string();
        if let Some(q) = url.query() {
            path.push('?');
            path.push_str(q);
        }
        let authority = match url.port() {
            Some(p) => format!("{}:{p}", url.host_str().unwrap_or(&host)),
            None => url.host_str().unwrap_or(&host).to_string(),
        };
        let request = Request::get(path)
            .header(header::HOST, authority)
            .header(header::USER_AGENT, &self.limits.user_agent)
            .header(
                header::ACCEPT,
                "text/html,application/xhtml+xml,text/markdown,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5",
            )
            .header(header::ACCEPT_ENCODING, "gzip, br")
            .header(header::CONNECTION, "close")
            .body(Empty::<Bytes>::new())
            .map_err(|e| VendorFailure::Protocol(e.to_string()))?;
        if url.scheme() == "https" {
            let name = server_name(&host)?;
            let tls = timeout(self.limits.connect_timeout, self.tls.connect(name, tcp))
                .await
                .map_err(|_| self.timeout("connect"))?
                .map_err(|e| VendorFailure::Tls {
                    host: host.clone(),
                    detail: e.to_string(),
                })?;
            self.exchange(tls, request).await
        } else {
            self.exchange(tcp, request).await
        }
    }

    /// Dial the checked addresses in order through the shared pinned connector.
    async fn connect(
        &self,
        host: &str,
        addrs: &[IpAddr],
        port: u16,
    ) -> Result<TcpStream, VendorFailure> {
        crate::base::dialer::connect_pinned(addrs, port, self.limits.connect_timeout)
            .await
            .map_err(|e| VendorFailure::Connect {
                host: host.to_string(),
                detail: e.detail(),
            })
    }

    async fn exchange<S>(
        &self,
        io: S,
        request: Request<Empty<Bytes>>,
    ) -> Result<HopResponse, VendorFailure>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .map_err(|e| VendorFailure::Protocol(e.to_string()))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let response = timeout(self.limits.header_timeout, sender.send_request(request))
            .await
            .map_err(|_| self.timeout("headers"))?
            .map_err(|e| VendorFailure::Protocol(e.to_string()))?;
        let (parts, body) = response.into_parts();
        let limit = self.limits.max_body_bytes;
        let body = Limited::new(body, limit as usize)
            .collect()
            .await
            .map_err(|e| {
                if e.downcast_ref::<http_body_util::LengthLimitError>()
                    .is_some()
                {
                    VendorFailure::BodyTooLarge { limit }
                } else {
                    VendorFailure::Protocol(e.to_string())
                }
            })?
            .to_bytes();
        Ok(HopResponse {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }

    /// The page of the last hop. Decoding and conversion run on the extraction pool, bounded
    /// by the fetch's `deadline`; a converter that panics fails this page only.
    async fn to_page(
        &self,
        hop: &Admitted,
        response: HopResponse,
        scope: Scope,
        deadline: Instant,
    ) -> Result<Page, VendorFailure> {
        let status = response.status.as_u16();
        if status >= 400 {
            return Err(VendorFailure::HttpStatus { status });
        }
        let max_body_bytes = self.limits.max_body_bytes;
        let total = self.limits.total_timeout;
        let page_url = hop.target.normalized.clone();
        let body =
            html::pool::run(move || convert(response, max_body_bytes, scope, &page_url, deadline))
                .await
                .map_err(|e| VendorFailure::Protocol(e.to_string()))?
                .map_err(|failure| match failure {
                    Unconverted::Failed(failure) => failure,
                    Unconverted::Late => VendorFailure::Timeout {
                        phase: "extract",
                        seconds: total.as_secs(),
                    },
                })?;
        Ok(Page {
            url: hop.target.normalized.clone(),
            title: body.title,
            content: body.content,
            status,
            content_type: body.content_type,
            textual: body.textual,
            via: None,
            hops: Vec::new(),
        })
    }

    fn timeout(&self, phase: &'static str) -> VendorFailure {
        let limit: Duration = match phase {
            "connect" => self.limits.connect_timeout,
            "headers" => self.limits.header_timeout,
            _ => self.limits.total_timeout,
        };
        VendorFailure::Timeout {
            phase,
            seconds: limit.as_secs(),
        }
    }
}

/// A decoded, converted response body.
#[derive(Debug)]
pub(crate) struct Converted {
    /// The page's title.
    pub(crate) title: String,
    /// Markdown (HTML), the text itself (text), or the bytes as Latin-1 (binary).
    pub(crate) content: String,
    /// `Content-Type` as served.
    pub(crate) content_type: Option<String>,
    /// Whether the body is text (HTML or text), not a binary payload.
    pub(crate) textual: bool,
}

/// Why a body was not converted.
#[derive(Debug)]
pub(crate) enum Unconverted {
    /// The body cannot be handed to the agent.
    Failed(VendorFailure),
    /// The fetch's deadline passed during the conversion.
    Late,
}

/// Decode and convert one response body (run on the extraction pool).
fn convert(
    response: HopResponse,
    max_body_bytes: u64,
    scope: Scope,
    page_url: &str,
    deadline: Instant,
) -> Result<Converted, Unconverted> {
    let body = decode_content_encoding(&response.headers, response.body, max_body_bytes)
        .map_err(Unconverted::Failed)?;
    let content_type = response
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    convert_body(content_type, &body, scope, Some(page_url), deadline)
}

/// Convert a body as served (after `Content-Encoding`): HTML to markdown with `scope` (relative
/// link and image targets resolved against `page_url` when there is one), text decoded, binary
/// kept as bytes. A body with bytes that yields no text is an error (`empty_content`), never an
/// empty success. `fleetgate-proxy convert` runs the same code.
pub(crate) fn convert_body(
    content_type: Option<String>,
    body: &[u8],
    scope: Scope,
    page_url: Option<&str>,
    deadline: Instant,
) -> Result<Converted, Unconverted> {
    let kind = BodyKind::of(content_type.as_deref(), body);
    let (title, content) = match kind {
        BodyKind::Html => {
            let text = decode_text(content_type.as_deref(), body, true);
            let converted = html::html_to_markdown(&text, scope, page_url, deadline)
                .map_err(|_| Unconverted::Late)?;
            (converted.title, converted.markdown)
        }
        BodyKind::Text => {
            let text = decode_text(content_type.as_deref(), body, false);
            (markdown_title(&text), text)
        }
        // Latin-1 keeps every byte as one char, so E7 can name the binary kind.
        BodyKind::Binary => (String::new(), body.iter().map(|&b| b as char).collect()),
    };
    if content.trim().is_empty() && !body.iter().all(u8::is_ascii_whitespace) {
        return Err(Unconverted::Failed(VendorFailure::EmptyContent {
            bytes: body.len(),
            kind: if kind == BodyKind::Html {
                "html"
            } else {
                "text"
            },
        }));
    }
    Ok(Converted {
        title,
        content,
        content_type,
        textual: kind != BodyKind::Binary,
    })
}

fn server_name(host: &str) -> Result<ServerName<'static>, VendorFailure> {
    ServerName::try_from(host.to_string()).map_err(|e| VendorFailure::Tls {
        host: host.to_string(),
        detail: e.to_string(),
    })
}

fn redirect_location(response: &HopResponse) -> Option<String> {
    if !response.status.is_redirection() || response.status == StatusCode::NOT_MODIFIED {
        return None;
    }
    response
        .headers
        .get(header::LOCATION)?
        .to_str()
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Undo `Content-Encoding` (gzip, deflate, br), capped at `limit` decoded bytes.
fn decode_content_encoding(
    headers: &http::HeaderMap,
    body: Bytes,
    limit: u64,
) -> Result<Bytes, VendorFailure> {
    let encoding = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim().to_ascii_lowercase())
        .unwrap_or_default();
    let reader: Box<dyn Read> = match encoding.as_str() {
        "" | "identity" => return Ok(body),
        "gzip" | "x-gzip" => Box::new(flate2::read::MultiGzDecoder::new(body.as_ref())),
        "deflate" => Box::new(flate2::read::ZlibDecoder::new(body.as_ref())),
        "br" => Box::new(brotli::Decompressor::new(body.as_ref(), 8192)),
        other => {
            return Err(VendorFailure::Protocol(format!(
                "unsupported content encoding '{other}'"
            )));
        }
    };
    let mut out = Vec::new();
    reader
        .take(limit + 1)
        .read_to_end(&mut out)
        .map_err(|e| VendorFailure::Protocol(format!("failed to decompress the body: {e}")))?;
    if out.len() as u64 > limit {
        return Err(VendorFailure::BodyTooLarge { limit });
    }
    Ok(Bytes::from(out))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BodyKind {
    Html,
    Text,
    Binary,
}

impl BodyKind {
    fn of(content_type: Option<&str>, body: &[u8]) -> Self {
        let mime = content_type
            .and_then(|ct| ct.split(';').next())
            .map(|m| m.trim().to_ascii_lowercase())
            .unwrap_or_default();
        match mime.as_str() {
            "text/html" | "application/xhtml+xml" => Self::Html,
            m if m.starts_with("text/")
                || m.ends_with("+json")
                || m.ends_with("+xml")
                || matches!(
                    m,
                    "application/json" | "application/xml" | "application/javascript"
                ) =>
            {
                Self::Text
            }
            "" => sniff(body),
            _ => Self::Binary,
        }
    }
}

/// No `Content-Type`: HTML if it starts (after whitespace) as the WHATWG MIME sniffing
/// algorithm's HTML patterns do, text if it is valid UTF-8 without NULs, else binary.
fn sniff(body: &[u8]) -> BodyKind {
    const HTML_STARTS: &[&[u8]] = &[
        b"<!doctype html",
        b"<html",
        b"<head",
        b"<script",
        b"<iframe",
        b"<h1",
        b"<div",
        b"<font",
        b"<table",
        b"<a",
        b"<style",
        b"<title",
        b"<b",
        b"<body",
        b"<br",
        b"<p",
        b"<!--",
        b"<meta",
    ];
    let start = body
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(body.len());
    let rest = &body[start..];
    let html = HTML_STARTS.iter().any(|pattern| {
        rest.len() > pattern.len()
            && rest[..pattern.len()].eq_ignore_ascii_case(pattern)
            && (pattern == b"<!--"
                || matches!(
                    rest[pattern.len()],
                    b' ' | b'>' | b'\t' | b'\n' | b'\r' | b'\x0c' | b'/'
                ))
    });
    let head = &body[..body.len().min(512)];
    if html
        || String::from_utf8_lossy(head)
            .to_ascii_lowercase()
            .contains("<html")
    {
        BodyKind::Html
    } else if std::str::from_utf8(body).is_ok() && !head.contains(&0) {
        BodyKind::Text
    } else {
        BodyKind::Binary
    }
}

/// Decode a body as a browser would: BOM, HTTP charset, the `<meta>` prescan (HTML only),
/// then UTF-8 or the detector's guess ([`html::encoding`]).
fn decode_text(content_type: Option<&str>, body: &[u8], html: bool) -> String {
    html::encoding::decode(content_type, body, html)
}

/// The title of a markdown/text page: its first `# ` heading, else empty.
fn markdown_title(text: &str) -> String {
    text.lines()
        .take(50)
        .find_map(|l| l.strip_prefix("# "))
        .map(|t| t.trim().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
