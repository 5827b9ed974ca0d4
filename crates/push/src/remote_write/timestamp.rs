//! Remote-Write timestamps: milliseconds since the Unix epoch.

use std::time::{SystemTime, UNIX_EPOCH};

/// `at` in milliseconds, as Prometheus's `timestamp.FromTime` gives them
/// (`time.Time.UnixMilli`: whole milliseconds, earlier times negative).
pub(super) fn millis(at: SystemTime) -> i64 {
    match at.duration_since(UNIX_EPOCH) {
        Ok(since) => i64::try_from(since.as_millis()).unwrap_or(i64::MAX),
        Err(before) => {
            let before = i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX);
            -before
        }
    }
}

/// Seconds since the epoch (an exemplar's, as Python's `time.time()`
/// gives them) in milliseconds, rounded as Prometheus's
/// `timestamp.FromFloatSeconds` rounds them: `time.time()`'s float is
/// seldom exactly the millisecond it stands for, and truncating would
/// take `…0.123` stored as `…0.12299999` to the millisecond before.
pub(super) fn millis_of_seconds(seconds: f64) -> i64 {
    // Saturating, as `as` converts a float: no real time is out of range.
    #[allow(clippy::cast_possible_truncation)]
    let millis = (seconds * 1000.0).round() as i64;
    millis
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn times_are_whole_milliseconds() {
        let at = UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_999);
        assert_eq!(millis(at), 1_700_000_000_123);
        assert_eq!(millis(UNIX_EPOCH - Duration::from_millis(5)), -5);
    }

    #[test]
    fn exemplar_seconds_are_rounded_to_milliseconds() {
        assert_eq!(millis_of_seconds(1_700_000_000.123), 1_700_000_000_123);
        assert_eq!(millis_of_seconds(0.0004), 0);
        assert_eq!(millis_of_seconds(0.0006), 1);
    }
}
