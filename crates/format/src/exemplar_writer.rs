//! Writing exemplar files (layout: [`crate::exemplar_file`]).
//!
//! One process owns a file, as for `*.db` files; threads of that process
//! store through [`ExemplarSlot`]s without a lock. A store takes the
//! record's sequence number from even to odd with a compare-and-swap, so
//! two threads never write one record at once: the one that loses the race
//! drops its exemplar (the two were recorded at the same moment, and a
//! series keeps only its latest anyway) rather than wait.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use arc_swap::ArcSwap;

use crate::companion_file::{grow_companion, open_companion, OpenedCompanion};
use crate::error::WriteError;
use crate::exemplar::{decode_labels, encode_labels, Exemplar, ExemplarError};
use crate::exemplar_file::{
    checksum, decode_record, exemplar_entry_len, exemplar_path, header_bytes, parse_exemplar_file,
    record_capacity, Record, EXEMPLAR_HEADER_LEN, EXEMPLAR_INITIAL_CAPACITY, LABELS_CAPACITY,
    MAX_EXEMPLAR_FILE_LEN, MOVED, RECORD_HEADER_LEN, SMALL_LABELS_CAPACITY,
};
use crate::file_name::FileName;
use crate::mapping::Mapping;

/// Word index of the labels' length (low half) and capacity (high half).
const LEN_WORD: usize = 4;
/// Word index where the labels start.
const LABELS_WORD: usize = RECORD_HEADER_LEN / 8;

/// The exemplar file of one `*.db` file, owned by this process.
#[derive(Debug)]
pub struct ExemplarWriter {
    inner: Arc<Mutex<WriterInner>>,
}

/// The file, its mapping and the slot of every key, shared by the writer
/// and its slots (a slot moves its series to a larger record through it).
#[derive(Debug)]
struct WriterInner {
    path: PathBuf,
    file: File,
    mapping: Arc<Mapping>,
    used: usize,
    capacity: u64,
    slots: HashMap<Box<str>, ExemplarSlot>,
}

impl ExemplarWriter {
    /// Opens the exemplar file of `dir/name` (`dir/exemplars/...`), creating
    /// the subdirectory and the file if they do not exist. An existing file
    /// (a reused pid) is continued.
    pub fn open(dir: &Path, name: &FileName) -> Result<ExemplarWriter, WriteError> {
        let path = exemplar_path(dir, name);
        let header = header_bytes(EXEMPLAR_HEADER_LEN as u32);
        let OpenedCompanion {
            file,
            bytes,
            capacity,
        } = open_companion(
            &path,
            &header,
            EXEMPLAR_INITIAL_CAPACITY,
            MAX_EXEMPLAR_FILE_LEN,
        )?;
        // Refuse anything that is not a whole exemplar file: appending
        // after garbage would hide every later exemplar from readers.
        parse_exemplar_file(&bytes, capacity).map_err(|e| e.at(&path))?;
        let used = read_used(&bytes);
        let mapping =
            Arc::new(Mapping::new(&file, capacity).map_err(|e| WriteError::io(&path, e))?);
        let inner = Arc::new(Mutex::new(WriterInner {
            path,
            file,
            mapping,
            used,
            capacity,
            slots: HashMap::new(),
        }));
        // Index every entry (a moved record's key comes again further on),
        // and clear records a killed writer left half written (odd sequence
        // number): nobody else writes this file, and a store waits for no
        // odd record.
        {
            let mut guard = lock(&inner);
            let state = &mut *guard;
            let mut at = EXEMPLAR_HEADER_LEN;
            while at < used {
                let key_len =
                    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
                        as usize;
                let record = at + exemplar_entry_len(key_len, 0) - RECORD_HEADER_LEN;
                // Checked by the parse above.
                let labels_capacity = record_capacity(&bytes, record).unwrap_or(LABELS_CAPACITY);
                let key = String::from_utf8_lossy(&bytes[at + 4..at + 4 + key_len]).into_owned();
                let slot = ExemplarSlot::new(&inner, state, &key, record, labels_capacity)?;
                if let Some(words) = slot.record.load().words() {
                    let seq = words[0].load(Ordering::Relaxed);
                    if seq % 2 == 1 {
                        words[0].store(0, Ordering::Relaxed);
                    }
                    let moved = (words[LEN_WORD].load(Ordering::Relaxed) as u32) & MOVED != 0;
                    if !moved {
                        state.slots.insert(key.into(), slot);
                    }
                }
                at = record + RECORD_HEADER_LEN + labels_capacity;
            }
        }
        Ok(ExemplarWriter { inner })
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> PathBuf {
        lock(&self.inner).path.clone()
    }

    /// The slot of `key` (the `*.db` entry's encoded key), appending an
    /// empty record if there is none.
    pub fn slot(&self, key: &str) -> Result<ExemplarSlot, WriteError> {
        let mut state = lock(&self.inner);
        if let Some(slot) = state.slots.get(key) {
            return Ok(slot.clone());
        }
        let record = state.append(key, SMALL_LABELS_CAPACITY)?;
        let slot = ExemplarSlot::new(&self.inner, &state, key, record, SMALL_LABELS_CAPACITY)?;
        state.slots.insert(key.into(), slot.clone());
        Ok(slot)
    }
}

fn lock(inner: &Mutex<WriterInner>) -> MutexGuard<'_, WriterInner> {
    // Nothing panics with the state half updated; a panic elsewhere must
    // not end exemplars.
    inner.lock().unwrap_or_else(PoisonError::into_inner)
}

