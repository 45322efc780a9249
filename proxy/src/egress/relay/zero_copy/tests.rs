use std::sync::Arc;

use prometheus::IntCounter;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use super::*;

fn activity() -> Arc<Activity> {
    let counter = |name: &str| IntCounter::new(name, "test").unwrap();
    Activity::new(counter("bytes_in"), counter("bytes_out"))
}

/// A connected loopback pair: (the gate's end, the far end).
async fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let far = TcpStream::connect(listener.local_addr().unwrap());
    let (far, near) = tokio::join!(far, listener.accept());
    (near.unwrap().0, far.unwrap())
}

/// A relay running between two loopback pairs: (the client's far end, the upstream's far end,
/// the tunnel's activity, the relay's task).
async fn start(
    try_splice: bool,
) -> (
    TcpStream,
    TcpStream,
    Arc<Activity>,
    tokio::task::JoinHandle<io::Result<Moved>>,
) {
    let (client, client_far) = pair().await;
    let (upstream, upstream_far) = pair().await;
    let meter = activity();
    let task = {
        let meter = meter.clone();
        tokio::spawn(async move { relay_with(&client, &upstream, &meter, try_splice).await })
    };
    (client_far, upstream_far, meter, task)
}

/// Deterministic bytes that show reordering or loss (not one repeated byte).
fn payload(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1] ^ seed)
        .collect()
}

/// Megabytes each way through the relay, the client half-closing first and the upstream
/// answering after it saw the end: every byte arrives in order, both directions end, and the
/// activity counts each side.
async fn both_ways(try_splice: bool) -> Moved {
    let (mut client_far, mut upstream_far, meter, task) = start(try_splice).await;
    let up = payload(3 << 20, 1);
    let down = payload((2 << 20) + 17, 2);
    let sender = {
        let up = up.clone();
        tokio::spawn(async move {
            client_far.write_all(&up).await.unwrap();
            client_far.shutdown().await.unwrap();
            let mut back = Vec::new();
            client_far.read_to_end(&mut back).await.unwrap();
            back
        })
    };
    let mut got = Vec::new();
    upstream_far.read_to_end(&mut got).await.unwrap();
    assert!(
        got == up,
        "the client's bytes reach the upstream in order, then its end"
    );
    // Half-closed: the upstream still answers after the client's end.
    upstream_far.write_all(&down).await.unwrap();
    drop(upstream_far);
    let back = sender.await.unwrap();
    assert!(
        back == down,
        "the upstream's answer reaches the half-closed client"
    );
    let moved = task.await.unwrap().expect("both directions end cleanly");
    assert_eq!(meter.bytes(), (up.len() as u64, down.len() as u64));
    moved
}

#[tokio::test]
async fn spliced_tunnels_move_every_byte_in_order_and_half_close() {
    assert_eq!(both_ways(true).await, Moved::Spliced);
}

#[tokio::test]
async fn copied_tunnels_behave_the_same() {
    assert_eq!(both_ways(false).await, Moved::Copied);
}

/// Requests and short answers, as an agent's API calls through a TLS tunnel: every message
/// arrives whole and in order, and none of it is spliced (no read fills the buffer).
#[tokio::test]
async fn small_messages_are_copied_not_spliced() {
    let (mut client_far, mut upstream_far, meter, task) = start(true).await;
    let mut total = (0u64, 0u64);
    for round in 0..50u8 {
        let ask = payload(300 + usize::from(round) * 7, round);
        let answer = payload(1000 + usize::from(round) * 11, round ^ 0x5a);
        client_far.write_all(&ask).await.unwrap();
        let mut got = vec![0; ask.len()];
        upstream_far.read_exact(&mut got).await.unwrap();
        assert!(got == ask, "round {round}: the request arrives whole");
        upstream_far.write_all(&answer).await.unwrap();
        let mut back = vec![0; answer.len()];
        client_far.read_exact(&mut back).await.unwrap();
        assert!(back == answer, "round {round}: the answer arrives whole");
        total.0 += ask.len() as u64;
        total.1 += answer.len() as u64;
    }
    client_far.shutdown().await.unwrap();
    let mut rest = Vec::new();
    upstream_far.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());
    drop(upstream_far);
    client_far.read_to_end(&mut rest).await.unwrap();
    let moved = task.await.unwrap().expect("both directions end cleanly");
    assert_eq!(
        moved,
        Moved::Copied,
        "short messages never switch to splice"
    );
    assert_eq!(meter.bytes(), total);
}

/// A direction that switches to splice after its first full reads, towards a reader that
/// starts late (the copy's writes back up first): every byte in order, counted once.
#[tokio::test]
async fn a_direction_switches_to_splice_midstream_without_losing_a_byte() {
    for try_splice in [true, false] {
        let (mut client_far, mut upstream_far, meter, task) = start(try_splice).await;
        // Short writes first (copied), then bulk (spliced when it may).
        let head: Vec<Vec<u8>> = (0..20u8)
            .map(|i| payload(100 + usize::from(i), i))
            .collect();
        let bulk = payload(4 << 20, 9);
        let sent = {
            let mut all: Vec<u8> = head.concat();
            all.extend_from_slice(&bulk);
            all
        };
        let writer = tokio::spawn(async move {
            for h in &head {
                client_far.write_all(h).await.unwrap();
            }
            client_far.write_all(&bulk).await.unwrap();
            client_far.shutdown().await.unwrap();
            client_far
        });
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let mut got = Vec::new();
        upstream_far.read_to_end(&mut got).await.unwrap();
        assert!(got == sent, "splice {try_splice}: every byte, in order");
        drop(upstream_far);
        drop(writer.await.unwrap());
        let moved = task.await.unwrap().expect("both directions end cleanly");
        let expected = if try_splice {
            Moved::Spliced
        } else {
            Moved::Copied
        };
        assert_eq!(moved, expected, "splice {try_splice}");
        assert_eq!(meter.bytes(), (sent.len() as u64, 0));
    }
}

#[tokio::test]
async fn a_reset_upstream_ends_the_relay_with_an_error() {
    for try_splice in [true, false] {
        let (mut client_far, upstream_far, _meter, task) = start(try_splice).await;
        client_far.write_all(b"hello").await.unwrap();
        // SO_LINGER 0: the close sends a reset, not an end.
        upstream_far.set_zero_linger().unwrap();
        drop(upstream_far);
        let ended = tokio::time::timeout(std::time::Duration::from_secs(5), task)
            .await
            .expect("a reset ends the relay")
            .unwrap();
        assert!(
            ended.is_err(),
            "splice {try_splice}: a reset is an error: {ended:?}"
        );
    }
}
