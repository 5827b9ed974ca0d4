//! Native histogram files: where multiprom's writers keep native
//! histograms, their byte layout, and reading them.
//!
//! They follow the exemplar files' design ([`crate::exemplar_file`]): the
//! histogram file `histogram_<id>.db` of a process that records native
//! histograms has a companion `native-histograms/histogram_<id>.native`,
//! keyed by the `*.db` key of the series (family and sample name both the
//! histogram's name, its labels, its help). `prometheus_client`'s
//! collector globs `*.db` in the top directory only, so it never sees them;
//! the classic part of the same histogram (`_bucket`, `_sum`; at least the
//! `+Inf` bucket) stays in the `*.db` file, where Python reads it.
//!
//! ```text
//! offset 0   u32  used      bytes in use, including this 16-byte header
//! offset 4   [u8; 4] "MPNH" magic
//! offset 8   u32  version   1
//! offset 12  u32  zero
//! offset 16  entries back to back up to `used`; zero bytes after
//!
//! entry:  u32 key_len | key | pad (Python's rule) | record
//! record: u32 flags | u32 capacity          flags bit 0: moved
//!         | i32 schema | u32 zero
//!         | f64 zero_threshold | u64 zero_count | u64 nan_count | f64 sum
//!         | u32 buckets_used | u32 zero
//!         | capacity x (u64 bucket | u64 count)
//! bucket: i32 index (low half) | u32 side (high half: 0 positive, 1 negative)
//! ```
//!
//! Little-endian, every word 8-aligned. A record has room for `capacity`
//! buckets, fixed when it is made (the writer's bucket limit). Its schema
//! and zero threshold never change in place: counts only grow, and a new
//! bucket is written before `buckets_used` is raised to cover it, so
//! whatever instant a reader copies the record at, it sees a histogram the
//! series really had (give or take the observations in flight). When a
//! new bucket finds no room, the writer lowers the schema (merging
//! neighbouring buckets, as client_golang does) into a new record at the
//! end of the file, then marks the old one moved. A key's last record is
//! its current one: a reader that copied the file between those two steps
//! sees both and takes the later.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, Ordering};

use crate::companion_file::{
    companion_file_name, db_name_of_companion, open_companion_for_read, read_companion_used,
    CompanionHeader,
};
use crate::error::{ReadError, ReadErrorKind};
use crate::file_name::FileName;
use crate::layout::pad_len;
use crate::native_buckets::{MAX_SCHEMA, MIN_SCHEMA};
use crate::native_histogram::NativeHistogram;
use crate::parse::ParseError;
use crate::read_map::MapView;

/// The subdirectory of a metrics directory that holds native histogram
/// files.
pub const NATIVE_HISTOGRAM_DIR: &str = "native-histograms";

/// The suffix of a native histogram file (never `.db`).
pub const NATIVE_HISTOGRAM_SUFFIX: &str = ".native";

/// Size of a native histogram file's header.
pub const NATIVE_HEADER_LEN: usize = 16;

/// The magic bytes at offset 4.
pub const NATIVE_MAGIC: [u8; 4] = *b"MPNH";

/// The layout version at offset 8.
pub const NATIVE_VERSION: u32 = 1;

/// Bytes of a record before its buckets.
pub const NATIVE_RECORD_HEADER_LEN: usize = 56;

/// Bytes of one bucket in a record.
pub const NATIVE_BUCKET_LEN: usize = 16;

/// The most buckets a record may have room for.
pub const MAX_NATIVE_BUCKETS: u32 = 1 << 16;

/// The bit of `flags` that marks a record moved to a new one.
pub(crate) const MOVED: u32 = 1;

/// Capacity of a fresh native histogram file; it doubles as it fills.
pub const NATIVE_INITIAL_CAPACITY: u64 = 1 << 16;

/// The largest native histogram file a reader reads (a writer stops
/// before): bounds what one foreign or damaged file can cost a scrape.
pub const MAX_NATIVE_FILE_LEN: u64 = 256 << 20;

