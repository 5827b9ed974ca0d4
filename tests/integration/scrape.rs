//! `multiprom scrape`: directory resolution, formats, exit codes, warnings,
//! and output plumbing. (Byte equality with Python on random directories is
//! in `collector_diff`, bad files in `bad_files`.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Output, Stdio};

use multiprom_format::{encode_key, FileName, FileWriter, GaugeMode, MetricKind};

use crate::harness::{multiprom, run_python, scrape_protobuf, scrape_protobuf_escaped, temp_dir};

const ENV: &str = "PROMETHEUS_MULTIPROC_DIR";
const LEGACY_ENV: &str = "prometheus_multiproc_dir";

fn write_counter(dir: &Path, pid: &str, family: &str, help: &str, value: f64) {
    let mut file =
        FileWriter::open(dir, &FileName::new(MetricKind::Counter, pid).unwrap()).unwrap();
    file.slot(&encode_key(family, &format!("{family}_total"), [], help))
        .unwrap()
        .add(value);
}

fn stdout(out: &Output) -> &str {
    std::str::from_utf8(&out.stdout).unwrap()
}

fn stderr(out: &Output) -> &str {
    std::str::from_utf8(&out.stderr).unwrap()
}

/// A small directory written by Python workers, printed in every format,
/// exactly as Python's collector prints it.
#[test]
fn prints_what_python_prints_in_every_format() {
    let dir = temp_dir();
    let python: serde_json::Value = serde_json::from_slice(&run_python(
        "collector_scrape_writer.py",
        &[],
        &[(ENV, dir.path())],
    ))
    .unwrap();
    let run = |args: &[&str]| {
        let out = multiprom()
            .args(["scrape", "--dir"])
            .arg(dir.path())
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert_eq!(stderr(&out), "");
        let text = String::from_utf8(out.stdout).unwrap();
        let reference = match args {
            [] => &python["prom"],
            ["--format", "openmetrics"] => &python["om"],
            _ => &python["prom_noacc"],
        };
        assert_eq!(
            Some(text.as_str()),
            reference.as_str(),
            "{args:?}: Python differs"
        );
        text
    };
    assert_eq!(
        family_blocks(&run(&[])),
        family_blocks(
            "# HELP jobs_total Jobs done.\n\
         # TYPE jobs_total counter\n\
         jobs_total{queue=\"a\\\"b\"} 3.0\n\
         # HELP busy Busy workers.\n\
         # TYPE busy gauge\n\
         busy 2.0\n\
         # HELP wait_seconds Time waited.\n\
         # TYPE wait_seconds histogram\n\
         wait_seconds_sum 2.5\n\
         wait_seconds_bucket{le=\"1.0\"} 1.0\n\
         wait_seconds_bucket{le=\"+Inf\"} 2.0\n\
         wait_seconds_count 2.0\n"
        )
    );
    assert_eq!(
        family_blocks(&run(&["--format", "openmetrics"])),
        family_blocks(
            "# HELP jobs Jobs done.\n\
         # TYPE jobs counter\n\
         jobs_total{queue=\"a\\\"b\"} 3.0\n\
         # HELP busy Busy workers.\n\
         # TYPE busy gauge\n\
         busy 2.0\n\
         # HELP wait_seconds Time waited.\n\
         # TYPE wait_seconds histogram\n\
         wait_seconds_sum 2.5\n\
         wait_seconds_bucket{le=\"1.0\"} 1.0\n\
         wait_seconds_bucket{le=\"+Inf\"} 2.0\n\
         wait_seconds_count 2.0\n\
         # EOF\n"
        )
    );
    assert_eq!(
        family_blocks(&run(&["--no-accumulate"])),
        family_blocks(
            "# HELP jobs_total Jobs done.\n\
         # TYPE jobs_total counter\n\
         jobs_total{queue=\"a\\\"b\"} 3.0\n\
         # HELP busy Busy workers.\n\
         # TYPE busy gauge\n\
         busy 2.0\n\
         # HELP wait_seconds Time waited.\n\
         # TYPE wait_seconds histogram\n\
         wait_seconds_sum 2.5\n\
         wait_seconds_bucket{le=\"1.0\"} 1.0\n\
         wait_seconds_bucket{le=\"+Inf\"} 1.0\n"
        )
    );
}

