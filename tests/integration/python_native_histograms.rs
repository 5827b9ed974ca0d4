//! Native histograms from Python with no change to the application: the
//! `multiprom` package (built from this checkout, as in python_package.rs)
//! in real processes with the real prometheus_client.
//!
//! With `install(native_histograms=True)` (before prometheus_client is
//! imported, after its metrics are made, or through `MULTIPROM_INSTALL`),
//! on prometheus_client's own value class and on multiprom's writer:
//! the `*.db` files are byte for byte those of the same run without it,
//! prometheus_client's `MultiProcessCollector` prints the same, and the
//! companion `native-histograms/histogram_<pid>.native` file holds exactly
//! the observations (read here with the format crate's reader).
//! `multiprom.NativeHistogram` records natively either way. A forked
//! child records in its own file. The package's smaller behaviours are
//! in `tests/python/native_histogram_tests.py`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use multiprom_format::native_buckets::DEFAULT_ZERO_THRESHOLD;
use multiprom_format::{encode_key, read_native_histogram_file, NativeHistogram};
use serde_json::Value;

use crate::harness::{python_script, temp_dir};
use crate::python_package::{assert_success, package_python, run_script};

const SCRIPT: &str = "native_histogram_writer.py";

/// Runs the workload script with `env` on top of a clean environment.
fn script(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(package_python());
    cmd.arg(python_script(SCRIPT)).args(args);
    for variable in [
        "PROMETHEUS_MULTIPROC_DIR",
        "prometheus_multiproc_dir",
        "MULTIPROM_INSTALL",
        "MULTIPROM_NATIVE_HISTOGRAM_SCHEMA",
        "MULTIPROM_NATIVE_HISTOGRAM_MAX_BUCKETS",
    ] {
        cmd.env_remove(variable);
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().expect("run the native histogram writer");
    assert_success(&format!("{SCRIPT} {args:?} {env:?}"), &out);
    out
}

/// One `write` run into `dir`: its pid and its standard error.
fn write(dir: &Path, value_class: &str, native: &str, env: &[(&str, &str)]) -> (u32, String) {
    let out = script(&["write", dir.to_str().unwrap(), value_class, native], env);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pid = u32::try_from(report["pid"].as_u64().unwrap()).unwrap();
    (pid, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The `*.db` files of `dir`, named with the pid as `PID`.
fn db_files(dir: &Path, pid: u32) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".db"))
        .map(|name| {
            let bytes = std::fs::read(dir.join(&name)).unwrap();
            (name.replace(&pid.to_string(), "PID"), bytes)
        })
        .collect()
}

/// What process `pid`'s native histogram file in `dir` holds, by key.
fn natives(dir: &Path, pid: u32) -> BTreeMap<String, NativeHistogram> {
    let path = dir.join(format!("native-histograms/histogram_{pid}.native"));
    let file = read_native_histogram_file(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    file.entries
        .into_iter()
        .map(|entry| (entry.raw_key, entry.histogram))
        .collect()
}

/// prometheus_client's own collector over `dir`.
fn collect(dir: &Path) -> String {
    let out = script(&["collect", dir.to_str().unwrap()], &[]);
    String::from_utf8(out.stdout).unwrap()
}

fn sorted_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    lines
}

fn key(name: &str, labels: &[(&str, &str)], help: &str) -> String {
    encode_key(name, name, labels.iter().copied(), help)
}

fn histogram(schema: i8, zero_count: u64, sum: f64, positive: &[(i32, u64)]) -> NativeHistogram {
    NativeHistogram {
        schema,
        zero_threshold: DEFAULT_ZERO_THRESHOLD,
        zero_count,
        nan_count: 0,
        sum,
        positive: positive.to_vec(),
        negative: Vec::new(),
    }
}

/// The workload's `multiprom.NativeHistogram` series at `schema`: 1024
/// and 100 for `x` (2^10, and 2^6.64 rounded up to the next boundary),
/// one `time()` of 0.25 s (2^-2) for `y`. Bucket `i` at schema `s` ends
/// at 2^(i / 2^s), inclusive.
fn native_only(schema: i8) -> BTreeMap<String, NativeHistogram> {
    let (i1024, i100, quarter) = if schema == 3 {
        (80, 54, -16)
    } else {
        (10, 7, -2)
    };
    BTreeMap::from([
        (
            key("payload_bytes", &[("kind", "x")], "Payload."),
            histogram(schema, 0, 1124.0, &[(i100, 1), (i1024, 1)]),
        ),
        (
            key("payload_bytes", &[("kind", "y")], "Payload."),
            histogram(schema, 0, 0.25, &[(quarter, 1)]),
        ),
    ])
}

