//! Behaviour of the registry and handles against the files they write.

use std::path::Path;
use std::sync::Arc;

use multiprom_format::{read_file, Entry, WriteError};

use crate::*;

fn registry(dir: &Path) -> MultiprocessRegistry {
    MultiprocessRegistry::builder()
        .dir(dir)
        .process_id("t")
        .build()
        .unwrap()
}

fn entries(dir: &Path, file: &str) -> Vec<Entry> {
    read_file(&dir.join(file)).unwrap().entries
}

fn keys_and_values(dir: &Path, file: &str) -> Vec<(String, f64)> {
    entries(dir, file)
        .into_iter()
        .map(|e| (e.raw_key, e.value))
        .collect()
}

#[test]
fn plain_metrics_create_their_entries_at_registration_in_python_order() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path());
    let c = r.counter("requests_total", "Requests").unwrap();
    r.summary("size", "Size").unwrap();
    r.histogram("lat", "Latency", &[0.5, 1.0]).unwrap();
    r.gauge("temp", "Temperature", GaugeMode::Max).unwrap();
    assert_eq!(
        keys_and_values(dir.path(), "counter_t.db"),
        [(
            r#"["requests", "requests_total", {}, "Requests"]"#.to_owned(),
            0.0
        )]
    );
    assert_eq!(
        keys_and_values(dir.path(), "summary_t.db"),
        [
            (r#"["size", "size_count", {}, "Size"]"#.to_owned(), 0.0),
            (r#"["size", "size_sum", {}, "Size"]"#.to_owned(), 0.0),
        ]
    );
    assert_eq!(
        keys_and_values(dir.path(), "histogram_t.db"),
        [
            (r#"["lat", "lat_sum", {}, "Latency"]"#.to_owned(), 0.0),
            (
                r#"["lat", "lat_bucket", {"le": "0.5"}, "Latency"]"#.to_owned(),
                0.0
            ),
            (
                r#"["lat", "lat_bucket", {"le": "1.0"}, "Latency"]"#.to_owned(),
                0.0
            ),
            (
                r#"["lat", "lat_bucket", {"le": "+Inf"}, "Latency"]"#.to_owned(),
                0.0
            ),
        ]
    );
    assert_eq!(
        keys_and_values(dir.path(), "gauge_max_t.db"),
        [(r#"["temp", "temp", {}, "Temperature"]"#.to_owned(), 0.0)]
    );
    c.inc();
    c.inc_by(1.5).unwrap();
    assert_eq!(entries(dir.path(), "counter_t.db")[0].value, 2.5);
    assert_eq!(c.get(), 2.5);
    c.reset();
    assert_eq!(entries(dir.path(), "counter_t.db")[0].value, 0.0);
}

#[test]
fn family_children_appear_on_first_lookup_and_are_shared() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path());
    let f = r.counter_family("hits", "Hits", &["path", "code"]).unwrap();
    assert!(f.is_empty());
    assert!(
        !dir.path().join("counter_t.db").exists() || entries(dir.path(), "counter_t.db").is_empty()
    );
    let a = f.labels(&["/", "200"]).unwrap();
    a.inc();
    let again = f.labels(&[String::from("/"), String::from("200")]).unwrap();
    again.inc();
    f.labels(&["/x", "500"]).unwrap().inc_by(4.0).unwrap();
    assert_eq!(f.len(), 2);
    assert_eq!(a.get(), 2.0);
    assert_eq!(
        keys_and_values(dir.path(), "counter_t.db"),
        [
            (
                r#"["hits", "hits_total", {"code": "200", "path": "/"}, "Hits"]"#.to_owned(),
                2.0
            ),
            (
                r#"["hits", "hits_total", {"code": "500", "path": "/x"}, "Hits"]"#.to_owned(),
                4.0
            ),
        ]
    );
    assert_eq!(f.name(), "hits");
    assert_eq!(f.label_names(), ["path", "code"]);
}

#[test]
fn histogram_counts_each_observation_in_one_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path());
    let h = r.histogram("h", "", &[1.0, 2.0]).unwrap();
    assert_eq!(h.upper_bounds(), [1.0, 2.0, f64::INFINITY]);
    for v in [0.5, 1.0, 1.5, 2.0, 3.0, f64::INFINITY, -7.0] {
        h.observe(v);
    }
    assert_eq!(h.bucket_counts(), [3.0, 2.0, 2.0]);
    assert_eq!(h.count(), 7.0);
    assert_eq!(h.sum(), f64::INFINITY);
    // NaN: no bucket, sum becomes NaN (Python's loop finds no bound).
    h.observe(f64::NAN);
    assert_eq!(h.bucket_counts(), [3.0, 2.0, 2.0]);
    assert!(h.sum().is_nan());
    let values: Vec<f64> = entries(dir.path(), "histogram_t.db")
        .iter()
        .map(|e| e.value)
        .collect();
    assert_eq!(values[1..], [3.0, 2.0, 2.0]);
    assert_eq!(DEFAULT_BUCKETS.len(), 15);
    let d = r.histogram("d", "", &DEFAULT_BUCKETS).unwrap();
    d.observe(0.005);
    d.observe(0.0051);
    assert_eq!(d.bucket_counts()[..2], [1.0, 1.0]);
}

