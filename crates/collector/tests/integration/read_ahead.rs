//! A cold collection of many files reads them on a second thread, ahead of
//! the parsing, in batches, each file's first read sized from the last file
//! of its kind. Whatever the sizes (smaller than that guess, larger, larger
//! than what a read ahead takes at most) and whatever goes wrong with some
//! files, the result is the one reading each file alone gives.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;

use multiprom_collector::{DirCollector, FileState};
use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};

/// Entries of counter file `i`: sizes from one entry to far past a page,
/// and every fourth file past the most a read ahead takes of one file
/// (64 KiB), in an order that makes the guess from the last file wrong
/// both ways.
fn entries_of(i: u32) -> u32 {
    match i % 4 {
        0 => 1,
        1 => 120,
        2 => 6_000,
        _ => 12,
    }
}

fn write_counter(dir: &Path, i: u32) {
    let name = FileName::new(MetricKind::Counter, i.to_string()).unwrap();
    let mut writer = FileWriter::open(dir, &name).unwrap();
    for j in 0..entries_of(i) {
        let key = encode_key("c", "c_total", [("n", j.to_string().as_str())], "C.");
        writer.slot(&key).unwrap().set(f64::from(i));
    }
}

#[test]
fn a_cold_collection_reads_ahead_whatever_the_file_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let files = 160;
    let mut expected: BTreeMap<String, f64> = BTreeMap::new();
    for i in 0..files {
        write_counter(dir.path(), i);
        for j in 0..entries_of(i) {
            *expected.entry(j.to_string()).or_default() += f64::from(i);
        }
    }
    // Damaged among them: a header claiming more than the file holds, and
    // a directory with a metrics file's name.
    let damaged = dir.path().join("counter_damaged.db");
    let mut bytes = vec![0u8; 4096];
    bytes[..4].copy_from_slice(&8192u32.to_le_bytes());
    std::fs::write(&damaged, &bytes).unwrap();
    std::fs::create_dir(dir.path().join("counter_dir.db")).unwrap();

    let scrape = DirCollector::new(dir.path()).collect().unwrap();
    assert_eq!(scrape.stats.files_ok, files as usize);
    assert_eq!(scrape.stats.files_bad, 2);
    let got: BTreeMap<String, f64> = scrape.families[0]
        .samples
        .iter()
        .filter(|s| s.name.ends_with("_total"))
        .map(|s| (s.labels[0].1.to_string(), s.value))
        .collect();
    // Named, not printed whole: thousands of series.
    let wrong: Vec<_> = expected
        .iter()
        .filter(|&(n, v)| got.get(n) != Some(v))
        .take(5)
        .map(|(n, v)| format!("n={n}: expected {v}, got {:?}", got.get(n)))
        .collect();
    assert!(wrong.is_empty(), "series differ: {wrong:?}");
    assert_eq!(got.len(), expected.len());

    // Each bad file is reported as it is when collected alone (one file:
    // no reading ahead).
    for bad in ["counter_damaged.db", "counter_dir.db"] {
        let alone = tempfile::tempdir().unwrap();
        let from = dir.path().join(bad);
        let to = alone.path().join(bad);
        if from.is_dir() {
            std::fs::create_dir(&to).unwrap();
        } else {
            std::fs::copy(&from, &to).unwrap();
        }
        let alone_scrape = DirCollector::new(alone.path()).collect().unwrap();
        let report = |scrape: &multiprom_collector::Scrape| {
            let file = scrape
                .files
                .iter()
                .find(|f| f.path.file_name() == Some(bad.as_ref()))
                .unwrap();
            assert_eq!(file.state(), FileState::Bad, "{bad}");
            let problem = file.problem.as_ref().unwrap();
            (problem.offset, problem.kind.to_string())
        };
        assert_eq!(report(&scrape), report(&alone_scrape), "{bad}");
    }
}
