//! multiprom-client against the real `prometheus_client`, in real processes.
//!
//! * Rust worker processes (this binary run again, see [`rust_worker_process`])
//!   with many threads each, and Python workers (`tests/python/client_worker.py`)
//!   update the same series in one directory; Python's own merge
//!   (`tests/python/client_collect.py`) must give the exact totals, and
//!   multiprom's collector and `multiprom scrape` must print the same bytes.
//! * The same metric definitions written by Python and by Rust give
//!   byte-identical files, and Python reopening a Rust-written file (pid
//!   reuse) finds every entry instead of appending duplicates.
//! * Threads creating children (growing the file) while others update.
//!
//! Fork safety is tested by the doctests of `multiprom-client` (a test binary
//! runs its tests on extra threads, and forking a multi-threaded process is
//! refused by `multiprom_format::fork::run_in_forked_child`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use multiprom_client::{GaugeMode, MultiprocessRegistry};
use multiprom_collector::{DirCollector, Format};

use crate::harness::{multiprom, python, python_script, run_python, temp_dir};

/// Set in the environment of worker processes: `<index> <threads> <iterations>`.
const WORKER_ENV: &str = "MULTIPROM_CLIENT_INTEROP_WORKER";

/// Not a test of its own: the body of the Rust worker processes that
/// [`rust_and_python_workers_give_exact_totals`] starts by running this test
/// binary again with [`WORKER_ENV`] set. Without it, returns at once.
///
/// Writes the same metrics as `tests/python/client_worker.py` (keep in sync):
/// per thread and iteration, the `shared` children once each, half of the
/// counter increments through a cached handle and half through a lookup.
#[test]
fn rust_worker_process() {
    let Ok(spec) = std::env::var(WORKER_ENV) else {
        return;
    };
    let [index, threads, iterations]: [usize; 3] = spec
        .split(' ')
        .map(|n| n.parse().unwrap())
        .collect::<Vec<_>>()
        .try_into()
        .unwrap();
    let registry = MultiprocessRegistry::from_env().unwrap();
    let done = registry
        .counter_family("work_done_total", "Work items done", &["kind"])
        .unwrap();
    let seconds = registry
        .histogram_family(
            "work_seconds",
            "Work duration",
            &[0.1, 1.0, 10.0],
            &["kind"],
        )
        .unwrap();
    let in_flight = registry
        .gauge_family(
            "work_in_flight",
            "Work in flight",
            GaugeMode::LiveSum,
            &["kind"],
        )
        .unwrap();
    let size = registry
        .summary_family("work_bytes", "Work size", &["kind"])
        .unwrap();
    let highest = registry
        .gauge("work_highest_index", "Highest worker index", GaugeMode::Max)
        .unwrap();
    highest.set(index as f64);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let shared = done.labels(&["shared"]).unwrap();
                let rust = done.labels(&["rust"]).unwrap();
                let hist = seconds.labels(&["shared"]).unwrap();
                for i in 0..iterations {
                    if i % 2 == 0 {
                        shared.inc();
                    } else {
                        done.labels(&["shared"]).unwrap().inc();
                    }
                    rust.inc_by(0.5).unwrap();
                    hist.observe([0.0625, 0.5, 5.0, 50.0][i % 4]);
                    in_flight.labels(&["shared"]).unwrap().inc();
                    size.labels(&["shared"]).unwrap().observe(2.0);
                }
            });
        }
    });
}

fn spawn_rust_worker(dir: &Path, index: usize, threads: usize, iterations: usize) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "client_interop::rust_worker_process",
            "--test-threads=1",
            "--quiet",
        ])
        .env(WORKER_ENV, format!("{index} {threads} {iterations}"))
        .env("PROMETHEUS_MULTIPROC_DIR", dir)
        .env_remove("prometheus_multiproc_dir")
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

fn spawn_python_worker(dir: &Path, index: usize, iterations: usize) -> Child {
    Command::new(python())
        .arg(python_script("client_worker.py"))
        .args([index.to_string(), iterations.to_string()])
        .env("PROMETHEUS_MULTIPROC_DIR", dir)
        .env_remove("prometheus_multiproc_dir")
        .spawn()
        .unwrap()
}

