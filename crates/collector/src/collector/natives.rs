//! Native histograms: read from the companion files of the histogram files
//! merged (`native-histograms/histogram_<id>.native`, see
//! [`multiprom_format::native_file`]) and merged per series, for a
//! protobuf scrape only (the text formats have no room for them).
//!
//! Every listed histogram file's companion is read, dead workers' and the
//! compacted file's too, as their `*.db` values are merged: a native
//! histogram counts every observation ever made, as the classic one does.
//!
//! Settled files cost nothing: the companion of a histogram file the
//! collector has settled (its writer is gone, see
//! `DirCollector::settle_exited_writers`) cannot change either. Only its
//! writer writes it, and a process records a native observation only after
//! it has opened its histogram `*.db` file (a metric's classic part is made
//! with it, before the metric is handed out), so a new process with the
//! same pid shows up as an open of the `*.db` file, which unsettles it (as
//! does any event naming it, and the periodic resync). A settled file is
//! read once, after its writer was seen gone; the settled files' native
//! histograms are kept merged, and grown, while those files stay settled
//! (each by the collection its writer was seen gone in, so a file
//! unsettled and settled again in between is read again): a scrape reads
//! and merges only the other files' companions onto a copy of them.
//! Counts are exact; sums are added in a different order than the listing
//! (settled files first, then the others; files read on several threads
//! are merged per thread or shard first), so the last bits of a sum may
//! differ from a merge in listing order.
//!
//! Live workers' companions are kept mapped between scrapes where maps
//! may be had (see [`super::live_natives`]), in shards read on threads of
//! their own on a big directory ([`LiveShard`]), beside the merge of the
//! `*.db` files (see [`read_live_beside`]): a scrape then
//! loads only the words of each current record's counts and buckets in
//! use, and adds them into one dense merge per series and shard
//! ([`crate::native_dense`]). Those
//! not mapped (a collector's first scrape, no SIGBUS guard, past the limit
//! on maps, a file that does not read right through a map) are read with
//! `pread`.
//!
//! A companion that is missing is the usual case (a process that records
//! no native histogram); a bad one costs its native histograms and a
//! warning, once, never a sample and never the scrape. What each key names
//! is decoded once and kept, so a warm scrape decodes no key, and records
//! are merged from the bytes read, with no allocation per record.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use multiprom_format::native_file::{native_histogram_path, NATIVE_HISTOGRAM_DIR};
use multiprom_format::{
    read_native_histogram_bytes, visit_native_histogram_file, FileName, Key, MetricKind,
    NativeHistogram, NativeVisitScratch, ReadError,
};

use crate::native_dense::{DenseNative, RecordRead};
use crate::native_histograms::{series_key, NativeHistograms};
use crate::problem::Warning;

use super::file_entry::{path_bytes, FileEntry};
use super::gather::cores;
use super::live_natives::{Adding, LiveCompanion, MappedNatives, RecordSink, StagedBuckets};
use super::threads::{on_threads, on_threads_beside};

/// The series each key names (`None`: a key that does not decode), by the
/// key as written.
type SeriesOfKeys = foldhash::HashMap<Box<str>, Option<Arc<[u8]>>>;

/// What native histogram collection keeps between scrapes.
#[derive(Debug, Default)]
pub(super) struct NativeState {
    /// The native histogram files last reported bad, so each problem is
    /// reported once.
    reported: BTreeMap<PathBuf, ReadError>,
    keys: SeriesOfKeys,
    /// One reader per reading thread, kept for the next scrape.
    readers: Vec<Reader>,
    /// Buckets being merged, kept for the next merge.
    scratch: Vec<(i32, u64)>,
    /// The settled files' native histograms.
    settled: SettledNatives,
    /// The plan generation and settle version of the settled files merged.
    settled_for: Option<(u64, u64)>,
    /// Live workers' files kept mapped, and the series their records are
    /// merged into, in shards read on separate threads.
    live: Vec<LiveShard>,
    /// Whether the collector's directory had a native histogram
    /// subdirectory when last looked at, and in which of its listings.
    has_dir: Option<(u64, bool)>,
}

