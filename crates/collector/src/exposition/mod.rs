//! Exposition: merged families in, bytes out. Pure functions, no I/O.
//!
//! Both encoders reproduce `prometheus_client` 0.26's `generate_latest`
//! byte for byte for the families a multiprocess directory can produce,
//! including its default `underscores` escaping of names that are not valid
//! legacy Prometheus names.
//!
//! The modules depend one way: the encoders write lines through
//! `sample_lines`; `format` picks an encoder; the line cache uses both; a
//! body is written through `format` and the line cache.

mod body;
mod exemplar;
mod format;
mod line_cache;
pub(crate) mod names;
mod openmetrics;
mod prometheus;
mod sample_lines;

pub use body::{encode_openmetrics_all, encode_prometheus_all, Body};
pub use format::{Format, OPENMETRICS_CONTENT_TYPE, PROMETHEUS_CONTENT_TYPE};
pub use line_cache::LineCache;
pub use openmetrics::encode_openmetrics;
pub use prometheus::encode_prometheus;
