//! Remote-Write: a directory written as prometheus_client writes it,
//! collected, encoded, and the body decoded back (snappy's block format,
//! then protobuf) to the exact series a receiver gets.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::UNIX_EPOCH;

use multiprom_collector::{DirCollector, Exemplars, Natives, Served, ServedView};
use multiprom_format::{
    encode_key, ExemplarWriter, FileName, FileWriter, GaugeMode, MetricKind, NativeHistogramConfig,
    NativeHistogramWriter,
};
use multiprom_push::remote_write::prometheus::histogram::{Count, ResetHint, ZeroCount};
use multiprom_push::remote_write::prometheus::metric_metadata::MetricType;
use multiprom_push::remote_write::prometheus::{BucketSpan, TimeSeries};
use multiprom_push::remote_write::{encode, write_request, WriteRequest};
use prost::Message;

const LATENCY_HELP: &str = "Latency.";

/// What a receiver reads from the body of `served`.
pub(crate) fn received(served: &Served) -> WriteRequest {
    let body = encode(&write_request(served));
    let protobuf = snap::raw::Decoder::new().decompress_vec(&body).unwrap();
    WriteRequest::decode(protobuf.as_slice()).unwrap()
}

pub(crate) fn collect(dir: &Path) -> Served {
    ServedView::new(DirCollector::new(dir))
        .collect_all(Natives::Merge, Exemplars::Attach)
        .unwrap()
}

pub(crate) fn millis(served: &Served) -> i64 {
    i64::try_from(served.at.duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap()
}

/// Label pairs, as a test writes them.
pub(crate) type Pairs<'a> = Vec<(&'a str, &'a str)>;

/// A series' `__name__`.
fn name(series: &TimeSeries) -> &str {
    series
        .labels
        .iter()
        .find(|label| label.name == "__name__")
        .map_or("", |label| label.value.as_str())
}

/// A series' labels as pairs.
fn labels(series: &TimeSeries) -> Pairs<'_> {
    series
        .labels
        .iter()
        .map(|label| (label.name.as_str(), label.value.as_str()))
        .collect()
}

fn latency_key(sample: &str, labels: &[(&str, &str)]) -> String {
    encode_key(
        "latency_seconds",
        sample,
        labels.iter().copied(),
        LATENCY_HELP,
    )
}

/// A worker's histogram file as prometheus_client writes it (`_sum`, then
/// each bucket's own count, bounds 1.0 and +Inf) for `route`, and, with
/// `native`, the same observations in its native histogram file (schema
/// 0: bucket `i` holds (2^(i-1), 2^i]).
fn latency(dir: &Path, pid: &str, route: &str, observations: &[f64], native: bool) {
    let name = FileName::new(MetricKind::Histogram, pid).unwrap();
    let mut file = FileWriter::open(dir, &name).unwrap();
    let route_label = [("route", route)];
    file.slot(&latency_key("latency_seconds_sum", &route_label))
        .unwrap()
        .add(observations.iter().sum());
    let small = observations.iter().filter(|v| **v <= 1.0).count();
    for (le, count) in [("1.0", small), ("+Inf", observations.len() - small)] {
        let key = latency_key("latency_seconds_bucket", &[("le", le), ("route", route)]);
        file.slot(&key).unwrap().add(count as f64);
    }
    if native {
        let writer = NativeHistogramWriter::open(dir, &name).unwrap();
        let config = NativeHistogramConfig {
            schema: 0,
            zero_threshold: 0.001,
            ..NativeHistogramConfig::default()
        };
        let series = writer
            .series(&latency_key("latency_seconds", &route_label), config)
            .unwrap();
        for &v in observations {
            series.observe(v);
        }
    }
}

/// Two workers' counters, a gauge, and a histogram with two series, one
/// with a native histogram (observed by both workers) and one without;
/// exemplars on a counter and on a bucket.
pub(crate) fn directory(dir: &Path) {
    let requests = encode_key(
        "requests",
        "requests_total",
        [("code", "200"), ("Path", "/é"), ("method", "")],
        "Requests.",
    );
    for (pid, value) in [("1", 3.0), ("2", 4.0)] {
        let name = FileName::new(MetricKind::Counter, pid).unwrap();
        FileWriter::open(dir, &name)
            .unwrap()
            .slot(&requests)
            .unwrap()
            .add(value);
    }
    let counter = FileName::new(MetricKind::Counter, "2").unwrap();
    ExemplarWriter::open(dir, &counter)
        .unwrap()
        .slot(&requests)
        .unwrap()
        .store(
            [("trace_id", "abc"), ("span_id", "7")],
            1.0,
            1_700_000_000.25,
        )
        .unwrap();

    let gauge = FileName::new(MetricKind::Gauge(GaugeMode::Max), "1").unwrap();
    FileWriter::open(dir, &gauge)
        .unwrap()
        .slot(&encode_key(
            "temperature",
            "temperature",
            [],
            "Temperature.",
        ))
        .unwrap()
        .set(21.5);

    latency(dir, "1", "/a", &[0.5, 1.0, 3.0, 0.0], true);
    latency(dir, "2", "/a", &[1.0, 100.0, -2.0], true);
    latency(dir, "2", "/b", &[0.25], false);
    let histogram = FileName::new(MetricKind::Histogram, "1").unwrap();
    ExemplarWriter::open(dir, &histogram)
        .unwrap()
        .slot(&latency_key(
            "latency_seconds_bucket",
            &[("le", "+Inf"), ("route", "/a")],
        ))
        .unwrap()
        .store([("trace_id", "def")], 3.0, 1_700_000_001.0)
        .unwrap();
}

