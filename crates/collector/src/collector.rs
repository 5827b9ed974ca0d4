//! [`DirCollector`]: scan, read (incrementally), merge.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::hash::{Hash, Hasher};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use multiprom_format::read_map::guard_sigbus;
use multiprom_format::{FileName, MetricKind, OpenDir, ReadErrorKind};

use crate::exposition::Format;
use crate::family::MergedFamily;
use crate::filter::NameFilter;
use crate::intern::Interner;
use crate::keys::KeyTable;
use crate::plan::{Accumulators, Op, Plan, PlanCache, PlanInput, PlannedFile, RestrictedPlan};
use crate::problem::{Conflict, FileProblem, ProblemKind, Warning};
use crate::scan::scan_dir;
use crate::settled_sums::{OpGroup, SettledSums};
use crate::tracked::{
    KeyHints, ParseContext, Prefetched, ReadFault, ReadGuess, Refreshed, Settled, TrackedFile,
};
use crate::watch::{Changes, DirWatch};

mod quiet;
use crate::writers::ExitedWriters;
use quiet::{PlannedUnsettled, Unsettled};

/// How to merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// The directory could not be listed at all (files within it never fail a
/// collection).
#[derive(Debug, thiserror::Error)]
#[error("{}: cannot list directory: {source}", dir.display())]
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
    pub problem: Option<FileProblem>,
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
    /// [`merge_files`]). Callers that share one collection (see
    /// [`DirCollector::collect`]) see the same number, so they can tell
    /// whether its warnings were already reported.
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
    /// [`DirCollector::settle_exited_writers`]).
    pub files_settled: usize,
}

/// The result of one collection.
#[derive(Debug, Clone)]
pub struct Scrape {
    /// Merged families, in output order.
    pub families: Vec<MergedFamily>,
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

    /// Every skipped file's problem (bad and vanished), in merge order.
    pub fn problems(&self) -> impl Iterator<Item = &FileProblem> {
        self.files.iter().filter_map(|f| f.problem.as_ref())
    }
}

/// What a skipped file looked like when its problem was reported: the problem
/// plus the file's identity, size and modification time. A warning is due when
/// this changes, so a file stuck in one bad state is reported once, and one
/// that is replaced, rewritten or damaged differently is reported again.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ProblemState {
    problem: FileProblem,
    stamp: Option<FileStamp>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
}

impl FileStamp {
    /// The stamp of whatever `path` names now (`None` if nothing).
    fn of(path: &Path) -> Option<FileStamp> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some(FileStamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
        })
    }
}

/// Collects a multiprocess directory: lists `*.db` files in the directory's
/// order, reads each, skips and reports bad files, and merges exactly like
/// `prometheus_client`.
///
/// It keeps state between collections so that a warm one is cheap: files
/// stay mapped (reads of values are plain loads, with no system call per
/// file; see [`multiprom_format::read_map`] for why a file shrunk under a map
/// is an error and not a crash), each distinct key is decoded once, only new
/// entries are parsed, and the merge plan (which entry feeds which output
/// series) is reused until files or keys change.
///
/// Thread-safe. Concurrent `collect` calls cost one collection: a call that
/// arrives while another is running waits for it and shares its result.
///
/// ```
/// use multiprom_collector::{DirCollector, Format};
/// use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};
///
/// let dir = tempfile::tempdir()?;
/// for (pid, n) in [("1", 2.0), ("2", 3.0)] {
///     let mut file = FileWriter::open(dir.path(), &FileName::new(MetricKind::Counter, pid)?)?;
///     file.slot(&encode_key("requests", "requests_total", [("code", "200")], "Requests."))?.add(n);
/// }
/// std::fs::write(dir.path().join("counter_3.db"), b"not a metrics file")?; // damaged
///
/// let collector = DirCollector::new(dir.path());
/// let scrape = collector.collect()?;
/// assert_eq!(scrape.encode(Format::Prometheus), "\
/// ## HELP requests_total Requests.
/// ## TYPE requests_total counter
/// requests_total{code=\"200\"} 5.0
/// ");
/// assert_eq!(scrape.stats.files_bad, 1);
/// assert_eq!(scrape.warnings.len(), 1); // reported once...
/// assert!(collector.collect()?.warnings.is_empty()); // ...not on every scrape
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A histogram written by two processes (Python stores per-bucket counts and
/// no `_count`; the merge accumulates them), in OpenMetrics, and raw with
/// `accumulate: false`:
///
/// ```
/// use multiprom_collector::{CollectOptions, DirCollector, Format};
/// use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};
///
/// let dir = tempfile::tempdir()?;
/// for (pid, value) in [("10", 0.5), ("11", 4.0)] {
///     let mut file = FileWriter::open(dir.path(), &FileName::new(MetricKind::Histogram, pid)?)?;
///     file.slot(&encode_key("wait", "wait_sum", [], "Wait \"time\"."))?.add(value);
///     for le in ["0.5", "+Inf"] {
///         let slot = file.slot(&encode_key("wait", "wait_bucket", [("le", le)], "Wait \"time\"."))?;
///         if (le == "0.5") == (value <= 0.5) {
///             slot.add(1.0);
///         }
///     }
/// }
///
/// let scrape = DirCollector::new(dir.path()).collect()?;
/// assert_eq!(scrape.encode(Format::OpenMetrics), "\
/// ## HELP wait Wait \\\"time\\\".
/// ## TYPE wait histogram
/// wait_sum 4.5
/// wait_bucket{le=\"0.5\"} 1.0
/// wait_bucket{le=\"+Inf\"} 2.0
/// wait_count 2.0
/// ## EOF
/// ");
///
/// let raw = DirCollector::with_options(dir.path(), CollectOptions { accumulate: false });
/// assert_eq!(raw.collect()?.encode(Format::Prometheus), "\
/// ## HELP wait Wait \"time\".
/// ## TYPE wait histogram
/// wait_sum 4.5
/// wait_bucket{le=\"0.5\"} 1.0
/// wait_bucket{le=\"+Inf\"} 1.0
/// ");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A gauge in `liveall` mode keeps one series per process, labelled with the
/// `pid` from the file name; processes appear in the order the directory
/// lists their files, as in Python:
///
/// ```
/// use multiprom_collector::{DirCollector, Format};
/// use multiprom_format::{encode_key, FileName, FileWriter, GaugeMode, MetricKind};
///
/// let dir = tempfile::tempdir()?;
/// for pid in ["10", "11"] {
///     let gauge = FileName::new(MetricKind::Gauge(GaugeMode::LiveAll), pid)?;
///     let mut file = FileWriter::open(dir.path(), &gauge)?;
///     file.slot(&encode_key("busy", "busy", [], "Busy."))?.set(1.0);
/// }
/// let text = DirCollector::new(dir.path()).collect()?.encode(Format::Prometheus);
/// assert!(text.starts_with("# HELP busy Busy.\n# TYPE busy gauge\n"));
/// assert!(text.contains("busy{pid=\"10\"} 1.0\n") && text.contains("busy{pid=\"11\"} 1.0\n"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
/// A `*.db` name the collector has seen, with what it knows of the file.
#[derive(Debug)]
struct Known {
    path: Arc<Path>,
    /// The parsed name (`None`: not a metrics file name).
    file: Option<TrackedFile>,
    /// Why it contributes nothing now, if it does not. Boxed, as is the
    /// next field: rare, and big inline, they spread the file table (walked
    /// several times a scrape) over twice the memory.
    problem: Option<Box<FileProblem>>,
    /// The problem last reported, so each is reported once.
    last_problem: Option<Box<ProblemState>>,
}

/// A path as a hash key, by its bytes: paths are compared as given, as
/// Python compares the names `glob` returns or a caller passes (every path
/// of a listing is the directory joined with a name, so they agree).
/// `Path`'s own `Hash` walks the components instead, so that `a//b` and
/// `a/b` hash alike; that took a few hundred instructions per file, on every
/// collection, on the collecting thread.
#[derive(Debug)]
struct PathKey(Arc<Path>);

fn path_bytes(path: &Path) -> &[u8] {
    path.as_os_str().as_bytes()
}

impl PartialEq for PathKey {
    fn eq(&self, other: &Self) -> bool {
        path_bytes(&self.0) == path_bytes(&other.0)
    }
}

impl Eq for PathKey {}

// Hashes as the `[u8]` it borrows as, so lookups by bytes find it.
impl Hash for PathKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        path_bytes(&self.0).hash(state);
    }
}

