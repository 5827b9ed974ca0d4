//! Live workers' native histogram files, kept mapped between protobuf
//! scrapes, give the native histograms that reading them whole gives, as
//! they grow; one cut short under its map is reported and skipped.

// Test helpers: a failed setup step is a failed test.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use crate::support::native_worker::{classic_part, live_collector, Worker, NAME};
use multiprom_collector::{DirCollector, Natives, Scrape, Warning};
use multiprom_format::native_file::{native_histogram_path, NATIVE_HISTOGRAM_DIR};
use multiprom_format::{FileName, MetricKind, ReadErrorKind};

fn for_protobuf(collector: &DirCollector) -> Arc<Scrape> {
    collector
        .collect_with(|_| Arc::default(), None, Natives::Merge)
        .unwrap()
}

/// A protobuf scrape of `mapped` (a collector of live workers' files in
/// `dir`), checked to have no warning and the native histograms that
/// reading the files whole gives.
fn same_as_read_whole(mapped: &DirCollector, dir: &Path, when: &str) -> Arc<Scrape> {
    let scrape = for_protobuf(mapped);
    assert!(scrape.warnings.is_empty(), "{when}: {:?}", scrape.warnings);
    let whole = for_protobuf(&DirCollector::new(dir).map_files(false));
    assert_eq!(scrape.natives, whole.natives, "{when}");
    scrape
}

/// Workers 1, 2 and 3 in `dir`, each with a histogram for each of `routes`.
fn three_workers(dir: &Path, routes: &[&str]) -> Vec<Worker> {
    (1..=3)
        .map(|pid| Worker::new(dir, &pid.to_string(), routes))
        .collect()
}

/// Values whose sums are exact in any order, spread over many buckets.
fn values(from: i32, n: i32, scale: f64) -> impl Iterator<Item = f64> {
    (from..from + n).map(move |k| scale * f64::from(k) * 0.125)
}

#[test]
fn mapped_live_files_give_what_reading_them_whole_gives() {
    let dir = tempfile::tempdir().unwrap();
    let routes = ["/", "/api", "/new"];
    let workers = three_workers(dir.path(), &routes);
    for (n, worker) in workers.iter().enumerate() {
        let n = n as i32;
        worker.observe("/", 160, values(1, 20 + n, 1.0));
        worker.observe("/api", 8, values(-10, 5, 1.0));
    }
    // Live workers: nothing settles; maps from the second scrape on.
    let mapped = live_collector(dir.path());
    let same_as_read_whole = |when: &str| same_as_read_whole(&mapped, dir.path(), when);
    for n in 0..3 {
        same_as_read_whole(&format!("scrape {n}"));
    }
    // Counts grow in place (no event says so).
    for worker in &workers {
        worker.observe("/", 160, values(3, 7, 1.0));
    }
    same_as_read_whole("counts grown");
    // A new series is appended to one file.
    workers[1].observe("/new", 160, values(1, 3, -1.0));
    let scrape = same_as_read_whole("series appended");
    let labels: [(Arc<str>, Arc<str>); 1] = [("route".into(), "/new".into())];
    assert_eq!(scrape.natives.get(NAME, &labels).unwrap().count(), 3);
    // More buckets than a record has room for: the writer lowers the
    // schema into a new record and marks the old one moved.
    let before = scrape.natives.get(NAME, &[("route".into(), "/api".into())]);
    let schema_before = before.unwrap().schema;
    workers[2].observe("/api", 8, values(1, 400, 3.0));
    let scrape = same_as_read_whole("record moved");
    let after = scrape.natives.get(NAME, &[("route".into(), "/api".into())]);
    assert!(after.unwrap().schema < schema_before);
    // And the moved series keeps counting in its new record.
    workers[2].observe("/api", 8, values(1, 50, 3.0));
    same_as_read_whole("moved record grown");
}

