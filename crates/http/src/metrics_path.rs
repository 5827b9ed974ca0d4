//! Where the metrics are served: `/metrics` unless the host says otherwise,
//! and what a host may say.

/// The default path of the metrics.
pub const DEFAULT_METRICS_PATH: &str = "/metrics";

/// Checks a metrics path: starts with `/`, is not `/` and not under `/-/`.
///
/// ```
/// use multiprom_http::valid_metrics_path;
/// assert!(valid_metrics_path("/federate/metrics").is_ok());
/// assert!(valid_metrics_path("metrics").is_err());
/// assert!(valid_metrics_path("/").is_err());
/// assert!(valid_metrics_path("/-/ready").is_err());
/// ```
pub fn valid_metrics_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!("{path:?} must start with /"));
    }
    if path == "/" || path.starts_with("/-/") {
        return Err(format!(
            "{path:?} is taken: / is the status page, /-/ the health checks"
        ));
    }
    if path.contains(['{', '}', '*', '?', '#']) || path.ends_with('/') {
        return Err(format!(
            "{path:?}: a plain path without a trailing / (e.g. /metrics)"
        ));
    }
    Ok(())
}
