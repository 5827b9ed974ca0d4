//! Concurrent collections cost one: callers that arrive while a collection
//! runs wait for it and share its result, instead of repeating the work
//! one after another.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use multiprom_collector::DirCollector;
use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};

#[test]
fn callers_arriving_during_a_collection_share_it() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let name = FileName::new(MetricKind::Counter, "1").unwrap();
    let mut writer = FileWriter::open(dir.path(), &name).unwrap();
    writer
        .slot(&encode_key("c", "c_total", [], "C."))
        .unwrap()
        .set(1.0);
    let collector = Arc::new(DirCollector::new(dir.path()));

    const WAITERS: usize = 8;
    let started = Arc::new(AtomicUsize::new(0));
    let (inside, first_is_inside) = mpsc::channel();
    let (waiters_started, release) = mpsc::channel::<()>();
    std::thread::scope(|scope| {
        // The first collection holds on inside (its leave-out callback
        // runs during the collection) until every other caller has called.
        let first = {
            let collector = Arc::clone(&collector);
            scope.spawn(move || {
                collector
                    .collect_without(
                        |_| {
                            inside.send(()).unwrap();
                            // Bounded: a test that fails must not hang.
                            release.recv_timeout(Duration::from_secs(30)).unwrap();
                            Arc::new(HashSet::new())
                        },
                        None,
                    )
                    .unwrap()
            })
        };
        first_is_inside
            .recv_timeout(Duration::from_secs(30))
            .unwrap();
        let waiters: Vec<_> = (0..WAITERS)
            .map(|_| {
                let collector = Arc::clone(&collector);
                let started = Arc::clone(&started);
                scope.spawn(move || {
                    started.fetch_add(1, Ordering::SeqCst);
                    collector.collect().unwrap()
                })
            })
            .collect();
        while started.load(Ordering::SeqCst) < WAITERS {
            std::thread::yield_now();
        }
        // Each waiter has entered `collect` (or is about to: it counts
        // first); give the last ones a moment to block on the collection.
        std::thread::sleep(Duration::from_millis(200));
        waiters_started.send(()).unwrap();
        let first = first.join().unwrap();
        assert_eq!(first.stats.collection, 1);
        for waiter in waiters {
            let got = waiter.join().unwrap();
            assert!(
                Arc::ptr_eq(&got, &first),
                "a caller that arrived during collection 1 got collection {}",
                got.stats.collection
            );
        }
    });
    // A caller arriving afterwards gets a new collection.
    assert_eq!(collector.collect().unwrap().stats.collection, 2);
}
