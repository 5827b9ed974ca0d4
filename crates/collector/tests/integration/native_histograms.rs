//! Native histograms from the files beside the histogram files: merged per
//! series across processes (whatever schema and zero bucket each used),
//! served in the protobuf format as Prometheus reads native histograms,
//! and absent from the text formats, which stay as Python's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use multiprom_collector::{
    merge_files, CollectOptions, DirCollector, Escaping, Format, Natives, Scrape, Warning,
};
use multiprom_format::native_file::native_histogram_path;
use multiprom_format::{
    encode_key, float_to_go_string, ExemplarWriter, FileName, FileWriter, MetricKind,
    NativeHistogram, NativeHistogramConfig, NativeHistogramWriter,
};
use prost::Message;

/// The generated protobuf types, as the collector encodes with them.
#[allow(missing_docs, unreachable_pub, dead_code, clippy::all)]
mod schema {
    include!("../../src/exposition/protobuf/io.prometheus.client.rs");
}

const HELP: &str = "Latency.";
const BOUNDS: [f64; 2] = [0.25, 1.0];

/// A collection as a protobuf scrape asks for it: with native histograms.
fn for_protobuf(collector: &DirCollector) -> Arc<Scrape> {
    collector
        .collect_with(|_| Arc::default(), None, Natives::Merge)
        .unwrap()
}

fn labels(route: &str) -> [(&str, &str); 1] {
    [("route", route)]
}

fn native_key(route: &str) -> String {
    encode_key("latency_seconds", "latency_seconds", labels(route), HELP)
}

fn bucket_key(route: &str, le: &str) -> String {
    encode_key(
        "latency_seconds",
        "latency_seconds_bucket",
        [("le", le), ("route", route)],
        HELP,
    )
}

fn histogram_name(pid: &str) -> FileName {
    FileName::new(MetricKind::Histogram, pid).unwrap()
}

/// A worker's histogram file for `route` as prometheus_client writes it
/// (`_sum`, then per-bucket counts; with `bounds` empty, `+Inf` alone: a
/// native-only histogram's classic part), and, with `native`, the same
/// observations in its native histogram file.
fn worker(
    dir: &Path,
    pid: &str,
    route: &str,
    bounds: &[f64],
    observations: &[f64],
    native: Option<NativeHistogramConfig>,
) {
    let name = histogram_name(pid);
    let mut file = FileWriter::open(dir, &name).unwrap();
    let sum = encode_key(
        "latency_seconds",
        "latency_seconds_sum",
        labels(route),
        HELP,
    );
    file.slot(&sum).unwrap().add(observations.iter().sum());
    let mut les: Vec<f64> = bounds.to_vec();
    les.push(f64::INFINITY);
    let mut below = 0.0;
    for le in les {
        let count = observations.iter().filter(|v| **v <= le).count() as f64;
        let key = bucket_key(route, &float_to_go_string(le));
        file.slot(&key).unwrap().add(count - below);
        below = count;
    }
    if let Some(config) = native {
        let writer = NativeHistogramWriter::open(dir, &name).unwrap();
        let series = writer.series(&native_key(route), config).unwrap();
        for &v in observations {
            series.observe(v);
        }
    }
}

fn config(schema: i8, zero_threshold: f64) -> NativeHistogramConfig {
    NativeHistogramConfig {
        schema,
        zero_threshold,
        ..NativeHistogramConfig::default()
    }
}

/// `values` observed by one series made by `config`: what a merge of any
/// split of them must give at that resolution.
fn observed(values: &[f64], config: NativeHistogramConfig) -> NativeHistogram {
    let dir = tempfile::tempdir().unwrap();
    let writer = NativeHistogramWriter::open(dir.path(), &histogram_name("1")).unwrap();
    let series = writer.series(&native_key("/"), config).unwrap();
    for &v in values {
        series.observe(v);
    }
    series.snapshot()
}

fn route(route: &str) -> [(Arc<str>, Arc<str>); 1] {
    [("route".into(), route.into())]
}

