//! Randomized differential test: multiprom's merge and exposition against the
//! real `prometheus_client`, byte for byte.
//!
//! `tests/python/collector_diff.py` builds one random scenario per seed (every
//! type, all ten gauge modes, hostile names/labels/help, special values, help
//! and gauge-mode conflicts, pid reuse, forks, `mark_process_dead`, and for
//! about one seed in five a crowd of 20 to 80 workers running the same code),
//! runs it in real forked processes, and writes Python's reference outputs:
//! `generate_latest` and OpenMetrics `generate_latest` of
//! `MultiProcessCollector.merge(glob(DIR/*.db), accumulate=True/False)`: with
//! `accumulate=True`, exactly what `MultiProcessCollector(path=DIR)` serves.
//! multiprom reads each directory in-process with `DirCollector` (and, for a
//! few seeds, with the real `multiprom scrape` binary) and must print exactly
//! the same bytes.
//!
//! Seeds: a fixed block (`0..FIXED_SEEDS`) plus a block starting at a seed
//! derived from the clock, so CI explores new scenarios on every run. Every
//! failure names its seed. Replay one with
//!
//! ```sh
//! MULTIPROM_DIFF_SEED=N cargo test --test integration collector_diff -- --nocapture
//! ```
//!
//! which also keeps the generated directory and prints its path.
//! `MULTIPROM_DIFF_SEEDS=COUNT` and `MULTIPROM_DIFF_FIRST=N` run another block.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use multiprom_collector::{CollectOptions, DirCollector, Escaping, Format, Warning};

use crate::harness::{multiprom, run_python, temp_dir};

/// Seeds `0..FIXED_SEEDS` run on every CI run.
const FIXED_SEEDS: u64 = 120;
/// Seeds from a clock-derived start, different on every run.
const RANDOM_SEEDS: u64 = 120;
/// Seeds also checked through the real `multiprom scrape` binary.
const BINARY_SEEDS: usize = 4;
/// A collector's first collection of this many files or more reads them on
/// other threads, ahead of the parsing (`PREFETCH_MIN_FILES` in the
/// collector); the scenarios' crowds of alike workers make such directories.
const READ_AHEAD_FILES: usize = 64;
/// Fixed seeds whose directory has that many files, at least (15 today).
const CROWDED_FIXED_SEEDS: usize = 10;

/// The four reference outputs per seed, and how multiprom makes each.
const OUTPUTS: [(&str, Format, bool); 4] = [
    ("prom.txt", Format::Prometheus, true),
    ("om.txt", Format::OpenMetrics, true),
    ("prom_noacc.txt", Format::Prometheus, false),
    ("om_noacc.txt", Format::OpenMetrics, false),
];

/// The other escaping schemes a scraper may ask for (Prometheus 3:
/// `allow-utf-8`): reference outputs `prom_<scheme>.txt` and
/// `om_<scheme>.txt`, accumulated.
const ESCAPINGS: [Escaping; 3] = [Escaping::AllowUtf8, Escaping::Dots, Escaping::Values];

/// Every reference output of a seed, with how multiprom makes it:
/// (file, format, accumulate, escaping).
fn outputs() -> impl Iterator<Item = (String, Format, bool, Escaping)> {
    let escaped = ESCAPINGS.iter().flat_map(|&escaping| {
        [
            (
                format!("prom_{}.txt", escaping.as_str()),
                Format::Prometheus,
            ),
            (format!("om_{}.txt", escaping.as_str()), Format::OpenMetrics),
        ]
        .map(|(file, format)| (file, format, true, escaping))
    });
    OUTPUTS
        .iter()
        .map(|&(file, format, accumulate)| {
            (file.to_owned(), format, accumulate, Escaping::Underscores)
        })
        .chain(escaped)
}

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value:?} is not a number")),
    )
}

/// Splits an exposition into families: each chunk starts at a `# HELP` line.
fn families(text: &str) -> Vec<&str> {
    let mut starts: Vec<usize> = text
        .match_indices("# HELP ")
        .filter(|(i, _)| *i == 0 || text.as_bytes()[i - 1] == b'\n')
        .map(|(i, _)| i)
        .collect();
    if starts.first() != Some(&0) {
        starts.insert(0, 0);
    }
    starts.push(text.len());
    starts.windows(2).map(|w| &text[w[0]..w[1]]).collect()
}

