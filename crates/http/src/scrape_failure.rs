//! [`ScrapeFailure`]: why a bounded collection produced no result, and the
//! answer a request gets then.

use std::time::Duration;

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
        ScrapeFailure::Busy { .. } | ScrapeFailure::Timeout(_) => {
            tracing::warn!("answering 503: {failure}")
        }
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
