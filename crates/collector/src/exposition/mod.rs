//! Exposition: merged families in, bytes out. Pure functions, no I/O.
//!
//! The text encoders reproduce `prometheus_client` 0.26's `generate_latest`
//! byte for byte for the families a multiprocess directory can produce,
//! including the four ways it escapes names that are not valid legacy
//! Prometheus names ([`Escaping`]: `underscores` by default, `allow-utf-8`
//! as Prometheus 3 asks). The protobuf encoder (which `prometheus_client`
//! does not have) writes messages that Prometheus reads back as the same
//! series as the text format 0.0.4.
//!
//! The modules depend one way: the encoders write lines through
//! `sample_lines`; `format` picks an encoder; the line cache uses both; a
//! body is written through `format` and the line cache. The protobuf
//! encoder stands apart: bytes, not text, with a cache of its own that
//! reuses whole families. `negotiate` picks the exposition from a request's
//! `Accept` and `Accept-Encoding` (header text in, a choice out), so that
//! every way out (the HTTP endpoint, the Python package) answers alike.

mod body;
mod exemplar;
mod format;
mod line_cache;
pub(crate) mod names;
pub mod negotiate;
mod openmetrics;
mod prometheus;
mod protobuf;
mod sample_lines;

pub use body::Body;
pub use format::{Format, OPENMETRICS_CONTENT_TYPE, PROMETHEUS_CONTENT_TYPE};
pub use line_cache::LineCache;
pub use names::Escaping;
pub use protobuf::{
    bucket_spans_and_deltas, encode_protobuf, ProtobufCache, PROTOBUF_CONTENT_TYPE,
};