impl Borrow<[u8]> for PathKey {
    fn borrow(&self) -> &[u8] {
        path_bytes(&self.0)
    }
}

#[derive(Debug, Default)]
struct State {
    known: Vec<Option<Known>>,
    /// The index in `known` of each path (the key shares `Known::path`).
    by_path: foldhash::HashMap<PathKey, usize>,
    free: Vec<usize>,
    keys: KeyTable,
    interner: Interner,
    hints: KeyHints,
    plan_cache: PlanCache,
    plan: Plan,
    /// Counts the plans built: a settled file's values in `values` are
    /// those of the plan of this generation.
    plan_generation: u64,
    /// The last listing that had files left out, the files left out, and
    /// the rest: the same listing less the same files is the same listing.
    kept: Option<KeptListing>,
    /// The last collection's file reports, and what they count.
    reports: Arc<[FileReport]>,
    report_counts: ReportCounts,
    /// The listing of the collection under way came with no event and no
    /// look at every file: nothing but the files' values and appended
    /// entries can have changed since the last collection.
    quiet_listing: bool,
    /// Bumped whenever files may have become settled or unsettled: settled
    /// sums made at another version are stale.
    settle_version: u64,
    /// The files not settled after the last collection, for a quiet one.
    unsettled: Option<Unsettled>,
    /// What recent filters keep of `plan` (cleared with each new plan),
    /// with the settled files' share of each.
    restricted: Vec<(NameFilter, RestrictedPlan, SettledSums)>,
    /// The settled files' share of `plan`.
    settled_sums: SettledSums,
    /// The plan must be rebuilt before the next use.
    replan: bool,
    accumulators: Accumulators,
    /// Each plan operation's value (and timestamp), copied out of the files.
    values: Vec<(f64, f64)>,
    scratch: Vec<u8>,
    reported_conflicts: foldhash::HashSet<Conflict>,
    maps: usize,
    /// Whether each file of the collection under way may be mapped (see
    /// `decide_maps`), kept to reuse its allocation.
    may_map: Vec<bool>,
    collections: u64,
    /// The directory watch, when one could be set.
    watch: Option<DirWatch>,
    /// The process that set `watch`.
    watch_pid: u32,
    /// The listing of the collection under way came with a full look.
    full_look: bool,
    /// When setting a watch last failed (it is tried again after a while).
    watch_failed: Option<Instant>,
    /// The listing as of the last change, in listing order.
    listing: Option<Arc<Vec<PathBuf>>>,
    /// The paths of the last collection and their indexes in `known`: when
    /// the next collection has the very same paths (no event changed the
    /// listing), the lookups by path are skipped.
    last_paths: Option<(Arc<Vec<PathBuf>>, Vec<usize>)>,
    /// When every file was last looked at.
    last_full_look: Option<Instant>,
    /// Files forgotten (no longer listed) so far.
    files_forgotten: u64,
    /// `files_forgotten` and the key table's forgotten keys at the last
    /// interner sweep: when both are unchanged there is nothing to sweep.
    swept_at: (u64, u64),
}

/// A listing, the files left out of it, and the rest.
type KeptListing = (Arc<Vec<PathBuf>>, Arc<HashSet<PathBuf>>, Arc<Vec<PathBuf>>);

/// How often every file is looked at even when no event said it changed, as
/// a guard against anything a watch can miss.
const RESYNC: Duration = Duration::from_secs(60);

/// The last collection, shared with callers that arrived while it ran.
#[derive(Debug)]
struct Finished {
    at: Instant,
    /// The filter it was collected with.
    filter: Option<NameFilter>,
    scrape: Arc<Scrape>,
}

#[derive(Debug)]
pub struct DirCollector {
    dir: PathBuf,
    options: CollectOptions,
    map_files: bool,
    map_limit: usize,
    exited: Option<ExitedWriters>,
    state: Mutex<State>,
    last: Mutex<Option<Finished>>,
}

/// Maps a collector may hold: half of `vm.max_map_count` (the rest is the
/// host's), at most 32,768. Past it, files are read with `pread`. Read once
/// per process: a collector made per request (prometheus_client's recipe)
/// would otherwise open a `/proc` file each time.
fn map_limit() -> usize {
    static LIMIT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        let max = std::fs::read_to_string("/proc/sys/vm/max_map_count")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .unwrap_or(65_530);
        (max / 2).min(32_768)
    })
}

