//! `multiprom inspect`: golden output of the three modes over good files
//! and every kind of bad file that can be made on purpose, plus exit codes,
//! closed pipes, and files written while being inspected.
//!
//! Goldens live in `tests/golden/inspect/`; regenerate them with
//! `MULTIPROM_BLESS=1 cargo test --test integration inspect::` and review the diff.
//! (Not made here: "vanished" and "file shrank" need a race, "cannot read"
//! needs a non-root user; the reader's unit tests cover them.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use multiprom_format::layout::entry_len;
use multiprom_format::native_file::native_histogram_path;
use multiprom_format::{encode_key, FileName, FileWriter, GaugeMode, MetricKind};

use crate::harness::{multiprom, python, python_script, temp_dir, workspace_root};
use crate::spawned_server::PATIENCE;

/// family, sample, labels, help, value.
type TestEntry<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], &'a str, f64);

fn write(dir: &Path, kind: MetricKind, id: &str, entries: &[TestEntry<'_>]) {
    let mut writer = FileWriter::open(dir, &FileName::new(kind, id).unwrap()).unwrap();
    for (family, sample, labels, help, value) in entries {
        let key = encode_key(family, sample, labels.iter().copied(), help);
        writer.slot(&key).unwrap().set(*value);
    }
}

/// A file image: header + entries (key, value, timestamp), zero-padded to
/// `capacity`, exactly as Python lays it out.
fn image(entries: &[(&[u8], f64, f64)], capacity: usize) -> Vec<u8> {
    multiprom_format::layout::file_image(entries.iter().copied(), capacity)
}

const GOOD_KEY: &[u8] = br#"["jobs", "jobs_total", {}, "Jobs."]"#;

fn set_used(bytes: &mut [u8], used: i32) {
    bytes[..4].copy_from_slice(&used.to_ne_bytes());
}

/// Good files of every type, with odd values and text.
fn good_files(dir: &Path) {
    write(
        dir,
        MetricKind::Counter,
        "101",
        &[
            (
                "http_requests",
                "http_requests_total",
                &[("code", "200"), ("method", "GET")],
                "HTTP requests.",
                12.0,
            ),
            (
                "http_requests",
                "http_requests_total",
                &[("code", "500"), ("method", "POST")],
                "HTTP requests.",
                0.5,
            ),
            (
                "unicode",
                "unicode_total",
                &[("name", "é\"\\\n\u{1b}[31m")],
                "Ünïcode ✓.",
                1.0,
            ),
        ],
    );
    let mut recent = FileWriter::open(
        dir,
        &FileName::new(MetricKind::Gauge(GaugeMode::LiveMostRecent), "102").unwrap(),
    )
    .unwrap();
    recent
        .slot(&encode_key(
            "temperature",
            "temperature",
            [("room", "a")],
            "Temperature.",
        ))
        .unwrap()
        .set_with_timestamp(21.5, 1_700_000_000.25);
    recent
        .slot(&encode_key(
            "temperature",
            "temperature",
            [("room", "b")],
            "Temperature.",
        ))
        .unwrap();
    write(
        dir,
        MetricKind::Gauge(GaugeMode::Max),
        "103",
        &[
            (
                "extremes",
                "extremes",
                &[("kind", "nan")],
                "Odd values.",
                f64::NAN,
            ),
            (
                "extremes",
                "extremes",
                &[("kind", "inf")],
                "Odd values.",
                f64::INFINITY,
            ),
            (
                "extremes",
                "extremes",
                &[("kind", "-inf")],
                "Odd values.",
                f64::NEG_INFINITY,
            ),
            (
                "extremes",
                "extremes",
                &[("kind", "big")],
                "Odd values.",
                1e300,
            ),
        ],
    );
    write(
        dir,
        MetricKind::Histogram,
        "104",
        &[
            (
                "latency_seconds",
                "latency_seconds_sum",
                &[],
                "Latency.",
                0.75,
            ),
            (
                "latency_seconds",
                "latency_seconds_bucket",
                &[("le", "0.5")],
                "Latency.",
                1.0,
            ),
            (
                "latency_seconds",
                "latency_seconds_bucket",
                &[("le", "+Inf")],
                "Latency.",
                1.0,
            ),
        ],
    );
    write(
        dir,
        MetricKind::Summary,
        "105",
        &[
            ("payload_bytes", "payload_bytes_count", &[], "Payload.", 2.0),
            ("payload_bytes", "payload_bytes_sum", &[], "Payload.", 300.0),
        ],
    );
    write(
        dir,
        MetricKind::Gauge(GaugeMode::All),
        "worker1",
        &[("up", "up", &[], "Up.", 1.0)],
    );
}

/// One file for every kind of damage that can be made on purpose.
fn bad_files(dir: &Path) {
    let good = image(&[(GOOD_KEY, 1.0, 0.0)], 4096);
    let used = 8 + entry_len(GOOD_KEY.len()) as i32;
    let put = |name: &str, bytes: &[u8]| std::fs::write(dir.join(name), bytes).unwrap();
    let with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = good.clone();
        f(&mut b);
        b
    };
    // Aged: a fresh one might be a file a writer is creating.
    crate::harness::write_aged(&dir.join("counter_201.db"), b"");
    put("counter_202.db", &[8, 0, 0, 0]);
    crate::harness::write_aged(&dir.join("counter_203.db"), &[0; 64]);
    put("counter_204.db", &with(&|b| set_used(b, 4)));
    put("counter_205.db", &with(&|b| set_used(b, 1 << 20)));
    put("counter_206.db", &with(&|b| set_used(b, used + 4)));
    put(
        "counter_207.db",
        &with(&|b| b[8..12].copy_from_slice(&(-1i32).to_ne_bytes())),
    );
    put("counter_208.db", &with(&|b| set_used(b, used + 8)));
    put("counter_209.db", &with(&|b| b[14] = 0xff));
    put(
        "counter_210.db",
        &image(
            &[(GOOD_KEY, 1.0, 0.0), (b"[\"jobs\", oops", 2.0, 0.0)],
            4096,
        ),
    );
    put(
        "counter_211.db",
        &image(&[(br#"["jobs", "jobs_total", {}, 5]"#, 1.0, 0.0)], 4096),
    );
    put(
        "histogram_212.db",
        &image(
            &[(br#"["lat", "lat_bucket", {"le": "abc"}, "Lat."]"#, 1.0, 0.0)],
            4096,
        ),
    );
    put(
        "counter_213.db",
        &image(&[(br#"["", "_total", {}, "No name."]"#, 1.0, 0.0)], 4096),
    );
    put("app.db", &good);
    put("gauge_bogus_214.db", &good);
    std::fs::create_dir(dir.join("counter_215.db")).unwrap();
    let fifo = Command::new("mkfifo")
        .arg(dir.join("counter_216.db"))
        .status()
        .unwrap();
    assert!(fifo.success());
    std::os::unix::fs::symlink(dir.join("nowhere"), dir.join("counter_217.db")).unwrap();
    std::os::unix::fs::symlink(dir.join("counter_218.db"), dir.join("counter_218.db")).unwrap();
    let non_utf8 = std::ffi::OsStr::from_bytes(b"counter_\xff.db");
    std::fs::write(dir.join(non_utf8), &good).unwrap();
}

fn inspect(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = multiprom()
        .current_dir(dir)
        .arg("inspect")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Compares `actual` with the golden file (or rewrites it with MULTIPROM_BLESS=1).
fn golden(name: &str, actual: &str) {
    let path = workspace_root().join("tests/golden/inspect").join(name);
    if std::env::var_os("MULTIPROM_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (MULTIPROM_BLESS=1 writes it)", path.display()));
    assert_eq!(actual, expected, "output differs from {}", path.display());
}

#[test]
fn golden_table_json_and_check() {
    let dir = temp_dir();
    good_files(dir.path());
    bad_files(dir.path());

    let (code, table, stderr) = inspect(dir.path(), &["."]);
    assert_eq!(code, 1, "{stderr}");
    golden("table.txt", &table);

    let (code, json, stderr) = inspect(dir.path(), &["--json", "."]);
    assert_eq!(code, 1);
    golden("json.jsonl", &json);
    golden("json.stderr", &stderr);
    for line in json.lines() {
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        let keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        let mut expected = [
            "file",
            "offset",
            "family",
            "sample",
            "labels",
            "help",
            "value",
            "timestamp",
        ];
        expected.sort_unstable();
        assert_eq!(keys, expected, "{line}");
        assert!(line.starts_with("{\"file\":"), "field order: {line}");
    }

    let (code, check, stderr) = inspect(dir.path(), &["--check", "."]);
    assert_eq!(code, 1);
    assert_eq!(stderr, "");
    golden("check.txt", &check);
    // Every bad kind made above is reported, one line each, as
    // `path: offset N: reason` (the name that is not UTF-8 is not bad: it
    // merges, as in Python).
    assert_eq!(check.lines().count(), 19, "{check}");
    for line in check.lines() {
        assert!(
            line.starts_with("./") && line.contains(": offset "),
            "{line}"
        );
    }

    // Files named one by one, in the order given.
    let (code, check_one, _) =
        inspect(dir.path(), &["--check", "counter_201.db", "counter_101.db"]);
    assert_eq!(code, 1);
    assert_eq!(
        check_one,
        "counter_201.db: offset 0: 0-byte file: a writer was killed while creating it (prometheus_client issue #1199)\n"
    );
}

#[test]
fn good_files_exit_0_and_check_prints_nothing() {
    let dir = temp_dir();
    good_files(dir.path());
    let (code, check, stderr) = inspect(dir.path(), &["--check", "."]);
    assert_eq!((code, check.as_str(), stderr.as_str()), (0, "", ""));
    let (code, table, _) = inspect(dir.path(), &["counter_101.db"]);
    assert_eq!(code, 0);
    assert!(
        table.starts_with("counter_101.db: counter, pid 101, 3 entries, used 368 of 65536 bytes capacity (0.6%), file size 65536 bytes\n"),
        "{table}"
    );
    let (code, _, _) = inspect(dir.path(), &["--json", "."]);
    assert_eq!(code, 0);

    let empty = temp_dir();
    let (code, out, stderr) = inspect(empty.path(), &["."]);
    assert_eq!((code, out.as_str()), (0, ""));
    assert_eq!(stderr, "multiprom inspect: .: no *.db files\n");
    let (code, _, stderr) = inspect(dir.path(), &["missing.db"]);
    assert_eq!(code, 2);
    assert!(
        stderr.starts_with("multiprom inspect: missing.db: "),
        "{stderr}"
    );
}

#[test]
fn json_output_stops_quietly_on_a_closed_pipe() {
    let dir = temp_dir();
    let labels: Vec<String> = (0..5000).map(|i| format!("path-{i:05}")).collect();
    let mut writer = FileWriter::open(
        dir.path(),
        &FileName::new(MetricKind::Counter, "1").unwrap(),
    )
    .unwrap();
    for label in &labels {
        let key = encode_key("hits", "hits_total", [("path", label.as_str())], "Hits.");
        writer.slot(&key).unwrap().add(1.0);
    }
    let mut child = multiprom()
        .args(["inspect", "--json"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("\"path\":\"path-00000\""), "{first}");
    // The reader is dropped: the rest of ~5000 lines hit a closed pipe.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn check_is_safe_while_python_writes_and_grows_files() {
    let dir = temp_dir();
    let control = temp_dir();
    let mut writer = Command::new(python())
        .arg(python_script("inspect_writer.py"))
        .arg(control.path())
        .env("PROMETHEUS_MULTIPROC_DIR", dir.path())
        .spawn()
        .unwrap();
    let started = control.path().join("started");
    let done = control.path().join("done");
    let deadline = Instant::now() + PATIENCE;
    while !started.exists() {
        assert!(Instant::now() < deadline, "writer never started");
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut runs = 0;
    while !done.exists() && runs < 400 {
        let (code, out, stderr) = inspect(dir.path(), &["--check", "."]);
        assert_eq!(
            (code, out.as_str(), stderr.as_str()),
            (0, "", ""),
            "run {runs}"
        );
        runs += 1;
    }
    assert!(writer.wait().unwrap().success());
    assert!(runs > 0);
    let (code, json, _) = inspect(dir.path(), &["--json", "."]);
    assert_eq!(code, 0);
    assert_eq!(
        json.lines().count(),
        20_000,
        "every entry written is read back"
    );
}

#[test]
fn a_file_that_is_not_a_metrics_file_is_named_for_what_it_is() {
    let dir = temp_dir();
    // A real SQLite database, made by Python's sqlite3, under a metrics name.
    let sqlite = dir.path().join("counter_7.db");
    let script = "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('create table t(x)'); c.commit()";
    let out = Command::new(python())
        .args(["-c", script])
        .arg(&sqlite)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(dir.path().join("notes.db"), "kept for later\n").unwrap();
    let out = multiprom().arg("inspect").arg(dir.path()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "{}: counter, pid 7, not a readable metrics file: an SQLite 3 database\n",
            sqlite.display()
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("notes.db: not a metrics file name, not a readable metrics file: text\n"),
        "{stdout}"
    );
    assert!(!stdout.contains("unreadable"), "{stdout}");
}

#[test]
fn native_histogram_files_are_shown_per_series_and_checked() {
    let dir = temp_dir();
    write(
        dir.path(),
        MetricKind::Histogram,
        "101",
        &[(
            "latency",
            "latency_bucket",
            &[("le", "+Inf")],
            "Latency.",
            3.0,
        )],
    );
    let name = FileName::new(MetricKind::Histogram, "101").unwrap();
    let writer = multiprom_format::NativeHistogramWriter::open(dir.path(), &name).unwrap();
    let key = encode_key("latency", "latency", [("route", "/")], "Latency.");
    let series = writer
        .series(&key, multiprom_format::NativeHistogramConfig::default())
        .unwrap();
    for v in [0.0, 0.5, 4.0] {
        series.observe(v);
    }
    drop((series, writer));

    let (code, table, stderr) = inspect(dir.path(), &["."]);
    assert_eq!((code, stderr.as_str()), (0, ""), "{table}");
    let expected = "./native-histograms/histogram_101.native: native histograms of \
                    histogram_101.db, 1 series\n  \
                    FAMILY   LABELS     SCHEMA  COUNT  SUM  ZERO BUCKET                       BUCKETS\n  \
                    latency  route=\"/\"  3       3      4.5  1 (|x| <= 2.938735877055719e-39)  2\n";
    assert!(table.ends_with(expected), "{table}");
    let (code, check, _) = inspect(dir.path(), &["--check", "."]);
    assert_eq!((code, check.as_str()), (0, ""));
    // JSON: the `*.db` entry, then the series with its buckets by index
    // (0.5 = 2^(-8/8) and 4 = 2^(16/8) at schema 3; 0 in the zero bucket).
    let (code, json, stderr) = inspect(dir.path(), &["--json", "."]);
    assert_eq!((code, stderr.as_str()), (0, ""), "{json}");
    let lines: Vec<&str> = json.lines().collect();
    assert_eq!(lines.len(), 2, "{json}");
    assert_eq!(
        lines[1],
        r#"{"file":"./native-histograms/histogram_101.native","offset":16,"family":"latency","sample":"latency","labels":{"route":"/"},"help":"Latency.","native_histogram":{"schema":3,"zero_threshold":2.938735877055719e-39,"zero_count":1,"nan_count":0,"count":3,"sum":4.5,"positive":[[-8,1],[16,1]],"negative":[]}}"#
    );

    // A series whose key is not a `*.db` key (the collector serves none):
    // left out of the JSON, said on stderr.
    let name = FileName::new(MetricKind::Histogram, "102").unwrap();
    let writer = multiprom_format::NativeHistogramWriter::open(dir.path(), &name).unwrap();
    let series = writer
        .series(
            "not a key",
            multiprom_format::NativeHistogramConfig::default(),
        )
        .unwrap();
    series.observe(1.0);
    drop((series, writer));
    let (_, json, stderr) = inspect(
        dir.path(),
        &["--json", "native-histograms/histogram_102.native"],
    );
    assert_eq!(json, "");
    assert!(
        stderr.starts_with("native-histograms/histogram_102.native: offset 16: "),
        "{stderr}"
    );
    std::fs::remove_file(native_histogram_path(dir.path(), &name)).unwrap();

    // Damaged: reported like any damaged file, exit status 1.
    let native = dir.path().join("native-histograms/histogram_101.native");
    std::fs::write(&native, b"not a native histogram file, at all").unwrap();
    let (code, check, _) = inspect(dir.path(), &["--check", "."]);
    assert_eq!(code, 1, "{check}");
    assert_eq!(
        check,
        "./native-histograms/histogram_101.native: offset 0: not a multiprom native histogram file (magic or version differs)\n"
    );
    let (code, json, stderr) = inspect(dir.path(), &["--json", "."]);
    assert_eq!((code, json.lines().count()), (1, 1), "{json}");
    assert_eq!(
        stderr,
        "./native-histograms/histogram_101.native: offset 0: not a multiprom native histogram file (magic or version differs)\n"
    );
    let (code, table, _) = inspect(dir.path(), &["native-histograms/histogram_101.native"]);
    assert_eq!(code, 1);
    assert_eq!(
        table,
        "native-histograms/histogram_101.native: native histograms of histogram_101.db, not readable\n  \
         problem: offset 0: not a multiprom native histogram file (magic or version differs)\n"
    );
}