/// `None` if equal, else a report naming the first differing family.
fn first_difference(expected: &str, actual: &str) -> Option<String> {
    if expected == actual {
        return None;
    }
    let (want, got) = (families(expected), families(actual));
    for i in 0..want.len().max(got.len()) {
        let (w, g) = (want.get(i), got.get(i));
        if w != g {
            return Some(format!(
                "first differing family is #{i} of {} (Python) / {} (multiprom)\n\
                 --- Python:\n{}\n--- multiprom:\n{}",
                want.len(),
                got.len(),
                w.map_or("<none>".to_string(), |s| format!("{s:?}")),
                g.map_or("<none>".to_string(), |s| format!("{s:?}")),
            ));
        }
    }
    Some("outputs differ but every family is equal (?)".to_string())
}

/// Checks one seed in-process; returns a failure report.
fn check_seed(base: &Path, seed: u64) -> Result<(), String> {
    let dir = base.join(format!("seed-{seed}"));
    let reference = base.join(format!("seed-{seed}.ref"));
    for accumulate in [true, false] {
        let collector =
            DirCollector::with_options(&dir, CollectOptions::default().accumulate(accumulate));
        // Twice: the second collect runs on the warm parse cache.
        for round in ["cold", "warm"] {
            let scrape = collector
                .collect()
                .map_err(|e| format!("seed {seed}: {e}"))?;
            for warning in &scrape.warnings {
                match warning {
                    Warning::File(problem) => {
                        return Err(format!("seed {seed}: unexpected bad file: {problem}"))
                    }
                    Warning::Conflict(c @ multiprom_collector::Conflict::Type { .. }) => {
                        return Err(format!("seed {seed}: unexpected type conflict: {c}"))
                    }
                    Warning::Conflict(_) => {}
                    other => return Err(format!("seed {seed}: unexpected warning: {other}")),
                }
            }
            let outputs = outputs().filter(|(_, _, acc, _)| *acc == accumulate);
            for (file, format, _, escaping) in outputs {
                let want = std::fs::read(reference.join(&file)).expect("reference output");
                let want = String::from_utf8(want).expect("Python output is UTF-8");
                let mut got = String::new();
                format.encode_all(&[&scrape.families], escaping, &mut got);
                if let Some(report) = first_difference(&want, &got) {
                    return Err(format!(
                        "seed {seed}: {file} ({round} cache) differs from Python: {report}\n\
                         scenario: {}",
                        reference.join("scenario.json").display()
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Checks one seed through the real binary.
fn check_seed_binary(base: &Path, seed: u64) -> Result<(), String> {
    let dir = base.join(format!("seed-{seed}"));
    let reference = base.join(format!("seed-{seed}.ref"));
    for (file, format, accumulate, escaping) in outputs() {
        let mut cmd = multiprom();
        cmd.arg("scrape").arg("--dir").arg(&dir);
        if format == Format::OpenMetrics {
            cmd.args(["--format", "openmetrics"]);
        }
        if !accumulate {
            cmd.arg("--no-accumulate");
        }
        if escaping != Escaping::Underscores {
            cmd.args(["--escaping", escaping.as_str()]);
        }
        let out = cmd.output().expect("run multiprom scrape");
        if !out.status.success() {
            return Err(format!(
                "seed {seed}: multiprom scrape failed: {}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let want = std::fs::read(reference.join(&file)).expect("reference output");
        if out.stdout != want {
            let report = first_difference(
                &String::from_utf8_lossy(&want),
                &String::from_utf8_lossy(&out.stdout),
            )
            .unwrap_or_default();
            return Err(format!(
                "seed {seed}: `multiprom scrape` {file} differs from Python: {report}"
            ));
        }
    }
    Ok(())
}

/// Generates `seeds` with Python (one process for all of them) and checks them.
fn run_block(base: &Path, first: u64, count: u64, binary_seeds: usize) -> Vec<String> {
    run_python(
        "collector_diff.py",
        &[
            base.to_str().expect("UTF-8 temp path"),
            &first.to_string(),
            &count.to_string(),
        ],
        &[],
    );
    let mut failures = Vec::new();
    for (i, seed) in (first..first + count).enumerate() {
        if let Err(report) = check_seed(base, seed) {
            failures.push(report);
        } else if i < binary_seeds {
            if let Err(report) = check_seed_binary(base, seed) {
                failures.push(report);
            }
        }
    }
    failures
}

/// Where the seed directories go: the fixed block on tmpfs (`/dev/shm`, as
/// most deployments keep the directory), the clock-derived block on a disk
/// file system (under `target/`). Directory listing order differs between
/// them (tmpfs: creation order; ext4: name-hash order), and Python merges in
/// that order, so both must match.
fn seed_bases() -> [tempfile::TempDir; 2] {
    let shm = tempfile::Builder::new()
        .prefix("multiprom-diff-")
        .tempdir_in("/dev/shm")
        .expect("a directory on /dev/shm (tmpfs)");
    let disk_root = crate::harness::target_dir().join("tmp");
    std::fs::create_dir_all(&disk_root).unwrap();
    let disk = tempfile::Builder::new()
        .prefix("multiprom-diff-")
        .tempdir_in(&disk_root)
        .unwrap();
    assert!(is_tmpfs(shm.path()), "/dev/shm is not tmpfs");
    assert!(
        !is_tmpfs(disk.path()),
        "{} is on tmpfs; the test needs a disk file system there",
        disk.path().display()
    );
    [shm, disk]
}

fn is_tmpfs(path: &Path) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    rustix::fs::statfs(path).unwrap().f_type as i64 == TMPFS_MAGIC
}

#[test]
fn merge_and_exposition_equal_python_on_random_directories() {
    let base = temp_dir();
    if let Some(seed) = env_u64("MULTIPROM_DIFF_SEED") {
        let failures = run_block(base.path(), seed, 1, 1);
        let kept = base.keep();
        eprintln!(
            "seed {seed}: directory kept at {}",
            kept.join(format!("seed-{seed}")).display()
        );
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
        return;
    }
    let blocks: Vec<(u64, u64)> = match env_u64("MULTIPROM_DIFF_SEEDS") {
        Some(count) => vec![(env_u64("MULTIPROM_DIFF_FIRST").unwrap_or(0), count)],
        None => {
            // Far from the fixed block, different on every run.
            let clock = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock after 1970")
                .as_secs();
            let first = 1_000_000 + (clock % 1_000_000_000) * RANDOM_SEEDS;
            eprintln!(
                "collector_diff: fixed seeds 0..{FIXED_SEEDS}, random seeds {first}..{}",
                first + RANDOM_SEEDS
            );
            vec![(0, FIXED_SEEDS), (first, RANDOM_SEEDS)]
        }
    };
    let bases = seed_bases();
    let mut failures = Vec::new();
    let mut seeds = 0;
    for (i, &(first, count)) in blocks.iter().enumerate() {
        seeds += count;
        failures.extend(run_block(
            bases[i % 2].path(),
            first,
            count,
            if i == 0 { BINARY_SEEDS } else { 0 },
        ));
    }
    // The fixed block covers the cold collection of many alike files (read
    // ahead, keys compared file to file) against Python, not by chance.
    if blocks.first() == Some(&(0, FIXED_SEEDS)) {
        let crowded = (0..FIXED_SEEDS)
            .filter(|seed| {
                let dir = bases[0].path().join(format!("seed-{seed}"));
                std::fs::read_dir(dir).unwrap().count() >= READ_AHEAD_FILES
            })
            .count();
        assert!(
            crowded >= CROWDED_FIXED_SEEDS,
            "only {crowded} fixed seeds have {READ_AHEAD_FILES} files or more"
        );
    }
    if !failures.is_empty() {
        let seeds_failed: Vec<&str> = failures
            .iter()
            .filter_map(|f| f.split(':').next())
            .collect();
        panic!(
            "{} of {seeds} seeds differ from Python ({}); replay one with \
             MULTIPROM_DIFF_SEED=N cargo test --test integration collector_diff -- --nocapture\n\n{}",
            failures.len(),
            seeds_failed.join(", "),
            failures.join("\n\n")
        );
    }
}

#[test]
fn family_splitter_finds_the_first_difference() {
    let a = "# HELP a x\n# TYPE a gauge\na 1.0\n# HELP b y\n# TYPE b gauge\nb 2.0\n";
    let b = "# HELP a x\n# TYPE a gauge\na 1.0\n# HELP b y\n# TYPE b gauge\nb 3.0\n";
    assert_eq!(families(a).len(), 2);
    assert_eq!(first_difference(a, a), None);
    let report = first_difference(a, b).unwrap();
    assert!(report.contains("#1 of 2"), "{report}");
    assert!(report.contains("b 3.0"), "{report}");
}

/// Keys no Python writer makes but any writer could: `le` spelled every way
/// `float()` accepts, unsorted and duplicate JSON labels, raw UTF-8, a user
/// `pid` label, sample names with OpenMetrics-only suffixes or none at all.
/// Written by multiprom's writer, merged by Python (sorted files) and by
/// multiprom: equal bytes.
#[test]
fn hand_written_keys_merge_like_python() {
    use multiprom_format::{FileName, FileWriter, GaugeMode, MetricKind};

    let dir = temp_dir();
    let write = |kind: MetricKind, id: &str, entries: &[(&str, f64)]| {
        let mut file = FileWriter::open(dir.path(), &FileName::new(kind, id).unwrap()).unwrap();
        for (key, value) in entries {
            file.slot(key).unwrap().add(*value);
        }
    };
    let bucket = |le: &str| format!(r#"["h", "h_bucket", {{"le": "{le}", "x": "1"}}, "H."]"#);
    let buckets_a: Vec<String> = [
        "1",
        "1.0",
        " 2 ",
        "1_0",
        "-0.0",
        "0",
        "1e3",
        "+Inf",
        "infinity",
        ".5",
        "5.",
        "\u{a0}3",
        "\u{2003}3",
        "1E3",
    ]
    .iter()
    .map(|le| bucket(le))
    .collect();
    let buckets_b: Vec<String> = ["1.00", "0.0", "-inf", "inf", "2", "10.0", "+1e3"]
        .iter()
        .map(|le| bucket(le))
        .collect();
    let mut histogram_a: Vec<(&str, f64)> = vec![(r#"["h", "h_sum", {"x": "1"}, "H."]"#, 2.5)];
    histogram_a.extend(
        buckets_a
            .iter()
            .enumerate()
            .map(|(i, k)| (k.as_str(), i as f64 + 1.0)),
    );
    write(MetricKind::Histogram, "1", &histogram_a);
    let mut histogram_b: Vec<(&str, f64)> =
        vec![(r#"["h", "h_sum", {"x": "1"}, "Other help."]"#, 1.0)];
    histogram_b.extend(buckets_b.iter().map(|k| (k.as_str(), 100.0)));
    // A label set with buckets only, and a histogram entry without `le` that is not `_sum`.
    histogram_b.push((r#"["h", "h_bucket", {"le": "1", "x": "2"}, "H."]"#, 1.0));
    histogram_b.push((r#"["h", "h_count", {"x": "1"}, "H."]"#, 99.0));
    write(MetricKind::Histogram, "2", &histogram_b);
    write(
        MetricKind::Counter,
        "1",
        &[
            (r#"["c", "c_total", {"b": "1", "a": "2"}, "C."]"#, 1.0),
            (r#"["c", "c_total", {"a": "2", "b": "1"}, "C."]"#, 2.0),
            (r#"["c", "c_total", {"a": "1", "a": "3"}, "C."]"#, 4.0),
            (r#"["c", "c_created", {}, "C."]"#, 1.7e9),
            (r#"["c", "c_gsum", {}, "C."]"#, 1.0),
            (r#"["c", "c_gcount", {}, "C."]"#, 2.0),
            (r#"["c", "", {"é": "ü\u2028"}, "C."]"#, 3.0),
            (
                "[\"c\", \"c_total\", {\"raw\": \"r\u{e9}sum\u{e9} \u{1F600}\"}, \"C.\"]",
                5.0,
            ),
            (r#"["c", "other:name_total", {"le": "x"}, "C."]"#, 6.0),
            (r#"["s", "s_count", {"quantile": "0.5"}, "S."]"#, 7.0),
        ],
    );
    for (mode, id) in [(GaugeMode::All, "7"), (GaugeMode::LiveAll, "8")] {
        write(
            MetricKind::Gauge(mode),
            id,
            &[
                (r#"["g", "g", {"pid": "user", "a": "1"}, "G."]"#, 1.0),
                (r#"["g", "g", {"pid": "other", "a": "1"}, "G."]"#, 2.0),
                (r#"["g", "g_extra", {}, "G."]"#, 3.0),
            ],
        );
    }
    write(
        MetricKind::Gauge(GaugeMode::Max),
        "9",
        &[
            (r#"["m", "m", {"pid": "user"}, "M."]"#, f64::NAN),
            (r#"["m", "m", {}, "M."]"#, 1.0),
        ],
    );

    let python: serde_json::Value = serde_json::from_slice(&run_python(
        "collector_diff.py",
        &["--reference", dir.path().to_str().unwrap()],
        &[],
    ))
    .unwrap();
    for (file, format, accumulate) in OUTPUTS {
        let scrape = DirCollector::with_options(
            dir.path(),
            CollectOptions::default().accumulate(accumulate),
        )
        .collect()
        .unwrap();
        assert_eq!(scrape.problems().count(), 0, "{:?}", scrape.warnings);
        let want = python[file].as_str().unwrap();
        let got = scrape.encode(format);
        if std::env::var_os("MULTIPROM_DIFF_SHOW").is_some() {
            eprintln!("{file}:\n{got}");
        }
        if let Some(report) = first_difference(want, &got) {
            panic!("{file}: hand-written keys merge differently from Python: {report}");
        }
    }
}
