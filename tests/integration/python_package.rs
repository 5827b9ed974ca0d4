//! The `multiprom` Python package (`crates/python`), built from this checkout
//! with `pip install ./crates/python` (maturin as the build backend) into a
//! venv of its own, then tested in Python against the real
//! `prometheus_client`:
//!
//! * prometheus_client's own `tests/test_multiprocess.py`, taken from the
//!   release's source distribution as the package registry serves it (pinned
//!   by SHA-256, never copied into this repository), run with the drop-in
//!   installed, and again with the writer too (`install(writer=True)`);
//! * multiprom's value class writes prometheus_client's files byte for byte
//!   (`tests/python/python_writer_identity.py`);
//! * random directories written by real forked processes
//!   (`tests/python/collector_diff.py`): `collect()` and `merge()` objects and
//!   `generate_latest` bytes equal Python's (`tests/python/python_package_diff.py`);
//! * what prometheus_client's tests cannot show: bad files skipped and logged
//!   once, the serving helpers unchanged, `install()` and the
//!   `MULTIPROM_INSTALL` start-up hook (`tests/python/python_package_tests.py`);
//! * real gunicorn serving prometheus_client's documented recipe, unchanged,
//!   with `MULTIPROM_INSTALL=1`: a 0-byte file no longer fails `/metrics`;
//! * real gunicorn with prometheus_flask_exporter's metrics server, which
//!   binds prometheus_client's class before a late `multiprom.install()`:
//!   it answers as without multiprom.
//!
//! The venv is keyed on a hash of the sources the wheel is built from, so a
//! rerun without changes reuses it; a change rebuilds it (a release build
//! in `target/python-wheel/`, shared with the wheel of wheel_command.rs:
//! minutes from scratch on two cores, as the extension links the CLI). Nothing here
//! skips: without Python, pip, cargo or the registry these tests fail and
//! say why.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hash::{DefaultHasher, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

use crate::harness::{
    free_port, python_script, target_dir, temp_dir, workspace_root, GUNICORN_VERSION,
    PROMETHEUS_CLIENT_VERSION,
};
use crate::http_client::get;
use crate::spawned_server::{Spawned, PATIENCE};

/// The maturin the wheel is built with (`--no-build-isolation`: from the venv).
pub(crate) const MATURIN_VERSION: &str = "1.16.0";

/// prometheus_flask_exporter and the Flask it runs on, for its gunicorn
/// metrics server.
const FLASK_EXPORTER_VERSION: &str = "0.23.2";
const FLASK_VERSION: &str = "3.1.3";

/// SHA-256 of `prometheus_client-0.26.0.tar.gz` as the registry serves it.
const SDIST_SHA256: &str = "04a91bcf94e2cf74a44a1a874d651a2e853ed354b6e822f3b7487751465d5c2b";

/// Every test in upstream `tests/test_multiprocess.py` (0.26.0). All must
/// pass with the drop-in; docs/python.md says which ones exercise it.
const UPSTREAM_TESTS: [&str; 33] = [
    "TestMmapedDict.test_corruption_detected",
    "TestMmapedDict.test_expansion",
    "TestMmapedDict.test_multi_expansion",
    "TestMmapedDict.test_process_restart",
    "TestMultiProcess.test_child_name_is_built_once_with_namespace_subsystem_unit",
    "TestMultiProcess.test_child_preserves_parent_context_for_subclasses",
    "TestMultiProcess.test_collect",
    "TestMultiProcess.test_collect_histogram_ordering",
    "TestMultiProcess.test_collect_preserves_help",
    "TestMultiProcess.test_counter_across_forks",
    "TestMultiProcess.test_counter_adds",
    "TestMultiProcess.test_gauge_all",
    "TestMultiProcess.test_gauge_liveall",
    "TestMultiProcess.test_gauge_livemax",
    "TestMultiProcess.test_gauge_livemin",
    "TestMultiProcess.test_gauge_livemostrecent",
    "TestMultiProcess.test_gauge_livesum",
    "TestMultiProcess.test_gauge_max",
    "TestMultiProcess.test_gauge_min",
    "TestMultiProcess.test_gauge_mostrecent",
    "TestMultiProcess.test_gauge_sum",
    "TestMultiProcess.test_histogram_adds",
    "TestMultiProcess.test_initialization_detects_pid_change",
    "TestMultiProcess.test_merge_no_accumulate",
    "TestMultiProcess.test_missing_gauge_file_during_merge",
    "TestMultiProcess.test_namespace_subsystem",
    "TestMultiProcess.test_remove_clear_warning",
    "TestMultiProcess.test_restrict",
    "TestMultiProcess.test_summary_adds",
    "TestMultiProcessDeprecation.test_deprecation_warning",
    "TestMultiProcessDeprecation.test_mark_process_dead_respects_lowercase",
    "TestUnsetEnv.test_file_syncpath",
    "TestUnsetEnv.test_unset_syncdir_env",
];

