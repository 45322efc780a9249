//! The log queue: order, stop, drops counted and reported.

use super::*;

fn queued(lines: &[&str], capacity: usize) -> (LogReceiver, u64) {
    let (tx, rx) = log_queue(capacity);
    let mut writer = QueueWriter { tx };
    let before = dropped_lines();
    for line in lines {
        writer
            .write_all(line.as_bytes())
            .expect("a queue write must never fail");
    }
    (rx, dropped_lines() - before)
}

#[test]
fn queued_lines_are_written_in_order_and_the_writer_stops_on_request() {
    let (tx, rx) = log_queue(8);
    for line in ["a\n", "b\n"] {
        tx.try_send(Line::Bytes(line.as_bytes().to_vec()));
    }
    tx.try_send(Line::Stop);
    tx.try_send(Line::Bytes(b"after stop\n".to_vec()));
    let mut out = Vec::new();
    write_lines(&rx, &mut out);
    // Other tests may count drops concurrently; their report line is not under test here.
    let text = String::from_utf8_lossy(&out);
    let written: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("\"target\":\"fleetgate.log\""))
        .collect();
    assert_eq!(
        written,
        ["a", "b"],
        "lines before the stop must be written in order, none after"
    );
}

#[test]
fn a_full_queue_drops_new_lines_and_counts_them_without_blocking() {
    let (rx, dropped) = queued(&["one\n", "two\n", "three\n"], 1);
    assert!(
        dropped >= 2,
        "two lines past a one-line queue must be counted as dropped, got {dropped}"
    );
    let kept = match rx.recv().expect("the first line must be queued") {
        Line::Bytes(b) => b,
        Line::Stop => Vec::new(),
    };
    assert_eq!(kept, b"one\n", "the first line must be the one kept");
}

#[test]
fn the_writer_reports_drops_in_its_next_line() {
    let (tx, rx) = log_queue(4);
    DROPPED.fetch_add(1, Ordering::Relaxed);
    tx.try_send(Line::Bytes(b"x\n".to_vec()));
    drop(tx);
    let mut out = Vec::new();
    write_lines(&rx, &mut out);
    let text = String::from_utf8_lossy(&out);
    let report = text
        .lines()
        .nth(1)
        .expect("a drop report must follow the written line");
    let json: serde_json::Value =
        serde_json::from_str(report).expect("the drop report must be one JSON line");
    assert!(
        json["dropped_total"].as_u64().unwrap_or(0) >= 1,
        "the report must carry the drop count: {report}"
    );
}

#[test]
fn lines_taken_by_the_writer_make_room_for_new_ones() {
    let (rx, _) = queued(&["one\n"], 1);
    assert!(
        matches!(rx.try_recv(), Ok(Line::Bytes(b)) if b == b"one\n"),
        "the writer must take the queued line"
    );
    assert_eq!(
        rx.waiting.load(Ordering::Acquire),
        0,
        "a taken line must leave the count"
    );
}

#[test]
fn logged_urls_lose_query_fragment_and_userinfo() {
    assert_eq!(
        redact_url("https://u:p@Example.com:8443/a/b?token=sk-abcdefghijk#frag"),
        "https://example.com:8443/a/b"
    );
    assert_eq!(redact_url("::nope"), "<unparseable>");
}

#[test]
fn dropped_lines_reach_the_metrics_once() {
    let m = crate::metrics::ProxyMetrics::unregistered().expect("metrics must register");
    let before = dropped_lines();
    DROPPED.fetch_add(3, Ordering::Relaxed);
    m.sync_log_drops();
    let first = m.log_lines_dropped.get();
    assert!(
        first >= before + 3,
        "the counter must include the new drops: {first} < {before} + 3"
    );
    m.sync_log_drops();
    assert!(
        m.log_lines_dropped.get() <= dropped_lines(),
        "a second scrape must not count the same drops again"
    );
}
