//! Byte metering and idle timeouts for relayed traffic: an IO wrapper for tunnels and a body
//! wrapper for forwarded HTTP, both counting bytes into the listener metrics and bumping the
//! activity clock on every read and write.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use prometheus::{IntCounter, IntGauge};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// The boxed error of relayed bodies.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A relayed body stopped because a limit ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("failed to relay the body: {phase} timeout after {} s", .after.as_secs())]
pub struct RelayTimeout {
    /// `idle` or `lifetime`.
    pub phase: &'static str,
    /// The limit that ran out.
    pub after: Duration,
}

/// Which way bytes flow, from the gate's client's point of view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// From the client towards the upstream.
    In,
    /// From the upstream back to the client.
    Out,
}

/// The activity clock and byte totals of one tunnel.
#[derive(Debug)]
pub struct Activity {
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
    pub fn new(in_counter: IntCounter, out_counter: IntCounter) -> Arc<Self> {
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
    pub fn bytes(&self) -> (u64, u64) {
        (
            self.bytes_in.load(Ordering::Relaxed),
            self.bytes_out.load(Ordering::Relaxed),
        )
    }

    /// Resolves once nothing moved for `idle` (checked against the last read or write).
    pub async fn idle_expired(&self, idle: Duration) {
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
pub struct MeteredIo<T> {
    inner: T,
    activity: Arc<Activity>,
}

// === impl MeteredIo ===

impl<T> MeteredIo<T> {
    /// Meter `inner` into `activity`.
    pub fn new(inner: T, activity: Arc<Activity>) -> Self {
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

/// A relayed HTTP body: counts data bytes, fails after `idle` without a frame or past the
/// exchange's lifetime deadline, and streams frame by frame (never buffers the whole body).
/// The timers are armed only once the inner body first makes the reader wait.
#[derive(Debug)]
pub struct MeteredBody<B> {
    inner: B,
    counter: IntCounter,
    idle: Duration,
    deadline: Instant,
    timers: Option<Timers>,
}

/// The idle timer and the lifetime deadline of one body.
#[derive(Debug)]
struct Timers {
    idle: Pin<Box<Sleep>>,
    lifetime: Pin<Box<Sleep>>,
}

// === impl MeteredBody ===

impl<B> MeteredBody<B> {
    /// Meter `inner` into `counter` with the given idle timeout and absolute deadline.
    pub fn new(inner: B, counter: IntCounter, idle: Duration, deadline: Instant) -> Self {
        Self {
            inner,
            counter,
            idle,
            deadline,
            timers: None,
        }
    }

    /// Poll the timers (arming them on first use); `Some` when one ran out.
    fn poll_timers(&mut self, cx: &mut Context<'_>) -> Option<RelayTimeout> {
        let (idle, deadline) = (self.idle, self.deadline);
        let timers = self.timers.get_or_insert_with(|| Timers {
            idle: Box::pin(tokio::time::sleep(idle)),
            lifetime: Box::pin(tokio::time::sleep_until(deadline)),
        });
        if timers.idle.as_mut().poll(cx).is_ready() {
            return Some(RelayTimeout {
                phase: "idle",
                after: idle,
            });
        }
        if timers.lifetime.as_mut().poll(cx).is_ready() {
            return Some(RelayTimeout {
                phase: "lifetime",
                after: deadline.saturating_duration_since(Instant::now()),
            });
        }
        None
    }
}

impl<B> Body for MeteredBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.counter.inc_by(data.len() as u64);
                }
                if let Some(timers) = &mut this.timers {
                    let next = Instant::now() + this.idle;
                    timers.idle.as_mut().reset(next);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.poll_timers(cx) {
                Some(timeout) => Poll::Ready(Some(Err(Box::new(timeout)))),
                None => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// One open tunnel in a listener's `fleetgate_listener_active_tunnels` gauge: counted when
/// entered, uncounted however the tunnel's task ends.
#[derive(Debug)]
pub struct ActiveTunnel(IntGauge);

// === impl ActiveTunnel ===

impl ActiveTunnel {
    /// Count one more open tunnel in `gauge` until the guard drops.
    pub fn enter(gauge: IntGauge) -> Self {
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for ActiveTunnel {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full, StreamBody};

    fn counter() -> IntCounter {
        IntCounter::new("t", "t").expect("a test counter must build")
    }

    #[tokio::test]
    async fn a_streamed_body_is_counted_frame_by_frame() {
        let c = counter();
        let body = MeteredBody::new(
            Full::new(Bytes::from_static(b"hello world")),
            c.clone(),
            Duration::from_secs(5),
            Instant::now() + Duration::from_secs(5),
        );
        let bytes = body.collect().await.expect("body must relay").to_bytes();
        assert_eq!(&bytes[..], b"hello world");
        assert_eq!(c.get(), 11, "every data byte must be counted");
    }

    #[tokio::test]
    async fn a_body_that_stalls_past_the_idle_timeout_fails_with_idle() {
        let stalled = StreamBody::new(futures_util::stream::pending::<
            Result<Frame<Bytes>, std::convert::Infallible>,
        >());
        let body = MeteredBody::new(
            stalled,
            counter(),
            Duration::from_millis(50),
            Instant::now() + Duration::from_secs(5),
        );
        let err = body.collect().await.expect_err("a stalled body must fail");
        let timeout = err
            .downcast_ref::<RelayTimeout>()
            .expect("the error must be a relay timeout");
        assert_eq!(timeout.phase, "idle");
    }
}