/// Seeds `0..FIXED_SEEDS` on every run, plus `RANDOM_SEEDS` from a
/// clock-derived start (as in `collector_diff.rs`).
const FIXED_SEEDS: u64 = 120;
const RANDOM_SEEDS: u64 = 120;

/// Hash of everything the wheel is built from.
pub(crate) fn source_hash() -> u64 {
    fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
        let entries =
            std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with('.') || name == "target" || name == "__pycache__" {
                continue;
            }
            if path.is_dir() {
                walk(&path, files);
            } else {
                files.push(path);
            }
        }
    }
    let root = workspace_root();
    let mut files = vec![root.join("Cargo.toml"), root.join("Cargo.lock")];
    // Every crate: the extension links the CLI, which uses them all.
    walk(&root.join("crates"), &mut files);
    files.sort();
    let mut hasher = DefaultHasher::new();
    for file in files {
        hasher.write(
            file.strip_prefix(&root)
                .unwrap()
                .as_os_str()
                .as_encoded_bytes(),
        );
        hasher.write(&std::fs::read(&file).unwrap());
    }
    hasher.write(MATURIN_VERSION.as_bytes());
    hasher.write(PROMETHEUS_CLIENT_VERSION.as_bytes());
    hasher.write(GUNICORN_VERSION.as_bytes());
    hasher.write(FLASK_EXPORTER_VERSION.as_bytes());
    hasher.write(FLASK_VERSION.as_bytes());
    hasher.finish()
}

fn run_checked(cmd: &mut Command, what: &str) -> Output {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("cannot {what}: {e} (is python3 installed? set MULTIPROM_TEST_PYTHON)")
    });
    assert_success(what, &out);
    out
}

/// A venv's Python with prometheus_client (pinned) and multiprom installed
/// from this checkout by `pip install ./crates/python`. Built once per
/// source hash; concurrent test processes race safely (each builds in its
/// own directory and renames it into place).
pub(crate) fn package_python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let prefix = "py-venv-multiprom-";
        let venv = target_dir().join(format!("{prefix}{:016x}", source_hash()));
        let python = venv.join("bin/python");
        if venv.join(".ready").exists() {
            return python;
        }
        std::fs::create_dir_all(target_dir()).expect("create target dir");
        // Venvs of older sources: each holds a copy of the extension.
        for entry in std::fs::read_dir(target_dir()).unwrap().flatten() {
            if entry.file_name().to_string_lossy().starts_with(prefix) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        let tmp = target_dir().join(format!(".{prefix}tmp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let base = std::env::var("MULTIPROM_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
        run_checked(
            Command::new(&base).args(["-m", "venv"]).arg(&tmp),
            "create the multiprom package venv",
        );
        let pip = || {
            let mut cmd = Command::new(tmp.join("bin/python"));
            cmd.args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ]);
            cmd
        };
        run_checked(
            pip()
                .arg(format!("prometheus_client=={PROMETHEUS_CLIENT_VERSION}"))
                .arg(format!("maturin=={MATURIN_VERSION}"))
                .arg(format!("gunicorn=={GUNICORN_VERSION}"))
                .arg(format!("prometheus-flask-exporter=={FLASK_EXPORTER_VERSION}"))
                .arg(format!("flask=={FLASK_VERSION}")),
            "install prometheus_client, maturin, gunicorn and prometheus_flask_exporter into the multiprom package venv",
        );
        // What a user runs from a checkout, in the venv as if activated
        // (maturin's build hook runs the `maturin` on PATH); the Rust build
        // in a target directory of its own (release, as shipped).
        let path = std::env::join_paths(std::iter::once(tmp.join("bin")).chain(
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
        ))
        .unwrap();
        run_checked(
            pip()
                .arg("--no-build-isolation")
                .arg(workspace_root().join("crates/python"))
                .env("PATH", path)
                .env("VIRTUAL_ENV", &tmp)
                .env("CARGO_TARGET_DIR", target_dir().join("python-wheel")),
            "pip install ./crates/python (needs cargo)",
        );
        std::fs::write(tmp.join(".ready"), "").expect("mark venv ready");
        if std::fs::rename(&tmp, &venv).is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        assert!(
            venv.join(".ready").exists(),
            "venv missing: {}",
            venv.display()
        );
        python
    })
}

