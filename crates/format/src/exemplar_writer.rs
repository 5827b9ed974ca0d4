//! Writing exemplar files (layout: [`crate::exemplar_file`]).
//!
//! One process owns a file, as for `*.db` files; threads of that process
//! store through [`ExemplarSlot`]s without a lock. A store takes the
//! record's sequence number from even to odd with a compare-and-swap, so
//! two threads never write one record at once: the one that loses the race
//! drops its exemplar (the two were recorded at the same moment, and a
//! series keeps only its latest anyway) rather than wait.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::WriteError;
use crate::exemplar::{encode_labels, Exemplar, ExemplarError};
use crate::exemplar_file::{
    checksum, decode_record, exemplar_entry_len, exemplar_path, header_bytes, parse_exemplar_file,
    Record, EXEMPLAR_HEADER_LEN, EXEMPLAR_INITIAL_CAPACITY, LABELS_CAPACITY, MAX_EXEMPLAR_FILE_LEN,
    RECORD_LEN,
};
use crate::file_name::FileName;
use crate::mapping::Mapping;
use crate::writer::{create_atomically, extend_with_zeros};
use crate::{open, read};

/// Words in a record.
const RECORD_WORDS: usize = RECORD_LEN / 8;
/// Word index of the labels' length.
const LEN_WORD: usize = 4;
/// Word index where the labels start.
const LABELS_WORD: usize = 5;

