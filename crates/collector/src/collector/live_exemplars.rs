//! Live workers' exemplar files, kept mapped between scrapes.
//!
//! A live worker's exemplar file changes under every scrape (its writer
//! stores into it through a map, which no event reports), so each scrape
//! that attaches exemplars reads it again. Opened and read whole with
//! `pread`, that is an `open`, a copy of every record and a checksum of
//! each, every scrape, though most records still hold what they held at
//! the last one. Kept mapped read-only ([`ReadMap`]), a scrape loads each
//! record's sequence number and checksum and, while they are the ones it
//! was last read whole with, takes the exemplar decoded then
//! ([`read_mapped_exemplar`]); only a record written since is copied and
//! its seal checked. Where the records lie (key, offset, room: fixed once
//! written) is parsed once, and again only for the entries past the last
//! parse when `used` grows.
//!
//! Files are mapped only while the directory watch watches the exemplar
//! subdirectory too: an event about a mapped file (replaced, rewritten,
//! sized, removed) drops its map, and so does a resync or a lost event for
//! all of them ([`MappedExemplars::forget_named`], [`MappedExemplars::clear`]),
//! so a map is never read after its file changed under it other than by a
//! writer storing records. The map is dropped too when its `*.db` file
//! settles (its exemplars are then read once and kept) or leaves the
//! listing, and when the file outgrows it (mapped again at its new size). A
//! file that shrank under its map is reported and not read through it
//! again; a file that does not read right through its map is read with
//! `pread`, which reports what is wrong with it.
//!
//! A file found missing (a worker that stores no exemplar, a gauge's file)
//! is not looked for again until the watch names it.
//!
//! A file is mapped from the second scrape that reads it on: a collector
//! used once never sets up a map.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use multiprom_format::exemplar_file::{exemplar_file_name, exemplar_path, MAX_EXEMPLAR_FILE_LEN};
use multiprom_format::read_map::ReadMap;
use multiprom_format::{
    exemplar_entry_layouts, open_for_read, read_mapped_exemplar, Exemplar, ExemplarEntryLayout,
    FileName, MappedExemplar, RecordSeal, RecordedExemplar,
};

use super::appended::{copy_appended, MapTrouble};
use super::exemplar_series::{SeriesId, SeriesTable};

/// How often a record being written is loaded again before it is left out
/// of this scrape (as a `pread` of the file reads it again).
const RECORD_ATTEMPTS: usize = 3;

/// A live worker's exemplar file to read this scrape.
#[derive(Clone, Copy)]
pub(super) struct LiveExemplarFile<'a> {
    /// The index of its `*.db` file in the file table.
    pub index: usize,
    /// Its `*.db` file's path, as the file table holds it.
    pub db_path: &'a Arc<Path>,
    /// Its `*.db` file's [`changes`](crate::tracked::TrackedFile::changes).
    pub changes: u64,
    /// The directory and name of its `*.db` file (the exemplar file's path,
    /// in the watched exemplar subdirectory, is made only when it is
    /// opened: a mapped file is read without).
    pub dir: &'a Path,
    pub name: &'a FileName,
}

impl LiveExemplarFile<'_> {
    pub(super) fn path(&self) -> PathBuf {
        exemplar_path(self.dir, self.name)
    }
}

/// How reading a file through its map went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MapRead {
    /// Its exemplars were offered.
    Read,
    /// It does not exist: a process without exemplars.
    Missing,
    /// It shrank under its map: a bad file.
    Shrunk,
    /// Not read: read it with `pread`.
    Pread,
}

/// The live exemplar files kept mapped, by the index of their `*.db` file
/// in the file table.
#[derive(Debug, Default)]
pub(super) struct MappedExemplars {
    files: foldhash::HashMap<usize, MappedFile>,
    /// Files that did not read right through a map: read with `pread`
    /// until their `*.db` file changes.
    unmappable: foldhash::HashMap<usize, (Arc<Path>, u64)>,
    /// Files found missing (a worker without exemplars, a gauge's file):
    /// not looked for again until the watch sees their name.
    missing: foldhash::HashMap<usize, Missing>,
    /// Counts the scrapes: a map not read in the last one is dropped.
    scrape: u64,
    bytes: Vec<u8>,
    layouts: Vec<ExemplarEntryLayout>,
    record: Vec<u8>,
}

/// One exemplar file kept mapped.
#[derive(Debug)]
struct MappedFile {
    map: ReadMap,
    /// Its name in the exemplar subdirectory, as events name it.
    name: OsString,
    /// Its `*.db` file (a file table slot taken by another file is told
    /// apart).
    db_path: Arc<Path>,
    /// Where the parsed entries end.
    parsed_up_to: usize,
    /// Its entries, in file order.
    entries: Vec<MappedEntry>,
    /// The scrape that last read it.
    read_in: u64,
}

/// An exemplar file found missing.
#[derive(Debug)]
struct Missing {
    name: OsString,
    db_path: Arc<Path>,
    read_in: u64,
}

