//! Where the metrics are served: `/metrics` unless the host says otherwise,
//! and what a host may say.

/// The default path of the metrics.
pub const DEFAULT_METRICS_PATH: &str = "/metrics";

/// Why a path cannot be the metrics path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MetricsPathError {
    /// Not an absolute path.
    #[error("{0:?} must start with /")]
    NotAbsolute(String),
    /// `/` or under `/-/`, which the endpoint serves itself.
    #[error("{0:?} is taken: / is the status page, /-/ the health checks")]
    Taken(String),
    /// A pattern character (`{`, `}`, `*`, `?`, `#`) or a trailing `/`.
    #[error("{0:?}: a plain path without a trailing / (e.g. /metrics)")]
    NotPlain(String),
}

/// Checks a metrics path: starts with `/`, is not `/` and not under `/-/`.
///
/// ```
/// use multiprom_http::{valid_metrics_path, MetricsPathError};
/// assert!(valid_metrics_path("/federate/metrics").is_ok());
/// assert_eq!(
///     valid_metrics_path("metrics"),
///     Err(MetricsPathError::NotAbsolute("metrics".into()))
/// );
/// assert!(valid_metrics_path("/").is_err());
/// assert!(valid_metrics_path("/-/ready").is_err());
/// ```
pub fn valid_metrics_path(path: &str) -> Result<(), MetricsPathError> {
    if !path.starts_with('/') {
        return Err(MetricsPathError::NotAbsolute(path.to_owned()));
    }
    if path == "/" || path.starts_with("/-/") {
        return Err(MetricsPathError::Taken(path.to_owned()));
    }
    if path.contains(['{', '}', '*', '?', '#']) || path.ends_with('/') {
        return Err(MetricsPathError::NotPlain(path.to_owned()));
    }
    Ok(())
}