impl WriterInner {
    /// Appends an entry for `key` with an empty record of `labels_capacity`
    /// bytes of labels; returns the record's offset.
    fn append(&mut self, key: &str, labels_capacity: usize) -> Result<usize, WriteError> {
        let key_len = key.len();
        let entry_len = exemplar_entry_len(key_len, labels_capacity);
        let needed = self.used as u64 + entry_len as u64;
        if needed > MAX_EXEMPLAR_FILE_LEN || u32::try_from(key_len).is_err() {
            return Err(WriteError::FileFull {
                path: self.path.clone(),
            });
        }
        if needed > self.capacity {
            self.grow(needed)?;
        }
        let head_len = entry_len - labels_capacity;
        let mut entry = Vec::with_capacity(head_len);
        entry.extend_from_slice(&(key_len as u32).to_le_bytes());
        entry.extend_from_slice(key.as_bytes());
        entry.resize(entry.len() + crate::layout::pad_len(key_len), b' ');
        // The record: sequence number 0 (never written), its capacity.
        entry.resize(entry.len() + 36, 0);
        entry.extend_from_slice(&(labels_capacity as u32).to_le_bytes());
        let offset = self.used;
        self.mapping.write_bytes(offset, &entry);
        self.used += entry_len;
        // Publish after the entry: a reader that sees the new `used` sees
        // the whole entry.
        self.mapping.publish_used(self.used as u32);
        Ok(offset + head_len - RECORD_HEADER_LEN)
    }

    /// Doubles the capacity until `needed` bytes fit.
    fn grow(&mut self, needed: u64) -> Result<(), WriteError> {
        let (capacity, mapping) = grow_companion(
            &self.file,
            &self.path,
            self.capacity,
            needed,
            MAX_EXEMPLAR_FILE_LEN,
        )?;
        self.mapping = mapping;
        self.capacity = capacity;
        Ok(())
    }
}

fn read_used(bytes: &[u8]) -> usize {
    bytes.get(..4).map_or(EXEMPLAR_HEADER_LEN, |b| {
        u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize
    })
}

/// Where a series' exemplar is: a record in one of the file's mappings.
#[derive(Debug)]
struct RecordAt {
    mapping: Arc<Mapping>,
    offset: usize,
    labels_capacity: usize,
}

impl RecordAt {
    fn words(&self) -> Option<&[AtomicU64]> {
        self.mapping
            .words(self.offset, (RECORD_HEADER_LEN + self.labels_capacity) / 8)
    }
}

/// A lock-free handle to one series' exemplar record.
///
/// Cloning is cheap, and clones share the record: when an exemplar
/// outgrows it, the series moves to a larger record for every clone. The
/// handle keeps its mapping alive (as a [`crate::ValueSlot`] does), so it
/// stays valid when the file grows.
#[derive(Clone)]
pub struct ExemplarSlot {
    record: Arc<ArcSwap<RecordAt>>,
    key: Arc<str>,
    writer: Weak<Mutex<WriterInner>>,
}

impl std::fmt::Debug for ExemplarSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExemplarSlot")
            .field("offset", &self.record.load().offset)
            .field("exemplar", &self.load())
            .finish()
    }
}

/// What became of a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// The record holds the new exemplar.
    Stored,
    /// Another thread of this process was storing into the same record at
    /// that moment (or the file could not take a larger record); this
    /// exemplar was dropped.
    Busy,
}

