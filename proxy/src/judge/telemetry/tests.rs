//! The log queue: order, stop, drops counted and reported.

use super::*;

fn queued(lines: &[&str], capacity: usize) -> (Arc<LogQueue>, u64) {
    let queue = log_queue(capacity);
    let mut writer = QueueWriter {
        queue: queue.clone(),
    };
    let before = dropped_lines();
    for line in lines {
        writer
            .write_all(line.as_bytes())
            .expect("a queue write must never fail");
    }
    (queue, dropped_lines() - before)
}

/// The written lines, without drop reports (other tests may count drops concurrently).
fn written(out: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(out)
        .lines()
        .filter(|l| !l.contains("\"target\":\"fleetgate.log\""))
        .map(str::to_string)
        .collect()
}

#[test]
fn queued_lines_are_written_in_order_and_the_writer_stops_on_request() {
    let queue = log_queue(8);
    for line in ["a\n", "b\n"] {
        queue.push(line.as_bytes());
    }
    queue.stop();
    queue.push(b"after stop\n");
    let mut out = Vec::new();
    write_lines(&queue, &mut out);
    assert_eq!(
        written(&out),
        ["a", "b"],
        "lines before the stop must be written in order, none after"
    );
}

#[test]
fn a_full_queue_drops_new_lines_and_counts_them_without_blocking() {
    let (queue, dropped) = queued(&["one\n", "two\n", "three\n"], 1);
    assert!(
        dropped >= 2,
        "two lines past a one-line queue must be counted as dropped, got {dropped}"
    );
    let mut batch = Vec::new();
    assert!(matches!(queue.take(&mut batch, false), Batch::Lines));
    assert_eq!(batch, b"one\n", "the first line must be the one kept");
}

#[test]
fn the_writer_reports_drops_after_its_batch() {
    let queue = log_queue(4);
    DROPPED.fetch_add(1, Ordering::Relaxed);
    queue.push(b"x\n");
    queue.stop();
    let mut out = Vec::new();
    write_lines(&queue, &mut out);
    let text = String::from_utf8_lossy(&out);
    assert_eq!(text.lines().next(), Some("x"), "{text}");
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
    let (queue, _) = queued(&["one\n"], 1);
    let mut batch = Vec::new();
    assert!(matches!(queue.take(&mut batch, false), Batch::Lines));
    assert_eq!(batch, b"one\n", "the writer must take the queued line");
    queue.push(b"two\n");
    let mut next = Vec::new();
    assert!(matches!(queue.take(&mut next, false), Batch::Lines));
    assert_eq!(next, b"two\n", "a taken line must leave room for the next");
    assert!(
        matches!(queue.take(&mut Vec::new(), false), Batch::Empty),
        "nothing is taken twice"
    );
}

/// A `Write` the test can read while the writer thread holds it.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().expect("not poisoned").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_writer_that_went_quiet_wakes_for_the_next_line_and_lets_go_of_its_room() {
    let queue = log_queue(8);
    let out = Shared::default();
    let writer = {
        let (queue, mut out) = (queue.clone(), out.clone());
        std::thread::spawn(move || write_lines(&queue, &mut out))
    };
    queue.push(&[b'a'; 3000]);
    queue.push(b"\n");
    // Past the polls: the writer has let go of its buffers and waits on the condition.
    let quiet = std::time::Duration::from_millis(u64::from(IDLE_POLLS) * 4 + 200);
    std::thread::sleep(quiet);
    {
        let pending = queue.lock();
        assert!(
            pending.waiting,
            "a quiet writer must wait for the next line"
        );
        assert_eq!(
            pending.bytes.capacity(),
            0,
            "a quiet queue must hold no room for lines"
        );
    }
    queue.push(b"late\n");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    while !written(&out.0.lock().expect("not poisoned")).contains(&"late".to_string()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a line after a quiet spell must wake the writer"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    queue.stop();
    writer.join().expect("the writer must stop");
    let lines = written(&out.0.lock().expect("not poisoned"));
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[1], "late");
}

#[test]
fn a_thread_builds_its_lines_in_one_buffer() {
    let first = line_buffer();
    assert!(first.capacity() >= LINE_BUFFER, "room for a decision line");
    let at = first.as_ptr();
    let _ = queue_line(first);
    let second = line_buffer();
    assert_eq!(second.as_ptr(), at, "the last line's buffer must be reused");
    assert!(second.is_empty(), "a reused buffer starts empty");
    let mut long = second;
    long.resize(LINE_BUFFER_KEPT * 2, b'x');
    let _ = queue_line(long);
    assert_eq!(
        line_buffer().capacity(),
        LINE_BUFFER,
        "a buffer grown past the bound is not kept"
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
    let m = crate::judge::metrics::ProxyMetrics::unregistered().expect("metrics must register");
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

#[test]
fn lines_from_many_threads_arrive_whole_and_in_each_threads_order() {
    let queue = log_queue(LOG_QUEUE_LINES);
    let out = Shared::default();
    let writer = {
        let (queue, mut out) = (queue.clone(), out.clone());
        std::thread::spawn(move || write_lines(&queue, &mut out))
    };
    let senders: Vec<_> = (0..4)
        .map(|t| {
            let queue = queue.clone();
            std::thread::spawn(move || {
                for i in 0..2_000 {
                    // Lines of varying length, so a cut or interleaved line would not parse.
                    let pad = "x".repeat(i % 97);
                    queue.push(format!("{{\"t\":{t},\"i\":{i},\"pad\":\"{pad}\"}}\n").as_bytes());
                }
            })
        })
        .collect();
    for sender in senders {
        sender.join().expect("a sender must finish");
    }
    queue.stop();
    writer.join().expect("the writer must stop");
    let mut next = [0u64; 4];
    for line in written(&out.0.lock().expect("not poisoned")) {
        let value: serde_json::Value = serde_json::from_str(&line).expect("every line whole");
        let (t, i) = (value["t"].as_u64().unwrap_or(9), value["i"].as_u64());
        let slot = usize::try_from(t).expect("a small index");
        assert_eq!(
            i,
            Some(next[slot]),
            "thread {t}'s lines must arrive in order"
        );
        next[slot] += 1;
    }
    assert_eq!(next, [2_000; 4], "every line must be written");
}