/// Runs `tests/python/<script>` with the package venv's Python.
pub(crate) fn run_script(script: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new(package_python());
    cmd.arg(python_script(script))
        .args(args)
        .env_remove("PROMETHEUS_MULTIPROC_DIR")
        .env_remove("prometheus_multiproc_dir")
        .env_remove("MULTIPROM_INSTALL");
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {script}: {e}"))
}

/// Panics with `what`, the status and both outputs unless `out` succeeded.
pub(crate) fn assert_success(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed: {}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// prometheus_client's source distribution, downloaded once into `target/`.
fn upstream_sdist() -> PathBuf {
    let dir = target_dir().join(format!(
        "prometheus-client-sdist-{PROMETHEUS_CLIENT_VERSION}"
    ));
    let sdist = dir.join(format!(
        "prometheus_client-{PROMETHEUS_CLIENT_VERSION}.tar.gz"
    ));
    if !sdist.exists() {
        run_checked(
            Command::new(package_python())
                .args([
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .args(["--no-binary", ":all:", "--no-deps", "--dest"])
                .arg(&dir)
                .arg(format!("prometheus_client=={PROMETHEUS_CLIENT_VERSION}")),
            "download prometheus_client's source distribution",
        );
    }
    assert!(sdist.exists(), "pip download left no {}", sdist.display());
    sdist
}

#[test]
fn upstream_test_multiprocess_passes_with_the_drop_in() {
    let report = upstream_with_drop_in(false);
    assert_eq!(
        report["calls"]["values"], 0,
        "without the writer, prometheus_client's value class writes"
    );
}

#[test]
fn upstream_test_multiprocess_passes_with_the_writer() {
    let report = upstream_with_drop_in(true);
    assert_eq!(
        report["value_factory"], "multiprom._values.MultiProcessValue",
        "the upstream module must import multiprom's MultiProcessValue"
    );
    // Every test that makes a metric made it with multiprom's class.
    assert!(
        report["calls"]["values"].as_u64().unwrap() >= 100,
        "{}",
        report["calls"]
    );
}

/// Runs upstream `tests/test_multiprocess.py` with `multiprom.install()`
/// (`writer`: `install(writer=True)`); asserts that every test passed and
/// went through multiprom's collector, and returns the report.
fn upstream_with_drop_in(writer: bool) -> Value {
    let work = temp_dir();
    let sdist = upstream_sdist();
    let mut args = vec![
        sdist.to_str().unwrap(),
        SDIST_SHA256,
        work.path().to_str().unwrap(),
    ];
    if writer {
        args.push("--writer");
    }
    let out = run_script("upstream_with_drop_in.py", &args);
    assert_success("upstream_with_drop_in.py", &out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("bad report ({e}); stderr:\n{stderr}"));
    assert_eq!(
        report["collector"], "multiprom.MultiProcessCollector",
        "the upstream module must import multiprom's collector"
    );
    for outcome in [
        "failed",
        "errors",
        "skipped",
        "unexpected_successes",
        "expected_failures",
    ] {
        assert_eq!(
            report[outcome],
            serde_json::json!([]),
            "upstream tests {outcome}; unittest said:\n{stderr}"
        );
    }
    let passed: Vec<&str> = report["passed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(passed, UPSTREAM_TESTS, "the tests that passed");
    // The collection tests really went through multiprom.
    assert!(
        report["calls"]["collect"].as_u64().unwrap() >= 30,
        "{}",
        report["calls"]
    );
    assert!(
        report["calls"]["merge"].as_u64().unwrap() >= 2,
        "{}",
        report["calls"]
    );
    report
}

#[test]
fn writer_keeps_exemplars_that_only_multiprom_serves() {
    let work = temp_dir();
    let out = run_script("writer_exemplars.py", &[work.path().to_str().unwrap()]);
    assert_success("writer_exemplars.py", &out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().count(), 16, "{stdout}");
}

#[test]
fn writer_files_equal_pythons_byte_for_byte() {
    let work = temp_dir();
    let out = run_script(
        "python_writer_identity.py",
        &[work.path().to_str().unwrap()],
    );
    assert_success("python_writer_identity.py", &out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let scenarios: Vec<&str> = stdout
        .lines()
        .map(|line| line.split(':').next().unwrap())
        .collect();
    assert_eq!(
        scenarios,
        [
            "counters",
            "gauges",
            "histograms_and_summaries",
            "growth",
            "adopted",
            "changing_identifier",
            "forked",
        ],
        "{stdout}"
    );
    // Growth went past the first 64 KiB.
    assert!(stdout.contains("counter_14.db 524288"), "{stdout}");
}

/// On a small file system (a 1 MiB tmpfs, as a Kubernetes `emptyDir` with
/// `medium: Memory` and a size limit), multiprom's writer makes as many
/// series as `prometheus_client`'s: its files are sparse as Python's are,
/// taking the pages their entries fill, not their capacity. And where the
/// space runs out, it is an `OSError` (ENOSPC) from the call that adds a
/// series, never a SIGBUS.
#[test]
fn writer_takes_no_more_space_than_pythons() {
    let python = package_python();
    let script = workspace_root().join("tests/python/writer_full_disk.py");
    // In a private mount namespace (no root needed): a 1 MiB tmpfs, then
    // the script with each writer, each on an empty file system.
    let run = |series: u32| {
        let sh = r#"set -e
mount -t tmpfs -o size=1m multiprom-test "$MNT"
for install in "" writer; do
  rm -rf "$MNT"/*
  MULTIPROM_INSTALL=$install PROMETHEUS_MULTIPROC_DIR=$MNT "$PYTHON" "$SCRIPT" "$SERIES" \
    || echo "exit $?"
done
"#;
        let tmp = temp_dir();
        let out = Command::new("unshare")
            .args(["--map-root-user", "--mount", "sh", "-c", sh])
            .env("MNT", tmp.path())
            .env("PYTHON", python)
            .env("SCRIPT", &script)
            .env("SERIES", series.to_string())
            .env_remove("MULTIPROM_INSTALL")
            .output()
            .expect("run unshare (util-linux) for a private tmpfs");
        assert_success("writer_full_disk.py on a 1 MiB tmpfs", &out);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // What fits for prometheus_client's writer fits for multiprom's.
    assert_eq!(run(3_000), "3000 done\n3000 done\n");
    // Past what fits: multiprom's writer fills the space about as far,
    // and says so with ENOSPC (28) from the call.
    let out = run(20_000);
    let mut lines = out.lines();
    let python = lines.next().unwrap();
    let ours = lines.next().unwrap();
    let (made, ending) = ours.split_once(' ').unwrap();
    assert_eq!(ending, "OSError 28", "{out}");
    let made: u32 = made.parse().unwrap();
    // (About 5,200 on a 1 MiB tmpfs; with files made of real zeros over
    // their whole capacity it was 1,400.)
    assert!(
        made > 5_000,
        "multiprom's writer stopped at {made} series: {out}"
    );
    // prometheus_client's writer dies of SIGBUS there, or stops where its
    // file cannot grow.
    assert!(
        python == "exit 135" || python.ends_with("OSError 28"),
        "{out}"
    );
}

#[test]
fn python_api_equals_python_on_random_directories() {
    let base = temp_dir();
    let base_str = base.path().to_str().unwrap();
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let random_first = 1_000_000 + (clock % 1_000_000_000) * RANDOM_SEEDS;
    eprintln!(
        "python_package: fixed seeds 0..{FIXED_SEEDS}, random seeds {random_first}..{}",
        random_first + RANDOM_SEEDS
    );
    for (first, count) in [(0, FIXED_SEEDS), (random_first, RANDOM_SEEDS)] {
        let (first, count) = (first.to_string(), count.to_string());
        let args = [base_str, first.as_str(), count.as_str()];
        let out = run_script("collector_diff.py", &args);
        assert_success("collector_diff.py", &out);
        let out = run_script("python_package_diff.py", &args);
        assert_success("python_package_diff.py", &out);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("{count} seeds equal")
        );
    }
}

#[test]
fn package_behaviour() {
    let out = run_script("python_package_tests.py", &[]);
    assert_success("python_package_tests.py", &out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // unittest ends with "OK", or "OK (skipped=N)" if any skipped.
    assert_eq!(
        stderr.trim_end().lines().last(),
        Some("OK"),
        "unittest did not pass cleanly:\n{stderr}"
    );
}

#[test]
fn a_child_forked_during_a_scrape_scrapes_on_its_own() {
    let dir = temp_dir();
    let mut cmd = Command::new(package_python());
    cmd.arg(python_script("fork_during_scrape.py"))
        .arg("20")
        .env("PROMETHEUS_MULTIPROC_DIR", dir.path())
        .env_remove("MULTIPROM_INSTALL");
    let out = cmd.output().unwrap();
    assert_success("fork_during_scrape.py", &out);
}

/// Starts real gunicorn (2 workers) on the unchanged documented recipe app,
/// with `MULTIPROM_INSTALL` set to `install`, after a worker killed at birth
/// left a 0-byte file in the directory; returns `GET /metrics`.
fn gunicorn_metrics_with_a_bad_file(install: &str) -> (u16, String) {
    let dir = temp_dir();
    std::fs::write(dir.path().join("counter_999999.db"), b"").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut cmd = Command::new(package_python());
    cmd.args(["-m", "gunicorn", "--chdir"])
        .arg(workspace_root().join("tests/python/python_package_gunicorn"))
        .args(["-w", "2", "-b"])
        .arg(port.to_string())
        .arg("app:app")
        .env("PROMETHEUS_MULTIPROC_DIR", dir.path())
        .env("MULTIPROM_INSTALL", install);
    let server = Spawned::start(cmd);
    let deadline = std::time::Instant::now() + PATIENCE;
    while std::net::TcpStream::connect(port).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "gunicorn never listened; stderr:\n{}",
            server.stderr()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    for _ in 0..3 {
        assert_eq!(get(port, "/", &[]).status, 200, "{}", server.stderr());
    }
    let response = get(port, "/metrics", &[]);
    // A graceful stop, so no worker outlives the test.
    let mut server = server;
    server.signal(rustix::process::Signal::TERM);
    server.wait();
    (response.status, response.text())
}

#[test]
fn gunicorn_recipe_survives_a_bad_file_with_multiprom_install() {
    let (status, body) = gunicorn_metrics_with_a_bad_file("1");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("app_requests_total 3.0\n"), "{body}");
    // The control: the same app on prometheus_client's own collector fails
    // the whole scrape on that file.
    let (status, body) = gunicorn_metrics_with_a_bad_file("0");
    assert_eq!(status, 500, "without the drop-in: {body}");
}

/// Waits until something listens on `addr`.
fn wait_listening(addr: std::net::SocketAddr, server: &Spawned) {
    let deadline = std::time::Instant::now() + PATIENCE;
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "nothing listens on {addr}; stderr:\n{}",
            server.stderr()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Waits until `workers` processes have written a gauge file in `dir`: a
/// worker that boots after a scrape would add its file between the two
/// scrapes that are compared, and change the order prometheus_client lists
/// the directory in.
fn wait_workers_booted(dir: &Path, workers: usize, server: &Spawned) {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let gauges = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with("gauge_"))
                    .count()
            })
            .unwrap_or(0);
        if gauges >= workers {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{gauges} of {workers} workers booted; stderr:\n{}",
            server.stderr()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn loopback(port: u16) -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], port))
}

#[test]
fn flask_exporter_metrics_server_works_after_a_late_install() {
    let dir = temp_dir();
    let app = loopback(free_port());
    let metrics = loopback(free_port());
    let fixture = workspace_root().join("tests/python/python_package_flask_exporter");
    let mut cmd = Command::new(package_python());
    cmd.args(["-m", "gunicorn", "-c"])
        .arg(fixture.join("gunicorn.conf.py"))
        .arg("--chdir")
        .arg(&fixture)
        .args(["-w", "2", "-b"])
        .arg(app.to_string())
        .arg("app:app")
        .env("PROMETHEUS_MULTIPROC_DIR", dir.path())
        .env("METRICS_PORT", metrics.port().to_string())
        .env("MULTIPROM_LATE_INSTALL", "1")
        .env_remove("MULTIPROM_INSTALL");
    let mut server = Spawned::start(cmd);
    wait_listening(app, &server);
    wait_listening(metrics, &server);
    wait_workers_booted(dir.path(), 2, &server);
    for _ in 0..3 {
        assert_eq!(get(app, "/", &[]).status, 200, "{}", server.stderr());
    }
    let late_install = get(metrics, "/metrics", &[]);
    // The control, on the same files (no request in between): the same
    // metrics server in a process without multiprom.
    let control = Command::new(package_python())
        .arg(python_script(
            "python_package_flask_exporter/metrics_without_multiprom.py",
        ))
        .arg(free_port().to_string())
        .env("PROMETHEUS_MULTIPROC_DIR", dir.path())
        .env_remove("MULTIPROM_INSTALL")
        .output()
        .expect("run the control");
    server.signal(rustix::process::Signal::TERM);
    let (_, stderr) = server.wait();
    assert_success("metrics_without_multiprom.py", &control);
    let control = String::from_utf8(control.stdout).unwrap();
    assert_eq!(
        late_install.status,
        200,
        "{}\n{stderr}",
        late_install.text()
    );
    assert!(
        control.contains("flask_http_request_total{method=\"GET\",status=\"200\"} 3.0\n"),
        "{control}"
    );
    assert_eq!(late_install.text(), control);
}
