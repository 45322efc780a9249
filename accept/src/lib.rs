//! The accept step every listener shares, built to survive running out of descriptors.
//!
//! When the process hits its descriptor limit (`EMFILE`), the system's (`ENFILE`), or runs out
//! of socket memory (`ENOMEM`, `ENOBUFS`), `accept` fails at once for as long as the pending
//! connection waits in the backlog: a loop that only logs and retries spins a core and writes
//! a line per try. [`Acceptor`] instead backs off (10 ms, doubling to 1 s) while such errors
//! last, writes at most one line per [`LOG_INTERVAL`] saying how many failures it folded in,
//! and counts every failure. The pending connection stays in the kernel's backlog and is
//! accepted once a descriptor frees up.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use prometheus::IntCounterVec;
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// The first pause after a resource error.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(10);
/// The longest pause between tries while resource errors last.
pub const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// At most one log line per this interval while accepts keep failing.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Why an accept failed, as a metric label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcceptError {
    /// Out of descriptors or memory: retrying at once cannot succeed.
    Resource,
    /// A connection that failed before it was accepted (reset, aborted, ...).
    Connection,
}

/// Accepts connections for one listener, backing off while resources are exhausted.
#[derive(Debug)]
pub struct Acceptor {
    listener: &'static str,
    errors: Option<IntCounterVec>,
    backoff: Duration,
    /// Failures since the last log line, and when that line was written.
    unlogged: u64,
    logged_at: Option<Instant>,
}

// === impl AcceptError ===

impl AcceptError {
    /// Classify an `accept` error.
    pub fn of(e: &io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::ENOBUFS) => Self::Resource,
            _ => Self::Connection,
        }
    }

    /// The stable metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Resource => "resource",
            Self::Connection => "connection",
        }
    }
}

// === impl Acceptor ===

impl Acceptor {
    /// An acceptor for the listener named `listener`, counting failures in `errors` (labels
    /// `listener`, `kind`) when given.
    pub fn new(listener: &'static str, errors: Option<IntCounterVec>) -> Self {
        Self {
            listener,
            errors,
            backoff: Duration::ZERO,
            unlogged: 0,
            logged_at: None,
        }
    }

    /// The next connection. Never fails: errors are counted, logged at a bounded rate and, for
    /// resource exhaustion, waited out. Cancel-safe (a pause in progress is simply dropped).
    pub async fn accept(&mut self, listener: &TcpListener) -> (TcpStream, SocketAddr) {
        loop {
            match listener.accept().await {
                Ok(accepted) => {
                    self.backoff = Duration::ZERO;
                    return accepted;
                }
                Err(e) => {
                    let pause = self.failed(&e, Instant::now());
                    if !pause.is_zero() {
                        tokio::time::sleep(pause).await;
                    }
                }
            }
        }
    }

    /// Record one failure at `now`; the pause before the next try.
    fn failed(&mut self, e: &io::Error, now: Instant) -> Duration {
        let kind = AcceptError::of(e);
        if let Some(errors) = &self.errors {
            errors
                .with_label_values(&[self.listener, kind.as_str()])
                .inc();
        }
        self.backoff = match kind {
            AcceptError::Resource if self.backoff.is_zero() => FIRST_BACKOFF,
            AcceptError::Resource => (self.backoff * 2).min(MAX_BACKOFF),
            AcceptError::Connection => Duration::ZERO,
        };
        self.unlogged += 1;
        let due = self
            .logged_at
            .is_none_or(|at| now.duration_since(at) >= LOG_INTERVAL);
        if due {
            tracing::warn!(
                listener = self.listener,
                error = %e,
                kind = kind.as_str(),
                failures = self.unlogged,
                backoff_ms = self.backoff.as_millis() as u64,
                "failed to accept connections (one line per {} s at most)",
                LOG_INTERVAL.as_secs()
            );
            self.unlogged = 0;
            self.logged_at = Some(now);
        }
        self.backoff
    }
}

#[cfg(test)]
mod tests {
    use prometheus::Opts;

    use super::*;

    fn counters() -> IntCounterVec {
        IntCounterVec::new(Opts::new("t", "t"), &["listener", "kind"]).expect("counter")
    }

    #[test]
    fn resource_errors_back_off_doubling_to_the_cap_and_reset_on_other_errors() {
        let errors = counters();
        let mut a = Acceptor::new("forward_proxy", Some(errors.clone()));
        let now = Instant::now();
        let emfile = io::Error::from_raw_os_error(libc::EMFILE);
        let pauses: Vec<u128> = (0..9).map(|_| a.failed(&emfile, now).as_millis()).collect();
        assert_eq!(pauses, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        let aborted = io::Error::from_raw_os_error(libc::ECONNABORTED);
        assert_eq!(a.failed(&aborted, now), Duration::ZERO);
        let count = |kind| errors.with_label_values(&["forward_proxy", kind]).get();
        assert_eq!(count("resource"), 9, "every resource failure must count");
        assert_eq!(count("connection"), 1);
    }

    #[test]
    fn one_line_per_interval_folds_the_failures_in_between() {
        let mut a = Acceptor::new("api", None);
        let start = Instant::now();
        let enfile = io::Error::from_raw_os_error(libc::ENFILE);
        a.failed(&enfile, start);
        assert_eq!(a.unlogged, 0, "the first failure is logged at once");
        for i in 1..=500 {
            a.failed(&enfile, start + Duration::from_millis(i));
        }
        assert_eq!(
            a.unlogged, 500,
            "failures inside the interval are only counted"
        );
        a.failed(&enfile, start + LOG_INTERVAL);
        assert_eq!(
            a.unlogged, 0,
            "the next line is written once the interval passed"
        );
    }
}
