//! A collector that keeps what exemplar files held between scrapes follows
//! them as they change: an exemplar rewritten in place, a file replaced by
//! one with other keys at the same places, a file added or removed, and
//! filtered and whole collections taking turns.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use multiprom_collector::{DirCollector, Format, NameFilter};
use multiprom_format::{encode_key, ExemplarWriter, FileName, FileWriter, MetricKind};

fn requests(code: &str) -> String {
    encode_key("requests", "requests_total", [("code", code)], "Requests.")
}

fn bucket(le: &str) -> String {
    encode_key("wait", "wait_bucket", [("le", le)], "Wait.")
}

/// Sets `values` in the file of `kind` for `pid` in `dir`, and stores
/// `exemplars` (key, trace id, timestamp) in its exemplar file, in order.
fn write(
    dir: &Path,
    kind: MetricKind,
    pid: &str,
    values: &[&str],
    exemplars: &[(&str, &str, f64)],
) {
    let name = FileName::new(kind, pid).unwrap();
    let mut file = FileWriter::open(dir, &name).unwrap();
    for key in values {
        file.slot(key).unwrap().set(1.0);
    }
    let writer = ExemplarWriter::open(dir, &name).unwrap();
    for (key, trace, timestamp) in exemplars {
        writer
            .slot(key)
            .unwrap()
            .store([("trace_id", *trace)], 1.0, *timestamp)
            .unwrap();
    }
}

fn openmetrics(collector: &DirCollector) -> String {
    collector.collect().unwrap().encode(Format::OpenMetrics)
}

fn assert_has(text: &str, lines: &[&str]) {
    for line in lines {
        assert!(text.contains(line), "{line:?} not in\n{text}");
    }
}

#[test]
fn a_warm_collector_follows_exemplar_files_as_they_change() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, failed) = (requests("200"), requests("500"));
    let counter = MetricKind::Counter;
    write(
        dir.path(),
        counter,
        "1",
        &[&ok, &failed],
        &[(&ok, "a", 100.0), (&failed, "b", 50.0)],
    );
    let collector = DirCollector::new(dir.path());
    for _ in 0..2 {
        assert_has(
            &openmetrics(&collector),
            &[
                "requests_total{code=\"200\"} 1.0 # {trace_id=\"a\"} 1.0 100.0\n",
                "requests_total{code=\"500\"} 1.0 # {trace_id=\"b\"} 1.0 50.0\n",
            ],
        );
    }

    // Unchanged, an exemplar is handed on as it was (an encoder's line
    // cache then copies its line instead of formatting it again).
    let exemplars_of = |scrape: &multiprom_collector::Scrape| -> Vec<_> {
        let samples = scrape.families.iter().flat_map(|f| &f.samples);
        samples.filter_map(|s| s.exemplar.clone()).collect()
    };
    let (first, second) = (collector.collect().unwrap(), collector.collect().unwrap());
    let (first, second) = (exemplars_of(&first), exemplars_of(&second));
    assert_eq!(first.len(), 2);
    assert!(first.iter().zip(&second).all(|(a, b)| Arc::ptr_eq(a, b)));

    // Rewritten in place.
    write(dir.path(), counter, "1", &[], &[(&ok, "c", 150.0)]);
    assert_has(
        &openmetrics(&collector),
        &["requests_total{code=\"200\"} 1.0 # {trace_id=\"c\"} 1.0 150.0\n"],
    );

    // Replaced by a file with the same keys the other way round: each
    // offset now holds the other series.
    let elsewhere = tempfile::tempdir().unwrap();
    write(
        elsewhere.path(),
        counter,
        "1",
        &[],
        &[(&failed, "d", 10.0), (&ok, "e", 20.0)],
    );
    let exemplars = |dir: &Path| dir.join("exemplars").join("counter_1.exemplars");
    std::fs::rename(exemplars(elsewhere.path()), exemplars(dir.path())).unwrap();
    assert_has(
        &openmetrics(&collector),
        &[
            "requests_total{code=\"200\"} 1.0 # {trace_id=\"e\"} 1.0 20.0\n",
            "requests_total{code=\"500\"} 1.0 # {trace_id=\"d\"} 1.0 10.0\n",
        ],
    );

    // Another file's exemplar, later: it wins.
    write(dir.path(), counter, "2", &[&ok], &[(&ok, "f", 30.0)]);
    assert_has(
        &openmetrics(&collector),
        &[
            "requests_total{code=\"200\"} 2.0 # {trace_id=\"f\"} 1.0 30.0\n",
            "requests_total{code=\"500\"} 1.0 # {trace_id=\"d\"} 1.0 10.0\n",
        ],
    );

    // Removed: its exemplars go with it.
    std::fs::remove_file(exemplars(dir.path())).unwrap();
    let text = openmetrics(&collector);
    assert_has(
        &text,
        &[
            "requests_total{code=\"200\"} 2.0 # {trace_id=\"f\"} 1.0 30.0\n",
            "requests_total{code=\"500\"} 1.0\n",
        ],
    );
    assert_eq!(text.matches(" # {").count(), 1, "{text}");
}

