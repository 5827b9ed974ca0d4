//! Compaction against the real system: files named after pids of processes
//! that really exited, and passes killed (`abort`, as `kill -9`) at every
//! step in a child process.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use multiprom_collector::{CollectOptions, Format};
use multiprom_format::scan_dir;
use multiprom_format::{encode_key, FileName, FileWriter, GaugeMode, MetricKind, STAGING_DIR};

use super::*;

/// The pid of a process that has exited and been collected.
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// The liveness rule as these tests script it: no process holds their
/// files, and those named after a pid that has exited (as [`dead_pid`]
/// makes them) are free, those named after a live one are not. The real
/// rule (`crate::liveness`) is tested on its own.
fn by_dead_pid(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| FileName::parse(n).ok())
        .and_then(|name| exited_writer_pid(name.id()))
        .is_some_and(|pid| crate::process::process_state(pid).is_dead())
}

/// Writes one file of `kind` for `id` with `entries` (label value, value,
/// timestamp).
fn write(dir: &Path, kind: MetricKind, id: &str, entries: &[(&str, f64, f64)]) {
    let name = FileName::new(kind, id).unwrap();
    let mut writer = FileWriter::open(dir, &name).unwrap();
    // One metric per kind: Python takes a gauge's mode from whichever file
    // it read last, so one name across modes would merge by listing order.
    let gauge;
    let metric = match kind {
        MetricKind::Counter => ("requests", "requests_total"),
        MetricKind::Histogram => ("latency", "latency_bucket"),
        MetricKind::Summary => ("size", "size_sum"),
        MetricKind::Gauge(mode) => {
            gauge = format!("level_{mode}");
            (gauge.as_str(), gauge.as_str())
        }
    };
    for &(label, value, ts) in entries {
        let key = if kind == MetricKind::Histogram {
            encode_key(metric.0, metric.1, [("le", label)], "help")
        } else {
            encode_key(metric.0, metric.1, [("route", label)], "help")
        };
        writer.slot(&key).unwrap().set_with_timestamp(value, ts);
    }
}

/// A directory of dead workers' files of every kind, plus files that must
/// never be folded.
fn populate(dir: &Path) {
    for w in 0..3u32 {
        let pid = dead_pid().to_string();
        let n = f64::from(w + 1);
        write(
            dir,
            MetricKind::Counter,
            &pid,
            &[("a", n, 0.0), ("b", 10.0 * n, 0.0)],
        );
        write(
            dir,
            MetricKind::Histogram,
            &pid,
            &[("0.5", n, 0.0), ("+Inf", 1.0, 0.0)],
        );
        write(dir, MetricKind::Summary, &pid, &[("a", 2.0 * n, 0.0)]);
        write(
            dir,
            MetricKind::Gauge(GaugeMode::Sum),
            &pid,
            &[("a", n, 0.0)],
        );
        write(
            dir,
            MetricKind::Gauge(GaugeMode::Max),
            &pid,
            &[("a", 5.0 - n, 0.0)],
        );
        write(
            dir,
            MetricKind::Gauge(GaugeMode::Min),
            &pid,
            &[("a", 5.0 - n, 0.0)],
        );
        write(
            dir,
            MetricKind::Gauge(GaugeMode::MostRecent),
            &pid,
            &[("a", 100.0 + n, [30.0, 10.0, 20.0][w as usize])],
        );
        write(
            dir,
            MetricKind::Gauge(GaugeMode::All),
            &pid,
            &[("a", n, 0.0)],
        );
        write(
            dir,
            MetricKind::Gauge(GaugeMode::LiveSum),
            &pid,
            &[("a", n, 0.0)],
        );
    }
    // A live writer (this process) and an id that is no pid: kept.
    let me = std::process::id().to_string();
    write(dir, MetricKind::Counter, &me, &[("a", 1000.0, 0.0)]);
    write(dir, MetricKind::Counter, "worker", &[("a", 7.0, 0.0)]);
}

/// The directory's merged output as a set of lines (folding may change
/// the order in which series appear, never what they are).
fn merged(dir: &Path) -> BTreeSet<String> {
    let scrape =
        multiprom_collector::merge_files(scan_dir(dir).unwrap(), CollectOptions::default());
    assert_eq!(
        scrape.problems().count(),
        0,
        "{:?}",
        scrape.problems().collect::<Vec<_>>()
    );
    scrape
        .encode(Format::Prometheus)
        .lines()
        .map(str::to_owned)
        .collect()
}

