//! Reaping: what `prometheus_client.multiprocess.mark_process_dead(pid)` does,
//! for every live-gauge file whose writer is gone (the liveness rule,
//! `crate::liveness`: no process holds it for writing), without ever racing
//! the application's own `mark_process_dead`.
//!
//! `mark_process_dead` deletes `gauge_live*_<pid>.db` and nothing else:
//! counters, histograms, summaries and non-live gauges of dead processes are
//! kept, so totals never go backwards. Python relies on the application
//! calling it (gunicorn's `child_exit` hook); a crashed worker is never
//! marked. Here the file's holders are looked at instead.
//!
//! The hook lists the files with `glob` and then calls `os.remove` on each:
//! if anyone else removes one of them in between, the hook raises
//! `FileNotFoundError`, and in gunicorn that exception kills the master and
//! with it the whole application. So the [`Reaper`] splits reaping in two:
//!
//! 1. **Retire at once.** A live-gauge file whose writer is gone is left out
//!    of the merge by the collector from the first scrape after the liveness
//!    look that found it so (`DirCollector::leave_out_exited_live_gauges`).
//!    The output is exactly what Python serves after the hook ran.
//! 2. **Remove much later.** The file itself is removed only after no
//!    process has held it, and no process has had the pid in its name (not
//!    even a zombie: gunicorn runs `child_exit` right after collecting the
//!    worker's exit status, so a zombie's hook is still to come), for a
//!    grace period (five minutes by default), and only if no process holds
//!    it for writing then. A hook runs within milliseconds of its
//!    worker being collected, so by then it has long finished. The file is
//!    first renamed to a hidden name (out of the `*.db` namespace) and
//!    checked for holders again before it is deleted, so a new process that
//!    got the pid and opened the file just before the rename keeps it.
//!
//! The one way a hook for the same pid could run later is pid reuse: a new
//! process gets the dead one's pid, and its own hook removes
//! `gauge_live*_<pid>.db` when it exits. The kernel hands out pids in order,
//! so the reaper reads the pid counter (`/proc/loadavg`) on every pass and
//! restarts a file's grace period whenever the counter has passed its pid
//! (`PidWindow`). A file is therefore removed only when
//! no process with its pid can have existed for the whole grace period.
//!
//! Surveys ([`Reaper::survey`]) and removing (moving aside, the settle, the
//! looks at holders) run only in the maintainer's own passes
//! ([`remove_due`]), never inside a scrape.
//!
//! A reaper killed between moving a file aside and removing it (a 20 ms
//! window) leaves the hidden `.<name>.reaping` behind, which no scan lists
//! and no hook looks for. The next maintainer's recovery finishes the
//! job ([`Reaper::recover_leftovers`]): such a file, untouched for a minute
//! (a younger one may be another reaper's, mid-pass), is removed, or put
//! back under its name if some process holds it.
//!
//! Ids that are not plain decimal numbers (a custom `process_identifier`)
//! are never removed (their live gauges are still left out while their
//! writer is gone). Where the liveness is unknown (holders cannot be seen)
//! nothing is retired or removed.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use multiprom_format::{FileIdentity, FileName, MetricKind, STAGING_DIR};

use crate::companion::Companion;

use crate::liveness::Liveness;
use crate::process::{busy, last_allocated_pid, process_state, PidWindow, ProcessState};
use crate::set_aside::{move_no_replace, set_aside, Aside};

/// What a survey of a listing found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Survey {
    /// Live-gauge files of exited processes, still on disk: leave them out
    /// of the merge, as if `mark_process_dead` had removed them. The same
    /// set (the same `Arc`) as the last survey's while nothing changed.
    pub(crate) retired: Arc<HashSet<PathBuf>>,
    /// Retired files whose grace period is over, with their pid: for
    /// [`remove_due`].
    pub(crate) due: Vec<(PathBuf, u32)>,
}

/// What removing files did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Removal {
    /// Files removed, with the pid of the dead process, in name order.
    pub(crate) removed: Vec<(PathBuf, u32)>,
    /// Files that could not be removed, with why.
    pub(crate) failed: Vec<(PathBuf, String)>,
    /// Files someone else removed first.
    pub(crate) vanished: Vec<PathBuf>,
}

/// What [`Reaper::full_survey`] decided.
#[derive(Debug, Default)]
struct FullSurvey {
    retired: HashSet<PathBuf>,
    due: Vec<(PathBuf, u32)>,
}

/// The last survey: its listing, the live-gauge files in it, their
/// processes' states, its answer, and when the next grace period ends.
#[derive(Debug)]
struct LastSurvey {
    listing: Arc<Vec<PathBuf>>,
    live: Arc<Vec<(usize, u32)>>,
    /// Whether each of `live` was free of writers.
    free: Vec<bool>,
    states: HashMap<u32, ProcessState>,
    retired: Arc<HashSet<PathBuf>>,
    next_due: Option<Instant>,
}

/// A retired file waiting for its grace period.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    pid: u32,
    /// When its process was first seen gone (and the pid counter has not
    /// passed the pid since).
    since: Instant,
}

/// What the reaper needs to know about the system; the real one reads
/// `/proc`, tests substitute their own.
pub(crate) trait ProcessView {
    /// Whether the writer of the file at `path` (named after `pid`) is
    /// gone: no process holds the file (the liveness rule).
    fn free(&mut self, path: &Path, pid: u32) -> bool;
    /// Whether `pid` is alive.
    fn state(&mut self, pid: u32) -> ProcessState;
    /// The last pid handed out, if known.
    fn last_allocated_pid(&mut self) -> Option<u32>;
    /// Which of `files` are open or mapped by some process.
    fn held(&mut self, files: &[(PathBuf, FileIdentity)]) -> HashSet<FileIdentity>;
}

/// The running system, through `/proc` and the kernel's leases, with the
/// directory's [`Liveness`] telling which files' writers are gone (none
/// without one: only surveys ask).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SystemProcesses<'a>(pub(crate) Option<&'a Liveness>);

