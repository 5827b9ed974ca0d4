//! A collector's first collection reads the files and leaves nothing behind
//! it: no memory map and no directory watch (an inotify descriptor). From
//! the second collection on, the files are mapped and the watch is set, so
//! that later collections read values with plain loads and only look at
//! files an event named.
//!
//! Alone in its test binary: it counts this process's inotify descriptors
//! and reads its memory maps.

#![allow(clippy::unwrap_used)]

#[path = "integration/support/maps.rs"]
mod maps;

use maps::maps_of;
use multiprom_collector::DirCollector;
use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};

#[test]
fn files_are_mapped_and_watched_from_the_second_collection() {
    let dir = tempfile::tempdir().unwrap();
    // The inotify descriptors this process has open.
    let watches = || {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(Result::ok)
            .filter(|fd| {
                std::fs::read_link(fd.path())
                    .is_ok_and(|target| target.as_os_str() == "anon_inode:inotify")
            })
            .count()
    };
    for pid in 1..=3 {
        let name = FileName::new(MetricKind::Counter, pid.to_string()).unwrap();
        let mut writer = FileWriter::open(dir.path(), &name).unwrap();
        let key = encode_key("c", "c_total", [], "C.");
        writer.slot(&key).unwrap().set(f64::from(pid));
    }
    let total = |collector: &DirCollector| -> f64 {
        let scrape = collector.collect().unwrap();
        assert_eq!(scrape.stats.files_ok, 3);
        scrape.families[0].samples.iter().map(|s| s.value).sum()
    };

    let collector = DirCollector::new(dir.path());
    assert_eq!(total(&collector), 6.0);
    assert_eq!(maps_of(dir.path()), 0, "the first collection mapped files");
    assert_eq!(watches(), 0, "the first collection set a watch");

    assert_eq!(total(&collector), 6.0);
    assert_eq!(
        maps_of(dir.path()),
        3,
        "the second collection maps every file"
    );
    assert_eq!(watches(), 1, "the second collection sets the watch");

    // A value written through the writer's map, with no event: the next
    // collection reads it from its own map, without looking at the file.
    let name = FileName::new(MetricKind::Counter, "1").unwrap();
    let mut writer = FileWriter::open(dir.path(), &name).unwrap();
    writer
        .slot(&encode_key("c", "c_total", [], "C."))
        .unwrap()
        .set(10.0);
    drop(writer);
    let scrape = collector.collect().unwrap();
    assert!(
        !scrape.stats.full_look,
        "the third collection went by events"
    );
    assert_eq!(
        scrape.families[0]
            .samples
            .iter()
            .map(|s| s.value)
            .sum::<f64>(),
        15.0
    );

    drop(collector);
    assert_eq!(maps_of(dir.path()), 0, "maps outlived their collector");
    assert_eq!(watches(), 0, "the watch outlived its collector");
}