/// The family blocks of an exposition (each from its `# HELP` line), sorted,
/// with a trailing `# EOF` kept last: the literal lines these tests check,
/// independent of the merge order (the directory's listing order, which the
/// Python comparison above and the differential tests cover).
fn family_blocks(text: &str) -> Vec<String> {
    let (body, eof) = match text.strip_suffix("# EOF\n") {
        Some(body) => (body, true),
        None => (text, false),
    };
    let mut blocks: Vec<String> = Vec::new();
    for line in body.lines() {
        if line.starts_with("# HELP ") || blocks.is_empty() {
            blocks.push(String::new());
        }
        let block = blocks.last_mut().unwrap();
        block.push_str(line);
        block.push('\n');
    }
    blocks.sort();
    if eof {
        blocks.push("# EOF\n".to_owned());
    }
    blocks
}

#[test]
fn empty_directory_prints_nothing_warns_and_exits_0() {
    let dir = temp_dir();
    // Not a *.db file: the directory is still empty for a scrape.
    std::fs::write(dir.path().join("README"), b"x").unwrap();
    let warning = format!(
        "multiprom scrape: warning: {}: no *.db files, nothing to merge\n",
        dir.path().display()
    );
    for strict in [false, true] {
        let out = multiprom()
            .args(["scrape", "--dir"])
            .arg(dir.path())
            .args(strict.then_some("--strict"))
            .output()
            .unwrap();
        assert_eq!(
            (out.status.code(), stdout(&out), stderr(&out)),
            (Some(0), "", warning.as_str()),
            "strict: {strict}"
        );
    }
    let out = multiprom()
        .args(["scrape", "--format", "openmetrics", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "# EOF\n");
}

#[test]
fn directory_comes_from_flag_then_env_then_legacy_env() {
    let (flag, env, legacy) = (temp_dir(), temp_dir(), temp_dir());
    write_counter(flag.path(), "1", "from_flag", "", 1.0);
    write_counter(env.path(), "1", "from_env", "", 1.0);
    write_counter(legacy.path(), "1", "from_legacy", "", 1.0);

    let out = multiprom()
        .args(["scrape", "--dir"])
        .arg(flag.path())
        .env(ENV, env.path())
        .env(LEGACY_ENV, legacy.path())
        .output()
        .unwrap();
    assert!(stdout(&out).contains("from_flag_total 1.0"), "{out:?}");
    assert_eq!(stderr(&out), "");

    let out = multiprom()
        .arg("scrape")
        .env(ENV, env.path())
        .env(LEGACY_ENV, legacy.path())
        .output()
        .unwrap();
    assert!(stdout(&out).contains("from_env_total 1.0"), "{out:?}");
    assert_eq!(stderr(&out), "");

    let out = multiprom()
        .arg("scrape")
        .env(LEGACY_ENV, legacy.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("from_legacy_total 1.0"), "{out:?}");
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("deprecated"), "{}", stderr(&out));

    // An empty variable is no directory.
    let out = multiprom().arg("scrape").env(ENV, "").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// prometheus_client looks at the legacy name only when
/// PROMETHEUS_MULTIPROC_DIR is unset: set but empty, it names no directory,
/// and the legacy name is not consulted.
#[test]
fn an_empty_env_dir_does_not_fall_through_to_the_legacy_name() {
    let legacy = temp_dir();
    write_counter(legacy.path(), "1", "from_legacy", "", 1.0);
    let out = multiprom()
        .arg("scrape")
        .env(ENV, "")
        .env(LEGACY_ENV, legacy.path())
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(stdout(&out), "");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("no directory: PROMETHEUS_MULTIPROC_DIR is set but empty"),
        "{err}"
    );
}