#[test]
fn summary_and_timers() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path());
    let s = r.summary("s", "").unwrap();
    s.observe(2.5);
    s.observe(-1.0);
    assert_eq!((s.count(), s.sum()), (2.0, 1.5));
    let elapsed = s.start_timer().observe_duration();
    assert_eq!(s.count(), 3.0);
    assert_eq!(s.sum(), 1.5 + elapsed);
    s.start_timer().stop_and_discard();
    assert_eq!(s.count(), 3.0);
    let h = r.histogram("h", "", &[1e9]).unwrap();
    {
        let _timer = h.start_timer();
    }
    assert_eq!(h.bucket_counts(), [1.0, 0.0]);
}

#[test]
fn gauges_and_most_recent_gauges() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path());
    let g = r.gauge("g", "", GaugeMode::LiveSum).unwrap();
    assert_eq!(g.mode(), GaugeMode::LiveSum);
    g.set(10.0);
    g.inc();
    g.dec_by(4.0);
    g.inc_by(0.5);
    g.dec();
    {
        let _guard = g.track_inprogress();
        assert_eq!(g.get(), 7.5);
    }
    assert_eq!(g.get(), 6.5);
    let e = &entries(dir.path(), "gauge_livesum_t.db")[0];
    assert_eq!((e.value, e.timestamp), (6.5, 0.0));

    let m = r
        .most_recent_gauge("m", "", GaugeMode::LiveMostRecent)
        .unwrap();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert_eq!(m.timestamp(), 0.0, "created but never set");
    m.set(3.0);
    let after = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let e = &entries(dir.path(), "gauge_livemostrecent_t.db")[0];
    assert_eq!(e.value, 3.0);
    assert!(
        (before..=after).contains(&e.timestamp),
        "{before} <= {} <= {after}",
        e.timestamp
    );
    m.set_with_timestamp(4.0, 12.5);
    assert_eq!((m.get(), m.timestamp()), (4.0, 12.5));
}

#[test]
fn each_gauge_mode_has_its_own_file() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path());
    for mode in GaugeMode::ALL {
        let name = format!("g_{mode}");
        if mode.allows_inc() {
            r.gauge_family(&name, "", mode, &["l"])
                .unwrap()
                .labels(&["v"])
                .unwrap()
                .set(1.0);
        } else {
            r.most_recent_gauge_family(&name, "", mode, &["l"])
                .unwrap()
                .labels(&["v"])
                .unwrap()
                .set(1.0);
        }
        let file = format!("gauge_{mode}_t.db");
        assert_eq!(
            keys_and_values(dir.path(), &file),
            [(format!(r#"["{name}", "{name}", {{"l": "v"}}, ""]"#), 1.0)],
            "{file}"
        );
    }
}

#[test]
fn same_definition_twice_is_the_same_metric() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path());
    let a = r.counter("c_total", "C").unwrap();
    let b = r.counter("c", "C").unwrap();
    a.inc();
    b.inc();
    assert_eq!(a.get(), 2.0);
    let f1 = r.histogram_family("h", "", &[1.0], &["x"]).unwrap();
    let f2 = r
        .histogram_family("h", "", &[1.0, f64::INFINITY], &["x"])
        .unwrap();
    f1.labels(&["1"]).unwrap().observe(0.5);
    assert_eq!(f2.len(), 1);
    assert_eq!(f2.labels(&["1"]).unwrap().count(), 1.0);
    // Another registry on the same directory and identifier shares it all.
    let other = registry(dir.path());
    assert_eq!(other.counter("c", "C").unwrap().get(), 2.0);
    assert_eq!(
        entries(dir.path(), "counter_t.db").len(),
        1,
        "one writer per file"
    );
}

