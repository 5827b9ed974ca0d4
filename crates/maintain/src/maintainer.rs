//! [`Maintainer`]: the one owner of what is done to a directory and when.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use multiprom_collector::DirCollector;

use crate::compaction::{CompactError, CompactPass, Compactor, Step};
use crate::config::MaintainConfig;
use crate::liveness::Liveness;
use crate::reap::{remove_due, remove_orphan_companions, Reaper};
use crate::status::{MaintenanceStatus, Totals};

/// The shortest interval between two passes of one kind, whatever the
/// configuration says, so a zero interval cannot spin.
const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// How long [`Maintainer::run_due`] says to wait when there is no work.
const IDLE: Duration = Duration::from_secs(3600);

/// Watches which writers of one directory are gone, and reaps and compacts
/// it, on a schedule of its own.
///
/// Making one touches nothing. [`Maintainer::recover`] finishes what an
/// earlier process left half-done (call it before anything reads the
/// directory; [`Maintainer::run_due`] does it on its first call otherwise),
/// and [`Maintainer::run_due`], called again at the time it returns, does
/// whatever work is due: a walk of the processes for the directory's
/// [`Liveness`] (every pass: the one rule for "this writer is gone",
/// see [`Maintainer::liveness`]), reaping and compaction as configured. It is
/// synchronous: the host drives it from one thread or blocking task. The
/// collector that serves the directory collects as the maintainer's work
/// needs once [`Maintainer::govern`] made it (settling files and leaving
/// live gauges out by the maintainer's liveness); what the maintainer has
/// done is [`Maintainer::status`].
///
/// Compaction passes run inside [`DirCollector::while_not_collecting`] of
/// the collector given, so that collector's scrapes never see a fold half
/// done: give it the collector that serves the directory.
///
/// ```no_run
/// use multiprom_collector::DirCollector;
/// use multiprom_maintain::{CompactConfig, MaintainConfig, Maintainer, ReapConfig};
///
/// let config = MaintainConfig::new()
///     .reap(ReapConfig::default())
///     .compact(CompactConfig::default());
/// let maintainer = Maintainer::new("/run/metrics", config);
/// // Scrapes collect through `collector` (shared with an `Arc`, say).
/// let collector = maintainer.govern(DirCollector::new("/run/metrics"));
/// maintainer.recover(&collector);
/// loop {
///     let next = maintainer.run_due(&collector);
///     std::thread::sleep(next.saturating_duration_since(std::time::Instant::now()));
/// }
/// ```
#[derive(Debug)]
pub struct Maintainer {
    dir: PathBuf,
    config: MaintainConfig,
    /// Which writers are gone: read by collections, walked by `run_due`.
    liveness: Arc<Liveness>,
    /// Finds exited writers' live gauges due for removal.
    reaper: Option<Mutex<Reaper>>,
    compaction: Mutex<CompactionState>,
    /// Compaction asked for, but refused (or its staging could not be set
    /// up): no pass will run.
    compaction_refused: AtomicBool,
    /// When each kind of work is next due; held for a whole run, so runs
    /// never overlap.
    schedule: Mutex<Schedule>,
    totals: Totals,
}

#[derive(Debug, Default)]
struct Schedule {
    recovered: bool,
    next_reap: Option<Instant>,
    next_compaction: Option<Instant>,
}

#[derive(Debug)]
enum CompactionState {
    /// Not asked for, refused, or not yet set up.
    Idle,
    /// Set up.
    Ready(Compactor),
}

impl Maintainer {
    /// A maintainer of `dir`. Touches nothing: see [`Maintainer::recover`].
    #[must_use]
    pub fn new(dir: impl Into<PathBuf>, config: MaintainConfig) -> Self {
        let dir = dir.into();
        let reaper = config.reap.map(|reap| Mutex::new(Reaper::new(reap.grace)));
        let writers_visible = config.compact.is_some_and(|c| !c.check_writers_visible);
        let liveness = Arc::new(Liveness::new(dir.clone()).assume_writers_visible(writers_visible));
        Maintainer {
            dir,
            config,
            liveness,
            reaper,
            compaction: Mutex::new(CompactionState::Idle),
            compaction_refused: AtomicBool::new(false),
            schedule: Mutex::new(Schedule::default()),
            totals: Totals::default(),
        }
    }