/// A share of the live workers' companions (those whose `*.db` file's
/// index in the file table is the shard's number, modulo the number of
/// shards, so a file stays in one shard from scrape to scrape): its maps,
/// what their keys name and the dense merges of their records. Shards are
/// read on separate threads on a big directory, each into its own merges,
/// added up in shard order, so sums come out the same however the threads
/// ran.
#[derive(Debug, Default)]
struct LiveShard {
    mapped: MappedNatives,
    keys: SeriesOfKeys,
    dense: DenseSeries,
}

/// What reading a shard's companions gave besides its dense merges.
#[derive(Debug, Default)]
pub(super) struct ShardRead {
    /// Companions to read with `pread` instead.
    pread: Vec<PathBuf>,
    records: usize,
    problems: Vec<(PathBuf, ReadError)>,
}

/// Per-series dense merges of mapped records, kept between scrapes so
/// their windows are reused; a mapped record names its series by index.
#[derive(Debug, Default)]
struct DenseSeries {
    ids: foldhash::HashMap<Arc<[u8]>, usize>,
    series: Vec<(Arc<[u8]>, DenseNative)>,
    /// The series with records this scrape.
    touched: Vec<usize>,
    histogram: Option<NativeHistogram>,
    scratch: Vec<(i32, u64)>,
}

/// What mapped records are merged with: the keys decoded, the series.
struct DenseSink<'a> {
    keys: &'a mut SeriesOfKeys,
    dense: &'a mut DenseSeries,
}

impl LiveShard {
    /// Reads `companions` through their maps, within `maps` maps (see
    /// [`MappedNatives::read`]), merging their records into the shard's
    /// series.
    fn read(&mut self, companions: &[LiveCompanion<'_>], maps: Option<usize>) -> ShardRead {
        let mut sink = DenseSink {
            keys: &mut self.keys,
            dense: &mut self.dense,
        };
        let mut problems = Vec::new();
        let read = self
            .mapped
            .read(companions, maps, &mut sink, &mut problems, Adding::AsLoaded);
        let (pread, records) = read.unwrap_or_else(|| {
            // A file was added in part: read them all again, each file
            // added whole or not at all (the file in question is then
            // reported, and read with `pread` until it changes).
            sink.dense.clear_touched();
            let again = self.mapped.read(
                companions,
                maps,
                &mut sink,
                &mut problems,
                Adding::WholeFiles,
            );
            again.unwrap_or_default()
        });
        ShardRead {
            pread,
            records,
            problems,
        }
    }

    /// Merges the series with records into `into`, and forgets what piled
    /// up of files gone (`records`: records read this scrape, all shards).
    fn drain_into(&mut self, into: &mut NativeHistograms, records: usize) {
        self.dense.drain_into(into);
        if self.keys.len() > 2 * records + 1024 {
            // Keys of files gone or rewritten piled up; the maps' records
            // name series, not keys.
            self.keys.clear();
        }
        if self.dense.series.len() > 2 * records + 1024 {
            // Series of files gone piled up; the maps' records name them.
            self.dense = DenseSeries::default();
            self.mapped.clear();
        }
    }
}

/// Reads the live companions through maps, split into `shards` (made
/// [`SHARDS_PER_CORE`] per core, at most eight, the first time), on as
/// many threads as there are many files for (loading the words of
/// thousands of mapped records waits on memory, which two cores wait on
/// side by side), after `beside` on this thread (see
/// [`read_live_beside`]). `maps`: how many companions may be kept mapped
/// in all (`None`: none).
fn read_live<T>(
    shards: &mut Vec<LiveShard>,
    live: &[LiveCompanion<'_>],
    maps: Option<usize>,
    beside: impl FnOnce() -> T,
) -> (T, Vec<ShardRead>) {
    let cores = cores().clamp(1, 4);
    let n = SHARDS_PER_CORE * cores;
    if shards.len() != n {
        shards.clear();
        shards.resize_with(n, LiveShard::default);
    }
    let mut lists: Vec<Vec<LiveCompanion<'_>>> = vec![Vec::new(); n];
    for companion in live {
        lists[companion.index % n].push(*companion);
    }
    let threads = (live.len() / FILES_PER_THREAD).clamp(1, cores);
    let shares = shards.iter_mut().zip(lists).enumerate();
    on_threads_beside(
        shares,
        threads,
        |(i, (shard, list))| {
            let share = maps.map(|maps| maps / n + usize::from(i < maps % n));
            shard.read(&list, share)
        },
        beside,
    )
}

/// Shards of live companions per core: more than one, so that the thread
/// that merged the `*.db` files finds some left to read when it is done.
const SHARDS_PER_CORE: usize = 2;

impl RecordSink for DenseSink<'_> {
    fn series(&mut self, raw_key: &str) -> Option<usize> {
        let series = series_of(self.keys, raw_key)?;
        let dense = &mut *self.dense;
        Some(*dense.ids.entry(series).or_insert_with_key(|series| {
            dense
                .series
                .push((Arc::clone(series), DenseNative::default()));
            dense.series.len() - 1
        }))
    }

    fn add(&mut self, series: usize, record: RecordRead<StagedBuckets<'_>>) {
        let dense = &mut *self.dense;
        let Some((_, merge)) = dense.series.get_mut(series) else {
            return;
        };
        if merge.is_empty() {
            dense.touched.push(series);
        }
        let histogram = dense
            .histogram
            .get_or_insert_with(|| NativeHistogram::empty(0, 0.0));
        merge.add(record, histogram, &mut dense.scratch);
    }

    fn merge(&mut self, series: usize) -> Option<&mut DenseNative> {
        let dense = &mut *self.dense;
        let (_, merge) = dense.series.get_mut(series)?;
        if merge.is_empty() {
            dense.touched.push(series);
        }
        Some(merge)
    }
}

impl DenseSeries {
    /// Forgets the records added this scrape.
    fn clear_touched(&mut self) {
        for series in self.touched.drain(..) {
            if let Some((_, merge)) = self.series.get_mut(series) {
                merge.clear();
            }
        }
    }

