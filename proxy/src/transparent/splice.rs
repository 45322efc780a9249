//! Byte splicing between the client and the dialed upstream (`copy_bidirectional`), with an
//! idle timeout (no byte either way), a total timeout, and byte counts kept even when a
//! timeout cuts the copy short.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// How long a spliced connection may live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpliceLimits {
    /// Cut the connection after this long without a byte in either direction.
    pub idle: Duration,
    /// Cut the connection after this long in all.
    pub total: Duration,
}

/// Why the splice ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpliceEnd {
    /// Both sides closed.
    Closed,
    /// A socket error on either side.
    Error,
    /// No byte moved for [`SpliceLimits::idle`].
    Idle,
    /// [`SpliceLimits::total`] elapsed.
    Total,
}

/// What moved through a splice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpliceOutcome {
    /// Bytes read from the client (sent upstream).
    pub upstream_bytes: u64,
    /// Bytes written to the client (received from upstream).
    pub downstream_bytes: u64,
    /// Why it ended.
    pub end: SpliceEnd,
}

// === impl SpliceEnd ===

impl SpliceEnd {
    /// Stable code for logs.
    pub fn code(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Error => "error",
            Self::Idle => "idle_timeout",
            Self::Total => "total_timeout",
        }
    }
}

/// Copy bytes both ways until both sides close, one fails, or a limit is hit.
pub async fn splice<C, U>(client: C, mut upstream: U, limits: SpliceLimits) -> SpliceOutcome
where
    C: AsyncRead + AsyncWrite + Unpin,
    U: AsyncRead + AsyncWrite + Unpin,
{
    let meter = Arc::new(Meter::new());
    let mut client = Metered {
        inner: client,
        meter: Arc::clone(&meter),
    };
    let copy = tokio::io::copy_bidirectional(&mut client, &mut upstream);
    let end = tokio::select! {
        done = copy => if done.is_ok() { SpliceEnd::Closed } else { SpliceEnd::Error },
        () = idle_watch(&meter, limits.idle) => SpliceEnd::Idle,
        () = tokio::time::sleep(limits.total) => SpliceEnd::Total,
    };
    SpliceOutcome {
        upstream_bytes: meter.read.load(Ordering::Relaxed),
        downstream_bytes: meter.written.load(Ordering::Relaxed),
        end,
    }
}

/// Resolves once no byte moved for `idle`.
async fn idle_watch(meter: &Meter, idle: Duration) {
    loop {
        let deadline = meter.last_activity() + idle;
        if Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep_until(deadline).await;
    }
}

/// Byte counters and the time of the last byte, shared with the watchdog.
#[derive(Debug)]
struct Meter {
    start: Instant,
    read: AtomicU64,
    written: AtomicU64,
    /// Milliseconds after `start` of the last byte.
    last_ms: AtomicU64,
}

impl Meter {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            read: AtomicU64::new(0),
            written: AtomicU64::new(0),
            last_ms: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn last_activity(&self) -> Instant {
        self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }
}

/// The client side of the splice, counting every byte that passes (each byte of the tunnel
/// passes the client side once, so one wrapper sees all activity).
struct Metered<S> {
    inner: S,
    meter: Arc<Meter>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Metered<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        let n = buf.filled().len().saturating_sub(before);
        if n > 0 {
            this.meter.read.fetch_add(n as u64, Ordering::Relaxed);
            this.meter.touch();
        }
        poll
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Metered<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &poll {
            this.meter.written.fetch_add(*n as u64, Ordering::Relaxed);
            this.meter.touch();
        }
        poll
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};

    const LONG: Duration = Duration::from_secs(3600);

    #[tokio::test]
    async fn bytes_flow_both_ways_and_are_counted() {
        let (client, mut client_far) = duplex(1024);
        let (upstream, mut upstream_far) = duplex(1024);
        let limits = SpliceLimits {
            idle: LONG,
            total: LONG,
        };
        let task = tokio::spawn(splice(client, upstream, limits));
        client_far.write_all(b"ping!").await.unwrap();
        let mut got = [0u8; 5];
        upstream_far.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping!", "client bytes must reach upstream");
        upstream_far.write_all(b"pong").await.unwrap();
        let mut back = [0u8; 4];
        client_far.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"pong", "upstream bytes must reach the client");
        drop(client_far);
        drop(upstream_far);
        let outcome = task.await.unwrap();
        assert_eq!(outcome.upstream_bytes, 5, "five bytes went upstream");
        assert_eq!(outcome.downstream_bytes, 4, "four bytes came back");
        assert_eq!(outcome.end, SpliceEnd::Closed);
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_connection_is_cut_at_the_idle_timeout_not_before() {
        let (client, mut client_far) = duplex(1024);
        let (upstream, _upstream_far) = duplex(1024);
        let limits = SpliceLimits {
            idle: Duration::from_secs(30),
            total: LONG,
        };
        let started = Instant::now();
        let task = tokio::spawn(splice(client, upstream, limits));
        tokio::time::sleep(Duration::from_secs(20)).await;
        client_far.write_all(b"x").await.unwrap();
        let outcome = task.await.unwrap();
        assert_eq!(outcome.end, SpliceEnd::Idle);
        let lived = started.elapsed();
        assert!(
            lived >= Duration::from_secs(50) && lived < Duration::from_secs(52),
            "activity at 20 s must push the idle cut to about 50 s, got {lived:?}"
        );
        assert_eq!(outcome.upstream_bytes, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_connection_is_cut_at_the_total_timeout() {
        let (client, mut client_far) = duplex(1 << 16);
        let (upstream, _upstream_far) = duplex(1 << 16);
        let limits = SpliceLimits {
            idle: Duration::from_secs(10),
            total: Duration::from_secs(60),
        };
        let task = tokio::spawn(splice(client, upstream, limits));
        let writer = tokio::spawn(async move {
            loop {
                if client_far.write_all(b"tick").await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        });
        let outcome = task.await.unwrap();
        writer.abort();
        assert_eq!(
            outcome.end,
            SpliceEnd::Total,
            "regular traffic must not count as idle"
        );
    }
}