/// An entry of a mapped file.
#[derive(Debug)]
struct MappedEntry {
    /// Held so that the series table keeps the key's series.
    _key: Arc<str>,
    series: Option<SeriesId>,
    record: usize,
    capacity: usize,
    /// Its record's seal when last read whole, and the exemplar it held
    /// (`None`: labels multiprom did not encode).
    last: Option<(RecordSeal, Option<Arc<Exemplar>>)>,
}

impl MappedEntry {
    /// Keeps what the record holds now, sealed by `seal`: into the
    /// exemplar it held before when nothing else holds that one (no
    /// collection attached it), so a record stored again costs no
    /// allocation, else into a new one.
    fn store(&mut self, seal: RecordSeal, recorded: &RecordedExemplar<'_>) {
        if let Some((held_seal, held)) = &mut self.last {
            if let Some(exemplar) = held.as_mut().and_then(Arc::get_mut) {
                if recorded.decode_into(exemplar) {
                    *held_seal = seal;
                    return;
                }
            }
        }
        self.last = Some((seal, recorded.to_exemplar().map(Arc::new)));
    }
}

impl From<MapTrouble> for Outcome {
    fn from(trouble: MapTrouble) -> Outcome {
        match trouble {
            MapTrouble::Outgrown => Outcome::Outgrown,
            MapTrouble::Shrunk => Outcome::Shrunk,
            MapTrouble::Unreadable => Outcome::Unreadable,
        }
    }
}

/// How reading a mapped file went.
enum Outcome {
    Read,
    /// `used` is past the map: map it again at its new size.
    Outgrown,
    Shrunk,
    /// It did not read right: read it with `pread`.
    Unreadable,
}

impl MappedExemplars {
    /// Files mapped.
    pub(super) fn len(&self) -> usize {
        self.files.len()
    }

    /// Starts a scrape.
    pub(super) fn begin(&mut self) {
        self.scrape += 1;
    }

    /// Ends a scrape: drops the maps it did not read (files settled, gone,
    /// or no longer merged).
    pub(super) fn end(&mut self) {
        let scrape = self.scrape;
        self.files.retain(|_, file| file.read_in == scrape);
        self.missing.retain(|_, missing| missing.read_in == scrape);
    }

    /// Drops every map.
    pub(super) fn clear(&mut self) {
        self.files.clear();
        self.unmappable.clear();
        self.missing.clear();
    }

    /// Drops the maps of the files the watch saw `touched` (names in the
    /// exemplar subdirectory), and forgets that they did not map.
    pub(super) fn forget_named(&mut self, touched: &HashSet<OsString>) {
        if touched.is_empty() {
            return;
        }
        self.files.retain(|_, file| !touched.contains(&file.name));
        self.missing
            .retain(|_, missing| !touched.contains(&missing.name));
        // A file that did not map is tried again once something happened to
        // it (which one is not known by name: all of them are).
        self.unmappable.clear();
    }

    /// Reads `file` through its map, mapping it if it is not mapped yet and
    /// `may_map` says a new map may be made, and hands each whole record's
    /// series and exemplar to `offer`, in file order. Keys are resolved by
    /// `series`.
    pub(super) fn read(
        &mut self,
        file: LiveExemplarFile<'_>,
        may_map: bool,
        series: &mut SeriesTable,
        mut offer: impl FnMut(SeriesId, &Arc<Exemplar>),
    ) -> MapRead {
        if let Some(missing) = self.missing.get_mut(&file.index) {
            if Arc::ptr_eq(&missing.db_path, file.db_path) {
                missing.read_in = self.scrape;
                return MapRead::Missing;
            }
            self.missing.remove(&file.index);
        }
        if self
            .files
            .get(&file.index)
            .is_some_and(|mapped| !Arc::ptr_eq(&mapped.db_path, file.db_path))
        {
            self.files.remove(&file.index);
        }
        if !self.unmappable.is_empty() {
            let unmappable = self
                .unmappable
                .get(&file.index)
                .is_some_and(|(db, n)| Arc::ptr_eq(db, file.db_path) && *n == file.changes);
            if unmappable {
                return MapRead::Pread;
            }
            self.unmappable.remove(&file.index);
        }
        // At most twice: once more after the file outgrew its map.
        for attempt in 0..2 {
            let mapped = match self.files.entry(file.index) {
                std::collections::hash_map::Entry::Occupied(mapped) => mapped.into_mut(),
                std::collections::hash_map::Entry::Vacant(slot) => {
                    if !may_map || self.scrape < 2 {
                        return MapRead::Pread;
                    }
                    match MappedFile::open(&file) {
                        Ok(Some(mapped)) => slot.insert(mapped),
                        Ok(None) => {
                            let missing = Missing {
                                name: exemplar_file_name(file.name).into(),
                                db_path: Arc::clone(file.db_path),
                                read_in: self.scrape,
                            };
                            self.missing.insert(file.index, missing);
                            return MapRead::Missing;
                        }
                        Err(()) => return MapRead::Pread,
                    }
                }
            };
            mapped.read_in = self.scrape;
            let outcome = mapped.read(
                &mut self.bytes,
                &mut self.layouts,
                &mut self.record,
                series,
                &mut offer,
            );
            if !matches!(outcome, Outcome::Read) {
                self.files.remove(&file.index);
            }
            match outcome {
                Outcome::Read => return MapRead::Read,
                Outcome::Shrunk => return MapRead::Shrunk,
                // Mapped at its size just now, and still `used` is past
                // the end: bad, as `pread` will tell.
                Outcome::Outgrown if attempt == 0 => {}
                Outcome::Outgrown | Outcome::Unreadable => break,
            }
        }
        self.unmappable
            .insert(file.index, (Arc::clone(file.db_path), file.changes));
        MapRead::Pread
    }
}

