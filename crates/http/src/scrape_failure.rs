//! [`ScrapeFailure`]: why a bounded collection produced no result, and the
//! answer a request gets then.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use multiprom_collector::CollectError;

use crate::plain_response::plain;
use crate::self_metrics::ScrapeResult;

/// Why a bounded collection produced no result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScrapeFailure {
    /// Every slot stayed busy for the whole queue wait.
    #[error("too many scrapes at once (limit {limit}); try again")]
    Busy {
        /// The slot count.
        limit: usize,
    },
    /// The collection overran the timeout.
    #[error("scrape timed out after {0:?}")]
    Timeout(Duration),
    /// The directory could not be listed.
    #[error(transparent)]
    Collect(#[from] CollectError),
    /// The collection panicked (a bug); the next one starts afresh.
    #[error("scrape failed: {0}")]
    Panicked(String),
}

impl ScrapeFailure {
    pub(crate) fn result(&self) -> ScrapeResult {
        match self {
            ScrapeFailure::Busy { .. } => ScrapeResult::Busy,
            ScrapeFailure::Timeout(_) => ScrapeResult::Timeout,
            ScrapeFailure::Collect(_) | ScrapeFailure::Panicked(_) => ScrapeResult::Error,
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            ScrapeFailure::Busy { .. } | ScrapeFailure::Timeout(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ScrapeFailure::Collect(_) | ScrapeFailure::Panicked(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }
}

/// Called on the blocking pool before each collection, while it holds its
/// scrape slot: lets the overload tests hold a collection.
/// The plain-text answer to a request whose collection failed: 503 with
/// `Retry-After` for load shedding, 500 otherwise. Logged.
pub(crate) fn failure_response(failure: &ScrapeFailure) -> Response {
    match failure {
        ScrapeFailure::Busy { .. } => log_busy(failure),
        ScrapeFailure::Timeout(_) => tracing::warn!("answering 503: {failure}"),
        _ => tracing::error!("answering 500: {failure}"),
    }
    let mut response = plain(failure.status(), format!("multiprom: {failure}"));
    if failure.status() == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

/// How often a scrape refused for want of a slot is logged: any client can
/// send those as fast as it likes, and each would be a log line.
/// `multiprom_scrapes_total{result="busy"}` counts every one.
const BUSY_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// Refused scrapes: when one was last logged, and how many were not since.
static BUSY_LOGGED: Mutex<Throttle> = Mutex::new(Throttle {
    last: None,
    unlogged: 0,
});

/// Logs a 503 for want of a slot, at most once a [`BUSY_LOG_INTERVAL`],
/// saying how many went unlogged before it.
fn log_busy(failure: &ScrapeFailure) {
    let admitted = BUSY_LOGGED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .admit(Instant::now(), BUSY_LOG_INTERVAL);
    match admitted {
        None => {}
        Some(0) => tracing::warn!("answering 503: {failure} (logged at most once a minute)"),
        Some(more) => tracing::warn!(
            "answering 503: {failure} (logged at most once a minute; {more} more since the last)"
        ),
    }
}

/// Which of a stream of events are logged: the first, then the first
/// after each `interval` since the last logged.
#[derive(Debug)]
struct Throttle {
    last: Option<Instant>,
    unlogged: u64,
}

impl Throttle {
    /// Whether the event at `now` is logged: `Some(events not logged
    /// since the last one)`, or `None`.
    fn admit(&mut self, now: Instant, interval: Duration) -> Option<u64> {
        if self
            .last
            .is_some_and(|last| now.saturating_duration_since(last) < interval)
        {
            self.unlogged += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.unlogged))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_scrapes_are_logged_once_an_interval_with_a_count() {
        let mut throttle = Throttle {
            last: None,
            unlogged: 0,
        };
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let minute = Duration::from_secs(60);
        let admitted: Vec<Option<u64>> = [0, 1, 2, 59_999, 60_000, 60_001, 200_000]
            .into_iter()
            .map(|ms| throttle.admit(at(ms), minute))
            .collect();
        assert_eq!(
            admitted,
            [Some(0), None, None, None, Some(3), None, Some(1)]
        );
    }
}
