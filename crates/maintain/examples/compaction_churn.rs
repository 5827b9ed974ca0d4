//! The compaction benchmark (docs/benchmarks.md, "Compaction under worker
//! churn"): 100,000 worker lifetimes through one directory, with and without
//! compaction, and what a scrape costs along the way.
//!
//! Usage: compaction_churn WORK_DIR PYTHON [LIFETIMES] [BATCH]
//!
//! Each simulated worker writes a counter file (10 series) and a histogram
//! file (2 series of 3 buckets) in Python's format, then "exits": its id is
//! a pid above the kernel's `pid_max`, which no process can have. Batches of
//! BATCH workers (default 1,000) go into two directories, `compacted/`
//! (folded by a `Maintainer` after every batch, as `serve --compact` does)
//! and `python/` (hard links to the same files, never folded, as with
//! `prometheus_client` alone). At checkpoints it prints the file counts and
//! the time of one scrape: multiprom's `DirCollector` (kept between scrapes,
//! as `serve` keeps it; the scrape after the batch's compaction pass, then
//! the next one, nothing changed) and Python's `MultiProcessCollector` +
//! `generate_latest` (PYTHON runs tests/python/bench_collect.py). WORK_DIR
//! is emptied first and removed at the end.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use multiprom_collector::{DirCollector, Format};
use multiprom_format::{encode_key, layout, FileName, MetricKind};
use multiprom_maintain::{CompactConfig, MaintainConfig, Maintainer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(work), Some(python)) = (args.get(1), args.get(2)) else {
        return Err("usage: compaction_churn WORK_DIR PYTHON [LIFETIMES] [BATCH]".into());
    };
    let lifetimes: usize = args.get(3).map_or(Ok(100_000), |s| s.parse())?;
    let batch: usize = args.get(4).map_or(Ok(1_000), |s| s.parse())?;
    let work = PathBuf::from(work);
    let _ = std::fs::remove_dir_all(&work);
    let compacted = work.join("compacted");
    let plain = work.join("python");
    std::fs::create_dir_all(&compacted)?;
    std::fs::create_dir_all(&plain)?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/python/bench_collect.py");

    let pid_max: usize = std::fs::read_to_string("/proc/sys/kernel/pid_max")?
        .trim()
        .parse()?;
    let counter = counter_image();
    let histogram = histogram_image();
    let collector = DirCollector::new(&compacted);
    // The simulated workers are known gone: no need to see them first.
    let compact = CompactConfig::default().with_writers_visible();
    let maintainer = Maintainer::new(&compacted, MaintainConfig::new().compact(compact));
    maintainer.recover(&collector);
    let mut checkpoints: Vec<usize> = [1_000, 10_000, 50_000, 100_000]
        .into_iter()
        .filter(|&c| c <= lifetimes)
        .collect();
    if checkpoints.last() != Some(&lifetimes) {
        checkpoints.push(lifetimes);
    }

    println!(
        "| lifetimes | files, compacting | pass | multiprom scrape | multiprom next scrape | Python scrape | files, Python alone | multiprom scrape | Python scrape |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut done = 0;
    while done < lifetimes {
        let n = batch.min(lifetimes - done);
        for i in done..done + n {
            let id = (pid_max + 1 + i).to_string();
            for (kind, image) in [
                (MetricKind::Counter, &counter),
                (MetricKind::Histogram, &histogram),
            ] {
                let name = FileName::new(kind, id.as_str())?.to_string();
                std::fs::write(compacted.join(&name), image)?;
                std::fs::hard_link(compacted.join(&name), plain.join(&name))?;
            }
        }
        done += n;
        let pass = maintainer
            .compact_now(&collector)
            .ok_or("compaction could not be set up")??;
        let pass_time = pass.duration;
        // Scrape after every batch, as Prometheus would between them: the
        // first scrape after a pass, which reads what the pass changed.
        let start = Instant::now();
        let scrape = collector.collect()?;
        let text = scrape.encode(Format::Prometheus);
        let ours = start.elapsed();
        if checkpoints.contains(&done) {
            // The steady state: the next scrape, nothing changed since.
            let next = timed(|| collector.collect().map(|s| s.encode(Format::Prometheus)))?;
            let theirs = python_scrape(python, &script, &compacted)?;
            let cold = DirCollector::new(&plain).map_files(false);
            let plain_ours = timed(|| cold.collect().map(|s| s.encode(Format::Prometheus)))?;
            let plain_theirs = python_scrape(python, &script, &plain)?;
            println!(
                "| {done} | {} | {} | {} | {} | {} | {} | {} | {} |",
                count(&compacted)?,
                ms(pass_time),
                ms(ours),
                ms_fine(next),
                ms(theirs),
                count(&plain)?,
                ms(plain_ours),
                ms(plain_theirs)
            );
            // Both directories must say the same.
            let a = total(&text);
            let b = total(&cold.collect()?.encode(Format::Prometheus));
            if a != b || a != Some(done as f64) {
                return Err(format!(
                    "totals differ: {a:?} compacted, {b:?} plain, {done} expected"
                )
                .into());
            }
        }
    }
    std::fs::remove_dir_all(&work)?;
    Ok(())
}

fn counter_image() -> Vec<u8> {
    let keys: Vec<String> = "abcdefghij"
        .chars()
        .map(|r| {
            encode_key(
                "requests",
                "requests_total",
                [("route", r.to_string().as_str())],
                "Requests.",
            )
        })
        .collect();
    layout::file_image(keys.iter().map(|k| (k.as_bytes(), 1.0, 0.0)), 0)
}

fn histogram_image() -> Vec<u8> {
    let mut keys = Vec::new();
    for route in ["a", "b"] {
        for le in ["0.1", "1.0", "+Inf"] {
            keys.push(encode_key(
                "latency_seconds",
                "latency_seconds_bucket",
                [("le", le), ("route", route)],
                "Latency.",
            ));
        }
        keys.push(encode_key(
            "latency_seconds",
            "latency_seconds_sum",
            [("route", route)],
            "Latency.",
        ));
        keys.push(encode_key(
            "latency_seconds",
            "latency_seconds_count",
            [("route", route)],
            "Latency.",
        ));
    }
    layout::file_image(keys.iter().map(|k| (k.as_bytes(), 1.0, 0.0)), 0)
}

/// `requests_total{route="a"}`.
fn total(text: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix("requests_total{route=\"a\"} "))
        .and_then(|v| v.parse().ok())
}

fn timed<T, E>(f: impl FnOnce() -> Result<T, E>) -> Result<Duration, E> {
    let start = Instant::now();
    f()?;
    Ok(start.elapsed())
}

fn python_scrape(
    python: &str,
    script: &Path,
    dir: &Path,
) -> Result<Duration, Box<dyn std::error::Error>> {
    let out = Command::new(python)
        .arg(script)
        .arg(dir)
        .args(["--repeat", "1"])
        .output()?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned().into());
    }
    let text = String::from_utf8(out.stdout)?;
    let seconds: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("scrape "))
        .and_then(|l| l.split_whitespace().next())
        .ok_or("no scrape line from bench_collect.py")?
        .parse()?;
    Ok(Duration::from_secs_f64(seconds))
}

fn count(dir: &Path) -> std::io::Result<usize> {
    Ok(multiprom_format::scan_dir(dir)?.len())
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// For times of tens of microseconds.
fn ms_fine(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}
