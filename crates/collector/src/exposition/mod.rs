//! Exposition: merged families in, bytes out. Pure functions, no I/O.
//!
//! Both encoders reproduce `prometheus_client` 0.26's `generate_latest`
//! byte for byte for the families a multiprocess directory can produce,
//! including its default `underscores` escaping of names that are not valid
//! legacy Prometheus names.

mod line_cache;
pub(crate) mod names;
mod openmetrics;
mod prometheus;

pub use line_cache::LineCache;
pub use openmetrics::encode_openmetrics;
pub use prometheus::encode_prometheus;

use crate::family::MergedFamily;

/// `Content-Type` of Prometheus text format 0.0.4.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// `Content-Type` of OpenMetrics 1.0.0.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// An exposition format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Format {
    /// Prometheus text format 0.0.4.
    #[default]
    Prometheus,
    /// OpenMetrics 1.0.0.
    OpenMetrics,
}

impl Format {
    /// The HTTP `Content-Type` of this format.
    #[must_use]
    pub const fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => PROMETHEUS_CONTENT_TYPE,
            Format::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
        }
    }

    /// Appends `families` in this format to `out`. OpenMetrics output ends
    /// with `# EOF`.
    pub fn encode(self, families: &[MergedFamily], out: &mut String) {
        match self {
            Format::Prometheus => encode_prometheus(families, out),
            Format::OpenMetrics => encode_openmetrics(families, out),
        }
    }
}
