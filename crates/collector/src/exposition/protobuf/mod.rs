//! The Prometheus protobuf exposition format: varint-length-delimited
//! `io.prometheus.client.MetricFamily` messages, as client_golang's
//! `expfmt.FmtProtoDelim` writes them and Prometheus's `ProtobufParser`
//! (model/textparse/protobufparse.go) reads them.
//!
//! The messages are the types prost-build generates from the official
//! `metrics.proto` (see `proto/README.md` of this crate). Each merged family
//! becomes the messages whose series, as Prometheus reads them, are the
//! samples the text format serves: same names (escaped as the text encoder
//! escapes them under the same scheme, never quoted), labels and values, in
//! the same order.

mod cache;
mod family;
mod native;
mod timestamp;

#[cfg(test)]
mod tests;

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
pub(crate) mod schema {
    include!("io.prometheus.client.rs");
}

use prost::Message;

pub use cache::ProtobufCache;
pub use native::bucket_spans_and_deltas;

use crate::exposition::names::Escaping;
use crate::family::MergedFamily;
use crate::native_histograms::NativeHistograms;
use crate::StartTimes;

/// `Content-Type` of the Prometheus protobuf format, spelt as client_golang
/// spells `expfmt.FmtProtoDelim`.
pub const PROTOBUF_CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// Appends `families` in the Prometheus protobuf format to `out`, each
/// histogram series with its native histogram from `natives` (found by the
/// family name and the series' labels), each counter, histogram and summary
/// with its `created_timestamp` from `start_times` (when given: the served
/// view's, see [`ServedView`](crate::ServedView)), names escaped as `escaping` says
/// (the scraper's `escaping` parameter: Prometheus 3.0 asks for
/// `allow-utf-8`, under which names stay as they are), as
/// [`Scrape::encode_protobuf`](crate::Scrape::encode_protobuf) writes a
/// collection. The format has no end marker: several lists are encoded one
/// after the other.
///
/// Histograms are expected as `prometheus_client` accumulates them (the
/// default): cumulative `_bucket`s ending with `+Inf`, and `_count`.
///
/// ```
/// use std::sync::Arc;
/// use multiprom_collector::exposition::encode_protobuf;
/// use multiprom_collector::{Escaping, FamilyType, MergedFamily, MergedSample, NativeHistograms};
/// let family = MergedFamily {
///     name: "requests".into(),
///     help: "Requests.".into(),
///     family_type: FamilyType::Counter,
///     gauge_mode: None,
///     samples: vec![MergedSample { name: "requests_total".into(), labels: Arc::from([]), value: 3.0, exemplar: None }],
/// };
/// let mut out = Vec::new();
/// encode_protobuf(&[family], &NativeHistograms::default(), None, Escaping::Underscores, &mut out);
/// // One length-delimited message: its length, then
/// // name "requests_total", help "Requests.", type COUNTER, counter value 3.0.
/// assert_eq!(usize::from(out[0]), out.len() - 1);
/// assert_eq!(&out[3..17], b"requests_total");
/// ```
pub fn encode_protobuf(
    families: &[MergedFamily],
    natives: &NativeHistograms,
    start_times: Option<&StartTimes>,
    escaping: Escaping,
    out: &mut Vec<u8>,
) {
    for family in families {
        encode_family(family, natives, start_times, escaping, out);
    }
}

/// Appends the messages of `family` (with its series' native histograms
/// from `natives`) to `out`.
fn encode_family(
    family: &MergedFamily,
    natives: &NativeHistograms,
    start_times: Option<&StartTimes>,
    escaping: Escaping,
    out: &mut Vec<u8>,
) {
    for message in family::messages(family, natives, start_times, escaping) {
        // Cannot fail: prost fails only for a buffer without room left,
        // and a Vec grows.
        let _ = message.encode_length_delimited(out);
    }
}
