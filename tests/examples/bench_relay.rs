//! The ceiling of any request relay on this machine, for the forward-proxy benchmark: a
//! zero-logic TCP relay on `127.0.0.1:0` that sends each client connection's bytes to its own
//! connection to the upstream given as the first argument, one read and one write per
//! direction per exchange (what a proxy that reads a request, forwards it, reads the response
//! and returns it cannot do with less). No parsing, no gates, no logs. Prints
//! `{"listening": "ADDR"}` once bound.
//!
//! With `--copy` after the upstream, each direction is copied on its own instead
//! (`tokio::io::copy_bidirectional`, the copy the gate's byte tunnels run): what TLS and bulk
//! bodies need, where one request is answered by many reads and either side may speak first
//! (`tests/bench/tunnel_bulk.sh`).

#![allow(clippy::print_stdout)]

use anyhow::Context as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let upstream = std::env::args()
        .nth(1)
        .context("usage: bench_relay UPSTREAM_ADDR [--copy]")?;
    let copy = match std::env::args().nth(2).as_deref() {
        None => false,
        Some("--copy") => true,
        Some(other) => {
            anyhow::bail!("unknown option {other}; usage: bench_relay UPSTREAM_ADDR [--copy]")
        }
    };
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    println!("{{\"listening\": \"{}\"}}", listener.local_addr()?);
    loop {
        let (client, _) = listener.accept().await?;
        let upstream = upstream.clone();
        tokio::spawn(async move {
            // A peer resetting its connection at the end of a run is not worth a line.
            let relayed = match copy {
                true => copy_both(client, &upstream).await,
                false => relay(client, &upstream).await,
            };
            if let Err(e) = relayed
                && e.kind() != std::io::ErrorKind::ConnectionReset
            {
                eprintln!("bench_relay: {e}");
            }
        });
    }
}

/// Request bytes up, response bytes down, until either side closes.
async fn relay(mut client: TcpStream, upstream: &str) -> std::io::Result<()> {
    client.set_nodelay(true)?;
    let mut up = TcpStream::connect(upstream).await?;
    up.set_nodelay(true)?;
    let (mut req, mut resp) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    loop {
        let n = client.read(&mut req).await?;
        if n == 0 {
            return Ok(());
        }
        up.write_all(&req[..n]).await?;
        let m = up.read(&mut resp).await?;
        if m == 0 {
            return Ok(());
        }
        client.write_all(&resp[..m]).await?;
    }
}

/// Both directions copied independently until both sides close.
async fn copy_both(mut client: TcpStream, upstream: &str) -> std::io::Result<()> {
    client.set_nodelay(true)?;
    let mut up = TcpStream::connect(upstream).await?;
    up.set_nodelay(true)?;
    tokio::io::copy_bidirectional(&mut client, &mut up).await?;
    Ok(())
}