/// Every histogram of the workload at `schema` (3 or 0).
fn everything(schema: i8) -> BTreeMap<String, NativeHistogram> {
    // 0.5, 1, 2, 3 (and 0 in the zero bucket); 0.25; 4.
    let (latency, quarter, four): (&[(i32, u64)], i32, i32) = if schema == 3 {
        (&[(-8, 1), (0, 1), (8, 1), (13, 1)], -16, 16)
    } else {
        (&[(-1, 1), (0, 1), (1, 1), (2, 1)], -2, 2)
    };
    let mut all = native_only(schema);
    all.extend([
        (
            key("latency_seconds", &[], "Latency."),
            histogram(schema, 1, 6.5, latency),
        ),
        (
            key("request_seconds", &[("route", "/a")], "Requests."),
            histogram(schema, 0, 0.5, &[(quarter, 2)]),
        ),
        (
            key("request_seconds", &[("route", "/b")], "Requests."),
            histogram(schema, 0, 4.0, &[(four, 1)]),
        ),
        (
            key("job_seconds", &[], "Jobs."),
            histogram(schema, 0, 0.75, &[(quarter, 3)]),
        ),
    ]);
    all
}

#[test]
fn opt_in_records_every_observation_and_leaves_the_db_files_alone() {
    for value_class in ["python", "multiprom"] {
        let off = temp_dir();
        let (off_pid, _) = write(off.path(), value_class, "off", &[]);
        // NativeHistogram records natively without the opt-in.
        assert_eq!(
            natives(off.path(), off_pid),
            native_only(3),
            "{value_class}"
        );
        let off_output = collect(off.path());
        assert!(
            off_output.contains("payload_bytes_bucket{kind=\"x\",le=\"+Inf\"} 2.0\n"),
            "{off_output}"
        );
        let hook = if value_class == "python" {
            "native-histograms"
        } else {
            "writer,native-histograms"
        };
        for (native, env) in [
            ("early", vec![]),
            ("late", vec![]),
            ("env", vec![("MULTIPROM_INSTALL", hook)]),
        ] {
            let what = format!("{value_class}, {native}");
            let on = temp_dir();
            let (on_pid, stderr) = write(on.path(), value_class, native, &env);
            assert!(!stderr.contains("Warning"), "{what}: {stderr}");
            let (on_files, off_files) =
                (db_files(on.path(), on_pid), db_files(off.path(), off_pid));
            assert_eq!(
                on_files.keys().collect::<Vec<_>>(),
                off_files.keys().collect::<Vec<_>>(),
                "{what}: the *.db files"
            );
            for (name, bytes) in &on_files {
                // Not printed: 64 KiB each.
                assert!(bytes == &off_files[name], "{what}: {name} differs");
            }
            assert_eq!(natives(on.path(), on_pid), everything(3), "{what}");
            let on_output = collect(on.path());
            // Families come in the order the directory lists its files,
            // which differs between two directories: compare the lines.
            assert_eq!(
                sorted_lines(&on_output),
                sorted_lines(&off_output),
                "{what}"
            );
            std::fs::remove_dir_all(on.path().join("native-histograms")).unwrap();
            assert_eq!(collect(on.path()), on_output, "{what}: without the natives");
        }
    }
}

#[test]
fn schema_comes_from_the_environment_and_a_bad_one_warns() {
    let dir = temp_dir();
    let env = [("MULTIPROM_NATIVE_HISTOGRAM_SCHEMA", "0")];
    let (pid, stderr) = write(dir.path(), "python", "early", &env);
    assert!(!stderr.contains("Warning"), "{stderr}");
    assert_eq!(natives(dir.path(), pid), everything(0));
    for (variable, bad) in [
        ("MULTIPROM_NATIVE_HISTOGRAM_SCHEMA", "fine"),
        ("MULTIPROM_NATIVE_HISTOGRAM_SCHEMA", "9"),
        ("MULTIPROM_NATIVE_HISTOGRAM_MAX_BUCKETS", "0"),
    ] {
        let dir = temp_dir();
        let (pid, stderr) = write(dir.path(), "multiprom", "early", &[(variable, bad)]);
        assert!(
            stderr.contains(&format!("RuntimeWarning: multiprom: {variable}='{bad}'")),
            "{variable}={bad}: {stderr}"
        );
        assert_eq!(natives(dir.path(), pid), everything(3), "{variable}={bad}");
    }
}

#[test]
fn forked_child_records_in_its_own_file() {
    for value_class in ["python", "multiprom"] {
        let dir = temp_dir();
        let out = script(&["fork", dir.path().to_str().unwrap(), value_class], &[]);
        let pids: Value = serde_json::from_slice(&out.stdout).unwrap();
        let pid = |name: &str| u32::try_from(pids[name].as_u64().unwrap()).unwrap();
        let latency = key("latency_seconds", &[], "Latency.");
        // 1 and 3 (2^1.58: bucket 13) in the parent, 2 twice in the child.
        assert_eq!(
            natives(dir.path(), pid("parent")),
            BTreeMap::from([(latency.clone(), histogram(3, 0, 4.0, &[(0, 1), (13, 1)]))]),
            "{value_class}"
        );
        assert_eq!(
            natives(dir.path(), pid("child")),
            BTreeMap::from([(latency, histogram(3, 0, 4.0, &[(8, 2)]))]),
            "{value_class}"
        );
    }
}

#[test]
fn native_histogram_package_behaviour() {
    let out = run_script("native_histogram_tests.py", &[]);
    assert_success("native_histogram_tests.py", &out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim_end().lines().last(),
        Some("OK"),
        "unittest did not pass cleanly:\n{stderr}"
    );
}