/// Values whose sums are exact in any order: multiples of 1/64.
const FIRST: [f64; 7] = [0.00390625, 0.015625, 0.25, 0.3125, 1.5, -2.0, 0.0];
const SECOND: [f64; 5] = [0.0078125, 0.5, 0.75, 3.0, -0.125];

#[test]
fn series_merge_at_the_coarsest_schema_and_widest_zero_bucket() {
    let dir = tempfile::tempdir().unwrap();
    // 2^-7: a bucket boundary at schemas 3 and 1, so the zero bucket widens
    // to it exactly.
    let threshold = 0.0078125;
    worker(dir.path(), "1", "/", &BOUNDS, &FIRST, Some(config(3, 1e-9)));
    worker(
        dir.path(),
        "2",
        "/",
        &BOUNDS,
        &SECOND,
        Some(config(1, threshold)),
    );
    // A prometheus_client process: classic part only.
    worker(dir.path(), "3", "/", &BOUNDS, &[0.5], None);
    let scrape = for_protobuf(&DirCollector::new(dir.path()));
    assert!(scrape.warnings.is_empty(), "{:?}", scrape.warnings);
    let merged = scrape.natives.get("latency_seconds", &route("/")).unwrap();
    let all: Vec<f64> = FIRST.iter().chain(&SECOND).copied().collect();
    let expected = observed(&all, config(1, threshold));
    assert_eq!(merged, &expected);
    assert_eq!(merged.schema, 1);
    assert_eq!(merged.zero_threshold, threshold);
    // 0.0 and 0.0078125, and 0.00390625 from the bucket it had at schema 3.
    assert_eq!(merged.zero_count, 3);
    assert_eq!(merged.count(), 12);
    assert_eq!(scrape.natives.len(), 1);

    // merge_files merges what it is given, each occurrence again.
    let files = [
        dir.path().join("histogram_1.db"),
        dir.path().join("histogram_1.db"),
    ];
    let twice = merge_files(&files, CollectOptions::default());
    let merged = twice.natives.get("latency_seconds", &route("/")).unwrap();
    assert_eq!(merged.count(), 2 * FIRST.len() as u64);
}

/// The length-delimited messages of `bytes`.
fn decode(mut bytes: &[u8]) -> Vec<schema::MetricFamily> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        out.push(schema::MetricFamily::decode_length_delimited(&mut bytes).unwrap());
    }
    out
}

/// The `(index, count)` buckets spans and deltas stand for, empty ones
/// left out: the inverse of the encoding, written from the proto's docs.
fn buckets(spans: &[schema::BucketSpan], deltas: &[i64]) -> Vec<(i32, u64)> {
    let mut out = Vec::new();
    let (mut index, mut count, mut deltas) = (0i32, 0i64, deltas.iter());
    // The first offset is the first index; later ones, gaps after the
    // last span's end.
    for span in spans {
        index += span.offset();
        for _ in 0..span.length() {
            count += deltas.next().unwrap();
            if count != 0 {
                out.push((index, u64::try_from(count).unwrap()));
            }
            index += 1;
        }
    }
    assert!(deltas.next().is_none(), "more deltas than spans cover");
    out
}

fn histogram_of<'a>(families: &'a [schema::MetricFamily], route: &str) -> &'a schema::Histogram {
    let family = families
        .iter()
        .find(|f| f.name() == "latency_seconds")
        .unwrap();
    let metric = family
        .metric
        .iter()
        .find(|m| {
            m.label
                .iter()
                .any(|l| l.name() == "route" && l.value() == route)
        })
        .unwrap();
    metric.histogram.as_ref().unwrap()
}