    /// Merges the series with records into `into`, and clears them.
    fn drain_into(&mut self, into: &mut NativeHistograms) {
        for series in self.touched.drain(..) {
            let Some((key, merge)) = self.series.get_mut(series) else {
                continue;
            };
            if let Some(histogram) = merge.to_histogram() {
                into.merge(key, histogram, &mut self.scratch);
            }
            merge.clear();
        }
    }
}

/// The native histograms of settled files, merged.
#[derive(Debug, Default)]
struct SettledNatives {
    /// The files merged: index in the file table, and the collection its
    /// writer was seen gone in.
    files: foldhash::HashMap<usize, u64>,
    merged: NativeHistograms,
    /// Those files' bad native histogram files.
    problems: BTreeMap<PathBuf, ReadError>,
    /// Records merged.
    records: usize,
}

/// A histogram file whose companion is to be read (its path is made only
/// when it is read: most are settled files' on a big directory). Its own,
/// not borrowed from the file table, so that live workers' companions can
/// be read while the `*.db` files are merged.
struct Companion {
    name: FileName,
    /// Its index in the file table, its path there, and its changes.
    index: usize,
    db_path: Arc<Path>,
    changes: u64,
    /// Its index in the file table and the collection its writer was seen
    /// gone in, for a settled file.
    settled: Option<(usize, u64)>,
}

impl Companion {
    /// The directory of its `*.db` file.
    fn dir(&self) -> &Path {
        self.db_path.parent().unwrap_or(Path::new(""))
    }

