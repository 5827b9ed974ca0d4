//! The package beside older `prometheus_client` releases it allows
//! (`crates/python/pyproject.toml`: 0.18 on): the wheel (as
//! wheel_command.rs builds it) in a venv with each release. The other
//! package tests run against the pinned release; what a newer release added
//! (`close_all_multiprocess_files()`, for one) must be looked for, not
//! assumed. The releases: the oldest, and the last of each run of releases
//! that differ from the next in what the package touches.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use crate::harness::{python_script, target_dir, temp_dir};
use crate::python_package::{assert_success, run_script, source_hash};
use crate::spawned_server::PATIENCE;
use crate::wheel_command::{made_once, make_venv, pip, remove_older, run_checked, wheel};

/// The oldest release `pyproject.toml`'s `prometheus_client>=` allows.
const OLDEST: &str = "0.18.0";

/// A venv with the wheel and `prometheus_client` `release`, made once per
/// source hash.
fn release_python(release: &str) -> PathBuf {
    static MADE: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let mut made = MADE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(python) = made.get_or_insert_with(HashMap::new).get(release) {
        return python.clone();
    }
    let prefix = format!("py-venv-wheel-prometheus-client-{release}-");
    let dir = target_dir().join(format!("{prefix}{:016x}", source_hash()));
    remove_older(&prefix, &dir);
    made_once(&dir, |tmp| {
        make_venv(tmp);
        run_checked(
            pip(tmp)
                .arg(wheel())
                .arg(format!("prometheus_client=={release}")),
            &format!("pip install the wheel and prometheus_client {release}"),
            PATIENCE,
        );
    });
    let python = dir.join("bin/python");
    made.get_or_insert_with(HashMap::new)
        .insert(release.to_owned(), python.clone());
    python
}

#[test]
fn the_oldest_release_is_the_one_pyproject_allows() {
    let pyproject = std::fs::read_to_string(
        crate::harness::workspace_root().join("crates/python/pyproject.toml"),
    )
    .unwrap();
    assert!(
        pyproject.contains(&format!("\"prometheus_client>={}\"", &OLDEST[..4])),
        "pyproject.toml allows another oldest prometheus_client than {OLDEST}"
    );
}

/// The package's own test scripts (python_package.rs and
/// python_native_histograms.rs run them with the pinned release, where
/// nothing may be skipped) with `release`: every test passes but those of
/// what the release lacks, which must be exactly `skipped`, in the order
/// the scripts run.
fn package_tests_pass_with(release: &str, skipped: &[&str]) {
    let mut got = Vec::new();
    for script in ["python_package_tests.py", "native_histogram_tests.py"] {
        let out = Command::new(release_python(release))
            .arg(python_script(script))
            .env_remove("PROMETHEUS_MULTIPROC_DIR")
            .env_remove("prometheus_multiproc_dir")
            .env_remove("MULTIPROM_INSTALL")
            .output()
            .unwrap();
        assert_success(&format!("{script} with {release}"), &out);
        let stdout = String::from_utf8_lossy(&out.stdout);
        got.extend(
            stdout
                .lines()
                .filter_map(|line| line.strip_prefix("skipped "))
                .map(str::to_owned),
        );
    }
    assert_eq!(got, skipped, "skipped with prometheus_client {release}");
}

/// Before 0.25: `CollectorRegistry(support_collectors_without_names=)`.
const WITHOUT_NAMES: &str = "RestrictedTest.test_a_registry_that_supports_collectors_without_names";
/// Before 0.26: `values.close_all_multiprocess_files()`, for the writer's
/// files and the native histograms'.
const CLOSE_ALL: [&str; 2] = [
    "WriterInstallTest.test_close_all_multiprocess_files_closes_multiprom_files",
    "NativeHistogramTest.test_close_all_multiprocess_files_closes_the_native_files_too",
];

// 0.18.0: the oldest; `start_http_server` returns nothing.
#[test]
fn package_tests_pass_with_0_18() {
    package_tests_pass_with(OLDEST, &[WITHOUT_NAMES, CLOSE_ALL[0], CLOSE_ALL[1]]);
}

// 0.22.1: the last whose ASGI handler parses the query as bytes, and whose
// OpenMetrics keeps a `:` in a sample name.
#[test]
fn package_tests_pass_with_0_22() {
    package_tests_pass_with("0.22.1", &[WITHOUT_NAMES, CLOSE_ALL[0], CLOSE_ALL[1]]);
}

