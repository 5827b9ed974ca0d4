//! How long to wait before sending again: exponential backoff with full
//! jitter (as the OTLP specification asks), or what the receiver's
//! `Retry-After` says, never past the time the next push is due.

use std::time::Duration;

/// The first wait.
const FIRST: Duration = Duration::from_millis(500);
/// The longest wait.
const MOST: Duration = Duration::from_secs(30);

/// The waits of one push's retries.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    attempt: u32,
}

impl Backoff {
    pub(crate) fn new() -> Backoff {
        Backoff { attempt: 0 }
    }

    /// The wait before the next try: the receiver's `after` if it gave one
    /// (capped at the longest wait), else a random time up to an
    /// exponentially growing ceiling, so many hosts retrying at once spread
    /// out.
    pub(crate) fn next(&mut self, after: Option<Duration>) -> Duration {
        let ceiling = FIRST.saturating_mul(1u32 << self.attempt.min(16)).min(MOST);
        self.attempt = self.attempt.saturating_add(1);
        match after {
            Some(after) => after.min(MOST),
            None => ceiling.mul_f64(0.5 + fastrand::f64() / 2.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_a_ceiling_with_jitter_and_follows_retry_after() {
        let mut backoff = Backoff::new();
        let waits: Vec<Duration> = (0..10).map(|_| backoff.next(None)).collect();
        for (i, wait) in waits.iter().enumerate() {
            let ceiling = FIRST.saturating_mul(1 << i).min(MOST);
            assert!(*wait <= ceiling && *wait >= ceiling / 2, "{i}: {wait:?}");
        }
        assert_eq!(
            backoff.next(Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(backoff.next(Some(Duration::from_secs(3600))), MOST);
    }
}
