//! Property test of live workers' native histogram files read through maps:
//! random sequences of observations (now and then buckets too far apart
//! for a dense merge, or more buckets than a record has room for), damage
//! to a record, files cut short, workers gone and new, after each of which
//! a long-lived collector of live workers (maps, shards, buckets added as
//! they are loaded) must give the native histograms that reading every
//! file whole gives.
//!
//! Failures are persisted in `crates/collector/proptest-regressions/`
//! (commit that file: proptest replays it first on every run).

// Helpers outside `#[test]` functions: a panic is a failing test.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::FileExt;
use std::sync::Arc;

use crate::support::native_worker::{live_collector, Worker};
use multiprom_collector::{DirCollector, Natives, Scrape};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

const ROUTES: [&str; 3] = ["/a", "/b", "/c"];

#[derive(Debug, Clone)]
enum Op {
    /// Worker `worker % live` observes `values` (in eighths) into a route,
    /// with room for `max_buckets` buckets per record.
    Observe {
        worker: usize,
        route: usize,
        max_buckets: u32,
        values: Vec<i32>,
    },
    /// A worker observes two values thousands of buckets apart.
    FarApart { worker: usize, route: usize },
    /// A word of a worker's record of a route is overwritten.
    Damage {
        worker: usize,
        route: usize,
        word: usize,
        value: u64,
    },
    /// A worker goes, and its native file is emptied. (A file cut part
    /// way is only noticed through a map where a load lands past its end:
    /// a cut inside the last page read, or past every word loaded, is not
    /// seen as damage, as for every read through a map, see
    /// docs/architecture.md; `live_natives.rs` cuts one past a record.)
    Cut { worker: usize },
    /// A worker goes, its files with it.
    Remove { worker: usize },
    /// A new worker comes.
    Add,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (
            0..8usize,
            0..3usize,
            prop_oneof![Just(8u32), Just(160)],
            proptest::collection::vec(-400i32..4000, 1..40),
        )
            .prop_map(|(worker, route, max_buckets, values)| Op::Observe {
                worker,
                route,
                max_buckets,
                values,
            }),
        1 => (0..8usize, 0..3usize).prop_map(|(worker, route)| Op::FarApart { worker, route }),
        1 => (
            0..8usize,
            0..3usize,
            prop_oneof![Just(6usize), Just(7), Just(8), Just(9)],
            prop_oneof![Just(u64::MAX), Just(7u64 << 32), Just(1u64 << 20), any::<u64>()],
        )
            .prop_map(|(worker, route, word, value)| Op::Damage {
                worker,
                route,
                word,
                value,
            }),
        1 => (0..8usize).prop_map(|worker| Op::Cut { worker }),
        1 => (0..8usize).prop_map(|worker| Op::Remove { worker }),
        2 => Just(Op::Add),
    ]
}

fn for_protobuf(collector: &DirCollector) -> Arc<Scrape> {
    collector
        .collect_with(|_| Arc::default(), None, Natives::Merge)
        .unwrap()
}

fn run(ops: &[Op], workers_at_start: u32) {
    let dir = tempfile::tempdir().unwrap();
    let mut next_id = 1;
    let mut workers: Vec<Worker> = (0..workers_at_start)
        .map(|_| {
            next_id += 1;
            Worker::new(dir.path(), &next_id.to_string(), &ROUTES)
        })
        .collect();
    let mapped = live_collector(dir.path());
    for (n, op) in ops.iter().enumerate() {
        match *op {
            Op::Observe {
                worker,
                route,
                max_buckets,
                ref values,
            } if !workers.is_empty() => {
                let eighths = values.iter().map(|&v| f64::from(v) * 0.125);
                workers[worker % workers.len()].observe(ROUTES[route], max_buckets, eighths);
            }
            Op::FarApart { worker, route } if !workers.is_empty() => {
                workers[worker % workers.len()].observe(ROUTES[route], 160, [1e-200, 1e200]);
            }
            Op::Damage {
                worker,
                route,
                word,
                value,
            } if !workers.is_empty() => {
                let worker = &workers[worker % workers.len()];
                if let Some(record) = worker.record(dir.path(), ROUTES[route]) {
                    let file = std::fs::OpenOptions::new()
                        .write(true)
                        .open(worker.native_path(dir.path()))
                        .unwrap();
                    file.write_all_at(&value.to_le_bytes(), (record + 8 * word) as u64)
                        .unwrap();
                }
            }
            Op::Cut { worker } if !workers.is_empty() => {
                // Its writer goes first: it would fault writing past the cut.
                let worker = workers.remove(worker % workers.len());
                let path = worker.native_path(dir.path());
                drop(worker);
                let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
                file.set_len(0).unwrap();
            }
            Op::Remove { worker } if !workers.is_empty() => {
                let worker = workers.remove(worker % workers.len());
                std::fs::remove_file(dir.path().join(worker.name.to_string())).unwrap();
                std::fs::remove_file(worker.native_path(dir.path())).unwrap();
            }
            Op::Add => {
                next_id += 1;
                workers.push(Worker::new(dir.path(), &next_id.to_string(), &ROUTES));
            }
            _ => {}
        }
        let scrape = for_protobuf(&mapped);
        let whole = for_protobuf(&DirCollector::new(dir.path()).map_files(false));
        assert_eq!(scrape.natives, whole.natives, "after op {n}: {op:?}");
    }
}

fn config(cases: u32, regressions: &'static str) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(regressions))),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(64, "proptest-regressions/live_natives_ops.txt"))]

    #[test]
    fn mapped_live_files_give_what_reading_them_whole_gives(
        ops in proptest::collection::vec(op(), 1..24),
        workers in 1u32..5,
    ) {
        run(&ops, workers);
    }
}

proptest! {
    #![proptest_config(config(8, "proptest-regressions/live_natives_ops_threads.txt"))]

    /// Enough workers for a shard per core, each read on a thread.
    #[test]
    fn mapped_live_files_read_on_threads_give_what_reading_them_whole_gives(
        ops in proptest::collection::vec(op(), 1..12),
    ) {
        run(&ops, 300);
    }
}
