//! The 33 tests of upstream `prometheus_client` `tests/test_multiprocess.py`
//! (0.26.0), ported.
//!
//! The real library writes the files, in a real Python process, exactly as the
//! upstream test does (`tests/python/collector_upstream.py`, one function per
//! upstream test, same name). Wherever upstream asserts on what its
//! `MultiProcessCollector` merged, the Python process pauses and multiprom
//! reads the same directory, with one long-lived `DirCollector` per test (so
//! its incremental cache sees the files change between checks), and asserts
//! the same values. Tests of Python-only API (`remove`/`clear` warnings,
//! subclass context) keep their Python-side assertion and additionally check
//! what their files merge to. The `TestMmapedDict` tests check multiprom's
//! reader on files made by Python's `MmapedDict`; the `TestUnsetEnv` tests
//! check `multiprom scrape` and `DirCollector` on a missing directory.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use multiprom_collector::{
    merge_files, CollectOptions, DirCollector, FileState, MergedFamily, Scrape,
};
use multiprom_format::{layout, read_file, read_used_bytes, EntryIter, ReadErrorKind};
use serde_json::Value;

use crate::harness::{multiprom, python, python_script, temp_dir};

const ENV: &str = "PROMETHEUS_MULTIPROC_DIR";
const LEGACY_ENV: &str = "prometheus_multiproc_dir";
mod deprecation;

/// A paused upstream test body in a Python process.
struct Upstream {
    name: &'static str,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// `INFO` facts reported so far.
    info: Vec<Value>,
}

impl Upstream {
    fn start(name: &'static str, env: &[(&str, &Path)]) -> Upstream {
        let mut cmd = Command::new(python());
        cmd.arg(python_script("collector_upstream.py"))
            .arg(name)
            .env_remove(ENV)
            .env_remove(LEGACY_ENV)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start collector_upstream.py");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Upstream {
            name,
            child,
            stdin,
            stdout,
            info: Vec::new(),
        }
    }

    /// Runs to the next checkpoint; `None` when the body is done.
    fn next(&mut self) -> Option<String> {
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).unwrap();
            assert!(n > 0, "{}: Python exited early (see its stderr)", self.name);
            let line = line.trim_end();
            if let Some(label) = line.strip_prefix("CHECK ") {
                return Some(label.to_string());
            }
            if let Some(json) = line.strip_prefix("INFO ") {
                self.info.push(serde_json::from_str(json).unwrap());
                continue;
            }
            assert_eq!(line, "DONE", "{}: unexpected line from Python", self.name);
            return None;
        }
    }

    /// Waits for checkpoint `label`.
    fn at(&mut self, label: &str) {
        assert_eq!(self.next().as_deref(), Some(label), "{}", self.name);
    }

    /// Lets the Python body continue past the current checkpoint.
    fn resume(&mut self) {
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Resumes and expects the body to finish cleanly.
    fn finish(mut self) -> Vec<Value> {
        self.resume();
        assert_eq!(
            self.next(),
            None,
            "{}: more checkpoints than expected",
            self.name
        );
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{}: Python failed: {status}", self.name);
        self.info
    }
}

type Labels<'a> = &'a [(&'a str, &'a str)];

/// `registry.get_sample_value(name, labels)`: the first sample with exactly
/// this name and label set.
fn sample_value(scrape: &Scrape, name: &str, labels: Labels<'_>) -> Option<f64> {
    scrape
        .families
        .iter()
        .flat_map(|f| &f.samples)
        .find(|s| &*s.name == name && same_labels(&s.labels, labels))
        .map(|s| s.value)
}

fn same_labels(have: &[(std::sync::Arc<str>, std::sync::Arc<str>)], want: Labels<'_>) -> bool {
    let mut want: Vec<(&str, &str)> = want.to_vec();
    want.sort_unstable();
    have.len() == want.len()
        && have
            .iter()
            .zip(&want)
            .all(|((k, v), (wk, wv))| &**k == *wk && &**v == *wv)
}