#[test]
fn no_usable_directory_is_one_line_and_exit_2() {
    let dir = temp_dir();
    let file = dir.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let missing = dir.path().join("missing");
    let looped = dir.path().join("looped");
    std::os::unix::fs::symlink(&looped, &looped).unwrap();
    for (args, env, reason) in [
        (
            vec![],
            None,
            "no directory: pass --dir DIR or set PROMETHEUS_MULTIPROC_DIR",
        ),
        (
            vec!["--dir", missing.to_str().unwrap()],
            None,
            "no such directory",
        ),
        (vec![], Some(&missing), "no such directory"),
        (
            vec!["--dir", file.to_str().unwrap()],
            None,
            "not a directory",
        ),
        (
            vec!["--dir", looped.to_str().unwrap()],
            None,
            "cannot look at it: Too many levels of symbolic links",
        ),
    ] {
        let mut cmd = multiprom();
        cmd.arg("scrape").args(&args);
        if let Some(env) = env {
            cmd.env(ENV, env);
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(stdout(&out), "");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("multiprom scrape: "), "{err}");
        assert!(err.contains(reason), "{err}");
    }
}

#[test]
fn bad_arguments_exit_2() {
    let dir = temp_dir();
    write_counter(dir.path(), "1", "jobs", "Jobs.", 1.0);
    for args in [&["--format", "json"][..], &["--escaping", "utf8"]] {
        let out = multiprom()
            .arg("scrape")
            .args(args)
            .arg("--dir")
            .arg(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(stdout(&out), "", "{args:?}");
    }
}

/// `--escaping` applies to the protobuf format too, as a scraper's
/// `escaping` parameter does (Prometheus 3.0 names `allow-utf-8` on its
/// protobuf range): names as they are, or escaped, never quoted.
#[test]
fn protobuf_names_are_escaped_as_asked() {
    let dir = temp_dir();
    write_counter(dir.path(), "1", "caf\u{e9}.orders", "Orders.", 1.0);
    let protobuf = |escaping| scrape_protobuf_escaped(dir.path(), escaping);
    let has = |body: &[u8], name: &str| body.windows(name.len()).any(|w| w == name.as_bytes());
    let kept = protobuf("allow-utf-8");
    assert!(has(&kept, "caf\u{e9}.orders_total"), "{kept:?}");
    let escaped = protobuf("underscores");
    assert!(has(&escaped, "caf__orders_total"), "{escaped:?}");
    assert!(!has(&escaped, "caf\u{e9}"), "{escaped:?}");
    assert_eq!(escaped, scrape_protobuf(dir.path()));
    assert!(has(&protobuf("dots"), "caf___dot_orders__total"));
    assert!(has(&protobuf("values"), "U__caf_e9__2e_orders__total"));
}

/// A bad exemplar or native histogram file read for the output fails
/// `--strict` as a bad `*.db` file does; the samples are printed all the
/// same, without what that file held.
#[test]
fn a_bad_companion_file_fails_strict() {
    use multiprom_format::exemplar_file::exemplar_path;
    use multiprom_format::native_file::native_histogram_path;

    let dir = temp_dir();
    write_counter(dir.path(), "1", "jobs", "Jobs.", 1.0);
    let histograms = FileName::new(MetricKind::Histogram, "1").unwrap();
    let mut file = FileWriter::open(dir.path(), &histograms).unwrap();
    let key = encode_key("lat", "lat_bucket", [("le", "+Inf")], "Lat.");
    file.slot(&key).unwrap().add(1.0);
    let counters = FileName::new(MetricKind::Counter, "1").unwrap();
    for (path, args) in [
        (
            exemplar_path(dir.path(), &counters),
            &["--format", "openmetrics"][..],
        ),
        (
            native_histogram_path(dir.path(), &histograms),
            &["--format", "protobuf"],
        ),
    ] {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        crate::harness::write_aged(&path, b"garbage, not a companion file of multiprom");
        let run = |strict: bool| {
            multiprom()
                .args(["scrape", "--dir"])
                .arg(dir.path())
                .args(args)
                .args(strict.then_some("--strict"))
                .output()
                .unwrap()
        };
        let (lenient, strict) = (run(false), run(true));
        assert_eq!(lenient.status.code(), Some(0), "{args:?}: {lenient:?}");
        assert_eq!(strict.status.code(), Some(1), "{args:?}: {strict:?}");
        assert_eq!(strict.stdout, lenient.stdout, "{args:?}");
        assert!(!strict.stdout.is_empty());
        let stderr = stderr(&strict);
        assert!(
            stderr.contains("1 bad file(s) skipped (--strict)"),
            "{stderr}"
        );
        std::fs::remove_file(&path).unwrap();
    }
}

#[test]
fn conflicts_are_warnings_and_do_not_fail_strict() {
    let dir = temp_dir();
    write_counter(dir.path(), "1", "jobs", "Jobs.", 1.0);
    write_counter(dir.path(), "2", "jobs", "Other help.", 2.0);
    let mut gauge = FileWriter::open(
        dir.path(),
        &FileName::new(MetricKind::Gauge(GaugeMode::All), "3").unwrap(),
    )
    .unwrap();
    gauge
        .slot(&encode_key("jobs", "jobs", [], "Jobs."))
        .unwrap()
        .set(7.0);
    let out = multiprom()
        .args(["scrape", "--strict", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // The first file in listing order decides the type; the first counter
    // file decides the help.
    let order: Vec<String> = multiprom_collector::scan_dir(dir.path())
        .unwrap()
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_owned())
        .collect();
    let err = stderr(&out);
    if order[0] == "gauge_all_3.db" {
        assert_eq!(
            stdout(&out),
            "# HELP jobs Jobs.\n# TYPE jobs gauge\njobs{pid=\"3\"} 7.0\n"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("is a gauge in"), "{err}");
        assert!(err.contains("but a counter in"), "{err}");
    } else {
        let help = if order.iter().position(|n| n == "counter_1.db")
            < order.iter().position(|n| n == "counter_2.db")
        {
            ("Jobs.", "Other help.")
        } else {
            ("Other help.", "Jobs.")
        };
        assert_eq!(
            stdout(&out),
            format!(
                "# HELP jobs_total {}\n# TYPE jobs_total counter\njobs_total 3.0\n",
                help.0
            )
        );
        assert_eq!(err.lines().count(), 2, "{err}");
        assert!(
            err.contains(&format!("has help \"{}\" and also \"{}\"", help.0, help.1)),
            "{err}"
        );
        assert!(err.contains("is a counter in"), "{err}");
        assert!(err.contains("but a gauge in"), "{err}");
        assert!(err.contains("gauge_all_3.db"), "{err}");
    }
}

/// `multiprom scrape | head -1`: the reader goes away early; multiprom ends
/// quietly (no panic, no error message) with status 0.
#[test]
fn closed_stdout_ends_quietly() {
    let dir = temp_dir();
    let mut file = FileWriter::open(
        dir.path(),
        &FileName::new(MetricKind::Counter, "1").unwrap(),
    )
    .unwrap();
    for i in 0..20_000 {
        file.slot(&encode_key(
            "big",
            "big_total",
            [("i", i.to_string().as_str())],
            "A big family.",
        ))
        .unwrap()
        .add(1.0);
    }
    let mut child = multiprom()
        .args(["scrape", "--dir"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert_eq!(line, "# HELP big_total A big family.\n");
    drop(reader);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stderr(&out), "");
}

#[test]
fn help_is_one_line_per_option_and_states_the_exit_status() {
    let out = multiprom().args(["scrape", "--help"]).output().unwrap();
    let help = stdout(&out);
    for option in [
        "--dir <DIR>",
        "--format <FORMAT>",
        "--no-accumulate",
        "--escaping <ESCAPING>",
        "--strict",
    ] {
        let line = help
            .lines()
            .find(|l| l.trim_start().starts_with(option))
            .unwrap_or_else(|| panic!("no {option} in:\n{help}"));
        assert!(
            line.len() > option.len() + 10,
            "{option}'s help is not on its line:\n{help}"
        );
    }
    assert!(!help.contains("\n\n      --"), "sparse layout:\n{help}");
    assert!(help.contains("Exit status: 0 when printed"), "{help}");
}

#[test]
fn scrape_as_protobuf_carries_the_native_histograms() {
    use multiprom_collector::exposition::encode_protobuf;
    use multiprom_collector::{DirCollector, Escaping, Exemplars, Natives, ServedView};
    use multiprom_format::{NativeHistogramConfig, NativeHistogramWriter};

    let dir = temp_dir();
    let help = "Latency.";
    let key = |sample: &str, le: &[(&str, &str)]| {
        encode_key("latency_seconds", sample, le.iter().copied(), help)
    };
    for (pid, values) in [("1", [0.1, 0.2, 0.4]), ("2", [0.3, 3.0, 30.0])] {
        let name = FileName::new(MetricKind::Histogram, pid).unwrap();
        let mut file = FileWriter::open(dir.path(), &name).unwrap();
        let natives = NativeHistogramWriter::open(dir.path(), &name).unwrap();
        let native = natives
            .series(
                &key("latency_seconds", &[]),
                NativeHistogramConfig::default(),
            )
            .unwrap();
        for value in values {
            file.slot(&key("latency_seconds_sum", &[]))
                .unwrap()
                .add(value);
            file.slot(&key("latency_seconds_bucket", &[("le", "+Inf")]))
                .unwrap()
                .add(1.0);
            native.observe(value);
        }
    }
    let scraped = scrape_protobuf(dir.path());
    let encoded = |natives| {
        let view = ServedView::new(DirCollector::new(dir.path()));
        let scrape = view.collect(None, natives, Exemplars::Attach).unwrap();
        let started = view.start_times(&scrape, true);
        let mut out = Vec::new();
        let (families, natives) = (&scrape.families, &scrape.natives);
        encode_protobuf(
            families,
            natives,
            Some(&started),
            Escaping::Underscores,
            &mut out,
        );
        out
    };
    // What the library serves a protobuf scrape, native histograms and all,
    // each series with its start (the directory's, kept in its file).
    let with = encoded(Natives::Merge);
    assert_eq!(scraped, with);
    assert_ne!(with, encoded(Natives::Skip), "no native histogram encoded");
}

/// A label value prometheus_client's writer stored with a lone surrogate
/// (a request path decoded with 'surrogateescape': `json.dumps` writes
/// `\udce9`) is no character: prometheus_client's own exposition fails
/// on it, every sample of the scrape with it. multiprom serves it as
/// U+FFFD, and every other entry of the file as always.
#[test]
fn a_lone_surrogate_is_served_as_a_replacement_character() {
    let dir = temp_dir();
    let image = multiprom_format::layout::file_image(
        [
            (
                br#"["c", "c_total", {"path": "/caf\udce9"}, "Requests."]"#.as_slice(),
                1.0,
                0.0,
            ),
            (
                br#"["c", "c_total", {"path": "/ok"}, "Requests."]"#.as_slice(),
                2.0,
                0.0,
            ),
        ],
        65536,
    );
    std::fs::write(dir.path().join("counter_1.db"), image).unwrap();
    let out = multiprom()
        .args(["scrape", "--strict", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        stdout(&out),
        "# HELP c_total Requests.\n# TYPE c_total counter\n\
         c_total{path=\"/caf\u{fffd}\"} 1.0\nc_total{path=\"/ok\"} 2.0\n"
    );
    assert_eq!(stderr(&out), "");
}
