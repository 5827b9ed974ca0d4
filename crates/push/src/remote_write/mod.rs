//! Prometheus Remote-Write 1.0: the served view as one `WriteRequest`, and
//! that request as the body the specification asks for (protobuf, then
//! snappy's block format).
//!
//! The request carries what Prometheus itself would send after scraping
//! the directory's text exposition (and its native histograms through the
//! protobuf one) at the moment of the collection: a series per sample line,
//! named and labelled as the line, with its exemplar; a native histogram
//! series per histogram series that has one; and a `MetricMetadata` per
//! family. Remote-Write 1.0 has no field for start times, so they are not
//! sent.
//!
//! Remote-Write 2.0 ([`write_request_v2`], [`encode_v2`]) carries the same
//! series through a symbols table, with each cumulative series' start time
//! and its family's metadata inline.
//!
//! ```
//! use multiprom_collector::{DirCollector, Exemplars, Natives, ServedView};
//! use multiprom_push::remote_write::{encode, write_request};
//! let dir = tempfile::tempdir()?;
//! let view = ServedView::new(DirCollector::new(dir.path()));
//! let served = view.collect_all(Natives::Merge, Exemplars::Attach)?;
//! let request = write_request(&served);
//! assert!(request.timeseries.is_empty()); // nothing written here
//! let body = encode(&request);
//! assert_eq!(snap::raw::decompress_len(&body)?, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod body;
mod metadata;
mod native;
mod request;
mod request_v2;
mod series;
mod symbols;
mod timestamp;
mod writer;
mod written;

/// The Remote-Write 1.0 messages, as prost-build generates them from
/// Prometheus's `prompb/types.proto` and `prompb/remote.proto` (see
/// `proto/README.md` of this crate).
// The generated file is included, not a module of its own, so rustfmt and
// the workspace's documentation lints leave prost-build's output as it is.
#[allow(
    missing_docs,
    unreachable_pub,
    dead_code,
    clippy::all,
    clippy::pedantic,
    rust_2018_idioms
)]
pub mod prometheus {
    include!("prometheus.rs");
}

/// The Remote-Write 2.0 messages (`io.prometheus.write.v2`), as
/// prost-build generates them from Prometheus's
/// `prompb/io/prometheus/write/v2/types.proto` (see `proto/README.md` of
/// this crate).
#[allow(
    missing_docs,
    unreachable_pub,
    dead_code,
    clippy::all,
    clippy::pedantic,
    rust_2018_idioms
)]
pub mod v2 {
    include!("v2/types.rs");
}

pub use body::{encode, encode_v2};
pub use prometheus::WriteRequest;
pub use request::write_request;
pub use request_v2::write_request_v2;
pub use writer::BodyWriter;
pub(crate) use written::Written;