impl MappedFile {
    /// Maps the file (`Ok(None)`: it is missing; `Err`: it is to be read
    /// with `pread`, which reports what is wrong with it).
    fn open(file: &LiveExemplarFile<'_>) -> Result<Option<MappedFile>, ()> {
        let (opened, meta) = match open_for_read(&file.path()) {
            Ok(opened) => opened,
            Err(error) if error.is_vanished() => return Ok(None),
            Err(_) => return Err(()),
        };
        let size = meta.len();
        if size == 0 || size > MAX_EXEMPLAR_FILE_LEN {
            return Err(());
        }
        let map = ReadMap::new(&opened, size as usize).map_err(|_| ())?;
        Ok(Some(MappedFile {
            map,
            name: exemplar_file_name(file.name).into(),
            db_path: Arc::clone(file.db_path),
            parsed_up_to: 0,
            entries: Vec::new(),
            read_in: 0,
        }))
    }

    /// Parses the entries written since the last parse, then offers each
    /// record's exemplar.
    fn read(
        &mut self,
        bytes: &mut Vec<u8>,
        layouts: &mut Vec<ExemplarEntryLayout>,
        record: &mut Vec<u8>,
        series: &mut SeriesTable,
        offer: &mut impl FnMut(SeriesId, &Arc<Exemplar>),
    ) -> Outcome {
        if let Err(outcome) = self.parse_new(bytes, layouts, series) {
            return outcome;
        }
        let entries = &mut self.entries;
        let read = self.map.read(|view| {
            for entry in entries.iter_mut() {
                let Some(id) = entry.series else {
                    continue;
                };
                for attempt in 1..=RECORD_ATTEMPTS {
                    let seen = entry.last.as_ref().map(|(seal, _)| *seal);
                    match read_mapped_exemplar(view, entry.record, entry.capacity, seen, record) {
                        None => return Err(()),
                        Some(MappedExemplar::Unchanged) => {}
                        Some(MappedExemplar::Whole(seal, recorded)) => {
                            entry.store(seal, &recorded);
                        }
                        Some(MappedExemplar::Absent) => entry.last = None,
                        Some(MappedExemplar::Unsettled) => {
                            if attempt < RECORD_ATTEMPTS {
                                std::thread::yield_now();
                                continue;
                            }
                            // Left out of this scrape; what it held before
                            // is not what it holds now.
                            entry.last = None;
                            break;
                        }
                    }
                    if let Some((_, Some(exemplar))) = &entry.last {
                        offer(id, exemplar);
                    }
                    break;
                }
            }
            Ok(())
        });
        match read {
            Ok(Ok(())) => Outcome::Read,
            Ok(Err(())) => Outcome::Unreadable,
            Err(_) => Outcome::Shrunk,
        }
    }

    /// Parses the entries written since the last parse.
    fn parse_new(
        &mut self,
        bytes: &mut Vec<u8>,
        layouts: &mut Vec<ExemplarEntryLayout>,
        series: &mut SeriesTable,
    ) -> Result<(), Outcome> {
        let used = match copy_appended(&self.map, self.parsed_up_to, bytes) {
            Ok(Some(used)) => used,
            Ok(None) => return Ok(()),
            Err(trouble) => return Err(Outcome::from(trouble)),
        };
        layouts.clear();
        let parsed =
            exemplar_entry_layouts(bytes, self.map.len() as u64, self.parsed_up_to, layouts);
        if parsed.is_err() {
            // Grown past the map since `used` was loaded, or bad.
            let grown = self
                .map
                .read(|view| view.u32_acquire(0))
                .is_ok_and(|now| now.is_some_and(|now| now as usize > self.map.len()));
            return Err(if grown {
                Outcome::Outgrown
            } else {
                Outcome::Unreadable
            });
        }
        for layout in layouts.drain(..) {
            let (key, id) = series.resolve_key(&layout.key);
            self.entries.push(MappedEntry {
                _key: key,
                series: id,
                record: layout.record,
                capacity: layout.capacity,
                last: None,
            });
        }
        self.parsed_up_to = used;
        Ok(())
    }
}