impl DirCollector {
    /// A collector for `dir` with default options.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        DirCollector::with_options(dir, CollectOptions::default())
    }

    /// A collector for `dir`.
    pub fn with_options(dir: impl Into<PathBuf>, options: CollectOptions) -> Self {
        DirCollector {
            dir: dir.into(),
            options,
            map_files: true,
            map_limit: map_limit(),
            exited: None,
            state: Mutex::new(State::default()),
            last: Mutex::new(None),
        }
    }

    /// Whether files are kept mapped between collections (the default), or
    /// read with `pread` each time: cheaper for a single collection (no maps
    /// to set up and tear down), and for hosts that must not have a SIGBUS
    /// handler installed.
    #[must_use]
    pub fn map_files(mut self, map: bool) -> Self {
        self.map_files = map;
        self
    }

    /// Lets the collector stop reading the files of writers that are gone.
    ///
    /// Workers write their values through their maps, which no file-system
    /// event reports, so every collection reads every value of every file:
    /// on a directory of thousands of exited workers' files, most of the
    /// work of a warm collection, done again and again for values that
    /// cannot change. With this, a file whose writer `exited` says is gone
    /// is read once more, whole, and then settled: left out of the reading
    /// (its last values are merged as they are) until a directory event
    /// names it: opened (a new process with the same pid, or any reader),
    /// written, resized, replaced or removed; and every file is read again
    /// at the periodic resync (every minute) or when events may have been
    /// lost. Only with a directory watch and mapped files.
    ///
    /// `exited` must answer `true` only for a writer that can no longer
    /// write: for a pid-named file, a pid that no process of this pid
    /// namespace has, where the workers run in this namespace. A writer in
    /// another pid namespace would look gone and its later writes would be
    /// missed, so only callers that know the writers' pids are visible here
    /// (as reaping already requires) should turn this on.
    #[must_use]
    pub fn settle_exited_writers(
        mut self,
        exited: impl Fn(&multiprom_format::FileName) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.exited = Some(ExitedWriters::new(exited));
        self
    }

    /// The directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The options.
    #[must_use]
    pub fn options(&self) -> CollectOptions {
        self.options
    }

    /// Lists, reads and merges the directory once.
    pub fn collect(&self) -> Result<Arc<Scrape>, CollectError> {
        self.collect_without(|_| Arc::default(), None)
    }

    /// Lists, reads and merges the directory once, keeping only the samples
    /// `filter` names ([`NameFilter`]). Only the entries that feed a kept
    /// sample are read and merged; the kept samples are what an unfiltered
    /// collection gives for them, byte for byte once encoded.
    ///
    /// ```
    /// use multiprom_collector::{DirCollector, Format, NameFilter};
    /// use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let mut file = FileWriter::open(dir.path(), &FileName::new(MetricKind::Counter, "7")?)?;
    /// file.slot(&encode_key("requests", "requests_total", [], "Requests."))?.add(3.0);
    /// file.slot(&encode_key("errors", "errors_total", [], "Errors."))?.add(1.0);
    ///
    /// let collector = DirCollector::new(dir.path());
    /// let only = NameFilter::new(["errors_total"]);
    /// assert_eq!(collector.collect_only(&only)?.encode(Format::Prometheus), "\
    /// ## HELP errors_total Errors.
    /// ## TYPE errors_total counter
    /// errors_total 1.0
    /// ");
    /// // A family is kept by its samples' names, not its own.
    /// assert!(collector.collect_only(&NameFilter::new(["errors"]))?.families.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn collect_only(&self, filter: &NameFilter) -> Result<Arc<Scrape>, CollectError> {
        self.collect_without(|_| Arc::default(), Some(filter))
    }

    /// Lists the directory once, lets `leave_out` pick files from that
    /// listing to leave out of this collection (as if they were not there),
    /// then reads and merges the rest.
    ///
    /// A reaper uses this to drop exited processes' live-gauge files from
    /// the output at once, while the files themselves stay on disk for a
    /// while, without listing the directory twice.
    ///
    /// With a `filter`, only the samples it names are kept (see
    /// [`DirCollector::collect_only`]).
    ///
    /// A call that arrives while another collection with the same filter
    /// runs waits for it and returns its result (`leave_out` is then not
    /// called).
    pub fn collect_without(
        &self,
        leave_out: impl FnOnce(&Arc<Vec<PathBuf>>) -> Arc<HashSet<PathBuf>>,
        filter: Option<&NameFilter>,
    ) -> Result<Arc<Scrape>, CollectError> {
        let arrived = Instant::now();
        // A panic elsewhere while holding a lock leaves state that is still
        // consistent enough to go on from; never poison scrapes.
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        {
            let last = self
                .last
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(last) = last
                .as_ref()
                .filter(|last| last.at >= arrived && last.filter.as_ref() == filter)
            {
                return Ok(Arc::clone(&last.scrape));
            }
        }
        let start = Instant::now();
        let mut paths = if self.map_files {
            self.changed_listing(&mut state, start)?
        } else {
            Arc::new(scan_dir(&self.dir).map_err(|source| CollectError {
                dir: self.dir.clone(),
                source,
            })?)
        };
        let listing = Arc::clone(&paths);
        let left_out = leave_out(&listing);
        if !left_out.is_empty() {
            // The same listing less the same files as last time is the
            // same listing (the same `Arc`): a collection on it need not
            // look every path up again, and can be a quiet one.
            paths = match state.kept.take() {
                Some((last, left, kept))
                    if Arc::ptr_eq(&last, &listing) && Arc::ptr_eq(&left, &left_out) =>
                {
                    kept
                }
                _ => {
                    let mut kept = Vec::clone(&paths);
                    kept.retain(|p| !left_out.contains(p));
                    Arc::new(kept)
                }
            };
            state.kept = Some((listing, left_out, Arc::clone(&paths)));
        }
        let map = self.map_files && guard_sigbus();
        state.collections += 1;
        let settle = map && state.watch.is_some();
        let pass = Pass {
            options: self.options,
            map_limit: map.then_some(self.map_limit),
            start,
            filter,
            exited: self.exited.as_ref().filter(|_| settle),
        };
        let mut scrape = collect_paths(&mut state, &paths, pass);
        scrape.stats.collection = state.collections;
        // Without maps there is no watch: every file is opened every time.
        scrape.stats.full_look = std::mem::take(&mut state.full_look) || !self.map_files;
        let scrape = Arc::new(scrape);
        *self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Finished {
            at: Instant::now(),
            filter: filter.cloned(),
            scrape: Arc::clone(&scrape),
        });
        Ok(scrape)
    }
}

impl DirCollector {
    /// Runs `f` while no collection of this collector runs: collections that
    /// arrive meanwhile wait, then list the directory afresh.
    ///
    /// For changes to the directory that must be seen whole or not at all by
    /// this collector's scrapes, such as folding several files into one.
    pub fn while_not_collecting<R>(&self, f: impl FnOnce() -> R) -> R {
        let _state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f()
    }
}

impl DirCollector {
    /// The listing, from the watch's events when nothing changed, else from
    /// the directory; marks files touched since the last collection.
    fn changed_listing(
        &self,
        state: &mut State,
        now: Instant,
    ) -> Result<Arc<Vec<PathBuf>>, CollectError> {
        // A watch set before a fork (a collector made in a pre-fork
        // server's master) has no event thread in the child, and shares its
        // inotify descriptor with the parent: set a new one.
        // The old one is leaked, not dropped: its drop would stop the
        // parent's event thread and remove the parent's sentinel file.
        let pid = std::process::id();
        if state.watch_pid != pid {
            if let Some(inherited) = state.watch.take() {
                std::mem::forget(inherited);
            }
            state.watch_pid = pid;
        }
        let changes = match &state.watch {
            Some(watch) => watch.take(),
            None => Changes {
                everything: true,
                ..Changes::default()
            },
        };
        if changes.everything {
            // Events were lost or the directory went away: start a new watch
            // (before listing, so nothing between the two is missed).
            state.watch = None;
            // A collector's first collection reads every file afresh with
            // `pread` (see `decide_maps`), so it needs no watch yet; the
            // second sets one before it lists, and reopens every file
            // anyway to map it. A collector used once (a process's first
            // scrape, `multiprom scrape`) so never pays for a watch, nor for
            // the event its every open of a file raises in one.
            let retry = state.collections > 0
                && state
                    .watch_failed
                    .is_none_or(|failed| now.saturating_duration_since(failed) >= RESYNC);
            if retry {
                match DirWatch::new(&self.dir) {
                    Ok(watch) => {
                        state.watch = Some(watch);
                        state.watch_failed = None;
                    }
                    Err(_) => state.watch_failed = Some(now),
                }
            }
        }
        let full_look = changes.everything
            || state
                .last_full_look
                .is_none_or(|at| now.saturating_duration_since(at) >= RESYNC);
        let listing = match state.listing.take() {
            Some(listing) if !full_look && !changes.relist => listing,
            _ => match scan_dir(&self.dir) {
                Ok(listing) => Arc::new(listing),
                Err(source) => {
                    state.watch = None;
                    return Err(CollectError {
                        dir: self.dir.clone(),
                        source,
                    });
                }
            },
        };
        if full_look {
            tracing::debug!(
                "{}: looking at every file ({})",
                self.dir.display(),
                if state.collections == 0 {
                    "first collection"
                } else if state.watch.is_none() {
                    "no directory watch"
                } else if changes.everything {
                    "events may have been missed"
                } else {
                    "periodic resync"
                }
            );
            state.last_full_look = Some(now);
            state.full_look = true;
            for known in state.known.iter_mut().flatten() {
                if let Some(file) = &mut known.file {
                    file.touch_if_changed(&known.path);
                }
            }
        } else {
            let touched = changes.touched.iter().map(|name| (name, true));
            let opened = changes.opened.iter().map(|name| (name, false));
            for (name, touched) in touched.chain(opened) {
                let path = self.dir.join(name);
                if let Some(&index) = state.by_path.get(path_bytes(&path)) {
                    if let Some(Some(Known {
                        file: Some(file), ..
                    })) = state.known.get_mut(index)
                    {
                        if touched {
                            file.touched();
                        } else {
                            file.opened();
                        }
                    }
                }
            }
        }
        state.quiet_listing = state.watch.is_some()
            && !full_look
            && !changes.relist
            && changes.touched.is_empty()
            && changes.opened.is_empty();
        state.listing = Some(Arc::clone(&listing));
        Ok(listing)
    }
}