    /// The directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &MaintainConfig {
        &self.config
    }

    /// Which writers of the directory are gone: what collections settle
    /// files and leave live gauges out by
    /// (`DirCollector::settle_exited_writers` with
    /// [`Liveness::for_collector`]), walked by [`Maintainer::run_due`].
    #[must_use]
    pub fn liveness(&self) -> &Arc<Liveness> {
        &self.liveness
    }

    /// `collector`, made to collect as this maintainer's work needs: a
    /// file no process holds for writing cannot change until it is opened
    /// again, so it is read no more (settled, by [`Maintainer::liveness`],
    /// which says nothing is gone where the writers cannot be seen); and,
    /// when it reaps, an exited writer's live gauges leave the output at
    /// once, before their files are removed. Without it a collector reads
    /// every file on every collection, as Python's collector does, and
    /// shows a reaped writer's live gauges until their files go. Touches
    /// nothing on disk.
    #[must_use]
    pub fn govern(&self, collector: DirCollector) -> DirCollector {
        let collector = collector.settle_exited_writers(self.liveness.for_collector());
        if self.reaps() {
            collector.leave_out_exited_live_gauges()
        } else {
            collector
        }
    }

    /// Whether exited processes' live gauges are reaped.
    #[must_use]
    pub fn reaps(&self) -> bool {
        self.reaper.is_some()
    }

    /// Whether compaction is on: asked for, and not refused (where the
    /// writers' processes cannot be seen, or the directory is compacted by
    /// another process).
    #[must_use]
    pub fn compacts(&self) -> bool {
        self.config.compact.is_some() && !self.compaction_refused.load(Ordering::Relaxed)
    }

    /// What has been done so far.
    #[must_use]
    pub fn status(&self) -> MaintenanceStatus {
        let mut status = self.totals.status(self.compacts());
        status.liveness = self.liveness.state();
        status
    }

    /// Finishes or undoes what an earlier process left half-done in the
    /// directory (an interrupted compaction pass, a file a killed reaper
    /// had moved aside), and sets compaction up, or refuses it with a
    /// warning where it is not safe. Problems are logged. Later calls do
    /// nothing.
    pub fn recover(&self, collector: &DirCollector) {
        let mut schedule = lock(&self.schedule);
        self.recover_once(&mut schedule, collector);
    }

    /// Does whatever work is due now (recovering first, if that was not
    /// done yet), logging and counting its outcomes, and returns when to
    /// call again. Blocks for as long as the work takes: run it off any
    /// thread that answers requests.
    pub fn run_due(&self, collector: &DirCollector) -> Instant {
        let mut schedule = lock(&self.schedule);
        self.recover_once(&mut schedule, collector);
        let next_walk = self.liveness.run_due();
        if let Some(reap) = self.config.reap {
            if is_due(schedule.next_reap) {
                let start = Instant::now();
                self.reap_now();
                schedule.next_reap = Some(next_after(start, reap.interval));
            }
        }
        if let Some(compact) = self.config.compact.filter(|_| self.compacts()) {
            if is_due(schedule.next_compaction) {
                let start = Instant::now();
                self.compact_ready(collector);
                schedule.next_compaction = Some(next_after(start, compact.interval));
            }
        }
        [
            Some(next_walk),
            schedule.next_reap,
            schedule.next_compaction,
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or_else(|| Instant::now() + IDLE)
    }

    /// One compaction pass now, whatever the schedule (recovering first, if
    /// that was not done yet), logged and counted. `None` when compaction is
    /// off.
    pub fn compact_now(
        &self,
        collector: &DirCollector,
    ) -> Option<Result<CompactPass, CompactError>> {
        let mut schedule = lock(&self.schedule);
        self.recover_once(&mut schedule, collector);
        self.compact_ready(collector)
    }

    fn recover_once(&self, schedule: &mut Schedule, collector: &DirCollector) {
        if std::mem::replace(&mut schedule.recovered, true) {
            return;
        }
        if let Some(reaper) = &self.reaper {
            // Only where a killed reaper left files aside does this look
            // for holders; otherwise it is one listing.
            let leftovers = lock(reaper).recover_leftovers(&self.dir);
            self.log_removal(&leftovers.removed, &leftovers.failed);
        }
        if self.config.compact.is_some() {
            match self.start_compaction(collector) {
                Some(ready) => *lock(&self.compaction) = ready,
                None => self.compaction_refused.store(true, Ordering::Relaxed),
            }
        }
    }

    /// Takes charge of compacting the directory, recovering from an earlier
    /// process's unfinished pass; `None` (with a warning saying why) where
    /// that is not possible. Which files may be folded is the liveness
    /// rule's to say, pass by pass: while liveness is unknown, none.
    fn start_compaction(&self, collector: &DirCollector) -> Option<CompactionState> {
        let dir = self.dir.as_path();
        let mut log_step = |step: &Step| {
            if let Step::PutBack(name) = step {
                tracing::info!(
                    "compaction recovery: put {name} back into {}",
                    dir.display()
                );
            }
        };
        match collector.while_not_collecting(|| Compactor::open(dir, &mut log_step)) {
            Ok((compactor, recovery)) => {
                if let Some(target) = recovery.completed {
                    tracing::info!(
                        "compaction recovery: finished the interrupted fold into {target}"
                    );
                }
                if let Some(target) = recovery.undone {
                    tracing::info!("compaction recovery: undid the uncommitted fold into {target}");
                }
                Some(CompactionState::Ready(compactor))
            }
            Err(e) => {
                tracing::warn!("not compacting {}: {e}", dir.display());
                None
            }
        }
    }

    /// One reaping pass: a survey under the reaper's lock (cheap), the
    /// removal of what is due without it (slow: moves, a settle, walks of
    /// every process's files), then the survey's state brought up to date.
    fn reap_now(&self) {
        let Some(reaper) = &self.reaper else {
            return;
        };
        let paths = match multiprom_format::scan_dir(&self.dir) {
            Ok(paths) => Arc::new(paths),
            Err(e) => {
                tracing::warn!(
                    "cannot check {} for dead processes: {e}",
                    self.dir.display()
                );
                return;
            }
        };
        let due = lock(reaper).survey(&paths, &self.liveness).due;
        if !due.is_empty() {
            let removal = remove_due(due);
            lock(reaper).forget(
                removal
                    .removed
                    .iter()
                    .map(|(path, _)| path)
                    .chain(&removal.vanished),
            );
            self.log_removal(&removal.removed, &removal.failed);
        }
        // Compaction never runs meanwhile (the schedule is locked), so a
        // `*.db` file being folded is seen in staging.
        let orphans = remove_orphan_companions(&self.dir);
        self.log_removal(&orphans.removed, &orphans.failed);
    }

    fn log_removal(&self, removed: &[(PathBuf, u32)], failed: &[(PathBuf, String)]) {
        self.totals.count_reaped(removed.len());
        for (path, pid) in removed {
            tracing::info!("removed {}: process {pid} is gone", path.display());
        }
        for (path, err) in failed {
            tracing::warn!("cannot remove {} of a dead process: {err}", path.display());
        }
    }

    /// One compaction pass, if compaction is set up (and once the writers
    /// have been seen), while `collector` does not collect.
    fn compact_ready(&self, collector: &DirCollector) -> Option<Result<CompactPass, CompactError>> {
        let state = lock(&self.compaction);
        let CompactionState::Ready(compactor) = &*state else {
            return None;
        };
        let liveness = &self.liveness;
        let is_free = |path: &Path| liveness.is_free_path(path);
        let result = collector.while_not_collecting(|| compactor.pass(&is_free, &mut |_| {}));
        log_compaction(&self.dir, &result);
        self.totals.count_pass(&result);
        Some(result)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // What a panicking pass left is still consistent enough to go on from.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn is_due(next: Option<Instant>) -> bool {
    next.is_none_or(|at| at <= Instant::now())
}

/// When work that started at `start` is next due: `interval` later, or
/// `interval` after it ended if it overran that.
fn next_after(start: Instant, interval: Duration) -> Instant {
    let interval = interval.max(MIN_INTERVAL);
    let next = start + interval;
    let now = Instant::now();
    if next <= now {
        now + interval
    } else {
        next
    }
}

fn log_compaction(dir: &Path, result: &Result<CompactPass, CompactError>) {
    match result {
        Ok(pass) => {
            for (target, files) in &pass.folded {
                tracing::info!(
                    "compacted {} file{} of exited workers into {}/{target} (pass took {:.1} ms)",
                    files.len(),
                    if files.len() == 1 { "" } else { "s" },
                    dir.display(),
                    pass.duration.as_secs_f64() * 1000.0
                );
            }
            for name in &pass.held {
                tracing::info!("not compacting {name}: a process holds it again");
            }
            for (name, why) in &pass.skipped {
                tracing::warn!("not compacting {name}: {why}");
            }
        }
        Err(e) => tracing::warn!("compaction of {} failed (nothing lost): {e}", dir.display()),
    }
}
