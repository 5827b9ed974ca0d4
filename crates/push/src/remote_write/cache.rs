//! [`BodyCache`]: Remote-Write bodies written with each series' labels
//! encoded once, not built and encoded anew on every push.
//!
//! A push of a directory with ten thousand series otherwise spends most of
//! its time making and dropping two `String`s per label (a `perf` profile
//! of `serve` pushing puts 40% of it in `malloc` and `free`). The labels of
//! a series do not change between collections: the collection hands on the
//! same name and label set (`Arc`s) while a series lives, so their
//! addresses say which series a sample is, as in the protobuf exposition's
//! `ProtobufCache`. Only the values, timestamps, exemplars and native
//! histograms are encoded each time. The bytes are those of
//! [`encode`](super::encode) of [`write_request`](super::write_request).

use std::sync::Arc;

use multiprom_collector::{FamilyType, Scrape, Served};
use prost::encoding::{encode_key, encode_varint, message, WireType};

use super::metadata::metadata;
use super::prometheus::{Sample, TimeSeries};
use super::request::native_series;
use super::series::{exemplar, series_labels};
use super::timestamp::millis;

/// The fields of `WriteRequest` and `TimeSeries` written here.
const TIMESERIES: u32 = 1;
const METADATA: u32 = 3;
const LABELS: u32 = 1;
const SAMPLES: u32 = 2;
const EXEMPLARS: u32 = 3;

/// Remote-Write bodies of one pusher, one per push.
#[derive(Debug, Default)]
pub struct BodyCache {
    /// Each series' encoded `labels` fields, by the addresses of its
    /// sample's name and label set.
    labels: foldhash::HashMap<(usize, usize), Vec<u8>>,
    /// The collection those addresses point into: kept so that none of
    /// them can be reused by another series while it is cached.
    scrape: Option<Arc<Scrape>>,
    /// The last body before compression (its room is reused).
    protobuf: Vec<u8>,
}

impl BodyCache {
    /// The body for `served`: as [`encode`](super::encode) of
    /// [`write_request`](super::write_request), byte for byte.
    pub fn body(&mut self, served: &Served) -> Vec<u8> {
        let timestamp = millis(served.at);
        let scrape = &served.scrape;
        let out = &mut self.protobuf;
        out.clear();
        let mut kept = foldhash::HashMap::with_capacity_and_hasher(
            self.labels.len().max(scrape.stats.series),
            foldhash::fast::RandomState::default(),
        );
        let mut natives = Vec::new();
        for family in &scrape.families {
            for sample in &family.samples {
                let key = (
                    sample.name.as_ptr() as usize,
                    sample.labels.as_ptr().cast::<u8>() as usize,
                );
                let labels = self.labels.remove(&key).unwrap_or_else(|| {
                    let mut bytes = Vec::new();
                    for label in series_labels(&sample.name, &sample.labels) {
                        message::encode(LABELS, &label, &mut bytes);
                    }
                    bytes
                });
                let value = Sample {
                    value: sample.value,
                    timestamp,
                };
                let exemplar = sample.exemplar.as_deref().map(exemplar);
                let length = labels.len()
                    + message::encoded_len(SAMPLES, &value)
                    + exemplar
                        .as_ref()
                        .map_or(0, |e| message::encoded_len(EXEMPLARS, e));
                encode_key(TIMESERIES, WireType::LengthDelimited, out);
                encode_varint(length as u64, out);
                out.extend_from_slice(&labels);
                message::encode(SAMPLES, &value, out);
                if let Some(exemplar) = &exemplar {
                    message::encode(EXEMPLARS, exemplar, out);
                }
                kept.insert(key, labels);
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
        // Kept after the lookups: the last collection stays alive until
        // then, so no address looked up could have been reused.
        self.labels = kept;
        self.scrape = Some(Arc::clone(scrape));
        super::body::compress(out)
    }
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
        let body = BodyCache::default().body(&served);
        assert_eq!(
            body,
            super::super::encode(&super::super::write_request(&served))
        );
    }
}