impl ExemplarSlot {
    fn new(
        inner: &Arc<Mutex<WriterInner>>,
        state: &WriterInner,
        key: &str,
        offset: usize,
        labels_capacity: usize,
    ) -> Result<ExemplarSlot, WriteError> {
        let record = RecordAt {
            mapping: Arc::clone(&state.mapping),
            offset,
            labels_capacity,
        };
        if record.words().is_none() {
            return Err(WriteError::FileFull {
                path: state.path.clone(),
            });
        }
        Ok(ExemplarSlot {
            record: Arc::new(ArcSwap::from_pointee(record)),
            key: key.into(),
            writer: Arc::downgrade(inner),
        })
    }

    /// Stores an exemplar, replacing the one before. Labels over
    /// OpenMetrics' 128 code points are refused.
    pub fn store<'a>(
        &self,
        labels: impl IntoIterator<Item = (&'a str, &'a str)>,
        value: f64,
        timestamp: f64,
    ) -> Result<Stored, ExemplarError> {
        let mut area = [0u8; LABELS_CAPACITY];
        let len = encode_labels(labels, &mut area)?;
        let mut record = self.record.load_full();
        if len > record.labels_capacity {
            match self.move_to_larger_record() {
                Some(larger) => record = larger,
                None => return Ok(Stored::Busy),
            }
        }
        Ok(store_into(&record, &area[..len], value, timestamp))
    }

    /// Moves the series to a new record with room for any label set, and
    /// marks the old one moved. `None` if the file cannot take it.
    #[cold]
    fn move_to_larger_record(&self) -> Option<Arc<RecordAt>> {
        let inner = self.writer.upgrade()?;
        let mut state = lock(&inner);
        let current = self.record.load_full();
        // Another clone may have moved it meanwhile.
        if current.labels_capacity == LABELS_CAPACITY {
            return Some(current);
        }
        let offset = state.append(&self.key, LABELS_CAPACITY).ok()?;
        let larger = Arc::new(RecordAt {
            mapping: Arc::clone(&state.mapping),
            offset,
            labels_capacity: LABELS_CAPACITY,
        });
        larger.words()?;
        self.record.store(Arc::clone(&larger));
        // Readers skip the old record from now on; a store racing this one
        // into the old record sees the mark and goes to the new one.
        if let Some(words) = current.words() {
            let seq = &words[0];
            // Whoever holds it odd (another thread's store) finishes within
            // a few stores.
            let even = loop {
                let even = seq.load(Ordering::Relaxed) & !1;
                if seq
                    .compare_exchange_weak(even, even + 1, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                {
                    break even;
                }
                std::hint::spin_loop();
            };
            fence(Ordering::Release);
            let word = words[LEN_WORD].load(Ordering::Relaxed);
            words[LEN_WORD].store(word | u64::from(MOVED), Ordering::Relaxed);
            seq.store(even.wrapping_add(2).max(2), Ordering::Release);
        }
        Some(larger)
    }

    /// The exemplar stored last, if any (and none while one is being
    /// stored by another thread at this very moment).
    #[must_use]
    pub fn load(&self) -> Option<Exemplar> {
        let record = self.record.load();
        let words = record.words()?;
        let mut bytes = [0u8; RECORD_HEADER_LEN + LABELS_CAPACITY];
        let bytes = &mut bytes[..words.len() * 8];
        for _ in 0..4 {
            let before = words[0].load(Ordering::Acquire);
            if before == 0 {
                return None;
            }
            if before % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            for (chunk, word) in bytes.chunks_mut(8).zip(words) {
                chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
            }
            fence(Ordering::Acquire);
            if words[0].load(Ordering::Relaxed) == before {
                if let Record::Whole {
                    value,
                    timestamp,
                    labels,
                } = decode_record(bytes, false)
                {
                    return Some(Exemplar {
                        labels: decode_labels(labels)?,
                        value,
                        timestamp,
                    });
                }
            }
        }
        None
    }
}