impl ProcessView for SystemProcesses<'_> {
    fn free(&mut self, path: &Path, _: u32) -> bool {
        self.0.is_some_and(|liveness| liveness.is_free_path(path))
    }

    fn state(&mut self, pid: u32) -> ProcessState {
        process_state(pid)
    }

    fn last_allocated_pid(&mut self) -> Option<u32> {
        last_allocated_pid()
    }

    fn held(&mut self, files: &[(PathBuf, FileIdentity)]) -> HashSet<FileIdentity> {
        // Removing a name never disturbs a process that has the file open
        // or mapped; this check keeps a file some process may still write.
        busy(files)
    }
}

/// Retires the `gauge_live*` files of exited processes, and tells which are
/// due for removal after their grace period (see the module docs for why
/// that is safe beside an application's own `mark_process_dead`).
#[derive(Debug)]
pub(crate) struct Reaper {
    grace: Duration,
    waiting: HashMap<PathBuf, Waiting>,
    last_pid: Option<u32>,
    /// Pids seen gone, and not handed out again since as far as the pid
    /// counter tells: a scrape need not ask about them again (a directory
    /// of a thousand gone workers' files cost a thousand system calls a
    /// scrape otherwise).
    gone: HashSet<u32>,
    /// The last survey, to answer the same again while nothing changed.
    last: Option<LastSurvey>,
    /// Whether the leftovers of an earlier reaper were dealt with.
    recovered: bool,
}

impl Reaper {
    /// A reaper that has files removed `grace` after their process is gone.
    pub(crate) fn new(grace: Duration) -> Self {
        Reaper {
            grace,
            waiting: HashMap::new(),
            last_pid: None,
            gone: HashSet::new(),
            last: None,
            recovered: false,
        }
    }

    /// Finishes, once per reaper, what a reaper killed mid-pass left in
    /// `dir`: each `.<name>.reaping` of a live-gauge file, unchanged for a
    /// minute, is removed, or moved back to `<name>` if a process holds it.
    /// Later calls do nothing.
    pub(crate) fn recover_leftovers(&mut self, dir: &Path) -> Removal {
        self.recover_leftovers_with(dir, SystemTime::now(), &mut SystemProcesses::default())
    }