#[test]
fn conflicting_registrations_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path());
    r.counter_family("c", "C", &["a"]).unwrap();
    let conflict =
        |e: ClientError| matches!(e, ClientError::Conflict { ref name, .. } if name == "c");
    assert!(conflict(
        r.counter_family("c", "other help", &["a"]).unwrap_err()
    ));
    assert!(conflict(r.counter_family("c", "C", &["b"]).unwrap_err()));
    assert!(conflict(r.counter("c_total", "C").unwrap_err()));
    assert!(conflict(r.summary_family("c", "C", &["a"]).unwrap_err()));
    r.gauge("g", "", GaugeMode::Min).unwrap();
    assert!(matches!(
        r.gauge("g", "", GaugeMode::Max).unwrap_err(),
        ClientError::Conflict { .. }
    ));
    r.histogram("h", "", &[1.0]).unwrap();
    let err = r.histogram("h", "", &[2.0]).unwrap_err();
    assert!(matches!(err, ClientError::Conflict { .. }));
    assert!(err.to_string().contains("buckets"), "{err}");
    // Sample names overlapping another metric's.
    let clash = r.gauge("c_total", "", GaugeMode::All).unwrap_err();
    assert!(
        matches!(&clash, ClientError::NameClash { name, sample, other } if name == "c_total" && sample == "c_total" && other == "c"),
        "{clash}"
    );
    assert!(matches!(
        r.counter("h_bucket", "").unwrap_err(),
        ClientError::NameClash { .. }
    ));
    assert!(matches!(
        r.summary("g", "").unwrap_err(),
        ClientError::Conflict { .. }
    ));
}

