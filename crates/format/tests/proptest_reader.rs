//! Property tests for the reader: it never panics, never reads out of bounds
//! and agrees with itself, on arbitrary bytes and on damaged valid files; and
//! files written with `FileWriter` read back exactly.
//!
//! Failures are persisted in `crates/format/proptest-regressions/` (commit
//! that file: proptest replays it first on every run).

// Helpers outside `#[test]` functions: a panic is a failing test.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::Path;

use multiprom_format::layout::{self, HEADER_LEN};
use multiprom_format::{
    encode_key, parse_file, parse_header, read_file, EntryIter, FileContents, FileName, FileWriter,
    GaugeMode, MetricKind, ParseError,
};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/proptest-regressions/proptest_reader.txt"
        )))),
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------
// Invariants that hold for whatever the reader returns.

/// Walks `bytes[start..used]` and checks every yielded entry lies inside the
/// walked range, in order, and that the iterator stops after an error.
fn check_entry_iter(bytes: &[u8], start: usize, used: usize) {
    let limit = used.min(bytes.len());
    let mut iter = EntryIter::new(bytes, start, used);
    let mut last_end = start.max(HEADER_LEN) as u64;
    let mut failed = false;
    for item in iter.by_ref() {
        assert!(!failed, "EntryIter yielded after an error");
        match item {
            Ok(entry) => {
                assert_eq!(entry.offset, last_end, "entries are not back to back");
                let end = entry.end();
                assert!(end <= limit as u64, "entry ends at {end}, past {limit}");
                let vo = entry.value_offset() as usize;
                assert_eq!(vo + 16, end as usize);
                // The value and key are the bytes at the offsets reported.
                let value = f64::from_ne_bytes(bytes[vo..vo + 8].try_into().unwrap());
                assert_eq!(value.to_bits(), entry.value.to_bits());
                let ts = f64::from_ne_bytes(bytes[vo + 8..vo + 16].try_into().unwrap());
                assert_eq!(ts.to_bits(), entry.timestamp.to_bits());
                let k = entry.offset as usize + 4;
                assert_eq!(&bytes[k..k + entry.key.len()], entry.key.as_bytes());
                last_end = end;
            }
            Err(ParseError { offset, .. }) => {
                assert!(
                    offset <= bytes.len() as u64,
                    "error offset {offset} out of range"
                );
                failed = true;
            }
        }
    }
    assert!(iter.next().is_none(), "EntryIter resumed after finishing");
}

/// Checks what `parse_file` says about `bytes` against the bytes themselves.
fn check_parse(bytes: &[u8], file_size: u64) -> Result<FileContents, ParseError> {
    let result = parse_file(bytes, file_size);
    match &result {
        Ok(contents) => {
            let used = contents.header.used;
            assert!(used >= HEADER_LEN as u64 && used % 8 == 0);
            assert!(used <= file_size && used <= bytes.len() as u64);
            let mut end = HEADER_LEN as u64;
            for entry in &contents.entries {
                assert_eq!(entry.offset, end);
                assert_eq!(entry.value_offset() % 8, 0, "unaligned value");
                end = entry.value_offset() + 16;
                // The decoded key survives a round trip through the encoder.
                let again = multiprom_format::Key::decode(entry.key.encode().as_bytes());
                assert_eq!(again.as_ref(), Ok(&entry.key));
            }
            assert_eq!(end, used, "entries do not fill `used` exactly");
        }
        Err(err) => assert!(err.offset <= bytes.len().max(file_size as usize) as u64),
    }
    result
}

/// `FileContents` with floats as bits, so NaN compares equal to itself.
type Comparable = (
    u64,
    u64,
    Vec<(u64, String, multiprom_format::Key, u64, u64)>,
);

fn comparable(c: &FileContents) -> Comparable {
    (
        c.header.used,
        c.header.file_size,
        c.entries
            .iter()
            .map(|e| {
                (
                    e.offset,
                    e.raw_key.clone(),
                    e.key.clone(),
                    e.value.to_bits(),
                    e.timestamp.to_bits(),
                )
            })
            .collect(),
    )
}

/// `read_file` on a real file with these bytes agrees with `parse_file`.
fn check_read_file(dir: &Path, bytes: &[u8]) {
    let path = dir.join("counter_1.db");
    std::fs::write(&path, bytes).unwrap();
    let from_file = read_file(&path);
    let from_bytes = check_parse(bytes, bytes.len() as u64);
    match (from_file, from_bytes) {
        (Ok(a), Ok(b)) => assert_eq!(comparable(&a), comparable(&b)),
        (Err(a), Err(b)) => {
            assert_eq!(a.path, path);
            assert_eq!((a.offset, a.kind), (b.offset, b.kind));
        }
        (a, b) => panic!("read_file {a:?} but parse_file {b:?}"),
    }
}