/// Reads and merges the given files once, in the order given, as Python's
/// `MultiProcessCollector.merge(files, accumulate)` does (a file given twice
/// is merged twice, as there), except that bad files are skipped and
/// reported.
///
/// Files that do not exist are reported as [vanished](FileState::Vanished),
/// never as errors: Python's upstream test `test_missing_gauge_file_during_merge`
/// expects a merge of missing files to return nothing, not to fail.
///
/// ```
/// use multiprom_collector::{merge_files, CollectOptions, FileState};
/// let dir = tempfile::tempdir()?;
/// let scrape = merge_files([dir.path().join("gauge_liveall_9999999.db")], CollectOptions::default());
/// assert!(scrape.families.is_empty());
/// assert_eq!(scrape.files[0].state(), FileState::Vanished);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn merge_files<P: AsRef<Path>>(
    files: impl IntoIterator<Item = P>,
    options: CollectOptions,
) -> Scrape {
    let start = Instant::now();
    let paths: Vec<PathBuf> = files
        .into_iter()
        .map(|p| p.as_ref().to_path_buf())
        .collect();
    if has_duplicates(&paths) {
        // Each occurrence is merged again, as Python reads it again.
        return merge_with_duplicates(&paths, options, start);
    }
    collect_paths(
        &mut State::default(),
        &Arc::new(paths),
        Pass::once(options, start),
    )
}

/// Whether a path is given twice, compared as `State::by_path` compares
/// them (by their bytes).
fn has_duplicates(paths: &[PathBuf]) -> bool {
    let mut seen = HashSet::with_capacity(paths.len());
    paths.iter().any(|p| !seen.insert(path_bytes(p)))
}

/// `merge_files` for a list naming some file more than once.
fn merge_with_duplicates(paths: &[PathBuf], options: CollectOptions, start: Instant) -> Scrape {
    // Read every distinct file once, then plan over the occurrences.
    let mut state = State::default();
    let mut distinct: Vec<PathBuf> = Vec::new();
    let mut seen = HashSet::new();
    for path in paths {
        if seen.insert(path_bytes(path)) {
            distinct.push(path.clone());
        }
    }
    let mut scrape = collect_paths(&mut state, &Arc::new(distinct), Pass::once(options, start));
    let order: Vec<usize> = paths
        .iter()
        .filter_map(|p| state.by_path.get(path_bytes(p)).copied())
        .collect();
    let inputs = order.iter().filter_map(|&index| {
        let known = state.known.get(index)?.as_ref()?;
        known.problem.is_none().then_some(())?;
        Some(PlanInput {
            index,
            path: &known.path,
            file: known.file.as_ref()?,
        })
    });
    let plan = Plan::build(
        inputs,
        &state.keys,
        options.accumulate,
        &mut state.interner,
        &mut state.plan_cache,
    );
    let mut accumulators = Accumulators::default();
    if apply(
        &state.known,
        &plan,
        None,
        None,
        &mut accumulators,
        &mut Vec::new(),
    )
    .is_ok()
    {
        scrape.families = accumulators.finish(&plan);
        scrape.stats.series = scrape.families.iter().map(|f| f.samples.len()).sum();
    }
    scrape
}

/// Applies `plan` to the values of its files. `Err(index)`: that file shrank
/// under its map.
///
/// Two steps: the values are first copied out of the files into `values`
/// (one per plan operation, in order), then applied in order. The copy is
/// what costs (the values are spread over every file's pages); it is split
/// between threads on a big directory. The applying stays on one thread, in
/// merge order, so every sum adds its terms in Python's order.
fn apply(
    known: &[Option<Known>],
    plan: &Plan,
    mut settled: Option<(u64, u64, &mut SettledSums)>,
    scope: Option<&[PlannedUnsettled]>,
    accumulators: &mut Accumulators,
    values: &mut Vec<(f64, f64)>,
) -> Result<(), usize> {
    let generation = settled.as_ref().map(|(generation, _, _)| *generation);
    // No clearing: gather writes every slot (a 3 MB memset per scrape on
    // 4,000 files otherwise).
    values.resize(plan.ops.len(), (0.0, 0.0));
    let threads = gather_threads(plan.ops.len());
    if let Some(planned) = scope {
        // A quiet collection: only the files not settled have new values.
        for file in planned {
            let end = (file.first_op + file.entries).min(plan.ops.len());
            let Some(tracked) = tracked_file(known, file.index) else {
                values[file.first_op..end].fill((0.0, 0.0));
                continue;
            };
            tracked
                .gather_values(
                    &plan.ops[file.first_op..end],
                    &mut values[file.first_op..end],
                )
                .map_err(|_| file.index)?;
        }
    } else if threads <= 1 {
        gather(known, &plan.files, &plan.ops, generation, values)?;
    } else {
        // Contiguous runs of files with about the same number of entries.
        let per_thread = plan.ops.len().div_ceil(threads);
        let mut chunks = Vec::with_capacity(threads);
        let (mut first_file, mut first_op, mut entries) = (0, 0, 0);
        for (i, planned) in plan.files.iter().enumerate() {
            entries += planned.entries;
            if entries - first_op >= per_thread || i + 1 == plan.files.len() {
                chunks.push((first_file..i + 1, first_op..entries.min(plan.ops.len())));
                first_file = i + 1;
                first_op = entries.min(plan.ops.len());
            }
        }
        let mut slices = Vec::with_capacity(chunks.len());
        let mut rest = values.as_mut_slice();
        for (_, ops) in &chunks {
            let (slice, tail) = rest.split_at_mut(ops.len());
            slices.push(slice);
            rest = tail;
        }
        let results: Vec<Result<(), usize>> = std::thread::scope(|scope| {
            let mut work = chunks.into_iter().zip(slices);
            let here = work.next();
            let handles: Vec<_> = work
                .map(|((files, ops), slice)| {
                    scope.spawn(move || {
                        gather(known, &plan.files[files], &plan.ops[ops], generation, slice)
                    })
                })
                .collect();
            let mut results = Vec::with_capacity(handles.len() + 1);
            if let Some(((files, ops), slice)) = here {
                results.push(gather(
                    known,
                    &plan.files[files],
                    &plan.ops[ops],
                    generation,
                    slice,
                ));
            }
            for handle in handles {
                // A panic in a gathering thread is a bug; pass it on.
                results.push(
                    handle
                        .join()
                        .unwrap_or_else(|p| std::panic::resume_unwind(p)),
                );
            }
            results
        });
        results.into_iter().collect::<Result<(), usize>>()?;
    }
    let runs = || {
        let mut first_op = 0u32;
        plan.files
            .iter()
            .map(|planned| {
                let start = first_op;
                first_op = first_op.saturating_add(planned.entries as u32);
                (planned.index, OpGroup::Run(start, first_op))
            })
            .collect()
    };
    if apply_settled(
        known,
        plan,
        settled
            .as_mut()
            .map(|(generation, version, sums)| (*generation, *version, &mut **sums)),
        runs,
        accumulators,
        values,
    ) {
        return Ok(());
    }
    accumulators.start(plan);
    for (&op, &(value, timestamp)) in plan.ops.iter().zip(values.iter()) {
        accumulators.apply(op, value, timestamp);
    }
    Ok(())
}

/// The tracked file at `index` of the file table, if there is one.
fn tracked_file(known: &[Option<Known>], index: usize) -> Option<&TrackedFile> {
    known.get(index)?.as_ref()?.file.as_ref()
}

/// Restricted plans kept for this many filters at most: routers poll with a
/// few fixed sets of names; a client cycling through many only costs a
/// restriction of the plan per request.
const RESTRICTED_PLANS: usize = 8;

