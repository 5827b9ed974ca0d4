//! Remote-Write 2.0: the directory of remote_write.rs collected, encoded
//! as 2.0, and the body decoded back: the series of 1.0 through the
//! symbols table, each counter's, histogram's and summary's start, and
//! the metadata inline.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::UNIX_EPOCH;

use multiprom_collector::{DirCollector, Exemplars, Natives, Served, ServedView};
use multiprom_format::{encode_key, ExemplarWriter, FileName, FileWriter, MetricKind};
use multiprom_push::remote_write::v2::metadata::MetricType;
use multiprom_push::remote_write::v2::{histogram, Request};
use multiprom_push::remote_write::{encode_v2, write_request_v2};
use prost::Message;

use crate::remote_write::{collect, directory, millis, received, Pairs};

/// What a 2.0 receiver reads from the body of `served`.
fn received_v2(served: &Served) -> Request {
    let body = encode_v2(&write_request_v2(served));
    let protobuf = snap::raw::Decoder::new().decompress_vec(&body).unwrap();
    Request::decode(protobuf.as_slice()).unwrap()
}

/// The strings `refs` refer to, in pairs.
fn resolve<'a>(request: &'a Request, refs: &[u32]) -> Pairs<'a> {
    assert_eq!(refs.len() % 2, 0, "{refs:?}");
    refs.chunks(2)
        .map(|pair| {
            (
                request.symbols[pair[0] as usize].as_str(),
                request.symbols[pair[1] as usize].as_str(),
            )
        })
        .collect()
}