#[test]
fn every_definition_error() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path());
    let e = r.counter("bad-name", "").unwrap_err();
    assert!(
        matches!(&e, ClientError::InvalidMetricName { name } if name == "bad-name"),
        "{e}"
    );
    assert!(matches!(
        r.gauge("caf\u{e9}", "", GaugeMode::All).unwrap_err(),
        ClientError::InvalidMetricName { .. }
    ));
    assert!(matches!(
        r.counter("_total", "").unwrap_err(),
        ClientError::InvalidMetricName { .. }
    ));
    assert!(matches!(
        r.counter_family("c", "", &["a.b"]).unwrap_err(),
        ClientError::InvalidLabelName { .. }
    ));
    assert!(matches!(
        r.counter_family("c", "", &["__name"]).unwrap_err(),
        ClientError::ReservedLabelName { .. }
    ));
    assert!(matches!(
        r.histogram_family("h", "", &DEFAULT_BUCKETS, &["le"])
            .unwrap_err(),
        ClientError::ReservedLabelName { .. }
    ));
    assert!(matches!(
        r.summary_family("s", "", &["quantile"]).unwrap_err(),
        ClientError::ReservedLabelName { .. }
    ));
    for mode in [GaugeMode::All, GaugeMode::LiveSum] {
        let e = r.gauge_family("g", "", mode, &["pid"]).unwrap_err();
        assert!(
            matches!(&e, ClientError::ReservedLabelName { label, .. } if label == "pid"),
            "{e}"
        );
    }
    assert!(matches!(
        r.most_recent_gauge_family("g", "", GaugeMode::MostRecent, &["pid"])
            .unwrap_err(),
        ClientError::ReservedLabelName { .. }
    ));
    assert!(matches!(
        r.counter_family("c", "", &["a", "a"]).unwrap_err(),
        ClientError::DuplicateLabelName { .. }
    ));
    assert!(matches!(
        r.counter_family("c", "", &[]).unwrap_err(),
        ClientError::NoLabelNames { .. }
    ));
    for (buckets, want) in [
        (&[][..], BucketsError::TooFew),
        (&[2.0, 1.0][..], BucketsError::NotSorted),
        (&[1.0, 1.0][..], BucketsError::Duplicate),
        (&[f64::NAN][..], BucketsError::NaN),
    ] {
        let e = r.histogram("h", "", buckets).unwrap_err();
        assert!(
            matches!(&e, ClientError::InvalidBuckets { reason, .. } if *reason == want),
            "{e}"
        );
    }
    for mode in [GaugeMode::MostRecent, GaugeMode::LiveMostRecent] {
        let e = r.gauge("g", "", mode).unwrap_err();
        assert!(matches!(&e, ClientError::WrongGaugeMode { .. }), "{e}");
        assert!(e.to_string().contains("most_recent_gauge"), "{e}");
    }
    let e = r
        .most_recent_gauge_family("g", "", GaugeMode::Sum, &["x"])
        .unwrap_err();
    assert!(matches!(&e, ClientError::WrongGaugeMode { .. }), "{e}");
    // Nothing refused was registered or written.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

    let f = r.counter_family("c", "", &["a", "b"]).unwrap();
    let e = f.labels(&["1"]).unwrap_err();
    assert!(
        matches!(
            e,
            ClientError::LabelCount {
                expected: 2,
                got: 1,
                ..
            }
        ),
        "{e}"
    );
    let c = f.labels(&["1", "2"]).unwrap();
    let e = c.inc_by(-0.5).unwrap_err();
    assert!(
        matches!(e, ClientError::NegativeIncrement { amount, .. } if amount == -0.5),
        "{e}"
    );
    assert_eq!(c.get(), 0.0);
}

#[test]
fn directory_and_identifier_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let e = MultiprocessRegistry::new(&missing).unwrap_err();
    assert!(
        matches!(&e, ClientError::Directory { path, .. } if *path == missing),
        "{e}"
    );
    let file = dir.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let e = MultiprocessRegistry::new(&file).unwrap_err();
    assert!(e.to_string().contains("not a directory"), "{e}");
    for id in ["a_b", "", "a/b"] {
        let e = MultiprocessRegistry::builder()
            .dir(dir.path())
            .process_id(id)
            .build()
            .unwrap_err();
        assert!(matches!(e, ClientError::InvalidProcessId(_)), "{id:?}: {e}");
    }
    let r = MultiprocessRegistry::new(dir.path()).unwrap();
    assert!(r.uses_pid());
    assert_eq!(r.process_id(), std::process::id().to_string());
    assert_eq!(r.dir(), dir.path().canonicalize().unwrap());
}

#[test]
fn file_failures_are_returned_by_the_creating_call() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let r = registry(&sub);
    let f = r.counter_family("c", "", &["a"]).unwrap();
    let kept = f.labels(&["kept"]).unwrap();
    std::fs::remove_dir_all(&sub).unwrap();
    // Existing handles keep working on their (now unlinked) mapping.
    kept.inc();
    assert_eq!(kept.get(), 1.0);
    // The file is open, so new children of a counter still work; a new
    // type needs a new file in the missing directory.
    let e = r.summary("s", "").unwrap_err();
    assert!(matches!(e, ClientError::Write(_)), "{e}");
    assert!(e.to_string().contains("sub"), "{e}");
    // A corrupt file left by an earlier process with the same id is moved
    // aside, kept for a look, and a new file begun.
    let dir2 = tempfile::tempdir().unwrap();
    let mut bytes = vec![0u8; 64];
    bytes[..4].copy_from_slice(&40i32.to_ne_bytes());
    bytes[8..12].copy_from_slice(&(-3i32).to_ne_bytes());
    std::fs::write(dir2.path().join("counter_t.db"), &bytes).unwrap();
    registry(dir2.path()).counter("c", "").unwrap().inc();
    let names: Vec<String> = std::fs::read_dir(dir2.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.contains(&"counter_t.db".to_owned()), "{names:?}");
    let aside = names
        .iter()
        .find(|n| n.starts_with("counter_t.db.corrupt-"));
    let aside = dir2.path().join(aside.expect("the corrupt file kept"));
    assert_eq!(std::fs::read(aside).unwrap(), bytes);
    let read = multiprom_format::read_file(&dir2.path().join("counter_t.db")).unwrap();
    assert_eq!(read.entries.len(), 1);
}

