//! Property test of exemplar files read by a long-lived collector: random
//! sequences of exemplars stored in place (ties, NaN timestamps, label sets
//! too long for their record, which move their series), files grown past
//! their first size, replaced, rewritten in place, removed, workers that
//! exit (their files settle: read once and kept, walked a run at a time
//! while collections are quiet), workers whose identifier a new worker
//! takes over, new workers and removed ones, and polls that carry no
//! exemplar in between; after each, the collector (live workers' exemplar
//! files kept mapped from its second scrape on) must give the OpenMetrics
//! text that reading every file afresh gives.
//!
//! Failures are persisted in `crates/collector/proptest-regressions/`
//! (commit that file: proptest replays it first on every run).

// Helpers outside `#[test]` functions: a panic is a failing test.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use multiprom_collector::{DirCollector, Exemplars, Format, Natives};
use multiprom_format::exemplar_file::exemplar_path;
use multiprom_format::{encode_key, ExemplarWriter, FileName, FileWriter, MetricKind};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

/// The codes stored by default; `Grow` adds many more.
const CODES: usize = 4;

fn key(code: usize) -> String {
    encode_key(
        "requests",
        "requests_total",
        [("code", code.to_string().as_str())],
        "Requests.",
    )
}

#[derive(Debug, Clone)]
enum Op {
    /// Worker `worker % live` stores an exemplar for `code`: a trace id
    /// of `trace_len` two-byte characters (past 128 bytes of labels the
    /// series moves to a larger record), at `timestamp`.
    Store {
        worker: usize,
        code: usize,
        trace_len: usize,
        timestamp: f64,
    },
    /// A worker stores exemplars for hundreds of new codes: its file grows
    /// past its first size (and past the map of it).
    Grow { worker: usize, from: usize },
    /// A worker's exemplar file is replaced (renamed over) by another with
    /// the same keys the other way round; the worker goes on storing into
    /// the file it has, no longer the one at the path.
    Replace { worker: usize },
    /// A worker's exemplar file is rewritten in place with another's
    /// bytes, and the worker stops storing (its slots would land in what
    /// is now another file's layout).
    Rewrite { worker: usize },
    /// A worker's exemplar file is removed (its values stay).
    RemoveExemplars { worker: usize },
    /// A worker goes, its files with it.
    Remove { worker: usize },
    /// A worker exits: its files stay, and its writer is gone.
    Exit { worker: usize },
    /// A new worker takes over the identifier of an exited one (its files
    /// are continued).
    Adopt { exited: usize },
    /// A new worker comes.
    Add,
    /// A poll in the text format (no exemplar attached, none read).
    TextPoll,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (
            0..8usize,
            0..CODES,
            prop_oneof![4 => Just(8usize), 1 => Just(100)],
            prop_oneof![
                4 => (1u8..6).prop_map(f64::from),
                1 => Just(f64::NAN),
            ],
        )
            .prop_map(|(worker, code, trace_len, timestamp)| Op::Store {
                worker,
                code,
                trace_len,
                timestamp,
            }),
        1 => (0..8usize, 0..3usize).prop_map(|(worker, from)| Op::Grow { worker, from: CODES + from * 100 }),
        1 => (0..8usize).prop_map(|worker| Op::Replace { worker }),
        1 => (0..8usize).prop_map(|worker| Op::Rewrite { worker }),
        1 => (0..8usize).prop_map(|worker| Op::RemoveExemplars { worker }),
        1 => (0..8usize).prop_map(|worker| Op::Remove { worker }),
        2 => (0..8usize).prop_map(|worker| Op::Exit { worker }),
        1 => (0..8usize).prop_map(|exited| Op::Adopt { exited }),
        2 => Just(Op::Add),
        2 => Just(Op::TextPoll),
    ]
}

struct Worker {
    id: String,
    name: FileName,
    values: FileWriter,
    /// `None` once it stopped storing.
    exemplars: Option<ExemplarWriter>,
}

impl Worker {
    fn new(dir: &Path, id: &str) -> Worker {
        let name = FileName::new(MetricKind::Counter, id).unwrap();
        let mut values = FileWriter::open(dir, &name).unwrap();
        for code in 0..CODES {
            values.slot(&key(code)).unwrap().add(1.0);
        }
        let exemplars = Some(ExemplarWriter::open(dir, &name).unwrap());
        Worker {
            id: id.to_owned(),
            name,
            values,
            exemplars,
        }
    }

    fn store(&mut self, code: usize, trace_len: usize, timestamp: f64) {
        self.values.slot(&key(code)).unwrap().add(1.0);
        if let Some(exemplars) = &self.exemplars {
            let trace = "é".repeat(trace_len);
            exemplars
                .slot(&key(code))
                .unwrap()
                .store([("trace_id", trace.as_str())], 1.0, timestamp)
                .unwrap();
        }
    }