fn start_millis(served: &Served) -> i64 {
    i64::try_from(
        served
            .start_times
            .epoch()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// Every series of 1.0, in the same order, with the same labels, values,
/// times, exemplars and native histograms.
#[test]
fn the_series_are_those_of_version_1() {
    let dir = tempfile::tempdir().unwrap();
    directory(dir.path());
    let served = collect(dir.path());
    let one = received(&served);
    let two = received_v2(&served);
    assert_eq!(two.symbols[0], "");
    assert_eq!(two.timeseries.len(), one.timeseries.len());
    for (a, b) in one.timeseries.iter().zip(&two.timeseries) {
        let labels: Pairs<'_> = a
            .labels
            .iter()
            .map(|l| (l.name.as_str(), l.value.as_str()))
            .collect();
        assert_eq!(resolve(&two, &b.labels_refs), labels);
        let samples: Vec<(f64, i64)> = a.samples.iter().map(|s| (s.value, s.timestamp)).collect();
        let samples_v2: Vec<(f64, i64)> =
            b.samples.iter().map(|s| (s.value, s.timestamp)).collect();
        assert_eq!(samples_v2, samples);
        assert_eq!(b.exemplars.len(), a.exemplars.len());
        for (x, y) in a.exemplars.iter().zip(&b.exemplars) {
            let labels: Pairs<'_> = x
                .labels
                .iter()
                .map(|l| (l.name.as_str(), l.value.as_str()))
                .collect();
            assert_eq!(resolve(&two, &y.labels_refs), labels);
            assert_eq!((y.value, y.timestamp), (x.value, x.timestamp));
        }
        assert_eq!(b.histograms.len(), a.histograms.len());
        for (x, y) in a.histograms.iter().zip(&b.histograms) {
            assert_eq!(
                (y.sum, y.schema, y.timestamp, &y.positive_deltas),
                (x.sum, x.schema, x.timestamp, &x.positive_deltas)
            );
            assert_eq!(y.count, Some(histogram::Count::CountInt(7)));
        }
    }
}

/// Counters', histograms' (their lines and native histograms) and
/// summaries' series carry when they started; gauges nothing.
#[test]
fn cumulative_series_carry_their_start() {
    let dir = tempfile::tempdir().unwrap();
    directory(dir.path());
    let served = collect(dir.path());
    let start = start_millis(&served);
    assert!(start > 0 && start <= millis(&served));
    let request = received_v2(&served);
    for series in &request.timeseries {
        let labels = resolve(&request, &series.labels_refs);
        let name = labels.iter().find(|l| l.0 == "__name__").unwrap().1;
        let expected = if name == "temperature" { 0 } else { start };
        for sample in &series.samples {
            assert_eq!(sample.start_timestamp, expected, "{labels:?}");
        }
        for histogram in &series.histograms {
            assert_eq!(histogram.start_timestamp, expected, "{labels:?}");
        }
    }
}

/// A series that went down (a worker's file removed) started at the
/// collection before: its start is that, the others' the directory's.
#[test]
fn a_restarted_series_carries_its_own_start() {
    let dir = tempfile::tempdir().unwrap();
    let key = |code: &str| encode_key("jobs", "jobs_total", [("code", code)], "Jobs.");
    for (pid, code) in [("1", "200"), ("2", "200"), ("2", "500")] {
        let name = FileName::new(MetricKind::Counter, pid).unwrap();
        FileWriter::open(dir.path(), &name)
            .unwrap()
            .slot(&key(code))
            .unwrap()
            .add(1.0);
    }
    let view = ServedView::new(DirCollector::new(dir.path()));
    let first = view.collect_all(Natives::Merge, Exemplars::Attach).unwrap();
    let name = FileName::new(MetricKind::Counter, "1").unwrap();
    std::fs::remove_file(dir.path().join(name.to_string())).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let second = view.collect_all(Natives::Merge, Exemplars::Attach).unwrap();
    let request = received_v2(&second);
    let mut starts: Vec<(Pairs<'_>, f64, i64)> = request
        .timeseries
        .iter()
        .map(|series| {
            let sample = &series.samples[0];
            (
                resolve(&request, &series.labels_refs),
                sample.value,
                sample.start_timestamp,
            )
        })
        .collect();
    starts.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        starts,
        [
            (
                vec![("__name__", "jobs_total"), ("code", "200")],
                1.0,
                millis(&first)
            ),
            (
                vec![("__name__", "jobs_total"), ("code", "500")],
                1.0,
                start_millis(&first)
            ),
        ]
    );
    assert!(millis(&first) > start_millis(&first));
}

/// The symbols table exactly: `""`, then each string once in the order
/// first used; the series' and exemplar's refs into it; the metadata
/// inline.
#[test]
fn symbols_refs_and_metadata_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let key = encode_key("jobs", "jobs_total", [("code", "200")], "Jobs done.");
    let name = FileName::new(MetricKind::Counter, "1").unwrap();
    FileWriter::open(dir.path(), &name)
        .unwrap()
        .slot(&key)
        .unwrap()
        .add(3.0);
    ExemplarWriter::open(dir.path(), &name)
        .unwrap()
        .slot(&key)
        .unwrap()
        .store([("trace_id", "abc"), ("code", "")], 1.0, 1_700_000_000.5)
        .unwrap();
    let served = collect(dir.path());
    let request = received_v2(&served);
    assert_eq!(
        request.symbols,
        [
            "",
            "Jobs done.",
            "__name__",
            "jobs_total",
            "code",
            "200",
            "trace_id",
            "abc"
        ]
    );
    assert_eq!(request.timeseries.len(), 1);
    let series = &request.timeseries[0];
    assert_eq!(series.labels_refs, [2, 3, 4, 5]);
    assert_eq!(series.samples.len(), 1);
    let sample = &series.samples[0];
    assert_eq!(
        (sample.value, sample.timestamp, sample.start_timestamp),
        (3.0, millis(&served), start_millis(&served))
    );
    assert_eq!(series.exemplars.len(), 1);
    let exemplar = &series.exemplars[0];
    assert_eq!(exemplar.labels_refs, [6, 7]);
    assert_eq!(
        (exemplar.value, exemplar.timestamp),
        (1.0, 1_700_000_000_500)
    );
    let metadata = series.metadata.unwrap();
    assert_eq!(metadata.r#type(), MetricType::Counter);
    assert_eq!((metadata.help_ref, metadata.unit_ref), (1, 0));
    assert!(series.histograms.is_empty());
}

#[test]
fn every_series_has_its_familys_metadata() {
    let dir = tempfile::tempdir().unwrap();
    directory(dir.path());
    let request = received_v2(&collect(dir.path()));
    let mut seen: Vec<(&str, MetricType, &str, u32)> = request
        .timeseries
        .iter()
        .map(|series| {
            let labels = resolve(&request, &series.labels_refs);
            let name = labels.iter().find(|l| l.0 == "__name__").unwrap().1;
            let metadata = series.metadata.unwrap();
            (
                name,
                metadata.r#type(),
                request.symbols[metadata.help_ref as usize].as_str(),
                metadata.unit_ref,
            )
        })
        .collect();
    seen.sort_by_key(|s| s.0);
    seen.dedup();
    assert_eq!(
        seen,
        [
            ("latency_seconds", MetricType::Histogram, "Latency.", 0),
            (
                "latency_seconds_bucket",
                MetricType::Histogram,
                "Latency.",
                0
            ),
            (
                "latency_seconds_count",
                MetricType::Histogram,
                "Latency.",
                0
            ),
            ("latency_seconds_sum", MetricType::Histogram, "Latency.", 0),
            ("requests_total", MetricType::Counter, "Requests.", 0),
            ("temperature", MetricType::Gauge, "Temperature.", 0),
        ]
    );
}

#[test]
fn an_empty_directory_sends_only_the_empty_symbol() {
    let dir = tempfile::tempdir().unwrap();
    let request = received_v2(&collect(dir.path()));
    assert_eq!(
        request,
        Request {
            symbols: vec![String::new()],
            timeseries: Vec::new(),
        }
    );
}
