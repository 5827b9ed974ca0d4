//! Exemplars written beside a directory's `*.db` files, merged (the latest
//! per series, per bucket) and printed by `multiprom scrape` and
//! `multiprom serve` in OpenMetrics exactly as `prometheus_client` prints
//! the same samples with the same exemplars.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use multiprom_format::{encode_key, ExemplarWriter, FileName, FileWriter, MetricKind};
use serde_json::json;

use crate::harness::{multiprom, run_python, temp_dir};
use crate::http_client::get;
use crate::python_package::{assert_success, run_script};
use crate::serve::serve;

/// An exemplar to store: the entry's key, labels, value, timestamp.
type Stored<'a> = (String, Vec<(&'a str, &'a str)>, f64, f64);

/// One worker's file: values by key, and exemplars.
struct Worker<'a> {
    kind: MetricKind,
    pid: &'a str,
    values: Vec<(String, f64)>,
    exemplars: Vec<Stored<'a>>,
}

fn write(dir: &Path, worker: &Worker<'_>) {
    let name = FileName::new(worker.kind, worker.pid).unwrap();
    let mut file = FileWriter::open(dir, &name).unwrap();
    for (key, value) in &worker.values {
        file.slot(key).unwrap().set(*value);
    }
    let exemplars = ExemplarWriter::open(dir, &name).unwrap();
    for (key, labels, value, timestamp) in &worker.exemplars {
        exemplars
            .slot(key)
            .unwrap()
            .store(labels.iter().copied(), *value, *timestamp)
            .unwrap();
    }
}

/// Counters and histograms of three workers, with exemplars whose
/// timestamps and labels take every form Python prints differently; returns
/// the exemplar each series must show (the latest).
fn write_workers(dir: &Path) -> serde_json::Value {
    let jobs = |queue: &str| encode_key("jobs", "jobs_total", [("queue", queue)], "Jobs \"done\".");
    let bucket = |route: &str, le: &str| {
        encode_key(
            "latency_seconds",
            "latency_seconds_bucket",
            [("route", route), ("le", le)],
            "Latency.",
        )
    };
    let sum = |route: &str| {
        encode_key(
            "latency_seconds",
            "latency_seconds_sum",
            [("route", route)],
            "Latency.",
        )
    };
    let workers = [
        Worker {
            kind: MetricKind::Counter,
            pid: "101",
            values: vec![(jobs("a"), 3.0), (jobs("b\n"), 1.0)],
            exemplars: vec![
                (jobs("a"), vec![("trace_id", "old")], 1.0, 1_700_000_000.5),
                (
                    jobs("b\n"),
                    vec![("user", "x\"y\\z\n"), ("id", "7")],
                    0.5,
                    1e16,
                ),
            ],
        },
        Worker {
            kind: MetricKind::Counter,
            pid: "102",
            values: vec![(jobs("a"), 4.0)],
            exemplars: vec![(jobs("a"), vec![("trace_id", "new")], 2.0, 1_700_000_001.25)],
        },
        Worker {
            kind: MetricKind::Histogram,
            pid: "101",
            values: vec![
                (sum("/"), 1.5),
                (bucket("/", "0.1"), 1.0),
                (bucket("/", "1.0"), 0.0),
                (bucket("/", "+Inf"), 1.0),
            ],
            exemplars: vec![
                (bucket("/", "0.1"), vec![("trace_id", "fast")], 0.05, 1.5e-5),
                (bucket("/", "+Inf"), vec![], 1.45, 123.0),
            ],
        },
        Worker {
            kind: MetricKind::Histogram,
            pid: "102",
            values: vec![
                (sum("/"), 0.7),
                (bucket("/", "0.1"), 0.0),
                (bucket("/", "1.0"), 1.0),
                (bucket("/", "+Inf"), 0.0),
            ],
            exemplars: vec![
                (bucket("/", "1.0"), vec![("trace_id", "mid")], 0.7, 0.0001),
                // Older than worker 101's on that bucket: not shown.
                (bucket("/", "0.1"), vec![("trace_id", "older")], 0.01, 1e-6),
            ],
        },
    ];
    for worker in &workers {
        write(dir, worker);
    }
    let exemplar = |sample: &str,
                    labels: serde_json::Value,
                    ex_labels: serde_json::Value,
                    value: f64,
                    timestamp: f64| {
        json!({"sample": sample, "labels": labels,
               "exemplar": {"labels": ex_labels, "value": value, "timestamp": timestamp}})
    };
    json!([
        exemplar(
            "jobs_total",
            json!({"queue": "a"}),
            json!({"trace_id": "new"}),
            2.0,
            1_700_000_001.25
        ),
        exemplar(
            "jobs_total",
            json!({"queue": "b\n"}),
            json!({"user": "x\"y\\z\n", "id": "7"}),
            0.5,
            1e16
        ),
        exemplar(
            "latency_seconds_bucket",
            json!({"route": "/", "le": "0.1"}),
            json!({"trace_id": "fast"}),
            0.05,
            1.5e-5
        ),
        exemplar(
            "latency_seconds_bucket",
            json!({"route": "/", "le": "1.0"}),
            json!({"trace_id": "mid"}),
            0.7,
            0.0001
        ),
        exemplar(
            "latency_seconds_bucket",
            json!({"route": "/", "le": "+Inf"}),
            json!({}),
            1.45,
            123.0
        ),
    ])
}