#[test]
fn a_key_longer_than_readers_take_is_refused_and_the_file_stays_readable() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path());
    let f = r.counter_family("reqs", "h", &["path"]).unwrap();
    f.labels(&["/ok"]).unwrap().inc();
    let long = "a".repeat(multiprom_format::layout::MAX_KEY_LEN);
    let e = f.labels(&[long.as_str()]).unwrap_err();
    assert!(
        matches!(e, ClientError::Write(WriteError::KeyTooLong { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("at most 1 MiB"), "{e}");
    f.labels(&["/after"]).unwrap().inc();
    // Every series the process kept is there for a reader.
    let keys: Vec<String> = keys_and_values(dir.path(), "counter_t.db")
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    assert_eq!(keys.len(), 2, "{keys:?}");
}

#[test]
fn environment_variables() {
    // The only test in this binary that touches the environment.
    let dir = tempfile::tempdir().unwrap();
    std::env::remove_var(DIR_ENV_VAR);
    std::env::remove_var(LEGACY_DIR_ENV_VAR);
    assert!(matches!(
        MultiprocessRegistry::from_env().unwrap_err(),
        ClientError::NoDirectory(EnvDirError::Unset)
    ));
    std::env::set_var(DIR_ENV_VAR, "");
    assert!(matches!(
        MultiprocessRegistry::from_env().unwrap_err(),
        ClientError::NoDirectory(EnvDirError::Empty {
            variable: DIR_ENV_VAR
        })
    ));
    std::env::remove_var(DIR_ENV_VAR);
    std::env::set_var(LEGACY_DIR_ENV_VAR, dir.path());
    let env = EnvDir::from_env().unwrap();
    assert!(env.is_legacy());
    assert_eq!(env.path, dir.path());
    let r = MultiprocessRegistry::from_env().unwrap();
    assert_eq!(r.dir(), dir.path().canonicalize().unwrap());
    let other = tempfile::tempdir().unwrap();
    std::env::set_var(DIR_ENV_VAR, other.path());
    let env = EnvDir::from_env().unwrap();
    assert_eq!(
        (env.variable, env.path.as_path()),
        (DIR_ENV_VAR, other.path())
    );
    std::env::remove_var(DIR_ENV_VAR);
    std::env::remove_var(LEGACY_DIR_ENV_VAR);
}

#[test]
fn concurrent_updates_and_growth_are_exact() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path());
    let family = r.counter_family("c", "", &["n"]).unwrap();
    let shared = family.labels(&["shared"]).unwrap();
    let hist = r.histogram("h", "", &[1.0]).unwrap();
    const THREADS: usize = 4;
    const PER_THREAD: usize = 2000;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let family = family.clone();
            let shared = shared.clone();
            let hist = hist.clone();
            s.spawn(move || {
                for i in 0..PER_THREAD {
                    shared.inc();
                    hist.observe(0.5);
                    // New children grow the file while others update.
                    family.labels(&[format!("t{t}-{i}")]).unwrap().inc();
                    family.labels(&["shared"]).unwrap().inc_by(0.5).unwrap();
                }
            });
        }
    });
    let total = (THREADS * PER_THREAD) as f64;
    assert_eq!(shared.get(), total * 1.5);
    assert_eq!(hist.bucket_counts(), [total, 0.0]);
    let contents = read_file(&dir.path().join("counter_t.db")).unwrap();
    assert!(
        contents.header.file_size >= 1 << 19,
        "the file grew several times"
    );
    assert_eq!(contents.entries.len(), THREADS * PER_THREAD + 1);
    assert_eq!(contents.entries[0].value, total * 1.5);
    assert!(contents.entries[1..].iter().all(|e| e.value == 1.0));
    assert_eq!(family.len(), THREADS * PER_THREAD + 1);
}

