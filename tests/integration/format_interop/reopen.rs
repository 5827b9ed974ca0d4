//! Reopening a file with the same id, across languages: Python continues a
//! Rust-written file and Rust a Python-written one.

use super::*;

// ---------------------------------------------------------------------------
// c. Reopening a file with the same id, across languages

/// Mirrors the metrics of tests/python/format_python_reopen.py.
struct ReopenKeys;

const REOPEN_PATHS: [&str; 2] = ["/a", "/\u{fc}\u{1F600}\n\"q\""];
const REOPEN_LE: [&str; 3] = ["0.5", "1.0", "+Inf"];

impl ReopenKeys {
    fn requests(path: &str) -> String {
        encode_key(
            "reopen_requests",
            "reopen_requests_total",
            [("path", path)],
            TRICKY_HELP,
        )
    }
    fn inflight() -> String {
        encode_key(
            "reopen_inflight",
            "reopen_inflight",
            [("path", "/a")],
            "In flight",
        )
    }
    fn last() -> String {
        encode_key("reopen_last", "reopen_last", [], "Last seen")
    }
    fn latency_sum() -> String {
        encode_key("reopen_latency", "reopen_latency_sum", [], "Latency \"s\"")
    }
    fn latency_bucket(le: &str) -> String {
        encode_key(
            "reopen_latency",
            "reopen_latency_bucket",
            [("le", le)],
            "Latency \"s\"",
        )
    }
    fn size_count() -> String {
        encode_key("reopen_size", "reopen_size_count", [], "Size")
    }
    fn size_sum() -> String {
        encode_key("reopen_size", "reopen_size_sum", [], "Size")
    }
}

fn reopen_name(kind: MetricKind, id: &str) -> FileName {
    FileName::new(kind, id).unwrap()
}

/// Runs the Python worker with `id` for `step`; returns (before, after).
fn python_reopen(
    dir: &Path,
    id: &str,
    step: u32,
) -> (BTreeMap<String, f64>, BTreeMap<String, f64>) {
    let out = run_python(
        "format_python_reopen.py",
        &[id, &step.to_string()],
        &[(MULTIPROC_ENV, dir)],
    );
    let v = parse_json(&out);
    let map = |v: &Value| -> BTreeMap<String, f64> {
        v.as_object()
            .unwrap()
            .iter()
            .map(|(k, x)| (k.clone(), x.as_f64().unwrap()))
            .collect()
    };
    (map(&v["before"]), map(&v["after"]))
}

/// Reads a file, asserting every key appears once; returns key -> (value, timestamp).
fn read_unique(path: &Path) -> (Vec<String>, BTreeMap<String, (f64, f64)>) {
    let contents = read_file(path).unwrap_or_else(|e| panic!("{e}"));
    let mut order = Vec::new();
    let mut map = BTreeMap::new();
    for e in contents.entries {
        assert!(
            map.insert(e.raw_key.clone(), (e.value, e.timestamp))
                .is_none(),
            "{}: duplicate entry {}",
            path.display(),
            e.raw_key
        );
        order.push(e.raw_key);
    }
    (order, map)
}

fn expect_values(want: &[(&str, f64)], got: &BTreeMap<String, f64>, what: &str) {
    for (k, v) in want {
        assert_eq!(got.get(*k), Some(v), "{what}: {k} (all: {got:?})");
    }
}