#[test]
fn every_sample_line_is_a_series_at_the_collection_time() {
    let dir = tempfile::tempdir().unwrap();
    directory(dir.path());
    let served = collect(dir.path());
    let at = millis(&served);
    let request = received(&served);
    let mut samples: Vec<(Pairs<'_>, f64)> = request
        .timeseries
        .iter()
        .filter(|series| series.histograms.is_empty())
        .map(|series| {
            assert_eq!(series.samples.len(), 1, "{series:?}");
            assert_eq!(series.samples[0].timestamp, at);
            (labels(series), series.samples[0].value)
        })
        .collect();
    // Families and series come in the order the files are listed, as
    // Python merges them: sorted here.
    samples.sort_by(|a, b| a.0.cmp(&b.0));
    let expected: Vec<(Pairs<'_>, f64)> = vec![
        (
            vec![
                ("Path", "/é"),
                ("__name__", "requests_total"),
                ("code", "200"),
            ],
            7.0,
        ),
        (
            vec![
                ("__name__", "latency_seconds_bucket"),
                ("le", "+Inf"),
                ("route", "/a"),
            ],
            7.0,
        ),
        (
            vec![
                ("__name__", "latency_seconds_bucket"),
                ("le", "+Inf"),
                ("route", "/b"),
            ],
            1.0,
        ),
        (
            vec![
                ("__name__", "latency_seconds_bucket"),
                ("le", "1.0"),
                ("route", "/a"),
            ],
            5.0,
        ),
        (
            vec![
                ("__name__", "latency_seconds_bucket"),
                ("le", "1.0"),
                ("route", "/b"),
            ],
            1.0,
        ),
        (
            vec![("__name__", "latency_seconds_count"), ("route", "/a")],
            7.0,
        ),
        (
            vec![("__name__", "latency_seconds_count"), ("route", "/b")],
            1.0,
        ),
        (
            vec![("__name__", "latency_seconds_sum"), ("route", "/a")],
            103.5,
        ),
        (
            vec![("__name__", "latency_seconds_sum"), ("route", "/b")],
            0.25,
        ),
        (vec![("__name__", "temperature")], 21.5),
    ];
    assert_eq!(samples, expected);
}

#[test]
fn exemplars_go_with_their_series() {
    let dir = tempfile::tempdir().unwrap();
    directory(dir.path());
    let request = received(&collect(dir.path()));
    let mut with_exemplars: Vec<(Pairs<'_>, Pairs<'_>, f64, i64)> = request
        .timeseries
        .iter()
        .flat_map(|series| {
            series.exemplars.iter().map(|exemplar| {
                let exemplar_labels = exemplar
                    .labels
                    .iter()
                    .map(|label| (label.name.as_str(), label.value.as_str()))
                    .collect();
                (
                    labels(series),
                    exemplar_labels,
                    exemplar.value,
                    exemplar.timestamp,
                )
            })
        })
        .collect();
    with_exemplars.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        with_exemplars,
        vec![
            (
                vec![
                    ("Path", "/é"),
                    ("__name__", "requests_total"),
                    ("code", "200"),
                ],
                vec![("span_id", "7"), ("trace_id", "abc")],
                1.0,
                1_700_000_000_250,
            ),
            (
                vec![
                    ("__name__", "latency_seconds_bucket"),
                    ("le", "+Inf"),
                    ("route", "/a"),
                ],
                vec![("trace_id", "def")],
                3.0,
                1_700_000_001_000,
            ),
        ]
    );
}