/// Python's OpenMetrics exposition of `dir` with the exemplars of `spec`.
fn python_openmetrics(dir: &Path, spec: &serde_json::Value) -> String {
    let spec_dir = temp_dir();
    let spec_file = spec_dir.path().join("spec.json");
    std::fs::write(&spec_file, spec.to_string()).unwrap();
    let out = run_python(
        "exemplar_exposition.py",
        &[dir.to_str().unwrap(), spec_file.to_str().unwrap()],
        &[],
    );
    String::from_utf8(out).unwrap()
}

#[test]
fn scrape_and_serve_print_exemplars_as_python_does_in_openmetrics_only() {
    let dir = temp_dir();
    let spec = write_workers(dir.path());
    let python = python_openmetrics(dir.path(), &spec);
    assert_eq!(python.matches(" # {").count(), 5, "{python}");

    let scrape = |format: &str| {
        let out = multiprom()
            .args(["scrape", "--format", format, "--dir"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "");
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(scrape("openmetrics"), python);
    let text = scrape("prometheus");
    assert!(!text.contains(" # "), "{text}");
    assert!(text.contains("jobs_total{queue=\"a\"} 7.0\n"), "{text}");

    let (_server, addr) = serve(dir.path(), &[]);
    let openmetrics = get(
        addr,
        "/metrics",
        &[("Accept", "application/openmetrics-text; version=1.0.0")],
    );
    assert_eq!(openmetrics.status, 200);
    let body = openmetrics.text();
    let python_body = python.strip_suffix("# EOF\n").unwrap();
    assert!(body.starts_with(python_body), "{body}\n---\n{python}");
    let text = get(addr, "/metrics", &[]).text();
    assert!(!text.contains(" # {"), "{text}");

    // The status page shows each family's latest exemplar.
    let page = get(addr, "/", &[]).text();
    for cell in [
        "<code>{}</code> 1.45, ",
        "<code>{user=&quot;x\\&quot;y\\\\z\\n&quot;,id=&quot;7&quot;}</code> 0.5, in the future",
    ] {
        assert!(page.contains(cell), "{cell} not in\n{page}");
    }
}

/// The Python package's collector: its `Sample` objects carry the
/// exemplars, and both its ways to OpenMetrics (the engine's encoding, and
/// prometheus_client's own code on its `Metric` objects from `collect()`
/// and `merge()`) print what prometheus_client prints.
#[test]
fn the_python_package_carries_exemplars_on_its_samples() {
    let dir = temp_dir();
    let spec = write_workers(dir.path());
    let reference_dir = temp_dir();
    let reference = reference_dir.path().join("reference.txt");
    std::fs::write(&reference, python_openmetrics(dir.path(), &spec)).unwrap();
    let out = run_script(
        "python_package_exemplars.py",
        &[dir.path().to_str().unwrap(), reference.to_str().unwrap()],
    );
    assert_success("python_package_exemplars.py", &out);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n");
}
