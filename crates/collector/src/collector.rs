//! [`DirCollector`]: scan, read (incrementally), merge.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use multiprom_format::{FileName, ReadErrorKind};

use crate::exposition::Format;
use crate::family::MergedFamily;
use crate::intern::Interner;
use crate::merge::{merge, MergeCache};
use crate::parsed_file::ParsedFile;
use crate::problem::{Conflict, FileProblem, ProblemKind, Warning};
use crate::scan::scan_dir;

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
    /// The file.
    pub path: PathBuf,
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
}

/// The result of one collection.
#[derive(Debug, Clone)]
pub struct Scrape {
    /// Merged families, in output order.
    pub families: Vec<MergedFamily>,
    /// Every `*.db` file seen, in merge (directory listing) order.
    pub files: Vec<FileReport>,
    /// Problems first seen in this collection (each file state and each
    /// conflict is reported once, not on every scrape).
    pub warnings: Vec<Warning>,
    /// Counters.
    pub stats: ScrapeStats,
}

impl Scrape {
    /// The families encoded in `format`.
    #[must_use]
    pub fn encode(&self, format: Format) -> String {
        let mut out = String::new();
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

#[derive(Debug, Default)]
struct TrackedFile {
    parsed: Option<ParsedFile>,
    last_problem: Option<ProblemState>,
}

#[derive(Debug, Default)]
struct State {
    files: HashMap<PathBuf, TrackedFile>,
    interner: Interner,
    merge_cache: MergeCache,
    reported_conflicts: HashSet<Conflict>,
    buf: Vec<u8>,
}

/// Collects a multiprocess directory: lists `*.db` files, reads each (only
/// new entries are parsed; an unchanged file costs one `pread`), skips and
/// reports bad files, and merges exactly like `prometheus_client`.
///
/// Thread-safe; concurrent `collect` calls run one at a time (they share the
/// parse cache).
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
/// std::fs::write(dir.path().join("counter_3.db"), b"")?; // a worker killed at birth
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
#[derive(Debug)]
pub struct DirCollector {
    dir: PathBuf,
    options: CollectOptions,
    state: Mutex<State>,
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
            state: Mutex::new(State::default()),
        }
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
    pub fn collect(&self) -> Result<Scrape, CollectError> {
        self.collect_without(|_| HashSet::new())
    }

    /// Lists the directory once, lets `leave_out` pick files from that
    /// listing to leave out of this collection (as if they were not there),
    /// then reads and merges the rest.
    ///
    /// A reaper uses this to drop exited processes' live-gauge files from
    /// the output at once, while the files themselves stay on disk for a
    /// while, without listing the directory twice.
    pub fn collect_without(
        &self,
        leave_out: impl FnOnce(&[PathBuf]) -> HashSet<PathBuf>,
    ) -> Result<Scrape, CollectError> {
        let start = Instant::now();
        let mut paths = scan_dir(&self.dir).map_err(|source| CollectError {
            dir: self.dir.clone(),
            source,
        })?;
        let left_out = leave_out(&paths);
        if !left_out.is_empty() {
            paths.retain(|p| !left_out.contains(p));
        }
        // A panic elsewhere while holding the lock leaves caches that are
        // still consistent enough to rebuild from; never poison scrapes.
        let mut guard = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(collect_paths(&mut guard, &paths, self.options, start))
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
    collect_paths(&mut State::default(), &paths, options, start)
}

/// Reads `paths` (in merge order) into `state` and merges the good ones.
fn collect_paths(
    state: &mut State,
    paths: &[PathBuf],
    options: CollectOptions,
    start: Instant,
) -> Scrape {
    let mut warnings = Vec::new();
    let mut reports = Vec::with_capacity(paths.len());
    let mut stats = ScrapeStats::default();

    let present: HashSet<&PathBuf> = paths.iter().collect();
    state.files.retain(|path, _| present.contains(path));

    for path in paths {
        // Look up before inserting: cloning every path on every scrape is
        // measurable with thousands of files.
        if !state.files.contains_key(path) {
            state.files.insert(path.clone(), TrackedFile::default());
        }
        let Some(tracked) = state.files.get_mut(path) else {
            continue;
        };
        let problem = match refresh(path, tracked, &mut state.buf, &mut state.interner) {
            Ok(bytes) => {
                stats.bytes_read += bytes as u64;
                None
            }
            Err(problem) => Some(problem),
        };
        let problem_state = problem.as_ref().map(|problem| ProblemState {
            problem: problem.clone(),
            stamp: FileStamp::of(path),
        });
        if problem_state != tracked.last_problem {
            if let Some(p) = &problem {
                warnings.push(Warning::File(p.clone()));
            }
            tracked.last_problem = problem_state;
        }
        let parsed = tracked.parsed.as_ref().filter(|_| problem.is_none());
        let report = FileReport {
            path: path.clone(),
            name: parsed.map(|p| p.name.clone()).or_else(|| {
                path.file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| FileName::parse(n).ok())
            }),
            file_size: parsed.map_or(0, |p| p.header.file_size),
            used: parsed.map_or(0, |p| p.header.used),
            entries: parsed.map_or(0, |p| p.entries.len()),
            problem,
        };
        match report.state() {
            FileState::Ok => stats.files_ok += 1,
            FileState::Bad => stats.files_bad += 1,
            FileState::Vanished => stats.files_vanished += 1,
        }
        reports.push(report);
    }

    let mut conflicts = HashSet::new();
    let good = paths.iter().filter_map(|path| {
        let tracked = state.files.get(path)?;
        if tracked.last_problem.is_some() {
            return None;
        }
        tracked.parsed.as_ref().map(|p| (path.as_path(), p))
    });
    let families = merge(
        good,
        options.accumulate,
        &mut state.interner,
        &mut state.merge_cache,
        &mut conflicts,
    );
    let mut new_conflicts: Vec<Conflict> = conflicts
        .into_iter()
        .filter(|c| !state.reported_conflicts.contains(c))
        .collect();
    new_conflicts.sort_by_key(ToString::to_string);
    if state.reported_conflicts.len() > 10_000 {
        state.reported_conflicts.clear();
    }
    for conflict in new_conflicts {
        state.reported_conflicts.insert(conflict.clone());
        warnings.push(Warning::Conflict(conflict));
    }

    if state.interner.wants_sweep() {
        state.merge_cache.clear();
        state.interner.sweep();
    }
    stats.series = families.iter().map(|f| f.samples.len()).sum();
    stats.duration = start.elapsed();
    Scrape {
        families,
        files: reports,
        warnings,
        stats,
    }
}

fn refresh(
    path: &Path,
    tracked: &mut TrackedFile,
    buf: &mut Vec<u8>,
    interner: &mut Interner,
) -> Result<usize, FileProblem> {
    let problem = |kind| FileProblem {
        path: path.to_path_buf(),
        offset: 0,
        kind,
    };
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| problem(ProblemKind::NonUtf8Name))?;
    let name = FileName::parse(name)
        .map_err(|e| problem(ProblemKind::Read(ReadErrorKind::BadFileName(e))))?;
    let parsed = tracked.parsed.get_or_insert_with(|| ParsedFile::new(name));
    parsed.refresh(path, buf, interner).map_err(|problem| {
        // Opening a symbolic link whose target is missing also says "not
        // found", but unlike a reaped worker's file it stays: damage, not a race.
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
    })
}
