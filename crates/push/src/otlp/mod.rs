//! OTLP: the served view as one `ExportMetricsServiceRequest`, mapped as
//! OpenTelemetry's "Prometheus and OpenMetrics compatibility" specification
//! maps Prometheus metrics to OTLP (what the OpenTelemetry Collector's
//! Prometheus receiver does after a scrape).
//!
//! One `ResourceMetrics` with the configured resource attributes, one
//! `ScopeMetrics` (scope `multiprom`, the crate's version), and per family:
//! * a counter: a monotonic `Sum` named as the family (without `_total`);
//! * a gauge: a `Gauge`;
//! * a histogram: a `Histogram` (explicit bounds from the `le` labels,
//!   without `+Inf`; per-bucket counts, not cumulative), or an
//!   `ExponentialHistogram` for its series that have a native histogram;
//! * a summary: a `Summary` (count, sum, and quantiles if any: none in
//!   multiprocess mode).
//!
//! Each point's attributes are the sample's labels (a bucket's without
//! `le`), its time is the collection's, its start time the series' (see
//! [`multiprom_collector::StartTimes`]). The description is the help text;
//! the Prometheus type is also in the metric's metadata under
//! `prometheus.type`, as the specification asks.
//!
//! ```
//! use multiprom_collector::{DirCollector, Exemplars, Natives, ServedView};
//! use multiprom_push::otlp::{ExportMetricsServiceRequest, OtlpEncoder, Temporality};
//! use prost::Message;
//! let dir = tempfile::tempdir()?;
//! let view = ServedView::new(DirCollector::new(dir.path()));
//! let served = view.collect_all(Natives::Merge, Exemplars::Attach)?;
//! let mut encoder = OtlpEncoder::new(vec![("service.name".into(), "web".into())], Temporality::Cumulative);
//! let request = ExportMetricsServiceRequest::decode(encoder.encode(&served))?;
//! assert_eq!(request.resource_metrics.len(), 1);
//! assert!(request.resource_metrics[0].scope_metrics[0].metrics.is_empty()); // nothing written here
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod delta;
mod encoder;
mod exemplar;
mod points;
mod time;
mod wire;

/// The OTLP messages, as prost-build generates them from
/// opentelemetry-proto's schema (see `proto/README.md` of this crate):
/// messages only, no gRPC service (multiprom sends OTLP/HTTP).
// The generated files are included, not modules of their own, so rustfmt
// and the workspace's documentation lints leave prost-build's output as it
// is; the modules nest as the protobuf packages do, which the generated
// code's relative paths (`super::super::common::v1`) rely on.
#[allow(
    missing_docs,
    unreachable_pub,
    dead_code,
    clippy::all,
    clippy::pedantic,
    rust_2018_idioms,
    // The schema's comments are not written for rustdoc (`<version>`,
    // bare URLs).
    rustdoc::all
)]
pub mod proto {
    pub mod common {
        pub mod v1 {
            include!("opentelemetry.proto.common.v1.rs");
        }
    }
    pub mod resource {
        pub mod v1 {
            include!("opentelemetry.proto.resource.v1.rs");
        }
    }
    pub mod metrics {
        pub mod v1 {
            include!("opentelemetry.proto.metrics.v1.rs");
        }
    }
    pub mod collector {
        pub mod metrics {
            pub mod v1 {
                include!("opentelemetry.proto.collector.metrics.v1.rs");
            }
        }
    }
}

pub use encoder::{OtlpEncoder, Temporality};
pub use proto::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};

/// The partial success a receiver's answer (an `ExportMetricsServiceResponse`,
/// protobuf) reports: the points it rejected and why; `None` when it
/// rejected none or the answer is not such a message (an empty body is a
/// full success).
pub(crate) fn partial_success(answer: &[u8]) -> Option<(i64, String)> {
    use prost::Message;
    let response = ExportMetricsServiceResponse::decode(answer).ok()?;
    let partial = response.partial_success?;
    if partial.rejected_data_points == 0 && partial.error_message.is_empty() {
        return None;
    }
    Some((partial.rejected_data_points, partial.error_message))
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::proto::collector::metrics::v1::ExportMetricsPartialSuccess;
    use super::*;

    #[test]
    fn a_partial_success_is_reported_and_a_full_one_is_not() {
        let answer = ExportMetricsServiceResponse {
            partial_success: Some(ExportMetricsPartialSuccess {
                rejected_data_points: 3,
                error_message: "too old".into(),
            }),
        };
        assert_eq!(
            partial_success(&answer.encode_to_vec()),
            Some((3, "too old".to_owned()))
        );
        assert_eq!(partial_success(&[]), None);
        let full = ExportMetricsServiceResponse {
            partial_success: Some(ExportMetricsPartialSuccess::default()),
        };
        assert_eq!(partial_success(&full.encode_to_vec()), None);
        assert_eq!(partial_success(b"\xff\xff not protobuf"), None);
    }
}
