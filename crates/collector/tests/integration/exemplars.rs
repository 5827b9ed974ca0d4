//! Exemplars from the exemplar files beside the `*.db` files: the latest of
//! each series across all files, on the sample (or bucket) it was recorded
//! on, printed in OpenMetrics only; a bad exemplar file costs its exemplars
//! and a warning, never a sample.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use multiprom_collector::{merge_files, CollectOptions, DirCollector, Format, NameFilter, Warning};
use multiprom_format::{encode_key, ExemplarWriter, FileName, FileWriter, MetricKind};

/// A file of `kind` for `pid` with `values` (key, value), and exemplars
/// (key, trace id, value, timestamp) in its exemplar file.
fn write(
    dir: &Path,
    kind: MetricKind,
    pid: &str,
    values: &[(&str, f64)],
    exemplars: &[(&str, &str, f64, f64)],
) {
    let name = FileName::new(kind, pid).unwrap();
    let mut file = FileWriter::open(dir, &name).unwrap();
    for (key, value) in values {
        file.slot(key).unwrap().set(*value);
    }
    if exemplars.is_empty() {
        return;
    }
    let writer = ExemplarWriter::open(dir, &name).unwrap();
    for (key, trace, value, timestamp) in exemplars {
        writer
            .slot(key)
            .unwrap()
            .store([("trace_id", *trace)], *value, *timestamp)
            .unwrap();
    }
}

fn requests(code: &str) -> String {
    encode_key("requests", "requests_total", [("code", code)], "Requests.")
}

fn bucket(le: &str) -> String {
    encode_key("wait", "wait_bucket", [("le", le)], "Wait.")
}

/// Two workers' counters and histograms with exemplars, and a gauge whose
/// exemplar file (written by no multiprom writer) must be ignored.
fn workers(dir: &Path) {
    let sum = encode_key("wait", "wait_sum", [], "Wait.");
    write(
        dir,
        MetricKind::Counter,
        "1",
        &[(&requests("200"), 2.0), (&requests("500"), 1.0)],
        &[
            (&requests("200"), "a", 1.0, 100.0),
            (&requests("500"), "c", 1.0, 50.5),
            // No sample has this key: ignored.
            (&requests("404"), "x", 1.0, 999.0),
        ],
    );
    write(
        dir,
        MetricKind::Counter,
        "2",
        &[(&requests("200"), 3.0)],
        &[(&requests("200"), "b", 2.5, 200.0)],
    );
    write(
        dir,
        MetricKind::Histogram,
        "1",
        &[(&sum, 0.25), (&bucket("0.5"), 1.0), (&bucket("+Inf"), 0.0)],
        &[(&bucket("0.5"), "h1", 0.25, 300.0)],
    );
    write(
        dir,
        MetricKind::Histogram,
        "2",
        &[(&sum, 7.0), (&bucket("0.5"), 0.0), (&bucket("+Inf"), 1.0)],
        &[
            (&bucket("0.5"), "h2", 0.5, 10.0),
            (&bucket("+Inf"), "h3", 7.0, 1.7e9),
        ],
    );
    let busy = encode_key("busy", "busy", [], "Busy.");
    write(
        dir,
        MetricKind::Gauge(multiprom_format::GaugeMode::All),
        "1",
        &[(&busy, 1.0)],
        &[(&busy, "g", 1.0, 5000.0)],
    );
}

/// The OpenMetrics text of `workers`, families in the directory's order.
fn expected_openmetrics(text: &str) {
    for line in [
        "requests_total{code=\"200\"} 5.0 # {trace_id=\"b\"} 2.5 200.0\n",
        "requests_total{code=\"500\"} 1.0 # {trace_id=\"c\"} 1.0 50.5\n",
        "wait_bucket{le=\"0.5\"} 1.0 # {trace_id=\"h1\"} 0.25 300.0\n",
        "wait_bucket{le=\"+Inf\"} 2.0 # {trace_id=\"h3\"} 7.0 1700000000.0\n",
        "wait_sum 7.25\n",
        "wait_count 2.0\n",
        "busy{pid=\"1\"} 1.0\n",
    ] {
        assert!(text.contains(line), "{line:?} not in\n{text}");
    }
    assert_eq!(text.matches(" # {").count(), 4, "{text}");
}