/// Everything the reader offers, on one byte string.
fn check_all(dir: &Path, bytes: &[u8], start: usize, used: usize, file_size: u64) {
    let _ = parse_header(bytes, file_size);
    check_entry_iter(bytes, start, used);
    check_entry_iter(bytes, HEADER_LEN, used);
    if let Ok(header) = parse_header(bytes, bytes.len() as u64) {
        check_entry_iter(bytes, HEADER_LEN, header.used as usize);
    }
    let _ = check_parse(bytes, file_size);
    check_read_file(dir, bytes);
}

// ---------------------------------------------------------------------------
// Valid files, built with the real writer.

/// One series: the key's parts, its value and timestamp.
#[derive(Debug, Clone)]
struct Series {
    family: String,
    sample: String,
    labels: Vec<(String, String)>,
    help: String,
    value: f64,
    timestamp: f64,
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z_]{0,12}",
        2 => any::<String>().prop_map(|s| s.chars().take(24).collect()),
        1 => "[\"\\\\/\\x00-\\x1f\\x7f\u{80}\u{2028}\u{ffff}\u{10000}\u{10ffff}]{0,8}",
    ]
}

fn series() -> impl Strategy<Value = Series> {
    (
        text(),
        text(),
        prop::collection::vec((text(), text()), 0..4),
        text(),
        any::<u64>().prop_map(f64::from_bits),
        prop_oneof![Just(0.0), any::<f64>()],
    )
        .prop_map(|(family, sample, labels, help, value, timestamp)| Series {
            family,
            sample,
            labels,
            help,
            value,
            timestamp,
        })
}

fn kind() -> impl Strategy<Value = MetricKind> {
    prop_oneof![
        Just(MetricKind::Counter),
        Just(MetricKind::Histogram),
        Just(MetricKind::Summary),
        prop::sample::select(GaugeMode::ALL.to_vec()).prop_map(MetricKind::Gauge),
    ]
}

/// Writes `series` with `FileWriter`; returns the path and the expected
/// entries in file order (a key written twice keeps its first place and its
/// last value).
fn write_file(
    dir: &Path,
    kind: MetricKind,
    series: &[Series],
) -> (std::path::PathBuf, Vec<(String, f64, f64)>) {
    let name = FileName::new(kind, "7").unwrap();
    let mut writer = FileWriter::open(dir, &name).unwrap();
    let mut expected: Vec<(String, f64, f64)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for s in series {
        let key = encode_key(
            &s.family,
            &s.sample,
            s.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            &s.help,
        );
        writer
            .slot(&key)
            .unwrap()
            .set_with_timestamp(s.value, s.timestamp);
        match index.get(&key) {
            Some(&i) => {
                expected[i].1 = s.value;
                expected[i].2 = s.timestamp;
            }
            None => {
                index.insert(key.clone(), expected.len());
                expected.push((key, s.value, s.timestamp));
            }
        }
    }
    assert_eq!(writer.len(), expected.len());
    (writer.path().to_path_buf(), expected)
}

fn assert_round_trip(path: &Path, expected: &[(String, f64, f64)]) -> FileContents {
    let contents = read_file(path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(contents.entries.len(), expected.len());
    for (entry, (key, value, timestamp)) in contents.entries.iter().zip(expected) {
        assert_eq!(&entry.raw_key, key);
        assert_eq!(entry.key.encode(), *key);
        assert_eq!(entry.value.to_bits(), value.to_bits());
        assert_eq!(entry.timestamp.to_bits(), timestamp.to_bits());
    }
    assert_eq!(
        contents.header.file_size,
        std::fs::metadata(path).unwrap().len()
    );
    contents
}

// ---------------------------------------------------------------------------
// Damage done to a valid file.

#[derive(Debug, Clone)]
enum Mutation {
    /// Flip one bit, somewhere in the used region (the index is taken modulo).
    FlipBit { index: usize, bit: u8 },
    /// Overwrite one byte anywhere in the file.
    SetByte { index: usize, byte: u8 },
    /// Cut the file short (the length is taken modulo the length + 1).
    Truncate { len: usize },
    /// Cut the file at or just around an entry boundary.
    TruncateNearEntry { entry: usize, delta: i8 },
    /// Set `used` to anything.
    SetUsed { used: i32 },
    /// Move `used` a little.
    NudgeUsed { delta: i16 },
    /// Set one entry's key length to anything.
    SetKeyLen { entry: usize, len: i32 },
    /// Move one entry's key length a little.
    NudgeKeyLen { entry: usize, delta: i8 },
    /// Append garbage.
    Append { bytes: Vec<u8> },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<usize>(), 0u8..8).prop_map(|(index, bit)| Mutation::FlipBit { index, bit }),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(index, byte)| Mutation::SetByte { index, byte }),
        1 => any::<usize>().prop_map(|len| Mutation::Truncate { len }),
        1 => (any::<usize>(), -9i8..=9).prop_map(|(entry, delta)| Mutation::TruncateNearEntry { entry, delta }),
        1 => any::<i32>().prop_map(|used| Mutation::SetUsed { used }),
        2 => (-64i16..=64).prop_map(|delta| Mutation::NudgeUsed { delta }),
        1 => (any::<usize>(), any::<i32>()).prop_map(|(entry, len)| Mutation::SetKeyLen { entry, len }),
        2 => (any::<usize>(), -9i8..=9).prop_map(|(entry, delta)| Mutation::NudgeKeyLen { entry, delta }),
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(|bytes| Mutation::Append { bytes }),
    ]
}

