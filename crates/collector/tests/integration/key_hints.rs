//! A file's entries are first compared with the keys of the last file of
//! its kind at the same offsets (every worker of an application writes the
//! same metrics in the same order), which spares looking them up. Only the
//! very same key bytes may take such a key: a key that differs in one byte,
//! a longer key that moves the entries after it, and keys in another order
//! must each count where they belong.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use multiprom_collector::{merge_files, CollectOptions, DirCollector, Format};
use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};

/// A counter's family, labels and value.
type Entry<'a> = (&'a str, &'a [(&'a str, &'a str)], f64);

fn write_counter(dir: &Path, id: &str, entries: &[Entry<'_>]) -> PathBuf {
    let name = FileName::new(MetricKind::Counter, id).unwrap();
    let mut writer = FileWriter::open(dir, &name).unwrap();
    for &(family, labels, value) in entries {
        let key = encode_key(
            family,
            &format!("{family}_total"),
            labels.iter().copied(),
            "H.",
        );
        writer.slot(&key).unwrap().set(value);
    }
    dir.join(name.to_string())
}

#[test]
fn only_the_very_same_key_bytes_take_the_last_files_key() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let files = [
        write_counter(dir, "1", &[("a", &[("l", "x")], 1.0), ("b", &[], 10.0)]),
        // Same lengths and offsets, the first key one byte apart.
        write_counter(dir, "2", &[("a", &[("l", "y")], 2.0), ("b", &[], 20.0)]),
        // A longer first key: `b` is where no entry of the last file starts.
        write_counter(dir, "3", &[("a", &[("l", "yy")], 4.0), ("b", &[], 40.0)]),
        // The keys of the first file, the other way round.
        write_counter(dir, "4", &[("b", &[], 80.0), ("a", &[("l", "x")], 8.0)]),
        // As the first file again, after one that is not.
        write_counter(dir, "5", &[("a", &[("l", "x")], 16.0), ("b", &[], 160.0)]),
    ];
    let expected = "# HELP a_total H.\n# TYPE a_total counter\n\
                    a_total{l=\"x\"} 25.0\na_total{l=\"y\"} 2.0\na_total{l=\"yy\"} 4.0\n\
                    # HELP b_total H.\n# TYPE b_total counter\nb_total 310.0\n";
    let scrape = merge_files(&files, CollectOptions::default());
    assert!(scrape.warnings.is_empty(), "{:?}", scrape.warnings);
    assert_eq!(scrape.encode(Format::Prometheus), expected);
    // The same through a collector of the directory, twice: its second
    // collection maps the files and keeps what the first parsed. It merges
    // in the order the directory lists the files, so the samples of a
    // family may come in another order.
    let collector = DirCollector::new(dir);
    for _ in 0..2 {
        let text = collector.collect().unwrap().encode(Format::Prometheus);
        assert_eq!(sorted_lines(&text), sorted_lines(expected));
    }
}

fn sorted_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    lines
}

#[test]
fn a_forgotten_key_is_not_taken_for_one_of_the_same_length() {
    let dir = tempfile::tempdir().unwrap();
    let collector = DirCollector::new(dir.path());
    let first = write_counter(dir.path(), "1", &[("a", &[("l", "x")], 1.0)]);
    assert_eq!(
        collector.collect().unwrap().encode(Format::Prometheus),
        "# HELP a_total H.\n# TYPE a_total counter\na_total{l=\"x\"} 1.0\n"
    );
    // The only file holding `l="x"` goes: its key is forgotten, and its id
    // is free for the next new key, which has the same length.
    std::fs::remove_file(first).unwrap();
    write_counter(dir.path(), "2", &[("a", &[("l", "y")], 2.0)]);
    assert_eq!(
        collector.collect().unwrap().encode(Format::Prometheus),
        "# HELP a_total H.\n# TYPE a_total counter\na_total{l=\"y\"} 2.0\n"
    );
}
