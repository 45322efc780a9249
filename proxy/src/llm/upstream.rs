//! Reaching a provider: the upstream URL is checked like every egress target (port
//! allow-list, the gate's own resolver and address table, the loop check), dialled through
//! the shared pinned connector, wrapped in TLS for https, and kept in a small per-target pool
//! of HTTP/1 connections so a turn's calls skip the handshakes.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::time::timeout;

use super::error::LlmError;
use crate::base::dialer::{OwnListeners, connect_pinned};
use crate::base::target_url::TargetUrl;
use crate::judge::admit::{self, Listener};
use crate::judge::metrics::ProxyMetrics;
use crate::live::runtime::Runtime;

/// Idle connections kept per target.
const POOL_PER_TARGET: usize = 32;

/// The request body sent upstream (buffered: it was read to be observed).
pub type UpstreamBody = Full<Bytes>;

/// Kept connections per target (`scheme://host:port`), with the address each one reached.
type Pool = HashMap<String, Vec<(SocketAddr, SendRequest<UpstreamBody>)>>;

/// A connection ready for one request, and where it goes.
#[derive(Debug)]
pub struct Conn {
    /// The HTTP/1 sender.
    pub sender: SendRequest<UpstreamBody>,
    /// The checked address it is connected to.
    pub addr: SocketAddr,
    /// The pool key it returns to.
    pub key: String,
}

/// TLS configuration and the connection pool.
pub struct Upstreams {
    tls: tokio_rustls::TlsConnector,
    pool: Mutex<Pool>,
}

impl std::fmt::Debug for Upstreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstreams").finish_non_exhaustive()
    }
}

// === impl Upstreams ===

impl Upstreams {
    /// Upstreams trusting the bundled web PKI roots.
    pub fn new() -> Self {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
        .unwrap_or_else(|_| {
            rustls::ClientConfig::builder()
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth()
        });
        Self {
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
            pool: Mutex::new(HashMap::new()),
        }
    }

    /// A connection to `url`: a kept one to a still-checked address, else a new one.
    pub async fn connect(
        &self,
        rt: &Runtime,
        metrics: &ProxyMetrics,
        own: &OwnListeners,
        url: &url::Url,
    ) -> Result<Conn, LlmError> {
        let target = TargetUrl::new(url.as_str());
        let port = target.port().unwrap_or(443);
        let addrs = admit::url(rt, metrics, Listener::LlmUpstream, &target)
            .await
            .map_err(|r| LlmError::Refused(r.reason))?
            .addrs;
        admit::no_loop(metrics, own, &addrs, port).map_err(|r| LlmError::Refused(r.reason))?;
        let host = target.host.clone().unwrap_or_default();
        let key = format!("{}://{host}:{port}", url.scheme());
        if let Some((addr, sender)) = self.checkout(&key, &addrs) {
            return Ok(Conn { sender, addr, key });
        }
        let (sender, addr) = self.dial(rt, url.scheme(), &host, &addrs, port).await?;
        Ok(Conn { sender, addr, key })
    }

    /// Return a connection whose request was sent: it becomes ready again once its response
    /// body has been read to the end.
    pub fn checkin(&self, conn: Conn) {
        if let Ok(mut pool) = self.pool.lock() {
            let kept = pool.entry(conn.key).or_default();
            kept.retain(|(_, s)| !s.is_closed());
            if kept.len() < POOL_PER_TARGET {
                kept.push((conn.addr, conn.sender));
            }
        }
    }

    fn checkout(
        &self,
        key: &str,
        addrs: &[IpAddr],
    ) -> Option<(SocketAddr, SendRequest<UpstreamBody>)> {
        let mut pool = self.pool.lock().ok()?;
        let kept = pool.get_mut(key)?;
        kept.retain(|(_, s)| !s.is_closed());
        let i = kept
            .iter()
            .position(|(addr, s)| s.is_ready() && addrs.contains(&addr.ip()))?;
        Some(kept.swap_remove(i))
    }

    async fn dial(
        &self,
        rt: &Runtime,
        scheme: &str,
        host: &str,
        addrs: &[IpAddr],
        port: u16,
    ) -> Result<(SendRequest<UpstreamBody>, SocketAddr), LlmError> {
        let connect_timeout = rt.policy.fetch.connect_timeout;
        let tcp = connect_pinned(addrs, port, connect_timeout)
            .await
            .map_err(LlmError::Connect)?;
        let addr = tcp
            .peer_addr()
            .map_err(|e| LlmError::Protocol(format!("failed to read the peer address: {e}")))?;
        if scheme != "https" {
            return Ok((handshake(tcp).await?, addr));
        }
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| LlmError::Tls(format!("{host}: {e}")))?;
        let tls = timeout(connect_timeout, self.tls.connect(name, tcp))
            .await
            .map_err(|_| LlmError::Tls(format!("{host}: handshake timed out")))?
            .map_err(|e| LlmError::Tls(format!("{host}: {e}")))?;
        Ok((handshake(tls).await?, addr))
    }
}

impl Default for Upstreams {
    fn default() -> Self {
        Self::new()
    }
}

async fn handshake<S>(io: S) -> Result<SendRequest<UpstreamBody>, LlmError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| LlmError::Protocol(e.to_string()))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "llm upstream connection ended with an error");
        }
    });
    Ok(sender)
}
