//! OTLP times: nanoseconds since the Unix epoch.

use std::time::{SystemTime, UNIX_EPOCH};

/// `at` in nanoseconds (a time before the epoch, which no collection has,
/// is 0: OTLP's times are unsigned).
pub(super) fn nanos(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |since| {
        u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
    })
}

/// Seconds since the epoch (an exemplar's, as Python's `time.time()` gives
/// them) in nanoseconds. The whole seconds and the fraction are converted
/// apart: the product with 1e9 as one float would lose the last few
/// hundred nanoseconds.
pub(super) fn nanos_of_seconds(seconds: f64) -> u64 {
    // NaN and times before the epoch: 0.
    if seconds.is_nan() || seconds <= 0.0 {
        return 0;
    }
    let whole = seconds.trunc();
    // Saturating, as `as` converts a float: no real time is out of range.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let (whole_nanos, fraction_nanos) = (
        (whole as u64).saturating_mul(1_000_000_000),
        ((seconds - whole) * 1e9).round() as u64,
    );
    whole_nanos.saturating_add(fraction_nanos)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn times_are_nanoseconds() {
        let at = UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789);
        assert_eq!(nanos(at), 1_700_000_000_123_456_789);
        assert_eq!(nanos(UNIX_EPOCH - Duration::from_secs(1)), 0);
    }

    #[test]
    fn exemplar_seconds_keep_their_microseconds() {
        assert_eq!(
            nanos_of_seconds(1_700_000_000.25),
            1_700_000_000_250_000_000
        );
        let micros = nanos_of_seconds(1_700_000_000.123_456) / 1_000;
        assert_eq!(micros, 1_700_000_000_123_456);
        assert_eq!(nanos_of_seconds(-1.0), 0);
        assert_eq!(nanos_of_seconds(f64::NAN), 0);
    }
}