    /// [`Reaper::recover_leftovers`] at time `now`, with `view` telling
    /// about processes.
    fn recover_leftovers_with(
        &mut self,
        dir: &Path,
        now: SystemTime,
        view: &mut impl ProcessView,
    ) -> Removal {
        let mut pass = Removal::default();
        if std::mem::replace(&mut self.recovered, true) {
            return pass;
        }
        let companion_pid =
            |kind: Companion| move |path: &Path| companion_file_pid(kind, path).map(|(_, pid)| pid);
        let exemplar_pid = companion_pid(Companion::Exemplars);
        let native_pid = companion_pid(Companion::NativeHistograms);
        let places: [(PathBuf, &PidOf<'_>); 3] = [
            (dir.to_owned(), &live_gauge_pid),
            (dir.join(Companion::Exemplars.subdir()), &exemplar_pid),
            (dir.join(Companion::NativeHistograms.subdir()), &native_pid),
        ];
        let mut leftovers = Vec::new();
        for (place, pid_of) in places {
            let Ok(entries) = std::fs::read_dir(&place) else {
                continue;
            };
            leftovers.extend(leftovers_in(&place, entries, pid_of, now));
        }
        if leftovers.is_empty() {
            return pass;
        }
        let held = view.held(
            &leftovers
                .iter()
                .map(|(_, _, id, hidden)| (hidden.clone(), *id))
                .collect::<Vec<_>>(),
        );
        for (path, pid, id, hidden) in leftovers {
            let done = if held.contains(&id) {
                move_no_replace(&hidden, &path)
                    .map_err(|e| format!("cannot put it back from {}: {e}", hidden.display()))
            } else {
                match std::fs::remove_file(&hidden) {
                    Ok(()) => {
                        pass.removed.push((path.clone(), pid));
                        Ok(())
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    Err(e) => Err(format!("cannot remove {}: {e}", hidden.display())),
                }
            };
            if let Err(why) = done {
                pass.failed.push((path, why));
            }
        }
        pass.removed.sort();
        pass
    }

    /// Which files of `paths` (a listing of the directory) are retired, and
    /// which are due for removal, against the running system.
    pub(crate) fn survey(&mut self, paths: &Arc<Vec<PathBuf>>, liveness: &Liveness) -> Survey {
        self.last = None;
        self.survey_with(paths, Instant::now(), &mut SystemProcesses(Some(liveness)))
    }

    /// A survey at time `now`, with `view` telling about processes.
    ///
    /// Every scrape makes one, so the common case is cheap: the same
    /// listing (the same `Arc`), the same state of every live-gauge file's
    /// process, no grace period ending: the last survey's answer, with no
    /// name parsed, no path hashed and no system call for a pid known gone.
    fn survey_with(
        &mut self,
        paths: &Arc<Vec<PathBuf>>,
        now: Instant,
        view: &mut impl ProcessView,
    ) -> Survey {
        let last_pid = view.last_allocated_pid();
        let window = match (self.last_pid, last_pid) {
            (Some(before), Some(after)) => Some(PidWindow { before, after }),
            _ => None,
        };
        if last_pid.is_some() {
            self.last_pid = last_pid;
        }
        let known_gone = self.gone.len();
        match window {
            Some(window) => self.gone.retain(|&pid| !window.may_have_reused(pid)),
            None => self.gone.clear(),
        }
        // A pid that may have been handed out again restarts its files'
        // clocks: no shortcut then.
        let reused = self.gone.len() != known_gone;

        // The live-gauge files of the listing, parsed once per listing.
        let same_listing = self
            .last
            .as_ref()
            .filter(|last| Arc::ptr_eq(&last.listing, paths));
        let live = match same_listing {
            Some(last) => Arc::clone(&last.live),
            None => Arc::new(
                paths
                    .iter()
                    .enumerate()
                    .filter_map(|(at, path)| Some((at, live_gauge_pid(path)?)))
                    .collect(),
            ),
        };
        let mut states: HashMap<u32, ProcessState> = HashMap::new();
        for &(_, pid) in live.iter() {
            let gone = &mut self.gone;
            states.entry(pid).or_insert_with(|| {
                if gone.contains(&pid) {
                    return ProcessState::Gone;
                }
                let state = view.state(pid);
                if state == ProcessState::Gone && last_pid.is_some() {
                    gone.insert(pid);
                }
                state
            });
        }
        let free: Vec<bool> = live
            .iter()
            .map(|&(at, pid)| paths.get(at).is_some_and(|path| view.free(path, pid)))
            .collect();
        if let Some(last) = same_listing.filter(|last| {
            !reused
                && last.next_due.is_none_or(|due| now < due)
                && last.states == states
                && last.free == free
        }) {
            return Survey {
                retired: Arc::clone(&last.retired),
                due: Vec::new(),
            };
        }
        let survey = self.full_survey(paths, &live, &free, &states, window, now);
        let retired = Arc::new(survey.retired);
        let grace = self.grace;
        self.last = Some(LastSurvey {
            listing: Arc::clone(paths),
            live,
            free,
            states,
            retired: Arc::clone(&retired),
            next_due: self.waiting.values().map(|w| w.since + grace).min(),
        });
        Survey {
            retired,
            due: survey.due,
        }
    }

    /// Forgets `paths` (removed, by [`remove_due`] or by someone else): their
    /// clocks stop, and the next survey works its answer out afresh.
    pub(crate) fn forget<'a>(&mut self, paths: impl IntoIterator<Item = &'a PathBuf>) {
        for path in paths {
            self.waiting.remove(path);
            self.last = None;
        }
    }

    /// [`Reaper::survey_with`] worked out in full: `live` are the live-gauge
    /// files of `paths` (their place in it and pid), `free` whether each is
    /// free of writers, `states` the states of the processes of their pids.
    ///
    /// A file is retired when no process holds it (the liveness rule), and
    /// due once it has been so for the grace period with its pid *gone*:
    /// the clock runs only then, since while a process has the pid (a
    /// zombie whose parent has not collected it, or any process given the
    /// pid since) an application's `mark_process_dead` for that pid may yet
    /// run, and must not find the file removed under it.
    fn full_survey(
        &mut self,
        paths: &[PathBuf],
        live: &[(usize, u32)],
        free: &[bool],
        states: &HashMap<u32, ProcessState>,
        window: Option<PidWindow>,
        now: Instant,
    ) -> FullSurvey {
        let mut pass = FullSurvey::default();
        let due = &mut pass.due;
        let mut seen = HashSet::new();
        for (&(at, pid), &free) in live.iter().zip(free) {
            let Some(path) = paths.get(at) else {
                continue;
            };
            if !free {
                continue;
            }
            seen.insert(path.clone());
            pass.retired.insert(path.clone());
            let state = states.get(&pid).copied().unwrap_or(ProcessState::Alive);
            if state != ProcessState::Gone {
                // Some process has the pid: a zombie whose `child_exit`
                // hook has not run yet, or a process given the pid since,
                // whose own hook may remove the file. The clock waits.
                self.waiting.remove(path);
                continue;
            }
            let waiting = self
                .waiting
                .entry(path.clone())
                .or_insert(Waiting { pid, since: now });
            if waiting.pid != pid || window.is_some_and(|w| w.may_have_reused(pid)) {
                // A process with this pid may have lived since we last
                // looked: its hook may yet run. Start again.
                *waiting = Waiting { pid, since: now };
            }
            if now.saturating_duration_since(waiting.since) >= self.grace {
                due.push((path.clone(), pid));
            }
        }
        self.waiting.retain(|path, _| seen.contains(path));
        pass
    }
}

/// The pid of a reaped file's name, if it is one this reaper removes.
type PidOf<'a> = dyn Fn(&Path) -> Option<u32> + 'a;

/// The leftovers of a killed reaper among `entries` of `place`: hidden
/// `.<name>.reaping` files whose `<name>` `pid_of` takes for a reaped file,
/// unchanged for [`LEFTOVER_AFTER`] at `now`: (name, pid, identity, hidden
/// path).
fn leftovers_in(
    place: &Path,
    entries: std::fs::ReadDir,
    pid_of: &PidOf<'_>,
    now: SystemTime,
) -> Vec<(PathBuf, u32, FileIdentity, PathBuf)> {
    let mut leftovers = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(original) = name
            .to_str()
            .and_then(|n| n.strip_prefix('.'))
            .and_then(|n| n.strip_suffix(".reaping"))
        else {
            continue;
        };
        let path = place.join(original);
        let Some(pid) = pid_of(&path) else {
            continue;
        };
        let hidden = entry.path();
        // The rename aside set the change time; a minute later no
        // reaper is between its two looks at the file.
        let Ok(meta) = std::fs::symlink_metadata(&hidden) else {
            continue;
        };
        let changed =
            SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(meta.ctime()).unwrap_or(0));
        let unchanged_for = now.duration_since(changed).unwrap_or_default();
        if !meta.is_file() || unchanged_for < LEFTOVER_AFTER {
            continue;
        }
        let id = FileIdentity::from_metadata(&meta);
        leftovers.push((path, pid, id, hidden));
    }
    leftovers
}

/// Removes the `due` files of a survey (the slow part of reaping: run it
/// outside any scrape, with no lock held). Each file nobody holds is moved
/// aside to a dot-name no scan lists and no writer opens, then, after a
/// settle, holders are looked for again: a new process that got the pid and
/// opened the file just before the move is found now, and the file goes
/// back. Nothing can open it after the move.
pub(crate) fn remove_due(due: Vec<(PathBuf, u32)>) -> Removal {
    remove_due_with(due, &mut SystemProcesses::default())
}