/// What `filter` keeps of `plan`, worked out once per plan and filter,
/// with the settled files' share of it.
fn restricted_plan<'a>(
    cache: &'a mut Vec<(NameFilter, RestrictedPlan, SettledSums)>,
    plan: &Plan,
    filter: &NameFilter,
) -> (&'a RestrictedPlan, &'a mut SettledSums) {
    let at = match cache.iter().position(|(f, _, _)| f == filter) {
        Some(at) => at,
        None => {
            if cache.len() >= RESTRICTED_PLANS {
                cache.remove(0);
            }
            let restricted = plan.restrict(filter);
            cache.push((filter.clone(), restricted, SettledSums::default()));
            cache.len() - 1
        }
    };
    let (_, restricted, sums) = &mut cache[at];
    (restricted, sums)
}

/// Merges `values` into `accumulators` from the settled files' share when
/// some of the files of `groups` (worked out only when the share must be
/// worked out again) are settled and the share allows it: `true` if it did,
/// `false` if the caller must walk every operation in order.
fn apply_settled<'a>(
    known: &[Option<Known>],
    plan: &Plan,
    settled: Option<(u64, u64, &mut SettledSums)>,
    groups: impl FnOnce() -> Vec<(usize, OpGroup<'a>)>,
    accumulators: &mut Accumulators,
    values: &[(f64, f64)],
) -> bool {
    let Some((generation, version, sums)) = settled else {
        return false;
    };
    if !sums.is_for(generation, version) {
        let groups = groups();
        let since: Vec<bool> = groups
            .iter()
            .map(|&(index, _)| {
                tracked_file(known, index).is_some_and(|file| file.is_settled(generation))
            })
            .collect();
        *sums = SettledSums::build(
            plan,
            (generation, version),
            groups.into_iter().map(|(_, ops)| ops),
            &since,
            values,
        );
    }
    sums.apply(plan, accumulators, values)
}

/// [`apply`] for the operations `restricted` keeps: only their values are
/// copied out of the files, then they are applied in plan order. A file to
/// settle is read whole (a settled file's values must all be there for the
/// next collection, filtered or not); a settled one not at all. A quiet
/// collection (`scope`) looks only at the files that are not settled.
fn apply_restricted(
    known: &[Option<Known>],
    plan: &Plan,
    restricted: &RestrictedPlan,
    mut sums: Option<(u64, u64, &mut SettledSums)>,
    scope: Option<&[PlannedUnsettled]>,
    accumulators: &mut Accumulators,
    values: &mut Vec<(f64, f64)>,
) -> Result<(), usize> {
    let settled = sums.as_ref().map(|(generation, _, _)| *generation);
    values.resize(plan.ops.len(), (0.0, 0.0));
    let file_of = |index: usize| tracked_file(known, index);
    // Each file not settled: its position in the plan, its index, and the
    // range of its operations.
    let all_files = || {
        let mut first_op = 0;
        plan.files
            .iter()
            .enumerate()
            .map(move |(position, planned)| {
                let start = first_op;
                first_op += planned.entries;
                (position, planned.index, start, planned.entries)
            })
    };
    let candidates: Box<dyn Iterator<Item = (usize, usize, usize, usize)>> = match scope {
        Some(planned) => Box::new(
            planned
                .iter()
                .map(|p| (p.position, p.index, p.first_op, p.entries)),
        ),
        None => Box::new(all_files()),
    };
    for (position, index, first_op, entries) in candidates {
        let Some(file) = file_of(index) else {
            continue;
        };
        let end = (first_op + entries).min(plan.ops.len());
        if let Some(generation) = settled {
            if file.is_settled(generation) {
                continue;
            }
            if file.settled != Settled::No {
                // To settle: read whole.
                file.gather_values(&plan.ops[first_op..end], &mut values[first_op..end])
                    .map_err(|_| index)?;
                continue;
            }
        }
        // Its picks, if the filter keeps any of its operations.
        let Ok(at) = restricted
            .files
            .binary_search_by_key(&position, |part| part.position)
        else {
            continue;
        };
        let part = restricted.files[at];
        let picks = &restricted.ops[part.picks.0..part.picks.1];
        file.gather_picked(picks, part.first_op, &plan.ops, values)
            .map_err(|_| index)?;
    }
    let groups = || {
        restricted
            .files
            .iter()
            .filter_map(|part| {
                let planned = plan.files.get(part.position)?;
                let picks = &restricted.ops[part.picks.0..part.picks.1];
                Some((planned.index, OpGroup::Picks(picks)))
            })
            .collect()
    };
    if apply_settled(
        known,
        plan,
        sums.as_mut()
            .map(|(generation, version, sums)| (*generation, *version, &mut **sums)),
        groups,
        accumulators,
        values,
    ) {
        return Ok(());
    }
    accumulators.start(plan);
    for &pick in &restricted.ops {
        let (value, timestamp) = values[pick as usize];
        accumulators.apply(plan.ops[pick as usize], value, timestamp);
    }
    Ok(())
}

/// Copies the values of `files` (whose operations are `ops`, in order) into
/// `out`, but those of files settled for the plan of generation `settled`,
/// whose values `out` holds already.
fn gather(
    known: &[Option<Known>],
    files: &[PlannedFile],
    mut ops: &[Op],
    settled: Option<u64>,
    mut out: &mut [(f64, f64)],
) -> Result<(), usize> {
    for planned in files {
        let n = planned.entries.min(ops.len()).min(out.len());
        let (file_ops, rest_ops) = ops.split_at(n);
        let (file_out, rest_out) = std::mem::take(&mut out).split_at_mut(n);
        ops = rest_ops;
        out = rest_out;
        let Some(file) = tracked_file(known, planned.index) else {
            file_out.fill((0.0, 0.0));
            continue;
        };
        if settled.is_some_and(|generation| file.is_settled(generation)) {
            continue;
        }
        file.gather_values(file_ops, file_out)
            .map_err(|_| planned.index)?;
    }
    out.fill((0.0, 0.0));
    Ok(())
}

/// Below this many entries one thread copies the values: a thread's start
/// costs more than it saves.
const ENTRIES_PER_THREAD: usize = 50_000;

/// How many threads copy the values of `entries` entries: one per
/// `ENTRIES_PER_THREAD`, at most one per core, at most four.
fn gather_threads(entries: usize) -> usize {
    (entries / ENTRIES_PER_THREAD).clamp(1, cores().min(4))
}

/// The index in `state.known` of each of `paths`, adding new files and
/// forgetting those no longer listed.
fn index_paths(state: &mut State, paths: &[PathBuf]) -> Vec<usize> {
    let mut order: Vec<usize> = Vec::with_capacity(paths.len());
    // Sized once for a first listing of thousands of files, rather than
    // grown by doubling.
    state
        .by_path
        .reserve(paths.len().saturating_sub(state.by_path.len()));
    state
        .known
        .reserve(paths.len().saturating_sub(state.known.len()));
    for path in paths {
        let index = match state.by_path.get(path_bytes(path)) {
            Some(&index) => index,
            None => {
                let shared: Arc<Path> = Arc::from(path.as_path());
                let known = Known {
                    path: Arc::clone(&shared),
                    file: file_name(path).map(TrackedFile::new),
                    problem: None,
                    last_problem: None,
                };
                let index = match state.free.pop() {
                    Some(index) => {
                        state.known[index] = Some(known);
                        index
                    }
                    None => {
                        state.known.push(Some(known));
                        state.known.len() - 1
                    }
                };
                state.by_path.insert(PathKey(shared), index);
                state.replan = true;
                index
            }
        };
        order.push(index);
    }
    // Forget files no longer listed.
    let mut listed = vec![false; state.known.len()];
    for &index in &order {
        listed[index] = true;
    }
    for (index, listed) in listed.into_iter().enumerate() {
        if listed {
            continue;
        }
        if let Some(mut known) = state.known[index].take() {
            if let Some(file) = &mut known.file {
                if file.is_mapped() {
                    state.maps -= 1;
                }
                file.reset(&mut state.keys);
            }
            state.by_path.remove(path_bytes(&known.path));
            state.free.push(index);
            state.replan = true;
            state.files_forgotten += 1;
        }
    }
    order
}