fn names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".db"))
        .collect()
}

/// The files in staging but its lock, native histogram files included.
fn staged(dir: &Path) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    let mut dirs = vec![dir.join(STAGING_DIR)];
    while let Some(at) = dirs.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                dirs.push(entry.path());
            } else if entry.file_name() != "lock" {
                files.insert(entry.file_name().into_string().unwrap());
            }
        }
    }
    files
}

const KEPT: [&str; 1] = ["counter_worker.db"];

fn assert_compacted(dir: &Path) {
    let left = names(dir);
    let me = format!("counter_{}.db", std::process::id());
    let mut expected: BTreeSet<String> = [
        "counter_compacted.db",
        "histogram_compacted.db",
        "summary_compacted.db",
        "gauge_sum_compacted.db",
        "gauge_max_compacted.db",
        "gauge_min_compacted.db",
        "gauge_mostrecent_compacted.db",
        me.as_str(),
    ]
    .into_iter()
    .chain(KEPT)
    .map(str::to_owned)
    .collect();
    // `all` and `live*` gauges are never folded.
    expected.extend(
        left.iter()
            .filter(|n| n.starts_with("gauge_all_") || n.starts_with("gauge_livesum_"))
            .cloned(),
    );
    assert_eq!(left, expected);
    assert_eq!(
        left.iter().filter(|n| n.starts_with("gauge_all_")).count(),
        3
    );
}

#[test]
fn a_pass_folds_dead_writers_and_keeps_every_series() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path());
    let before = merged(dir.path());
    assert!(
        before.contains("requests_total{route=\"a\"} 1013.0"),
        "{before:#?}"
    );
    assert!(
        before.contains("level_mostrecent{route=\"a\"} 101.0"),
        "{before:#?}"
    );
    let (compactor, recovery) = Compactor::open(dir.path(), &mut |_| {}).unwrap();
    assert_eq!(recovery, Recovery::default());
    let pass = compactor.pass(&by_dead_pid, &mut |_| {}).unwrap();
    assert_eq!(pass.files_folded(), 7 * 3);
    assert!(pass.held.is_empty() && pass.skipped.is_empty(), "{pass:?}");
    assert!(pass.bytes_reclaimed > 0);
    assert_eq!(merged(dir.path()), before);
    assert_compacted(dir.path());
    assert!(staged(dir.path()).is_empty());

    // More workers come and go: the compacted files absorb them too.
    let pid = dead_pid().to_string();
    write(
        dir.path(),
        MetricKind::Counter,
        &pid,
        &[("a", 0.5, 0.0), ("c", 1.0, 0.0)],
    );
    write(
        dir.path(),
        MetricKind::Gauge(GaugeMode::MostRecent),
        &pid,
        &[("a", -1.0, 25.0)],
    );
    let before = merged(dir.path());
    assert!(before.contains("requests_total{route=\"c\"} 1.0"));
    let pass = compactor.pass(&by_dead_pid, &mut |_| {}).unwrap();
    assert_eq!(pass.files_folded(), 2);
    assert_eq!(merged(dir.path()), before);
    assert_compacted(dir.path());
}

#[test]
fn a_file_held_open_by_a_process_is_put_back() {
    let dir = tempfile::tempdir().unwrap();
    // A pid that is dead, but a process (as a new worker that got the pid)
    // holds the file open.
    let pid = dead_pid().to_string();
    write(dir.path(), MetricKind::Counter, &pid, &[("a", 3.0, 0.0)]);
    let path = dir.path().join(format!("counter_{pid}.db"));
    let holder = crate::process::TestHolder::start(&[], &[&path]);
    let (compactor, _) = Compactor::open(dir.path(), &mut |_| {}).unwrap();
    let pass = compactor.pass(&by_dead_pid, &mut |_| {});
    drop(holder);
    let pass = pass.unwrap();
    assert_eq!(
        pass.held,
        [FileName::parse(&format!("counter_{pid}.db")).unwrap()]
    );
    assert_eq!(pass.files_folded(), 0);
    assert!(path.exists());
    // Once nobody holds it, it is folded.
    assert_eq!(
        compactor
            .pass(&by_dead_pid, &mut |_| {})
            .unwrap()
            .files_folded(),
        1
    );
    assert!(!path.exists());
}

