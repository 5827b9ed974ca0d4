//! The served view as one Remote-Write 2.0 `Request`.

use multiprom_collector::{FamilyType, MergedFamily, MergedSample, Served};

use super::native::histogram_v2;
use super::request::{natives_of, NativeSeries};
use super::series::{exemplar_label_pairs, label_pairs};
use super::symbols::Symbols;
use super::timestamp::{millis, millis_of_seconds};
use super::v2::metadata::MetricType;
use super::v2::{Exemplar, Metadata, Request, Sample, TimeSeries};

/// The Remote-Write 2.0 `Request` of `served`'s families: the series of
/// [`write_request`](super::write_request), in the same order, with the
/// same names, labels, values, exemplars and native histograms, and what
/// 2.0 has room for beyond 1.0:
/// * each counter, histogram and summary series' start time (when it
///   started counting, `served.start_times`) as its sample's or native
///   histogram's `start_timestamp`, in milliseconds (Prometheus's 3.x
///   schema of 2.0: the field was `TimeSeries.created_timestamp` before);
///   gauges have none;
/// * each series' metadata inline (its family's type and help; no unit,
///   as `prometheus_client`'s files keep none), instead of a list of
///   families beside the series.
///
/// Every string is in the symbols table once, `""` first.
#[must_use]
pub fn write_request_v2(served: &Served) -> Request {
    let timestamp = millis(served.at);
    let scrape = &served.scrape;
    let mut symbols = Symbols::new();
    let mut timeseries = Vec::with_capacity(scrape.stats.series + scrape.natives.len());
    for family in &scrape.families {
        let metadata = Metadata {
            r#type: metric_type(family.family_type) as i32,
            help_ref: symbols.of(&family.help),
            unit_ref: 0,
        };
        let start = |sample: &MergedSample| match family.family_type {
            FamilyType::Gauge => 0,
            _ => start_millis(served, family, sample),
        };
        for sample in &family.samples {
            timeseries.push(TimeSeries {
                labels_refs: symbols.refs(&label_pairs(&sample.name, &sample.labels)),
                samples: vec![Sample {
                    value: sample.value,
                    timestamp,
                    start_timestamp: start(sample),
                }],
                histograms: Vec::new(),
                exemplars: sample
                    .exemplar
                    .iter()
                    .map(|exemplar| Exemplar {
                        labels_refs: symbols.refs(&exemplar_label_pairs(exemplar)),
                        value: exemplar.value,
                        timestamp: millis_of_seconds(exemplar.timestamp),
                    })
                    .collect(),
                metadata: Some(metadata),
            });
        }
        if family.family_type == FamilyType::Histogram {
            for NativeSeries {
                sample,
                labels,
                native,
            } in natives_of(family, &scrape.natives)
            {
                timeseries.push(TimeSeries {
                    labels_refs: symbols.refs(&label_pairs(&family.name, &labels)),
                    samples: Vec::new(),
                    histograms: vec![histogram_v2(native, timestamp, start(sample))],
                    exemplars: Vec::new(),
                    metadata: Some(metadata),
                });
            }
        }
    }
    Request {
        symbols: symbols.into_table(),
        timeseries,
    }
}

fn metric_type(family_type: FamilyType) -> MetricType {
    match family_type {
        FamilyType::Counter => MetricType::Counter,
        FamilyType::Gauge => MetricType::Gauge,
        FamilyType::Histogram => MetricType::Histogram,
        FamilyType::Summary => MetricType::Summary,
    }
}

/// The start of `sample`'s series in milliseconds. 0 means "none" on the
/// wire, so a start exactly at the Unix epoch is sent 1 ms later, as the
/// schema asks.
fn start_millis(served: &Served, family: &MergedFamily, sample: &MergedSample) -> i64 {
    match millis(served.start_times.of(family, sample)) {
        0 => 1,
        start => start,
    }
}