/// Refreshes the file at `state.known[index]` and records its problem. A
/// settled file is left as it is; with `exited`, a good file whose writer
/// it says is gone becomes one to settle.
fn refresh_file(
    state: &mut State,
    index: usize,
    may_map: bool,
    now: Instant,
    prefetched: Option<Prefetched>,
    exited: Option<&ExitedWriters>,
    warnings: &mut Vec<Warning>,
) {
    let Some(known) = state.known[index].as_mut() else {
        return;
    };
    if exited.is_some()
        && known.problem.is_none()
        && known
            .file
            .as_ref()
            .is_some_and(|file| file.is_settled(state.plan_generation))
    {
        return;
    }
    let was_bad = known.problem.is_some();
    let problem = match &mut known.file {
        None => Some(name_problem(&known.path)),
        Some(file) => {
            let was_mapped = file.is_mapped();
            let mut ctx = ParseContext {
                keys: &mut state.keys,
                interner: &mut state.interner,
                hints: &mut state.hints,
                scratch: &mut state.scratch,
            };
            let result = file.refresh(&known.path, may_map, &mut ctx, now, prefetched);
            match (was_mapped, file.is_mapped()) {
                (false, true) => state.maps += 1,
                (true, false) => state.maps -= 1,
                _ => {}
            }
            match result {
                Ok(refreshed) => {
                    if refreshed == Refreshed::Changed {
                        state.replan = true;
                    }
                    if let Some(exited) = exited {
                        if file.settled == Settled::No
                            && file.is_mapped()
                            && exited.test(&file.name)
                        {
                            file.settled = Settled::WriterGone;
                        }
                    }
                    None
                }
                Err(trouble) => Some(file_problem(&known.path, trouble)),
            }
        }
    };
    if was_bad || problem.is_some() {
        state.replan = true;
    }
    set_problem(known, problem, warnings);
}

/// Marks the files of `indexes` (planned files) whose writer is gone, and
/// whose values the collection just read whole into the value buffer, as
/// settled: how many became so.
fn settle_gathered(
    known: &mut [Option<Known>],
    indexes: impl Iterator<Item = usize>,
    generation: u64,
    collection: u64,
) -> usize {
    let mut newly = 0;
    for index in indexes {
        if let Some(Some(Known {
            file: Some(file),
            problem: None,
            ..
        })) = known.get_mut(index)
        {
            if matches!(file.settled, Settled::WriterGone | Settled::Yes { .. })
                && !file.is_settled(generation)
            {
                file.settled = Settled::Yes {
                    plan: generation,
                    since: collection,
                };
                newly += 1;
            }
        }
    }
    newly
}

/// Whether `state.known[index]` is a file to read (not a bad name).
fn has_file(state: &State, index: usize) -> bool {
    state.known[index]
        .as_ref()
        .is_some_and(|known| known.file.is_some())
}

/// Decides, for each file of `order`, whether this collection may map it
/// (`out[i]` for `order[i]`): a file already mapped stays mapped; any other
/// is mapped from the second collection that reads it without trouble on,
/// within `map_limit` maps (`None`: no maps at all).
///
/// A file's first collection reads it with `pread`: a collector that is
/// used once (`multiprom scrape`, a process's first scrape) then costs one
/// read per file instead of setting up a map, touching its pages and
/// tearing it down, which costs several times more; a file still there at
/// the next collection is worth mapping, so that later collections read
/// its values without a system call.
fn decide_maps(state: &State, order: &[usize], map_limit: Option<usize>, out: &mut Vec<bool>) {
    out.clear();
    let Some(limit) = map_limit else {
        out.resize(order.len(), false);
        return;
    };
    let mut maps = state.maps;
    out.extend(order.iter().map(|&index| {
        let Some(Some(Known {
            file: Some(file), ..
        })) = state.known.get(index)
        else {
            return false;
        };
        if file.is_mapped() {
            return true;
        }
        if !file.was_read() || maps >= limit {
            return false;
        }
        maps += 1;
        true
    }));
}

/// Fewer files than this are read on one thread.
const PREFETCH_MIN_FILES: usize = 64;

/// Files read ahead are handed to the parsing thread this many at a time:
/// one hand-off per file costs a futex wake-up and wait each, a tenth of a
/// cold collection on 4,000 files.
const PREFETCH_BATCH: usize = 32;

/// Batches each reading thread has read ahead and the parsing thread not
/// yet taken, at most (`PREFETCH_BATCH` files each). With the batch each
/// reading thread is filling and the one being parsed, what is in flight is
/// bounded by 7 batches x 32 files x the most read ahead of one file
/// (64 KiB): 14 MiB.
const PREFETCH_QUEUE: usize = 2;

/// Threads reading ahead, taking batches in turn. The kernel's work on
/// each file (open, `fstat`, read, close) is most of a cold collection, and
/// once keys are compared with the last file's instead of looked up (see
/// `tracked::KeyHints`) the parsing thread waits for one reading thread:
/// with two, all three keep two cores busy. Measured on two cores and the
/// Python package bench's 4,000 files: a cold collection 35 to 37 ms with
/// one reading thread, 30 to 33 ms with two.
const PREFETCH_READERS: usize = 2;

/// A reading thread's work: batch `nth`, `nth + of`, `nth + 2 * of`... of
/// `PREFETCH_BATCH` files of `ahead` (in merge order, with their kinds),
/// read and sent in order to the parsing thread.
fn read_ahead(
    ahead: &[(&Path, MetricKind)],
    dir: Option<&OpenDir>,
    sender: std::sync::mpsc::SyncSender<Vec<Option<Prefetched>>>,
    nth: usize,
    of: usize,
) {
    let mut guess = ReadGuess::default();
    for files in ahead.chunks(PREFETCH_BATCH).skip(nth).step_by(of) {
        let batch = files
            .iter()
            .map(|&(path, kind)| {
                let read = Prefetched::read(dir, path, guess.first_read(kind))?;
                guess.learn(kind, read.used());
                Some(read)
            })
            .collect();
        if sender.send(batch).is_err() {
            return;
        }
    }
}

/// The cores this process may use.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// How one collection runs.
#[derive(Clone, Copy)]
struct Pass<'a> {
    options: CollectOptions,
    /// Files may be mapped, up to this many maps (`None`: none).
    map_limit: Option<usize>,
    start: Instant,
    /// Keep only the samples it names.
    filter: Option<&'a NameFilter>,
    /// Settle files whose writer this says is gone (`None`: settle none).
    exited: Option<&'a ExitedWriters>,
}

impl Pass<'_> {
    /// A collection of files once, with nothing kept for a next one.
    fn once(options: CollectOptions, start: Instant) -> Pass<'static> {
        Pass {
            options,
            map_limit: None,
            start,
            filter: None,
            exited: None,
        }
    }
}

