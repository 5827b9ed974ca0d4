//! Live workers' native histogram files, kept mapped between scrapes.
//!
//! A live worker's companion changes under every scrape (its writer adds
//! to it through a map, which no event reports), so each protobuf scrape
//! reads it again. Opened and read whole with `pread` that costs a few
//! microseconds a file, mostly system calls and copying bucket room not in
//! use. Kept mapped read-only ([`ReadMap`]), a scrape loads `used`, then
//! per current record its counts and the buckets in use, word by word
//! ([`read_native_record_counts`]), each bucket added to its series'
//! merge as it is loaded ([`Adding`]); where the records lie (key,
//! offset, room, schema, zero bucket: fixed once written) is parsed once,
//! and again only for the entries past the last parse when `used` grows.
//!
//! A map is trusted while its `*.db` file's tracked state says nothing
//! happened to it ([`crate::tracked::TrackedFile::changes`]: an event, a
//! resync, a reopen); after that the companion's identity is looked at
//! again (one `stat`) and a different file is mapped afresh. A companion
//! removed or replaced with no event about its `*.db` file is noticed at
//! the next resync, as a `*.db` file changed unseen is. The map is dropped
//! when the companion vanishes or is replaced, when its `*.db` file
//! settles (the settled files' merge takes it over) or leaves the listing,
//! and when the file outgrows it (mapped again at its new size). A file
//! that shrank under its map is reported, like any bad file, and that map
//! is not read again; a file that does not read right through its map is
//! read with `pread`, which reports what is wrong with it.
//!
//! A file is mapped from the second scrape that reads it on: a collector
//! used once never sets up a map.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use multiprom_format::native_file::{
    native_histogram_path, MAX_NATIVE_FILE_LEN, NATIVE_HEADER_LEN,
};
use multiprom_format::read_map::ReadMap;
use multiprom_format::{
    native_record_layouts, open_for_read, read_native_record_counts, FileIdentity, FileName,
    NativeCounts, NativeRecordLayout, ReadError, ReadErrorKind,
};

use crate::native_dense::{DenseNative, RecordRead};

use super::appended::{copy_appended, MapTrouble};

/// A live worker's companion to read this scrape.
#[derive(Clone, Copy)]
pub(super) struct LiveCompanion<'a> {
    /// The index of its `*.db` file in the file table.
    pub index: usize,
    /// Its `*.db` file's path, as the file table holds it.
    pub db_path: &'a Arc<Path>,
    /// Its `*.db` file's [`changes`](crate::tracked::TrackedFile::changes).
    pub changes: u64,
    /// The directory and name of its `*.db` file (its path is made only
    /// when it is opened: a mapped file is read without).
    pub dir: &'a Path,
    pub name: &'a FileName,
}

impl LiveCompanion<'_> {
    fn path(&self) -> PathBuf {
        native_histogram_path(self.dir, self.name)
    }
}

/// Where records go: what names a key, and the records read.
pub(super) trait RecordSink {
    /// The series `raw_key` names (`None`: a key that does not decode).
    fn series(&mut self, raw_key: &str) -> Option<usize>;
    /// Adds a record of `series`, read whole.
    fn add(&mut self, series: usize, record: RecordRead<StagedBuckets<'_>>);
    /// The merge of `series`, to add a record to as it is loaded (`None`:
    /// no such series).
    fn merge(&mut self, series: usize) -> Option<&mut DenseNative>;
}

/// The buckets of a record read whole.
pub(super) type StagedBuckets<'a> = std::iter::Copied<std::slice::Iter<'a, (i32, bool, u64)>>;

/// How records are added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Adding {
    /// Each bucket as it is loaded, straight from the map into the merge:
    /// no copy, no second pass. A file that turns out bad part way (a
    /// damaged record, a fault, buckets too far apart for a dense merge)
    /// has then been added in part, and the files are to be read again
    /// with [`Adding::WholeFiles`].
    AsLoaded,
    /// Each file's records copied out first and added only if the whole
    /// file read right.
    WholeFiles,
}

/// The live companions kept mapped, in the order they were last read.
#[derive(Debug, Default)]
pub(super) struct MappedNatives {
    /// The file table index of each companion last read, in order...
    indexes: Vec<usize>,
    /// ...and its map, if it has one: a scrape reads them in this order,
    /// from one array, rather than looking each up.
    files: Vec<Option<MappedNative>>,
    /// Maps in `files`.
    mapped: usize,
    /// Files that did not read right through a map: read with `pread`
    /// until their `*.db` file changes.
    unmappable: foldhash::HashMap<usize, (Arc<Path>, u64)>,
    scrapes: u64,
    bytes: Vec<u8>,
    layouts: Vec<NativeRecordLayout>,
    buckets: Vec<(i32, bool, u64)>,
    staged: Vec<Staged>,
}