    fn exemplar_path(&self, dir: &Path) -> PathBuf {
        exemplar_path(dir, &self.name)
    }
}

/// An exemplar file of `name` written in a directory of its own, with the
/// default codes stored in reverse order (so each offset holds another
/// series than in a worker's file), at timestamps from `at` on.
fn other_file(name: &FileName, at: f64) -> (tempfile::TempDir, PathBuf) {
    let elsewhere = tempfile::tempdir().unwrap();
    let writer = ExemplarWriter::open(elsewhere.path(), name).unwrap();
    for (n, code) in (0..CODES).rev().enumerate() {
        writer
            .slot(&key(code))
            .unwrap()
            .store([("trace_id", "other")], 2.0, at + n as f64)
            .unwrap();
    }
    let path = exemplar_path(elsewhere.path(), name);
    (elsewhere, path)
}

fn openmetrics(collector: &DirCollector) -> String {
    collector.collect().unwrap().encode(Format::OpenMetrics)
}

fn run(ops: &[Op], workers_at_start: u32) {
    let dir = tempfile::tempdir().unwrap();
    let mut next_id = 0;
    let mut workers: Vec<Worker> = (0..workers_at_start)
        .map(|_| {
            next_id += 1;
            Worker::new(dir.path(), &next_id.to_string())
        })
        .collect();
    // Told which writers exited: their files settle; every other exemplar
    // file is read each scrape, through maps from the second on.
    let exited: Arc<Mutex<Vec<String>>> = Arc::default();
    let gone = Arc::clone(&exited);
    let mapped = DirCollector::new(dir.path()).settle_exited_writers(move |name: &FileName| {
        gone.lock().unwrap().iter().any(|id| id == name.id())
    });
    for (n, op) in ops.iter().enumerate() {
        let live = workers.len();
        match *op {
            Op::Store {
                worker,
                code,
                trace_len,
                timestamp,
            } if live > 0 => workers[worker % live].store(code, trace_len, timestamp),
            Op::Grow { worker, from } if live > 0 => {
                for code in from..from + 300 {
                    workers[worker % live].store(code, 8, 3.0);
                }
            }
            Op::Replace { worker } if live > 0 => {
                let worker = &workers[worker % live];
                let (_elsewhere, path) = other_file(&worker.name, 2.5);
                std::fs::rename(path, worker.exemplar_path(dir.path())).unwrap();
            }
            Op::Rewrite { worker } if live > 0 => {
                let worker = &mut workers[worker % live];
                worker.exemplars = None;
                let (_elsewhere, path) = other_file(&worker.name, 4.5);
                let bytes = std::fs::read(path).unwrap();
                std::fs::write(worker.exemplar_path(dir.path()), bytes).unwrap();
            }
            Op::RemoveExemplars { worker } if live > 0 => {
                let path = workers[worker % live].exemplar_path(dir.path());
                match std::fs::remove_file(path) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    other => other.unwrap(),
                }
            }
            Op::Remove { worker } if live > 0 => {
                let worker = workers.remove(worker % live);
                std::fs::remove_file(dir.path().join(worker.name.to_string())).unwrap();
                let _ = std::fs::remove_file(worker.exemplar_path(dir.path()));
            }
            Op::Exit { worker } if live > 0 => {
                let worker = workers.remove(worker % live);
                exited.lock().unwrap().push(worker.id.clone());
            }
            Op::Adopt { exited: at } => {
                let id = {
                    let mut exited = exited.lock().unwrap();
                    let len = exited.len();
                    (len > 0).then(|| exited.remove(at % len))
                };
                if let Some(id) = id {
                    workers.push(Worker::new(dir.path(), &id));
                }
            }
            Op::Add => {
                next_id += 1;
                workers.push(Worker::new(dir.path(), &next_id.to_string()));
            }
            Op::TextPoll => {
                mapped
                    .collect_for(|_| Arc::default(), None, Natives::Skip, Exemplars::Skip)
                    .unwrap();
            }
            _ => {}
        }
        // Read afresh first: its opens are events the long-lived collector
        // then sees (unsettling what they name); the collections after the
        // first are quiet ones, which take the last walk's steps again.
        let afresh = openmetrics(&DirCollector::new(dir.path()).map_files(false));
        for collection in 0..3 {
            let warm = openmetrics(&mapped);
            assert_eq!(
                warm, afresh,
                "after op {n}, collection {collection}: {op:?}"
            );
        }
    }
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/live_exemplars_ops.txt",
        ))),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn mapped_live_exemplar_files_give_what_reading_them_afresh_gives(
        ops in proptest::collection::vec(op(), 1..24),
        workers in 1u32..4,
    ) {
        run(&ops, workers);
    }
}