/// Word offsets inside a record.
pub(crate) mod word {
    pub(crate) const FLAGS_CAPACITY: usize = 0;
    pub(crate) const SCHEMA: usize = 1;
    pub(crate) const ZERO_THRESHOLD: usize = 2;
    pub(crate) const ZERO_COUNT: usize = 3;
    pub(crate) const NAN_COUNT: usize = 4;
    pub(crate) const SUM: usize = 5;
    pub(crate) const BUCKETS_USED: usize = 6;
    pub(crate) const BUCKETS: usize = 7;
}

/// The native histogram file name of a `*.db` file name:
/// `histogram_7.native`.
#[must_use]
pub fn native_histogram_file_name(name: &FileName) -> String {
    companion_file_name(name, NATIVE_HISTOGRAM_SUFFIX)
}

/// Where the native histograms of `dir/name` are kept.
#[must_use]
pub fn native_histogram_path(dir: &Path, name: &FileName) -> PathBuf {
    dir.join(NATIVE_HISTOGRAM_DIR)
        .join(native_histogram_file_name(name))
}

/// The `*.db` file name a native histogram file belongs to, if `name` is a
/// native histogram file name.
#[must_use]
pub fn db_name_of_native_histogram_file(name: &str) -> Option<FileName> {
    db_name_of_companion(name, NATIVE_HISTOGRAM_SUFFIX)
}

/// Bytes of an entry whose key is `key_len` bytes long, with room for
/// `capacity` buckets.
#[must_use]
pub const fn native_entry_len(key_len: usize, capacity: usize) -> usize {
    4 + key_len + pad_len(key_len) + NATIVE_RECORD_HEADER_LEN + capacity * NATIVE_BUCKET_LEN
}

/// The header of a fresh native histogram file.
pub(crate) fn native_header_bytes(used: u32) -> [u8; NATIVE_HEADER_LEN] {
    let mut header = [0u8; NATIVE_HEADER_LEN];
    header[..4].copy_from_slice(&used.to_le_bytes());
    header[4..8].copy_from_slice(&NATIVE_MAGIC);
    header[8..12].copy_from_slice(&NATIVE_VERSION.to_le_bytes());
    header
}

/// A bucket's word: index in the low half, side in the high half.
pub(crate) fn bucket_word(index: i32, negative: bool) -> u64 {
    (u64::from(negative) << 32) | u64::from(index as u32)
}

/// The index and side of a bucket word; `None` if the side is neither.
pub(crate) fn decode_bucket_word(word: u64) -> Option<(i32, bool)> {
    let index = word as u32 as i32;
    match word >> 32 {
        0 => Some((index, false)),
        1 => Some((index, true)),
        _ => None,
    }
}

/// One series' native histogram, as read.
#[derive(Debug, Clone, PartialEq)]
pub struct NativeHistogramEntry {
    /// The series' key, as written (the `*.db` key form).
    pub raw_key: String,
    /// Byte offset of the series' current entry.
    pub offset: u64,
    /// Its histogram.
    pub histogram: NativeHistogram,
}

/// The native histograms of one file, one per series, in the order the
/// series first appear in it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NativeHistogramFile {
    /// One entry per series.
    pub entries: Vec<NativeHistogramEntry>,
}

/// Where the entries end: `used` from the header, checked against the file.
fn parse_native_header(bytes: &[u8], file_size: u64) -> Result<usize, ParseError> {
    CompanionHeader {
        len: NATIVE_HEADER_LEN,
        magic: NATIVE_MAGIC,
        version: NATIVE_VERSION,
        foreign: ReadErrorKind::NotANativeHistogramFile,
    }
    .used(bytes, file_size)
}