/// A record read from a map, before it is added (a file is added whole
/// or not at all).
#[derive(Debug)]
struct Staged {
    record: usize,
    counts: NativeCounts,
    /// Where its buckets lie in the buckets read.
    buckets: (usize, usize),
}

/// One companion kept mapped.
#[derive(Debug)]
struct MappedNative {
    map: ReadMap,
    identity: FileIdentity,
    /// Its `*.db` file, and that file's changes, when last checked.
    db_path: Arc<Path>,
    changes: u64,
    /// Where the parsed entries end.
    parsed_up_to: usize,
    /// The current record of each key, in the order keys first appear.
    records: Vec<LiveRecord>,
    by_key: foldhash::HashMap<Box<str>, usize>,
}

/// A series' current record in a mapped file.
#[derive(Debug)]
struct LiveRecord {
    series: Option<usize>,
    record: usize,
    capacity: usize,
    schema: i8,
    zero_threshold: f64,
}

/// How reading a file through its map went.
enum Outcome {
    /// Its records were added (this many).
    Read(usize),
    /// `used` is past the map: map it again at its new size.
    Outgrown,
    /// It shrank under the map.
    Shrunk,
    /// It did not read right: read it with `pread`.
    Unreadable,
    /// Added in part, then it did not read right ([`Adding::AsLoaded`]).
    AddedInPart,
}

impl MappedNatives {
    /// Files mapped.
    pub(super) fn len(&self) -> usize {
        self.mapped
    }

    /// Drops every map (and what records name).
    pub(super) fn clear(&mut self) {
        self.indexes.clear();
        self.files.clear();
        self.mapped = 0;
        self.unmappable.clear();
    }

