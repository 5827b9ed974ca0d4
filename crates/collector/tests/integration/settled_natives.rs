//! Native histogram files are read for protobuf scrapes only, and those of
//! settled histogram files (writers gone) once: their merge is kept while
//! they stay settled, and a file unsettled again is read again.

// Test helpers: a failed setup step is a failed test.
#![allow(clippy::unwrap_used)]

use std::fs::File;
use std::sync::Arc;

use crate::support::native_worker::{Worker, NAME};
use multiprom_collector::{DirCollector, Natives, Scrape, Warning};
use multiprom_format::FileName;

/// The one route of these workers.
const ROUTE: &str = "/";

fn for_protobuf(collector: &DirCollector) -> Arc<Scrape> {
    collector
        .collect_with(|_| Arc::default(), None, Natives::Merge)
        .unwrap()
}

/// Worker `id` with one native-only histogram, one observation in it.
fn worker(dir: &std::path::Path, id: &str) -> Worker {
    let worker = Worker::new(dir, id, &[ROUTE]);
    worker.observe(ROUTE, 160, [1.0]);
    worker
}

/// The merged native histogram's count.
fn native_count(scrape: &Scrape) -> u64 {
    let labels: [(Arc<str>, Arc<str>); 1] = [("route".into(), ROUTE.into())];
    scrape
        .natives
        .get(NAME, &labels)
        .expect("a native histogram")
        .count()
}

#[test]
fn a_settled_file_s_natives_stay_merged_and_are_read_again_once_unsettled() {
    let dir = tempfile::tempdir().unwrap();
    let gone = worker(dir.path(), "1");
    let live = worker(dir.path(), "2");
    // "1" is a writer that is gone, "2" one that lives.
    let collector =
        DirCollector::new(dir.path()).settle_exited_writers(|name: &FileName| name.id() == "1");
    // The first collections read, map and set the watch (see the
    // settled_files tests); from then on "1" is settled.
    for _ in 0..4 {
        assert_eq!(native_count(&for_protobuf(&collector)), 2);
    }
    // Both native files change (no event says so).
    gone.observe(ROUTE, 160, [2.0]);
    live.observe(ROUTE, 160, [2.0]);
    let scrape = for_protobuf(&collector);
    assert_eq!(scrape.stats.files_settled, 1);
    assert_eq!(
        native_count(&scrape),
        3,
        "the settled file's natives are in the total, as read once; the live one's read anew"
    );
    // Text scrapes in between change nothing.
    collector.collect().unwrap();
    assert_eq!(native_count(&for_protobuf(&collector)), 3);

    // A new process with the same pid opens the histogram file and
    // records; text scrapes meanwhile settle the file again.
    drop(File::open(dir.path().join("histogram_1.db")).unwrap());
    gone.observe(ROUTE, 160, [3.0]);
    for _ in 0..3 {
        collector.collect().unwrap();
    }
    assert_eq!(collector.collect().unwrap().stats.files_settled, 1);
    let scrape = for_protobuf(&collector);
    assert_eq!(
        native_count(&scrape),
        5,
        "a file unsettled since its natives were merged is read again"
    );
    assert!(scrape.warnings.is_empty(), "{:?}", scrape.warnings);
}

#[test]
fn a_text_scrape_reads_no_native_file() {
    let dir = tempfile::tempdir().unwrap();
    let _worker = worker(dir.path(), "1");
    let native = dir.path().join("native-histograms/histogram_1.native");
    std::fs::write(&native, b"not a native histogram file").unwrap();
    let collector = DirCollector::new(dir.path());
    for _ in 0..3 {
        let text = collector.collect().unwrap();
        assert!(text.warnings.is_empty(), "{:?}", text.warnings);
        assert!(text.natives.is_empty());
    }
    let protobuf = for_protobuf(&collector);
    assert!(
        matches!(protobuf.warnings[..], [Warning::NativeHistograms(_)]),
        "{:?}",
        protobuf.warnings
    );
}
