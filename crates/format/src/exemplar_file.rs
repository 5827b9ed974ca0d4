//! Exemplar files: where multiprom's writers keep exemplars, their byte
//! layout, and reading them.
//!
//! Each `*.db` file that has exemplars has a companion in the `exemplars`
//! subdirectory: `counter_<id>.db` keeps its exemplars in
//! `exemplars/counter_<id>.exemplars`. `prometheus_client`'s collector
//! globs `*.db` in the top directory only and takes the metric type from
//! the file name, so it never opens these (a new `*.db` prefix in the top
//! directory would fail its every scrape); `mark_process_dead` globs by
//! name in the top directory too.
//!
//! ```text
//! offset 0   u32  used      bytes in use, including this 16-byte header
//! offset 4   [u8; 4] "MPEX" magic
//! offset 8   u32  version   1
//! offset 12  u32  zero
//! offset 16  entries back to back up to `used`; zero bytes after
//!
//! entry:  u32 key_len | key | pad (Python's rule) | record
//! record: u64 seq | u64 checksum | f64 value | f64 timestamp
//!         | u32 labels_len | u32 labels_capacity | labels (labels_capacity bytes)
//! labels: (u16 len | UTF-8 name | u16 len | UTF-8 value)*
//! ```
//!
//! Little-endian. The key is the `*.db` entry's key, byte for byte, so an
//! exemplar belongs to exactly one sample (a counter's `_total`, one
//! histogram bucket). A record has a fixed size, chosen when it is made: 128
//! bytes of labels (a trace id and a span id take 71), or 1024, enough for
//! any label set OpenMetrics allows. So one series costs one record however
//! often it is written: the latest exemplar replaces the previous one in
//! place. An exemplar too long for its record moves the series to a new
//! 1024-byte record at the end of the file; the old one is marked moved
//! (the top bit of `labels_len`) and skipped by readers.
//!
//! A record is written under a sequence number (odd while being written)
//! and sealed with an xxh3 checksum of the sequence number, value,
//! timestamp and labels. A reader accepts a record only with an even,
//! non-zero sequence number and a matching checksum, so a copy that raced a
//! writer (`pread` copies bytes in no promised order) is seen as torn and
//! read again, never taken: a reader gets the old exemplar or the new one.
//! Sequence number 0 is a record never written.

use std::path::{Path, PathBuf};

use crate::companion_file::{
    companion_file_name, db_name_of_companion, open_companion_for_read, read_companion_used,
    CompanionHeader,
};
use crate::error::{ReadError, ReadErrorKind};
use crate::exemplar::{decode_labels, decode_labels_into, Exemplar};
use crate::file_name::FileName;
use crate::layout::pad_len;
use crate::parse::ParseError;
use crate::read_map::MapView;

/// The subdirectory of a metrics directory that holds exemplar files.
pub const EXEMPLAR_DIR: &str = "exemplars";

/// The suffix of an exemplar file (never `.db`: a recursive glob for
/// `*.db` must not find it either).
pub const EXEMPLAR_SUFFIX: &str = ".exemplars";

/// Size of an exemplar file's header.
pub const EXEMPLAR_HEADER_LEN: usize = 16;

/// The magic bytes at offset 4.
pub const EXEMPLAR_MAGIC: [u8; 4] = *b"MPEX";

/// The layout version at offset 8.
pub const EXEMPLAR_VERSION: u32 = 1;

pub use crate::exemplar::LABELS_CAPACITY;

/// The labels capacity of a new record: a trace id and a span id fit.
pub const SMALL_LABELS_CAPACITY: usize = 128;

/// Bytes of a record before its labels.
pub const RECORD_HEADER_LEN: usize = 40;

/// The bit of `labels_len` that marks a record moved to a larger one.
pub(crate) const MOVED: u32 = 1 << 31;

/// Capacity of a fresh exemplar file; it doubles as it fills.
pub const EXEMPLAR_INITIAL_CAPACITY: u64 = 1 << 16;