#[test]
fn protobuf_carries_every_native_field() {
    let dir = tempfile::tempdir().unwrap();
    let threshold = 0.0078125;
    worker(dir.path(), "1", "/", &BOUNDS, &FIRST, Some(config(3, 1e-9)));
    worker(
        dir.path(),
        "2",
        "/",
        &BOUNDS,
        &SECOND,
        Some(config(1, threshold)),
    );
    // Native-only (classic part `+Inf` alone), and a series never observed.
    worker(
        dir.path(),
        "4",
        "/n",
        &[],
        &[0.5, 2.0],
        Some(config(3, 0.0)),
    );
    worker(dir.path(), "5", "/e", &BOUNDS, &[], Some(config(3, 0.0)));
    // Exemplars on a bucket of "/" and on the only bucket of "/n".
    let exemplars = ExemplarWriter::open(dir.path(), &histogram_name("1")).unwrap();
    exemplars
        .slot(&bucket_key("/", "0.25"))
        .unwrap()
        .store([("trace_id", "a")], 0.015625, 1_700_000_000.5)
        .unwrap();
    let exemplars = ExemplarWriter::open(dir.path(), &histogram_name("4")).unwrap();
    exemplars
        .slot(&bucket_key("/n", "+Inf"))
        .unwrap()
        .store([("trace_id", "n")], 2.0, 1_700_000_001.0)
        .unwrap();

    let scrape = for_protobuf(&DirCollector::new(dir.path()));
    let families = decode(&scrape.encode_protobuf(Escaping::Underscores));
    let all: Vec<f64> = FIRST.iter().chain(&SECOND).copied().collect();
    let expected = observed(&all, config(1, threshold));

    let h = histogram_of(&families, "/");
    assert_eq!(h.schema, Some(1));
    assert_eq!(h.zero_threshold, Some(threshold));
    assert_eq!(h.zero_count, Some(3));
    assert_eq!(h.sample_count, Some(12));
    assert_eq!(h.sample_count_float, None);
    assert_eq!(h.sample_sum, Some(all.iter().sum()));
    assert_eq!(
        buckets(&h.positive_span, &h.positive_delta),
        expected.positive
    );
    assert_eq!(
        buckets(&h.negative_span, &h.negative_delta),
        expected.negative
    );
    assert!(h.positive_count.is_empty() && h.negative_count.is_empty());
    assert_eq!(h.zero_count_float, None);
    // Classic buckets kept (`+Inf` left for Prometheus to make from
    // sample_count, the same count); the exemplar on its bucket and in the
    // native exemplars.
    let bounds: Vec<f64> = h.bucket.iter().map(|b| b.upper_bound()).collect();
    assert_eq!(bounds, BOUNDS);
    assert_eq!(h.bucket[0].exemplar.as_ref().unwrap().value(), 0.015625);
    assert_eq!(h.exemplars.len(), 1);
    assert_eq!(h.exemplars[0].label[0].value(), "a");
    assert_eq!(h.exemplars[0].timestamp.unwrap().seconds, 1_700_000_000);

    let n = histogram_of(&families, "/n");
    assert!(n.bucket.is_empty(), "native-only: {:?}", n.bucket);
    assert_eq!(n.sample_count, Some(2));
    assert_eq!(n.sample_sum, Some(2.5));
    assert_eq!(n.schema, Some(3));
    assert_eq!(n.zero_threshold, Some(0.0));
    // 0.5 is bucket -8 at schema 3, 2.0 bucket 8: two spans.
    assert_eq!(n.positive_span.len(), 2);
    assert_eq!(
        buckets(&n.positive_span, &n.positive_delta),
        vec![(-8, 1), (8, 1)]
    );
    assert_eq!(n.exemplars.len(), 1);
    assert_eq!(n.exemplars[0].value(), 2.0);

    let e = histogram_of(&families, "/e");
    assert_eq!(
        e.positive_span,
        vec![schema::BucketSpan {
            offset: Some(0),
            length: Some(0)
        }]
    );
    assert!(e.positive_delta.is_empty() && e.negative_span.is_empty());
    assert_eq!((e.sample_count, e.zero_count), (Some(0), Some(0)));
    assert_eq!(e.bucket.len(), 2);
}

#[test]
fn a_classic_count_other_than_the_native_one_keeps_the_inf_bucket() {
    let dir = tempfile::tempdir().unwrap();
    worker(dir.path(), "1", "/", &BOUNDS, &FIRST, Some(config(3, 0.0)));
    // Classic only: the classic count is one more than the native one.
    worker(dir.path(), "2", "/", &BOUNDS, &[5.0], None);
    let scrape = for_protobuf(&DirCollector::new(dir.path()));
    let families = decode(&scrape.encode_protobuf(Escaping::Underscores));
    let h = histogram_of(&families, "/");
    let native = FIRST.len() as u64;
    assert_eq!(h.sample_count, Some(native));
    let inf = h.bucket.last().unwrap();
    assert_eq!(
        (inf.upper_bound(), inf.cumulative_count()),
        (f64::INFINITY, native + 1)
    );
}

