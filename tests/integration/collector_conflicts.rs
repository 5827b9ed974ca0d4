//! Files that disagree about a family (docs/merge.md, "Conflicts").
//!
//! Help and gauge-mode conflicts follow Python's rule over files in name
//! order (help: first; mode: last), so the output equals Python's merge of
//! the sorted files byte for byte. Type conflicts deliberately differ: the
//! first type wins and other-typed entries are dropped, where Python would
//! mix them into one family. Each conflict is one warning, once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use multiprom_collector::{Conflict, DirCollector, Format, Warning};

use crate::harness::{run_python, temp_dir};

const ENV: &str = "PROMETHEUS_MULTIPROC_DIR";

fn conflicts(warnings: &[Warning]) -> Vec<&Conflict> {
    warnings
        .iter()
        .map(|w| match w {
            Warning::Conflict(c) => c,
            Warning::File(p) => panic!("unexpected bad file: {p}"),
        })
        .collect()
}

#[test]
fn help_and_mode_conflicts_follow_python_over_sorted_files() {
    let dir = temp_dir();
    let python = run_python(
        "collector_conflicts.py",
        &["help-and-mode"],
        &[(ENV, dir.path())],
    );
    let python = String::from_utf8(python).unwrap();
    let expected = "# HELP jobs_total First.\n\
                    # TYPE jobs_total counter\n\
                    jobs_total 3.0\n\
                    # HELP temp Temperature.\n\
                    # TYPE temp gauge\n\
                    temp 23.0\n\
                    # HELP lat H2.\n\
                    # TYPE lat histogram\n\
                    lat_sum 2.5\n\
                    lat_bucket{le=\"1.0\"} 1.0\n\
                    lat_bucket{le=\"+Inf\"} 2.0\n\
                    lat_count 2.0\n";
    assert_eq!(python, expected, "Python's merge of the sorted files");

    let collector = DirCollector::new(dir.path());
    let scrape = collector.collect().unwrap();
    assert_eq!(scrape.encode(Format::Prometheus), expected);
    let found = conflicts(&scrape.warnings);
    assert_eq!(found.len(), 3, "{found:?}");
    let text: Vec<String> = found.iter().map(ToString::to_string).collect();
    let path = |name: &str| dir.path().join(name).display().to_string();
    assert!(
        text.contains(&format!(
            "family \"jobs\" has help \"First.\" and also \"Second.\" (in {}): using the first",
            path("counter_2.db")
        )),
        "{text:#?}"
    );
    assert!(
        text.contains(&format!(
            "family \"lat\" has help \"H2.\" and also \"H1.\" (in {}): using the first",
            path("histogram_3.db")
        )),
        "{text:#?}"
    );
    assert!(
        text.contains(
            &"gauge \"temp\" is written with modes max, min, sum: merging all of it as sum"
                .to_string()
        ),
        "{text:#?}"
    );
    // Reported once, not on every scrape.
    let again = collector.collect().unwrap();
    assert!(again.warnings.is_empty(), "{:?}", again.warnings);
    assert_eq!(again.encode(Format::Prometheus), expected);
}

#[test]
fn type_conflicts_keep_the_first_type_and_drop_other_typed_entries() {
    let dir = temp_dir();
    let python = run_python("collector_conflicts.py", &["type"], &[(ENV, dir.path())]);
    // What Python does with these files (in name order): it mixes the
    // gauge's and the summary's entries into families of another type.
    assert_eq!(
        String::from_utf8(python).unwrap(),
        "# HELP x_total Counter x.\n\
         # TYPE x_total counter\n\
         x_total 1.0\n\
         x{pid=\"2\"} 10.0\n\
         # HELP y Gauge y.\n\
         # TYPE y gauge\n\
         y 3.0\n\
         y_count 1.0\n\
         y_sum 4.0\n"
    );
    let collector = DirCollector::new(dir.path());
    let scrape = collector.collect().unwrap();
    assert_eq!(
        scrape.encode(Format::Prometheus),
        "# HELP x_total Counter x.\n\
         # TYPE x_total counter\n\
         x_total 1.0\n\
         # HELP y Gauge y.\n\
         # TYPE y gauge\n\
         y 3.0\n"
    );
    let path = |name: &str| dir.path().join(name).display().to_string();
    let text: Vec<String> = conflicts(&scrape.warnings)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        text,
        [
            format!(
                "family \"x\" is a counter in {} but a gauge in {}: the gauge entries are dropped",
                path("counter_1.db"),
                path("gauge_all_2.db")
            ),
            format!(
                "family \"y\" is a gauge in {} but a summary in {}: the summary entries are dropped",
                path("gauge_sum_1.db"),
                path("summary_2.db")
            ),
        ]
    );
    assert!(collector.collect().unwrap().warnings.is_empty());
}