/// The largest exemplar file a reader reads (a writer stops before): bounds
/// what one foreign or damaged file can cost a scrape.
pub const MAX_EXEMPLAR_FILE_LEN: u64 = 256 << 20;

/// How often a reader reads a file again while records in it are torn or
/// being written, before it leaves those records out of this read.
const READ_ATTEMPTS: usize = 3;

/// The exemplar file name of a `*.db` file name: `counter_7.exemplars`.
#[must_use]
pub fn exemplar_file_name(name: &FileName) -> String {
    companion_file_name(name, EXEMPLAR_SUFFIX)
}

/// Where the exemplars of `dir/name` are kept.
#[must_use]
pub fn exemplar_path(dir: &Path, name: &FileName) -> PathBuf {
    dir.join(EXEMPLAR_DIR).join(exemplar_file_name(name))
}

/// The `*.db` file name an exemplar file belongs to, if `name` is an
/// exemplar file name.
#[must_use]
pub fn db_name_of_exemplar_file(name: &str) -> Option<FileName> {
    db_name_of_companion(name, EXEMPLAR_SUFFIX)
}

/// Bytes of an entry whose key is `key_len` bytes long, with a record of
/// `labels_capacity` bytes of labels.
#[must_use]
pub const fn exemplar_entry_len(key_len: usize, labels_capacity: usize) -> usize {
    4 + key_len + pad_len(key_len) + RECORD_HEADER_LEN + labels_capacity
}

/// The header of a fresh exemplar file.
pub(crate) fn header_bytes(used: u32) -> [u8; EXEMPLAR_HEADER_LEN] {
    let mut header = [0u8; EXEMPLAR_HEADER_LEN];
    header[..4].copy_from_slice(&used.to_le_bytes());
    header[4..8].copy_from_slice(&EXEMPLAR_MAGIC);
    header[8..12].copy_from_slice(&EXEMPLAR_VERSION.to_le_bytes());
    header
}

/// The checksum that seals a record: xxh3 of the sequence number, value,
/// timestamp, labels' length (each little-endian) and labels. Hashed in
/// one call over a stack copy: xxh3's streaming state costs more to set up
/// than hashing the hundred bytes of a typical record.
pub(crate) fn checksum(seq: u64, value: u64, timestamp: u64, labels: &[u8]) -> u64 {
    fn sealed<const N: usize>(seq: u64, value: u64, timestamp: u64, labels: &[u8]) -> u64 {
        let mut bytes = [0u8; N];
        let len = labels.len().min(N - 28);
        bytes[..8].copy_from_slice(&seq.to_le_bytes());
        bytes[8..16].copy_from_slice(&value.to_le_bytes());
        bytes[16..24].copy_from_slice(&timestamp.to_le_bytes());
        bytes[24..28].copy_from_slice(&(len as u32).to_le_bytes());
        bytes[28..28 + len].copy_from_slice(&labels[..len]);
        xxhash_rust::xxh3::xxh3_64(&bytes[..28 + len])
    }
    // A small record's copy without zeroing a kilobyte first.
    if labels.len() <= SMALL_LABELS_CAPACITY {
        sealed::<{ 28 + SMALL_LABELS_CAPACITY }>(seq, value, timestamp, labels)
    } else {
        sealed::<{ 28 + LABELS_CAPACITY }>(seq, value, timestamp, labels)
    }
}

/// What a record holds, as a reader sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Record<'a> {
    /// Never written.
    Empty,
    /// Being written, or torn by a racing writer: read it again.
    Unsettled,
    /// Moved to a larger record further on.
    Moved,
    /// A whole exemplar: value, timestamp and the encoded labels.
    Whole {
        value: f64,
        timestamp: f64,
        labels: &'a [u8],
    },
}