#[test]
fn filtered_and_whole_collections_in_turn_carry_the_same_exemplars() {
    let dir = tempfile::tempdir().unwrap();
    let ok = requests("200");
    let (low, high) = (bucket("0.5"), bucket("1"));
    write(
        dir.path(),
        MetricKind::Counter,
        "1",
        &[&ok],
        &[(&ok, "a", 100.0)],
    );
    write(
        dir.path(),
        MetricKind::Histogram,
        "1",
        &[&low, &high],
        &[(&high, "h", 7.0)],
    );
    let collector = DirCollector::new(dir.path());
    let only = NameFilter::new(["wait_bucket"]);
    let counter_line = "requests_total{code=\"200\"} 1.0 # {trace_id=\"a\"} 1.0 100.0\n";
    // `le="1"` is merged as `1.0`, and its exemplar with it.
    let bucket_line = "wait_bucket{le=\"1.0\"} 2.0 # {trace_id=\"h\"} 1.0 7.0\n";
    for _ in 0..2 {
        let text = collector
            .collect_only(&only)
            .unwrap()
            .encode(Format::OpenMetrics);
        assert_has(&text, &[bucket_line, "wait_bucket{le=\"0.5\"} 1.0\n"]);
        assert_eq!(text.matches(" # {").count(), 1, "{text}");
        assert_has(&openmetrics(&collector), &[counter_line, bucket_line]);
    }
}

#[test]
fn exemplars_a_worker_begins_after_the_collector_is_warm_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let ok = requests("200");
    // Values only so far: no exemplar directory.
    let name = FileName::new(MetricKind::Counter, "1").unwrap();
    FileWriter::open(dir.path(), &name)
        .unwrap()
        .slot(&ok)
        .unwrap()
        .set(1.0);
    let collector = DirCollector::new(dir.path());
    let plain = "requests_total{code=\"200\"} 1.0\n";
    for _ in 0..3 {
        assert_has(&openmetrics(&collector), &[plain]);
    }
    // Its first exemplar makes the directory and the file, and no new
    // `*.db` file; a collection that carries no exemplar (and so does not
    // look for them) sees the directory's event first.
    let writer = ExemplarWriter::open(dir.path(), &name).unwrap();
    writer
        .slot(&ok)
        .unwrap()
        .store([("trace_id", "a")], 1.0, 100.0)
        .unwrap();
    let gauges = NameFilter::new(["nothing_here"]);
    collector.collect_only(&gauges).unwrap();
    let with = "requests_total{code=\"200\"} 1.0 # {trace_id=\"a\"} 1.0 100.0\n";
    assert_has(&openmetrics(&collector), &[with]);
    // And the directory cleared away: nothing is read from it.
    drop(writer);
    std::fs::remove_dir_all(dir.path().join("exemplars")).unwrap();
    for _ in 0..2 {
        assert_has(&openmetrics(&collector), &[plain]);
    }
}