#[test]
fn a_native_file_cut_short_under_its_map_is_reported_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let routes = ["/a", "/b", "/c", "/d"];
    let kept = Worker::new(dir.path(), "1", &routes);
    let cut = Worker::new(dir.path(), "2", &routes);
    for worker in [&kept, &cut] {
        for route in routes {
            worker.observe(route, 160, values(1, 30, 1.0));
        }
    }
    let collector = live_collector(dir.path());
    for _ in 0..3 {
        let scrape = for_protobuf(&collector);
        assert!(scrape.warnings.is_empty(), "{:?}", scrape.warnings);
        assert_eq!(scrape.natives.len(), routes.len());
    }
    // Its writer goes (its map would fault too), and someone cuts the file
    // to its first page: its later records lie past the end now.
    drop(cut);
    let name = FileName::new(MetricKind::Histogram, "2").unwrap();
    let path = native_histogram_path(dir.path(), &name);
    assert!(std::fs::metadata(&path).unwrap().len() > 8192);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(4096)
        .unwrap();
    let scrape = for_protobuf(&collector);
    let shrank = scrape.warnings.iter().any(|warning| {
        matches!(warning, Warning::NativeHistograms(error)
            if error.kind == ReadErrorKind::ShrankUnderMap && error.path == path)
    });
    assert!(shrank, "{:?}", scrape.warnings);
    // The other worker's histograms only.
    let only_kept = for_protobuf(&DirCollector::new(dir.path()).map_files(false));
    let first: [(Arc<str>, Arc<str>); 1] = [("route".into(), "/a".into())];
    assert_eq!(scrape.natives.get(NAME, &first).unwrap().count(), 30);
    // Later scrapes read the file as it is now: bad, reported, skipped.
    let later = for_protobuf(&collector);
    assert_eq!(later.natives.get(NAME, &first).unwrap().count(), 30);
    assert_eq!(only_kept.natives.get(NAME, &first).unwrap().count(), 30);
}

#[test]
fn many_live_files_read_on_several_threads_give_what_reading_them_whole_gives() {
    let dir = tempfile::tempdir().unwrap();
    let routes = ["/", "/api"];
    // Enough files for a shard per core, each read on a thread of its own.
    let mut workers: Vec<(u32, Worker)> = (1..=400)
        .map(|pid| (pid, Worker::new(dir.path(), &pid.to_string(), &routes)))
        .collect();
    for (pid, worker) in &workers {
        let n = *pid as i32 % 17;
        worker.observe("/", 160, values(1 + n, 10 + n, 1.0));
        worker.observe("/api", 160, values(-n, 3, 2.0));
    }
    let mapped = live_collector(dir.path());
    let same_as_read_whole = |when: &str| {
        let scrape = same_as_read_whole(&mapped, dir.path(), when);
        assert_eq!(scrape.natives.len(), routes.len(), "{when}");
        scrape
    };
    for n in 0..3 {
        same_as_read_whole(&format!("scrape {n}"));
    }
    let before = same_as_read_whole("counts unchanged");
    let labels: [(Arc<str>, Arc<str>); 1] = [("route".into(), "/".into())];
    let count = |scrape: &Scrape| scrape.natives.get(NAME, &labels).unwrap().count();
    // Some workers' files go and new ones come: the maps kept are the
    // files still there, wherever they now lie in the listing.
    for (pid, _) in workers.drain(100..150) {
        let name = FileName::new(MetricKind::Histogram, pid.to_string()).unwrap();
        std::fs::remove_file(dir.path().join(name.to_string())).unwrap();
        std::fs::remove_file(native_histogram_path(dir.path(), &name)).unwrap();
    }
    for pid in 1000..1040 {
        let worker = Worker::new(dir.path(), &pid.to_string(), &routes);
        worker.observe("/", 160, values(1, 5, 1.0));
        workers.push((pid, worker));
    }
    for (_, worker) in workers.iter().step_by(7) {
        worker.observe("/", 160, values(2, 3, 1.0));
    }
    let after = same_as_read_whole("files gone and new");
    assert_ne!(count(&after), count(&before));
    same_as_read_whole("and once more");
}