/// Decodes a record from its bytes (header and labels area), checking its
/// seal unless `sealed` says these very bytes were checked already; the
/// labels stay encoded.
pub(crate) fn decode_record(bytes: &[u8], sealed: bool) -> Record<'_> {
    let word = |i: usize| {
        bytes
            .get(i * 8..i * 8 + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_le_bytes)
    };
    let seq = word(0);
    if seq == 0 {
        return Record::Empty;
    }
    let len_word = (word(4) & 0xffff_ffff) as u32;
    if len_word & MOVED != 0 {
        return Record::Moved;
    }
    let len = len_word as usize;
    let labels = match bytes.get(RECORD_HEADER_LEN..RECORD_HEADER_LEN + len) {
        Some(labels) if seq % 2 == 0 && len <= LABELS_CAPACITY => labels,
        _ => return Record::Unsettled,
    };
    if !sealed && checksum(seq, word(2), word(3), labels) != word(1) {
        return Record::Unsettled;
    }
    Record::Whole {
        value: f64::from_bits(word(2)),
        timestamp: f64::from_bits(word(3)),
        labels,
    }
}

/// One record holding an exemplar, borrowed from the bytes read: the key
/// and the timestamp without allocating, the exemplar decoded on demand.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExemplarRecord<'a> {
    /// The `*.db` entry's key, as stored.
    pub raw_key: &'a str,
    /// Byte offset of the entry.
    pub offset: u64,
    /// The value recorded with the exemplar.
    pub value: f64,
    /// Seconds since the epoch.
    pub timestamp: f64,
    labels: &'a [u8],
}

impl ExemplarRecord<'_> {
    /// The exemplar, its labels decoded; `None` if they are not labels
    /// multiprom encoded (a sealed record of a foreign writer).
    #[must_use]
    pub fn exemplar(&self) -> Option<Exemplar> {
        Some(Exemplar {
            labels: decode_labels(self.labels)?,
            value: self.value,
            timestamp: self.timestamp,
        })
    }
}

/// One entry of an exemplar file that holds an exemplar.
#[derive(Debug, Clone, PartialEq)]
pub struct ExemplarEntry {
    /// The `*.db` entry's key, as stored.
    pub raw_key: String,
    /// Byte offset of the entry.
    pub offset: u64,
    /// The exemplar.
    pub exemplar: Exemplar,
}

/// The exemplars of one file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExemplarFile {
    /// Entries holding an exemplar, in file order.
    pub entries: Vec<ExemplarEntry>,
    /// Entries left out because they were being written (or torn) in every
    /// read: they come with a later read.
    pub unsettled: usize,
}

impl ExemplarFile {
    /// Adds `record` as an owned entry (or counts it as not multiprom's).
    fn push(&mut self, record: ExemplarRecord<'_>) {
        match record.exemplar() {
            Some(exemplar) => self.entries.push(ExemplarEntry {
                raw_key: record.raw_key.to_owned(),
                offset: record.offset,
                exemplar,
            }),
            None => self.unsettled += 1,
        }
    }
}

/// Where the entries end: `used` from the header, checked against the file.
fn parse_exemplar_header(bytes: &[u8], file_size: u64) -> Result<usize, ParseError> {
    CompanionHeader {
        len: EXEMPLAR_HEADER_LEN,
        magic: EXEMPLAR_MAGIC,
        version: EXEMPLAR_VERSION,
        foreign: ReadErrorKind::NotAnExemplarFile,
    }
    .used(bytes, file_size)
}

/// Parses an exemplar file's bytes (at least its used region).
pub fn parse_exemplar_file(bytes: &[u8], file_size: u64) -> Result<ExemplarFile, ParseError> {
    let mut file = ExemplarFile::default();
    let unsettled = walk_exemplar_file(bytes, file_size, false, |record| file.push(record))?;
    file.unsettled += unsettled;
    Ok(file)
}