/// The exemplar file of one `*.db` file, owned by this process.
#[derive(Debug)]
pub struct ExemplarWriter {
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
        let subdir = path.parent().unwrap_or(dir);
        match std::fs::create_dir(subdir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(WriteError::io(subdir, e)),
        }
        let opened = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(&path);
        let file = match opened {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let header = header_bytes(EXEMPLAR_HEADER_LEN as u32);
                create_atomically(subdir, &path, EXEMPLAR_INITIAL_CAPACITY, &header)?
            }
            Err(e) => return Err(WriteError::io(path, e)),
        };
        ExemplarWriter::from_existing(path, file)
    }

    fn from_existing(path: PathBuf, file: File) -> Result<ExemplarWriter, WriteError> {
        let meta = file.metadata().map_err(|e| WriteError::io(&path, e))?;
        if let Some(kind) = open::not_a_file(meta.file_type()) {
            return Err(crate::ReadError::new(&path, 0, kind).into());
        }
        let capacity = meta.len();
        if capacity > MAX_EXEMPLAR_FILE_LEN {
            return Err(WriteError::FileFull { path });
        }
        let mut bytes = Vec::new();
        read::read_at_most(&file, &mut bytes, 0, capacity as usize)
            .map_err(|e| WriteError::io(&path, e))?;
        // Refuse anything that is not a whole exemplar file: appending
        // after garbage would hide every later exemplar from readers.
        parse_exemplar_file(&bytes, capacity).map_err(|e| e.at(&path))?;
        let used = read_used(&bytes);
        let mapping =
            Arc::new(Mapping::new(&file, capacity).map_err(|e| WriteError::io(&path, e))?);
        let mut writer = ExemplarWriter {
            path,
            file,
            mapping,
            used,
            capacity,
            slots: HashMap::new(),
        };
        // Index every entry, and clear records a killed writer left half
        // written (odd sequence number): nobody else writes this file, and a
        // store waits for no odd record.
        let mut at = EXEMPLAR_HEADER_LEN;
        while at < used {
            let key_len =
                u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
                    as usize;
            let end = at + exemplar_entry_len(key_len);
            let key = String::from_utf8_lossy(&bytes[at + 4..at + 4 + key_len]).into_owned();
            let slot = writer.slot_at(end - RECORD_LEN)?;
            if let Some(words) = slot.words() {
                if words[0].load(Ordering::Relaxed) % 2 == 1 {
                    words[0].store(0, Ordering::Relaxed);
                }
            }
            writer.slots.insert(key.into(), slot);
            at = end;
        }
        Ok(writer)
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The slot of `key` (the `*.db` entry's encoded key), appending an
    /// empty record if there is none.
    pub fn slot(&mut self, key: &str) -> Result<ExemplarSlot, WriteError> {
        if let Some(slot) = self.slots.get(key) {
            return Ok(slot.clone());
        }
        let key_len = key.len();
        let entry_len = exemplar_entry_len(key_len);
        let needed = self.used as u64 + entry_len as u64;
        if needed > MAX_EXEMPLAR_FILE_LEN || u32::try_from(key_len).is_err() {
            return Err(WriteError::FileFull {
                path: self.path.clone(),
            });
        }
        if needed > self.capacity {
            self.grow(needed)?;
        }
        let mut entry = Vec::with_capacity(entry_len - RECORD_LEN);
        entry.extend_from_slice(&(key_len as u32).to_le_bytes());
        entry.extend_from_slice(key.as_bytes());
        entry.resize(entry.len() + crate::layout::pad_len(key_len), b' ');
        let offset = self.used;
        // The record after the key is still zero (never written).
        self.mapping.write_bytes(offset, &entry);
        self.used += entry_len;
        // Publish after the entry: a reader that sees the new `used` sees
        // the whole entry.
        self.mapping.publish_used(self.used as u32);
        let slot = self.slot_at(offset + entry_len - RECORD_LEN)?;
        self.slots.insert(key.into(), slot.clone());
        Ok(slot)
    }

    fn slot_at(&self, record_offset: usize) -> Result<ExemplarSlot, WriteError> {
        let slot = ExemplarSlot {
            mapping: Arc::clone(&self.mapping),
            offset: record_offset,
        };
        match slot.words() {
            Some(_) => Ok(slot),
            None => Err(WriteError::FileFull {
                path: self.path.clone(),
            }),
        }
    }

    /// Doubles the capacity until `needed` bytes fit.
    fn grow(&mut self, needed: u64) -> Result<(), WriteError> {
        let mut capacity = self.capacity.max(1);
        while capacity < needed {
            capacity *= 2;
        }
        let capacity = capacity.min(MAX_EXEMPLAR_FILE_LEN);
        extend_with_zeros(&self.file, &self.path, self.capacity, capacity)?;
        let mapping =
            Mapping::new(&self.file, capacity).map_err(|e| WriteError::io(&self.path, e))?;
        // Slots keep their own `Arc` to the old mapping, which stays valid.
        self.mapping = Arc::new(mapping);
        self.capacity = capacity;
        Ok(())
    }
}

fn read_used(bytes: &[u8]) -> usize {
    bytes.get(..4).map_or(EXEMPLAR_HEADER_LEN, |b| {
        u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize
    })
}

/// A lock-free handle to one series' exemplar record.
///
/// Cloning is cheap; the handle keeps its mapping alive (as a
/// [`crate::ValueSlot`] does), so it stays valid when the file grows.
#[derive(Clone)]
pub struct ExemplarSlot {
    mapping: Arc<Mapping>,
    /// Offset of the record.
    offset: usize,
}

impl std::fmt::Debug for ExemplarSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExemplarSlot")
            .field("offset", &self.offset)
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
    /// that moment; this exemplar was dropped.
    Busy,
}

impl ExemplarSlot {
    fn words(&self) -> Option<&[AtomicU64]> {
        self.mapping.words(self.offset, RECORD_WORDS)
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
        // Checked when the slot was made.
        let Some(words) = self.words() else {
            return Ok(Stored::Busy);
        };
        let seq = &words[0];
        let before = seq.load(Ordering::Relaxed);
        if before % 2 == 1
            || seq
                .compare_exchange(before, before + 1, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return Ok(Stored::Busy);
        }
        // The odd number is visible before any of the new bytes (seqlock).
        fence(Ordering::Release);
        let sealed = before.wrapping_add(2).max(2);
        let (value, timestamp) = (value.to_bits(), timestamp.to_bits());
        words[1].store(
            checksum(sealed, value, timestamp, &area[..len]),
            Ordering::Relaxed,
        );
        words[2].store(value, Ordering::Relaxed);
        words[3].store(timestamp, Ordering::Relaxed);
        words[LEN_WORD].store(len as u64, Ordering::Relaxed);
        for (word, chunk) in words[LABELS_WORD..].iter().zip(area[..len].chunks(8)) {
            let mut bytes = [0u8; 8];
            bytes[..chunk.len()].copy_from_slice(chunk);
            word.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
        }
        seq.store(sealed, Ordering::Release);
        Ok(Stored::Stored)
    }