/// One collection of `paths` (in merge order) into `state`.
fn collect_paths(state: &mut State, paths: &Arc<Vec<PathBuf>>, pass: Pass<'_>) -> Scrape {
    let Pass {
        options,
        map_limit,
        start,
        filter,
        exited,
    } = pass;
    let now = Instant::now();
    let mut warnings = Vec::new();
    let mut stats = ScrapeStats::default();

    let quiet_listing = std::mem::take(&mut state.quiet_listing);
    let (order, order_reused) = match state.last_paths.take() {
        Some((last, order)) if Arc::ptr_eq(&last, paths) => (order, true),
        _ => (index_paths(state, paths), false),
    };
    // A quiet collection looks only at the files that are not settled.
    let generation = state.plan_generation;
    let unsettled = state.unsettled.take().filter(|unsettled| {
        exited.is_some() && quiet_listing && order_reused && unsettled.generation == generation
    });
    if unsettled.is_none() {
        // Events may have brought settled files back.
        state.settle_version += 1;
    }

    let mut may_map = std::mem::take(&mut state.may_map);
    if let Some(unsettled) = &unsettled {
        let indexes: Vec<usize> = unsettled.refresh.iter().map(|&(index, _)| index).collect();
        decide_maps(state, &indexes, map_limit, &mut may_map);
        for (&index, &map) in indexes.iter().zip(&may_map) {
            refresh_file(state, index, map, now, None, exited, &mut warnings);
        }
        state.may_map = may_map;
    } else {
        decide_maps(state, &order, map_limit, &mut may_map);
        // Files read with `pread`: other threads open and read them ahead
        // while this one parses, through bounded queues.
        let reads = order
            .iter()
            .zip(&may_map)
            .filter(|&(&index, &map)| !map && has_file(state, index))
            .count();
        if reads >= PREFETCH_MIN_FILES && cores() > 1 {
            // `order` holds the index of each of `paths`, in the same order.
            let ahead: Vec<(&Path, MetricKind)> = paths
                .iter()
                .zip(&order)
                .zip(&may_map)
                .filter(|&(_, &map)| !map)
                .filter_map(|((path, &index), _)| {
                    let kind = state.known[index].as_ref()?.file.as_ref()?.name.kind();
                    Some((path.as_path(), kind))
                })
                .collect();
            // The files of a directory are opened by name in it.
            let dir = ahead
                .first()
                .and_then(|(path, _)| OpenDir::open(path.parent()?).ok());
            let (senders, receivers): (Vec<_>, Vec<_>) = (0..PREFETCH_READERS)
                .map(|_| std::sync::mpsc::sync_channel(PREFETCH_QUEUE))
                .unzip();
            std::thread::scope(|scope| {
                for (nth, sender) in senders.into_iter().enumerate() {
                    let (ahead, dir) = (&ahead, dir.as_ref());
                    // A thread that cannot be started drops its sender: this
                    // thread then reads the files itself.
                    let _ = std::thread::Builder::new().spawn_scoped(scope, move || {
                        read_ahead(ahead, dir, sender, nth, PREFETCH_READERS);
                    });
                }
                let mut batch = Vec::new().into_iter();
                // Batches come in turn from each reading thread. Once one is
                // missing (a reading thread stopped), no later one is taken:
                // its files would not be the ones it is taken for.
                let mut turn = (0..PREFETCH_READERS).cycle();
                let mut readers_stopped = false;
                for (&index, &map) in order.iter().zip(&may_map) {
                    let prefetched = if !map && has_file(state, index) {
                        if batch.len() == 0 && !readers_stopped {
                            let from = turn.next().and_then(|nth| receivers.get(nth));
                            match from.and_then(|receiver| receiver.recv().ok()) {
                                Some(next) => batch = next.into_iter(),
                                None => readers_stopped = true,
                            }
                        }
                        batch.next().flatten()
                    } else {
                        None
                    };
                    refresh_file(state, index, map, now, prefetched, exited, &mut warnings);
                }
                // Dropping the receivers stops the reading threads if this side
                // stopped early.
                drop(receivers);
            });
        } else {
            for (&index, &map) in order.iter().zip(&may_map) {
                refresh_file(state, index, map, now, None, exited, &mut warnings);
            }
        }
        state.may_map = may_map;
    }

    let mut families = Vec::new();
    // At most twice: a file that shrank under its map is dropped and the
    // plan rebuilt without it.
    for _ in 0..3 {
        // A quiet collection's files are the last one's, and a file whose
        // entries changed asked for a new plan.
        let same = unsettled.is_some() || same_files(&state.plan, &order, &state.known);
        if state.replan || !same {
            state.plan = build_plan(state, &order, options);
            state.interner.settle();
            state.restricted.clear();
            state.plan_generation += 1;
            state.replan = false;
            stats.planned = true;
        }
        let settled = exited.map(|_| state.plan_generation);
        let scope = unsettled
            .as_ref()
            .filter(|unsettled| unsettled.generation == state.plan_generation)
            .map(|unsettled| unsettled.planned.as_slice());
        let version = state.settle_version;
        let applied = match filter {
            None => apply(
                &state.known,
                &state.plan,
                settled.map(|generation| (generation, version, &mut state.settled_sums)),
                scope,
                &mut state.accumulators,
                &mut state.values,
            )
            .map(|()| state.accumulators.finish(&state.plan)),
            Some(filter) => {
                let (restricted, sums) =
                    restricted_plan(&mut state.restricted, &state.plan, filter);
                apply_restricted(
                    &state.known,
                    &state.plan,
                    restricted,
                    settled.map(|generation| (generation, version, sums)),
                    scope,
                    &mut state.accumulators,
                    &mut state.values,
                )
                .map(|()| {
                    // Only the samples named (a most-recent family was
                    // merged whole, for its order); a family left with
                    // nothing is left out, as Python's `_restricted_metric`
                    // leaves it out.
                    filter.restrict(
                        state
                            .accumulators
                            .finish_restricted(&state.plan, restricted),
                    )
                })
            }
        };
        match applied {
            Ok(merged) => {
                families = merged;
                if let Some(generation) = settled {
                    let collection = state.collections;
                    let newly = match scope {
                        Some(planned) => {
                            let indexes = planned.iter().map(|p| p.index);
                            settle_gathered(&mut state.known, indexes, generation, collection)
                        }
                        None => {
                            let indexes = state.plan.files.iter().map(|p| p.index);
                            settle_gathered(&mut state.known, indexes, generation, collection)
                        }
                    };
                    if newly > 0 {
                        state.settle_version += 1;
                    }
                }
                break;
            }
            Err(index) => {
                if let Some(known) = state.known[index].as_mut() {
                    if let Some(file) = &mut known.file {
                        if file.is_mapped() {
                            state.maps -= 1;
                        }
                        file.reset(&mut state.keys);
                    }
                    let trouble = ReadFault {
                        offset: 0,
                        kind: ProblemKind::Read(ReadErrorKind::Io(
                            "the file shrank under its memory map".into(),
                        )),
                    };
                    let problem = file_problem(&known.path, trouble);
                    set_problem(known, Some(problem), &mut warnings);
                }
                state.replan = true;
            }
        }
    }

    let mut new_conflicts: Vec<Conflict> = state
        .plan
        .conflicts
        .iter()
        .filter(|c| !state.reported_conflicts.contains(*c))
        .cloned()
        .collect();
    new_conflicts.sort_by_key(ToString::to_string);
    if state.reported_conflicts.len() > 10_000 {
        state.reported_conflicts.clear();
    }
    for conflict in new_conflicts {
        state.reported_conflicts.insert(conflict.clone());
        warnings.push(Warning::Conflict(conflict));
    }

    let quiet = unsettled
        .as_ref()
        .filter(|unsettled| unsettled.generation == state.plan_generation);
    let reports = file_reports(state, &order, quiet);
    let counts = state.report_counts;
    stats.files_ok = counts.ok;
    stats.files_bad = counts.bad;
    stats.files_vanished = counts.vanished;
    stats.bytes_read = counts.bytes_read;
    if exited.is_some() {
        let next = match unsettled {
            Some(unsettled) if unsettled.generation == state.plan_generation => {
                unsettled.still(state)
            }
            _ => Unsettled::of(state, &order),
        };
        stats.files_settled = next.settled;
        state.unsettled = Some(next);
    }

    // Give back memory a big file or a burst of keys left behind.
    if state.scratch.capacity() > SCRATCH_KEEP {
        state.scratch = Vec::new();
    }
    if state.values.capacity() > 2 * state.values.len() + 1024 {
        state.values.shrink_to_fit();
    }
    if state.interner.wants_sweep() {
        let forgotten = (state.files_forgotten, state.keys.forgotten());
        if forgotten == state.swept_at {
            // Growth from new files and keys only: nothing to give back, and
            // a sweep would throw away a plan that is still good.
            state.interner.rebaseline();
        } else {
            state.swept_at = forgotten;
            state.plan_cache.clear();
            state.plan = Plan::default();
            state.replan = true;
            state.interner.sweep();
        }
    }
    state.last_paths = Some((Arc::clone(paths), order));
    stats.series = families.iter().map(|f| f.samples.len()).sum();
    stats.duration = start.elapsed();
    Scrape {
        families,
        files: reports,
        warnings,
        stats,
    }
}