/// Walks an exemplar file's bytes, handing each whole record to `visit`;
/// returns how many records were being written (or torn). `sealed`: every
/// record of these very bytes was found whole by an earlier walk, so seals
/// are not checked again.
fn walk_exemplar_file<'a>(
    bytes: &'a [u8],
    file_size: u64,
    sealed: bool,
    mut visit: impl FnMut(ExemplarRecord<'a>),
) -> Result<usize, ParseError> {
    let used = parse_exemplar_header(bytes, file_size)?;
    let mut unsettled = 0;
    let mut at = EXEMPLAR_HEADER_LEN;
    while at < used {
        let entry = entry_at(bytes, at, used)?;
        match decode_record(&bytes[entry.record..entry.end], sealed) {
            Record::Empty | Record::Moved => {}
            Record::Unsettled => unsettled += 1,
            Record::Whole {
                value,
                timestamp,
                labels,
            } => visit(ExemplarRecord {
                raw_key: entry.key,
                offset: at as u64,
                value,
                timestamp,
                labels,
            }),
        }
        at = entry.end;
    }
    Ok(unsettled)
}

/// The entry at `at` of an exemplar file's bytes, whose entries end at
/// `used`: its framing checked (the key's length, the record's capacity,
/// the end within `used`, the key UTF-8). Every reader walks entries with
/// it.
struct EntryAt<'a> {
    key: &'a str,
    /// Where its record starts...
    record: usize,
    /// ...its labels' room...
    capacity: usize,
    /// ...and where the entry ends.
    end: usize,
}

fn entry_at(bytes: &[u8], at: usize, used: usize) -> Result<EntryAt<'_>, ParseError> {
    let fail = |kind| ParseError::new(at as u64, kind);
    let key_len = bytes
        .get(at..at + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or_else(|| fail(ReadErrorKind::UsedNotOnBoundary { used: used as u64 }))?;
    // The `*.db` files' limit: a longer key names no entry a reader takes.
    if key_len == 0 || key_len > used || key_len > crate::layout::MAX_KEY_LEN {
        return Err(fail(ReadErrorKind::BadKeyLength {
            len: key_len as i64,
        }));
    }
    let record = at + exemplar_entry_len(key_len, 0) - RECORD_HEADER_LEN;
    let capacity =
        record_capacity(bytes, record).ok_or_else(|| fail(ReadErrorKind::NotAnExemplarFile))?;
    let end = record + RECORD_HEADER_LEN + capacity;
    if end > used {
        return Err(fail(ReadErrorKind::EntryPastUsed {
            end: end as u64,
            used: used as u64,
        }));
    }
    let key = std::str::from_utf8(&bytes[at + 4..at + 4 + key_len])
        .map_err(|_| fail(ReadErrorKind::InvalidUtf8))?;
    Ok(EntryAt {
        key,
        record,
        capacity,
        end,
    })
}

/// Where an entry of an exemplar file lies. Fixed once written: a record
/// is rewritten in place, and a series moved to a larger record leaves the
/// old one marked moved and gets a new entry further on. So a reader that
/// keeps a file mapped parses its entries once, and reads each scrape only
/// the records ([`read_mapped_exemplar`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExemplarEntryLayout {
    /// The `*.db` entry's key, as stored.
    pub key: String,
    /// Byte offset of the entry.
    pub offset: usize,
    /// Byte offset of its record...
    pub record: usize,
    /// ...and the room for its labels.
    pub capacity: usize,
}

/// Appends to `layouts` the entries of an exemplar file's bytes that start
/// at or after `from`. `bytes` is the file's used region as read (header
/// included; the file is `file_size` bytes on disk): the header is checked
/// as a full read checks it, its `used` may have grown since the copy, and
/// entries are walked to the end of `bytes`, each framing checked; the
/// records are not read.
pub fn exemplar_entry_layouts(
    bytes: &[u8],
    file_size: u64,
    from: usize,
    layouts: &mut Vec<ExemplarEntryLayout>,
) -> Result<(), ParseError> {
    let used = parse_exemplar_header(bytes, file_size)?;
    if used < bytes.len() {
        return Err(ParseError::new(
            0,
            ReadErrorKind::UsedNotOnBoundary { used: used as u64 },
        ));
    }
    let used = bytes.len();
    let mut at = from.max(EXEMPLAR_HEADER_LEN);
    while at < used {
        let entry = entry_at(bytes, at, used)?;
        layouts.push(ExemplarEntryLayout {
            key: entry.key.to_owned(),
            offset: at,
            record: entry.record,
            capacity: entry.capacity,
        });
        at = entry.end;
    }
    Ok(())
}