fn remove_due_with(due: Vec<(PathBuf, u32)>, view: &mut impl ProcessView) -> Removal {
    let mut removal = Removal::default();
    if due.is_empty() {
        return removal;
    }
    let ids: Vec<Option<FileIdentity>> =
        due.iter().map(|(p, _)| FileIdentity::of(p).ok()).collect();
    let held = view.held(
        &due.iter()
            .zip(&ids)
            .filter_map(|((path, _), id)| Some((path.clone(), (*id)?)))
            .collect::<Vec<_>>(),
    );
    let mut free = Vec::new();
    for ((path, pid), id) in due.into_iter().zip(ids) {
        match id {
            // Already gone (someone else removed it).
            None => removal.vanished.push(path),
            Some(id) if held.contains(&id) => {}
            Some(_) => free.push((path, pid)),
        }
    }
    let outcome = set_aside(free, &HiddenNames, |aside| {
        Ok(view.held(
            &aside
                .iter()
                .map(|((path, _), id)| (hidden_name(path), *id))
                .collect::<Vec<_>>(),
        ))
    });
    // `held` above never fails: processes that cannot be inspected are
    // taken as not holding the file (see `SystemProcesses::held`).
    let Ok(outcome) = outcome else {
        return removal;
    };
    for ((path, _), e) in outcome.not_moved {
        if e.kind() == std::io::ErrorKind::NotFound {
            removal.vanished.push(path);
        } else {
            removal.failed.push((path, e.to_string()));
        }
    }
    for ((path, _), e) in outcome.not_put_back {
        let hidden = hidden_name(&path);
        removal.failed.push((
            path,
            format!("cannot put it back from {}: {e}", hidden.display()),
        ));
    }
    for (path, pid) in outcome.free {
        match std::fs::remove_file(hidden_name(&path)) {
            Ok(()) => {
                remove_companions(&path, pid, &mut removal);
                removal.removed.push((path, pid));
            }
            Err(e) => removal.failed.push((path, e.to_string())),
        }
    }
    removal.removed.sort();
    removal
}

/// Removes the companion files (exemplars, native histograms) of the `*.db`
/// file at `path` (just removed), if it has any. They need no settle of
/// their own: only a process with `pid` opens them, and none has existed
/// for the whole grace period (a writer opens its `*.db` file, which nobody
/// held, before its companions).
fn remove_companions(path: &Path, pid: u32, removal: &mut Removal) {
    let (Some(dir), Some(name)) = (path.parent(), db_file_name(path)) else {
        return;
    };
    for kind in Companion::ALL {
        let companion = kind.path(dir, &name);
        match std::fs::remove_file(&companion) {
            Ok(()) => removal.removed.push((companion, pid)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => removal.failed.push((companion, e.to_string())),
        }
    }
}

/// The companion files of `kind` in their subdirectory of `dir` whose
/// `*.db` file is gone (not in `dir`, not staged for compaction) and whose
/// pid is gone, with the pid: left by a worker whose `*.db` files someone
/// deleted, or by a reaper or compaction killed between removing a `*.db`
/// file and its companion. A companion without its `*.db` file is never
/// read (its keys belong to entries no longer there).
pub(crate) fn orphan_companion_files(
    dir: &Path,
    kind: Companion,
    view: &mut impl ProcessView,
) -> Vec<(PathBuf, u32)> {
    let Ok(entries) = std::fs::read_dir(dir.join(kind.subdir())) else {
        return Vec::new();
    };
    let mut orphans = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some((db, pid)) = companion_file_pid(kind, &path) else {
            continue;
        };
        let db = db.to_string();
        let present = |path: PathBuf| std::fs::symlink_metadata(path).is_ok();
        // Staging first: compaction moves files there from `dir` and back.
        if present(dir.join(STAGING_DIR).join(&db)) || present(dir.join(&db)) {
            continue;
        }
        if view.state(pid) == ProcessState::Gone {
            orphans.push((path, pid));
        }
    }
    orphans.sort();
    orphans
}

/// Removes the [`orphan_companion_files`] of every kind as [`remove_due`]
/// removes files: set aside, settled, and put back if a process holds one.
pub(crate) fn remove_orphan_companions(dir: &Path) -> Removal {
    let orphans = Companion::ALL
        .into_iter()
        .flat_map(|kind| orphan_companion_files(dir, kind, &mut SystemProcesses::default()))
        .collect();
    remove_due_with(orphans, &mut SystemProcesses::default())
}

/// Live-gauge files set aside under `.<name>.reaping`, beside their name.
struct HiddenNames;

impl Aside<(PathBuf, u32)> for HiddenNames {
    fn move_aside(&self, (path, _): &(PathBuf, u32)) -> std::io::Result<FileIdentity> {
        let hidden = hidden_name(path);
        std::fs::rename(path, &hidden)?;
        FileIdentity::of(&hidden)
    }

    fn put_back(&self, (path, _): &(PathBuf, u32)) -> std::io::Result<()> {
        move_no_replace(&hidden_name(path), path)
    }
}

/// A `.<name>.reaping` file unchanged for this long is a leftover of a
/// killed reaper: a live one looks at it again 20 ms after moving it aside.
const LEFTOVER_AFTER: Duration = Duration::from_secs(60);

/// `.<name>.reaping` beside `path`: out of the `*.db` namespace.
fn hidden_name(path: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(".reaping");
    path.with_file_name(name)
}

/// The `*.db` file name of `path`, if it is one.
fn db_file_name(path: &Path) -> Option<FileName> {
    FileName::parse(path.file_name()?.to_str()?).ok()
}

/// The pid of a `gauge_live*_<pid>.db` file, if `path` is one whose id is a
/// plain decimal pid.
fn live_gauge_pid(path: &Path) -> Option<u32> {
    let name = db_file_name(path)?;
    let MetricKind::Gauge(mode) = name.kind() else {
        return None;
    };
    if !mode.is_live() {
        return None;
    }
    plain_pid(&name)
}

