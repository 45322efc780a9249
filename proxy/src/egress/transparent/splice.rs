//! Byte splicing between the client and the dialed upstream (splice(2) between TCP sockets,
//! [`zero_copy`]; a user-space copy for anything else): the
//! sniffed first bytes are replayed upstream, every byte is metered through the forward
//! proxy's [`Activity`] clock (`fleetgate_listener_bytes_total`), and the splice is cut after an
//! idle period or a total lifetime.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::egress::relay::meter::{Activity, Direction, MeteredIo};
use crate::egress::relay::zero_copy;

/// How long a spliced connection may live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SpliceLimits {
    /// Cut the connection after this long without a byte in either direction.
    pub(crate) idle: Duration,
    /// Cut the connection after this long in all.
    pub(crate) total: Duration,
}

/// Why the splice ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SpliceEnd {
    /// Both sides closed.
    Closed,
    /// A socket error on either side (the replay included).
    Error,
    /// No byte moved for [`SpliceLimits::idle`].
    Idle,
    /// [`SpliceLimits::total`] elapsed.
    Total,
}

// === impl SpliceEnd ===

impl SpliceEnd {
    /// Stable code for logs.
    pub(crate) fn code(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Error => "reset",
            Self::Idle => "idle_timeout",
            Self::Total => "lifetime",
        }
    }
}

/// A socket the splice can take: a TCP stream moves its bytes with splice(2)
/// ([`zero_copy`]); anything else (an in-memory stream) is copied.
pub(crate) trait Relayable: AsyncRead + AsyncWrite + Unpin {
    /// The TCP stream underneath, when there is one.
    fn tcp(&self) -> Option<&TcpStream>;
}

impl Relayable for TcpStream {
    fn tcp(&self) -> Option<&TcpStream> {
        Some(self)
    }
}

impl Relayable for &mut TcpStream {
    fn tcp(&self) -> Option<&TcpStream> {
        Some(self)
    }
}

/// Replay `prefix` upstream, then move bytes both ways until both sides close, one fails, or
/// a limit is hit. Bytes are counted in `activity` (`in`: towards the upstream).
pub(crate) async fn splice<C, U>(
    mut client: C,
    mut upstream: U,
    prefix: &[u8],
    activity: &Arc<Activity>,
    limits: SpliceLimits,
) -> SpliceEnd
where
    C: Relayable,
    U: Relayable,
{
    let relay = async {
        upstream.write_all(prefix).await?;
        activity.record(Direction::In, prefix.len());
        if let (Some(c), Some(u)) = (client.tcp(), upstream.tcp()) {
            return zero_copy::relay(c, u, activity).await.map(drop);
        }
        let mut upstream = MeteredIo::new(upstream, Arc::clone(activity));
        tokio::io::copy_bidirectional(&mut client, &mut upstream)
            .await
            .map(drop)
    };
    tokio::select! {
        done = relay => if done.is_ok() { SpliceEnd::Closed } else { SpliceEnd::Error },
        () = activity.idle_expired(limits.idle) => SpliceEnd::Idle,
        () = tokio::time::sleep(limits.total) => SpliceEnd::Total,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::IntCounter;
    use tokio::io::{AsyncReadExt, DuplexStream, duplex};
    use tokio::net::TcpListener;
    use tokio::time::Instant;

    const LONG: Duration = Duration::from_secs(3600);

    impl Relayable for DuplexStream {
        fn tcp(&self) -> Option<&TcpStream> {
            None
        }
    }

    /// A connected loopback pair: (the gate's end, the far end).
    async fn tcp_pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let far = TcpStream::connect(listener.local_addr().unwrap());
        let (far, near) = tokio::join!(far, listener.accept());
        (near.unwrap().0, far.unwrap())
    }

    #[tokio::test]
    async fn over_tcp_the_prefix_is_replayed_then_bytes_are_spliced_both_ways_and_counted() {
        let (client, mut client_far) = tcp_pair().await;
        let (mut upstream, mut upstream_far) = tcp_pair().await;
        let limits = SpliceLimits {
            idle: LONG,
            total: LONG,
        };
        let meter = activity();
        let task = {
            let meter = meter.clone();
            tokio::spawn(
                async move { splice(client, &mut upstream, b"HELLO", &meter, limits).await },
            )
        };
        client_far.write_all(b"ping!").await.unwrap();
        let mut got = [0u8; 10];
        upstream_far.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"HELLOping!", "the prefix first, then client bytes");
        upstream_far.write_all(b"pong").await.unwrap();
        let mut back = [0u8; 4];
        client_far.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"pong");
        drop(client_far);
        drop(upstream_far);
        assert_eq!(task.await.unwrap(), SpliceEnd::Closed);
        assert_eq!(
            meter.bytes(),
            (10, 4),
            "prefix and client bytes in, reply out"
        );
    }

    fn activity() -> Arc<Activity> {
        let counter = |name: &str| IntCounter::new(name, "test").unwrap();
        Activity::new(counter("bytes_in"), counter("bytes_out"))
    }

    #[tokio::test]
    async fn the_prefix_is_replayed_then_bytes_flow_both_ways_and_are_counted() {
        let (client, mut client_far) = duplex(1024);
        let (upstream, mut upstream_far) = duplex(1024);
        let limits = SpliceLimits {
            idle: LONG,
            total: LONG,
        };
        let meter = activity();
        let task = {
            let meter = meter.clone();
            tokio::spawn(async move { splice(client, upstream, b"HELLO", &meter, limits).await })
        };
        client_far.write_all(b"ping!").await.unwrap();
        let mut got = [0u8; 10];
        upstream_far.read_exact(&mut got).await.unwrap();
        assert_eq!(
            &got, b"HELLOping!",
            "the replayed prefix must come first, then client bytes"
        );
        upstream_far.write_all(b"pong").await.unwrap();
        let mut back = [0u8; 4];
        client_far.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"pong", "upstream bytes must reach the client");
        drop(client_far);
        drop(upstream_far);
        assert_eq!(task.await.unwrap(), SpliceEnd::Closed);
        assert_eq!(
            meter.bytes(),
            (10, 4),
            "prefix and client bytes in, reply out"
        );
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
        let meter = activity();
        let task = {
            let meter = meter.clone();
            tokio::spawn(async move { splice(client, upstream, b"", &meter, limits).await })
        };
        tokio::time::sleep(Duration::from_secs(20)).await;
        client_far.write_all(b"x").await.unwrap();
        assert_eq!(task.await.unwrap(), SpliceEnd::Idle);
        let lived = started.elapsed();
        assert!(
            lived >= Duration::from_secs(50) && lived < Duration::from_secs(52),
            "activity at 20 s must push the idle cut to about 50 s, got {lived:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_connection_is_cut_at_the_total_timeout() {
        let (client, mut client_far) = duplex(1 << 16);
        let (upstream, _upstream_far) = duplex(1 << 16);
        let limits = SpliceLimits {
            idle: Duration::from_secs(10),
            total: Duration::from_secs(60),
        };
        let meter = activity();
        let task = {
            let meter = meter.clone();
            tokio::spawn(async move { splice(client, upstream, b"", &meter, limits).await })
        };
        let writer = tokio::spawn(async move {
            while client_far.write_all(b"tick").await.is_ok() {
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        });
        let end = task.await.unwrap();
        writer.abort();
        assert_eq!(
            end,
            SpliceEnd::Total,
            "regular traffic must not count as idle"
        );
    }
}
