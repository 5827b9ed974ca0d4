//! [`BodyWriter`]: Remote-Write bodies written piece by piece, each
//! series' labels straight from its sample's.
//!
//! Building a `WriteRequest` as prost messages made two `String`s per
//! label of every series and dropped them again (a `perf` profile of
//! `serve` pushing put 40% of its time in `malloc` and `free`). Keeping
//! each series' encoded labels from one push to the next, by the address
//! of its label set, was built and measured: its map lookup and insert per
//! series cost a quarter of `serve`'s time when pushing, more than writing
//! the labels afresh. Here the series' labels, value and timestamp are
//! written as prost writes them (fields by number: labels, samples,
//! exemplars) and only exemplars, native histograms and metadata (few) are
//! prost messages; the bytes are those of [`encode`](super::encode) of
//! [`write_request`](super::write_request).

use multiprom_collector::{FamilyType, Served};
use prost::encoding::message;

use super::metadata::metadata;
use super::prometheus::{Sample, TimeSeries};
use super::request::native_series;
use super::series::{exemplar, label_pairs};
use super::timestamp::millis;
use crate::fields::{field_len, put_header, put_string, string_len};

/// The fields of `WriteRequest`, `TimeSeries` and `Label` written here.
const TIMESERIES: u32 = 1;
const METADATA: u32 = 3;
const LABELS: u32 = 1;
const SAMPLES: u32 = 2;
const EXEMPLARS: u32 = 3;
const LABEL_NAME: u32 = 1;
const LABEL_VALUE: u32 = 2;

/// Remote-Write bodies of one pusher, one per push.
#[derive(Debug, Default)]
pub struct BodyWriter {
    /// The last body before compression (its room is reused).
    protobuf: Vec<u8>,
}

impl BodyWriter {
    /// The body for `served`: as [`encode`](super::encode) of
    /// [`write_request`](super::write_request), byte for byte.
    pub fn body(&mut self, served: &Served) -> Vec<u8> {
        let timestamp = millis(served.at);
        let scrape = &served.scrape;
        let out = &mut self.protobuf;
        out.clear();
        let mut natives = Vec::new();
        for family in &scrape.families {
            for sample in &family.samples {
                let labels = label_pairs(&sample.name, &sample.labels);
                let value = Sample {
                    value: sample.value,
                    timestamp,
                };
                let exemplar = sample.exemplar.as_deref().map(exemplar);
                let length = labels
                    .iter()
                    .map(|(name, value)| field_len(LABELS, label_len(name, value)))
                    .sum::<usize>()
                    + message::encoded_len(SAMPLES, &value)
                    + exemplar
                        .as_ref()
                        .map_or(0, |e| message::encoded_len(EXEMPLARS, e));
                put_header(TIMESERIES, length, out);
                for (name, value) in labels {
                    put_header(LABELS, label_len(name, value), out);
                    put_string(LABEL_NAME, name, out);
                    put_string(LABEL_VALUE, value, out);
                }
                message::encode(SAMPLES, &value, out);
                if let Some(exemplar) = &exemplar {
                    message::encode(EXEMPLARS, exemplar, out);
                }
            }
            if family.family_type == FamilyType::Histogram {
                natives.clear();
                native_series(family, &scrape.natives, timestamp, &mut natives);
                for series in &natives {
                    message::encode::<TimeSeries>(TIMESERIES, series, out);
                }
            }
        }
        for family in &scrape.families {
            message::encode(METADATA, &metadata(family), out);
        }
        super::body::compress(out)
    }
}

/// A `Label` message's length.
fn label_len(name: &str, value: &str) -> usize {
    string_len(LABEL_NAME, name) + string_len(LABEL_VALUE, value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_view_is_an_empty_request() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let view = multiprom_collector::ServedView::new(multiprom_collector::DirCollector::new(
            dir.path(),
        ));
        let served = view
            .collect_all(
                multiprom_collector::Natives::Merge,
                multiprom_collector::Exemplars::Attach,
            )
            .unwrap_or_else(|e| panic!("{e}"));
        let body = BodyWriter::default().body(&served);
        assert_eq!(
            body,
            super::super::encode(&super::super::write_request(&served))
        );
    }
}