    fn path(&self) -> PathBuf {
        native_histogram_path(self.dir(), &self.name)
    }
}

/// The companions one collection reads, found before its `*.db` files are
/// merged (see [`read_live_beside`]).
pub(super) struct NativeFiles {
    companions: Vec<Companion>,
    /// Whether the settled files' merge is kept as it is: only the files
    /// not settled were looked at.
    settled_kept: bool,
    /// The plan generation and settle version the settled files are those
    /// of.
    settled_for: Option<(u64, u64)>,
}

/// Which files are settled, for a collection that settles them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Settling<'a> {
    /// The generation of the plan whose settled files may be kept merged.
    pub generation: u64,
    /// The collector's settle version (bumped whenever files may have
    /// become settled or unsettled).
    pub version: u64,
    /// For a quiet collection, the files not settled (index in the file
    /// table, position in the listing): the others are known to be the
    /// settled files of the last collection.
    pub unsettled: Option<&'a [(usize, usize)]>,
}

/// Reads the native histogram files of the good histogram files of `order`
/// (in `known`) and merges them per series: [`native_files`], then
/// [`read_live_beside`] with nothing beside, then [`merge_natives`].
pub(super) fn collect_natives(
    known: &[Option<FileEntry>],
    order: &[usize],
    dir: Option<&Path>,
    settling: Option<Settling<'_>>,
    maps: Option<usize>,
    state: &mut NativeState,
    warnings: &mut Vec<Warning>,
) -> NativeHistograms {
    let files = native_files(known, order, dir.map(|dir| (dir, None)), settling, state);
    let ((), live) = read_live_beside(state, files.as_ref(), maps, || ());
    merge_natives(files, live, state, warnings)
}

/// The companions of the good histogram files of `order` (in `known`) to
/// read (`None`: the directory has no native histogram subdirectory).
/// `dir`: the directory all the files are in, if they are in one, and
/// which listing of it this is (see `Listing::listings`; `None`:
/// not known). `settling`: which files are settled and may be kept merged
/// (`None`: nothing settles).
///
/// When the settled files are those whose native histograms are kept
/// merged (the same plan and settle version, as of a quiet collection),
/// only the files not settled are looked at: on a directory of a thousand
/// exited workers, a few dozen entries instead of every one.
///
/// Called before the `*.db` files are merged, so a file that settles in
/// that merge is read as a live worker's this time, and as a settled one
/// from the next collection on: each read once either way. (A `*.db` file
/// the merge finds shrunk under its map keeps its companion in this
/// collection's native histograms; the next one looks at both again.)
pub(super) fn native_files(
    known: &[Option<FileEntry>],
    order: &[usize],
    dir: Option<(&Path, Option<u64>)>,
    settling: Option<Settling<'_>>,
    state: &mut NativeState,
) -> Option<NativeFiles> {
    // Whether each directory has a native histogram subdirectory, looked at
    // once: a directory without one (prometheus_client's alone) costs one
    // `stat` per collection, not a failed `open` per histogram file; and
    // not even that while the directory's listing is the one it was looked
    // at with (the watch saw no name come or go since, the
    // subdirectory's included: collections that read no native file may
    // have listed it again in between).
    let mut looked: Vec<(&Path, bool)> = Vec::new();
    let dir = dir.map(|(dir, listing)| {
        let has = match (state.has_dir, listing) {
            (Some((seen_in, has)), Some(listing)) if seen_in == listing => has,
            _ => has_native_dir(dir),
        };
        state.has_dir = listing.map(|listing| (listing, has));
        (dir, has)
    });
    if let Some((dir, has)) = dir {
        if !has {
            state.reported.clear();
            state.keys.clear();
            state.settled = SettledNatives::default();
            state.live.clear();
            return None;
        }
        looked.push((dir, has));
    }
    let settled = settling.map(|settling| settling.generation);
    let settled_for = settling.map(|settling| (settling.generation, settling.version));
    let settled_kept = settling.and_then(|settling| {
        settling
            .unsettled
            .filter(|_| state.settled_for == settled_for)
    });
    let walk: Box<dyn Iterator<Item = usize> + '_> = match settled_kept {
        Some(unsettled) => Box::new(unsettled.iter().map(|&(index, _)| index)),
        None => Box::new(order.iter().copied()),
    };
    let mut companions = Vec::new();
    for index in walk {
        let Some(entry) = known.get(index).and_then(Option::as_ref) else {
            continue;
        };
        let Some(file) = entry.file.as_ref().filter(|_| entry.problem.is_none()) else {
            continue;
        };
        if file.name.kind() != MetricKind::Histogram {
            continue;
        }
        let dir = match dir {
            Some((dir, _)) => dir,
            None => entry.path.parent().unwrap_or(Path::new("")),
        };
        let has = match looked
            .iter()
            .rfind(|(seen, _)| path_bytes(seen) == path_bytes(dir))
        {
            Some(&(_, has)) => has,
            None => {
                let has = has_native_dir(dir);
                looked.push((dir, has));
                has
            }
        };
        if has {
            let settled = settled
                .filter(|&generation| file.is_settled(generation))
                .map(|_| (index, file.writer_gone_in));
            companions.push(Companion {
                name: file.name.clone(),
                index,
                db_path: Arc::clone(&entry.path),
                changes: file.changes(),
                settled,
            });
        }
    }
    Some(NativeFiles {
        companions,
        settled_kept: settled_kept.is_some(),
        settled_for,
    })
}

