//! A file whose writer adds series in bursts while collections map and
//! read it is never taken for a bad one: the whole file is served every
//! time, whatever moment the writer's appends fall on.

// Test helpers: a failed setup step is a failed test.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use multiprom_collector::DirCollector;
use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};

#[test]
fn a_file_growing_in_bursts_is_served_whole_by_every_collection() {
    let dir = tempfile::tempdir().unwrap();
    let name = FileName::new(MetricKind::Counter, "1").unwrap();
    let mut writer = FileWriter::open(dir.path(), &name).unwrap();
    writer
        .slot(&encode_key("sentinel", "sentinel_total", [], "S."))
        .unwrap()
        .set(1000.0);
    let done = Arc::new(AtomicBool::new(false));
    let stop = Arc::clone(&done);
    let appender = std::thread::spawn(move || {
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            // A burst of new series, more than a page of entries.
            for _ in 0..200 {
                let item = n.to_string();
                let key = encode_key("items", "items_total", [("item", item.as_str())], "I.");
                writer.slot(&key).unwrap().add(1.0);
                n += 1;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
            if n > 400_000 {
                break;
            }
        }
    });
    let collector = DirCollector::new(dir.path());
    for round in 0..400 {
        let scrape = collector.collect().unwrap();
        assert_eq!(
            scrape.stats.files_bad,
            0,
            "round {round}: {:?}",
            scrape.problems().collect::<Vec<_>>()
        );
        let sentinel = scrape
            .families
            .iter()
            .find(|family| &*family.name == "sentinel")
            .map(|family| family.samples[0].value);
        assert_eq!(sentinel, Some(1000.0), "round {round}");
    }
    done.store(true, Ordering::Relaxed);
    appender.join().unwrap();
}