/// Parses a native histogram file's bytes (at least its used region).
///
/// A damaged entry ends the parse with an error: a file is the work of
/// one writer, and past a damaged entry nothing can be trusted.
pub fn parse_native_histogram_file(
    bytes: &[u8],
    file_size: u64,
) -> Result<NativeHistogramFile, ParseError> {
    let used = parse_native_header(bytes, file_size)?;
    let mut file = NativeHistogramFile::default();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut at = NATIVE_HEADER_LEN;
    while at < used {
        let record = parse_entry(bytes, at, used)?;
        if !record.moved {
            let entry = NativeHistogramEntry {
                raw_key: record.key.to_owned(),
                offset: at as u64,
                histogram: record.histogram,
            };
            // A key's last record is its current one.
            match seen.get(record.key) {
                Some(&i) => file.entries[i] = entry,
                None => {
                    seen.insert(record.key, file.entries.len());
                    file.entries.push(entry);
                }
            }
        }
        at = record.end;
    }
    Ok(file)
}

/// One entry, parsed.
pub(crate) struct ParsedRecord<'a> {
    pub(crate) key: &'a str,
    /// Where the record (after key and padding) starts.
    pub(crate) record: usize,
    pub(crate) moved: bool,
    pub(crate) histogram: NativeHistogram,
    /// Where the entry ends.
    pub(crate) end: usize,
}

/// Parses the entry at `at`, which must end by `used`.
pub(crate) fn parse_entry(
    bytes: &[u8],
    at: usize,
    used: usize,
) -> Result<ParsedRecord<'_>, ParseError> {
    let view = parse_record(bytes, at, used)?;
    Ok(ParsedRecord {
        key: view.key,
        record: view.record,
        moved: view.moved,
        histogram: view.to_histogram(),
        end: view.end,
    })
}

/// One record of a native histogram file, checked, its buckets left in
/// the file's bytes: what [`visit_native_histogram_file`] hands out.
#[derive(Debug, Clone, Copy)]
pub struct NativeRecord<'a> {
    key: &'a str,
    /// Where the record (after key and padding) starts.
    record: usize,
    moved: bool,
    /// Where the entry ends.
    end: usize,
    /// The schema.
    pub schema: i8,
    /// The zero bucket's upper bound.
    pub zero_threshold: f64,
    /// Observations in the zero bucket.
    pub zero_count: u64,
    /// NaN observations.
    pub nan_count: u64,
    /// The sum of the observations.
    pub sum: f64,
    /// The buckets in use, 16 bytes each, their sides checked.
    buckets: &'a [u8],
}

impl<'a> NativeRecord<'a> {
    /// The series' key, as written (the `*.db` key form).
    #[must_use]
    pub fn key(&self) -> &'a str {
        self.key
    }

    /// The buckets with observations, as `(index, negative, count)`, in
    /// the order they were made (not sorted; an index seen twice, which a
    /// writer never writes, is to be added up).
    pub fn buckets(&self) -> impl Iterator<Item = (i32, bool, u64)> + 'a {
        self.buckets
            .chunks_exact(NATIVE_BUCKET_LEN)
            .filter_map(|b| {
                let word = u64::from_le_bytes(b[..8].try_into().ok()?);
                let count = u64::from_le_bytes(b[8..].try_into().ok()?);
                if count == 0 {
                    return None;
                }
                let (index, negative) = decode_bucket_word(word)?;
                Some((index, negative, count))
            })
    }

    /// The histogram, its buckets sorted by index.
    #[must_use]
    pub fn to_histogram(&self) -> NativeHistogram {
        let mut histogram = NativeHistogram::empty(self.schema, self.zero_threshold);
        self.histogram_into(&mut histogram);
        histogram
    }

    /// Makes `into` the histogram (buckets sorted by index), reusing its
    /// bucket lists.
    pub fn histogram_into(&self, into: &mut NativeHistogram) {
        into.schema = self.schema;
        into.zero_threshold = self.zero_threshold;
        into.zero_count = self.zero_count;
        into.nan_count = self.nan_count;
        into.sum = self.sum;
        into.positive.clear();
        into.negative.clear();
        for (index, negative, count) in self.buckets() {
            if negative {
                into.negative.push((index, count));
            } else {
                into.positive.push((index, count));
            }
        }
        into.sort_buckets();
    }
}