/// What a record held when it was last read whole: its sequence number and
/// checksum. A writer takes the sequence number up with every store, and
/// the checksum covers it and the exemplar, so while both words still read
/// the same the record holds the same exemplar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordSeal {
    seq: u64,
    checksum: u64,
}

/// A record read through a map by [`read_mapped_exemplar`].
#[derive(Debug, Clone, PartialEq)]
pub enum MappedExemplar<'a> {
    /// It still holds what the seal it was read with sealed.
    Unchanged,
    /// A whole exemplar, with its seal, its labels still encoded (in the
    /// caller's buffer).
    Whole(RecordSeal, RecordedExemplar<'a>),
    /// Never written, or moved to a larger record.
    Absent,
    /// Being written, or torn by a racing writer: read it again.
    Unsettled,
}

/// A whole exemplar as a record holds it, its labels still encoded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RecordedExemplar<'a> {
    /// The value recorded with it.
    pub value: f64,
    /// Seconds since the epoch.
    pub timestamp: f64,
    labels: &'a [u8],
}

impl RecordedExemplar<'_> {
    /// The exemplar, its labels decoded; `None` if they are not labels
    /// multiprom encoded (a sealed record of a foreign writer).
    #[must_use]
    pub fn to_exemplar(&self) -> Option<Exemplar> {
        Some(Exemplar {
            labels: decode_labels(self.labels)?,
            value: self.value,
            timestamp: self.timestamp,
        })
    }

    /// Decodes it into `exemplar`, reusing its labels' strings (a reader
    /// that keeps each record's exemplar allocates nothing for one stored
    /// again); `false`, and `exemplar` left unspecified, if the labels are
    /// not labels multiprom encoded.
    pub fn decode_into(&self, exemplar: &mut Exemplar) -> bool {
        exemplar.value = self.value;
        exemplar.timestamp = self.timestamp;
        decode_labels_into(self.labels, &mut exemplar.labels)
    }
}

/// Reads the record at `record` (with `capacity` bytes of labels) of an
/// exemplar file mapped in `view`. With `seen` (the seal it had when last
/// read whole), a record still sealed so is [`MappedExemplar::Unchanged`]
/// after three word loads; any other is copied into `buf` and its seal
/// checked, as a `pread` of the file checks it. `None` if the record lies
/// outside the map.
pub fn read_mapped_exemplar<'a>(
    view: &MapView<'_>,
    record: usize,
    capacity: usize,
    seen: Option<RecordSeal>,
    buf: &'a mut Vec<u8>,
) -> Option<MappedExemplar<'a>> {
    let seq = view.u64_at(record)?;
    let checksum = view.u64_at(record + 8)?;
    let len_word = view.u64_at(record + 32)? as u32;
    if seq == 0 || len_word & MOVED != 0 {
        return Some(MappedExemplar::Absent);
    }
    if seen == Some(RecordSeal { seq, checksum }) {
        return Some(MappedExemplar::Unchanged);
    }
    buf.clear();
    if !view.copy_to(record, RECORD_HEADER_LEN + capacity, buf) {
        return None;
    }
    let bytes: &'a [u8] = buf;
    Some(match decode_record(bytes, false) {
        Record::Empty | Record::Moved => MappedExemplar::Absent,
        Record::Unsettled => MappedExemplar::Unsettled,
        Record::Whole {
            value,
            timestamp,
            labels,
        } => {
            let word = |i: usize| {
                let bytes = bytes.get(i * 8..i * 8 + 8).and_then(|b| b.try_into().ok());
                bytes.map_or(0, u64::from_le_bytes)
            };
            let seal = RecordSeal {
                seq: word(0),
                checksum: word(1),
            };
            MappedExemplar::Whole(
                seal,
                RecordedExemplar {
                    value,
                    timestamp,
                    labels,
                },
            )
        }
    })
}