    /// The exemplar stored last, if any (and none while one is being
    /// stored by another thread at this very moment).
    #[must_use]
    pub fn load(&self) -> Option<Exemplar> {
        let words = self.words()?;
        let mut bytes = [0u8; RECORD_LEN];
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
                if let Record::Whole(exemplar) = decode_record(&bytes) {
                    return Some(exemplar);
                }
            }
        }
        None
    }
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
        let mut writer = ExemplarWriter::open(dir.path(), &name).unwrap();
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
        for i in 0..150 {
            let key = encode_key("c", "c_total", [("i", i.to_string().as_str())], "h");
            writer
                .slot(&key)
                .unwrap()
                .store([("i", "x")], 1.0, 1.0)
                .unwrap();
        }
        assert_eq!(writer.capacity, EXEMPLAR_INITIAL_CAPACITY * 4);
        let read = read_exemplar_file(writer.path()).unwrap();
        assert_eq!(read.entries.len(), 151);
        assert_eq!(
            (read.entries[0].raw_key.as_str(), &read.entries[0].exemplar),
            (key.as_str(), &expected)
        );
        assert_eq!(read.unsettled, 0);
        drop(writer);
        let mut again = ExemplarWriter::open(dir.path(), &name).unwrap();
        assert_eq!(again.slot(&key).unwrap().load(), Some(expected));
        assert_eq!(again.slots.len(), 151);
    }

    #[test]
    fn a_half_written_record_is_never_read_and_is_cleared_on_adoption() {
        let dir = tempfile::tempdir().unwrap();
        let name = FileName::new(MetricKind::Histogram, "3").unwrap();
        let mut writer = ExemplarWriter::open(dir.path(), &name).unwrap();
        let key = encode_key("h", "h_bucket", [("le", "1.0")], "h");
        let slot = writer.slot(&key).unwrap();
        slot.store([("trace_id", "a")], 0.5, 1.0).unwrap();
        // A writer killed mid-store: odd sequence number, new bytes partly in.
        let words = slot.words().unwrap();
        words[0].fetch_add(1, Ordering::Relaxed);
        words[2].store(9f64.to_bits(), Ordering::Relaxed);
        let read = read_exemplar_file(writer.path()).unwrap();
        assert!(read.entries.is_empty());
        assert_eq!(read.unsettled, 1);
        // A torn copy: even number, but bytes that do not match the seal.
        words[0].fetch_add(1, Ordering::Relaxed);
        assert_eq!(read_exemplar_file(writer.path()).unwrap().unsettled, 1);
        assert_eq!(slot.load(), None);
        words[0].fetch_sub(1, Ordering::Relaxed);
        drop(writer);
        let mut again = ExemplarWriter::open(dir.path(), &name).unwrap();
        let slot = again.slot(&key).unwrap();
        assert_eq!(slot.load(), None);
        assert_eq!(
            slot.store([("trace_id", "c")], 0.7, 2.0).unwrap(),
            Stored::Stored
        );
        assert_eq!(read_exemplar_file(again.path()).unwrap().entries.len(), 1);
    }

    #[test]
    fn racing_readers_see_the_old_or_the_new_exemplar() {
        let dir = tempfile::tempdir().unwrap();
        let name = FileName::new(MetricKind::Counter, "5").unwrap();
        let mut writer = ExemplarWriter::open(dir.path(), &name).unwrap();
        let slot = writer.slot(&encode_key("c", "c_total", [], "")).unwrap();
        let path = writer.path().to_owned();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers: Vec<_> = (0..2)
            .map(|t| {
                let (slot, stop) = (slot.clone(), Arc::clone(&stop));
                std::thread::spawn(move || {
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        // The labels encode the value: a torn read would mix them.
                        let v = (i * 2 + t) as f64;
                        let label = format!("{v}").repeat(1 + (i % 5) as usize);
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