#[test]
fn a_series_with_a_native_histogram_gets_a_histogram_series() {
    let dir = tempfile::tempdir().unwrap();
    directory(dir.path());
    let served = collect(dir.path());
    let at = millis(&served);
    let request = received(&served);
    let natives: Vec<&TimeSeries> = request
        .timeseries
        .iter()
        .filter(|series| !series.histograms.is_empty())
        .collect();
    // One: the series `/b` has no native histogram.
    assert_eq!(natives.len(), 1);
    let series = natives[0];
    assert_eq!(
        labels(series),
        [("__name__", "latency_seconds"), ("route", "/a")]
    );
    assert!(series.samples.is_empty() && series.exemplars.is_empty());
    assert_eq!(series.histograms.len(), 1);
    let histogram = &series.histograms[0];
    assert_eq!(histogram.timestamp, at);
    assert_eq!(histogram.schema, 0);
    assert_eq!(histogram.zero_threshold, 0.001);
    // 0.0
    assert_eq!(histogram.zero_count, Some(ZeroCount::ZeroCountInt(1)));
    assert_eq!(histogram.count, Some(Count::CountInt(7)));
    assert_eq!(histogram.sum, 103.5);
    // 0.5 in bucket -1, 1.0 twice in 0, (1 empty), 3.0 in 2; 100.0 in 7,
    // past a gap of four: a span of its own.
    assert_eq!(
        histogram.positive_spans,
        [
            BucketSpan {
                offset: -1,
                length: 4
            },
            BucketSpan {
                offset: 4,
                length: 1
            },
        ]
    );
    assert_eq!(histogram.positive_deltas, [1, 1, -2, 1, 0]);
    // -2.0 in bucket 1.
    assert_eq!(
        histogram.negative_spans,
        [BucketSpan {
            offset: 1,
            length: 1
        }]
    );
    assert_eq!(histogram.negative_deltas, [1]);
    assert!(histogram.positive_counts.is_empty() && histogram.negative_counts.is_empty());
    assert_eq!(histogram.reset_hint(), ResetHint::Unknown);
    // Right after the histogram's own lines.
    let position = |wanted: &TimeSeries| {
        request
            .timeseries
            .iter()
            .position(|series| std::ptr::eq(series, wanted))
            .unwrap()
    };
    let native_at = position(series);
    let last_line = request
        .timeseries
        .iter()
        .rposition(|series| name(series).starts_with("latency_seconds_"))
        .unwrap();
    assert_eq!(native_at, last_line + 1);
}

#[test]
fn every_family_has_its_metadata() {
    let dir = tempfile::tempdir().unwrap();
    directory(dir.path());
    let request = received(&collect(dir.path()));
    let mut metadata: Vec<(MetricType, &str, &str, &str)> = request
        .metadata
        .iter()
        .map(|m| {
            (
                m.r#type(),
                m.metric_family_name.as_str(),
                m.help.as_str(),
                m.unit.as_str(),
            )
        })
        .collect();
    metadata.sort_by_key(|m| m.1);
    assert_eq!(
        metadata,
        [
            (MetricType::Histogram, "latency_seconds", "Latency.", ""),
            (MetricType::Counter, "requests_total", "Requests.", ""),
            (MetricType::Gauge, "temperature", "Temperature.", ""),
        ]
    );
}

#[test]
fn an_empty_directory_sends_an_empty_request() {
    let dir = tempfile::tempdir().unwrap();
    let request = received(&collect(dir.path()));
    assert_eq!(request, WriteRequest::default());
}

/// The pusher's body writer writes the bytes of the request's encoding,
/// push after push, while values, exemplars, native histograms and series
/// change.
#[test]
fn a_written_body_is_the_encoded_request_while_the_directory_changes() {
    use multiprom_push::remote_write::BodyWriter;

    let dir = tempfile::tempdir().unwrap();
    directory(dir.path());
    let view = ServedView::new(DirCollector::new(dir.path()));
    let mut writer = BodyWriter::default();
    let mut bodies = Vec::new();
    for round in 0..4 {
        match round {
            1 => latency(dir.path(), "3", "/a", &[0.75], true),
            2 => {
                let requests =
                    encode_key("requests", "requests_total", [("code", "500")], "Requests.");
                let name = FileName::new(MetricKind::Counter, "3").unwrap();
                FileWriter::open(dir.path(), &name)
                    .unwrap()
                    .slot(&requests)
                    .unwrap()
                    .add(1.0);
            }
            _ => {}
        }
        let served = view.collect_all(Natives::Merge, Exemplars::Attach).unwrap();
        let written = writer.body(&served);
        assert_eq!(written, encode(&write_request(&served)), "round {round}");
        bodies.push(written);
    }
    // The rounds that changed something sent something else.
    assert_ne!(bodies[0], bodies[1]);
    assert_ne!(bodies[1], bodies[2]);
}