/// Parses and checks the entry at `at`, which must end by `used`.
fn parse_record(bytes: &[u8], at: usize, used: usize) -> Result<NativeRecord<'_>, ParseError> {
    let fail = |kind| ParseError::new(at as u64, kind);
    let bad = |what| fail(ReadErrorKind::BadNativeHistogramRecord(what));
    let u32_at = |at: usize| {
        bytes
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |at: usize| {
        bytes
            .get(at..at + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
    };
    let key_len = u32_at(at)
        .ok_or_else(|| fail(ReadErrorKind::UsedNotOnBoundary { used: used as u64 }))?
        as usize;
    // The `*.db` files' limit: a longer key names no entry a reader takes.
    if key_len == 0 || key_len > used || key_len > crate::layout::MAX_KEY_LEN {
        return Err(fail(ReadErrorKind::BadKeyLength {
            len: key_len as i64,
        }));
    }
    let record = at + native_entry_len(key_len, 0) - NATIVE_RECORD_HEADER_LEN;
    let header_end = record + NATIVE_RECORD_HEADER_LEN;
    if header_end > used {
        return Err(fail(ReadErrorKind::EntryPastUsed {
            end: header_end as u64,
            used: used as u64,
        }));
    }
    let key = std::str::from_utf8(&bytes[at + 4..at + 4 + key_len])
        .map_err(|_| fail(ReadErrorKind::InvalidUtf8))?;
    let w = |n: usize| u64_at(record + n * 8).unwrap_or(0);
    let flags_capacity = w(word::FLAGS_CAPACITY);
    let flags = flags_capacity as u32;
    let capacity = (flags_capacity >> 32) as u32;
    if capacity == 0 || capacity > MAX_NATIVE_BUCKETS {
        return Err(bad("bucket capacity out of range"));
    }
    let capacity = capacity as usize;
    let end = header_end + capacity * NATIVE_BUCKET_LEN;
    if end > used {
        return Err(fail(ReadErrorKind::EntryPastUsed {
            end: end as u64,
            used: used as u64,
        }));
    }
    let schema = w(word::SCHEMA) as u32 as i32;
    if !(i32::from(MIN_SCHEMA)..=i32::from(MAX_SCHEMA)).contains(&schema) {
        return Err(bad("schema out of range"));
    }
    let zero_threshold = f64::from_bits(w(word::ZERO_THRESHOLD));
    if !(zero_threshold >= 0.0 && zero_threshold.is_finite()) {
        return Err(bad("zero threshold negative or not finite"));
    }
    let buckets_used = w(word::BUCKETS_USED) as u32 as usize;
    if buckets_used > capacity {
        return Err(bad("more buckets in use than the record has room for"));
    }
    // Only the buckets in use are looked at: the rest of the capacity is
    // zeros.
    let buckets = &bytes[header_end..header_end + buckets_used * NATIVE_BUCKET_LEN];
    for bucket in buckets.chunks_exact(NATIVE_BUCKET_LEN) {
        let mut half = [0u8; 8];
        half.copy_from_slice(&bucket[..8]);
        let mut count = [0u8; 8];
        count.copy_from_slice(&bucket[8..]);
        if u64::from_le_bytes(count) != 0 && decode_bucket_word(u64::from_le_bytes(half)).is_none()
        {
            return Err(bad("bucket of no side"));
        }
    }
    Ok(NativeRecord {
        key,
        record,
        moved: flags & MOVED != 0,
        end,
        schema: schema as i8,
        zero_threshold,
        zero_count: w(word::ZERO_COUNT),
        nan_count: w(word::NAN_COUNT),
        sum: f64::from_bits(w(word::SUM)),
        buckets,
    })
}

/// Where a record of a native histogram file lies, and what in it never
/// changes once written: what a reader that keeps the file mapped parses
/// once (see [`native_record_layouts`]), to read only the record's counts
/// afterwards ([`read_native_record_counts`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NativeRecordLayout {
    /// The series' key, as written (the `*.db` key form).
    pub key: String,
    /// Byte offset of the record (after key and padding).
    pub record: usize,
    /// Room for this many buckets.
    pub capacity: usize,
    /// The schema.
    pub schema: i8,
    /// The zero bucket's upper bound.
    pub zero_threshold: f64,
    /// Marked moved (a later record of the same key is current) when read.
    pub moved: bool,
}

