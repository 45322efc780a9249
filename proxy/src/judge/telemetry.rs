//! Tracing setup and the canonical decision line.
//!
//! Every extract item produces exactly one `egress.decision` event at info (allow) or warn
//! (deny) with the fields below; everything else stays at debug. URLs are logged without
//! query, fragment or userinfo, so a refused secret is never written to a log.
//!
//! Lines are formatted on the worker that logs them and appended to one shared batch that a
//! writer thread takes whole and writes with one call, so a slow or blocked stderr never stalls
//! a request: when the batch holds its bound of lines a new line is dropped and counted, and
//! the writer reports the count after its next batch. Appending is a copy under a lock held for
//! that copy alone: a line costs no allocation and no wake-up while lines keep coming, and its
//! memory is freed on the thread that allocated it. The batch grows with the lines waiting in it
//! (the bound is a count, not a preallocated array), and the writer lets go of both batches'
//! room when the gate goes quiet, so an idle gate holds no room for lines it is not logging.

use std::cell::Cell;
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Log lines that may wait for the writer thread; past this, new lines are dropped.
pub(crate) const LOG_QUEUE_LINES: usize = 16_384;

/// Lines dropped because the queue was full, since the process started.
static DROPPED: AtomicU64 = AtomicU64::new(0);

pub(crate) mod decision;
pub(crate) mod line;

/// Queue one finished line (see [`line::JsonLine`]) for the writer thread, dropping and
/// counting it when the queue is full. `false` when there is no queue (no [`init`] ran): the
/// caller then logs through `tracing`. The line's buffer is kept for the next line this thread
/// builds ([`line_buffer`]).
pub(crate) fn queue_line(bytes: Vec<u8>) -> bool {
    let queued = match QUEUE.get() {
        Some(queue) => {
            queue.push(&bytes);
            true
        }
        None => false,
    };
    recycle_line_buffer(bytes);
    queued
}

/// Room for one line, larger than a decision line with a long URL.
const LINE_BUFFER: usize = 512;
/// A buffer that grew past this (a line with a very long URL) is freed, not kept.
const LINE_BUFFER_KEPT: usize = 4 * 1024;