#[test]
fn a_second_compactor_on_the_same_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _first = Compactor::open(dir.path(), &mut |_| {}).unwrap();
    let err = Compactor::open(dir.path(), &mut |_| {}).unwrap_err();
    assert!(matches!(err, CompactError::Locked { .. }), "{err}");
}

const CRASH_DIR: &str = "MULTIPROM_TEST_COMPACT_CRASH_DIR";
const CRASH_AT: &str = "MULTIPROM_TEST_COMPACT_CRASH_AT";
const CRASH_IN_RECOVERY: &str = "MULTIPROM_TEST_COMPACT_CRASH_IN_RECOVERY";

/// Not a test on its own: the child process of
/// `a_kill_at_any_step_loses_nothing`, which runs a pass (or a recovery)
/// and aborts at the step it is told to.
#[test]
fn crash_child() {
    let (Ok(dir), Ok(at)) = (std::env::var(CRASH_DIR), std::env::var(CRASH_AT)) else {
        return;
    };
    let at: usize = at.parse().unwrap();
    let in_recovery = std::env::var_os(CRASH_IN_RECOVERY).is_some();
    let mut seen = 0;
    let mut observer = |_: &Step| {
        seen += 1;
        if seen == at {
            std::process::abort();
        }
    };
    if in_recovery {
        Compactor::open(Path::new(&dir), &mut observer).unwrap();
    } else {
        let (compactor, _) = Compactor::open(Path::new(&dir), &mut |_| {}).unwrap();
        compactor.pass(&by_dead_pid, &mut observer).unwrap();
    }
}

/// Runs `crash_child`; true if it aborted, false if it finished first.
fn run_child(dir: &Path, at: usize, in_recovery: bool) -> bool {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "compaction::tests::crash_child",
        "--exact",
        "--test-threads=1",
        "-q",
    ])
    .env(CRASH_DIR, dir)
    .env(CRASH_AT, at.to_string())
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null());
    if in_recovery {
        cmd.env(CRASH_IN_RECOVERY, "1");
    }
    let status = cmd.status().unwrap();
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        // SIGABRT
        Some(6) => true,
        _ => {
            assert!(status.success(), "child failed: {status}");
            false
        }
    }
}

#[test]
fn a_kill_at_any_step_loses_nothing() {
    let mut at = 1;
    loop {
        let dir = tempfile::tempdir().unwrap();
        populate(dir.path());
        let before = merged(dir.path());
        if !run_child(dir.path(), at, false) {
            // The pass finished before step `at`: every step was covered.
            assert!(at > 7 * 3 * 2, "too few steps seen: {at}");
            break;
        }
        // A restart recovers; it may itself be killed (here at its first
        // step), and recovered again.
        run_child(dir.path(), 1, true);
        let (compactor, _) = Compactor::open(dir.path(), &mut |_| {}).unwrap();
        assert_eq!(merged(dir.path()), before, "after a kill at step {at}");
        assert!(staged(dir.path()).is_empty(), "after a kill at step {at}");
        compactor.pass(&by_dead_pid, &mut |_| {}).unwrap();
        assert_eq!(
            merged(dir.path()),
            before,
            "after a kill at step {at} and a pass"
        );
        assert_compacted(dir.path());
        at += 1;
    }
}

#[test]
fn a_name_taken_by_a_new_writer_after_a_kill_is_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let pid = dead_pid().to_string();
    write(dir.path(), MetricKind::Counter, &pid, &[("a", 3.0, 0.0)]);
    // Killed right after staging the file ...
    assert!(run_child(dir.path(), 1, false));
    let name = format!("counter_{pid}.db");
    assert!(!dir.path().join(&name).exists());
    // ... and a new process with the same pid starts writing meanwhile.
    write(dir.path(), MetricKind::Counter, &pid, &[("a", 4.0, 0.0)]);
    let (compactor, recovery) = Compactor::open(dir.path(), &mut |_| {}).unwrap();
    let moved = FileName::parse(&format!("counter_{pid}.1.db")).unwrap();
    assert_eq!(recovery.put_back, [moved]);
    let total = "requests_total{route=\"a\"} 7.0".to_owned();
    assert!(merged(dir.path()).contains(&total));
    // Once that process has exited too, both files are folded: the one put
    // back under `<pid>.1` (no writer ever opens such a name) and its own.
    compactor.pass(&by_dead_pid, &mut |_| {}).unwrap();
    assert!(merged(dir.path()).contains(&total));
    assert_eq!(
        names(dir.path()),
        BTreeSet::from(["counter_compacted.db".to_owned()])
    );
}

