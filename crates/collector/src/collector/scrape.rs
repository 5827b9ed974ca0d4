//! What a collection returns: the scrape, its counters, each file's report, and the options and error of a collection.

use std::hash::Hash;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use multiprom_format::{FileName, ReadError};

use crate::exposition::{Escaping, Format};
use crate::family::MergedFamily;
use crate::native_histograms::NativeHistograms;
use crate::problem::Warning;

/// How to merge: [`CollectOptions::default`] is Python's
/// `MultiProcessCollector`; change an option with its builder method.
///
/// ```
/// use multiprom_collector::CollectOptions;
/// let raw = CollectOptions::default().accumulate(false);
/// assert!(!raw.accumulate);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CollectOptions {
    /// Histogram buckets cumulative with a `_count` sample (Python's default,
    /// `accumulate=True`). `false` keeps raw per-bucket values and no `_count`,
    /// for writing merged data back into files.
    pub accumulate: bool,
}

impl Default for CollectOptions {
    fn default() -> Self {
        CollectOptions { accumulate: true }
    }
}

impl CollectOptions {
    /// These options with [`CollectOptions::accumulate`] set.
    #[must_use]
    pub fn accumulate(mut self, accumulate: bool) -> Self {
        self.accumulate = accumulate;
        self
    }
}

/// Whether a collection also reads and merges the native histogram files
/// (see [`Scrape::natives`]): only the protobuf format serves them, so a
/// text scrape need not pay for them.
///
/// ```
/// use multiprom_collector::{DirCollector, Natives};
/// let dir = tempfile::tempdir()?;
/// let collector = DirCollector::new(dir.path());
/// let for_protobuf = collector.collect_with(|_| Default::default(), None, Natives::Merge)?;
/// assert!(for_protobuf.natives.is_empty()); // none written here
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Natives {
    /// The `*.db` files only: everything the text formats show.
    #[default]
    Skip,
    /// The native histogram files too, merged into [`Scrape::natives`].
    Merge,
}

/// Whether a collection attaches exemplars to its samples. The Prometheus
/// text format shows none, so a collection only for it need not read the
/// exemplar files (a directory of exited workers with exemplars has one per
/// file).
///
/// ```
/// use multiprom_collector::{DirCollector, Exemplars, Natives};
/// let dir = tempfile::tempdir()?;
/// let collector = DirCollector::new(dir.path());
/// let for_text = collector.collect_for(|_| Default::default(), None, Natives::Skip, Exemplars::Skip)?;
/// assert!(for_text.families.is_empty()); // nothing written here
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Exemplars {
    /// Each counter sample and histogram bucket carries the latest
    /// exemplar of its series, if there is one.
    #[default]
    Attach,
    /// No sample carries one; no exemplar file is read.
    Skip,
}

/// The directory could not be listed at all (files within it never fail a
/// collection).
#[derive(Debug, thiserror::Error)]
#[error("{}: cannot list directory: {source}", dir.display())]
#[non_exhaustive]
pub struct CollectError {
    /// The directory.
    pub dir: PathBuf,
    /// Why.
    pub source: std::io::Error,
}

/// Whether a file contributed to the last collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileState {
    /// Read and merged.
    Ok,
    /// Skipped: damaged, foreign or unreadable.
    Bad,
    /// Gone between listing and reading (a reaped worker): skipped, not damage.
    Vanished,
}

impl FileState {
    /// `ok`, `bad` or `vanished`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            FileState::Ok => "ok",
            FileState::Bad => "bad",
            FileState::Vanished => "vanished",
        }
    }
}

/// What the last collection saw of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileReport {
    /// The file (shared with the collector's own record of it: a report
    /// costs no allocation per file and scrape).
    pub path: Arc<Path>,
    /// The parsed name, if it is a metrics file name.
    pub name: Option<FileName>,
    /// File size (capacity) in bytes, when read.
    pub file_size: u64,
    /// Bytes in use, when read.
    pub used: u64,
    /// Entries merged from it.
    pub entries: usize,
    /// Why it was skipped, if it was.
    pub problem: Option<ReadError>,
}