#[test]
fn a_record_damaged_after_others_were_added_costs_its_file_only() {
    let dir = tempfile::tempdir().unwrap();
    let routes = ["/a", "/b", "/c"];
    let workers = three_workers(dir.path(), &routes);
    for worker in &workers {
        for route in routes {
            worker.observe(route, 160, values(1, 12, 1.0));
        }
    }
    let mapped = live_collector(dir.path());
    for _ in 0..3 {
        assert!(for_protobuf(&mapped).warnings.is_empty());
    }
    // The last record of worker 2's file gets a bucket of no side, after
    // its first records were added as they were loaded.
    let path = workers[1].native_path(dir.path());
    let record = workers[1].record(dir.path(), "/c").unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    std::os::unix::fs::FileExt::write_all_at(
        &file,
        &(7u64 << 32).to_le_bytes(),
        (record + 56) as u64,
    )
    .unwrap();
    let scrape = for_protobuf(&mapped);
    let damaged = scrape.warnings.iter().any(|warning| {
        matches!(warning, Warning::NativeHistograms(error)
            if error.path == path
                && error.kind == ReadErrorKind::BadNativeHistogramRecord("bucket of no side"))
    });
    assert!(damaged, "{:?}", scrape.warnings);
    // What reading the files whole gives: the other two workers' records.
    let whole = for_protobuf(&DirCollector::new(dir.path()).map_files(false));
    assert_eq!(scrape.natives, whole.natives);
    let labels: [(Arc<str>, Arc<str>); 1] = [("route".into(), "/a".into())];
    assert_eq!(scrape.natives.get(NAME, &labels).unwrap().count(), 24);
    // Reported once; the same again.
    let later = for_protobuf(&mapped);
    assert!(later.warnings.is_empty(), "{:?}", later.warnings);
    assert_eq!(later.natives, whole.natives);
}

#[test]
fn buckets_too_far_apart_for_a_dense_merge_give_what_reading_them_whole_gives() {
    let dir = tempfile::tempdir().unwrap();
    let routes = ["/"];
    let workers = three_workers(dir.path(), &routes);
    for worker in &workers {
        worker.observe("/", 160, values(1, 10, 1.0));
    }
    let mapped = live_collector(dir.path());
    let same_as_read_whole = |when: &str| same_as_read_whole(&mapped, dir.path(), when);
    for n in 0..3 {
        same_as_read_whole(&format!("scrape {n}"));
    }
    // Thousands of buckets apart at schema 3, in the second worker's record.
    workers[1].observe("/", 160, [1e-200, 1e200]);
    for n in 0..3 {
        let scrape = same_as_read_whole(&format!("far apart {n}"));
        let labels: [(Arc<str>, Arc<str>); 1] = [("route".into(), "/".into())];
        assert_eq!(scrape.natives.get(NAME, &labels).unwrap().count(), 32);
    }
    // And back to near buckets only once that worker's file is gone.
    let name = FileName::new(MetricKind::Histogram, "2").unwrap();
    std::fs::remove_file(dir.path().join(name.to_string())).unwrap();
    std::fs::remove_file(native_histogram_path(dir.path(), &name)).unwrap();
    for n in 0..2 {
        same_as_read_whole(&format!("gone {n}"));
    }
}

#[test]
fn native_histograms_a_worker_begins_after_the_collector_is_warm_are_served() {
    let dir = tempfile::tempdir().unwrap();
    // Classic histograms only so far: no native histogram directory.
    let (name, file) = classic_part(dir.path(), "1", &["/"]);
    let collector = live_collector(dir.path());
    for n in 0..3 {
        let scrape = same_as_read_whole(&collector, dir.path(), &format!("classic only, {n}"));
        assert!(scrape.natives.is_empty());
    }
    // Its first native observation makes the directory and the file, and
    // no new `*.db` file; a text scrape (which reads no native file) sees
    // the directory's event first.
    let worker = Worker::beside(dir.path(), name, file);
    worker.observe("/", 160, values(1, 20, 1.0));
    collector.collect().unwrap();
    let scrape = same_as_read_whole(&collector, dir.path(), "natives begun");
    assert_eq!(scrape.natives.len(), 1);
    // And the directory cleared away: nothing is read from it.
    drop(worker);
    std::fs::remove_dir_all(dir.path().join(NATIVE_HISTOGRAM_DIR)).unwrap();
    let scrape = same_as_read_whole(&collector, dir.path(), "natives removed");
    assert!(scrape.natives.is_empty());
}
