//! A key may be as long as the format allows (1 MiB, as the readers of
//! `multiprom-format` take it): a label value of a few thousand characters
//! (a request path) makes a key longer than a page, longer than a first
//! read. Every way the collector reads a file (read on a first collection,
//! mapped on later ones, read every time when mapping is off, and merged
//! from a list of files) serves every entry of such a file; a key over the
//! limit is a bad file, reported.

#![allow(clippy::unwrap_used)]

use multiprom_collector::{merge_files, CollectOptions, DirCollector, Scrape};
use multiprom_format::layout::MAX_KEY_LEN;
use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};

/// A counter file whose first entry's key is about `key_len` bytes long,
/// then a short entry.
fn file_with_a_long_key(key_len: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let name = FileName::new(MetricKind::Counter, "1").unwrap();
    let mut writer = FileWriter::open(dir.path(), &name).unwrap();
    let path = "p".repeat(key_len.saturating_sub(40));
    let long = encode_key("c", "c_total", [("path", path.as_str())], "C.");
    writer.slot(&long).unwrap().set(2.0);
    writer
        .slot(&encode_key("d", "d_total", [], "D."))
        .unwrap()
        .set(3.0);
    dir
}

/// The values served, in order, and the number of bad files.
fn served(scrape: &Scrape) -> (Vec<f64>, usize) {
    let values = scrape
        .families
        .iter()
        .flat_map(|family| family.samples.iter().map(|sample| sample.value))
        .collect();
    (values, scrape.stats.files_bad)
}

#[test]
fn every_entry_of_a_file_with_a_long_key_is_served() {
    for key_len in [4_000, 4_200, 70_000, 300_000, MAX_KEY_LEN - 100] {
        let dir = file_with_a_long_key(key_len);
        let good = (vec![2.0, 3.0], 0);
        for map in [true, false] {
            let collector = DirCollector::new(dir.path()).map_files(map);
            for round in 0..3 {
                let scrape = collector.collect().unwrap();
                assert_eq!(served(&scrape), good, "{key_len} map={map} round {round}");
            }
        }
        let path = dir.path().join("counter_1.db");
        let merged = merge_files([&path], CollectOptions::default());
        assert_eq!(served(&merged), good, "{key_len} merge_files");
    }
}

#[test]
fn a_key_over_the_limit_is_a_bad_file() {
    let dir = file_with_a_long_key(MAX_KEY_LEN + 100);
    for map in [true, false] {
        let collector = DirCollector::new(dir.path()).map_files(map);
        for round in 0..2 {
            let scrape = collector.collect().unwrap();
            assert_eq!(served(&scrape), (vec![], 1), "map={map} round {round}");
        }
    }
}