#[test]
fn only_plain_decimal_pids_count_as_exited_writers() {
    assert_eq!(exited_writer_pid("1234"), Some(1234));
    assert_eq!(exited_writer_pid("1234.1"), Some(1234));
    assert_eq!(exited_writer_pid("1234.12"), Some(1234));
    for id in [
        "compacted",
        "01234",
        "+1234",
        "1234.",
        ".1",
        "1234.01",
        "1234.1.2",
        "1234.x",
        "worker",
    ] {
        assert_eq!(exited_writer_pid(id), None, "{id}");
    }
}

/// Stores exemplars (key label, trace id, timestamp) in `kind`'s exemplar
/// file for `id`, on the keys `write` uses.
fn write_exemplars(dir: &Path, kind: MetricKind, id: &str, exemplars: &[(&str, &str, f64)]) {
    let name = FileName::new(kind, id).unwrap();
    let writer = multiprom_format::ExemplarWriter::open(dir, &name).unwrap();
    for &(label, trace, ts) in exemplars {
        let key = encode_key("requests", "requests_total", [("route", label)], "help");
        writer
            .slot(&key)
            .unwrap()
            .store([("trace_id", trace)], 1.0, ts)
            .unwrap();
    }
}

/// The exemplars of `name`'s exemplar file as (route label, trace id).
fn traces(dir: &Path, name: &str) -> BTreeSet<(String, String)> {
    let path = dir.join("exemplars").join(name);
    multiprom_format::read_exemplar_file(&path)
        .unwrap()
        .entries
        .into_iter()
        .map(|e| {
            let key = multiprom_format::Key::decode(e.raw_key.as_bytes()).unwrap();
            let route = key.labels[0].1.clone();
            (route, e.exemplar.labels[0].1.clone())
        })
        .collect()
}

#[test]
fn a_fold_keeps_the_latest_exemplar_of_each_series() {
    let dir = tempfile::tempdir().unwrap();
    let counter = MetricKind::Counter;
    let (p1, p2) = (dead_pid().to_string(), dead_pid().to_string());
    for pid in [&p1, &p2] {
        write(
            dir.path(),
            counter,
            pid,
            &[("a", 1.0, 0.0), ("b", 1.0, 0.0)],
        );
    }
    write(dir.path(), counter, "compacted", &[("a", 5.0, 0.0)]);
    write_exemplars(
        dir.path(),
        counter,
        &p1,
        &[("a", "p1-a", 20.0), ("b", "p1-b", 10.0)],
    );
    write_exemplars(
        dir.path(),
        counter,
        &p2,
        &[("a", "p2-a", 15.0), ("b", "p2-b", 30.0)],
    );
    // The compacted file's own: newer than both for "c", older for "a".
    write_exemplars(
        dir.path(),
        counter,
        "compacted",
        &[("a", "old-a", 5.0), ("c", "kept-c", 50.0)],
    );
    // A live writer's exemplar file stays as it is.
    let me = std::process::id().to_string();
    write(dir.path(), counter, &me, &[("a", 1.0, 0.0)]);
    write_exemplars(dir.path(), counter, &me, &[("a", "live", 99.0)]);

    let (compactor, _) = Compactor::open(dir.path(), &mut |_| {}).unwrap();
    let pass = compactor.pass(&by_dead_pid, &mut |_| {}).unwrap();
    assert_eq!(pass.files_folded(), 2);
    let pairs = |v: &[(&str, &str)]| -> BTreeSet<(String, String)> {
        v.iter()
            .map(|&(a, b)| (a.to_owned(), b.to_owned()))
            .collect()
    };
    assert_eq!(
        traces(dir.path(), "counter_compacted.exemplars"),
        pairs(&[("a", "p1-a"), ("b", "p2-b"), ("c", "kept-c")])
    );
    let left: BTreeSet<String> = std::fs::read_dir(dir.path().join("exemplars"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let expected = [
        "counter_compacted.exemplars".to_owned(),
        format!("counter_{me}.exemplars"),
    ];
    assert_eq!(left, expected.into_iter().collect());
    assert_eq!(
        traces(dir.path(), &format!("counter_{me}.exemplars")),
        pairs(&[("a", "live")])
    );
}

#[test]
fn a_fold_without_exemplars_makes_no_exemplar_directory() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path());
    let (compactor, _) = Compactor::open(dir.path(), &mut |_| {}).unwrap();
    compactor.pass(&by_dead_pid, &mut |_| {}).unwrap();
    assert_compacted(dir.path());
    assert!(!dir.path().join("exemplars").exists());
}