#[test]
fn python_continues_a_rust_written_file() {
    let dir = temp_dir();
    let id = "rs4242";
    let counter = reopen_name(MetricKind::Counter, id);
    let step_key = ReopenKeys::requests("/step1");
    let capacity_before;
    {
        let mut w = FileWriter::open(dir.path(), &counter).unwrap();
        // Put the real series past the first 64 KiB...
        for i in 0..1200 {
            w.slot(&encode_key(
                "reopen_filler",
                "reopen_filler_total",
                [("n", i.to_string().as_str())],
                "",
            ))
            .unwrap();
        }
        w.slot(&ReopenKeys::requests(REOPEN_PATHS[0]))
            .unwrap()
            .set(5.0);
        w.slot(&ReopenKeys::requests(REOPEN_PATHS[1]))
            .unwrap()
            .set(7.0);
        // ...and fill the file so that Python's first new entry must grow it.
        let mut n = 0;
        while w.capacity() - (w.used() as u64) >= layout::entry_len(step_key.len()) as u64 {
            w.slot(&format!(
                "[\"reopen_pad\", \"reopen_pad\", {{\"n\": \"{n}\"}}, \"\"]"
            ))
            .unwrap();
            n += 1;
        }
        capacity_before = w.capacity();
        assert!(capacity_before > layout::INITIAL_CAPACITY);
        let mut g = FileWriter::open(
            dir.path(),
            &reopen_name(MetricKind::Gauge(GaugeMode::LiveSum), id),
        )
        .unwrap();
        g.slot(&ReopenKeys::inflight()).unwrap().set(3.0);
        let mut m = FileWriter::open(
            dir.path(),
            &reopen_name(MetricKind::Gauge(GaugeMode::MostRecent), id),
        )
        .unwrap();
        m.slot(&ReopenKeys::last())
            .unwrap()
            .set_with_timestamp(9.0, 50.0);
        let mut h = FileWriter::open(dir.path(), &reopen_name(MetricKind::Histogram, id)).unwrap();
        h.slot(&ReopenKeys::latency_sum()).unwrap().set(1.5);
        for (le, v) in REOPEN_LE.iter().zip([1.0, 2.0, 0.0]) {
            h.slot(&ReopenKeys::latency_bucket(le)).unwrap().set(v);
        }
        let mut s = FileWriter::open(dir.path(), &reopen_name(MetricKind::Summary, id)).unwrap();
        s.slot(&ReopenKeys::size_count()).unwrap().set(4.0);
        s.slot(&ReopenKeys::size_sum()).unwrap().set(8.0);
    }
    let counter_path = dir.path().join(counter.to_string());
    let (order_before, _) = read_unique(&counter_path);

    let (before, after) = python_reopen(dir.path(), id, 1);
    let p0 = format!("requests{}", REOPEN_PATHS[0]);
    let p1 = format!("requests{}", REOPEN_PATHS[1]);
    expect_values(
        &[
            (&p0, 5.0),
            (&p1, 7.0),
            ("requests/step1", 0.0),
            ("inflight/a", 3.0),
            ("last", 9.0),
            ("latency_sum", 1.5),
            ("latency_bucket0", 1.0),
            ("latency_bucket1", 2.0),
            ("latency_bucket2", 0.0),
            ("size_count", 4.0),
            ("size_sum", 8.0),
        ],
        &before,
        "Python's view of the Rust-written values",
    );
    expect_values(
        &[
            (&p0, 6.0),
            (&p1, 9.0),
            ("requests/step1", 3.0),
            ("inflight/a", 4.0),
            ("last", 101.0),
        ],
        &after,
        "Python's values after updating",
    );

    // Python appended exactly one entry (its new series) and grew the file by doubling.
    let (order_after, counter_values) = read_unique(&counter_path);
    assert_eq!(order_after.len(), order_before.len() + 1);
    assert_eq!(order_after[..order_before.len()], order_before[..]);
    assert_eq!(order_after.last(), Some(&step_key));
    assert_eq!(
        std::fs::metadata(&counter_path).unwrap().len(),
        2 * capacity_before
    );
    assert_eq!(
        counter_values[&ReopenKeys::requests(REOPEN_PATHS[0])].0,
        6.0
    );
    assert_eq!(
        counter_values[&ReopenKeys::requests(REOPEN_PATHS[1])].0,
        9.0
    );
    assert_eq!(counter_values[&step_key].0, 3.0);

    let read = |kind| read_unique(&dir.path().join(reopen_name(kind, id).to_string())).1;
    let gauge = read(MetricKind::Gauge(GaugeMode::LiveSum));
    assert_eq!(gauge.len(), 1);
    assert_eq!(gauge[&ReopenKeys::inflight()], (4.0, 0.0));
    let last = read(MetricKind::Gauge(GaugeMode::MostRecent));
    assert_eq!(last.len(), 1);
    let (value, timestamp) = last[&ReopenKeys::last()];
    assert_eq!(value, 101.0);
    assert!(
        timestamp > 1.0e9,
        "mostrecent timestamp not set: {timestamp}"
    );
    let hist = read(MetricKind::Histogram);
    assert_eq!(hist.len(), 4);
    assert_eq!(hist[&ReopenKeys::latency_sum()].0, 1.5 + 0.7);
    for (le, v) in REOPEN_LE.iter().zip([1.0, 3.0, 0.0]) {
        assert_eq!(hist[&ReopenKeys::latency_bucket(le)].0, v, "le={le}");
    }
    let summary = read(MetricKind::Summary);
    assert_eq!(summary.len(), 2);
    assert_eq!(summary[&ReopenKeys::size_count()].0, 5.0);
    assert_eq!(summary[&ReopenKeys::size_sum()].0, 10.0);
}

