//! How the controller's watches back off after an error: from 250 ms, doubling, at most 5 s.
//!
//! kube-runtime's default (800 ms doubling to 30 s, reset after 120 s) is client-go's, but
//! kube-runtime also backs off before the relist a `410 Gone` asks for, which client-go does
//! at once. After an API server restart the two waits add up: every watch has grown its delay
//! to 30 s while the server was down, then resumes from a resourceVersion the new server's
//! watch cache no longer holds (410) and waits up to 30 s again before relisting. Measured on
//! a real kube-apiserver (`tests/tests/k8s_cluster_wide/outage.rs`), that left the controller
//! blind to FleetPolicy edits for over 90 s after the server was back. The watches here are
//! one namespace's few objects, so a 5 s ceiling costs the API server little and bounds that
//! blindness to a few seconds.

use std::time::Duration;

use kube::runtime::utils::Backoff;

#[cfg(test)]
mod tests;

/// First delay after an error.
pub const MIN_DELAY: Duration = Duration::from_millis(250);
/// Longest delay between two attempts.
pub const MAX_DELAY: Duration = Duration::from_secs(5);

/// Exponential backoff from [`MIN_DELAY`] to [`MAX_DELAY`], reset by the stream on success.
#[derive(Clone, Debug)]
pub struct WatchBackoff {
    next: Duration,
}

impl Default for WatchBackoff {
    fn default() -> Self {
        Self { next: MIN_DELAY }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.next;
        self.next = (delay * 2).min(MAX_DELAY);
        Some(delay)
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = MIN_DELAY;
    }
}
