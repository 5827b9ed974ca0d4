//! Files with the same keys, in the same order, as an earlier file of their
//! kind (every worker of an application writes the same metrics) take that
//! file's place in the merge plan instead of being walked entry by entry.
//! They must merge exactly as if walked: their values added to the same
//! series, their entries of a family typed otherwise dropped, and no
//! conflict reported twice or about the wrong file.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use multiprom_collector::{merge_files, CollectOptions, Conflict, Format, Warning};
use multiprom_format::{encode_key, FileName, FileWriter, GaugeMode, MetricKind};

fn write(dir: &Path, kind: MetricKind, id: &str, entries: &[(&str, &str, &str, f64)]) -> PathBuf {
    let name = FileName::new(kind, id).unwrap();
    let mut writer = FileWriter::open(dir, &name).unwrap();
    for &(family, sample, help, value) in entries {
        let key = encode_key(family, sample, [], help);
        writer.slot(&key).unwrap().set(value);
    }
    dir.join(name.to_string())
}

fn conflicts(warnings: &[Warning]) -> Vec<String> {
    warnings
        .iter()
        .map(|w| match w {
            Warning::Conflict(c @ (Conflict::Type { .. } | Conflict::Help { .. })) => c.to_string(),
            other => panic!("unexpected warning: {other}"),
        })
        .collect()
}

#[test]
fn alike_files_merge_as_if_walked_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    // `x` is a gauge in the first file: the counters' `x` entries are
    // dropped, in every counter file.
    let mut files = vec![write(
        dir,
        MetricKind::Gauge(GaugeMode::All),
        "0",
        &[("x", "x", "Gauge x.", 100.0)],
    )];
    let counter = |id: u32, entries: &[(&str, &str, &str, f64)]| {
        write(dir, MetricKind::Counter, &id.to_string(), entries)
    };
    for id in 1..=5 {
        let value = f64::from(id);
        files.push(counter(
            id,
            &[
                ("x", "x_total", "Counter x.", value),
                ("z", "z_total", "Z.", value * 10.0),
            ],
        ));
    }
    // Alike again after a file that is not: the template is the last file
    // walked.
    files.push(counter(6, &[("z", "z_total", "Other z.", 1000.0)]));
    for id in 7..=8 {
        files.push(counter(id, &[("z", "z_total", "Other z.", 10_000.0)]));
    }

    let scrape = merge_files(&files, CollectOptions::default());
    assert_eq!(
        scrape.encode(Format::Prometheus),
        "# HELP x Gauge x.\n# TYPE x gauge\nx{pid=\"0\"} 100.0\n\
         # HELP z_total Z.\n# TYPE z_total counter\nz_total 21150.0\n"
    );
    let path = |id: &str| dir.join(format!("counter_{id}.db")).display().to_string();
    assert_eq!(
        conflicts(&scrape.warnings),
        [
            format!(
                "family \"x\" is a gauge in {} but a counter in {}: the counter entries are dropped",
                dir.join("gauge_all_0.db").display(),
                path("1")
            ),
            format!(
                "family \"z\" has help \"Z.\" and also \"Other z.\" (in {}): using the first",
                path("6")
            ),
        ]
    );
}
