//! Tracing setup and the canonical decision line.
//!
//! Every extract item produces exactly one `egress.decision` event at info (allow) or warn
//! (deny) with the fields below; everything else stays at debug. URLs are logged without
//! query, fragment or userinfo, so a refused secret is never written to a log.
//!
//! Lines are formatted on the worker that logs them and handed to one writer thread through a
//! bounded queue, so a slow or blocked stderr never stalls a request: when the queue is full
//! the line is dropped and counted, and the writer reports the count in its next line. The
//! queue grows with the lines waiting in it (the bound is a count, not a preallocated array),
//! so an idle gate holds no room for lines it is not logging.

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Field: the gate that decided (`secret_url`, `ssrf`, `website_blocklist`, `vendor`, ...).
pub const GATE: &str = "gate";
/// Field: `allow`, `deny` or `report`.
pub const VERDICT: &str = "verdict";
/// Field: the stable reason code.
pub const REASON: &str = "reason";
/// Field: the cache outcome code.
pub const CACHE: &str = "cache";
/// Field: the backend that served (or would have served) the item.
pub const VENDOR: &str = "vendor";
/// Field: the upstream HTTP status, when there was one.
pub const UPSTREAM_STATUS: &str = "upstream_status";
/// Field: time spent on the item, in milliseconds.
pub const DURATION_MS: &str = "duration_ms";

/// Log lines that may wait for the writer thread; past this, new lines are dropped.
pub const LOG_QUEUE_LINES: usize = 16_384;

/// Lines dropped because the queue was full, since the process started.
static DROPPED: AtomicU64 = AtomicU64::new(0);

pub mod decision;
pub mod line;

/// Queue one finished line (see [`line::JsonLine`]) for the writer thread, dropping and
/// counting it when the queue is full. `false` when there is no queue (no [`init`] ran): the
/// caller then logs through `tracing`.
pub fn queue_line(bytes: Vec<u8>) -> bool {
    let Some(tx) = QUEUE.get() else {
        return false;
    };
    tx.try_send(Line::Bytes(bytes));
    true
}

/// Lines dropped so far because the log queue was full.
pub fn dropped_lines() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Keeps the writer thread alive; dropping it writes out every queued line and stops it.
#[derive(Debug)]
pub struct LogGuard {
    handle: Option<JoinHandle<()>>,
}