fn family<'a>(scrape: &'a Scrape, name: &str) -> &'a MergedFamily {
    scrape
        .families
        .iter()
        .find(|f| &*f.name == name)
        .unwrap_or_else(|| panic!("no family {name:?} in {:?}", family_names(scrape)))
}

fn family_names(scrape: &Scrape) -> Vec<&str> {
    scrape.families.iter().map(|f| &*f.name).collect()
}

/// A sample as `(name, sorted labels, value)`, as Python's `Sample` compares.
type PlainSample = (String, Vec<(String, String)>, f64);

/// A family's samples, in output order.
fn samples(family: &MergedFamily) -> Vec<PlainSample> {
    family
        .samples
        .iter()
        .map(|s| {
            (
                s.name.to_string(),
                s.labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                s.value,
            )
        })
        .collect()
}

/// Builds an expected sample (labels given in any order).
fn sample(name: &str, labels: Labels<'_>, value: f64) -> PlainSample {
    let mut labels: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    labels.sort();
    (name.to_string(), labels, value)
}

fn collect(collector: &DirCollector) -> std::sync::Arc<Scrape> {
    let scrape = collector.collect().unwrap();
    assert_eq!(
        scrape.problems().count(),
        0,
        "no file written by Python may be skipped: {:?}",
        scrape
            .problems()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    );
    scrape
}

fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// Runs an upstream test body in `dir` with the uppercase variable set.
fn start(name: &'static str, dir: &Path) -> (Upstream, DirCollector) {
    (Upstream::start(name, &[(ENV, dir)]), DirCollector::new(dir))
}

const ABCD: [(&str, &str); 4] = [("a", "a"), ("b", "b"), ("c", "c"), ("d", "d")];

fn abcd_with(key: &'static str, value: &'static str) -> Vec<(&'static str, &'static str)> {
    let mut labels = ABCD.to_vec();
    labels.retain(|(k, _)| *k != key);
    labels.push((key, value));
    labels
}

/// The default buckets as `le` strings.
const DEFAULT_LE: [&str; 15] = [
    "0.005", "0.01", "0.025", "0.05", "0.075", "0.1", "0.25", "0.5", "0.75", "1.0", "2.5", "5.0",
    "7.5", "10.0", "+Inf",
];

// ---------------------------------------------------------------------------
// TestMultiProcess

/// Upstream `test_counter_adds`.
#[test]
fn test_counter_adds() {
    let dir = temp_dir();
    let (mut py, c) = start("test_counter_adds", dir.path());
    py.at("created");
    assert_eq!(sample_value(&collect(&c), "c_total", &[]), Some(0.0));
    py.resume();
    py.at("incremented");
    assert_eq!(sample_value(&collect(&c), "c_total", &[]), Some(3.0));
    py.finish();
}

/// Upstream `test_summary_adds`.
#[test]
fn test_summary_adds() {
    let dir = temp_dir();
    let (mut py, c) = start("test_summary_adds", dir.path());
    py.at("created");
    let scrape = collect(&c);
    assert_eq!(sample_value(&scrape, "s_count", &[]), Some(0.0));
    assert_eq!(sample_value(&scrape, "s_sum", &[]), Some(0.0));
    py.resume();
    py.at("observed");
    let scrape = collect(&c);
    assert_eq!(sample_value(&scrape, "s_count", &[]), Some(2.0));
    assert_eq!(sample_value(&scrape, "s_sum", &[]), Some(3.0));
    py.finish();
}

/// Upstream `test_histogram_adds`.
#[test]
fn test_histogram_adds() {
    let dir = temp_dir();
    let (mut py, c) = start("test_histogram_adds", dir.path());
    py.at("created");
    let scrape = collect(&c);
    assert_eq!(sample_value(&scrape, "h_count", &[]), Some(0.0));
    assert_eq!(sample_value(&scrape, "h_sum", &[]), Some(0.0));
    assert_eq!(
        sample_value(&scrape, "h_bucket", &[("le", "5.0")]),
        Some(0.0)
    );
    py.resume();
    py.at("observed");
    let scrape = collect(&c);
    assert_eq!(sample_value(&scrape, "h_count", &[]), Some(2.0));
    assert_eq!(sample_value(&scrape, "h_sum", &[]), Some(3.0));
    assert_eq!(
        sample_value(&scrape, "h_bucket", &[("le", "5.0")]),
        Some(2.0)
    );
    py.finish();
}