impl FileReport {
    /// Ok, bad or vanished.
    #[must_use]
    pub fn state(&self) -> FileState {
        match &self.problem {
            None => FileState::Ok,
            Some(p) if p.is_vanished() => FileState::Vanished,
            Some(_) => FileState::Bad,
        }
    }
}

/// Counters about one collection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScrapeStats {
    /// Files merged.
    pub files_ok: usize,
    /// Files skipped as bad.
    pub files_bad: usize,
    /// Files that vanished while being read.
    pub files_vanished: usize,
    /// Bytes read from disk.
    pub bytes_read: u64,
    /// Sample lines produced.
    pub series: usize,
    /// Time spent listing, reading and merging.
    pub duration: Duration,
    /// Which collection of its collector this is (1, 2, ...; 0 for
    /// [`merge_files`](crate::merge_files)). Callers that share one
    /// collection (see [`DirCollector::collect`](crate::DirCollector::collect))
    /// see the same number, so they can tell whether its warnings were
    /// already reported.
    pub collection: u64,
    /// Whether the merge plan (which entry feeds which output series) was
    /// worked out anew: files came or went, or gained keys. A warm
    /// collection of an unchanged directory reuses the last one.
    pub planned: bool,
    /// Whether every file was looked at (a `stat` each) because no
    /// directory watch said what changed: the first two collections (the
    /// second sets the watch), a periodic resync, a watch that could not be
    /// set or lost events. Otherwise only files the watch named were.
    pub full_look: bool,
    /// Files left unread because their writer is gone (see
    /// [`DirCollector::settle_exited_writers`](
    /// crate::DirCollector::settle_exited_writers)).
    pub files_settled: usize,
    /// Files listed but left out of this collection: the caller's, and the
    /// live gauges of writers that are gone (see
    /// [`DirCollector::leave_out_exited_live_gauges`](
    /// crate::DirCollector::leave_out_exited_live_gauges)).
    pub files_left_out: usize,
}

/// The result of one collection.
#[derive(Debug, Clone)]
pub struct Scrape {
    /// Merged families, in output order.
    pub families: Vec<MergedFamily>,
    /// The native histograms of the histogram files merged, per series:
    /// served by the protobuf format only (the text formats have no room
    /// for them, and stay as Python's). Empty unless the collection was
    /// asked for them ([`Natives::Merge`]; [`merge_files`](crate::merge_files)
    /// always reads them).
    pub natives: NativeHistograms,
    /// Every `*.db` file seen, in merge (directory listing) order. Shared
    /// with the collector's next collections while no report changes.
    pub files: Arc<[FileReport]>,
    /// Problems first seen in this collection (each file state and each
    /// conflict is reported once, not on every scrape).
    pub warnings: Vec<Warning>,
    /// Counters.
    pub stats: ScrapeStats,
}

impl AsRef<[MergedFamily]> for Scrape {
    fn as_ref(&self) -> &[MergedFamily] {
        &self.families
    }
}

impl Scrape {
    /// The families encoded in `format`.
    #[must_use]
    pub fn encode(&self, format: Format) -> String {
        // Room for a typical sample line, so the text is not copied over
        // and over while it grows.
        let mut out = String::with_capacity(128 * self.stats.series + 4096);
        format.encode(&self.families, &mut out);
        out
    }

    /// The families in the Prometheus protobuf format (length-delimited
    /// `MetricFamily` messages), for a collection that accumulated its
    /// histograms (the default), with each histogram series' native
    /// histogram (from a collection with [`Natives::Merge`]), names escaped
    /// as `escaping` says (`underscores` for a scraper that names none).
    #[must_use]
    pub fn encode_protobuf(&self, escaping: Escaping) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 * self.stats.series + 1024);
        self.encode_protobuf_into(escaping, &mut out);
        out
    }

    /// Appends [`Scrape::encode_protobuf`]'s bytes to `out`.
    pub fn encode_protobuf_into(&self, escaping: Escaping, out: &mut Vec<u8>) {
        crate::exposition::encode_protobuf(&self.families, &self.natives, None, escaping, out);
    }

    /// Every skipped file's problem (bad and vanished), in merge order.
    pub fn problems(&self) -> impl Iterator<Item = &ReadError> {
        self.files.iter().filter_map(|f| f.problem.as_ref())
    }
}
