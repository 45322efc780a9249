//! Bulk-tunnel benchmark client (`tests/bench/tunnel_bulk.sh`): TLS inside CONNECT tunnels,
//! with pages of any size.
//!
//! `tunnel_bulk_client <target> <conns> <seconds> <size> <ca.pem> <sni> [<proxy>]`
//!
//! Opens `conns` connections, each a CONNECT tunnel to `target` (`host:port`) through `proxy`
//! (`200` expected), or, without `proxy`, a TCP connection straight to `target` (an address:
//! HAProxy in TCP mode and the zero-logic relay do not CONNECT). Each does the TLS handshake
//! (rustls; server name `sni`; only the CA in `ca.pem` trusted) and one warm-up request, and only
//! then does the clock start: every connection sends `GET /bytes/<size>` keep-alive requests
//! back to back for `seconds`, reading whole bodies. A request in flight when the time is up is
//! read to its end (the drain), so every connection closes between responses and the bytes a
//! proxy moved are the bytes counted here.
//!
//! Every response must be `200` with `Content-Length: <size>` and exactly that many body bytes
//! before the next response; anything else (and a connection that cannot be opened) counts as
//! an error and ends that connection. TLS authenticates every record, so a body that arrives
//! whole arrived intact.
//!
//! Prints one JSON line: `requests` (finished within the window), `rps`, `mbps` (body bytes
//! received within the window, partial bodies included, in 10^6 bytes per second), `p50_ms`,
//! `p99_ms` (every finished request, drain included), `errors`, `window_bytes`, and
//! `total_bytes` (every body byte, warm-up and drain included: what the proxy relayed).

#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// The warm-up request's body is the measured size, at most this.
const WARM_UP_MAX: u64 = 1_000_000;
/// How long opening one connection (TCP, CONNECT, TLS, warm-up) may take.
const OPEN_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Clone)]
struct Params {
    target: String,
    proxy: Option<String>,
    sni: ServerName<'static>,
    tls: TlsConnector,
    size: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !(6..=7).contains(&args.len()) {
        bail!(
            "usage: tunnel_bulk_client <target> <conns> <seconds> <size> <ca.pem> <sni> [<proxy>]"
        );
    }
    let conns: usize = args[1].parse().context("conns")?;
    let secs: f64 = args[2].parse().context("seconds")?;
    let size: u64 = args[3].parse().context("size")?;
    let ca = CertificateDer::from_pem_file(&args[4]).context("the CA's PEM")?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let params = Params {
        target: args[0].clone(),
        proxy: args.get(6).cloned(),
        sni: ServerName::try_from(args[5].clone())?,
        tls: TlsConnector::from(Arc::new(config)),
        size,
    };

    // Open, handshake and warm up every connection before the clock starts.
    let opening: Vec<_> = (0..conns)
        .map(|_| {
            let params = params.clone();
            tokio::spawn(async move {
                tokio::time::timeout(OPEN_TIMEOUT, open_warm(&params))
                    .await
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("timed out opening")))
            })
        })
        .collect();
    let (mut opened, mut errors, mut total_bytes) = (Vec::new(), 0usize, 0u64);
    for task in opening {
        match task.await.context("an opening task failed")? {
            Ok((tls, warm)) => {
                opened.push(tls);
                total_bytes += warm;
            }
            Err(e) => {
                if errors == 0 {
                    eprintln!("tunnel_bulk_client: {e:#}");
                }
                errors += 1;
            }
        }
    }

    let start = Instant::now();
    let stop = start + Duration::from_secs_f64(secs);
    let tasks: Vec<_> = opened
        .into_iter()
        .map(|tls| {
            let params = params.clone();
            tokio::spawn(async move { load(tls, &params, stop).await })
        })
        .collect();
    let (mut lat, mut requests, mut window_bytes) = (Vec::new(), 0u64, 0u64);
    for task in tasks {
        let done = task.await.context("a load task failed")?;
        lat.extend(done.lat_us);
        requests += done.requests;
        window_bytes += done.window_bytes;
        total_bytes += done.total_bytes;
        if let Some(e) = done.error {
            if errors == 0 {
                eprintln!("tunnel_bulk_client: {e:#}");
            }
            errors += 1;
        }
    }
    lat.sort_unstable();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .map_or(0.0, |us| *us as f64 / 1000.0)
    };
    println!(
        "{{\"requests\": {requests}, \"rps\": {:.1}, \"mbps\": {:.2}, \"p50_ms\": {:.3}, \"p99_ms\": {:.3}, \"errors\": {errors}, \"window_bytes\": {window_bytes}, \"total_bytes\": {total_bytes}}}",
        requests as f64 / secs,
        window_bytes as f64 / secs / 1e6,
        pct(0.50),
        pct(0.99)
    );
    Ok(())
}