fn read_i32(bytes: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn write_i32(bytes: &mut [u8], at: usize, v: i32) {
    if let Some(slot) = bytes.get_mut(at..at + 4) {
        slot.copy_from_slice(&v.to_ne_bytes());
    }
}

fn apply(bytes: &mut Vec<u8>, entry_offsets: &[usize], mutation: &Mutation) {
    let used = read_i32(bytes, 0).map_or(bytes.len(), |u| (u.max(0) as usize).min(bytes.len()));
    let pick_entry = |i: usize| -> Option<usize> {
        (!entry_offsets.is_empty()).then(|| entry_offsets[i % entry_offsets.len()])
    };
    match mutation {
        Mutation::FlipBit { index, bit } => {
            if used > 0 {
                bytes[index % used] ^= 1 << bit;
            }
        }
        Mutation::SetByte { index, byte } => {
            if !bytes.is_empty() {
                let i = index % bytes.len();
                bytes[i] = *byte;
            }
        }
        Mutation::Truncate { len } => bytes.truncate(len % (bytes.len() + 1)),
        Mutation::TruncateNearEntry { entry, delta } => {
            let at = pick_entry(*entry).unwrap_or(used) as i64 + i64::from(*delta);
            bytes.truncate(at.max(0) as usize);
        }
        Mutation::SetUsed { used } => write_i32(bytes, 0, *used),
        Mutation::NudgeUsed { delta } => {
            if let Some(u) = read_i32(bytes, 0) {
                write_i32(bytes, 0, u.wrapping_add(i32::from(*delta)));
            }
        }
        Mutation::SetKeyLen { entry, len } => {
            if let Some(at) = pick_entry(*entry) {
                write_i32(bytes, at, *len);
            }
        }
        Mutation::NudgeKeyLen { entry, delta } => {
            if let Some(at) = pick_entry(*entry) {
                if let Some(len) = read_i32(bytes, at) {
                    write_i32(bytes, at, len.wrapping_add(i32::from(*delta)));
                }
            }
        }
        Mutation::Append { bytes: extra } => bytes.extend_from_slice(extra),
    }
}

// ---------------------------------------------------------------------------
// The properties.

proptest! {
    #![proptest_config(config(512))]

    /// Arbitrary bytes, and arbitrary bytes behind a plausible header.
    #[test]
    fn reader_never_panics_on_arbitrary_bytes(
        mut bytes in prop::collection::vec(any::<u8>(), 0..600),
        plausible_used in any::<bool>(),
        start in prop_oneof![Just(HEADER_LEN), any::<usize>(), 0usize..64],
        used in prop_oneof![any::<usize>(), 0usize..700],
        file_size in prop_oneof![any::<u64>(), 0u64..700],
    ) {
        if plausible_used && bytes.len() >= 8 {
            let used = (bytes.len() / 8 * 8) as i32;
            bytes[..4].copy_from_slice(&used.to_ne_bytes());
        }
        let dir = tempfile::tempdir().unwrap();
        check_all(dir.path(), &bytes, start, used, file_size);
        check_all(dir.path(), &bytes, start, used, bytes.len() as u64);
    }

    /// Arbitrary entries written by `FileWriter` read back exactly, through
    /// `read_file`, `parse_file` and `EntryIter`; reopening continues them.
    #[test]
    fn valid_files_round_trip(kind in kind(), series in prop::collection::vec(series(), 0..40)) {
        let dir = tempfile::tempdir().unwrap();
        let (path, expected) = write_file(dir.path(), kind, &series);
        let contents = assert_round_trip(&path, &expected);
        let bytes = std::fs::read(&path).unwrap();
        prop_assert_eq!(
            comparable(&check_parse(&bytes, bytes.len() as u64).unwrap()),
            comparable(&contents)
        );
        check_entry_iter(&bytes, HEADER_LEN, contents.header.used as usize);

        // Reopening finds every entry and appends nothing for known keys.
        let name = FileName::new(kind, "7").unwrap();
        let mut writer = FileWriter::open(dir.path(), &name).unwrap();
        prop_assert_eq!(writer.len(), expected.len());
        for (key, value, _) in &expected {
            let slot = writer.slot(key).unwrap();
            prop_assert_eq!(slot.get().to_bits(), value.to_bits());
        }
        prop_assert_eq!(writer.used() as u64, contents.header.used);
    }

    /// Damaged valid files: any sequence of bit flips, truncations, `used`
    /// and key-length changes. The reader returns an error or entries that
    /// are really there; the writer refuses or continues, but never panics.
    #[test]
    fn reader_never_panics_on_damaged_files(
        kind in kind(),
        series in prop::collection::vec(series(), 0..12),
        mutations in prop::collection::vec(mutation(), 1..5),
        start in prop_oneof![Just(HEADER_LEN), 0usize..256],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (path, expected) = write_file(dir.path(), kind, &series);
        let contents = assert_round_trip(&path, &expected);
        let offsets: Vec<usize> = contents.entries.iter().map(|e| e.offset as usize).collect();
        let mut bytes = std::fs::read(&path).unwrap();
        for m in &mutations {
            apply(&mut bytes, &offsets, m);
        }
        let used = read_i32(&bytes, 0).map_or(0, |u| u as usize);
        let scratch = tempfile::tempdir().unwrap();
        check_all(scratch.path(), &bytes, start, used, bytes.len() as u64);

        // The writer on the damaged file: refuses it, or continues it so
        // that old and new entries are all readable.
        std::fs::write(&path, &bytes).unwrap();
        let name = FileName::new(kind, "7").unwrap();
        if let Ok(mut writer) = FileWriter::open(dir.path(), &name) {
            let before = writer.len();
            let key = encode_key("appended", "appended", [("after", "damage")], "");
            let fresh = writer.get(&key).is_none();
            writer.slot(&key).unwrap().set(42.0);
            prop_assert_eq!(writer.len(), before + usize::from(fresh));
            let bytes = std::fs::read(&path).unwrap();
            let header = parse_header(&bytes, bytes.len() as u64).unwrap();
            prop_assert_eq!(header.used, writer.used() as u64);
            let framed: Result<Vec<_>, _> =
                EntryIter::new(&bytes, HEADER_LEN, header.used as usize).collect();
            let framed = framed.unwrap();
            // (A bit flip may have made two keys equal: count distinct keys.)
            let distinct: std::collections::HashSet<&str> = framed.iter().map(|e| e.key).collect();
            prop_assert_eq!(distinct.len(), writer.len());
            prop_assert_eq!(framed.iter().rev().find(|e| e.key == key).map(|e| e.value), Some(42.0));
        }
    }
}

proptest! {
    #![proptest_config(config(6))]

    /// Files that grow past 64 KiB (several doublings) still round-trip, and
    /// every way of cutting them short is an error, never a panic.
    #[test]
    fn grown_files_round_trip(
        kind in kind(),
        series in prop::collection::vec(series(), 900..1500),
        cut in any::<usize>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let long_help = "h".repeat(100);
        let series: Vec<Series> = series
            .into_iter()
            .map(|s| Series { help: format!("{}{long_help}", s.help), ..s })
            .collect();
        let (path, expected) = write_file(dir.path(), kind, &series);
        let contents = assert_round_trip(&path, &expected);
        prop_assert!(contents.header.file_size > layout::INITIAL_CAPACITY);
        prop_assert!(contents.header.file_size.is_power_of_two());
        let bytes = std::fs::read(&path).unwrap();
        let used = contents.header.used as usize;
        let cut_at = cut % used;
        let scratch = tempfile::tempdir().unwrap();
        check_all(scratch.path(), &bytes[..cut_at], HEADER_LEN, used, bytes.len() as u64);
        prop_assert!(parse_file(&bytes[..cut_at], cut_at as u64).is_err());
    }
}
