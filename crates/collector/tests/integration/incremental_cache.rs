//! Property test of the parse cache: random sequences of appends, value
//! updates, rewrites in place, replacements, truncations, damage, deletions
//! and collections leaving files out over a few files, after each of which
//! a long-lived `DirCollector` must agree with a fresh one and with
//! `merge_files` (see `support/dir_ops.rs`, which the `parse_cache` fuzz
//! target shares); once over those few files alone, once among enough more
//! that collections read ahead on other threads.
//!
//! Failures are persisted in `crates/collector/proptest-regressions/`
//! (commit that file: proptest replays it first on every run).

// Helpers outside `#[test]` functions: a panic is a failing test.
#![allow(clippy::unwrap_used)]

use crate::support::dir_ops::{
    check_sequence, pad, EntrySpec, KeySpec, Op, Reference, FILE_NAMES, MAX_LEN,
};
use multiprom_collector::CollectOptions;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

/// `cases` cases, failures persisted in `regressions` (a file per test, so
/// that neither replays the other's seeds).
fn config(cases: u32, regressions: &'static str) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(regressions))),
        ..ProptestConfig::default()
    }
}

/// Values writers store, plus the ones that only damage makes.
fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => (-3i32..10).prop_map(f64::from),
        1 => any::<f64>(),
        1 => Just(f64::NAN),
        1 => Just(-0.0),
    ]
}

/// Mostly keys Python writes: a bad entry spoils its file until the file is
/// rewritten, so bad ones (the vocabulary's last family and label values,
/// and raw bytes) are rare.
fn key() -> impl Strategy<Value = KeySpec> {
    let family = prop_oneof![19 => 0..3usize, 1 => Just(3usize)];
    let label_value = prop_oneof![19 => 0..7usize, 1 => 7..9usize];
    prop_oneof![
        29 => (
            family,
            0..5usize,
            proptest::collection::vec((0..4usize, label_value), 0..3),
            0..4usize,
        )
            .prop_map(|(family, suffix, labels, help)| KeySpec::Named {
                family,
                suffix,
                labels,
                help,
            }),
        1 => proptest::collection::vec(any::<u8>(), 0..24).prop_map(KeySpec::Raw),
    ]
}

fn entries() -> impl Strategy<Value = Vec<EntrySpec>> {
    proptest::collection::vec(
        (key(), value(), value()).prop_map(|(key, value, timestamp)| EntrySpec {
            key,
            value,
            timestamp,
        }),
        0..4,
    )
}

fn op() -> impl Strategy<Value = Op> {
    let file = 0..FILE_NAMES.len();
    prop_oneof![
        6 => (file.clone(), entries()).prop_map(|(file, entries)| Op::Append { file, entries }),
        6 => (file.clone(), any::<usize>(), value(), value()).prop_map(
            |(file, entry, value, timestamp)| Op::SetValue { file, entry, value, timestamp }
        ),
        2 => (file.clone(), entries(), 0..256u64)
            .prop_map(|(file, entries, spare)| Op::Rewrite { file, entries, spare }),
        2 => (file.clone(), entries(), 0..256u64)
            .prop_map(|(file, entries, spare)| Op::Replace { file, entries, spare }),
        1 => (file.clone(), 0..MAX_LEN).prop_map(|(file, len)| Op::Truncate { file, len }),
        // Small lengths and offsets, to cut through entries rather than past them.
        1 => (file.clone(), 0..400u64).prop_map(|(file, len)| Op::Truncate { file, len }),
        1 => (file.clone(), 0..400u64, proptest::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(file, offset, bytes)| Op::Damage { file, offset, bytes }),
        1 => file.prop_map(|file| Op::Delete { file }),
        1 => any::<u8>().prop_map(|files| Op::LeaveOut { files }),
    ]
}

/// Runs `ops` in a fresh temporary directory, among the padding files if
/// `padded`.
fn check(accumulate: bool, ops: &[Op], padded: bool) {
    let dir = tempfile::tempdir().unwrap();
    if padded {
        pad(dir.path()).unwrap();
    }
    check_sequence(
        dir.path(),
        CollectOptions::default().accumulate(accumulate),
        Reference::FreshCollectorAndMergeFiles,
        ops,
    );
}

proptest! {
    #![proptest_config(config(
        256,
        concat!(env!("CARGO_MANIFEST_DIR"), "/proptest-regressions/incremental_cache.txt"),
    ))]

    #[test]
    fn long_lived_collector_agrees_with_a_fresh_one(
        accumulate in any::<bool>(),
        ops in proptest::collection::vec(op(), 1..40),
    ) {
        check(accumulate, &ops, false);
    }
}

proptest! {
    // Fewer cases: each collection reads seventy files rather than five.
    #![proptest_config(config(
        48,
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/proptest-regressions/incremental_cache_read_ahead.txt"
        ),
    ))]

    /// The same, among enough files that the fresh collections (and the
    /// long-lived one's, whenever it reads that many) read ahead on other
    /// threads: files damaged, truncated, replaced and deleted between
    /// collections go through that path too.
    #[test]
    fn long_lived_collector_agrees_with_a_fresh_one_reading_ahead(
        accumulate in any::<bool>(),
        ops in proptest::collection::vec(op(), 1..40),
    ) {
        check(accumulate, &ops, true);
    }
}