/// Records `observations` into the native histograms of `histogram_<id>`
/// at `schema`, on two series (by route).
fn write_natives(dir: &Path, id: &str, schema: i8, observations: &[(&str, f64)]) {
    let name = FileName::new(MetricKind::Histogram, id).unwrap();
    let writer = multiprom_format::NativeHistogramWriter::open(dir, &name).unwrap();
    let config = multiprom_format::NativeHistogramConfig {
        schema,
        ..Default::default()
    };
    for &(route, value) in observations {
        let key = encode_key("latency", "latency", [("route", route)], "help");
        writer.series(&key, config).unwrap().observe(value);
    }
}

/// The native histograms of every file a collector reads
/// (`native-histograms/*.native`), merged per series, as (key, schema,
/// count, sum, zero count, positive buckets, negative buckets).
type NativeSum = BTreeSet<(
    String,
    i8,
    u64,
    String,
    u64,
    Vec<(i32, u64)>,
    Vec<(i32, u64)>,
)>;

fn native_sum(dir: &Path) -> NativeSum {
    let mut merged: std::collections::BTreeMap<String, multiprom_format::NativeHistogram> =
        std::collections::BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir.join("native-histograms")) else {
        return NativeSum::new();
    };
    let mut paths: Vec<_> = entries.map(|e| e.unwrap().path()).collect();
    paths.sort();
    for path in paths {
        let file = multiprom_format::read_native_histogram_file(&path).unwrap();
        for e in file.entries {
            match merged.get_mut(&e.raw_key) {
                Some(h) => h.merge(&e.histogram),
                None => {
                    merged.insert(e.raw_key, e.histogram);
                }
            }
        }
    }
    merged
        .into_iter()
        .map(|(k, h)| {
            let sum = format!("{}", h.sum);
            (
                k,
                h.schema,
                h.count(),
                sum,
                h.zero_count,
                h.positive,
                h.negative,
            )
        })
        .collect()
}

fn native_names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir.join("native-histograms"))
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect()
        })
        .unwrap_or_default()
}

/// Three dead workers' histogram files with native histograms at schemas
/// 3, 0 and -2 (values exact in binary, so sums do not depend on order),
/// and a live one.
fn populate_natives(dir: &Path) -> Vec<String> {
    let mut pids = Vec::new();
    for (w, schema) in [3i8, 0, -2].into_iter().enumerate() {
        let pid = dead_pid().to_string();
        let n = w as f64 + 1.0;
        write(
            dir,
            MetricKind::Histogram,
            &pid,
            &[("0.5", n, 0.0), ("+Inf", n, 0.0)],
        );
        write_natives(
            dir,
            &pid,
            schema,
            &[
                ("a", 0.25 * n),
                ("a", 3.0),
                ("a", 0.0),
                ("b", -2.5 * n),
                ("b", 1024.0),
            ],
        );
        pids.push(pid);
    }
    let me = std::process::id().to_string();
    write(dir, MetricKind::Histogram, &me, &[("+Inf", 1.0, 0.0)]);
    write_natives(dir, &me, 5, &[("a", 0.75)]);
    pids
}

