//! Files that disagree about a family (docs/merge.md, "Conflicts").
//!
//! Help and gauge-mode conflicts follow Python's rule over files in the
//! directory's listing order (help: first; mode: last), so the output equals
//! Python's `MultiProcessCollector` on the same directory byte for byte. Type conflicts deliberately differ: the
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
            other => panic!("unexpected warning: {other}"),
        })
        .collect()
}

/// The `*.db` names of `dir` in listing order: the merge order.
fn listing(dir: &std::path::Path) -> Vec<String> {
    multiprom_collector::scan_dir(dir)
        .unwrap()
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_owned())
        .collect()
}

/// Which of `names` comes first in `order`.
fn first_of<'a>(order: &[String], names: [&'a str; 2]) -> &'a str {
    let position = |name: &str| order.iter().position(|n| n == name).unwrap();
    if position(names[0]) < position(names[1]) {
        names[0]
    } else {
        names[1]
    }
}

#[test]
fn help_and_mode_conflicts_follow_python_over_the_listing_order() {
    let dir = temp_dir();
    let python = run_python(
        "collector_conflicts.py",
        &["help-and-mode"],
        &[(ENV, dir.path())],
    );
    let python = String::from_utf8(python).unwrap();
    let order = listing(dir.path());
    // Help: the first file's. Gauge mode: the last gauge file's.
    let jobs_help_file = first_of(&order, ["counter_1.db", "counter_2.db"]);
    let jobs_help = if jobs_help_file == "counter_1.db" {
        "First."
    } else {
        "Second."
    };
    let jobs_other = if jobs_help == "First." {
        "Second."
    } else {
        "First."
    };
    let lat_help_file = first_of(&order, ["histogram_1.db", "histogram_3.db"]);
    let lat_help = if lat_help_file == "histogram_1.db" {
        "H2."
    } else {
        "H1."
    };
    let lat_other = if lat_help == "H2." { "H1." } else { "H2." };
    let gauges: Vec<&String> = order.iter().filter(|n| n.starts_with("gauge_")).collect();
    let modes: Vec<&str> = gauges
        .iter()
        .map(|n| n.split('_').nth(1).unwrap())
        .collect();
    let temp = match *modes.last().unwrap() {
        "max" => "temp 11.0",
        "min" => "temp 5.0",
        _ => "temp 23.0",
    };
    // Family order: first appearance over the files in listing order.
    let mut families: Vec<(&str, String)> = Vec::new();
    for name in &order {
        let in_file: Vec<&str> = match name.as_str() {
            "counter_1.db" | "counter_2.db" => vec!["jobs"],
            n if n.starts_with("gauge_") => vec!["temp"],
            _ => vec!["lat"],
        };
        for family in in_file {
            if families.iter().any(|(f, _)| *f == family) {
                continue;
            }
            let text = match family {
                "jobs" => format!(
                    "# HELP jobs_total {jobs_help}\n# TYPE jobs_total counter\njobs_total 3.0\n"
                ),
                "temp" => format!("# HELP temp Temperature.\n# TYPE temp gauge\n{temp}\n"),
                _ => format!(
                    "# HELP lat {lat_help}\n# TYPE lat histogram\nlat_sum 2.5\n\
                     lat_bucket{{le=\"1.0\"}} 1.0\nlat_bucket{{le=\"+Inf\"}} 2.0\nlat_count 2.0\n"
                ),
            };
            families.push((family, text));
        }
    }
    let expected: String = families.into_iter().map(|(_, text)| text).collect();
    assert_eq!(
        python, expected,
        "Python's merge in listing order {order:?}"
    );

    let collector = DirCollector::new(dir.path());
    let scrape = collector.collect().unwrap();
    assert_eq!(scrape.encode(Format::Prometheus), expected);
    let found = conflicts(&scrape.warnings);
    assert_eq!(found.len(), 3, "{found:?}");
    let text: Vec<String> = found.iter().map(ToString::to_string).collect();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let other_file =
        |first: &str, pair: [&str; 2]| if first == pair[0] { pair[1] } else { pair[0] }.to_owned();
    assert!(
        text.contains(&format!(
            "family \"jobs\" has help \"{jobs_help}\" and also \"{jobs_other}\" (in {}): using the first",
            path(&other_file(jobs_help_file, ["counter_1.db", "counter_2.db"]))
        )),
        "{text:#?}"
    );
    assert!(
        text.contains(&format!(
            "family \"lat\" has help \"{lat_help}\" and also \"{lat_other}\" (in {}): using the first",
            path(&other_file(lat_help_file, ["histogram_1.db", "histogram_3.db"]))
        )),
        "{text:#?}"
    );
    assert!(
        text.contains(&format!(
            "gauge \"temp\" is written with modes {}: merging all of it as {}",
            modes.join(", "),
            modes.last().unwrap()
        )),
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
    // What Python does with these files: it mixes the other type's entries
    // into the family of the first file's type (two families, each with
    // samples of both types).
    let python = String::from_utf8(python).unwrap();
    assert_eq!(python.matches("# HELP ").count(), 2, "{python}");
    for sample in [
        "x_total 1.0\n",
        "x{pid=\"2\"} 10.0\n",
        "y 3.0\n",
        "y_count 1.0\n",
        "y_sum 4.0\n",
    ] {
        assert!(python.contains(sample), "{sample:?} in {python}");
    }
    let collector = DirCollector::new(dir.path());
    let scrape = collector.collect().unwrap();
    // The first file in listing order decides each family's type.
    let order = listing(dir.path());
    let x_first = first_of(&order, ["counter_1.db", "gauge_all_2.db"]);
    let y_first = first_of(&order, ["gauge_sum_1.db", "summary_2.db"]);
    let x = if x_first == "counter_1.db" {
        "# HELP x_total Counter x.\n# TYPE x_total counter\nx_total 1.0\n"
    } else {
        "# HELP x Gauge x.\n# TYPE x gauge\nx{pid=\"2\"} 10.0\n"
    };
    let y = if y_first == "gauge_sum_1.db" {
        "# HELP y Gauge y.\n# TYPE y gauge\ny 3.0\n"
    } else {
        "# HELP y Summary y.\n# TYPE y summary\ny_count 1.0\ny_sum 4.0\n"
    };
    // Families in order of first appearance over the files.
    let x_at = order.iter().position(|n| n == x_first).unwrap();
    let y_at = order.iter().position(|n| n == y_first).unwrap();
    let expected = if x_at <= y_at {
        format!("{x}{y}")
    } else {
        format!("{y}{x}")
    };
    assert_eq!(
        scrape.encode(Format::Prometheus),
        expected,
        "listing order {order:?}"
    );
    let path = |name: &str| dir.path().join(name).display().to_string();
    let text: Vec<String> = conflicts(&scrape.warnings)
        .iter()
        .map(ToString::to_string)
        .collect();
    let conflict = |family: &str, pair: [(&str, &str); 2], first: &str| {
        let (kept, dropped) = if pair[0].1 == first {
            (pair[0], pair[1])
        } else {
            (pair[1], pair[0])
        };
        format!(
            "family \"{family}\" is a {} in {} but a {} in {}: the {} entries are dropped",
            kept.0,
            path(kept.1),
            dropped.0,
            path(dropped.1),
            dropped.0
        )
    };
    let mut want = vec![
        conflict(
            "x",
            [("counter", "counter_1.db"), ("gauge", "gauge_all_2.db")],
            x_first,
        ),
        conflict(
            "y",
            [("gauge", "gauge_sum_1.db"), ("summary", "summary_2.db")],
            y_first,
        ),
    ];
    want.sort();
    assert_eq!(text, want);
    assert!(collector.collect().unwrap().warnings.is_empty());
}