/// The labels capacity of the record at `record`: a multiple of 8 up to
/// [`LABELS_CAPACITY`], or `None` (not a record multiprom wrote).
pub(crate) fn record_capacity(bytes: &[u8], record: usize) -> Option<usize> {
    let at = record + 36;
    let capacity = u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?) as usize;
    (capacity > 0 && capacity <= LABELS_CAPACITY && capacity.is_multiple_of(8)).then_some(capacity)
}

/// Reads an exemplar file. Records being written are read again (a few
/// times) and otherwise left out of this read, counted in
/// [`ExemplarFile::unsettled`]; a damaged file is an error, as for `*.db`
/// files, and so is one over [`MAX_EXEMPLAR_FILE_LEN`].
pub fn read_exemplar_file(path: &Path) -> Result<ExemplarFile, ReadError> {
    let mut buf = Vec::new();
    let mut file = ExemplarFile::default();
    let unsettled = read_exemplar_records(path, &mut buf, |record| file.push(record))?;
    file.unsettled += unsettled;
    Ok(file)
}

/// Reads an exemplar file into `buf` (reused across calls) and hands each
/// whole record to `visit`, borrowed from `buf`: what
/// [`read_exemplar_file`] does without allocating per entry. Returns the
/// number of records left out as being written.
pub fn read_exemplar_records<'a>(
    path: &Path,
    buf: &'a mut Vec<u8>,
    visit: impl FnMut(ExemplarRecord<'a>),
) -> Result<usize, ReadError> {
    let (file, size) = open_companion_for_read(path, MAX_EXEMPLAR_FILE_LEN)?;
    for attempt in 1..=READ_ATTEMPTS {
        read_companion_used(
            &file,
            path,
            size,
            buf,
            EXEMPLAR_HEADER_LEN,
            parse_exemplar_header,
        )?;
        // Seals checked first, so that only the last read's records are
        // visited; when all were whole, the visiting walk trusts them.
        let unsettled = walk_exemplar_file(buf, size, false, |_| {}).map_err(|e| e.at(path))?;
        if unsettled > 0 && attempt < READ_ATTEMPTS {
            std::thread::yield_now();
            continue;
        }
        let bytes: &'a [u8] = buf;
        return walk_exemplar_file(bytes, size, unsettled == 0, visit).map_err(|e| e.at(path));
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MetricKind;

    #[test]
    fn names_pair_with_db_files() {
        let name = FileName::new(MetricKind::Histogram, "42").unwrap();
        assert_eq!(exemplar_file_name(&name), "histogram_42.exemplars");
        assert_eq!(
            exemplar_path(Path::new("/m"), &name),
            Path::new("/m/exemplars/histogram_42.exemplars")
        );
        assert_eq!(
            db_name_of_exemplar_file("histogram_42.exemplars"),
            Some(name)
        );
        assert_eq!(db_name_of_exemplar_file("histogram_42.db"), None);
        assert_eq!(db_name_of_exemplar_file("app.exemplars"), None);
    }

    #[test]
    fn foreign_and_damaged_headers_are_errors() {
        let mut bytes = header_bytes(16).to_vec();
        assert_eq!(
            parse_exemplar_file(&bytes, 16).unwrap(),
            ExemplarFile::default()
        );
        bytes[4] = b'X';
        assert_eq!(
            parse_exemplar_file(&bytes, 16).unwrap_err().kind,
            ReadErrorKind::NotAnExemplarFile
        );
        let bytes = header_bytes(4000).to_vec();
        assert!(matches!(
            parse_exemplar_file(&bytes, 16).unwrap_err().kind,
            ReadErrorKind::UsedPastEnd { .. }
        ));
        assert_eq!(
            parse_exemplar_file(&[], 0).unwrap_err().kind,
            ReadErrorKind::Empty
        );
    }
}