/// Runs `beside` on this thread while the live workers' companions of
/// `files` are read on the others (when they are many), then reads what is
/// left of them here too: the merge of the `*.db` files and the loads of
/// the native histograms wait on memory side by side. `maps`: how many
/// companions may be kept mapped in all (`None`: none). Without `files`
/// (no native histograms read), only `beside` runs.
pub(super) fn read_live_beside<T>(
    state: &mut NativeState,
    files: Option<&NativeFiles>,
    maps: Option<usize>,
    beside: impl FnOnce() -> T,
) -> (T, Vec<ShardRead>) {
    let Some(files) = files else {
        return (beside(), Vec::new());
    };
    let live: Vec<LiveCompanion<'_>> = files
        .companions
        .iter()
        .filter(|c| c.settled.is_none())
        .map(|c| LiveCompanion {
            index: c.index,
            db_path: &c.db_path,
            changes: c.changes,
            dir: c.dir(),
            name: &c.name,
        })
        .collect();
    read_live(&mut state.live, &live, maps, beside)
}

/// Merges the native histograms of `files`: the settled files' (brought up
/// to date), then the live ones' read by [`read_live_beside`] (`live`),
/// then those read with `pread`. A bad native histogram file is skipped
/// and reported in `warnings` once.
pub(super) fn merge_natives(
    files: Option<NativeFiles>,
    live: Vec<ShardRead>,
    state: &mut NativeState,
    warnings: &mut Vec<Warning>,
) -> NativeHistograms {
    let Some(files) = files else {
        return NativeHistograms::default();
    };
    let mut problems: BTreeMap<PathBuf, ReadError> = BTreeMap::new();
    let mut records = if files.settled_kept {
        state.settled.records
    } else {
        state.settled_for = files.settled_for;
        state.update_settled(&files.companions)
    };
    problems.extend(
        state
            .settled
            .problems
            .iter()
            .map(|(p, e)| (p.clone(), e.clone())),
    );
    let mut natives = state.settled.merged.clone();
    let mut pread = Vec::new();
    for read in live {
        pread.extend(read.pread);
        problems.extend(read.problems);
        records += read.records;
    }
    records += state.read_into(&pread, &mut natives, &mut problems);
    for shard in &mut state.live {
        shard.drain_into(&mut natives, records);
    }
    for (path, error) in &problems {
        if state.reported.get(path) != Some(error) {
            warnings.push(Warning::NativeHistograms(error.clone()));
        }
    }
    state.reported = problems;
    if state.keys.len() > 2 * records + 1024 {
        // Keys of files gone or rewritten piled up.
        state.keys.clear();
    }
    for reader in &mut state.readers {
        if reader.buf.capacity() > BUF_KEEP {
            reader.buf = Vec::new();
        }
    }
    natives
}