#[test]
fn the_latest_exemplar_of_each_series_is_printed_in_openmetrics_only() {
    let dir = tempfile::tempdir().unwrap();
    workers(dir.path());
    let collector = DirCollector::new(dir.path());
    let scrape = collector.collect().unwrap();
    assert!(scrape.warnings.is_empty(), "{:?}", scrape.warnings);
    expected_openmetrics(&scrape.encode(Format::OpenMetrics));
    let prometheus = scrape.encode(Format::Prometheus);
    assert!(!prometheus.contains(" # {"), "{prometheus}");
    assert!(prometheus.contains("requests_total{code=\"200\"} 5.0\n"));

    // A newer exemplar in another file replaces it at the next collection.
    let name = FileName::new(MetricKind::Counter, "1").unwrap();
    let writer = ExemplarWriter::open(dir.path(), &name).unwrap();
    writer
        .slot(&requests("200"))
        .unwrap()
        .store([("trace_id", "new"), ("span", "s\"1\n")], 1.0, 1.5e-5)
        .unwrap();
    let text = collector.collect().unwrap().encode(Format::OpenMetrics);
    // Earlier than 200.0: the other file's stays.
    assert!(text.contains("requests_total{code=\"200\"} 5.0 # {trace_id=\"b\"} 2.5 200.0\n"));
    writer
        .slot(&requests("200"))
        .unwrap()
        .store([("trace_id", "new"), ("span", "s\"1\n")], 1.0, 1e16)
        .unwrap();
    let text = collector.collect().unwrap().encode(Format::OpenMetrics);
    assert!(
        text.contains(
            "requests_total{code=\"200\"} 5.0 # {span=\"s\\\"1\\n\",trace_id=\"new\"} 1.0 1e+16\n"
        ),
        "{text}"
    );
}

#[test]
fn given_files_and_filtered_collections_carry_exemplars_of_what_they_keep() {
    let dir = tempfile::tempdir().unwrap();
    workers(dir.path());
    let paths = multiprom_collector::scan_dir(dir.path()).unwrap();
    let merged = merge_files(&paths, CollectOptions::default());
    expected_openmetrics(&merged.encode(Format::OpenMetrics));
    // A file given twice: its exemplars are still one per series.
    let twice = merge_files(paths.iter().chain(&paths), CollectOptions::default());
    let text = twice.encode(Format::OpenMetrics);
    assert!(text.contains("requests_total{code=\"200\"} 10.0 # {trace_id=\"b\"} 2.5 200.0\n"));

    let collector = DirCollector::new(dir.path());
    let only = collector
        .collect_only(&NameFilter::new(["wait_bucket"]))
        .unwrap();
    assert_eq!(
        only.encode(Format::OpenMetrics),
        "# HELP wait Wait.\n# TYPE wait histogram\n\
         wait_bucket{le=\"0.5\"} 1.0 # {trace_id=\"h1\"} 0.25 300.0\n\
         wait_bucket{le=\"+Inf\"} 2.0 # {trace_id=\"h3\"} 7.0 1700000000.0\n# EOF\n"
    );
}

#[test]
fn a_bad_exemplar_file_is_reported_once_and_costs_no_sample() {
    let dir = tempfile::tempdir().unwrap();
    workers(dir.path());
    let bad = dir.path().join("exemplars").join("counter_2.exemplars");
    std::fs::write(&bad, b"not an exemplar file at all").unwrap();
    // A stray file in the subdirectory: not an exemplar file name, ignored.
    std::fs::write(dir.path().join("exemplars").join("notes.txt"), b"x").unwrap();
    let collector = DirCollector::new(dir.path());
    let scrape = collector.collect().unwrap();
    assert_eq!(scrape.warnings.len(), 1, "{:?}", scrape.warnings);
    let Warning::Exemplars(error) = &scrape.warnings[0] else {
        panic!("unexpected warning {:?}", scrape.warnings[0]);
    };
    assert_eq!(error.path, bad);
    assert_eq!(scrape.stats.files_bad, 0);
    let text = scrape.encode(Format::OpenMetrics);
    // Worker 2's exemplar is lost with its file; worker 1's is the latest left.
    assert!(
        text.contains("requests_total{code=\"200\"} 5.0 # {trace_id=\"a\"} 1.0 100.0\n"),
        "{text}"
    );
    assert!(collector.collect().unwrap().warnings.is_empty());

    // Vanished: no warning, no exemplar of it.
    std::fs::remove_file(&bad).unwrap();
    assert!(collector.collect().unwrap().warnings.is_empty());
    // The whole subdirectory replaced by a file: no exemplars, all samples.
    std::fs::remove_dir_all(dir.path().join("exemplars")).unwrap();
    std::fs::write(dir.path().join("exemplars"), b"").unwrap();
    let scrape = collector.collect().unwrap();
    assert!(scrape.warnings.is_empty(), "{:?}", scrape.warnings);
    let text = scrape.encode(Format::OpenMetrics);
    assert!(!text.contains(" # {"), "{text}");
    assert!(
        text.contains("requests_total{code=\"200\"} 5.0\n"),
        "{text}"
    );
}