/// Appends to `out` the layout of every record (moved ones too) of the
/// entries from byte `from` (an entry's start: [`NATIVE_HEADER_LEN`], or
/// where an earlier call ended) to `used`, checked as a visit checks them.
/// `bytes`: at least the file's first `used` bytes; its header's magic
/// and version are checked, its `used` is not (it may have grown since
/// `used` was read). Returns where the entries end, `used`. On an error
/// `out` holds the records before the bad one.
pub fn native_record_layouts(
    bytes: &[u8],
    from: usize,
    used: usize,
    out: &mut Vec<NativeRecordLayout>,
) -> Result<usize, ParseError> {
    if used > bytes.len() {
        return Err(ParseError::new(
            0,
            ReadErrorKind::UsedPastEnd {
                used: used as u64,
                size: bytes.len() as u64,
            },
        ));
    }
    let header = bytes.get(..NATIVE_HEADER_LEN).ok_or_else(|| {
        ParseError::new(
            0,
            ReadErrorKind::TooShort {
                size: bytes.len() as u64,
            },
        )
    })?;
    if header[4..8] != NATIVE_MAGIC || header[8..12] != NATIVE_VERSION.to_le_bytes() {
        return Err(ParseError::new(0, ReadErrorKind::NotANativeHistogramFile));
    }
    let mut at = from.max(NATIVE_HEADER_LEN);
    while at < used {
        let record = parse_record(bytes, at, used)?;
        out.push(NativeRecordLayout {
            key: record.key.to_owned(),
            record: record.record,
            capacity: (record.end - record.record - NATIVE_RECORD_HEADER_LEN) / NATIVE_BUCKET_LEN,
            schema: record.schema,
            zero_threshold: record.zero_threshold,
            moved: record.moved,
        });
        at = record.end;
    }
    Ok(at)
}

/// The fields of a record that change as observations arrive.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NativeCounts {
    /// Observations in the zero bucket.
    pub zero_count: u64,
    /// NaN observations.
    pub nan_count: u64,
    /// The sum of the observations.
    pub sum: f64,
}

/// Reads the counts of the record at byte `record` (with room for
/// `capacity` buckets, from its [`NativeRecordLayout`]) through `view`,
/// calling `bucket(index, negative, count)` for each of its buckets in use
/// with observations, in the order they were made, as
/// [`NativeRecord::buckets`] gives them. Only the header's words and the
/// buckets in use are loaded, each word whole, and nothing is copied: a
/// bucket's index word and its count share a cache line, so both are
/// loaded together (the index never changes once `buckets_used` covers it,
/// but remembering it between reads would cost loads of its own).
///
/// An error (buckets in use past the capacity, a count in a bucket of no
/// side, a record outside the map) says the file is damaged; `bucket` may
/// then have been called for some of the record's buckets.
pub fn read_native_record_counts(
    view: &MapView<'_>,
    record: usize,
    capacity: usize,
    mut bucket: impl FnMut(i32, bool, u64),
) -> Result<NativeCounts, ParseError> {
    let bad = |what| ParseError::new(record as u64, ReadErrorKind::BadNativeHistogramRecord(what));
    let outside = || bad("record outside the mapped file");
    let load = |n: usize| view.u64_at(record + n * 8).ok_or_else(outside);
    let used = load(word::BUCKETS_USED)? as u32 as usize;
    let counts = NativeCounts {
        zero_count: load(word::ZERO_COUNT)?,
        nan_count: load(word::NAN_COUNT)?,
        sum: f64::from_bits(load(word::SUM)?),
    };
    if used > capacity {
        return Err(bad("more buckets in use than the record has room for"));
    }
    // Pairs with the writer's release store of `buckets_used`: the buckets
    // it covers are read as written before it.
    fence(Ordering::Acquire);
    let every_side = view.u64_pairs_at(record + word::BUCKETS * 8, used, |word, count| {
        if count == 0 {
            return true;
        }
        match decode_bucket_word(word) {
            Some((index, negative)) => {
                bucket(index, negative, count);
                true
            }
            None => false,
        }
    });
    match every_side {
        Some(true) => Ok(counts),
        Some(false) => Err(bad("bucket of no side")),
        None => Err(outside()),
    }
}

