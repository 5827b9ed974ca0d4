//! A native histogram made before a fork records, in the child, into the
//! child's own native histogram file, and a child that cannot make that
//! file still counts the classic part.
//!
//! A test target with its own `main` (`harness = false`): libtest runs
//! tests on threads of their own, and a process is only forked here with
//! no thread beside the forking one.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use multiprom_client::{MultiprocessRegistry, NativeHistogramOptions};
use multiprom_format::fork::run_in_forked_child_beside;
use multiprom_format::native_file::native_histogram_path;
use multiprom_format::{read_file, read_native_histogram_file, FileName, NativeHistogramEntry};

/// How long a child may take before it is killed and the test fails.
const CHILD_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs the cases whose names contain the first argument that is not an
/// option (all of them without one), libtest's way, and exits non-zero if
/// any failed.
fn main() {
    let cases: [(&str, fn()); 2] = [
        (
            "a_forked_child_records_in_its_own_native_file",
            a_forked_child_records_in_its_own_native_file,
        ),
        (
            "after_fork_a_native_file_that_cannot_be_made_loses_only_native_data",
            after_fork_a_native_file_that_cannot_be_made_loses_only_native_data,
        ),
    ];
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

fn db_name(pid: u32) -> FileName {
    format!("histogram_{pid}.db").parse().unwrap()
}

fn natives(dir: &Path, pid: u32) -> Vec<NativeHistogramEntry> {
    read_native_histogram_file(&native_histogram_path(dir, &db_name(pid)))
        .unwrap()
        .entries
}

/// Runs `child` in a forked child (killed at the timeout); its pid.
fn in_child(child: impl FnOnce() -> i32) -> u32 {
    let exit = run_in_forked_child_beside(&[], CHILD_TIMEOUT, child).unwrap();
    assert!(exit.success(), "{exit:?}");
    exit.pid
}

fn a_forked_child_records_in_its_own_native_file() {
    let dir = tempfile::tempdir().unwrap();
    let r = MultiprocessRegistry::new(dir.path()).unwrap();
    let family = r
        .native_histogram_family("h", "", NativeHistogramOptions::default(), &["k"])
        .unwrap();
    let a = family.labels(&["a"]).unwrap();
    family.labels(&["b"]).unwrap();
    a.observe(1.0);
    let child = in_child(|| {
        a.observe(2.0);
        a.observe(2.0);
        let ok = a.native().is_some_and(|n| n.count() == 2) && a.count() == 2.0;
        i32::from(!ok)
    });
    let parent = natives(dir.path(), std::process::id());
    assert_eq!(parent[0].histogram.positive, [(0, 1)], "parent untouched");
    let own = natives(dir.path(), child);
    // Every series this process had is in the child's file, from empty.
    assert_eq!(own.len(), 2);
    assert_eq!(own[0].raw_key, parent[0].raw_key);
    assert_eq!(own[0].histogram.positive, [(8, 2)], "2.0 at schema 3");
    assert_eq!(own[0].histogram.sum, 4.0);
    assert_eq!(own[1].histogram.count(), 0);
    assert_eq!(a.native().unwrap().count(), 1);
    // reopen_after_fork makes the native file along with the values' files.
    let child = in_child(|| i32::from(r.reopen_after_fork().is_err()));
    assert_eq!(natives(dir.path(), child).len(), 2);
}

fn after_fork_a_native_file_that_cannot_be_made_loses_only_native_data() {
    let dir = tempfile::tempdir().unwrap();
    let r = MultiprocessRegistry::new(dir.path()).unwrap();
    let h = r
        .native_histogram("h", "", NativeHistogramOptions::default())
        .unwrap();
    let child = in_child(|| {
        // A directory where this process's native file would go.
        let own = native_histogram_path(dir.path(), &db_name(std::process::id()));
        if std::fs::create_dir(own).is_err() {
            return 2;
        }
        h.observe(4.0);
        h.observe(4.0);
        let ok = h.native().is_none() && h.count() == 2.0 && r.reopen_after_fork().is_err();
        i32::from(!ok)
    });
    let values: Vec<f64> = read_file(&dir.path().join(db_name(child).to_string()))
        .unwrap()
        .entries
        .iter()
        .map(|e| e.value)
        .collect();
    assert_eq!(
        values,
        [8.0, 2.0],
        "sum and +Inf bucket counted in the child"
    );
}
