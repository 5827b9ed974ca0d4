//! [`DirCollector`]: scan, read (incrementally), merge.
//!
//! One job per module: [`scrape`] the results, `state` what a collector
//! keeps, part by part, `file_table` the files seen, `listing` the
//! directory listing and its watch, `refresh` reading files (with
//! `read_ahead` threads for a cold collection), `merge` and `gather` the
//! plan applied to the values, `settle` and `quiet` the files of exited
//! writers, `reports` each file's report, `pass` how one collection runs,
//! `collection` one collection's steps across the parts, and `merge_files`
//! a merge of given files.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use multiprom_format::read_map::guard_sigbus;

use crate::filter::NameFilter;
use crate::writers::{ExitedWriters, WriterLiveness};
use multiprom_format::scan_dir;

use collection::{changed_listing, collect_paths};
use pass::Pass;
use state::CollectorState;

mod appended;
mod collection;
mod exemplar_files;
mod exemplar_series;
mod exemplars;
mod exited;
mod file_entry;
mod file_table;
mod gather;
mod listing;
mod live_exemplars;
mod live_natives;
mod merge;
mod merge_files;
mod natives;
mod pass;
mod quiet;
mod read_ahead;
mod refresh;
mod refresh_files;
mod report_counts;
mod reports;
mod scrape;
mod settle;
mod state;
mod threads;

pub use merge_files::merge_files;
pub use scrape::{
    CollectError, CollectOptions, Exemplars, FileReport, FileState, Natives, Scrape, ScrapeStats,
};

/// The last collection, shared with callers that arrived while it ran.
#[derive(Debug)]
struct LastScrape {
    at: Instant,
    /// The filter it was collected with.
    filter: Option<NameFilter>,
    /// Whether its native histograms were read: a scrape without them
    /// serves no caller that asked for them.
    natives: Natives,
    /// Whether exemplars were attached: a scrape without them serves no
    /// caller that asked for them.
    exemplars: Exemplars,
    scrape: Arc<Scrape>,
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
/// let raw = DirCollector::with_options(dir.path(), CollectOptions::default().accumulate(false));
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
/// // The directory's own order, whichever it is.
/// let first = multiprom_collector::scan_dir(dir.path())?[0].ends_with("gauge_liveall_10.db");
/// let (a, b) = if first { ("10", "11") } else { ("11", "10") };
/// assert_eq!(text, format!("\
/// ## HELP busy Busy.
/// ## TYPE busy gauge
/// busy{{pid=\"{a}\"}} 1.0
/// busy{{pid=\"{b}\"}} 1.0
/// "));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct DirCollector {
    dir: PathBuf,
    options: CollectOptions,
    map_files: bool,
    map_limit: usize,
    exited: Option<ExitedWriters>,
    /// Leave the live gauges of writers `exited` says are gone out.
    leave_out_live: bool,
    state: Mutex<CollectorState>,
    last: Mutex<Option<LastScrape>>,
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
    ///
    /// A relative `dir` is taken from the working directory at each
    /// collection: a host that changes directory should give an absolute
    /// one.
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
            leave_out_live: false,
            state: Mutex::new(CollectorState::default()),
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
    /// cannot change. With this, a file whose writer `liveness` says is gone
    /// is read once more, whole, and then settled: left out of the reading
    /// (its last values are merged as they are) until a directory event
    /// names it (opened, written, resized, replaced or removed) or
    /// `liveness` takes it back (its [`WriterLiveness::generation`] moves
    /// and it no longer says gone); and every file is read again at the
    /// periodic resync (every minute) or when events may have been lost.
    /// Only with a directory watch and mapped files.
    ///
    /// `liveness` must answer `true` only for a writer that can no longer
    /// write: `multiprom-maintain`'s `Liveness` says so only when no process
    /// has the file open or mapped for writing, as seen after the file's
    /// last event, and never where the writers' processes cannot be seen.
    /// A wrong `true` freezes a live writer's values.
    ///
    /// [`WriterLiveness::generation`]: crate::WriterLiveness::generation
    #[must_use]
    pub fn settle_exited_writers(mut self, liveness: impl WriterLiveness + 'static) -> Self {
        self.exited = Some(ExitedWriters::new(liveness));
        self
    }