/// Buffers [`visit_native_histogram_file`] reuses from one file to the
/// next.
#[derive(Debug, Default)]
pub struct NativeVisitScratch {
    /// Each current record's key hash and offset.
    current: Vec<(u64, usize)>,
    hashes: Vec<u64>,
}

/// Calls `visit` with each series' current record in a native histogram
/// file's bytes (at least its used region), in file order, borrowing
/// everything from `bytes`: no allocation once `scratch` has grown to the
/// file's size. The whole file is checked before the first call, so a
/// damaged file gives an error and no record, as
/// [`parse_native_histogram_file`] does.
pub fn visit_native_histogram_file<'a>(
    bytes: &'a [u8],
    file_size: u64,
    scratch: &mut NativeVisitScratch,
    mut visit: impl FnMut(NativeRecord<'a>),
) -> Result<(), ParseError> {
    let used = parse_native_header(bytes, file_size)?;
    scratch.current.clear();
    let mut at = NATIVE_HEADER_LEN;
    while at < used {
        let record = parse_record(bytes, at, used)?;
        if !record.moved {
            let hash = foldhash::quality::FixedState::with_seed(0).hash_one(record.key);
            scratch.current.push((hash, at));
        }
        at = record.end;
    }
    // A key with two current records: a writer moved it and had not yet
    // marked the old one when the bytes were copied. The later one counts.
    scratch.hashes.clear();
    scratch
        .hashes
        .extend(scratch.current.iter().map(|&(hash, _)| hash));
    scratch.hashes.sort_unstable();
    let twice = scratch.hashes.windows(2).any(|w| w[0] == w[1]);
    for (n, &(hash, at)) in scratch.current.iter().enumerate() {
        let record = parse_record(bytes, at, used)?;
        let superseded = twice
            && scratch.current[n + 1..].iter().any(|&(later, later_at)| {
                later == hash
                    && parse_record(bytes, later_at, used).is_ok_and(|r| r.key == record.key)
            });
        if !superseded {
            visit(record);
        }
    }
    Ok(())
}

/// Reads the native histogram file at `path`.
pub fn read_native_histogram_file(path: &Path) -> Result<NativeHistogramFile, ReadError> {
    let mut buf = Vec::new();
    read_native_histogram_file_into(path, &mut buf)
}

/// Reads the native histogram file at `path` with `buf` (reused across
/// calls) for its bytes.
pub fn read_native_histogram_file_into(
    path: &Path,
    buf: &mut Vec<u8>,
) -> Result<NativeHistogramFile, ReadError> {
    let size = read_native_histogram_bytes(path, buf)?;
    parse_native_histogram_file(buf, size).map_err(|e| e.at(path))
}

