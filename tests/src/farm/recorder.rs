//! The origin behind the gate in the farm: it records every byte each upstream connection
//! carries, answers each request it can frame with `200 ok`, and keeps recording after that.
//! What it recorded is what the farm replays to the real servers.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use fleetgate_proxy::egress::relay::h1::{ChunkedDecoder, Encode, Framing, Head};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One upstream connection as the recorder saw it.
#[derive(Clone, Debug, Default)]
pub struct Stream {
    /// Every byte received, in order.
    pub bytes: Vec<u8>,
    /// Requests the recorder framed and answered.
    pub answered: usize,
    /// Whether the gate closed the connection (cleanly or by reset).
    pub closed: bool,
}

/// The recording origin; stops when dropped.
#[derive(Debug)]
pub struct Recorder {
    addr: SocketAddr,
    streams: Arc<Mutex<Vec<Arc<Mutex<Stream>>>>>,
    task: tokio::task::JoinHandle<()>,
}

// === impl Recorder ===

impl Recorder {
    /// Start on a loopback port.
    pub async fn start() -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let streams: Arc<Mutex<Vec<Arc<Mutex<Stream>>>>> = Arc::default();
        let all = streams.clone();
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let stream = Arc::new(Mutex::new(Stream::default()));
                lock(&all).push(stream.clone());
                tokio::spawn(record(conn, stream));
            }
        });
        Ok(Self {
            addr,
            streams,
            task,
        })
    }

    /// Where the recorder listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many connections it has seen so far.
    pub fn mark(&self) -> usize {
        lock(&self.streams).len()
    }

    /// The connections seen since `mark`, once each is closed (or `wait` passed).
    pub async fn since(&self, mark: usize, wait: Duration) -> Vec<Stream> {
        let until = tokio::time::Instant::now() + wait;
        loop {
            let streams: Vec<Stream> = lock(&self.streams)[mark..]
                .iter()
                .map(|s| lock(s).clone())
                .collect();
            if streams.iter().all(|s| s.closed) || tokio::time::Instant::now() >= until {
                return streams;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Record one connection; answer each request while its framing parses.
async fn record(mut conn: TcpStream, stream: Arc<Mutex<Stream>>) {
    let mut buf = BytesMut::new();
    let mut framer = Some(Framer::default());
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let n = match conn.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        lock(&stream).bytes.extend_from_slice(&chunk[..n]);
        buf.extend_from_slice(&chunk[..n]);
        while let Some(f) = framer.as_mut() {
            match f.next(&mut buf) {
                Ok(true) => {
                    lock(&stream).answered += 1;
                    let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                    if conn.write_all(reply).await.is_err() {
                        break;
                    }
                }
                Ok(false) => break,
                // Unframeable: stop answering, keep recording what arrives.
                Err(()) => framer = None,
            }
        }
    }
    lock(&stream).closed = true;
}

/// Finds request boundaries in what the gate sent.
#[derive(Debug, Default)]
struct Framer {
    body: Option<(Framing, ChunkedDecoder, u64)>,
}

impl Framer {
    /// `Ok(true)` when a whole request was taken off `buf`, `Ok(false)` when more is needed.
    fn next(&mut self, buf: &mut BytesMut) -> Result<bool, ()> {
        if self.body.is_none() {
            let Some(head) = Head::parse_request(buf).map_err(drop)? else {
                return Ok(false);
            };
            let framing = head.request_framing().map_err(drop)?;
            let left = match framing {
                Framing::Length(n) => n,
                _ => 0,
            };
            self.body = Some((framing, ChunkedDecoder::default(), left));
        }
        let Some((framing, decoder, left)) = self.body.as_mut() else {
            return Ok(false);
        };
        let done = match framing {
            Framing::Empty => true,
            Framing::Length(_) => {
                let take = (*left).min(buf.len() as u64) as usize;
                let _ = buf.split_to(take);
                *left -= take as u64;
                *left == 0
            }
            Framing::Chunked => {
                let d = decoder
                    .decode(buf, &mut Vec::new(), Encode::Identity)
                    .map_err(drop)?;
                let _ = buf.split_to(d.consumed);
                d.done
            }
            Framing::UntilClose => return Err(()),
        };
        if done {
            self.body = None;
        }
        Ok(done)
    }
}
