//! The served view as one `WriteRequest`.

use std::collections::HashSet;
use std::sync::Arc;

use multiprom_collector::{FamilyType, MergedFamily, MergedSample, NativeHistograms, Served};
use multiprom_format::NativeHistogram;

use super::metadata::metadata;
use super::native::histogram;
use super::prometheus::{TimeSeries, WriteRequest};
use super::series::{sample_series, series_labels};
use super::timestamp::millis;

/// The `WriteRequest` of `served`'s families (the workers' metrics; the
/// collection's own reports are not among them), each family's series in
/// the order it serves its samples:
/// * a series per sample line, named as the line (`requests_total`,
///   `latency_bucket` with its `le`, `latency_sum`, a gauge's name), its
///   value at `served.at`, with the line's exemplar if it has one;
/// * after a histogram's lines, a series named as the family, carrying the
///   native histogram, for each of its series that has one (in the order
///   the series first appear);
/// * one `MetricMetadata` per family.
///
/// Start times are left out: Remote-Write 1.0 has no room for them.
#[must_use]
pub fn write_request(served: &Served) -> WriteRequest {
    let timestamp = millis(served.at);
    let scrape = &served.scrape;
    let mut request = WriteRequest {
        timeseries: Vec::with_capacity(scrape.stats.series + scrape.natives.len()),
        metadata: Vec::with_capacity(scrape.families.len()),
    };
    for family in &scrape.families {
        request.metadata.push(metadata(family));
        request.timeseries.extend(
            family
                .samples
                .iter()
                .map(|sample| sample_series(sample, timestamp)),
        );
        if family.family_type == FamilyType::Histogram {
            native_series(family, &scrape.natives, timestamp, &mut request.timeseries);
        }
    }
    request
}

/// Appends a native histogram series for each series of the histogram
/// `family` that has one in `natives`.
pub(super) fn native_series(
    family: &MergedFamily,
    natives: &NativeHistograms,
    timestamp: i64,
    out: &mut Vec<TimeSeries>,
) {
    for NativeSeries { labels, native, .. } in natives_of(family, natives) {
        out.push(TimeSeries {
            labels: series_labels(&family.name, &labels),
            samples: Vec::new(),
            exemplars: Vec::new(),
            histograms: vec![histogram(native, timestamp)],
        });
    }
}

/// A series of a histogram family with its native histogram.
pub(super) struct NativeSeries<'a> {
    /// The series' first sample line (its start time is the series').
    pub(super) sample: &'a MergedSample,
    /// The series' labels (a bucket's without its `le`).
    pub(super) labels: Vec<(Arc<str>, Arc<str>)>,
    /// Its native histogram.
    pub(super) native: &'a NativeHistogram,
}

/// The native histograms of the histogram `family`'s series in `natives`,
/// in the order the series first appear.
pub(super) fn natives_of<'a>(
    family: &'a MergedFamily,
    natives: &'a NativeHistograms,
) -> Vec<NativeSeries<'a>> {
    let mut found = Vec::new();
    if natives.is_empty() {
        return found;
    }
    let mut seen: HashSet<Vec<(Arc<str>, Arc<str>)>> = HashSet::new();
    for sample in &family.samples {
        let Some(suffix) = sample.name.strip_prefix(&*family.name) else {
            continue;
        };
        if !matches!(suffix, "_bucket" | "_count" | "_sum") {
            continue;
        }
        let labels: Vec<(Arc<str>, Arc<str>)> = sample
            .labels
            .iter()
            .filter(|(name, _)| suffix != "_bucket" || &**name != "le")
            .cloned()
            .collect();
        if seen.contains(&labels) {
            continue;
        }
        if let Some(native) = natives.get(&family.name, &labels) {
            found.push(NativeSeries {
                sample,
                labels: labels.clone(),
                native,
            });
        }
        seen.insert(labels);
    }
    found
}
