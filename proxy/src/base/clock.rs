//! Wall-clock time as the gate records it: the one place a `SystemTime` becomes a Unix number
//! (seconds for status and metrics, milliseconds for cache headers, a nanosecond tail for
//! temporary file names). A time before the epoch reads as 0.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Time since the epoch; zero before it.
fn since_epoch(at: SystemTime) -> Duration {
    at.duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// Whole seconds since the epoch at `at`.
pub(crate) fn unix_secs(at: SystemTime) -> u64 {
    since_epoch(at).as_secs()
}

/// Whole milliseconds since the epoch at `at`.
pub(crate) fn unix_millis(at: SystemTime) -> u64 {
    u64::try_from(since_epoch(at).as_millis()).unwrap_or(u64::MAX)
}

/// Whole seconds since the epoch now.
pub(crate) fn now_secs() -> u64 {
    unix_secs(SystemTime::now())
}

/// Whole seconds since the epoch now, signed (gauges and state files keep `i64`).
pub(crate) fn now_secs_i64() -> i64 {
    i64::try_from(now_secs()).unwrap_or(i64::MAX)
}

/// The sub-second nanoseconds of now: a cheap varying part of a temporary file's name.
pub(crate) fn now_subsec_nanos() -> u32 {
    since_epoch(SystemTime::now()).subsec_nanos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_epoch_and_before_read_as_zero_and_units_agree() {
        assert_eq!(unix_secs(UNIX_EPOCH), 0);
        assert_eq!(unix_millis(UNIX_EPOCH - Duration::from_secs(5)), 0);
        let at = UNIX_EPOCH + Duration::from_millis(1_700_000_000_250);
        assert_eq!(unix_secs(at), 1_700_000_000);
        assert_eq!(unix_millis(at), 1_700_000_000_250);
        assert!((fleetgate_report::time::unix_secs_f64(at) - 1_700_000_000.25).abs() < 1e-6);
    }
}