/// Reads the used bytes of the native histogram file at `path` into `buf`
/// (cleared first, reused across calls), its header checked: the file's
/// size, for [`visit_native_histogram_file`].
pub fn read_native_histogram_bytes(path: &Path, buf: &mut Vec<u8>) -> Result<u64, ReadError> {
    let (file, size) = open_companion_for_read(path, MAX_NATIVE_FILE_LEN)?;
    read_companion_used(
        &file,
        path,
        size,
        buf,
        NATIVE_HEADER_LEN,
        parse_native_header,
    )?;
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MetricKind;

    #[test]
    fn names_pair_with_db_files() {
        let name = FileName::new(MetricKind::Histogram, "42").unwrap();
        assert_eq!(native_histogram_file_name(&name), "histogram_42.native");
        assert_eq!(
            native_histogram_path(Path::new("/m"), &name),
            Path::new("/m/native-histograms/histogram_42.native")
        );
        assert_eq!(
            db_name_of_native_histogram_file("histogram_42.native"),
            Some(name)
        );
        assert_eq!(db_name_of_native_histogram_file("histogram_42.db"), None);
    }

    #[test]
    fn foreign_and_damaged_headers_are_errors() {
        let mut bytes = native_header_bytes(16).to_vec();
        assert_eq!(
            parse_native_histogram_file(&bytes, 16).unwrap(),
            NativeHistogramFile::default()
        );
        bytes[4] = b'X';
        assert_eq!(
            parse_native_histogram_file(&bytes, 16).unwrap_err().kind,
            ReadErrorKind::NotANativeHistogramFile
        );
        let bytes = native_header_bytes(4000).to_vec();
        assert!(matches!(
            parse_native_histogram_file(&bytes, 16).unwrap_err().kind,
            ReadErrorKind::UsedPastEnd { .. }
        ));
    }

    /// What a visit hands out, as histograms by key.
    fn visited(bytes: &[u8]) -> Result<Vec<(String, NativeHistogram)>, ParseError> {
        let mut out = Vec::new();
        let mut scratch = NativeVisitScratch::default();
        visit_native_histogram_file(bytes, bytes.len() as u64, &mut scratch, |record| {
            out.push((record.key().to_owned(), record.to_histogram()));
        })?;
        Ok(out)
    }

    /// A native histogram file in `dir` whose series (key, scale) each
    /// observe more buckets than a record has room for, so each moves to a
    /// new record: its path and bytes.
    fn with_moved_records(dir: &Path, series: &[(&str, f64)]) -> (PathBuf, Vec<u8>) {
        let name = FileName::new(MetricKind::Histogram, "3").unwrap();
        let writer = crate::NativeHistogramWriter::open(dir, &name).unwrap();
        let config = crate::NativeHistogramConfig {
            max_buckets: 4,
            ..crate::NativeHistogramConfig::default()
        };
        for &(key, scale) in series {
            let series = writer.series(key, config).unwrap();
            for n in 1..40 {
                series.observe(scale * f64::from(n) * 0.37);
            }
        }
        let path = native_histogram_path(dir, &name);
        let mut bytes = Vec::new();
        read_native_histogram_bytes(&path, &mut bytes).unwrap();
        (path, bytes)
    }

    #[test]
    fn a_visit_sees_what_a_parse_sees_and_a_half_done_move_once() {
        let dir = tempfile::tempdir().unwrap();
        let (_, mut bytes) = with_moved_records(dir.path(), &[("a", 1.0), ("b", -3.0)]);
        let parsed = parse_native_histogram_file(&bytes, bytes.len() as u64).unwrap();
        let expected: Vec<(String, NativeHistogram)> = parsed
            .entries
            .iter()
            .map(|e| (e.raw_key.clone(), e.histogram.clone()))
            .collect();
        assert_eq!(visited(&bytes).unwrap(), expected);
        // Unmark every moved record: as if copied before the writer
        // marked them. Each key still counts once, by its last record.
        let used = parse_native_header(&bytes, bytes.len() as u64).unwrap();
        let mut at = NATIVE_HEADER_LEN;
        let mut unmarked = 0;
        while at < used {
            let record = parse_record(&bytes, at, used).unwrap();
            let (moved, flags_at) = (record.moved, record.record);
            at = record.end;
            if moved {
                bytes[flags_at] &= !(MOVED as u8);
                unmarked += 1;
            }
        }
        assert!(unmarked > 0, "no record moved");
        let reparsed = parse_native_histogram_file(&bytes, bytes.len() as u64).unwrap();
        assert_eq!(reparsed, parsed);
        assert_eq!(visited(&bytes).unwrap(), expected);
        // A damaged record anywhere: an error, and nothing visited.
        bytes.truncate(used);
        let end = used as u32 + 8;
        bytes[..4].copy_from_slice(&end.to_le_bytes());
        bytes.extend_from_slice(&[7u8; 8]);
        assert!(visited(&bytes).is_err());
    }

    #[test]
    fn layouts_and_mapped_counts_give_what_a_parse_gives() {
        assert!(crate::read_map::guard_sigbus());
        let dir = tempfile::tempdir().unwrap();
        let (path, bytes) = with_moved_records(dir.path(), &[("a", 1.0), ("b", -3.0), ("c", 0.0)]);
        let parsed = parse_native_histogram_file(&bytes, bytes.len() as u64).unwrap();
        let used = bytes.len();
        // Parsed in two steps, as a reader that saw the file grow does.
        let mut layouts = Vec::new();
        let first = parse_record(&bytes, NATIVE_HEADER_LEN, used).unwrap().end;
        assert_eq!(
            native_record_layouts(&bytes, NATIVE_HEADER_LEN, first, &mut layouts).unwrap(),
            first
        );
        assert_eq!(layouts.len(), 1);
        assert_eq!(
            native_record_layouts(&bytes, first, used, &mut layouts).unwrap(),
            used
        );
        assert!(layouts.iter().any(|l| l.moved), "no record moved");
        let file = std::fs::File::open(&path).unwrap();
        let len = file.metadata().unwrap().len() as usize;
        let map = crate::read_map::ReadMap::new(&file, len).unwrap();
        let mut read: Vec<(String, NativeHistogram)> = Vec::new();
        for layout in layouts.iter().filter(|l| !l.moved) {
            let mut buckets = Vec::new();
            let counts = map
                .read(|view| {
                    read_native_record_counts(view, layout.record, layout.capacity, |i, n, c| {
                        buckets.push((i, n, c));
                    })
                })
                .unwrap()
                .unwrap();
            let mut histogram = NativeHistogram::empty(layout.schema, layout.zero_threshold);
            histogram.zero_count = counts.zero_count;
            histogram.nan_count = counts.nan_count;
            histogram.sum = counts.sum;
            for (index, negative, count) in buckets {
                let side = if negative {
                    &mut histogram.negative
                } else {
                    &mut histogram.positive
                };
                side.push((index, count));
            }
            histogram.sort_buckets();
            read.retain(|(key, _)| key != &layout.key);
            read.push((layout.key.clone(), histogram));
        }
        let expected: Vec<(String, NativeHistogram)> = parsed
            .entries
            .into_iter()
            .map(|e| (e.raw_key, e.histogram))
            .collect();
        assert_eq!(read, expected);
        // A record claiming more buckets in use than its room: damaged,
        // though every word it names lies in the file.
        let first = &layouts[0];
        let mut damaged = bytes.clone();
        let at = first.record + word::BUCKETS_USED * 8;
        damaged[at..at + 4].copy_from_slice(&(first.capacity as u32 + 1).to_le_bytes());
        let damaged_path = dir.path().join("damaged.native");
        std::fs::write(&damaged_path, &damaged).unwrap();
        let file = std::fs::File::open(&damaged_path).unwrap();
        let map = crate::read_map::ReadMap::new(&file, damaged.len()).unwrap();
        let result = map
            .read(|view| {
                read_native_record_counts(view, first.record, first.capacity, |_, _, _| {})
            })
            .unwrap();
        assert_eq!(
            result.unwrap_err().kind,
            ReadErrorKind::BadNativeHistogramRecord(
                "more buckets in use than the record has room for"
            )
        );
    }
}