thread_local! {
    /// The buffer this thread's last queued line was built in.
    static SPARE_LINE: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// An empty buffer to build a line in: the one this thread's last queued line used, so a worker
/// that logs a line per request allocates none.
pub(crate) fn line_buffer() -> Vec<u8> {
    let mut buf = SPARE_LINE.try_with(Cell::take).unwrap_or_default();
    if buf.capacity() == 0 {
        buf.reserve_exact(LINE_BUFFER);
    }
    buf
}

fn recycle_line_buffer(mut bytes: Vec<u8>) {
    if bytes.capacity() <= LINE_BUFFER_KEPT {
        bytes.clear();
        // A thread past its thread-locals (exiting) frees the buffer instead.
        let _ = SPARE_LINE.try_with(|spare| spare.set(bytes));
    }
}

/// Lines dropped so far because the log queue was full.
pub(crate) fn dropped_lines() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Keeps the writer thread alive; dropping it writes out every queued line and stops it.
#[derive(Debug)]
pub(crate) struct LogGuard {
    handle: Option<JoinHandle<()>>,
}

impl Drop for LogGuard {
    fn drop(&mut self) {
        // The subscriber's writers stay alive (they are global), so ask for a flush-and-stop.
        if let Some(queue) = QUEUE.get() {
            queue.stop();
        }
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// The queue the global subscriber's writers and [`queue_line`] use.
static QUEUE: std::sync::OnceLock<Arc<LogQueue>> = std::sync::OnceLock::new();

/// Lines waiting for the writer thread: at most `capacity` of them; past that a line is
/// dropped and counted in [`DROPPED`].
#[derive(Debug)]
struct LogQueue {
    pending: Mutex<Pending>,
    /// Signalled when a line arrives while the writer waits for one, and on stop.
    arrived: Condvar,
    capacity: usize,
}

/// What the senders have appended since the writer last took the batch.
#[derive(Debug, Default)]
struct Pending {
    /// Whole lines, one after another.
    bytes: Vec<u8>,
    lines: usize,
    /// No line after this one is written.
    stop: bool,
    /// The writer is blocked on [`LogQueue::arrived`]: the next line must wake it.
    waiting: bool,
}

/// What the writer took from the queue in one go.
enum Batch {
    /// Lines to write (the writer's own buffer, swapped with the queue's).
    Lines,
    /// Nothing arrived within the poll; nothing to write.
    Empty,
    /// Stop after writing what was taken.
    Stop,
}

/// A log queue holding at most `capacity` lines.
fn log_queue(capacity: usize) -> Arc<LogQueue> {
    Arc::new(LogQueue {
        pending: Mutex::new(Pending::default()),
        arrived: Condvar::new(),
        capacity,
    })
}

// === impl LogQueue ===

impl LogQueue {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        // A sender that panicked mid-copy left at worst a cut line: keep logging.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Append `line` unless `capacity` lines already wait (then it is dropped and counted), or
    /// the writer has stopped. Never blocks beyond the copy.
    fn push(&self, line: &[u8]) {
        let mut pending = self.lock();
        if pending.stop {
            return;
        }
        if pending.lines >= self.capacity {
            drop(pending);
            DROPPED.fetch_add(1, Ordering::Relaxed);
            return;
        }
        pending.bytes.extend_from_slice(line);
        pending.lines += 1;
        if pending.waiting {
            pending.waiting = false;
            drop(pending);
            self.arrived.notify_one();
        }
    }

    /// Write what is queued, then stop the writer; lines after this are not written.
    fn stop(&self) {
        self.lock().stop = true;
        self.arrived.notify_one();
    }

    /// Swap the waiting lines into `batch` (which must be empty). With `block`, wait until there
    /// is a line or a stop; without, return [`Batch::Empty`] at once when there is neither.
    fn take(&self, batch: &mut Vec<u8>, block: bool) -> Batch {
        let mut pending = self.lock();
        while block && pending.lines == 0 && !pending.stop {
            pending.waiting = true;
            pending = self
                .arrived
                .wait(pending)
                .unwrap_or_else(|e| e.into_inner());
        }
        pending.waiting = false;
        std::mem::swap(&mut pending.bytes, batch);
        pending.lines = 0;
        match (pending.stop, batch.is_empty()) {
            (true, _) => Batch::Stop,
            (false, true) => Batch::Empty,
            (false, false) => Batch::Lines,
        }
    }

    /// Let go of the room the queue's batch grew to (the writer is about to wait).
    fn shrink(&self) {
        let mut pending = self.lock();
        if pending.bytes.is_empty() {
            pending.bytes = Vec::new();
        }
    }
}

/// The HTML parser's crates. Their warnings are about the page being parsed, not the gate
/// (html5ever warns once per misnested table tag), so a malformed page, which whoever serves
/// it chooses, would write a log line per tag. They log at `error` and above unless `RUST_LOG`
/// names them.
const PAGE_PARSER_TARGETS: &[&str] = &["html5ever", "markup5ever", "selectors", "scraper"];

/// The log filter: `RUST_LOG` if set and valid, else `default_level`; the page parser's
/// crates at `error` unless `rust_log` names them.
fn log_filter(rust_log: Option<&str>, default_level: &str) -> EnvFilter {
    let mut filter = rust_log
        .and_then(|v| EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| EnvFilter::new(default_level));
    let named = rust_log.unwrap_or("");
    for target in PAGE_PARSER_TARGETS {
        if !named.contains(target)
            && let Ok(directive) = format!("{target}=error").parse()
        {
            filter = filter.add_directive(directive);
        }
    }
    filter
}

/// Install the JSON subscriber on stderr, written by a background thread. `RUST_LOG`
/// overrides `default_level`. Keep the guard until the process ends.
pub(crate) fn init(default_level: &str) -> LogGuard {
    let rust_log = std::env::var(EnvFilter::DEFAULT_ENV).ok();
    let filter = log_filter(rust_log.as_deref(), default_level);
    let builder = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_env_filter(filter);
    let queue = log_queue(LOG_QUEUE_LINES);
    let writer_queue = queue.clone();
    let spawned = std::thread::Builder::new()
        .name("fleetgate-log".into())
        .spawn(move || write_lines(&writer_queue, &mut io::stderr()));
    let Ok(handle) = spawned else {
        // No thread for the queue: write synchronously rather than lose lines.
        let _ = builder.with_writer(io::stderr).try_init();
        return LogGuard { handle: None };
    };
    if QUEUE.set(queue.clone()).is_err()
        || builder
            .with_writer(QueueWriter { queue })
            .try_init()
            .is_err()
    {
        // A subscriber was already installed; this thread's queue is not used.
        return LogGuard { handle: None };
    }
    LogGuard {
        handle: Some(handle),
    }
}

/// How long the writer sleeps when the queue is empty while lines keep coming.
const POLL: Duration = Duration::from_millis(1);
/// Empty polls in a row before the writer blocks until the next line.
const IDLE_POLLS: u32 = 50;

/// The writer thread: take every line queued since the last batch, write them with one call,
/// and say how many lines were dropped since the last report. While lines keep coming it
/// polls every [`POLL`] (a sender then never has to wake it, which would cost a futex call per
/// line); after [`IDLE_POLLS`] empty polls it lets go of its buffers and blocks until the next
/// line.
fn write_lines(queue: &LogQueue, out: &mut impl Write) {
    let mut reported = 0;
    let mut idle = 0;
    let mut batch = Vec::new();
    loop {
        let block = idle >= IDLE_POLLS;
        if block {
            batch = Vec::new();
            queue.shrink();
        }
        let taken = queue.take(&mut batch, block);
        let _ = out.write_all(&batch);
        batch.clear();
        report_drops(out, &mut reported);
        let _ = out.flush();
        match taken {
            Batch::Stop => break,
            Batch::Lines => idle = 0,
            Batch::Empty => idle += 1,
        }
        // Lines keep coming: let them gather for one poll and take them in one batch.
        std::thread::sleep(POLL);
    }
}

/// Report drops not yet reported.
fn report_drops(out: &mut impl Write, reported: &mut u64) {
    let dropped = dropped_lines();
    if dropped > *reported {
        let _ = writeln!(
            out,
            r#"{{"level":"WARN","target":"fleetgate.log","message":"dropped log lines: the log queue was full","dropped_total":{dropped}}}"#
        );
        *reported = dropped;
    }
}

/// A [`MakeWriter`] whose writers queue each formatted event without blocking.
#[derive(Clone, Debug)]
struct QueueWriter {
    queue: Arc<LogQueue>,
}

impl<'a> MakeWriter<'a> for QueueWriter {
    type Writer = QueueWriter;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl Write for QueueWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // The formatter hands over one whole event per call.
        self.queue.push(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `scheme://host[:port]/path` of a URL: what may appear in logs. Query and fragment are
/// dropped, and any secret a rule of gate E1 finds in what is left is replaced by
/// `[redacted:<rule>]` ([`crate::judge::gates::secret_url::redact_secrets`]), so a line about a
/// refused URL never repeats the secret it refused.
pub fn redact_url(url: &str) -> String {
    // The parse below lower-cases the host: a token that is a secret only in its own case
    // (`ASIA…`) is judged on the host as written.
    let host_secret = crate::base::url_form::urlsplit(url).ok().and_then(|parts| {
        let netloc = parts.netloc();
        let hostinfo = netloc.rsplit_once('@').map_or(netloc, |(_, h)| h);
        let host = hostinfo.split_once(':').map_or(hostinfo, |(h, _)| h);
        // A host already in its canonical form (lower-case ASCII, no escapes) is shown as
        // written, and the redaction below judges it there.
        let canonical = host
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
        if canonical {
            return None;
        }
        match crate::judge::gates::secret_url::check_host_secret(host) {
            crate::judge::gates::Verdict::Deny(reason) => reason.rule().map(str::to_string),
            _ => None,
        }
    });
    let shown = match url::Url::parse(url) {
        Ok(u) => {
            let redacted;
            let host = match &host_secret {
                Some(rule) => {
                    redacted = format!("[redacted:{rule}]");
                    redacted.as_str()
                }
                None => u.host_str().unwrap_or(""),
            };
            match u.port() {
                Some(p) => format!("{}://{host}:{p}{}", u.scheme(), u.path()),
                None => format!("{}://{host}{}", u.scheme(), u.path()),
            }
        }
        Err(_) => return "<unparseable>".to_string(),
    };
    crate::judge::gates::secret_url::redact_secrets(&shown).into_owned()
}

#[cfg(test)]
mod tests;
