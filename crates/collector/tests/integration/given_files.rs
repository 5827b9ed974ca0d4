//! `merge_files` merges the files in the order given, as Python's
//! `MultiProcessCollector.merge(files)` does: a file named twice is read and
//! merged twice, however its path is spelt (Python goes by the list it is
//! given, not by what the names point to).

#![allow(clippy::unwrap_used)]

use multiprom_collector::{merge_files, CollectOptions, Format};
use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};

#[test]
fn a_file_named_twice_is_merged_twice_however_spelt() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let name = FileName::new(MetricKind::Counter, "1").unwrap();
    let mut writer = FileWriter::open(dir, &name).unwrap();
    let key = encode_key("jobs", "jobs_total", [], "Jobs.");
    writer.slot(&key).unwrap().set(5.0);
    let name = name.to_string();
    let plain = dir.join(&name);
    let doubled_slash = format!("{}//{name}", dir.display());
    let with_dot = dir.join(".").join(&name);

    let once = merge_files([&plain], CollectOptions::default());
    assert_eq!(
        once.encode(Format::Prometheus),
        "# HELP jobs_total Jobs.\n# TYPE jobs_total counter\njobs_total 5.0\n"
    );
    let twice = "# HELP jobs_total Jobs.\n# TYPE jobs_total counter\njobs_total 10.0\n";
    for other in [plain.clone(), doubled_slash.into(), with_dot] {
        let scrape = merge_files([&plain, &other], CollectOptions::default());
        assert_eq!(
            scrape.encode(Format::Prometheus),
            twice,
            "{}",
            other.display()
        );
    }
    let thrice = merge_files([&plain, &plain, &plain], CollectOptions::default());
    assert_eq!(
        thrice.encode(Format::Prometheus),
        "# HELP jobs_total Jobs.\n# TYPE jobs_total counter\njobs_total 15.0\n"
    );
}