impl NativeState {
    /// Brings the settled files' merge up to the settled files of
    /// `companions`: grown by the newly settled ones while every file
    /// merged stays settled, else made afresh. Returns the records it
    /// holds.
    fn update_settled(&mut self, companions: &[Companion]) -> usize {
        let now: Vec<(usize, u64)> = companions.iter().filter_map(|c| c.settled).collect();
        let still = now
            .iter()
            .filter(|(index, since)| self.settled.files.get(index) == Some(since))
            .count();
        if still == now.len() && still == self.settled.files.len() {
            return self.settled.records;
        }
        if still < self.settled.files.len() {
            self.settled = SettledNatives::default();
        }
        let new: Vec<PathBuf> = companions
            .iter()
            .filter(|c| {
                c.settled
                    .is_some_and(|(index, since)| self.settled.files.get(&index) != Some(&since))
            })
            .map(Companion::path)
            .collect();
        let mut merged = std::mem::take(&mut self.settled.merged);
        let mut problems = std::mem::take(&mut self.settled.problems);
        self.settled.records += self.read_into(&new, &mut merged, &mut problems);
        self.settled.merged = merged;
        self.settled.problems = problems;
        self.settled.files.extend(now);
        self.settled.records
    }

    /// Reads the native histogram files at `paths` and merges them into
    /// `into`, their problems into `problems`: the records merged.
    fn read_into(
        &mut self,
        paths: &[PathBuf],
        into: &mut NativeHistograms,
        problems: &mut BTreeMap<PathBuf, ReadError>,
    ) -> usize {
        let read = read_all(paths, &self.keys, &mut self.readers);
        let mut records = 0;
        for part in read {
            records += part.records;
            into.absorb(part.merged, &mut self.scratch);
            for (raw_key, histogram) in part.unknown {
                if let Some(series) = series_of(&mut self.keys, &raw_key) {
                    into.merge(&series, histogram, &mut self.scratch);
                }
            }
            problems.extend(part.problems);
        }
        records
    }
}

/// The series `raw_key` names: its family name and sorted labels, as
/// [`series_key`] encodes them; decoded the first time the key is read,
/// then kept in `keys`.
fn series_of(keys: &mut SeriesOfKeys, raw_key: &str) -> Option<Arc<[u8]>> {
    if let Some(series) = keys.get(raw_key) {
        return series.clone();
    }
    let series = Key::decode(raw_key.as_bytes()).ok().map(|key| {
        let mut labels: Vec<(&str, &str)> = key
            .labels
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect();
        labels.sort_unstable();
        let mut bytes = Vec::new();
        series_key(&mut bytes, &key.family, labels.into_iter());
        Arc::from(bytes)
    });
    keys.insert(raw_key.into(), series.clone());
    series
}

impl NativeState {
    /// Live workers' companions kept mapped.
    pub(super) fn mapped_files(&self) -> usize {
        self.live.iter().map(|shard| shard.mapped.len()).sum()
    }
}

/// A read buffer kept between collections; a bigger one is freed.
const BUF_KEEP: usize = 1 << 20;

/// Below this many files one thread reads them: a thread's start costs
/// more than it saves.
const FILES_PER_THREAD: usize = 128;

/// What one reading thread keeps between scrapes.
#[derive(Debug, Default)]
struct Reader {
    buf: Vec<u8>,
    visit: NativeVisitScratch,
    histogram: Option<NativeHistogram>,
    scratch: Vec<(i32, u64)>,
}

/// What one thread read and merged.
#[derive(Debug, Default)]
struct Part {
    merged: NativeHistograms,
    /// Records whose key was not decoded yet (read once per key).
    unknown: Vec<(String, NativeHistogram)>,
    problems: Vec<(PathBuf, ReadError)>,
    records: usize,
}