/// Python's merge of `dir` as `(sample name, sorted labels) -> repr(value)`.
fn python_samples(dir: &Path) -> BTreeMap<(String, Vec<(String, String)>), String> {
    let out = run_python("client_collect.py", &[dir.to_str().unwrap()], &[]);
    let samples: Vec<(String, BTreeMap<String, String>, String)> =
        serde_json::from_slice(&out).unwrap();
    let mut map = BTreeMap::new();
    for (name, labels, value) in samples {
        let key = (name, labels.into_iter().collect());
        assert!(
            map.insert(key.clone(), value).is_none(),
            "duplicate {key:?}"
        );
    }
    map
}

fn sample(name: &str, labels: &[(&str, &str)]) -> (String, Vec<(String, String)>) {
    let mut labels: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    labels.sort();
    (name.to_owned(), labels)
}

/// Python's `repr(float(v))` for the integral and half-integral values here.
fn py_repr(v: f64) -> String {
    assert!(v.fract() == 0.0 || v.fract() == 0.5, "{v}");
    assert!(v < 1e16, "{v}");
    format!("{v:?}")
}

/// Python's text exposition of `dir` must equal multiprom's, in-process and
/// through the binary.
fn assert_expositions_equal(dir: &Path) {
    let python_text = String::from_utf8(run_python(
        "client_collect.py",
        &[dir.to_str().unwrap(), "--text"],
        &[],
    ))
    .unwrap();
    let scrape = DirCollector::new(dir).collect().unwrap();
    assert_eq!(scrape.problems().count(), 0, "{:?}", scrape.warnings);
    assert_eq!(scrape.encode(Format::Prometheus), python_text);
    let out = multiprom()
        .arg("scrape")
        .arg("--dir")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "multiprom scrape: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), python_text);
}

#[test]
fn rust_and_python_workers_give_exact_totals() {
    const RUST_WORKERS: usize = 3;
    const THREADS: usize = 4;
    const RUST_ITERATIONS: usize = 20_000;
    const PYTHON_WORKERS: usize = 2;
    const PYTHON_ITERATIONS: usize = 2_000;
    let dir = temp_dir();
    let mut children: Vec<Child> = (0..RUST_WORKERS)
        .map(|i| spawn_rust_worker(dir.path(), i, THREADS, RUST_ITERATIONS))
        .collect();
    children.extend(
        (0..PYTHON_WORKERS)
            .map(|i| spawn_python_worker(dir.path(), RUST_WORKERS + i, PYTHON_ITERATIONS)),
    );
    for mut child in children {
        let status = child.wait().unwrap();
        assert!(status.success(), "worker failed: {status}");
    }
    let files: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        files.iter().filter(|f| f.starts_with("counter_")).count(),
        RUST_WORKERS + PYTHON_WORKERS,
        "one counter file per process: {files:?}"
    );

    let rust_ops = (RUST_WORKERS * THREADS * RUST_ITERATIONS) as f64;
    let python_ops = (PYTHON_WORKERS * PYTHON_ITERATIONS) as f64;
    let all = rust_ops + python_ops;
    let quarter = all / 4.0;
    let shared = [("kind", "shared")];
    let want: BTreeMap<_, _> = [
        (sample("work_done_total", &shared), all),
        (
            sample("work_done_total", &[("kind", "rust")]),
            rust_ops * 0.5,
        ),
        (
            sample("work_done_total", &[("kind", "python")]),
            python_ops * 0.5,
        ),
        (
            sample("work_seconds_bucket", &[("kind", "shared"), ("le", "0.1")]),
            quarter,
        ),
        (
            sample("work_seconds_bucket", &[("kind", "shared"), ("le", "1.0")]),
            2.0 * quarter,
        ),
        (
            sample("work_seconds_bucket", &[("kind", "shared"), ("le", "10.0")]),
            3.0 * quarter,
        ),
        (
            sample("work_seconds_bucket", &[("kind", "shared"), ("le", "+Inf")]),
            all,
        ),
        (sample("work_seconds_count", &shared), all),
        (
            sample("work_seconds_sum", &shared),
            quarter * (0.0625 + 0.5 + 5.0 + 50.0),
        ),
        (sample("work_in_flight", &shared), all),
        (sample("work_bytes_count", &shared), all),
        (sample("work_bytes_sum", &shared), 2.0 * all),
        (
            sample("work_highest_index", &[]),
            (RUST_WORKERS + PYTHON_WORKERS - 1) as f64,
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k, py_repr(v)))
    .collect();
    assert_eq!(python_samples(dir.path()), want);
    assert_expositions_equal(dir.path());
}

