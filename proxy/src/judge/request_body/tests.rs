use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

use super::*;

/// A request body fed piece by piece by the test, with or without a declared length.
struct Fed {
    rx: mpsc::Receiver<Bytes>,
    declared: Option<u64>,
}

impl Body for Fed {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.rx.poll_recv(cx).map(|d| d.map(|d| Ok(Frame::data(d))))
    }

    fn size_hint(&self) -> SizeHint {
        self.declared
            .map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}

fn fed(declared: Option<u64>) -> (mpsc::Sender<Bytes>, Fed) {
    let (tx, rx) = mpsc::channel(16);
    (tx, Fed { rx, declared })
}

fn limits(budget: usize) -> BodyLimits {
    BodyLimits {
        idle: Duration::from_secs(2),
        total: Duration::from_secs(5),
        budget,
    }
}

#[tokio::test]
async fn a_whole_body_is_read_and_its_room_given_back_when_the_hold_drops() {
    let budget = BodyBudget::new("api", limits(1024));
    let (tx, body) = fed(None);
    for piece in ["{\"urls\":", "[\"https://example.com/\"]", "}"] {
        tx.send(Bytes::from(piece)).await.expect("reader alive");
    }
    drop(tx);
    let (bytes, hold) = read_body(body, 512, &budget).await.expect("body fits");
    assert_eq!(&bytes[..], b"{\"urls\":[\"https://example.com/\"]}");
    assert!(hold.bytes() >= bytes.len(), "the hold covers the buffer");
    assert_eq!(budget.held(), hold.bytes(), "the hold is counted");
    drop(hold);
    assert_eq!(budget.held(), 0, "dropping the hold gives the room back");
}

#[tokio::test(start_paused = true)]
async fn a_body_that_stops_sending_is_dropped_after_the_idle_deadline() {
    let budget = BodyBudget::new("api", limits(1024));
    let (tx, body) = fed(Some(100));
    tx.send(Bytes::from_static(&[b'x'; 99]))
        .await
        .expect("reader alive");
    let started = Instant::now();
    let read = read_body(body, 512, &budget).await;
    assert!(matches!(read, Err(BodyError::Idle(_))), "{read:?}");
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(2),
        "cut at the idle deadline"
    );
    assert_eq!(budget.held(), 0, "a refused body holds nothing");
    drop(tx);
}

#[tokio::test(start_paused = true)]
async fn a_body_that_trickles_is_dropped_at_the_total_deadline() {
    let budget = BodyBudget::new("api", limits(1024));
    let (tx, body) = fed(None);
    let feeder = tokio::spawn(async move {
        // One byte a second: never idle for 2 s, never done.
        while tx.send(Bytes::from_static(b"x")).await.is_ok() {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    let started = Instant::now();
    let read = read_body(body, 512, &budget).await;
    assert!(matches!(read, Err(BodyError::Total(_))), "{read:?}");
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(5),
        "cut at the total deadline"
    );
    assert_eq!(budget.held(), 0);
    feeder.abort();
}

#[tokio::test]
async fn bodies_past_the_budget_are_refused_while_admitted_ones_finish() {
    let budget = BodyBudget::new("api", limits(1000));
    // Two declared bodies of 400 fit; a third of 400 does not, before a byte of it is read.
    let (tx_a, a) = fed(Some(400));
    let (tx_b, b) = fed(Some(400));
    let reading_a = tokio::spawn({
        let budget = budget.clone();
        async move { read_body(a, 1000, &budget).await }
    });
    let reading_b = tokio::spawn({
        let budget = budget.clone();
        async move { read_body(b, 1000, &budget).await }
    });
    while budget.held() < 800 {
        tokio::task::yield_now().await;
    }
    let (_tx_c, c) = fed(Some(400));
    let refused = read_body(c, 1000, &budget).await;
    assert!(
        matches!(refused, Err(BodyError::OverBudget { budget: 1000 })),
        "{refused:?}"
    );
    assert_eq!(
        refused.as_ref().map_err(BodyError::code).err(),
        Some("body_budget_exhausted")
    );
    // A chunked body grows under the budget and is refused when it no longer fits.
    let (tx_d, d) = fed(None);
    tx_d.send(Bytes::from_static(&[b'y'; 150]))
        .await
        .expect("reader alive");
    tx_d.send(Bytes::from_static(&[b'y'; 150]))
        .await
        .expect("reader alive");
    let refused = read_body(d, 1000, &budget).await;
    assert!(
        matches!(refused, Err(BodyError::OverBudget { .. })),
        "{refused:?}"
    );
    // The admitted ones finish.
    for tx in [tx_a, tx_b] {
        tx.send(Bytes::from_static(&[b'z'; 400]))
            .await
            .expect("reader alive");
    }
    for reading in [reading_a, reading_b] {
        let (bytes, hold) = reading.await.expect("task").expect("admitted body");
        assert_eq!(bytes.len(), 400);
        drop(hold);
    }
    assert_eq!(budget.held(), 0, "every hold given back");
}

#[tokio::test]
async fn a_body_over_the_cap_is_refused_declared_or_not() {
    let budget = BodyBudget::new("api", limits(1 << 20));
    let (_tx, declared) = fed(Some(2000));
    let read = read_body(declared, 1000, &budget).await;
    assert!(matches!(read, Err(BodyError::TooLarge(1000))), "{read:?}");
    let (tx, chunked) = fed(None);
    for _ in 0..3 {
        tx.send(Bytes::from_static(&[b'x'; 400]))
            .await
            .expect("reader alive");
    }
    drop(tx);
    let read = read_body(chunked, 1000, &budget).await;
    assert!(matches!(read, Err(BodyError::TooLarge(1000))), "{read:?}");
    assert_eq!(budget.held(), 0);
}