/// One connection: TCP (and CONNECT), TLS, one warm-up request; the stream and its body bytes.
async fn open_warm(params: &Params) -> anyhow::Result<(TlsStream<TcpStream>, u64)> {
    let tcp = open(&params.target, params.proxy.as_deref()).await?;
    let mut tls = params
        .tls
        .connect(params.sni.clone(), tcp)
        .await
        .context("the TLS handshake")?;
    let mut exchange = Exchange::new(params.size.min(WARM_UP_MAX));
    let far = Instant::now() + Duration::from_secs(3600);
    exchange.run(&mut tls, far).await?;
    Ok((tls, exchange.total_bytes))
}

/// A TCP stream to `target`, through a CONNECT tunnel on `proxy` when given.
async fn open(target: &str, proxy: Option<&str>) -> anyhow::Result<TcpStream> {
    let Some(proxy) = proxy else {
        let s = TcpStream::connect(target).await.context("connecting")?;
        s.set_nodelay(true)?;
        return Ok(s);
    };
    let mut s = TcpStream::connect(proxy)
        .await
        .context("connecting to the proxy")?;
    s.set_nodelay(true)?;
    s.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .await?;
    let mut head = Vec::with_capacity(128);
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).await? == 0 {
            bail!("the proxy closed during CONNECT");
        }
        head.push(byte[0]);
    }
    // smokescreen answers a CONNECT in HTTP/1.0.
    if !(head.starts_with(b"HTTP/1.1 200") || head.starts_with(b"HTTP/1.0 200")) {
        bail!("CONNECT refused: {}", String::from_utf8_lossy(&head));
    }
    Ok(s)
}

/// What one connection did in the measured run.
#[derive(Default)]
struct Done {
    lat_us: Vec<u64>,
    requests: u64,
    window_bytes: u64,
    total_bytes: u64,
    error: Option<anyhow::Error>,
}

/// Back-to-back requests until `stop`, the last one read to its end.
async fn load(mut tls: TlsStream<TcpStream>, params: &Params, stop: Instant) -> Done {
    let mut done = Done::default();
    let mut exchange = Exchange::new(params.size);
    while Instant::now() < stop {
        let started = Instant::now();
        let result = exchange.run(&mut tls, stop).await;
        if let Err(e) = result {
            done.error = Some(e);
            break;
        }
        let finished = Instant::now();
        done.lat_us
            .push(finished.duration_since(started).as_micros() as u64);
        if finished <= stop {
            done.requests += 1;
        }
    }
    done.window_bytes = exchange.window_bytes;
    done.total_bytes = exchange.total_bytes;
    done
}

/// One request at a time on a connection, with its buffer and byte counts.
struct Exchange {
    request: Vec<u8>,
    size: u64,
    buf: Vec<u8>,
    /// Body bytes received before the stop time.
    window_bytes: u64,
    /// Every body byte received.
    total_bytes: u64,
}

impl Exchange {
    fn new(size: u64) -> Self {
        Self {
            request: format!("GET /bytes/{size} HTTP/1.1\r\nHost: origin.test\r\n\r\n")
                .into_bytes(),
            size,
            buf: vec![0u8; 64 * 1024],
            window_bytes: 0,
            total_bytes: 0,
        }
    }

    /// Send the request and read the whole response, checking its status and length.
    async fn run(&mut self, tls: &mut TlsStream<TcpStream>, stop: Instant) -> anyhow::Result<()> {
        tls.write_all(&self.request).await?;
        tls.flush().await?;
        let mut have = 0;
        let end = loop {
            if let Some(end) = self.buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
            if have == self.buf.len() {
                bail!("response head too large");
            }
            let n = tls.read(&mut self.buf[have..]).await?;
            if n == 0 {
                bail!("the connection closed before the response head");
            }
            have += n;
        };
        let head = std::str::from_utf8(&self.buf[..end]).context("a response head not UTF-8")?;
        if !head.starts_with("HTTP/1.1 200 ") {
            bail!("unexpected response: {}", head.lines().next().unwrap_or(""));
        }
        let length = head
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.trim().parse::<u64>().ok());
        if length != Some(self.size) {
            bail!("content-length {length:?}, not {}", self.size);
        }
        let mut body = (have - end) as u64;
        self.count(body, stop);
        while body < self.size {
            let n = tls.read(&mut self.buf).await?;
            if n == 0 {
                bail!(
                    "the connection closed after {body} of {} body bytes",
                    self.size
                );
            }
            body += n as u64;
            self.count(n as u64, stop);
        }
        if body != self.size {
            bail!("{body} body bytes, not {}", self.size);
        }
        Ok(())
    }

    fn count(&mut self, n: u64, stop: Instant) {
        self.total_bytes += n;
        if Instant::now() <= stop {
            self.window_bytes += n;
        }
    }
}