/// What the file reports count: files ok, bad and vanished, bytes read.
#[derive(Debug, Default, Clone, Copy)]
struct ReportCounts {
    ok: usize,
    bad: usize,
    vanished: usize,
    bytes_read: u64,
}

impl ReportCounts {
    fn of(reports: &[FileReport]) -> ReportCounts {
        let mut counts = ReportCounts::default();
        for report in reports {
            match report.state() {
                FileState::Ok => {
                    counts.ok += 1;
                    counts.bytes_read += report.used;
                }
                FileState::Bad => counts.bad += 1,
                FileState::Vanished => counts.vanished += 1,
            }
        }
        counts
    }
}

/// What a file's report says now: `state.known[index]`'s.
fn file_report(known: &Known) -> FileReport {
    let good = known.problem.is_none();
    let file = known.file.as_ref().filter(|_| good);
    FileReport {
        path: known.path.clone(),
        name: known.file.as_ref().map(|f| f.name.clone()),
        file_size: file.map_or(0, |f| f.file_size),
        used: file.map_or(0, |f| f.used),
        entries: file.map_or(0, |f| f.entries.len()),
        problem: known.problem.as_deref().cloned(),
    }
}

/// Whether `report` still says what `known`'s report would, compared
/// field by field without making one (which costs reference counts, on
/// every file of every scrape).
fn still_reports(report: &FileReport, known: &Known) -> bool {
    let good = known.problem.is_none();
    let file = known.file.as_ref().filter(|_| good);
    // The same path (the very `Arc`) is the same entry of the file table,
    // whose name never changes.
    Arc::ptr_eq(&report.path, &known.path)
        && report.file_size == file.map_or(0, |f| f.file_size)
        && report.used == file.map_or(0, |f| f.used)
        && report.entries == file.map_or(0, |f| f.entries.len())
        && report.problem.as_ref() == known.problem.as_deref()
}

/// The reports of the files of `order`: the last collection's when none
/// changed, else new ones. A quiet collection (`scope`) compares only the
/// files that are not settled: the others did not change.
fn file_reports(
    state: &mut State,
    order: &[usize],
    scope: Option<&Unsettled>,
) -> Arc<[FileReport]> {
    let known = || {
        order
            .iter()
            .filter_map(|&index| state.known[index].as_ref())
    };
    let unchanged = match scope {
        Some(unsettled) => unsettled.refresh.iter().all(|&(index, position)| {
            let report = state.reports.get(position);
            let known = state.known[index].as_ref();
            matches!((report, known), (Some(report), Some(known)) if still_reports(report, known))
        }),
        None => {
            state.reports.len() == known().count()
                && state
                    .reports
                    .iter()
                    .zip(known())
                    .all(|(report, known)| still_reports(report, known))
        }
    };
    if !unchanged {
        state.reports = known().map(file_report).collect();
        state.report_counts = ReportCounts::of(&state.reports);
    }
    Arc::clone(&state.reports)
}

/// The read buffer kept between collections; a bigger one is freed.
const SCRATCH_KEEP: usize = 1 << 20;

/// Whether `plan` covers exactly the good files of `order` with their
/// current entry counts.
fn same_files(plan: &Plan, order: &[usize], known: &[Option<Known>]) -> bool {
    let mut planned = plan.files.iter();
    for &index in order {
        let Some(known) = known.get(index).and_then(Option::as_ref) else {
            continue;
        };
        let Some(file) = known.file.as_ref().filter(|_| known.problem.is_none()) else {
            continue;
        };
        match planned.next() {
            Some(p) if p.index == index && p.entries == file.entries.len() => {}
            _ => return false,
        }
    }
    planned.next().is_none()
}

fn build_plan(state: &mut State, order: &[usize], options: CollectOptions) -> Plan {
    let inputs = order.iter().filter_map(|&index| {
        let known = state.known.get(index)?.as_ref()?;
        if known.problem.is_some() {
            return None;
        }
        Some(PlanInput {
            index,
            path: &known.path,
            file: known.file.as_ref()?,
        })
    });
    Plan::build(
        inputs,
        &state.keys,
        options.accumulate,
        &mut state.interner,
        &mut state.plan_cache,
    )
}

/// Records `problem` as the file's current one and queues a warning when it
/// differs from the last one reported.
fn set_problem(known: &mut Known, problem: Option<FileProblem>, warnings: &mut Vec<Warning>) {
    let problem_state = problem.as_ref().map(|problem| ProblemState {
        problem: problem.clone(),
        stamp: FileStamp::of(&known.path),
    });
    if problem_state.as_ref() != known.last_problem.as_deref() {
        if let Some(p) = &problem {
            warnings.push(Warning::File(p.clone()));
        }
        known.last_problem = problem_state.map(Box::new);
    }
    known.problem = problem.map(Box::new);
}

/// The file name as Python reads it: by its text, with bytes that are not
/// UTF-8 replaced (Python's `glob` returns them as lone surrogates and
/// merges the file all the same; only a gauge in an `all` mode shows the
/// id, as the `pid` label).
fn file_name(path: &Path) -> Option<FileName> {
    // What follows the last `/` is the name when it is a plain one (always,
    // for a listed file): taken by bytes, as walking the path's components
    // costs more than parsing the name.
    let name = match path_bytes(path).rsplit(|&b| b == b'/').next() {
        Some(name) if !name.is_empty() && name != b"." && name != b".." => OsStr::from_bytes(name),
        _ => path.file_name()?,
    };
    // `to_str` first: it only checks, where `to_string_lossy` also scans
    // for what to replace.
    match name.to_str() {
        Some(text) => FileName::parse(text).ok(),
        None => FileName::parse(&name.to_string_lossy()).ok(),
    }
}

/// Why a file whose name is not a metrics file name is skipped.
fn name_problem(path: &Path) -> FileProblem {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Only called for names that did not parse; parse again for the reason.
    let kind = match FileName::parse(&name) {
        Err(e) => ReadErrorKind::BadFileName(e),
        Ok(_) => ReadErrorKind::Io("not a metrics file name".into()),
    };
    FileProblem {
        path: path.to_path_buf(),
        offset: 0,
        kind: ProblemKind::Read(kind),
    }
}

fn file_problem(path: &Path, trouble: ReadFault) -> FileProblem {
    let problem = FileProblem {
        path: path.to_path_buf(),
        offset: trouble.offset,
        kind: trouble.kind,
    };
    // Opening a symbolic link whose target is missing also says "not found",
    // but unlike a reaped worker's file it stays: damage, not a race.
    let dangling = problem.is_vanished()
        && std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if dangling {
        FileProblem {
            kind: ProblemKind::DanglingSymlink,
            ..problem
        }
    } else {
        problem
    }
}