impl Drop for LogGuard {
    fn drop(&mut self) {
        // The subscriber's sender stays alive (it is global), so ask for a flush-and-stop.
        if let Some(tx) = QUEUE.get() {
            tx.try_send(Line::Stop);
        }
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// One message to the writer thread.
enum Line {
    Bytes(Vec<u8>),
    Stop,
}

/// The sender the global subscriber's writers use.
static QUEUE: std::sync::OnceLock<LogSender> = std::sync::OnceLock::new();

/// The sending end of the log queue: at most `capacity` lines wait; past that a line is
/// dropped and counted in [`DROPPED`].
#[derive(Clone, Debug)]
struct LogSender {
    tx: Sender<Line>,
    waiting: Arc<AtomicUsize>,
    capacity: usize,
}

/// The writer thread's end of the log queue.
#[derive(Debug)]
struct LogReceiver {
    rx: Receiver<Line>,
    waiting: Arc<AtomicUsize>,
}

/// A log queue holding at most `capacity` lines.
fn log_queue(capacity: usize) -> (LogSender, LogReceiver) {
    let (tx, rx) = mpsc::channel();
    let waiting = Arc::new(AtomicUsize::new(0));
    let sender = LogSender {
        tx,
        waiting: waiting.clone(),
        capacity,
    };
    (sender, LogReceiver { rx, waiting })
}

// === impl LogSender ===

impl LogSender {
    /// Queue `line` unless `capacity` lines already wait (then it is dropped and counted). A
    /// stop is always queued. Never blocks.
    fn try_send(&self, line: Line) {
        if matches!(line, Line::Bytes(_))
            && self.waiting.fetch_add(1, Ordering::AcqRel) >= self.capacity
        {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            DROPPED.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // Disconnected: the writer is gone and nothing can be written any more.
        let _ = self.tx.send(line);
    }
}

// === impl LogReceiver ===

impl LogReceiver {
    fn try_recv(&self) -> Result<Line, TryRecvError> {
        self.rx.try_recv().inspect(|line| self.taken(line))
    }

    fn recv(&self) -> Result<Line, mpsc::RecvError> {
        self.rx.recv().inspect(|line| self.taken(line))
    }

    fn taken(&self, line: &Line) {
        if matches!(line, Line::Bytes(_)) {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Install the JSON subscriber on stderr, written by a background thread. `RUST_LOG`
/// overrides `default_level`. Keep the guard until the process ends.
pub fn init(default_level: &str) -> LogGuard {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_env_filter(filter);
    let (tx, rx) = log_queue(LOG_QUEUE_LINES);
    let spawned = std::thread::Builder::new()
        .name("fleetgate-log".into())
        .spawn(move || write_lines(&rx, &mut io::BufWriter::new(io::stderr())));
    let Ok(handle) = spawned else {
        // No thread for the queue: write synchronously rather than lose lines.
        let _ = builder.with_writer(io::stderr).try_init();
        return LogGuard { handle: None };
    };
    if QUEUE.set(tx.clone()).is_err() || builder.with_writer(QueueWriter { tx }).try_init().is_err()
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

/// The writer thread: write what is queued, flush whenever the queue runs empty, and say how
/// many lines were dropped since the last report. While lines keep coming it polls (a sender
/// then never has to wake it, which would cost a futex call per line); after
/// [`IDLE_POLLS`] empty polls it blocks until the next line.
fn write_lines(rx: &LogReceiver, out: &mut impl Write) {
    let mut reported = 0;
    let mut idle = 0;
    loop {
        let line = match rx.try_recv() {
            Ok(line) => line,
            Err(TryRecvError::Disconnected) => break,
            Err(TryRecvError::Empty) => {
                finish_batch(out, &mut reported);
                if idle < IDLE_POLLS {
                    idle += 1;
                    std::thread::sleep(POLL);
                    continue;
                }
                match rx.recv() {
                    Ok(line) => line,
                    Err(_) => break,
                }
            }
        };
        idle = 0;
        match line {
            Line::Bytes(bytes) => {
                let _ = out.write_all(&bytes);
            }
            Line::Stop => break,
        }
    }
    finish_batch(out, &mut reported);
}

/// Report drops not yet reported, then flush.
fn finish_batch(out: &mut impl Write, reported: &mut u64) {
    let dropped = dropped_lines();
    if dropped > *reported {
        let _ = writeln!(
            out,
            r#"{{"level":"WARN","target":"fleetgate.log","message":"dropped log lines: the log queue was full","dropped_total":{dropped}}}"#
        );
        *reported = dropped;
    }
    let _ = out.flush();
}

/// A [`MakeWriter`] whose writers queue each formatted event without blocking.
#[derive(Clone, Debug)]
struct QueueWriter {
    tx: LogSender,
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
        self.tx.try_send(Line::Bytes(buf.to_vec()));
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `scheme://host[:port]/path` of a URL: what may appear in logs. Query and fragment are
/// dropped, and any secret a rule of gate E1 finds in what is left is replaced by
/// `[redacted:<rule>]` ([`crate::gates::secret_url::redact_secrets`]), so a line about a
/// refused URL never repeats the secret it refused.
pub fn redact_url(url: &str) -> String {
    // The parse below lower-cases the host: a token that is a secret only in its own case
    // (`ASIA…`) is judged on the host as written.
    let host_secret = crate::url_form::urlsplit(url).ok().and_then(|parts| {
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
        match crate::gates::secret_url::check_host_secret(host) {
            crate::gates::Verdict::Deny(reason) => reason.rule().map(str::to_string),
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
    crate::gates::secret_url::redact_secrets(&shown).into_owned()
}

#[cfg(test)]
mod tests;
