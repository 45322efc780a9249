//! Forward-proxy benchmark client for what wrk cannot do: CONNECT tunnels.
//!
//! - `connect_bench load <target> <connections> <seconds> [<proxy>]`: `connections` keep-alive
//!   HTTP/1.1 clients send `GET /` to `target` (`host:port`) back to back for `seconds`;
//!   with `proxy`, each first opens `CONNECT target` through it and runs inside the tunnel.
//!   Prints `{"requests", "rps", "p50_ms", "p99_ms", "errors"}`.
//! - `connect_bench idle <target> <tunnels> <proxy>`: opens `tunnels` CONNECT tunnels, prints
//!   `{"open": N}` and holds them until stdin closes.

#![allow(clippy::print_stdout)]

use std::time::Duration;

use anyhow::{Context as _, bail};
use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("load") if args.len() >= 4 => {
            let (target, conns, secs) = (&args[1], args[2].parse()?, args[3].parse()?);
            load(target, conns, Duration::from_secs(secs), args.get(4)).await
        }
        Some("idle") if args.len() == 4 => idle(&args[1], args[2].parse()?, &args[3]).await,
        _ => bail!(
            "usage: connect_bench load <target> <conns> <seconds> [<proxy>] | idle <target> <tunnels> <proxy>"
        ),
    }
}

/// Open a stream to `target`, through a CONNECT tunnel on `proxy` when given.
async fn open(target: &str, proxy: Option<&String>) -> anyhow::Result<TcpStream> {
    let Some(proxy) = proxy else {
        let s = TcpStream::connect(target).await?;
        s.set_nodelay(true)?;
        return Ok(s);
    };
    let mut s = TcpStream::connect(proxy.as_str()).await?;
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

async fn load(
    target: &str,
    conns: usize,
    duration: Duration,
    proxy: Option<&String>,
) -> anyhow::Result<()> {
    let stop = Instant::now() + duration;
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let stream = open(target, proxy).await?;
        let host = target.to_string();
        tasks.push(tokio::spawn(
            async move { client(stream, host, stop).await },
        ));
    }
    let (mut lat, mut errors) = (Vec::new(), 0usize);
    for t in tasks {
        let (l, e) = t.await.context("a client task failed")?;
        lat.extend(l);
        errors += e;
    }
    lat.sort_unstable();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .map_or(0.0, |us| *us as f64 / 1000.0)
    };
    println!(
        "{{\"requests\": {}, \"rps\": {:.0}, \"p50_ms\": {:.3}, \"p99_ms\": {:.3}, \"errors\": {errors}}}",
        lat.len(),
        lat.len() as f64 / duration.as_secs_f64(),
        pct(0.50),
        pct(0.99)
    );
    Ok(())
}

/// Back-to-back keep-alive GETs until `stop`; latencies in microseconds and an error count.
async fn client(stream: TcpStream, host: String, stop: Instant) -> (Vec<u64>, usize) {
    let mut lat = Vec::with_capacity(1 << 16);
    let Ok((mut sender, conn)) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    else {
        return (lat, 1);
    };
    tokio::spawn(conn);
    let mut errors = 0;
    while Instant::now() < stop {
        let started = Instant::now();
        let req = Request::get("/")
            .header("host", host.as_str())
            .body(Empty::<Bytes>::new());
        let Ok(req) = req else {
            return (lat, errors + 1);
        };
        match sender.send_request(req).await {
            Ok(resp) => {
                if resp.into_body().collect().await.is_err() {
                    errors += 1;
                    break;
                }
                lat.push(started.elapsed().as_micros() as u64);
            }
            Err(_) => {
                errors += 1;
                break;
            }
        }
    }
    (lat, errors)
}

async fn idle(target: &str, tunnels: usize, proxy: &String) -> anyhow::Result<()> {
    let mut open_tunnels = Vec::with_capacity(tunnels);
    for _ in 0..tunnels {
        open_tunnels.push(open(target, Some(proxy)).await?);
    }
    println!("{{\"open\": {}}}", open_tunnels.len());
    let mut line = String::new();
    let _ = tokio::io::BufReader::new(tokio::io::stdin())
        .read_line(&mut line)
        .await;
    drop(open_tunnels);
    Ok(())
}
