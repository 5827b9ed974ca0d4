//! The wall clock, as Python's `time.time()` reads it.

use std::time::{SystemTime, UNIX_EPOCH};

/// Python's `time.time()`.
pub(crate) fn unix_time() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