#[test]
fn a_fold_keeps_the_sum_of_native_histograms() {
    let dir = tempfile::tempdir().unwrap();
    populate_natives(dir.path());
    let before = native_sum(dir.path());
    assert_eq!(before.len(), 2, "{before:?}");
    // Every histogram file but this process's is folded, native files too.
    let me = std::process::id().to_string();
    let blocks = |path: &Path| std::fs::metadata(path).map_or(0, |m| m.blocks() as i64 * 512);
    let folded: i64 = std::fs::read_dir(dir.path())
        .unwrap()
        .chain(std::fs::read_dir(dir.path().join("native-histograms")).unwrap())
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("histogram_") && !name.contains(&me)
        })
        .map(|path| blocks(&path))
        .sum();
    let (compactor, _) = Compactor::open(dir.path(), &mut |_| {}).unwrap();
    let pass = compactor.pass(&by_dead_pid, &mut |_| {}).unwrap();
    assert_eq!(pass.files_folded(), 3);
    assert_eq!(native_sum(dir.path()), before);
    let compacted = blocks(&dir.path().join("histogram_compacted.db"))
        + blocks(
            &dir.path()
                .join("native-histograms/histogram_compacted.native"),
        );
    assert_eq!(pass.bytes_reclaimed, folded - compacted);
    let me = format!("histogram_{}.native", std::process::id());
    assert_eq!(
        native_names(dir.path()),
        BTreeSet::from(["histogram_compacted.native".to_owned(), me.clone()])
    );
    assert!(!dir
        .path()
        .join(STAGING_DIR)
        .join("native-histograms/histogram_compacted.native")
        .exists());

    // The compacted file absorbs a later worker, at yet another schema.
    let pid = dead_pid().to_string();
    write(
        dir.path(),
        MetricKind::Histogram,
        &pid,
        &[("+Inf", 2.0, 0.0)],
    );
    write_natives(dir.path(), &pid, 8, &[("a", 0.5), ("c", 7.0)]);
    let before = native_sum(dir.path());
    assert_eq!(before.len(), 3);
    assert_eq!(
        compactor
            .pass(&by_dead_pid, &mut |_| {})
            .unwrap()
            .files_folded(),
        1
    );
    assert_eq!(native_sum(dir.path()), before);
    assert_eq!(
        native_names(dir.path()),
        BTreeSet::from(["histogram_compacted.native".to_owned(), me])
    );
    let db = "latency_bucket{le=\"+Inf\"} 15.0".to_owned();
    assert!(
        merged(dir.path()).contains(&db),
        "{:#?}",
        merged(dir.path())
    );
}

#[test]
fn a_kill_at_any_step_counts_native_histograms_exactly_once() {
    let mut at = 1;
    loop {
        let dir = tempfile::tempdir().unwrap();
        populate_natives(dir.path());
        let before = (merged(dir.path()), native_sum(dir.path()));
        if !run_child(dir.path(), at, false) {
            // Three files staged, checked, three native files staged and
            // written, the `*.db` file written, journaled, both committed,
            // six removals, finished.
            assert!(at > 18, "too few steps seen: {at}");
            break;
        }
        run_child(dir.path(), 1, true);
        let (compactor, _) = Compactor::open(dir.path(), &mut |_| {}).unwrap();
        let after = (merged(dir.path()), native_sum(dir.path()));
        assert_eq!(
            after,
            before,
            "after a kill at step {at}: {:?}",
            native_names(dir.path())
        );
        assert!(staged(dir.path()).is_empty(), "after a kill at step {at}");
        compactor.pass(&by_dead_pid, &mut |_| {}).unwrap();
        let after = (merged(dir.path()), native_sum(dir.path()));
        assert_eq!(after, before, "after a kill at step {at} and a pass");
        assert_eq!(
            native_names(dir.path()).len(),
            2,
            "after a kill at step {at}"
        );
        at += 1;
    }
}

#[test]
fn a_damaged_native_histogram_file_does_not_stop_the_fold() {
    let dir = tempfile::tempdir().unwrap();
    let pids = populate_natives(dir.path());
    let damaged = format!("histogram_{}.native", pids[1]);
    let damaged_path = dir.path().join("native-histograms").join(&damaged);
    std::fs::write(&damaged_path, b"not a native histogram file").unwrap();
    let db_before = merged(dir.path());
    std::fs::rename(&damaged_path, dir.path().join("damaged")).unwrap();
    let native_before = native_sum(dir.path());
    std::fs::rename(dir.path().join("damaged"), &damaged_path).unwrap();

    let (compactor, _) = Compactor::open(dir.path(), &mut |_| {}).unwrap();
    let pass = compactor.pass(&by_dead_pid, &mut |_| {}).unwrap();
    assert_eq!(pass.files_folded(), 3, "{pass:?}");
    assert_eq!(merged(dir.path()), db_before);
    // The damaged file stays where it was, unfolded (an orphan now, for
    // reaping); the others are in the compacted file.
    assert!(native_names(dir.path()).contains(&damaged));
    std::fs::remove_file(&damaged_path).unwrap();
    assert_eq!(native_sum(dir.path()), native_before);
}