/// The `*.db` name and pid of a companion file of `kind` (say
/// `exemplars/<kind>_<pid>.exemplars`) whose id is a plain decimal pid.
fn companion_file_pid(kind: Companion, path: &Path) -> Option<(FileName, u32)> {
    let name = kind.db_name_of(path.file_name()?.to_str()?)?;
    let pid = plain_pid(&name)?;
    Some((name, pid))
}

/// The id of `name` as a pid, if it is one as `os.getpid()` writes it
/// ("0042" or "+42" are someone's custom identifier, never reaped).
fn plain_pid(name: &FileName) -> Option<u32> {
    // Canonical decimal: digits, and no leading zero but in "0" itself.
    let id = name.id().as_bytes();
    let canonical = id.iter().all(u8::is_ascii_digit) && (id.len() == 1 || id[0] != b'0');
    name.pid().filter(|_| canonical)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A survey and the removal of what it found due, as the maintainer
    /// makes them one after the other.
    #[derive(Debug, Default, PartialEq, Eq)]
    struct ReapPass {
        retired: Arc<HashSet<PathBuf>>,
        removed: Vec<(PathBuf, u32)>,
        failed: Vec<(PathBuf, String)>,
    }

    impl Reaper {
        fn pass_with(
            &mut self,
            paths: &Arc<Vec<PathBuf>>,
            now: Instant,
            view: &mut impl ProcessView,
        ) -> ReapPass {
            let survey = self.survey_with(paths, now, view);
            let removal = remove_due_with(survey.due, view);
            let gone: Vec<&PathBuf> = removal
                .removed
                .iter()
                .map(|(path, _)| path)
                .chain(&removal.vanished)
                .collect();
            let retired = if gone.is_empty() {
                survey.retired
            } else {
                let mut retired = HashSet::clone(&survey.retired);
                retired.retain(|path| !gone.contains(&path));
                Arc::new(retired)
            };
            self.forget(gone);
            ReapPass {
                retired,
                removed: removal.removed,
                failed: removal.failed,
            }
        }
    }

    /// A scripted system: pid states, a pid counter, and held files.
    #[derive(Default)]
    struct Fake {
        states: HashMap<u32, ProcessState>,
        last_pid: Option<u32>,
        held: HashSet<FileIdentity>,
        /// Held from the second look on: opened just before the move aside.
        opened_meanwhile: HashSet<FileIdentity>,
        looks: usize,
        /// Pids asked about, in order.
        asked: Vec<u32>,
    }

    impl ProcessView for Fake {
        fn free(&mut self, _: &Path, pid: u32) -> bool {
            // A scripted system: a file is free when its pid's process
            // has exited (no reused pid holds it).
            self.states.get(&pid).is_some_and(|s| s.is_dead())
        }
        fn state(&mut self, pid: u32) -> ProcessState {
            self.asked.push(pid);
            self.states
                .get(&pid)
                .copied()
                .unwrap_or(ProcessState::Alive)
        }
        fn last_allocated_pid(&mut self) -> Option<u32> {
            self.last_pid
        }
        fn held(&mut self, files: &[(PathBuf, FileIdentity)]) -> HashSet<FileIdentity> {
            let files: HashSet<FileIdentity> = files.iter().map(|(_, id)| *id).collect();
            self.looks += 1;
            let mut held: HashSet<FileIdentity> = files.intersection(&self.held).copied().collect();
            if self.looks > 1 {
                held.extend(files.intersection(&self.opened_meanwhile));
            }
            held
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut left: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        left
    }

    fn listing(dir: &Path) -> Vec<PathBuf> {
        names(dir).into_iter().map(|n| dir.join(n)).collect()
    }

    const GRACE: Duration = Duration::from_secs(300);

    fn exemplar_names(dir: &Path) -> Vec<String> {
        names(&dir.join(Companion::Exemplars.subdir()))
    }

    fn native_names(dir: &Path) -> Vec<String> {
        names(&dir.join(Companion::NativeHistograms.subdir()))
    }

    fn touch(dir: &Path, names: &[&str]) {
        for kind in Companion::ALL {
            std::fs::create_dir_all(dir.join(kind.subdir())).unwrap();
        }
        for name in names {
            std::fs::write(dir.join(name), b"x").unwrap();
        }
    }

    #[test]
    fn a_reaped_file_takes_its_exemplar_file_with_it() {
        let dir = tempfile::tempdir().unwrap();
        touch(
            dir.path(),
            &[
                "gauge_livesum_100.db",
                "counter_100.db",
                "exemplars/gauge_livesum_100.exemplars",
                "exemplars/counter_100.exemplars",
                "native-histograms/gauge_livesum_100.native",
                "native-histograms/histogram_100.native",
            ],
        );
        let mut fake = Fake::default();
        fake.states.insert(100, ProcessState::Gone);
        let mut reaper = Reaper::new(GRACE);
        let t0 = Instant::now();
        reaper.pass_with(&Arc::new(listing(dir.path())), t0, &mut fake);
        let due = reaper.pass_with(&Arc::new(listing(dir.path())), t0 + GRACE, &mut fake);
        assert_eq!(
            due.removed,
            [
                (
                    dir.path().join("exemplars/gauge_livesum_100.exemplars"),
                    100
                ),
                (dir.path().join("gauge_livesum_100.db"), 100),
                (
                    dir.path()
                        .join("native-histograms/gauge_livesum_100.native"),
                    100
                ),
            ]
        );
        assert_eq!(
            names(dir.path()),
            ["counter_100.db", "exemplars", "native-histograms"]
        );
        assert_eq!(exemplar_names(dir.path()), ["counter_100.exemplars"]);
        assert_eq!(native_names(dir.path()), ["histogram_100.native"]);
    }

    #[test]
    fn native_histogram_files_without_their_db_file_go_once_their_process_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        touch(
            dir.path(),
            &[
                "histogram_300.db",
                "native-histograms/histogram_100.native",
                "native-histograms/histogram_200.native",
                "native-histograms/histogram_300.native",
                "native-histograms/histogram_400.native",
                "native-histograms/histogram_0100.native",
                "native-histograms/histogram_compacted.native",
                "native-histograms/notes.txt",
                // An exemplar file is no native histogram file.
                "exemplars/histogram_100.exemplars",
            ],
        );
        std::fs::create_dir(dir.path().join(STAGING_DIR)).unwrap();
        // Being folded by compaction: its histograms are still to be read.
        std::fs::write(dir.path().join(STAGING_DIR).join("histogram_400.db"), b"x").unwrap();
        let mut fake = Fake::default();
        for pid in [100, 300, 400] {
            fake.states.insert(pid, ProcessState::Gone);
        }
        let orphans = orphan_companion_files(dir.path(), Companion::NativeHistograms, &mut fake);
        let removal = remove_due_with(orphans, &mut fake);
        assert_eq!(
            removal.removed,
            [(
                dir.path().join("native-histograms/histogram_100.native"),
                100
            )]
        );
        assert!(removal.failed.is_empty(), "{:?}", removal.failed);
        assert_eq!(
            native_names(dir.path()),
            [
                "histogram_0100.native",
                "histogram_200.native",
                "histogram_300.native",
                "histogram_400.native",
                "histogram_compacted.native",
                "notes.txt",
            ]
        );
        assert_eq!(exemplar_names(dir.path()), ["histogram_100.exemplars"]);
    }

    #[test]
    fn a_killed_reapers_native_histogram_leftovers_are_removed_once_a_minute_old() {
        let dir = tempfile::tempdir().unwrap();
        touch(
            dir.path(),
            &[
                "native-histograms/.histogram_100.native.reaping",
                "native-histograms/.histogram_worker.native.reaping",
            ],
        );
        let later = SystemTime::now() + Duration::from_secs(120);
        let pass =
            Reaper::new(GRACE).recover_leftovers_with(dir.path(), later, &mut Fake::default());
        assert_eq!(
            pass.removed,
            [(
                dir.path().join("native-histograms/histogram_100.native"),
                100
            )]
        );
        assert_eq!(
            native_names(dir.path()),
            [".histogram_worker.native.reaping"]
        );
    }

    #[test]
    fn exemplar_files_without_their_db_file_go_once_their_process_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        touch(
            dir.path(),
            &[
                "counter_300.db",
                "exemplars/counter_100.exemplars",
                "exemplars/histogram_100.exemplars",
                "exemplars/counter_200.exemplars",
                "exemplars/counter_300.exemplars",
                "exemplars/counter_400.exemplars",
                "exemplars/counter_500.exemplars",
                "exemplars/counter_0100.exemplars",
                "exemplars/counter_worker.exemplars",
                "exemplars/counter_compacted.exemplars",
                "exemplars/notes.txt",
            ],
        );
        std::fs::create_dir(dir.path().join(STAGING_DIR)).unwrap();
        // Being folded by compaction: its exemplars are still to be read.
        std::fs::write(dir.path().join(STAGING_DIR).join("counter_400.db"), b"x").unwrap();
        let mut fake = Fake::default();
        for pid in [100, 300, 400, 500] {
            fake.states.insert(pid, ProcessState::Gone);
        }
        // A new process with pid 500 opened it just now.
        let held = dir.path().join("exemplars/counter_500.exemplars");
        fake.opened_meanwhile
            .insert(FileIdentity::of(&held).unwrap());

        let orphans = orphan_companion_files(dir.path(), Companion::Exemplars, &mut fake);
        let removal = remove_due_with(orphans, &mut fake);
        assert_eq!(
            removal.removed,
            [
                (dir.path().join("exemplars/counter_100.exemplars"), 100),
                (dir.path().join("exemplars/histogram_100.exemplars"), 100),
            ]
        );
        assert!(removal.failed.is_empty(), "{:?}", removal.failed);
        assert_eq!(
            exemplar_names(dir.path()),
            [
                "counter_0100.exemplars",
                "counter_200.exemplars",
                "counter_300.exemplars",
                "counter_400.exemplars",
                "counter_500.exemplars",
                "counter_compacted.exemplars",
                "counter_worker.exemplars",
                "notes.txt",
            ]
        );
        // Without an exemplars directory there is nothing to do.
        let empty = tempfile::tempdir().unwrap();
        assert!(orphan_companion_files(empty.path(), Companion::Exemplars, &mut fake).is_empty());
    }

    #[test]
    fn a_killed_reapers_exemplar_leftovers_are_removed_once_a_minute_old() {
        let dir = tempfile::tempdir().unwrap();
        touch(
            dir.path(),
            &[
                "exemplars/.counter_100.exemplars.reaping",
                "exemplars/.counter_worker.exemplars.reaping",
            ],
        );
        let later = SystemTime::now() + Duration::from_secs(120);
        let pass =
            Reaper::new(GRACE).recover_leftovers_with(dir.path(), later, &mut Fake::default());
        assert_eq!(
            pass.removed,
            [(dir.path().join("exemplars/counter_100.exemplars"), 100)]
        );
        assert_eq!(
            exemplar_names(dir.path()),
            [".counter_worker.exemplars.reaping"]
        );
    }

    #[test]
    fn leftovers_of_a_killed_reaper_are_removed_or_put_back_once_a_minute_old() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            ".gauge_livesum_100.db.reaping",
            ".gauge_livesum_200.db.reaping",
            ".counter_100.db.reaping",
            ".gauge_livesum_worker.db.reaping",
            "gauge_livesum_300.db",
        ] {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        let mut fake = Fake::default();
        let held = FileIdentity::of(&dir.path().join(".gauge_livesum_200.db.reaping")).unwrap();
        fake.held.insert(held);
        let before = names(dir.path());

        // Just moved aside: another reaper may be between its two looks.
        let now = SystemTime::now();
        let pass = Reaper::new(GRACE).recover_leftovers_with(dir.path(), now, &mut fake);
        assert_eq!(pass, Removal::default());
        assert_eq!(names(dir.path()), before);

        let later = now + Duration::from_secs(120);
        let mut reaper = Reaper::new(GRACE);
        let pass = reaper.recover_leftovers_with(dir.path(), later, &mut fake);
        assert_eq!(
            pass.removed,
            [(dir.path().join("gauge_livesum_100.db"), 100)]
        );
        assert!(pass.failed.is_empty(), "{:?}", pass.failed);
        assert_eq!(
            names(dir.path()),
            [
                ".counter_100.db.reaping",
                ".gauge_livesum_worker.db.reaping",
                "gauge_livesum_200.db",
                "gauge_livesum_300.db",
            ]
        );
        // Once per reaper.
        std::fs::write(dir.path().join(".gauge_livesum_400.db.reaping"), b"x").unwrap();
        let again = reaper.recover_leftovers_with(dir.path(), later, &mut fake);
        assert_eq!(again, Removal::default());
    }

    #[test]
    fn retires_at_once_and_removes_only_live_gauges_after_the_grace() {
        let dir = tempfile::tempdir().unwrap();
        let all = [
            "app.db",
            "counter_100.db",
            "gauge_all_100.db",
            "gauge_liveall_100.db",
            "gauge_livemax_100.db",
            "gauge_livemin_100.db",
            "gauge_livemostrecent_100.db",
            "gauge_livesum_0100.db",
            "gauge_livesum_100.db",
            "gauge_livesum_100.txt",
            "gauge_livesum_200.db",
            "gauge_livesum_worker.db",
            "gauge_sum_100.db",
            "histogram_100.db",
            "summary_100.db",
        ];
        for name in all {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        let live_100 = [
            "gauge_liveall_100.db",
            "gauge_livemax_100.db",
            "gauge_livemin_100.db",
            "gauge_livemostrecent_100.db",
            "gauge_livesum_100.db",
        ];
        let mut fake = Fake::default();
        fake.states.insert(100, ProcessState::Gone);
        let mut reaper = Reaper::new(GRACE);
        let t0 = Instant::now();

        let first = reaper.pass_with(&Arc::new(listing(dir.path())), t0, &mut fake);
        let retired: HashSet<PathBuf> = live_100.iter().map(|n| dir.path().join(n)).collect();
        assert_eq!(*first.retired, retired);
        assert!(first.removed.is_empty());
        assert_eq!(names(dir.path()), all, "nothing removed before the grace");

        let early = reaper.pass_with(&Arc::new(listing(dir.path())), t0 + GRACE / 2, &mut fake);
        assert_eq!(*early.retired, retired);
        assert!(early.removed.is_empty());

        let due = reaper.pass_with(&Arc::new(listing(dir.path())), t0 + GRACE, &mut fake);
        assert!(due.retired.is_empty());
        let removed: Vec<_> = due
            .removed
            .iter()
            .map(|(p, pid)| (p.file_name().unwrap().to_str().unwrap(), *pid))
            .collect();
        assert_eq!(removed, live_100.map(|n| (n, 100)));
        let left: Vec<&str> = all.into_iter().filter(|n| !live_100.contains(n)).collect();
        assert_eq!(names(dir.path()), left);
    }

    #[test]
    fn the_clock_starts_when_a_zombie_is_collected() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("gauge_livesum_7.db");
        std::fs::write(&file, b"").unwrap();
        let mut fake = Fake::default();
        fake.states.insert(7, ProcessState::Zombie);
        let mut reaper = Reaper::new(GRACE);
        let t0 = Instant::now();
        let pass = reaper.pass_with(&Arc::new(vec![file.clone()]), t0, &mut fake);
        assert!(
            pass.retired.contains(&file),
            "a zombie's gauges leave at once"
        );
        let pass = reaper.pass_with(&Arc::new(vec![file.clone()]), t0 + GRACE * 2, &mut fake);
        assert!(pass.removed.is_empty(), "a zombie's hook is still to come");
        fake.states.insert(7, ProcessState::Gone);
        let t1 = t0 + GRACE * 3;
        assert!(reaper
            .pass_with(&Arc::new(vec![file.clone()]), t1, &mut fake)
            .removed
            .is_empty());
        let pass = reaper.pass_with(&Arc::new(vec![file.clone()]), t1 + GRACE, &mut fake);
        assert_eq!(pass.removed, [(file.clone(), 7)]);
        assert!(!file.exists());
    }

    #[test]
    fn a_pid_counter_passing_the_pid_restarts_the_clock() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("gauge_livesum_500.db");
        std::fs::write(&file, b"").unwrap();
        let mut fake = Fake {
            last_pid: Some(400),
            ..Fake::default()
        };
        fake.states.insert(500, ProcessState::Gone);
        let mut reaper = Reaper::new(GRACE);
        let t0 = Instant::now();
        reaper.pass_with(&Arc::new(vec![file.clone()]), t0, &mut fake);
        // Pids up to 450 were handed out: 500 cannot have been reused.
        fake.last_pid = Some(450);
        reaper.pass_with(&Arc::new(vec![file.clone()]), t0 + GRACE / 2, &mut fake);
        // Now the counter passes 500: a process with pid 500 may have lived
        // and died in between, with its hook still running.
        fake.last_pid = Some(520);
        let t1 = t0 + GRACE;
        let pass = reaper.pass_with(&Arc::new(vec![file.clone()]), t1, &mut fake);
        assert!(pass.removed.is_empty());
        assert!(pass.retired.contains(&file));
        let pass = reaper.pass_with(&Arc::new(vec![file.clone()]), t1 + GRACE, &mut fake);
        assert_eq!(pass.removed, [(file.clone(), 500)]);
    }

    #[test]
    fn a_gone_pid_is_asked_about_again_only_once_the_pid_counter_passes_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("gauge_livesum_500.db");
        std::fs::write(&file, b"").unwrap();
        let mut fake = Fake {
            last_pid: Some(400),
            ..Fake::default()
        };
        fake.states.insert(500, ProcessState::Gone);
        let mut reaper = Reaper::new(GRACE);
        let now = Instant::now();
        for last_pid in [400, 400, 450] {
            fake.last_pid = Some(last_pid);
            let pass = reaper.pass_with(&Arc::new(vec![file.clone()]), now, &mut fake);
            assert!(pass.retired.contains(&file));
        }
        assert_eq!(fake.asked, [500], "the first pass asks, the next two know");
        // Pid 500 may have been handed out: ask again.
        fake.last_pid = Some(520);
        fake.states.insert(500, ProcessState::Alive);
        let pass = reaper.pass_with(&Arc::new(vec![file.clone()]), now, &mut fake);
        assert!(pass.retired.is_empty());
        assert_eq!(fake.asked, [500, 500]);
    }

    #[test]
    fn an_unchanged_listing_gets_the_last_answer_until_something_changes() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gauge_livesum_500.db");
        let alive = dir.path().join("gauge_livesum_600.db");
        std::fs::write(&gone, b"").unwrap();
        std::fs::write(&alive, b"").unwrap();
        let mut fake = Fake {
            last_pid: Some(700),
            ..Fake::default()
        };
        fake.states.insert(500, ProcessState::Gone);
        let listing = Arc::new(vec![gone.clone(), alive.clone()]);
        let mut reaper = Reaper::new(GRACE);
        let t0 = Instant::now();
        let first = reaper.pass_with(&listing, t0, &mut fake);
        assert_eq!(*first.retired, HashSet::from([gone.clone()]));
        let second = reaper.pass_with(&listing, t0 + GRACE / 2, &mut fake);
        assert!(
            Arc::ptr_eq(&first.retired, &second.retired),
            "the same answer"
        );
        // The live process exits: a new answer.
        fake.states.insert(600, ProcessState::Gone);
        let third = reaper.pass_with(&listing, t0 + GRACE / 2, &mut fake);
        assert_eq!(*third.retired, HashSet::from([gone.clone(), alive.clone()]));
        // The first file's grace period ends: it is removed.
        let due = reaper.pass_with(&listing, t0 + GRACE, &mut fake);
        assert_eq!(due.removed, [(gone.clone(), 500)]);
        // And the pid asked about on every pass is only the live one's.
        assert_eq!(fake.asked.iter().filter(|&&pid| pid == 500).count(), 1);
    }

    #[test]
    fn a_file_still_held_open_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("gauge_livemax_9.db");
        std::fs::write(&file, b"").unwrap();
        let mut fake = Fake::default();
        fake.states.insert(9, ProcessState::Gone);
        fake.held.insert(FileIdentity::of(&file).unwrap());
        let mut reaper = Reaper::new(Duration::ZERO);
        let now = Instant::now();
        let pass = reaper.pass_with(&Arc::new(vec![file.clone()]), now, &mut fake);
        assert!(pass.removed.is_empty());
        assert!(pass.retired.contains(&file));
        fake.held.clear();
        let pass = reaper.pass_with(&Arc::new(vec![file.clone()]), now, &mut fake);
        assert_eq!(pass.removed, [(file.clone(), 9)]);
    }

    #[test]
    fn a_file_opened_just_before_it_is_moved_aside_goes_back() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("gauge_livesum_77.db");
        std::fs::write(&file, b"x").unwrap();
        let mut fake = Fake::default();
        fake.states.insert(77, ProcessState::Gone);
        fake.opened_meanwhile
            .insert(FileIdentity::of(&file).unwrap());
        let mut reaper = Reaper::new(Duration::ZERO);
        let pass = reaper.pass_with(&Arc::new(vec![file.clone()]), Instant::now(), &mut fake);
        assert!(pass.removed.is_empty(), "{pass:?}");
        assert_eq!(names(dir.path()), ["gauge_livesum_77.db"]);
        // Once nobody holds it, it goes.
        fake.opened_meanwhile.clear();
        let pass = reaper.pass_with(&Arc::new(vec![file.clone()]), Instant::now(), &mut fake);
        assert_eq!(pass.removed, [(file.clone(), 77)]);
        assert!(names(dir.path()).is_empty());
    }

    #[test]
    fn a_process_that_comes_back_is_merged_again() {
        // A pid reused by a new worker that opens the same file name.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("gauge_livesum_42.db");
        std::fs::write(&file, b"").unwrap();
        let mut fake = Fake::default();
        fake.states.insert(42, ProcessState::Gone);
        let mut reaper = Reaper::new(GRACE);
        let t0 = Instant::now();
        assert!(reaper
            .pass_with(&Arc::new(vec![file.clone()]), t0, &mut fake)
            .retired
            .contains(&file));
        fake.states.insert(42, ProcessState::Alive);
        assert!(reaper
            .pass_with(&Arc::new(vec![file.clone()]), t0 + GRACE / 2, &mut fake)
            .retired
            .is_empty());
        // It exits again: the clock starts over.
        fake.states.insert(42, ProcessState::Gone);
        let pass = reaper.pass_with(&Arc::new(vec![file.clone()]), t0 + GRACE, &mut fake);
        assert!(pass.removed.is_empty());
        let pass = reaper.pass_with(&Arc::new(vec![file.clone()]), t0 + GRACE * 2, &mut fake);
        assert_eq!(pass.removed, [(file, 42)]);
    }

    #[test]
    fn a_file_someone_else_removed_is_no_failure() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("gauge_liveall_3.db");
        let mut fake = Fake::default();
        fake.states.insert(3, ProcessState::Gone);
        let mut reaper = Reaper::new(Duration::ZERO);
        // Listed, then removed by the application's hook before we act.
        let pass = reaper.pass_with(&Arc::new(vec![file.clone()]), Instant::now(), &mut fake);
        assert_eq!(pass, ReapPass::default());
    }
}