#[test]
fn handles_are_send_sync_and_cheap_to_clone() {
    fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}
    assert_send_sync::<MultiprocessRegistry>();
    assert_send_sync::<Counter>();
    assert_send_sync::<Gauge>();
    assert_send_sync::<MostRecentGauge>();
    assert_send_sync::<Histogram>();
    assert_send_sync::<Summary>();
    assert_send_sync::<Family<Counter>>();
    assert_eq!(
        std::mem::size_of::<Counter>(),
        std::mem::size_of::<Arc<()>>()
    );
}

/// An exemplar as the tests compare it: (entry key, labels, value).
type Stored = (String, Vec<(String, String)>, f64);

/// The exemplars of `dir/<file>` (a `*.db` name).
fn exemplars(dir: &Path, file: &str) -> Vec<Stored> {
    let name = file.parse().unwrap();
    let path = multiprom_format::exemplar_file::exemplar_path(dir, &name);
    let read = multiprom_format::read_exemplar_file(&path).unwrap();
    assert_eq!(read.unsettled, 0);
    read.entries
        .into_iter()
        .map(|e| (e.raw_key, e.exemplar.labels, e.exemplar.value))
        .collect()
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|&(n, v)| (n.to_owned(), v.to_owned()))
        .collect()
}

#[test]
fn a_counter_exemplar_is_stored_on_its_total_entry_with_the_time() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path());
    let plain = r.counter("jobs_total", "Jobs").unwrap();
    let family = r.counter_family("hits", "Hits", &["page"]).unwrap();
    let a = family.labels(&["/a"]).unwrap();
    let b = family.labels(&["/b"]).unwrap();
    let before = clock::unix_time();
    b.inc_with_exemplar(2.0, &[("trace_id", "b1")]).unwrap();
    plain.inc_with_exemplar(1.5, &[("trace_id", "p1")]).unwrap();
    b.inc_with_exemplar(3.0, &[("trace_id", "b2"), ("span", "s")])
        .unwrap();
    let after = clock::unix_time();
    a.inc();
    assert_eq!((b.get(), plain.get(), a.get()), (5.0, 1.5, 1.0));

    let keys: Vec<String> = entries(dir.path(), "counter_t.db")
        .into_iter()
        .map(|e| e.raw_key)
        .collect();
    // Entries: jobs_total, hits_total{/a}, hits_total{/b}.
    assert_eq!(
        exemplars(dir.path(), "counter_t.db"),
        [
            (
                keys[2].clone(),
                labels(&[("trace_id", "b2"), ("span", "s")]),
                3.0
            ),
            (keys[0].clone(), labels(&[("trace_id", "p1")]), 1.5),
        ]
    );
    let path = dir.path().join("exemplars/counter_t.exemplars");
    for e in multiprom_format::read_exemplar_file(&path).unwrap().entries {
        let t = e.exemplar.timestamp;
        assert!(before <= t && t <= after, "{t} not in {before}..{after}");
    }
}