// 0.24.1: the last without collectors without names.
#[test]
fn package_tests_pass_with_0_24() {
    package_tests_pass_with("0.24.1", &[WITHOUT_NAMES, CLOSE_ALL[0], CLOSE_ALL[1]]);
}

// 0.25.0: the last without `close_all_multiprocess_files()` (and the
// writer's cleanup list).
#[test]
fn package_tests_pass_with_0_25() {
    package_tests_pass_with("0.25.0", &CLOSE_ALL);
}

/// Random directories (`collector_diff.py`, as the differential tests make
/// them) written by real processes with the pinned release, beside that
/// release's outputs, read by the package with `release`
/// (`python_package_release_diff.py`): the pinned release's bytes, and the
/// release's own merge's samples. Returns the counts it prints, by name.
fn pinned_bytes_with(release: &str, legacy_names: bool) -> HashMap<String, u32> {
    const SEEDS: &str = "20";
    let base = temp_dir();
    let base_arg = base.path().to_str().unwrap();
    let mut args = vec![base_arg, "0", SEEDS];
    if legacy_names {
        args.insert(0, "--legacy-names");
    }
    assert_success("collector_diff.py", &run_script("collector_diff.py", &args));
    let out = Command::new(release_python(release))
        .arg(python_script("python_package_release_diff.py"))
        .args([base_arg, "0", SEEDS])
        .output()
        .unwrap();
    assert_success(
        &format!("python_package_release_diff.py with {release}"),
        &out,
    );
    // "20 compared, 0 not representable, 4 samples in another order, ..."
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .split(", ")
        .map(|count| {
            let (n, name) = count.split_once(' ').unwrap();
            (name.to_owned(), n.parse().unwrap())
        })
        .collect()
}

/// The package with `release` prints the pinned release's bytes on
/// directories of names every release reads, and (from 0.22, which reads
/// any name) on those of any names; its samples are the release's own, in
/// the release's order from 0.24 (before, the order 0.24 fixed). The
/// release itself prints otherwise on most of them (an exponent of 1e10 or
/// more), so the directories hold what tells them apart.
fn prints_the_pinned_bytes_with(release: &str, any_names: bool, same_order: bool) {
    let mut runs = vec![pinned_bytes_with(release, true)];
    if any_names {
        runs.push(pinned_bytes_with(release, false));
    }
    for counts in &runs {
        assert_eq!(counts["compared"], 20, "{release}: {counts:?}");
        assert_eq!(
            counts["samples in another order"] == 0,
            same_order,
            "{release}: {counts:?}"
        );
        assert!(
            counts["the release prints otherwise"] > 0,
            "{release}: {counts:?}"
        );
    }
}

#[test]
fn prints_the_pinned_bytes_with_0_18() {
    prints_the_pinned_bytes_with(OLDEST, false, false);
}

#[test]
fn prints_the_pinned_bytes_with_0_22() {
    prints_the_pinned_bytes_with("0.22.1", true, false);
}

#[test]
fn prints_the_pinned_bytes_with_0_24() {
    prints_the_pinned_bytes_with("0.24.1", true, true);
}

#[test]
fn prints_the_pinned_bytes_with_0_25() {
    prints_the_pinned_bytes_with("0.25.0", true, true);
}

/// What a worker does in multiprocess mode with every part of the package
/// on: multiprom's writer writes, native histograms are recorded,
/// multiprom's collector reads it all, and prometheus_client's handler
/// answers a protobuf scraper in protobuf, with nothing said on stderr.
const WORKER: &str = r#"
import os
import multiprom
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, values
from prometheus_client.multiprocess import MultiProcessCollector
print(issubclass(values.ValueClass, multiprom._native.Value), MultiProcessCollector is multiprom.MultiProcessCollector)
Counter("c", "C.").inc(3)
Histogram("h", "H.").observe(0.2)
Gauge("vllm:waiting", "Waiting.", multiprocess_mode="livesum").set(2)
r = CollectorRegistry()
MultiProcessCollector(r)
print(r.get_sample_value("c_total"), r.get_sample_value("h_count"))
d = os.environ["PROMETHEUS_MULTIPROC_DIR"]
print(len(os.listdir(os.path.join(d, "native-histograms"))))
said = []
accept = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,text/plain;version=0.0.4;q=0.5"
environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": "", "HTTP_ACCEPT": accept}
from prometheus_client import make_wsgi_app
body = b"".join(make_wsgi_app(r)(environ, lambda status, headers: said.append(dict(headers))))
print(said[0]["Content-Type"].split(";")[0], len(body) > 0)
"#;