    /// Lines the maps up with `companions` (the same files in the same
    /// order as last time, usually): each kept map moves to its
    /// companion's place, the maps of files no longer read are dropped.
    fn line_up(&mut self, companions: &[LiveCompanion<'_>]) {
        let same = self.indexes.len() == companions.len()
            && self
                .indexes
                .iter()
                .zip(companions)
                .all(|(&index, companion)| index == companion.index);
        if same {
            return;
        }
        let mut kept: foldhash::HashMap<usize, MappedNative> = self
            .indexes
            .drain(..)
            .zip(self.files.drain(..))
            .filter_map(|(index, file)| Some((index, file?)))
            .collect();
        self.indexes
            .extend(companions.iter().map(|companion| companion.index));
        self.files.extend(
            companions
                .iter()
                .map(|companion| kept.remove(&companion.index)),
        );
        self.mapped = self.files.iter().flatten().count();
        self.unmappable
            .retain(|index, _| companions.iter().any(|c| c.index == *index));
    }

    /// Reads `companions` through their maps, mapping those not mapped yet
    /// within `maps` maps in all (`None`: none may be, and every map is
    /// dropped), adding their records to `sink` as `adding` says; problems
    /// go to `problems`. Returns the companions to read with `pread`
    /// instead, and the records added; `None` if a file was added in part
    /// (only when [`Adding::AsLoaded`]): what was added is then to be
    /// thrown away, and the companions read again adding whole files.
    pub(super) fn read(
        &mut self,
        companions: &[LiveCompanion<'_>],
        maps: Option<usize>,
        sink: &mut impl RecordSink,
        problems: &mut Vec<(PathBuf, ReadError)>,
        adding: Adding,
    ) -> Option<(Vec<PathBuf>, usize)> {
        let Some(maps) = maps else {
            self.clear();
            return Some((companions.iter().map(LiveCompanion::path).collect(), 0));
        };
        // Once per scrape: a second reading of the same scrape is not one.
        if adding == Adding::AsLoaded {
            self.scrapes += 1;
        }
        let may_map_new = self.scrapes > 1;
        self.line_up(companions);
        let mut pread = Vec::new();
        let mut records = 0;
        for (companion, slot) in companions.iter().zip(self.files.iter_mut()) {
            if slot
                .as_mut()
                .is_some_and(|file| !file.is_current(companion))
            {
                *slot = None;
                self.mapped -= 1;
            }
            if !self.unmappable.is_empty() {
                let unmappable = self
                    .unmappable
                    .get(&companion.index)
                    .is_some_and(|(db, n)| {
                        Arc::ptr_eq(db, companion.db_path) && *n == companion.changes
                    });
                if unmappable {
                    pread.push(companion.path());
                    continue;
                }
                self.unmappable.remove(&companion.index);
            }
            let mut unmappable = false;
            // At most twice: once more after the file outgrew its map.
            let mut done = false;
            for attempt in 0..2 {
                if slot.is_none() {
                    if !may_map_new || self.mapped >= maps {
                        break;
                    }
                    match MappedNative::open(companion) {
                        Ok(Some(file)) => {
                            *slot = Some(file);
                            self.mapped += 1;
                        }
                        // Missing: a process without native histograms.
                        Ok(None) => {
                            done = true;
                            break;
                        }
                        Err(()) => break,
                    }
                }
                let Some(file) = slot.as_mut() else {
                    break;
                };
                let outcome = file.read(
                    &mut self.bytes,
                    &mut self.layouts,
                    &mut self.buckets,
                    &mut self.staged,
                    sink,
                    adding,
                );
                if matches!(outcome, Outcome::AddedInPart) {
                    return None;
                }
                if !matches!(outcome, Outcome::Read(_)) {
                    *slot = None;
                    self.mapped -= 1;
                }
                match outcome {
                    Outcome::Read(n) => {
                        records += n;
                        done = true;
                        break;
                    }
                    // Mapped at its size just now, and still `used` is past
                    // the end: bad, as `pread` will tell.
                    Outcome::Outgrown if attempt > 0 => {
                        unmappable = true;
                        break;
                    }
                    Outcome::Outgrown => {}
                    Outcome::Shrunk => {
                        let path = companion.path();
                        let error = ReadError::new(&path, 0, ReadErrorKind::ShrankUnderMap);
                        problems.push((path, error));
                        done = true;
                        break;
                    }
                    Outcome::Unreadable | Outcome::AddedInPart => {
                        unmappable = true;
                        break;
                    }
                }
            }
            if unmappable {
                self.unmappable.insert(
                    companion.index,
                    (Arc::clone(companion.db_path), companion.changes),
                );
            }
            if !done {
                pread.push(companion.path());
            }
        }
        Some((pread, records))
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

impl MappedNative {
    /// Maps the companion (`Ok(None)`: it is missing; `Err`: it is to be
    /// read with `pread`, which reports what is wrong with it).
    fn open(companion: &LiveCompanion<'_>) -> Result<Option<MappedNative>, ()> {
        let (file, meta) = match open_for_read(&companion.path()) {
            Ok(opened) => opened,
            Err(error) if error.is_vanished() => return Ok(None),
            Err(_) => return Err(()),
        };
        let size = meta.len();
        if size < NATIVE_HEADER_LEN as u64 || size > MAX_NATIVE_FILE_LEN {
            return Err(());
        }
        let map = ReadMap::new(&file, size as usize).map_err(|_| ())?;
        Ok(Some(MappedNative {
            map,
            identity: FileIdentity::from_metadata(&meta),
            db_path: Arc::clone(companion.db_path),
            changes: companion.changes,
            parsed_up_to: NATIVE_HEADER_LEN,
            records: Vec::new(),
            by_key: foldhash::HashMap::default(),
        }))
    }

    /// Whether the map is still of `companion`'s file: nothing happened to
    /// its `*.db` file since it was checked, or the companion is the same
    /// file as mapped (checked now, and then remembered).
    fn is_current(&mut self, companion: &LiveCompanion<'_>) -> bool {
        if Arc::ptr_eq(&self.db_path, companion.db_path) && self.changes == companion.changes {
            return true;
        }
        if FileIdentity::of(&companion.path()).ok() != Some(self.identity) {
            return false;
        }
        self.db_path = Arc::clone(companion.db_path);
        self.changes = companion.changes;
        true
    }

    /// Reads the current records through the map, parsing new entries
    /// first, and adds them to `sink` as `adding` says.
    fn read(
        &mut self,
        bytes: &mut Vec<u8>,
        layouts: &mut Vec<NativeRecordLayout>,
        buckets: &mut Vec<(i32, bool, u64)>,
        staged: &mut Vec<Staged>,
        sink: &mut impl RecordSink,
        adding: Adding,
    ) -> Outcome {
        if let Err(outcome) = self.parse_new(bytes, layouts, sink) {
            return outcome;
        }
        match adding {
            Adding::AsLoaded => self.add_as_loaded(buckets, sink),
            Adding::WholeFiles => self.add_whole(buckets, staged, sink),
        }
    }

    /// Parses the entries written since the last parse.
    fn parse_new(
        &mut self,
        bytes: &mut Vec<u8>,
        layouts: &mut Vec<NativeRecordLayout>,
        sink: &mut impl RecordSink,
    ) -> Result<(), Outcome> {
        let used = match copy_appended(&self.map, self.parsed_up_to, bytes) {
            Ok(Some(used)) => used,
            Ok(None) => return Ok(()),
            Err(trouble) => return Err(Outcome::from(trouble)),
        };
        layouts.clear();
        if native_record_layouts(bytes, self.parsed_up_to, used, layouts).is_err() {
            return Err(Outcome::Unreadable);
        }
        for layout in layouts.drain(..) {
            // A key's last record is its current one.
            if layout.moved {
                continue;
            }
            let record = LiveRecord {
                series: sink.series(&layout.key),
                record: layout.record,
                capacity: layout.capacity,
                schema: layout.schema,
                zero_threshold: layout.zero_threshold,
            };
            match self.by_key.get(layout.key.as_str()) {
                Some(&at) => self.records[at] = record,
                None => {
                    self.by_key
                        .insert(layout.key.into_boxed_str(), self.records.len());
                    self.records.push(record);
                }
            }
        }
        self.parsed_up_to = used;
        Ok(())
    }

    /// Adds each record's buckets to its series' merge as they are loaded
    /// (a record the merge cannot take so, of another schema or zero
    /// bucket, is copied out and added whole).
    fn add_as_loaded(
        &mut self,
        buckets: &mut Vec<(i32, bool, u64)>,
        sink: &mut impl RecordSink,
    ) -> Outcome {
        let records = &self.records;
        let read = self.map.read(|view| {
            for record in records {
                let Some(series) = record.series else {
                    // Not added, but read: a damaged record is a damaged
                    // file.
                    read_native_record_counts(view, record.record, record.capacity, |_, _, _| {})
                        .map_err(drop)?;
                    continue;
                };
                if let Some(merge) = sink.merge(series) {
                    if merge.begin_loaded(record.schema, record.zero_threshold) {
                        let mut fits = true;
                        let counts = read_native_record_counts(
                            view,
                            record.record,
                            record.capacity,
                            |index, negative, count| {
                                fits &= merge.add_loaded(index, negative, count)
                            },
                        )
                        .map_err(drop)?;
                        if !fits {
                            return Err(());
                        }
                        merge.end_loaded(counts);
                        continue;
                    }
                }
                buckets.clear();
                let counts = read_native_record_counts(
                    view,
                    record.record,
                    record.capacity,
                    |index, negative, count| buckets.push((index, negative, count)),
                )
                .map_err(drop)?;
                sink.add(
                    series,
                    RecordRead {
                        schema: record.schema,
                        zero_threshold: record.zero_threshold,
                        counts,
                        buckets: buckets.iter().copied(),
                    },
                );
            }
            Ok(())
        });
        match read {
            Ok(Ok(())) => Outcome::Read(records.len()),
            Ok(Err(())) | Err(_) => Outcome::AddedInPart,
        }
    }

    /// Copies each record's counts out, and adds them to `sink` if the
    /// whole file reads right.
    fn add_whole(
        &mut self,
        buckets: &mut Vec<(i32, bool, u64)>,
        staged: &mut Vec<Staged>,
        sink: &mut impl RecordSink,
    ) -> Outcome {
        buckets.clear();
        staged.clear();
        let records = &self.records;
        let read = self.map.read(|view| {
            for (n, record) in records.iter().enumerate() {
                let start = buckets.len();
                let counts = read_native_record_counts(
                    view,
                    record.record,
                    record.capacity,
                    |index, negative, count| buckets.push((index, negative, count)),
                )?;
                staged.push(Staged {
                    record: n,
                    counts,
                    buckets: (start, buckets.len()),
                });
            }
            Ok::<(), multiprom_format::ParseError>(())
        });
        match read {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Outcome::Unreadable,
            Err(_) => return Outcome::Shrunk,
        }
        for staged in staged.iter() {
            let record = &records[staged.record];
            if let Some(series) = record.series {
                sink.add(
                    series,
                    RecordRead {
                        schema: record.schema,
                        zero_threshold: record.zero_threshold,
                        counts: staged.counts,
                        buckets: buckets[staged.buckets.0..staged.buckets.1].iter().copied(),
                    },
                );
            }
        }
        Outcome::Read(records.len())
    }
}