/// Upstream `test_gauge_all`: `all` keeps dead processes' series.
#[test]
fn test_gauge_all() {
    let dir = temp_dir();
    let (mut py, c) = start("test_gauge_all", dir.path());
    py.at("created");
    let scrape = collect(&c);
    assert_eq!(sample_value(&scrape, "g", &[("pid", "123")]), Some(0.0));
    assert_eq!(sample_value(&scrape, "g", &[("pid", "456")]), Some(0.0));
    py.resume();
    py.at("dead");
    let scrape = collect(&c);
    assert_eq!(sample_value(&scrape, "g", &[("pid", "123")]), Some(1.0));
    assert_eq!(sample_value(&scrape, "g", &[("pid", "456")]), Some(2.0));
    py.finish();
}

/// Checks the shared shape of the upstream `test_gauge_<mode>` tests:
/// `created` (if any), `set` and (for those with one) `dead` checkpoints.
fn gauge_test(
    name: &'static str,
    created: Option<&[(Labels<'_>, Option<f64>)]>,
    set: &[(Labels<'_>, Option<f64>)],
    dead: Option<&[(Labels<'_>, Option<f64>)]>,
) {
    let dir = temp_dir();
    let (mut py, c) = start(name, dir.path());
    let mut check = |label: &str, expect: &[(Labels<'_>, Option<f64>)]| {
        py.at(label);
        let scrape = collect(&c);
        for (labels, value) in expect {
            assert_eq!(
                sample_value(&scrape, "g", labels),
                *value,
                "{name} at {label}, labels {labels:?}"
            );
        }
        py.resume();
    };
    if let Some(created) = created {
        check("created", created);
    }
    check("set", set);
    if let Some(dead) = dead {
        check("dead", dead);
    }
    assert_eq!(py.next(), None);
    assert!(py.child.wait().unwrap().success());
}

const NO_LABELS: Labels<'static> = &[];

/// Upstream `test_gauge_liveall`.
#[test]
fn test_gauge_liveall() {
    let p123: Labels<'_> = &[("pid", "123")];
    let p456: Labels<'_> = &[("pid", "456")];
    gauge_test(
        "test_gauge_liveall",
        Some(&[(p123, Some(0.0)), (p456, Some(0.0))]),
        &[(p123, Some(1.0)), (p456, Some(2.0))],
        Some(&[(p123, None), (p456, Some(2.0))]),
    );
}

/// Upstream `test_gauge_min`.
#[test]
fn test_gauge_min() {
    gauge_test(
        "test_gauge_min",
        Some(&[(NO_LABELS, Some(0.0))]),
        &[(NO_LABELS, Some(1.0))],
        None,
    );
}

/// Upstream `test_gauge_livemin`.
#[test]
fn test_gauge_livemin() {
    gauge_test(
        "test_gauge_livemin",
        Some(&[(NO_LABELS, Some(0.0))]),
        &[(NO_LABELS, Some(1.0))],
        Some(&[(NO_LABELS, Some(2.0))]),
    );
}

/// Upstream `test_gauge_max`.
#[test]
fn test_gauge_max() {
    gauge_test(
        "test_gauge_max",
        Some(&[(NO_LABELS, Some(0.0))]),
        &[(NO_LABELS, Some(2.0))],
        None,
    );
}

/// Upstream `test_gauge_livemax`.
#[test]
fn test_gauge_livemax() {
    gauge_test(
        "test_gauge_livemax",
        Some(&[(NO_LABELS, Some(0.0))]),
        &[(NO_LABELS, Some(2.0))],
        Some(&[(NO_LABELS, Some(1.0))]),
    );
}

/// Upstream `test_gauge_sum`: `sum` keeps dead processes' values.
#[test]
fn test_gauge_sum() {
    gauge_test(
        "test_gauge_sum",
        Some(&[(NO_LABELS, Some(0.0))]),
        &[(NO_LABELS, Some(3.0))],
        Some(&[(NO_LABELS, Some(3.0))]),
    );
}

/// Upstream `test_gauge_livesum`.
#[test]
fn test_gauge_livesum() {
    gauge_test(
        "test_gauge_livesum",
        Some(&[(NO_LABELS, Some(0.0))]),
        &[(NO_LABELS, Some(3.0))],
        Some(&[(NO_LABELS, Some(2.0))]),
    );
}

/// Upstream `test_gauge_mostrecent`.
#[test]
fn test_gauge_mostrecent() {
    gauge_test(
        "test_gauge_mostrecent",
        None,
        &[(NO_LABELS, Some(1.0))],
        Some(&[(NO_LABELS, Some(1.0))]),
    );
}

/// Upstream `test_gauge_livemostrecent`.
#[test]
fn test_gauge_livemostrecent() {
    gauge_test(
        "test_gauge_livemostrecent",
        None,
        &[(NO_LABELS, Some(1.0))],
        Some(&[(NO_LABELS, Some(2.0))]),
    );
}

/// Upstream `test_namespace_subsystem`.
#[test]
fn test_namespace_subsystem() {
    let dir = temp_dir();
    let (mut py, c) = start("test_namespace_subsystem", dir.path());
    py.at("incremented");
    assert_eq!(sample_value(&collect(&c), "ns_ss_c_total", &[]), Some(1.0));
    py.finish();
}

/// Upstream `test_counter_across_forks`: a changed process identifier moves
/// the process to new files; the merge still adds up to 3.
#[test]
fn test_counter_across_forks() {
    let dir = temp_dir();
    let (mut py, c) = start("test_counter_across_forks", dir.path());
    py.at("created");
    assert_eq!(sample_value(&collect(&c), "c_total", &[]), Some(0.0));
    py.resume();
    py.at("forked");
    assert_eq!(sample_value(&collect(&c), "c_total", &[]), Some(3.0));
    let info = py.finish();
    assert_eq!(info[0]["local_value"], 1.0);
}

/// Upstream `test_initialization_detects_pid_change`: one file per process,
/// a new one after the identifier changes. multiprom sees exactly those files.
#[test]
fn test_initialization_detects_pid_change() {
    let dir = temp_dir();
    let (mut py, c) = start("test_initialization_detects_pid_change", dir.path());
    // In name order (the collector reports them in listing order).
    let seen = |c: &DirCollector| -> Vec<String> {
        let mut names: Vec<String> = collect(c)
            .files
            .iter()
            .map(|f| f.path.file_name().unwrap().to_str().unwrap().to_string())
            .collect();
        names.sort();
        names
    };
    py.at("c1");
    assert_eq!(file_names(dir.path()), ["counter_0.db"]);
    assert_eq!(seen(&c), ["counter_0.db"]);
    py.resume();
    py.at("c2");
    assert_eq!(seen(&c), ["counter_0.db"]);
    py.resume();
    py.at("c3");
    assert_eq!(file_names(dir.path()), ["counter_0.db", "counter_1.db"]);
    assert_eq!(seen(&c), ["counter_0.db", "counter_1.db"]);
    let scrape = collect(&c);
    for name in ["c1_total", "c2_total", "c3_total"] {
        assert_eq!(sample_value(&scrape, name, &[]), Some(0.0), "{name}");
    }
    py.finish();
}

/// The histogram upstream's `test_collect` and `test_collect_preserves_help` build.
fn expected_abcd_histogram(buckets: [f64; 15], count: Option<f64>) -> Vec<PlainSample> {
    let mut want = vec![sample("h_sum", &ABCD, 6.0)];
    for (le, value) in DEFAULT_LE.iter().zip(buckets) {
        want.push(sample("h_bucket", &abcd_with("le", le), value));
    }
    if let Some(count) = count {
        want.push(sample("h_count", &ABCD, count));
    }
    want
}

/// Upstream `test_collect`.
#[test]
fn test_collect() {
    let dir = temp_dir();
    let (mut py, c) = start("test_collect", dir.path());
    py.at("collect");
    let scrape = collect(&c);
    assert_eq!(
        samples(family(&scrape, "c")),
        [sample("c_total", &ABCD, 2.0)]
    );
    // Upstream sorts the gauge samples by pid; multiprom's order is already
    // by file name, which is by pid here.
    assert_eq!(
        samples(family(&scrape, "g")),
        [
            sample("g", &abcd_with("pid", "0"), 1.0),
            sample("g", &abcd_with("pid", "1"), 1.0),
        ]
    );
    let cumulative = [
        0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0,
    ];
    assert_eq!(
        samples(family(&scrape, "h")),
        expected_abcd_histogram(cumulative, Some(2.0))
    );
    py.finish();
}

/// Upstream `test_collect_histogram_ordering`: each label set's samples are
/// contiguous, `_sum`, ascending buckets, `_count`.
#[test]
fn test_collect_histogram_ordering() {
    let dir = temp_dir();
    let (mut py, c) = start("test_collect_histogram_ordering", dir.path());
    py.at("collect");
    let scrape = collect(&c);
    let mut want = Vec::new();
    for (view, sum, buckets) in [
        (
            "view1",
            6.0,
            [
                0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0,
            ],
        ),
        (
            "view2",
            1.0,
            [
                0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0,
            ],
        ),
    ] {
        want.push(sample("h_sum", &[("view", view)], sum));
        for (le, value) in DEFAULT_LE.iter().zip(buckets) {
            want.push(sample("h_bucket", &[("view", view), ("le", le)], value));
        }
        want.push(sample("h_count", &[("view", view)], buckets[14]));
    }
    assert_eq!(samples(family(&scrape, "h")), want);
    py.finish();
}

/// Upstream `test_restrict`: `restricted_registry(['c_total'])` yields only
/// family `c`. multiprom has no name filter in the collector; the same
/// restriction (Python's `_restricted_metric`: keep families with a sample of
/// a wanted name, and only those samples) applied to its merge gives the same.
#[test]
fn test_restrict() {
    let dir = temp_dir();
    let (mut py, c) = start("test_restrict", dir.path());
    py.at("collect");
    let scrape = collect(&c);
    let mut names = family_names(&scrape);
    names.sort();
    assert_eq!(names, ["c", "g"]);
    let restricted: Vec<(String, Vec<_>)> = scrape
        .families
        .iter()
        .map(|f| {
            let mut f = f.clone();
            f.samples.retain(|s| &*s.name == "c_total");
            (f.name.to_string(), samples(&f))
        })
        .filter(|(_, s)| !s.is_empty())
        .collect();
    assert_eq!(
        restricted,
        [("c".to_string(), vec![sample("c_total", &ABCD, 2.0)])]
    );
    py.finish();
}

/// Upstream `test_collect_preserves_help`.
#[test]
fn test_collect_preserves_help() {
    let dir = temp_dir();
    let (mut py, c) = start("test_collect_preserves_help", dir.path());
    py.at("collect");
    let scrape = collect(&c);
    assert_eq!(&*family(&scrape, "c").help, "c help");
    assert_eq!(&*family(&scrape, "g").help, "g help");
    assert_eq!(&*family(&scrape, "h").help, "h help");
    py.finish();
}

/// Upstream `test_merge_no_accumulate`: `merge(files, accumulate=False)`,
/// here both as `merge_files` over the globbed files and as a `DirCollector`.
#[test]
fn test_merge_no_accumulate() {
    let dir = temp_dir();
    let mut py = Upstream::start("test_merge_no_accumulate", &[(ENV, dir.path())]);
    py.at("merge");
    let raw = [
        0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0,
    ];
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let options = CollectOptions::default().accumulate(false);
    let merged = merge_files(&files, options);
    assert_eq!(
        samples(family(&merged, "h")),
        expected_abcd_histogram(raw, None)
    );
    let scrape = collect(&DirCollector::with_options(dir.path(), options));
    assert_eq!(
        samples(family(&scrape, "h")),
        expected_abcd_histogram(raw, None)
    );
    py.finish();
}

/// Upstream `test_missing_gauge_file_during_merge`: merging live gauge files
/// that vanished after listing returns nothing and does not fail.
#[test]
fn test_missing_gauge_file_during_merge() {
    let dir = temp_dir();
    let mut py = Upstream::start("test_missing_gauge_file_during_merge", &[(ENV, dir.path())]);
    py.at("merge");
    let merged = merge_files(
        [
            dir.path().join("gauge_liveall_9999999.db"),
            dir.path().join("gauge_livesum_9999999.db"),
        ],
        CollectOptions::default(),
    );
    assert!(merged.families.is_empty());
    assert_eq!(merged.files.len(), 2);
    assert!(merged
        .files
        .iter()
        .all(|f| f.state() == FileState::Vanished));
    assert_eq!(merged.stats.files_bad, 0);
    py.finish();
}

/// Upstream `test_remove_clear_warning`: `remove` and `clear` only warn in
/// multiprocess mode; the series stays in the files, and in the merge.
#[test]
fn test_remove_clear_warning() {
    let dir = temp_dir();
    let (mut py, c) = start("test_remove_clear_warning", dir.path());
    py.at("after");
    assert_eq!(
        sample_value(&collect(&c), "c_total", &[("label", "label")]),
        Some(1.0)
    );
    let info = py.finish();
    let warnings = info[0]["warnings"].as_array().unwrap();
    assert!(warnings[0]
        .as_str()
        .unwrap()
        .contains("Removal of labels has not been implemented"));
    assert!(warnings
        .last()
        .unwrap()
        .as_str()
        .unwrap()
        .contains("Clearing labels has not been implemented"));
}

/// Upstream `test_child_name_is_built_once_with_namespace_subsystem_unit`.
#[test]
fn test_child_name_is_built_once_with_namespace_subsystem_unit() {
    let dir = temp_dir();
    let (mut py, c) = start(
        "test_child_name_is_built_once_with_namespace_subsystem_unit",
        dir.path(),
    );
    py.at("collect");
    let scrape = collect(&c);
    assert_eq!(family_names(&scrape), ["ns_ss_m_seconds"]);
    let family = family(&scrape, "ns_ss_m_seconds");
    assert!(family
        .samples
        .iter()
        .all(|s| &*s.name == "ns_ss_m_seconds_total"));
    assert_eq!(
        samples(family),
        [
            sample(
                "ns_ss_m_seconds_total",
                &[("status", "200"), ("method", "GET")],
                1.0
            ),
            sample(
                "ns_ss_m_seconds_total",
                &[("status", "404"), ("method", "POST")],
                1.0
            ),
        ]
    );
    py.finish();
}

/// Upstream `test_child_preserves_parent_context_for_subclasses` (Python API
/// only); its files merge to the family the parent's context names.
#[test]
fn test_child_preserves_parent_context_for_subclasses() {
    let dir = temp_dir();
    let (mut py, c) = start(
        "test_child_preserves_parent_context_for_subclasses",
        dir.path(),
    );
    py.at("collect");
    assert_eq!(
        sample_value(
            &collect(&c),
            "prod_api_m_seconds_total",
            &[("status", "200")]
        ),
        Some(0.0)
    );
    let info = py.finish();
    assert_eq!(
        info[0]["context"],
        serde_json::json!({"namespace": "prod", "subsystem": "api", "unit": "seconds"})
    );
}

// ---------------------------------------------------------------------------
// TestMmapedDict: Python's MmapedDict writes (keys that are not metric keys),
// multiprom's reader reads the raw entries.

/// `(key, value, timestamp)` of every raw entry of `counter_1.db`.
fn raw_entries(dir: &Path) -> Vec<(String, f64, f64)> {
    let used = read_used_bytes(&dir.join("counter_1.db")).unwrap();
    EntryIter::new(&used.bytes, layout::HEADER_LEN, used.header.used as usize)
        .map(|e| {
            let e = e.unwrap();
            (e.key.to_string(), e.value, e.timestamp)
        })
        .collect()
}

fn mmaped_dict_test(name: &'static str) -> (tempfile::TempDir, Upstream) {
    let dir = temp_dir();
    let mut py = Upstream::start(name, &[(ENV, dir.path())]);
    py.at("read");
    (dir, py)
}

/// Upstream `test_process_restart`.
#[test]
fn test_process_restart() {
    let (dir, py) = mmaped_dict_test("test_process_restart");
    assert_eq!(raw_entries(dir.path()), [("abc".into(), 123.0, 987.0)]);
    let info = py.finish();
    assert_eq!(info[0]["read_value"], serde_json::json!([123.0, 987.0]));
}

/// Upstream `test_expansion`: a key larger than the initial 64 KiB.
#[test]
fn test_expansion() {
    let (dir, py) = mmaped_dict_test("test_expansion");
    let key = "a".repeat(layout::INITIAL_CAPACITY as usize);
    assert_eq!(raw_entries(dir.path()), [(key, 123.0, 987.0)]);
    py.finish();
}

/// Upstream `test_multi_expansion`.
#[test]
fn test_multi_expansion() {
    let (dir, py) = mmaped_dict_test("test_multi_expansion");
    let key = "a".repeat(layout::INITIAL_CAPACITY as usize * 4);
    assert_eq!(
        raw_entries(dir.path()),
        [
            ("abc".into(), 42.0, 987.0),
            (key, 123.0, 876.0),
            ("def".into(), 17.0, 765.0)
        ]
    );
    py.finish();
}

/// Upstream `test_corruption_detected`: Python raises; multiprom's reader
/// reports the damage at the entry's offset, and a collector skips the file.
#[test]
fn test_corruption_detected() {
    let (dir, py) = mmaped_dict_test("test_corruption_detected");
    let path = dir.path().join("counter_1.db");
    let err = read_file(&path).unwrap_err();
    assert_eq!(err.offset, 8);
    assert!(
        matches!(
            err.kind,
            ReadErrorKind::BadKeyLength { .. } | ReadErrorKind::EntryPastUsed { .. }
        ),
        "{err}"
    );
    let scrape = DirCollector::new(dir.path()).collect().unwrap();
    assert!(scrape.families.is_empty());
    assert_eq!(scrape.stats.files_bad, 1);
    let problem = scrape.problems().next().unwrap();
    assert_eq!(
        (problem.path.as_path(), problem.offset),
        (path.as_path(), 8)
    );
    let info = py.finish();
    assert_eq!(
        info[0]["python_raised"],
        "Read beyond file size detected, file is corrupted."
    );
}

// ---------------------------------------------------------------------------
// TestUnsetEnv

/// Upstream `test_unset_syncdir_env`: no directory configured is an error.
#[test]
fn test_unset_syncdir_env() {
    let out = multiprom().arg("scrape").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("PROMETHEUS_MULTIPROC_DIR"), "{stderr}");
    assert!(out.stdout.is_empty());
}

/// Upstream `test_file_syncpath`: a path that is a file, not a directory.
#[test]
fn test_file_syncpath() {
    let dir = temp_dir();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"").unwrap();
    for via_env in [false, true] {
        let mut cmd = multiprom();
        cmd.arg("scrape");
        if via_env {
            cmd.env(ENV, &file);
        } else {
            cmd.arg("--dir").arg(&file);
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("not a directory"), "{stderr}");
    }
    let err = DirCollector::new(&file).collect().unwrap_err();
    assert_eq!(err.dir, file);
}