/// The directory's OpenMetrics text, through prometheus_client's own
/// encoder (a `:` in a sample name kept, as this release prints it), from
/// whichever collector `MULTIPROM_INSTALL` leaves in place; then a
/// `?name[]=` scrape of the `:` gauge through `make_wsgi_app`.
const OPENMETRICS: &str = r#"
import sys
from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.openmetrics.exposition import generate_latest
r = CollectorRegistry()
MultiProcessCollector(r)
sys.stdout.buffer.write(generate_latest(r))
environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": "name[]=vllm:waiting",
           "HTTP_ACCEPT": "application/openmetrics-text; version=1.0.0"}
sys.stdout.buffer.write(b"".join(make_wsgi_app(r)(environ, lambda status, headers: None)))
"#;

/// Runs `script` with the oldest release, `MULTIPROM_INSTALL=install`, on
/// `dir`: its stdout, once it succeeded with nothing on stderr.
fn run_oldest(dir: &Path, script: &str, install: &str) -> String {
    let out = Command::new(release_python(OLDEST))
        .args(["-c", script])
        .env("PROMETHEUS_MULTIPROC_DIR", dir)
        .env("MULTIPROM_INSTALL", install)
        .output()
        .unwrap();
    assert_success(install, &out);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{install}");
    String::from_utf8(out.stdout).unwrap()
}

/// Every part of `MULTIPROM_INSTALL`.
const EVERYTHING: &str = "collector,writer,native-histograms";

#[test]
fn every_part_of_the_package_works_with_the_oldest_prometheus_client_it_allows() {
    let dir = temp_dir();
    assert_eq!(
        run_oldest(dir.path(), WORKER, EVERYTHING),
        "True True\n3.0 1.0\n1\napplication/vnd.google.protobuf True\n"
    );
}

#[test]
fn openmetrics_is_the_oldest_prometheus_clients_own_and_name_filters_answer() {
    let dir = temp_dir();
    run_oldest(dir.path(), WORKER, EVERYTHING);
    let ours = run_oldest(dir.path(), OPENMETRICS, "collector");
    // prometheus_client's own collector (nothing installed): the whole
    // text, and no answer to `?name[]=` (it asks collectors by name).
    let theirs = run_oldest(dir.path(), OPENMETRICS, "");
    let (whole, named) = ours.split_at(ours.find("# EOF\n").unwrap() + 6);
    assert_eq!(format!("{whole}# EOF\n"), theirs);
    assert!(whole.contains("\nvllm:waiting 2.0\n"), "{whole}");
    assert_eq!(
        named,
        "# HELP vllm:waiting Waiting.\n# TYPE vllm:waiting gauge\nvllm:waiting 2.0\n# EOF\n"
    );
}

/// The protobuf answer to `?name[]=h_count` through `make_asgi_app` (which
/// parses the query as bytes in this release) and through `make_wsgi_app`,
/// then the whole protobuf answer's length.
const PROTOBUF_NAMED: &str = r#"
import asyncio, sys
from prometheus_client import CollectorRegistry, make_asgi_app, make_wsgi_app
from prometheus_client.multiprocess import MultiProcessCollector
r = CollectorRegistry()
MultiProcessCollector(r)
accept = b"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"
sent = []
async def receive():
    return {"type": "http.request", "body": b"", "more_body": False}
async def send(message):
    sent.append(message)
scope = {"type": "http", "method": "GET", "path": "/metrics", "query_string": b"name%5B%5D=h_count",
         "headers": [(b"accept", accept)]}
asyncio.run(make_asgi_app(r)(scope, receive, send))
asgi = b"".join(m.get("body", b"") for m in sent[1:])
def wsgi(query):
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": query,
               "HTTP_ACCEPT": accept.decode()}
    return b"".join(make_wsgi_app(r)(environ, lambda status, headers: None))
print(asgi == wsgi("name[]=h_count"), len(asgi) < len(wsgi("")), len(asgi) > 0)
"#;

#[test]
fn a_name_filter_through_asgi_answers_the_named_samples_on_the_oldest_release() {
    let dir = temp_dir();
    run_oldest(dir.path(), WORKER, EVERYTHING);
    assert_eq!(
        run_oldest(dir.path(), PROTOBUF_NAMED, EVERYTHING),
        "True True True\n"
    );
}