#[test]
fn rust_continues_a_python_written_file() {
    let dir = temp_dir();
    let id = "py888";
    let (_, first) = python_reopen(dir.path(), id, 1);
    let p0 = format!("requests{}", REOPEN_PATHS[0]);
    let p1 = format!("requests{}", REOPEN_PATHS[1]);

    let kinds = [
        MetricKind::Counter,
        MetricKind::Gauge(GaugeMode::LiveSum),
        MetricKind::Gauge(GaugeMode::MostRecent),
        MetricKind::Histogram,
        MetricKind::Summary,
    ];
    assert_eq!(
        db_files(dir.path()),
        kinds
            .iter()
            .map(|&k| reopen_name(k, id).to_string())
            .collect::<BTreeSet<_>>()
    );
    let mut writers: BTreeMap<String, FileWriter> = BTreeMap::new();
    for kind in kinds {
        let name = reopen_name(kind, id);
        let on_disk = read_file(&dir.path().join(name.to_string())).unwrap();
        let w = FileWriter::open(dir.path(), &name).unwrap();
        assert_eq!(w.len(), on_disk.entries.len(), "{name}");
        assert_eq!(w.used() as u64, on_disk.header.used, "{name}");
        writers.insert(name.to_string(), w);
    }
    let w = |kind: MetricKind| reopen_name(kind, id).to_string();
    // Every series Python created is found under Rust's encoding of its key,
    // with Python's value.
    let found = |name: &str, key: &str| -> f64 {
        writers[name]
            .get(key)
            .unwrap_or_else(|| panic!("{name}: Rust's key not found in Python's file: {key}"))
            .get()
    };
    let counter = w(MetricKind::Counter);
    assert_eq!(
        found(&counter, &ReopenKeys::requests(REOPEN_PATHS[0])),
        first[&p0]
    );
    assert_eq!(
        found(&counter, &ReopenKeys::requests(REOPEN_PATHS[1])),
        first[&p1]
    );
    assert_eq!(found(&counter, &ReopenKeys::requests("/step1")), 3.0);
    let livesum = w(MetricKind::Gauge(GaugeMode::LiveSum));
    assert_eq!(
        found(&livesum, &ReopenKeys::inflight()),
        first["inflight/a"]
    );
    let mostrecent = w(MetricKind::Gauge(GaugeMode::MostRecent));
    assert_eq!(found(&mostrecent, &ReopenKeys::last()), 101.0);
    let histogram = w(MetricKind::Histogram);
    assert_eq!(
        found(&histogram, &ReopenKeys::latency_sum()),
        first["latency_sum"]
    );
    for (i, le) in REOPEN_LE.iter().enumerate() {
        assert_eq!(
            found(&histogram, &ReopenKeys::latency_bucket(le)),
            first[&format!("latency_bucket{i}")]
        );
    }
    let summary = w(MetricKind::Summary);
    assert_eq!(found(&summary, &ReopenKeys::size_count()), 1.0);
    assert_eq!(found(&summary, &ReopenKeys::size_sum()), 2.0);

    // Rust continues: updates in place, and one new series of its own.
    let used_before: BTreeMap<String, usize> =
        writers.iter().map(|(k, w)| (k.clone(), w.used())).collect();
    {
        let c = writers.get_mut(&counter).unwrap();
        c.slot(&ReopenKeys::requests(REOPEN_PATHS[0]))
            .unwrap()
            .add(1.0);
        c.slot(&ReopenKeys::requests(REOPEN_PATHS[1]))
            .unwrap()
            .add(2.0);
        c.slot(&ReopenKeys::requests("/rust")).unwrap().add(10.0);
    }
    writers
        .get_mut(&livesum)
        .unwrap()
        .slot(&ReopenKeys::inflight())
        .unwrap()
        .add(1.0);
    writers
        .get_mut(&mostrecent)
        .unwrap()
        .slot(&ReopenKeys::last())
        .unwrap()
        .set_with_timestamp(200.0, 2.0e9);
    {
        let h = writers.get_mut(&histogram).unwrap();
        h.slot(&ReopenKeys::latency_sum()).unwrap().add(0.7);
        h.slot(&ReopenKeys::latency_bucket("1.0")).unwrap().add(1.0);
    }
    {
        let s = writers.get_mut(&summary).unwrap();
        s.slot(&ReopenKeys::size_count()).unwrap().add(1.0);
        s.slot(&ReopenKeys::size_sum()).unwrap().add(2.0);
    }
    for (name, w) in &writers {
        let grew = w.used() - used_before[name];
        let want = if *name == counter {
            layout::entry_len(ReopenKeys::requests("/rust").len())
        } else {
            0
        };
        assert_eq!(
            grew, want,
            "{name}: Rust appended the wrong number of bytes"
        );
    }
    drop(writers);

    // Python, reopening again, sees Rust's values and continues from them.
    let (before, after) = python_reopen(dir.path(), id, 2);
    expect_values(
        &[
            (&p0, 2.0),
            (&p1, 4.0),
            ("requests/step2", 0.0),
            ("inflight/a", 2.0),
            ("last", 200.0),
            ("latency_sum", 1.4),
            ("latency_bucket1", 2.0),
            ("size_count", 2.0),
            ("size_sum", 4.0),
        ],
        &before,
        "Python's view of the values Rust carried on",
    );
    expect_values(
        &[
            (&p0, 3.0),
            (&p1, 6.0),
            ("requests/step2", 3.0),
            ("last", 102.0),
            ("size_count", 3.0),
        ],
        &after,
        "Python's values after its second run",
    );
    let (order, values) = read_unique(&dir.path().join(&counter));
    assert_eq!(
        order,
        [
            ReopenKeys::requests(REOPEN_PATHS[0]),
            ReopenKeys::requests(REOPEN_PATHS[1]),
            ReopenKeys::requests("/step1"),
            ReopenKeys::requests("/rust"),
            ReopenKeys::requests("/step2"),
        ]
    );
    let counter_values: Vec<f64> = order.iter().map(|k| values[k].0).collect();
    assert_eq!(counter_values, [3.0, 6.0, 3.0, 10.0, 3.0]);
    for kind in kinds {
        // No file gained duplicates.
        read_unique(&dir.path().join(reopen_name(kind, id).to_string()));
    }
}