/// Writes the definitions of `tests/python/client_keys.py` (keep in sync), in
/// the same order, with the same values.
fn write_key_scenario(registry: &MultiprocessRegistry) {
    const MODES: [GaugeMode; 10] = GaugeMode::ALL;
    let help = "Counter help \u{e9} \"q\" \\ \n\t\u{1}\u{7f} \u{1F600}";
    let labelled = registry
        .counter_family("c_total", help, &["b", "a"])
        .unwrap();
    let plain = registry.counter("plain", "").unwrap();
    let mut gauges = Vec::new();
    let mut recent = Vec::new();
    for mode in MODES {
        let name = format!("g_{mode}");
        let help = format!("Gauge {mode}");
        if mode.allows_inc() {
            gauges.push(registry.gauge_family(&name, &help, mode, &["l"]).unwrap());
        } else {
            recent.push(
                registry
                    .most_recent_gauge_family(&name, &help, mode, &["l"])
                    .unwrap(),
            );
        }
    }
    let hist = registry
        .histogram_family("h", "H", &[2.5e-7, 0.1, 1.0, 1e6], &["l"])
        .unwrap();
    let hist_default = registry
        .histogram("hd", "Default buckets", &multiprom_client::DEFAULT_BUCKETS)
        .unwrap();
    let summ = registry.summary_family("s", "S", &["l"]).unwrap();
    let summ_plain = registry.summary("sp", "").unwrap();

    labelled.labels(&["x", "y"]).unwrap().inc_by(2.0).unwrap();
    labelled
        .labels(&["\u{e9}", "\u{1F600} \"/\\"])
        .unwrap()
        .inc();
    plain.inc_by(3.0).unwrap();
    // Python goes through the modes in order; mostrecent ones are created
    // but not set (their timestamps would differ).
    let (mut g, mut r) = (gauges.iter(), recent.iter());
    for mode in MODES {
        if mode.allows_inc() {
            let child = g.next().unwrap().labels(&["v"]).unwrap();
            child.set(1.5);
            child.inc_by(2.0);
        } else {
            r.next().unwrap().labels(&["v"]).unwrap();
        }
    }
    hist.labels(&["v"]).unwrap().observe(0.5);
    hist.labels(&["w"]).unwrap().observe(5e6);
    hist_default.observe(0.03);
    summ.labels(&["v"]).unwrap().observe(2.5);
    summ_plain.observe(-1.0);
}

fn dir_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn python_and_rust_files_are_byte_identical() {
    let py_dir = temp_dir();
    run_python(
        "client_keys.py",
        &[],
        &[("PROMETHEUS_MULTIPROC_DIR", py_dir.path())],
    );
    let rust_dir = temp_dir();
    let registry = MultiprocessRegistry::builder()
        .dir(rust_dir.path())
        .process_id("python")
        .build()
        .unwrap();
    write_key_scenario(&registry);
    let python_files = dir_files(py_dir.path());
    let rust_files = dir_files(rust_dir.path());
    assert_eq!(
        python_files.keys().collect::<Vec<_>>(),
        rust_files.keys().collect::<Vec<_>>()
    );
    assert_eq!(
        python_files.len(),
        13,
        "counter, histogram, summary, 10 gauge modes"
    );
    for (name, python_bytes) in &python_files {
        let rust_bytes = &rust_files[name];
        if python_bytes != rust_bytes {
            let py = multiprom_format::read_file(&py_dir.path().join(name)).unwrap();
            let rs = multiprom_format::read_file(&rust_dir.path().join(name)).unwrap();
            panic!(
                "{name} differs\npython: {:#?}\nrust:   {:#?}",
                py.entries, rs.entries
            );
        }
    }
}