    /// Leaves the `gauge_live*` files of writers that are gone out of every
    /// collection, as `prometheus_client.multiprocess.mark_process_dead`
    /// would have removed them, by the rule given to
    /// [`DirCollector::settle_exited_writers`] (nothing without one). The
    /// files stay on disk; a file whose writer is back is merged again.
    #[must_use]
    pub fn leave_out_exited_live_gauges(mut self) -> Self {
        self.leave_out_live = true;
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
        self.collect_with(leave_out, filter, Natives::Skip)
    }

    /// [`DirCollector::collect_without`], reading the native histogram
    /// files too when `natives` says so (for the protobuf format; see
    /// [`Natives`]). A call that asks for them is never given a
    /// concurrent collection that did not read them.
    pub fn collect_with(
        &self,
        leave_out: impl FnOnce(&Arc<Vec<PathBuf>>) -> Arc<HashSet<PathBuf>>,
        filter: Option<&NameFilter>,
        natives: Natives,
    ) -> Result<Arc<Scrape>, CollectError> {
        self.collect_for(leave_out, filter, natives, Exemplars::Attach)
    }

    /// [`DirCollector::collect_with`], attaching exemplars only when
    /// `exemplars` says so (see [`Exemplars`]). A call that asks for them is
    /// never given a concurrent collection that did not attach them.
    pub fn collect_for(
        &self,
        leave_out: impl FnOnce(&Arc<Vec<PathBuf>>) -> Arc<HashSet<PathBuf>>,
        filter: Option<&NameFilter>,
        natives: Natives,
        exemplars: Exemplars,
    ) -> Result<Arc<Scrape>, CollectError> {
        let arrived = Instant::now();
        // A panic elsewhere while holding a lock leaves state that is still
        // consistent enough to go on from; never poison scrapes.
        let mut guard = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let state = &mut *guard;
        {
            let last = self
                .last
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(last) = last.as_ref().filter(|last| {
                last.at >= arrived
                    && last.filter.as_ref() == filter
                    && (natives == Natives::Skip || last.natives == Natives::Merge)
                    && (exemplars == Exemplars::Skip || last.exemplars == Exemplars::Attach)
            }) {
                return Ok(Arc::clone(&last.scrape));
            }
        }
        let start = Instant::now();
        let mut paths = if self.map_files {
            changed_listing(&self.dir, state, start)?
        } else {
            state.listing.listings += 1;
            Arc::new(scan_dir(&self.dir).map_err(|source| CollectError {
                dir: self.dir.clone(),
                source,
            })?)
        };
        let listing = Arc::clone(&paths);
        let listed = listing.len();
        let map = self.map_files && guard_sigbus();
        let settle = map && state.listing.watch.is_some();
        let exited = self.exited.as_ref().filter(|_| settle);
        if let Some(exited) = exited {
            if std::mem::take(&mut state.settling.look_again) {
                exited.look_again();
            }
            if state
                .settling
                .bring_back_held(&mut state.files.known, exited)
            {
                // Not a quiet collection: it must look at the files brought back.
                state.listing.quiet_listing = false;
            }
        }
        let left_out = leave_out(&listing);
        let left_out = match exited.filter(|_| self.leave_out_live) {
            Some(exited) => state.settling.exited_live.with_exited_live_gauges(
                &state.files,
                state.listing.quiet_listing,
                &listing,
                left_out,
                exited,
            ),
            None => left_out,
        };
        if !left_out.is_empty() {
            paths = state.listing.less(listing, left_out);
        }
        state.collections += 1;
        let pass = Pass {
            options: self.options,
            map_limit: map.then_some(self.map_limit),
            start,
            collection: state.collections,
            filter,
            exited,
            dir: Some(&self.dir),
            natives,
            exemplars,
        };
        let mut scrape = collect_paths(state, &paths, pass);
        scrape.stats.collection = state.collections;
        scrape.stats.files_left_out = listed - paths.len();
        // Without maps there is no watch: every file is opened every time.
        scrape.stats.full_look = std::mem::take(&mut state.listing.full_look) || !self.map_files;
        let scrape = Arc::new(scrape);
        *self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(LastScrape {
            at: Instant::now(),
            filter: filter.cloned(),
            natives,
            exemplars,
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