#[test]
fn a_histogram_exemplar_is_stored_on_the_bucket_the_value_fell_in() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path());
    let h = r.histogram("latency", "L", &[1.0, 2.0]).unwrap();
    h.observe_with_exemplar(1.5, &[("trace_id", "x")]).unwrap();
    h.observe_with_exemplar(0.5, &[("trace_id", "y")]).unwrap();
    h.observe_with_exemplar(1.7, &[("trace_id", "z")]).unwrap();
    // NaN falls in no bucket: counted in the sum only, no exemplar.
    h.observe_with_exemplar(f64::NAN, &[("trace_id", "n")])
        .unwrap();
    assert_eq!(h.bucket_counts(), [1.0, 2.0, 0.0]);
    let keys: Vec<String> = entries(dir.path(), "histogram_t.db")
        .into_iter()
        .map(|e| e.raw_key)
        .collect();
    assert!(keys[2].contains(r#""le": "2.0""#), "{}", keys[2]);
    assert_eq!(
        exemplars(dir.path(), "histogram_t.db"),
        [
            (keys[2].clone(), labels(&[("trace_id", "z")]), 1.7),
            (keys[1].clone(), labels(&[("trace_id", "y")]), 0.5),
        ]
    );
}

#[test]
fn without_exemplars_no_exemplar_directory_appears() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path());
    let c = r.counter("c", "").unwrap();
    c.inc();
    c.inc_by(2.0).unwrap();
    // An empty label set is no exemplar, as Python's empty dict.
    c.inc_with_exemplar(1.0, &[]).unwrap();
    let h = r.histogram("h", "", &DEFAULT_BUCKETS).unwrap();
    h.observe(0.1);
    h.observe_with_exemplar(0.2, &[]).unwrap();
    assert_eq!(c.get(), 4.0);
    assert_eq!(h.count(), 2.0);
    assert!(!dir.path().join("exemplars").exists());
    c.inc_with_exemplar(1.0, &[("a", "b")]).unwrap();
    assert!(dir.path().join("exemplars").is_dir());
}

#[test]
fn exemplar_labels_python_refuses_are_errors_and_the_value_still_counts() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path());
    let c = r.counter("c", "").unwrap();
    let h = r.histogram("h", "", &[1.0]).unwrap();
    let long = "x".repeat(121);
    let check = |e: ClientError, want: &str| {
        assert!(e.to_string().contains(want), "{e}");
    };
    check(
        c.inc_with_exemplar(1.0, &[("trace id", "a")]).unwrap_err(),
        "invalid label name \"trace id\"",
    );
    check(
        c.inc_with_exemplar(1.0, &[("9a", "a")]).unwrap_err(),
        "invalid label name",
    );
    check(
        c.inc_with_exemplar(1.0, &[("__a", "a")]).unwrap_err(),
        "reserved",
    );
    check(
        c.inc_with_exemplar(1.0, &[("a", "1"), ("a", "2")])
            .unwrap_err(),
        "appears twice",
    );
    let e = h
        .observe_with_exemplar(0.5, &[("trace_id", &long)])
        .unwrap_err();
    assert!(
        matches!(
            &e,
            ClientError::InvalidExemplar { metric, reason: multiprom_format::ExemplarError::TooLong { runes: 129 } }
                if metric == "h"
        ),
        "{e:?}"
    );
    // Exactly 128 code points (multi-byte ones count once) pass.
    let wide = "\u{e9}".repeat(128 - 8);
    h.observe_with_exemplar(0.5, &[("trace_id", &wide)])
        .unwrap();
    // A negative amount is refused before anything is counted.
    assert!(matches!(
        c.inc_with_exemplar(-1.0, &[("a", "b")]).unwrap_err(),
        ClientError::NegativeIncrement { .. }
    ));
    assert_eq!(c.get(), 4.0, "refused exemplars, counted amounts");
    assert_eq!(h.count(), 2.0);
    assert!(!dir.path().join("exemplars/counter_t.exemplars").exists());
    assert_eq!(exemplars(dir.path(), "histogram_t.db").len(), 1);
}

#[test]
fn exemplars_that_cannot_be_stored_never_fail_the_update() {
    let dir = tempfile::tempdir().unwrap();
    // A file where the exemplar directory would be.
    std::fs::write(dir.path().join("exemplars"), b"in the way").unwrap();
    let r = registry(dir.path());
    let c = r.counter("c", "").unwrap();
    let h = r.histogram("h", "", &[1.0]).unwrap();
    for _ in 0..3 {
        c.inc_with_exemplar(1.0, &[("trace_id", "a")]).unwrap();
        h.observe_with_exemplar(0.5, &[("trace_id", "a")]).unwrap();
    }
    assert_eq!(c.get(), 3.0);
    assert_eq!(h.count(), 3.0);
    assert_eq!(
        keys_and_values(dir.path(), "counter_t.db")[0].1,
        3.0,
        "counted in the file"
    );
}