#[test]
fn python_reopens_a_rust_file_as_its_own() {
    let dir = temp_dir();
    let registry = MultiprocessRegistry::builder()
        .dir(dir.path())
        .process_id("rust")
        .build()
        .unwrap();
    write_key_scenario(&registry);
    let before = dir_files(dir.path());
    // A Python process with the same identifier (a reused pid) defines the
    // same metrics and increments c_total{a="y",b="x"} once.
    run_python(
        "client_keys.py",
        &["rust"],
        &[("PROMETHEUS_MULTIPROC_DIR", dir.path())],
    );
    let after = dir_files(dir.path());
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    for (name, bytes) in &before {
        let old = multiprom_format::read_file(&dir.path().join(name));
        let new = &after[name];
        if name == "counter_rust.db" {
            let entries = multiprom_format::read_file(&dir.path().join(name))
                .unwrap()
                .entries;
            assert_eq!(entries.len(), 3, "no entry appended: {entries:#?}");
            assert_eq!(
                entries[1].key.labels,
                [("a".into(), "y".into()), ("b".into(), "x".into())]
            );
            assert_eq!(entries[1].value, 3.0);
            // Only that value's 8 bytes changed.
            let changed = bytes.iter().zip(new).filter(|(a, b)| a != b).count();
            assert!((1..=8).contains(&changed), "{changed} bytes changed");
        } else {
            assert_eq!(bytes, new, "{name} changed: {old:?}");
        }
    }
    // And the Rust handle sees Python's increment.
    let labelled = registry
        .counter_family(
            "c_total",
            "Counter help \u{e9} \"q\" \\ \n\t\u{1}\u{7f} \u{1F600}",
            &["b", "a"],
        )
        .unwrap();
    assert_eq!(labelled.labels(&["x", "y"]).unwrap().get(), 3.0);
}

#[test]
fn growth_under_concurrent_threads_reads_exactly_in_python() {
    const THREADS: usize = 4;
    const CHILDREN: usize = 1500;
    let dir = temp_dir();
    let registry = MultiprocessRegistry::builder()
        .dir(dir.path())
        .process_id("growth")
        .build()
        .unwrap();
    let family = registry
        .counter_family("grown", "Grows the file", &["thread", "n"])
        .unwrap();
    let first = family.labels(&["main", "0"]).unwrap();
    let hist = registry
        .histogram_family("grown_hist", "Grows too", &[1.0], &["n"])
        .unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (family, first, hist) = (&family, &first, &hist);
            s.spawn(move || {
                let thread = t.to_string();
                for n in 0..CHILDREN {
                    // Handles made before the file grew keep working.
                    first.inc();
                    let n = n.to_string();
                    family
                        .labels(&[thread.as_str(), n.as_str()])
                        .unwrap()
                        .inc_by(2.0)
                        .unwrap();
                    hist.labels(&[n.as_str()]).unwrap().observe(0.5);
                }
            });
        }
    });
    let size = std::fs::metadata(dir.path().join("counter_growth.db"))
        .unwrap()
        .len();
    assert!(size > 1 << 18, "the counter file grew past 256 KiB: {size}");
    let samples = python_samples(dir.path());
    assert_eq!(
        samples[&sample("grown_total", &[("thread", "main"), ("n", "0")])],
        py_repr((THREADS * CHILDREN) as f64)
    );
    let mut per_child = 0;
    let mut buckets = 0;
    for ((name, labels), value) in &samples {
        match name.as_str() {
            "grown_total" if labels[1].1 != "main" => {
                assert_eq!(value, "2.0", "{labels:?}");
                per_child += 1;
            }
            "grown_hist_bucket" if labels.iter().any(|(k, v)| k == "le" && v == "1.0") => {
                assert_eq!(value, &py_repr(THREADS as f64), "{labels:?}");
                buckets += 1;
            }
            _ => {}
        }
    }
    assert_eq!(per_child, THREADS * CHILDREN);
    assert_eq!(buckets, CHILDREN);
    assert_expositions_equal(dir.path());
}