impl Reader {
    /// Reads the files at `paths` and merges their records by what `keys`
    /// says they name.
    fn read(&mut self, paths: &[PathBuf], keys: &SeriesOfKeys) -> Part {
        let mut part = Part::default();
        let histogram = self
            .histogram
            .get_or_insert_with(|| NativeHistogram::empty(0, 0.0));
        for path in paths {
            let size = match read_native_histogram_bytes(path, &mut self.buf) {
                Ok(size) => size,
                // Missing: a process without native histograms (or reaped).
                Err(error) if error.is_vanished() => continue,
                Err(error) => {
                    part.problems.push((path.to_path_buf(), error));
                    continue;
                }
            };
            // Checked whole before the first record: a bad file merges
            // nothing.
            let visited = visit_native_histogram_file(&self.buf, size, &mut self.visit, |record| {
                part.records += 1;
                match keys.get(record.key()) {
                    Some(Some(series)) => {
                        part.merged
                            .merge_record(series, &record, histogram, &mut self.scratch);
                    }
                    Some(None) => {}
                    None => part
                        .unknown
                        .push((record.key().to_owned(), record.to_histogram())),
                }
            });
            if let Err(error) = visited {
                part.problems.push((path.to_path_buf(), error.at(path)));
            }
        }
        part
    }
}

/// Reads and merges the native histogram files at `paths`, split between
/// threads on many files (reading is most of what native histograms cost
/// a scrape: opening, copying and parsing every file, as workers write
/// them through maps that no event reports). `readers`: one per thread,
/// kept between calls.
fn read_all(paths: &[PathBuf], keys: &SeriesOfKeys, readers: &mut Vec<Reader>) -> Vec<Part> {
    let threads = (paths.len() / FILES_PER_THREAD).clamp(1, cores().min(4));
    if readers.len() < threads {
        readers.resize_with(threads, Reader::default);
    }
    if threads == 1 {
        return vec![readers[0].read(paths, keys)];
    }
    let per_thread = paths.len().div_ceil(threads);
    let chunks = paths.chunks(per_thread).zip(readers.iter_mut());
    on_threads(chunks, threads, |(chunk, reader)| reader.read(chunk, keys))
}

/// Whether `dir` has a native histogram subdirectory (one that cannot be
/// looked at counts as none: native histograms are then left out, never
/// the samples).
fn has_native_dir(dir: &Path) -> bool {
    std::fs::metadata(dir.join(NATIVE_HISTOGRAM_DIR)).is_ok_and(|meta| meta.is_dir())
}

#[cfg(test)]
mod tests {
    use multiprom_format::{encode_key, FileName, NativeHistogramConfig, NativeHistogramWriter};

    use super::*;

    #[test]
    fn reads_split_between_threads_all_merge() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let written = [0, 150, 299];
        let paths: Vec<PathBuf> = (0..300)
            .map(|n| {
                let name = FileName::new(MetricKind::Histogram, n.to_string())
                    .unwrap_or_else(|e| panic!("{e}"));
                if written.contains(&n) {
                    let writer = NativeHistogramWriter::open(dir.path(), &name)
                        .unwrap_or_else(|e| panic!("{e}"));
                    let key = encode_key("h", "h", [("n", n.to_string().as_str())], "");
                    writer
                        .series(&key, NativeHistogramConfig::default())
                        .unwrap_or_else(|e| panic!("{e}"))
                        .observe(n as f64);
                }
                native_histogram_path(dir.path(), &name)
            })
            .collect();
        let mut state = NativeState::default();
        let mut merged = NativeHistograms::default();
        let mut problems = BTreeMap::new();
        // Keys first read, then known: the same histograms either way.
        for _ in 0..2 {
            merged = NativeHistograms::default();
            assert_eq!(state.read_into(&paths, &mut merged, &mut problems), 3);
        }
        assert!(problems.is_empty());
        for n in written {
            let labels: [(Arc<str>, Arc<str>); 1] = [("n".into(), n.to_string().into())];
            let histogram = merged.get("h", &labels).unwrap_or_else(|| panic!("{n}"));
            assert_eq!(histogram.sum, n as f64);
        }
        assert_eq!(
            state.readers.len(),
            (300 / FILES_PER_THREAD).clamp(1, cores().min(4))
        );
    }
}
