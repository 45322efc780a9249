//! A loopback HTTPS origin for the bulk-tunnel benchmark (`tests/bench/tunnel_bulk.sh`):
//! keep-alive HTTP/1.1 over TLS (rustls, ring) answering `GET /bytes/<n>` with `200` and a body
//! of exactly `n` bytes, `Content-Length` framed; anything else gets a `404` and the connection
//! closes.
//!
//! The certificate is made at start: a fresh CA (written as PEM to the path given as the first
//! argument, for the client to trust) signs a leaf for `origin.test` and `localhost`. Listens on
//! `127.0.0.1:0` (or the address given as the second argument) and prints
//! `{"listening": "ADDR"}` once bound.
//!
//! Bodies are written from one 1 MiB buffer made at start, so serving costs the origin its TLS
//! encryption and the socket writes, nothing per byte besides.

#![allow(clippy::print_stdout)]

use std::sync::Arc;

use anyhow::Context as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

/// The buffer every body is written from, in slices of at most this many bytes.
const CHUNK: usize = 1 << 20;
/// The names on the leaf certificate.
const NAMES: [&str; 2] = ["origin.test", "localhost"];

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let ca_out = args
        .next()
        .context("usage: tunnel_bulk_origin CA_PEM_OUT [BIND_ADDR]")?;
    let bind = args.next().unwrap_or_else(|| "127.0.0.1:0".into());
    let (ca_pem, chain, key) = pki()?;
    std::fs::write(&ca_out, ca_pem).with_context(|| format!("writing {ca_out}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    let acceptor = TlsAcceptor::from(Arc::new(config));
    // One pattern for every body: a byte that is not zero, so no layer can take a shortcut.
    let body: Arc<[u8]> = (0..CHUNK).map(|i| b'a' + (i % 26) as u8).collect();
    let listener = TcpListener::bind(&bind).await?;
    println!("{{\"listening\": \"{}\"}}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let (acceptor, body) = (acceptor.clone(), body.clone());
        tokio::spawn(async move {
            // A client closing its connection at the end of a run is not worth a line.
            if let Err(e) = serve(acceptor, stream, &body).await
                && !matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::BrokenPipe
                        | std::io::ErrorKind::UnexpectedEof
                )
            {
                eprintln!("tunnel_bulk_origin: {e}");
            }
        });
    }
}

/// The TLS handshake, then requests until the client closes.
async fn serve(acceptor: TlsAcceptor, stream: TcpStream, chunk: &[u8]) -> std::io::Result<()> {
    let mut tls = acceptor.accept(stream).await?;
    let mut buf = vec![0u8; 8192];
    let mut have = 0;
    loop {
        // Read one request head (the client sends no body and does not pipeline).
        let end = loop {
            if let Some(end) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
            if have == buf.len() {
                return Err(std::io::Error::other("request head too large"));
            }
            let n = tls.read(&mut buf[have..]).await?;
            if n == 0 {
                return Ok(());
            }
            have += n;
        };
        let size = std::str::from_utf8(&buf[..end])
            .ok()
            .and_then(|head| head.strip_prefix("GET /bytes/"))
            .and_then(|rest| rest.split_once(' '))
            .and_then(|(n, _)| n.parse::<u64>().ok());
        buf.copy_within(end..have, 0);
        have -= end;
        let Some(size) = size else {
            tls.write_all(
                b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            )
            .await?;
            tls.shutdown().await?;
            return Ok(());
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: {size}\r\n\r\n"
        );
        tls.write_all(head.as_bytes()).await?;
        let mut left = size;
        while left > 0 {
            let n = usize::try_from(left).map_or(chunk.len(), |left| left.min(chunk.len()));
            tls.write_all(&chunk[..n]).await?;
            left -= n as u64;
        }
        tls.flush().await?;
    }
}

type Pki = (
    String,
    Vec<rustls::pki_types::CertificateDer<'static>>,
    rustls::pki_types::PrivateKeyDer<'static>,
);

/// A fresh CA (its PEM) and a leaf for [`NAMES`] it signed, with the leaf's key.
fn pki() -> anyhow::Result<Pki> {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "fleetgate bench CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate()?)?;
    let names: Vec<String> = NAMES.iter().map(|n| (*n).to_string()).collect();
    let leaf_key = rcgen::KeyPair::generate()?;
    let leaf = rcgen::CertificateParams::new(names)?.signed_by(&leaf_key, &ca)?;
    let key = rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der())
        .map_err(|e| anyhow::anyhow!("the leaf key: {e}"))?;
    Ok((ca.pem(), vec![leaf.der().clone()], key))
}