#[test]
fn a_bad_native_file_is_reported_once_and_costs_only_its_histograms() {
    let dir = tempfile::tempdir().unwrap();
    worker(dir.path(), "1", "/", &BOUNDS, &FIRST, Some(config(3, 0.0)));
    worker(dir.path(), "2", "/", &BOUNDS, &SECOND, Some(config(3, 0.0)));
    worker(
        dir.path(),
        "3",
        "/b",
        &BOUNDS,
        &SECOND,
        Some(config(3, 0.0)),
    );
    let clean = for_protobuf(&DirCollector::new(dir.path()));
    let bad = native_histogram_path(dir.path(), &histogram_name("2"));
    std::fs::write(&bad, b"not a native histogram file").unwrap();

    let collector = DirCollector::new(dir.path());
    let scrape = for_protobuf(&collector);
    assert_eq!(scrape.warnings.len(), 1, "{:?}", scrape.warnings);
    let Warning::NativeHistograms(error) = &scrape.warnings[0] else {
        panic!("unexpected warning {:?}", scrape.warnings[0]);
    };
    assert_eq!(error.path, bad);
    assert_eq!(scrape.stats.files_bad, 0);
    // Every sample as before; worker 1's natives alone for "/", and "/b"'s.
    assert_eq!(scrape.families, clean.families);
    let first = scrape.natives.get("latency_seconds", &route("/")).unwrap();
    assert_eq!(first, &observed(&FIRST, config(3, 0.0)));
    assert!(scrape
        .natives
        .get("latency_seconds", &route("/b"))
        .is_some());
    assert!(for_protobuf(&collector).warnings.is_empty());

    // Cut short (a used length past its end): reported again, as new.
    let good = std::fs::read(native_histogram_path(dir.path(), &histogram_name("3"))).unwrap();
    std::fs::write(&bad, &good[..40]).unwrap();
    let scrape = for_protobuf(&collector);
    assert!(
        matches!(&scrape.warnings[..], [Warning::NativeHistograms(e)] if e.path == bad),
        "{:?}",
        scrape.warnings
    );
    // Gone: no warning, no natives of it.
    std::fs::remove_file(&bad).unwrap();
    let scrape = for_protobuf(&collector);
    assert!(scrape.warnings.is_empty(), "{:?}", scrape.warnings);
    assert_eq!(scrape.natives.len(), 2);
}

#[test]
fn text_and_openmetrics_are_the_same_with_and_without_native_files() {
    let with = tempfile::tempdir().unwrap();
    let without = tempfile::tempdir().unwrap();
    for (dir, native) in [(with.path(), Some(config(3, 0.0))), (without.path(), None)] {
        worker(dir, "1", "/", &BOUNDS, &FIRST, native);
        worker(dir, "2", "/", &BOUNDS, &SECOND, native);
        worker(dir, "3", "/n", &[], &[0.5, 2.0], native);
    }
    let with = for_protobuf(&DirCollector::new(with.path()));
    let without = for_protobuf(&DirCollector::new(without.path()));
    assert_eq!(with.natives.len(), 2);
    assert!(without.natives.is_empty());
    for format in [Format::Prometheus, Format::OpenMetrics] {
        assert_eq!(with.encode(format), without.encode(format));
    }
    // The native-only series as Python shows it: `+Inf`, count and sum.
    assert!(with
        .encode(Format::Prometheus)
        .contains("latency_seconds_bucket{le=\"+Inf\",route=\"/n\"} 2.0\n"));
    // Only the protobuf output has them.
    assert_ne!(
        with.encode_protobuf(Escaping::Underscores),
        without.encode_protobuf(Escaping::Underscores)
    );
}
