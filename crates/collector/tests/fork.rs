//! A collector made before a fork (a pre-fork server's master, or the
//! Python package's collector built at import time) keeps working in the
//! child: its directory watch's inotify descriptor is shared with the
//! parent (reading it would take the parent's events), so the child sets
//! its own, and later collections in the child go by events again instead
//! of looking at every file every time. The parent's watch still sees
//! everything, what the child did included.
//!
//! A test target with its own `main` (`harness = false`): libtest would run
//! the case on a thread of its own beside its main thread, and a fork must
//! not leave threads behind whose locks the child might need;
//! `run_in_forked_child_beside` checks that no other thread runs.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use multiprom_collector::DirCollector;
use multiprom_format::fork::run_in_forked_child_beside;
use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};

/// How long the child may take before it is killed and the test fails.
const CHILD_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs the cases whose names contain the first argument that is not an
/// option (all of them without one), libtest's way, and exits non-zero if
/// any failed.
fn main() {
    let cases: [(&str, fn()); 1] = [(
        "collector_made_before_a_fork_watches_again_in_the_child",
        collector_made_before_a_fork_watches_again_in_the_child,
    )];
    let filter = std::env::args().skip(1).find(|arg| !arg.starts_with('-'));
    let mut failed = Vec::new();
    for (name, case) in cases {
        if filter
            .as_deref()
            .is_some_and(|filter| !name.contains(filter))
        {
            continue;
        }
        match std::panic::catch_unwind(case) {
            Ok(()) => println!("test {name} ... ok"),
            Err(_) => {
                println!("test {name} ... FAILED");
                failed.push(name);
            }
        }
    }
    if !failed.is_empty() {
        eprintln!("failed: {failed:?}");
        std::process::exit(101);
    }
}

fn write_counter(dir: &std::path::Path, pid: u32, value: f64) {
    let name = FileName::new(MetricKind::Counter, pid.to_string()).unwrap();
    let mut writer = FileWriter::open(dir, &name).unwrap();
    let key = encode_key("c", "c_total", [], "C.");
    writer.slot(&key).unwrap().set(value);
}

fn total(collector: &DirCollector) -> (f64, bool) {
    let scrape = collector.collect().unwrap();
    let total = scrape
        .families
        .iter()
        .flat_map(|f| &f.samples)
        .map(|s| s.value)
        .sum();
    (total, scrape.stats.full_look)
}

fn collector_made_before_a_fork_watches_again_in_the_child() {
    let dir = tempfile::tempdir().expect("a temp dir");
    write_counter(dir.path(), 1, 1.0);
    let collector = DirCollector::new(dir.path());
    assert_eq!(
        total(&collector),
        (1.0, true),
        "the first collection looks at every file"
    );
    assert_eq!(
        total(&collector),
        (1.0, true),
        "the second sets the watch and maps every file"
    );
    assert_eq!(total(&collector), (1.0, false), "the parent's watch works");

    // Exit codes: 0 as expected; 2 the child's first collection did not
    // look at every file; 3 a file made in the child was missed; 4 the
    // child's later collections still look at every file.
    let exit = run_in_forked_child_beside(&[], CHILD_TIMEOUT, || {
        let (value, full) = total(&collector);
        if value != 1.0 || !full {
            return 2;
        }
        write_counter(dir.path(), 2, 10.0);
        let (value, full) = total(&collector);
        if value != 11.0 {
            return 3;
        }
        if full {
            return 4;
        }
        0
    })
    .expect("fork with no other thread running");
    assert!(exit.success(), "see the exit codes in the child: {exit:?}");
    // The parent's watch still works after the child left, and saw the
    // file the child made: the child did not take its events.
    write_counter(dir.path(), 3, 100.0);
    assert_eq!(total(&collector), (111.0, false));
}
