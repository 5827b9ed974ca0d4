//! A collector made before a fork (a pre-fork server's master, or the
//! Python package's collector built at import time) keeps working in the
//! child: its directory watch belongs to the parent (its event thread does
//! not exist in the child), so the child sets its own, and later
//! collections in the child go by events again instead of looking at every
//! file every time. The child leaves the parent's watch alone: dropping it
//! there would remove the parent's sentinel file.
//!
//! Alone in its test binary: the process forks, and no other test's threads
//! may be holding locks at that moment.

// Forking, exiting and waiting are system calls with no safe wrapper in the
// standard library; this test (not the crate) makes them.
#![allow(unsafe_code)]
#![allow(clippy::unwrap_used)]

use multiprom_collector::DirCollector;
use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};

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

#[test]
fn collector_made_before_a_fork_watches_again_in_the_child() {
    let dir = tempfile::tempdir().expect("a temp dir");
    // Watches keep a sentinel file in a directory of their own under the
    // temp dir: a private one, to see whose are there.
    let temp = tempfile::tempdir().expect("a temp dir");
    std::env::set_var("TMPDIR", temp.path());
    let sentinels = || -> Vec<std::path::PathBuf> {
        let mut dirs: Vec<_> = std::fs::read_dir(temp.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        dirs.sort();
        dirs
    };
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
    let parents = sentinels();
    assert_eq!(parents.len(), 1, "{parents:?}");

    // SAFETY: the child only collects, writes a file and leaves with
    // `_exit`; this test binary runs no other test.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // Exit codes: 0 as expected; 2 the child's first collection did not
        // look at every file; 3 a file made in the child was missed; 4 the
        // child's later collections still look at every file.
        let code = (|| {
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
        })();
        // SAFETY: leaves the child at once, running no destructors (the
        // temp dir belongs to the parent).
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    assert!(
        libc::WIFEXITED(status),
        "the child did not exit normally: {status}"
    );
    assert_eq!(
        libc::WEXITSTATUS(status),
        0,
        "see the exit codes in the child"
    );
    assert!(
        parents[0].exists(),
        "the child removed the parent's sentinel"
    );
    // The parent's watch still works after the child left.
    write_counter(dir.path(), 3, 100.0);
    assert_eq!(total(&collector), (111.0, false));
}
