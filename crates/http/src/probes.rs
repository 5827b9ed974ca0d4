//! `GET /-/healthy` and `GET /-/ready`, as Prometheus and its exporters
//! answer them, for liveness and readiness probes.
//!
//! * healthy: the process answers HTTP. Always 200.
//! * ready: the directory can be listed right now, so a scrape would read
//!   it. 200, or 503 saying why (missing, not a directory, no permission,
//!   or a listing that takes longer than a second, as on a hung mount).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::Response;

use crate::plain_response::plain;

/// How long readiness waits for the directory to be listed.
const READY_WAIT: Duration = Duration::from_secs(1);

/// Liveness: always.
pub(crate) async fn healthy() -> Response {
    plain(StatusCode::OK, "multiprom is Healthy.".to_owned())
}

/// Readiness of `dir`.
pub(crate) async fn ready(dir: Arc<Path>) -> Response {
    let shown = dir.display().to_string();
    let listing = tokio::task::spawn_blocking(move || {
        std::fs::read_dir(&dir)
            .map(drop)
            .map_err(|e| format!("{}: cannot list: {e}", dir.display()))
    });
    let reason = match tokio::time::timeout(READY_WAIT, listing).await {
        Ok(Ok(Ok(()))) => return plain(StatusCode::OK, "multiprom is Ready.".to_owned()),
        Ok(Ok(Err(reason))) => reason,
        Ok(Err(join)) => join.to_string(),
        Err(_) => format!("{shown}: listing takes longer than {READY_WAIT:?}"),
    };
    plain(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("multiprom is not ready: {reason}"),
    )
}
