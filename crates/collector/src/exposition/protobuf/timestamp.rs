//! An exemplar's timestamp (seconds since the epoch as a float, as Python's
//! `time.time()` gives it) as a `google.protobuf.Timestamp`.

use prost_types::Timestamp;

/// `seconds` split into whole seconds and nanoseconds (0 to 999,999,999,
/// also before 1970, as the message requires), rounded to the nearest
/// nanosecond; `None` when it is not finite or beyond what the message holds.
pub(super) fn timestamp(seconds: f64) -> Option<Timestamp> {
    // The message's range is years 1 to 9999; i64 seconds hold far more,
    // and any f64 in i64's range converts exactly after `floor`.
    const LIMIT: f64 = 253_402_300_800.0; // 10000-01-01T00:00:00Z
    if !seconds.is_finite() || seconds.abs() >= LIMIT {
        return None;
    }
    let whole = seconds.floor();
    #[allow(clippy::cast_possible_truncation)] // in range, checked above
    let (mut secs, mut nanos) = (whole as i64, ((seconds - whole) * 1e9).round() as i32);
    if nanos >= 1_000_000_000 {
        secs += 1;
        nanos -= 1_000_000_000;
    }
    Some(Timestamp {
        seconds: secs,
        nanos,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(seconds: f64) -> Option<(i64, i32)> {
        timestamp(seconds).map(|t| (t.seconds, t.nanos))
    }

    #[test]
    fn seconds_and_nanoseconds() {
        assert_eq!(split(1_700_000_000.25), Some((1_700_000_000, 250_000_000)));
        assert_eq!(split(0.0), Some((0, 0)));
        // Before the epoch the nanoseconds still count forwards.
        assert_eq!(split(-1.5), Some((-2, 500_000_000)));
        // Rounding up to a whole second carries.
        assert_eq!(split(0.999_999_999_9), Some((1, 0)));
        assert_eq!(split(f64::NAN), None);
        assert_eq!(split(f64::INFINITY), None);
        assert_eq!(split(1e300), None);
    }
}