/// The seqlock store of one exemplar into `record` (which has room for
/// `labels`).
fn store_into(record: &RecordAt, labels: &[u8], value: f64, timestamp: f64) -> Stored {
    let Some(words) = record.words() else {
        return Stored::Busy;
    };
    let seq = &words[0];
    let before = seq.load(Ordering::Relaxed);
    if before % 2 == 1
        || seq
            .compare_exchange(before, before + 1, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        return Stored::Busy;
    }
    // The odd number is visible before any of the new bytes (seqlock).
    fence(Ordering::Release);
    let sealed = before.wrapping_add(2).max(2);
    let len_word = words[LEN_WORD].load(Ordering::Relaxed);
    if (len_word as u32) & MOVED != 0 {
        // Moved meanwhile: this exemplar races the move; drop it.
        seq.store(sealed, Ordering::Release);
        return Stored::Busy;
    }
    let (value, timestamp) = (value.to_bits(), timestamp.to_bits());
    words[1].store(
        checksum(sealed, value, timestamp, labels),
        Ordering::Relaxed,
    );
    words[2].store(value, Ordering::Relaxed);
    words[3].store(timestamp, Ordering::Relaxed);
    words[LEN_WORD].store(
        (len_word & 0xffff_ffff_0000_0000) | labels.len() as u64,
        Ordering::Relaxed,
    );
    for (word, chunk) in words[LABELS_WORD..].iter().zip(labels.chunks(8)) {
        let mut bytes = [0u8; 8];
        bytes[..chunk.len()].copy_from_slice(chunk);
        word.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
    }
    seq.store(sealed, Ordering::Release);
    Stored::Stored
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exemplar_file::read_exemplar_file;
    use crate::{encode_key, MetricKind};

    #[test]
    fn stores_replace_in_place_and_files_are_continued() {
        let dir = tempfile::tempdir().unwrap();
        let name = FileName::new(MetricKind::Counter, "9").unwrap();
        let writer = ExemplarWriter::open(dir.path(), &name).unwrap();
        let key = encode_key("c", "c_total", [], "h");
        let slot = writer.slot(&key).unwrap();
        assert_eq!(slot.load(), None);
        assert_eq!(
            slot.store([("trace_id", "a")], 1.0, 10.5).unwrap(),
            Stored::Stored
        );
        assert_eq!(
            slot.store([("trace_id", "b")], 2.0, 11.5).unwrap(),
            Stored::Stored
        );
        let expected = Exemplar {
            labels: vec![("trace_id".into(), "b".into())],
            value: 2.0,
            timestamp: 11.5,
        };
        assert_eq!(slot.load(), Some(expected.clone()));
        // Enough series to grow the file twice; the first slot still works.
        for i in 0..700 {
            let key = encode_key("c", "c_total", [("i", i.to_string().as_str())], "h");
            writer
                .slot(&key)
                .unwrap()
                .store([("i", "x")], 1.0, 1.0)
                .unwrap();
        }
        assert_eq!(lock(&writer.inner).capacity, EXEMPLAR_INITIAL_CAPACITY * 4);
        let read = read_exemplar_file(&writer.path()).unwrap();
        assert_eq!(read.entries.len(), 701);
        assert_eq!(
            (read.entries[0].raw_key.as_str(), &read.entries[0].exemplar),
            (key.as_str(), &expected)
        );
        assert_eq!(read.unsettled, 0);
        drop(writer);
        let again = ExemplarWriter::open(dir.path(), &name).unwrap();
        assert_eq!(again.slot(&key).unwrap().load(), Some(expected));
        assert_eq!(lock(&again.inner).slots.len(), 701);
    }

    #[test]
    fn a_half_written_record_is_never_read_and_is_cleared_on_adoption() {
        let dir = tempfile::tempdir().unwrap();
        let name = FileName::new(MetricKind::Histogram, "3").unwrap();
        let writer = ExemplarWriter::open(dir.path(), &name).unwrap();
        let key = encode_key("h", "h_bucket", [("le", "1.0")], "h");
        let slot = writer.slot(&key).unwrap();
        slot.store([("trace_id", "a")], 0.5, 1.0).unwrap();
        // A writer killed mid-store: odd sequence number, new bytes partly in.
        let record = slot.record.load_full();
        let words = record.words().unwrap();
        words[0].fetch_add(1, Ordering::Relaxed);
        words[2].store(9f64.to_bits(), Ordering::Relaxed);
        let read = read_exemplar_file(&writer.path()).unwrap();
        assert!(read.entries.is_empty());
        assert_eq!(read.unsettled, 1);
        // A torn copy: even number, but bytes that do not match the seal.
        words[0].fetch_add(1, Ordering::Relaxed);
        assert_eq!(read_exemplar_file(&writer.path()).unwrap().unsettled, 1);
        assert_eq!(slot.load(), None);
        words[0].fetch_sub(1, Ordering::Relaxed);
        drop(writer);
        let again = ExemplarWriter::open(dir.path(), &name).unwrap();
        let slot = again.slot(&key).unwrap();
        assert_eq!(slot.load(), None);
        assert_eq!(
            slot.store([("trace_id", "c")], 0.7, 2.0).unwrap(),
            Stored::Stored
        );
        assert_eq!(read_exemplar_file(&again.path()).unwrap().entries.len(), 1);
    }

    #[test]
    fn racing_readers_see_the_old_or_the_new_exemplar() {
        let dir = tempfile::tempdir().unwrap();
        let name = FileName::new(MetricKind::Counter, "5").unwrap();
        let writer = ExemplarWriter::open(dir.path(), &name).unwrap();
        let slot = writer.slot(&encode_key("c", "c_total", [], "")).unwrap();
        let path = writer.path();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers: Vec<_> = (0..2)
            .map(|t| {
                let (slot, stop) = (slot.clone(), Arc::clone(&stop));
                std::thread::spawn(move || {
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        // The labels encode the value: a torn read would mix them.
                        let v = (i * 2 + t) as f64;
                        // Now and then longer than a small record: the
                        // series moves to a larger one while readers read.
                        let label = format!("{v}")
                            .repeat(1 + (i % 5) as usize + 20 * usize::from(i == 500));
                        let _ = slot.store([("v", label.as_str())], v, v);
                        i += 1;
                    }
                })
            })
            .collect();
        let mut seen = 0;
        for _ in 0..2000 {
            for entry in read_exemplar_file(&path).unwrap().entries {
                let e = entry.exemplar;
                let v = format!("{}", e.value);
                assert_eq!(e.timestamp, e.value);
                assert!(
                    e.labels[0].1.len() % v.len() == 0 && e.labels[0].1.starts_with(&v),
                    "{e:?}"
                );
                seen += 1;
            }
            if let Some(e) = slot.load() {
                assert_eq!(e.timestamp, e.value);
            }
        }
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            w.join().unwrap();
        }
        assert!(seen > 0);
    }

    #[test]
    fn a_mapped_reader_sees_each_record_change_and_only_then_copies_it() {
        use crate::exemplar_file::{
            exemplar_entry_layouts, read_mapped_exemplar, ExemplarEntryLayout, MappedExemplar,
            RecordSeal,
        };
        use crate::read_map::ReadMap;

        /// What a read gave, owned.
        #[derive(Debug, PartialEq)]
        enum Got {
            Unchanged,
            Whole(RecordSeal, Exemplar),
            Absent,
            Unsettled,
        }

        let dir = tempfile::tempdir().unwrap();
        let name = FileName::new(MetricKind::Counter, "8").unwrap();
        let writer = ExemplarWriter::open(dir.path(), &name).unwrap();
        let key = encode_key("c", "c_total", [("x", "a")], "");
        let slot = writer.slot(&key).unwrap();
        slot.store([("trace_id", "one")], 1.0, 1.0).unwrap();
        let file = std::fs::File::open(writer.path()).unwrap();
        let size = file.metadata().unwrap().len();
        let map = ReadMap::new(&file, size as usize).unwrap();
        let layouts = |from: usize| {
            let mut bytes = Vec::new();
            map.read(|view| {
                let used = view.u32_acquire(0).unwrap() as usize;
                assert!(view.copy_to(0, used, &mut bytes));
            })
            .unwrap();
            let mut layouts = Vec::new();
            exemplar_entry_layouts(&bytes, size, from, &mut layouts).unwrap();
            (layouts, bytes.len())
        };
        // Reads a record, decoding a whole one into `into` (its strings
        // reused) when given.
        let read = |layout: &ExemplarEntryLayout, seen, into: Option<&mut Exemplar>| {
            let mut buf = Vec::new();
            let got = map.read(|view| {
                match read_mapped_exemplar(view, layout.record, layout.capacity, seen, &mut buf) {
                    Some(MappedExemplar::Whole(seal, recorded)) => match into {
                        Some(into) => {
                            assert!(recorded.decode_into(into));
                            Got::Whole(seal, into.clone())
                        }
                        None => Got::Whole(seal, recorded.to_exemplar().unwrap()),
                    },
                    Some(MappedExemplar::Unchanged) => Got::Unchanged,
                    Some(MappedExemplar::Absent) => Got::Absent,
                    Some(MappedExemplar::Unsettled) => Got::Unsettled,
                    None => panic!("outside the map"),
                }
            });
            got.unwrap()
        };
        let (first, parsed) = layouts(0);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].key, key);
        let Got::Whole(seal, exemplar) = read(&first[0], None, None) else {
            panic!("a whole record");
        };
        assert_eq!(exemplar.labels, [("trace_id".to_owned(), "one".to_owned())]);
        assert_eq!(read(&first[0], Some(seal), None), Got::Unchanged);

        // The same exemplar stored again is another store: read again.
        slot.store([("trace_id", "one")], 1.0, 1.0).unwrap();
        let Got::Whole(again, same) = read(&first[0], Some(seal), None) else {
            panic!("a whole record");
        };
        assert_ne!(again, seal);
        assert_eq!(same, exemplar);

        // Too long for its record: the old one reads absent, and the new
        // one is an entry past the last parse.
        let long = "\u{e9}".repeat(100);
        slot.store([("trace_id", long.as_str())], 2.0, 2.0).unwrap();
        assert_eq!(read(&first[0], Some(again), None), Got::Absent);
        let (moved, _) = layouts(parsed);
        assert_eq!(moved.len(), 1);
        assert_eq!(moved[0].key, key);
        // Decoded into the exemplar held, its strings reused.
        let mut held = exemplar;
        let Got::Whole(_, long_one) = read(&moved[0], None, Some(&mut held)) else {
            panic!("a whole record");
        };
        assert_eq!(long_one.labels, [("trace_id".to_owned(), long.clone())]);
        assert_eq!((long_one.value, long_one.timestamp), (2.0, 2.0));
        assert_eq!(held, long_one);
    }

    #[test]
    fn a_long_exemplar_moves_its_series_to_a_larger_record() {
        let dir = tempfile::tempdir().unwrap();
        let name = FileName::new(MetricKind::Counter, "6").unwrap();
        let writer = ExemplarWriter::open(dir.path(), &name).unwrap();
        let (a, b) = (
            encode_key("c", "c_total", [("x", "a")], ""),
            encode_key("c", "c_total", [("x", "b")], ""),
        );
        let slot = writer.slot(&a).unwrap();
        let clone = slot.clone();
        writer
            .slot(&b)
            .unwrap()
            .store([("trace_id", "b")], 1.0, 1.0)
            .unwrap();
        slot.store([("trace_id", "short")], 1.0, 1.0).unwrap();
        let small = std::fs::metadata(writer.path()).unwrap();
        let long = "\u{1F600}".repeat(120);
        assert_eq!(
            slot.store([("trace_id", long.as_str())], 2.0, 2.0).unwrap(),
            Stored::Stored
        );
        let entries = |path: &Path| {
            let read = read_exemplar_file(path).unwrap();
            // The moved record is skipped as moved, not retried as torn.
            assert_eq!(read.unsettled, 0);
            read.entries
                .into_iter()
                .map(|e| (e.raw_key, e.exemplar.labels[0].1.clone()))
                .collect::<Vec<_>>()
        };
        // One record per series: the old one of `a` is skipped.
        assert_eq!(
            entries(&writer.path()),
            [(b.clone(), "b".into()), (a.clone(), long.clone())]
        );
        // Clones follow, and later short exemplars stay in the larger record.
        assert_eq!(
            clone.store([("trace_id", "again")], 3.0, 3.0).unwrap(),
            Stored::Stored
        );
        assert_eq!(entries(&writer.path())[1], (a.clone(), "again".into()));
        assert_eq!(small.len(), std::fs::metadata(writer.path()).unwrap().len());
        drop((writer, slot, clone));
        // A reopened file continues the larger record.
        let again = ExemplarWriter::open(dir.path(), &name).unwrap();
        assert_eq!(again.slot(&a).unwrap().load().unwrap().value, 3.0);
        again
            .slot(&a)
            .unwrap()
            .store([("trace_id", long.as_str())], 4.0, 4.0)
            .unwrap();
        assert_eq!(entries(&again.path()), [(b, "b".into()), (a, long)]);
    }

    #[test]
    fn refuses_a_foreign_file() {
        let dir = tempfile::tempdir().unwrap();
        let name = FileName::new(MetricKind::Counter, "1").unwrap();
        let path = exemplar_path(dir.path(), &name);
        std::fs::create_dir(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"not an exemplar file at all").unwrap();
        let err = ExemplarWriter::open(dir.path(), &name).unwrap_err();
        assert!(
            err.to_string().contains("not a multiprom exemplar file"),
            "{err}"
        );
    }
}
