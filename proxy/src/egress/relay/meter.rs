//! Byte metering for relayed traffic: an IO wrapper for tunnels that counts bytes into the
//! listener metrics and bumps the activity clock on every read and write, and the gauge of
//! open tunnels.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use prometheus::{IntCounter, IntGauge};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// The boxed error of relayed bodies.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Which way bytes flow, from the gate's client's point of view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    /// From the client towards the upstream.
    In,
    /// From the upstream back to the client.
    Out,
}

/// The activity clock and byte totals of one tunnel.
#[derive(Debug)]
pub(crate) struct Activity {
    started: Instant,
    last_ms: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    in_counter: IntCounter,
    out_counter: IntCounter,
}

// === impl Activity ===

impl Activity {
    /// A fresh clock feeding the listener's `in` and `out` byte counters.
    pub(crate) fn new(in_counter: IntCounter, out_counter: IntCounter) -> Arc<Self> {
        Arc::new(Self {
            started: Instant::now(),
            last_ms: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            in_counter,
            out_counter,
        })
    }

    pub(crate) fn record(&self, direction: Direction, n: usize) {
        let n = n as u64;
        let (total, counter) = match direction {
            Direction::In => (&self.bytes_in, &self.in_counter),
            Direction::Out => (&self.bytes_out, &self.out_counter),
        };
        total.fetch_add(n, Ordering::Relaxed);
        counter.inc_by(n);
        let now = self.started.elapsed().as_millis() as u64;
        self.last_ms.fetch_max(now, Ordering::Relaxed);
    }

    /// Bytes relayed `(in, out)` so far.
    pub(crate) fn bytes(&self) -> (u64, u64) {
        (
            self.bytes_in.load(Ordering::Relaxed),
            self.bytes_out.load(Ordering::Relaxed),
        )
    }

    /// Resolves once nothing moved for `idle` (checked against the last read or write).
    pub(crate) async fn idle_expired(&self, idle: Duration) {
        loop {
            let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let quiet = self.started.elapsed().saturating_sub(last);
            if quiet >= idle {
                return;
            }
            tokio::time::sleep(idle - quiet).await;
        }
    }
}

/// The upstream side of a tunnel: reads are bytes `out`, writes are bytes `in`.
#[derive(Debug)]
pub(crate) struct MeteredIo<T> {
    inner: T,
    activity: Arc<Activity>,
}

// === impl MeteredIo ===

impl<T> MeteredIo<T> {
    /// Meter `inner` into `activity`.
    pub(crate) fn new(inner: T, activity: Arc<Activity>) -> Self {
        Self { inner, activity }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for MeteredIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
        let n = buf.filled().len() - before;
        self.activity.record(Direction::Out, n);
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for MeteredIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let n = ready!(Pin::new(&mut self.inner).poll_write(cx, buf))?;
        self.activity.record(Direction::In, n);
        Poll::Ready(Ok(n))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// One open tunnel in a listener's `fleetgate_listener_active_tunnels` gauge: counted when
/// entered, uncounted however the tunnel's task ends.
#[derive(Debug)]
pub(crate) struct ActiveTunnel(IntGauge);

// === impl ActiveTunnel ===

impl ActiveTunnel {
    /// Count one more open tunnel in `gauge` until the guard drops.
    pub(crate) fn enter(gauge: IntGauge) -> Self {
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for ActiveTunnel {
    fn drop(&mut self) {
        self.0.dec();
    }
}
