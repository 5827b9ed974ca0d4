//! [`Liveness`]: the one rule for "this file's writer is gone", for
//! settling, leaving live gauges out, reaping and compaction alike.
//!
//! A file's writer is gone only when **no process has the file open or
//! mapped for writing**, in a look taken after anything last happened to
//! the file (opened, written, replaced: what the caller's
//! directory watch saw). A walk asks the kernel first, file by file: a read
//! lease is granted only while no open file description of the file can
//! write ([`multiprom_format::write_lease`]), which covers every process of
//! the machine, in any pid namespace, whoever it runs as. Where the kernel
//! will not say (this process neither owns the file nor has `CAP_LEASE`,
//! leases are off), the walk looks through every process's
//! `/proc/<pid>/maps` and `/proc/<pid>/fd` instead. The number in a file's name is never evidence:
//! prometheus_client lets an application name its files by any
//! `process_identifier` (a worker index, say), so `counter_3.db` may be
//! written by a live process whose pid is anything but 3, and a live
//! process may write a dead pid's file.
//!
//! Why each part holds:
//!
//! * A writer maps its file shared and writable for as long as it lives
//!   (prometheus_client's `MmapedDict`, multiprom's writers), so a live
//!   writer holds off the lease, and shows up in its maps, whatever its
//!   file is called. Readers hold files too (a collector opening or mapping
//!   them read-only) but never change them, so they do not count.
//! * A writer that opens a file after a walk began is not in that walk; but
//!   its open raises an event the collector records as the file's `since`,
//!   and an answer only rests on walks that began after it.
//! * Two walks in a row: a holder that forks and exits while the walk is
//!   under way (the child holding the map, the parent seen gone) can slip
//!   one walk, not two.
//! * Where holders cannot be seen, nothing is gone: a network file system
//!   (writers on other machines); or, for files the kernel will not answer
//!   for, no usable `/proc`, a process whose maps this one may not read
//!   (another user's, without privilege), or no writer of the directory
//!   ever seen here (the writers run in another pid namespace: a sidecar
//!   container without a shared process namespace).
//!   Liveness is then *unknown*, said once in the log and on the status
//!   page, and everything is served as Python's collector serves it: every
//!   file read on every scrape, no live gauge left out, nothing folded or
//!   reaped.
//!
//! Walks run off the scrape path, on the maintenance thread
//! ([`Liveness::run_due`]): when a collection asks about a file no walk has
//! answered for yet, when a file held in the last walk is no longer (the
//! held files are asked about again each second), to confirm a file found
//! free once, and every ten seconds regardless. Scrapes only read the last
//! walk's answer.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use multiprom_collector::{WriterLiveness, WrittenFile};
use multiprom_format::{FileIdentity, LeaseProbe, WriteLease};

use crate::process::{holders, last_allocated_pid, Holders};

/// How often the maintenance thread looks whether a walk is due.
const TICK: Duration = Duration::from_secs(1);

/// The shortest time between two walks asked for by collections.
const MIN_GAP: Duration = Duration::from_secs(1);

/// Every file is walked for at least this often, asked for or not.
const RECHECK: Duration = Duration::from_secs(10);

/// Whether the writers of a directory's files can be told apart from
/// writers that are gone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LivenessState {
    /// No walk yet: nothing is gone.
    #[default]
    NotWalked,
    /// The last walk saw every process that could hold a file.
    Known {
        /// Files some process holds for writing.
        held: usize,
        /// Files no process holds (by `/proc`: in the last two walks).
        free: usize,
    },
    /// Holders cannot be seen: nothing is taken for gone.
    Unknown(UnknownLiveness),
}

impl LivenessState {
    /// Whether files can be taken for gone.
    #[must_use]
    pub const fn is_known(&self) -> bool {
        matches!(self, LivenessState::Known { .. })
    }
}

impl fmt::Display for LivenessState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LivenessState::NotWalked => f.write_str("not looked at yet"),
            LivenessState::Known { held, free } => write!(
                f,
                "known: {held} file(s) held by a writer, {free} whose writer is gone"
            ),
            LivenessState::Unknown(why) => write!(f, "liveness unknown: {why}"),
        }
    }
}

/// Why the holders of a directory's files cannot be seen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UnknownLiveness {
    /// No usable `/proc`.
    #[error("/proc is not readable here, so there is no telling which processes hold the files")]
    NoProc,
    /// The directory is on a network file system.
    #[error(
        "the directory is on a network file system ({0}): writers on other machines cannot be seen"
    )]
    NetworkFileSystem(&'static str),
    /// Some processes' files and maps cannot be read.
    #[error("{processes} process(es), pid {example} among them, cannot be inspected (their /proc/<pid>/fd or maps is not readable) and may hold any file: run multiprom as the workers' user or as root")]
    Uninspectable {
        /// How many.
        processes: usize,
        /// One of them.
        example: u32,
    },
    /// No process visible here has ever held a file of the directory.
    #[error("no process visible here has held any of its {files} file(s) for writing: the writers may run in another pid namespace (container) or have all exited")]
    WritersNotSeen {
        /// Files in the directory.
        files: usize,
    },
}

/// What the last walk found.
#[derive(Debug)]
struct View {
    /// When it began; `None` before the first.
    started: Option<Instant>,
    state: LivenessState,
    /// Files held for writing, each with a process holding it where the
    /// walk looked through `/proc` for it.
    held: HashMap<FileIdentity, Option<u32>>,
    /// Files no process held in this walk and the one before.
    free: HashSet<FileIdentity>,
    /// Their paths, as the walk listed them.
    free_paths: HashSet<PathBuf>,
}

impl View {
    fn not_walked() -> Self {
        View {
            started: None,
            state: LivenessState::NotWalked,
            held: HashMap::new(),
            free: HashSet::new(),
            free_paths: HashSet::new(),
        }
    }
}

/// What only the walks themselves use.
#[derive(Debug, Default)]
struct Walker {
    last_walk: Option<Instant>,
    /// A writer of the directory has been seen here: its writers run where
    /// this process can see them.
    writer_seen: bool,
    /// Files free in the last walk (free in the next one too, they are gone).
    free_once: HashSet<FileIdentity>,
    /// Files free in the last walk for the first time: the next walk, soon,
    /// confirms them.
    unconfirmed: bool,
    /// The files held in the last walk that the kernel answered for: asked
    /// about again each tick, to notice their writers' exit.
    held_leased: Vec<FileIdentity>,
    /// Each file of the directory, open read-only to ask the kernel about
    /// its writers again and again without opening it again (an open would
    /// raise an event the collector takes for a writer coming back).
    probes: HashMap<FileIdentity, LeaseProbe>,
    /// What was last logged, so each change is logged once.
    logged: Option<LivenessState>,
}

/// Which writers of one directory are gone, by who holds their files (see
/// the module docs). Shared (`Arc`) between the maintenance thread, which
/// walks ([`Liveness::run_due`]), and the collector, which asks
/// ([`WriterLiveness::gone`]).
///
/// Making one touches nothing; until its first walk nothing is gone.
pub struct Liveness {
    dir: PathBuf,
    view: ArcSwap<View>,
    generation: AtomicU64,
    /// A collection asked about a file no walk has answered for.
    wanted: AtomicBool,
    walker: Mutex<Walker>,
}

impl fmt::Debug for Liveness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Liveness")
            .field("dir", &self.dir)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl Liveness {
    /// The liveness of the writers of `dir`'s files. Touches nothing.
    #[must_use]
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Liveness {
            dir: dir.into(),
            view: ArcSwap::from_pointee(View::not_walked()),
            generation: AtomicU64::new(0),
            wanted: AtomicBool::new(false),
            walker: Mutex::new(Walker::default()),
        }
    }

    /// Takes the directory's writers as visible from here without having
    /// seen one (with `yes`), for a host that started them itself in its
    /// own pid namespace: otherwise files are taken for gone only once some
    /// process here has been seen holding one of them (see
    /// [`UnknownLiveness::WritersNotSeen`]).
    #[must_use]
    pub fn assume_writers_visible(mut self, yes: bool) -> Self {
        self.walker
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .writer_seen |= yes;
        self
    }

    /// The directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What the last walk found.
    #[must_use]
    pub fn state(&self) -> LivenessState {
        self.view.load().state.clone()
    }

    /// Whether the last walk found the file at `path` (as it listed it)
    /// free of writers, twice: its writer is gone.
    #[must_use]
    pub fn is_free_path(&self, path: &Path) -> bool {
        self.view.load().free_paths.contains(path)
    }

    /// Whether `file` was held for writing in the last walk, and by which
    /// process where the walk looked through `/proc` for it: `None` if not
    /// held (or not walked), `Some(None)` if held, holder not looked for.
    #[must_use]
    pub fn holder(&self, file: &FileIdentity) -> Option<Option<u32>> {
        self.view.load().held.get(file).copied()
    }

    /// Walks now if a walk is due, and returns when to call again. Blocks
    /// for as long as the walk takes (a `/proc` listing and a read of every
    /// process's maps and fds): call it from a maintenance thread, never
    /// from one that answers requests.
    pub fn run_due(&self) -> Instant {
        let mut walker = self.walker.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let due = match walker.last_walk {
            None => true,
            Some(at) => {
                let since = now.saturating_duration_since(at);
                since >= RECHECK
                    || (since >= MIN_GAP
                        && (walker.unconfirmed
                            || self.wanted.swap(false, Ordering::AcqRel)
                            || walker.held_leased.iter().any(|id| {
                                walker.probes.get(id).is_none_or(|probe| {
                                    !matches!(probe.writers(), WriteLease::Writer)
                                })
                            })))
            }
        };
        if due {
            self.walk(&mut walker, now);
        }
        Instant::now() + TICK
    }

    /// Walks now, whatever the schedule.
    pub fn walk_now(&self) {
        let mut walker = self.walker.lock().unwrap_or_else(PoisonError::into_inner);
        self.walk(&mut walker, Instant::now());
    }

    fn walk(&self, walker: &mut Walker, started: Instant) {
        walker.last_walk = Some(started);
        self.wanted.store(false, Ordering::Release);
        let view = match self.look(walker, started) {
            Ok(view) => view,
            Err(why) => {
                walker.free_once.clear();
                walker.unconfirmed = false;
                walker.held_leased.clear();
                walker.probes.clear();
                View {
                    started: Some(started),
                    state: LivenessState::Unknown(why),
                    ..View::not_walked()
                }
            }
        };
        log_change(&self.dir, &mut walker.logged, &view.state);
        self.view.store(Arc::new(view));
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// One walk: the directory's `*.db` files, and which are held.
    fn look(&self, walker: &mut Walker, started: Instant) -> Result<View, UnknownLiveness> {
        if let Some(kind) = network_file_system(&self.dir) {
            return Err(UnknownLiveness::NetworkFileSystem(kind));
        }
        // A directory that cannot be listed has nothing to take for gone.
        let listing = multiprom_format::scan_dir(&self.dir).unwrap_or_default();
        let mut held: HashMap<FileIdentity, Option<u32>> = HashMap::new();
        let mut held_leased = Vec::new();
        // Free by the kernel's word: at once (see the module docs).
        let mut free_now: HashMap<FileIdentity, PathBuf> = HashMap::new();
        // Free as `/proc` shows it: once confirmed by the next look.
        let mut free_in_proc: HashMap<FileIdentity, PathBuf> = HashMap::new();
        let mut unanswered: Vec<(PathBuf, FileIdentity)> = Vec::new();
        let mut probes = HashMap::with_capacity(listing.len());
        for path in listing {
            let Ok(id) = FileIdentity::of(&path) else {
                continue; // vanished
            };
            let probe = match walker.probes.remove(&id) {
                Some(probe) => probe,
                // Out of descriptors, say: `/proc` answers for it instead.
                None => match LeaseProbe::open(&path) {
                    Ok(probe) => probe,
                    Err(_) => {
                        unanswered.push((path, id));
                        continue;
                    }
                },
            };
            let answer = probe.writers();
            probes.insert(id, probe);
            match answer {
                WriteLease::Writer => {
                    held.insert(id, None);
                    held_leased.push(id);
                }
                WriteLease::NoWriter => {
                    free_now.insert(id, path);
                }
                WriteLease::Unknown(_) => unanswered.push((path, id)),
            }
        }
        // Files no longer listed are let go (their space with them).
        walker.probes = probes;
        if !held.is_empty() {
            walker.writer_seen = true;
        }
        if !unanswered.is_empty() {
            let found = self.look_through_proc(walker, &unanswered)?;
            for (path, id) in unanswered {
                match found.held.get(&id) {
                    Some(&pid) => {
                        held.insert(id, Some(pid));
                    }
                    None => {
                        free_in_proc.insert(id, path);
                    }
                }
            }
        }
        let confirmed: Vec<FileIdentity> = free_in_proc
            .keys()
            .filter(|id| walker.free_once.contains(id))
            .copied()
            .collect();
        walker.unconfirmed = free_in_proc.len() > confirmed.len();
        walker.free_once = free_in_proc.keys().copied().collect();
        walker.held_leased = held_leased;
        for id in confirmed {
            if let Some(path) = free_in_proc.remove(&id) {
                free_now.insert(id, path);
            }
        }
        let free: HashSet<FileIdentity> = free_now.keys().copied().collect();
        let free_paths = free_now.into_values().collect();
        Ok(View {
            started: Some(started),
            state: LivenessState::Known {
                held: held.len(),
                free: free.len(),
            },
            held,
            free,
            free_paths,
        })
    }

    /// Who holds the files the kernel would not answer for, from every
    /// process's maps and fds: only where every process that might hold
    /// one can be looked at, and some writer of the directory has been seen
    /// from here (else the writers may run where `/proc` does not show
    /// them).
    fn look_through_proc(
        &self,
        walker: &mut Walker,
        files: &[(PathBuf, FileIdentity)],
    ) -> Result<Holders, UnknownLiveness> {
        if last_allocated_pid().is_none() || std::fs::read_dir("/proc/self/fd").is_err() {
            return Err(UnknownLiveness::NoProc);
        }
        let ids: HashSet<FileIdentity> = files.iter().map(|(_, id)| *id).collect();
        let found = holders(&ids).map_err(|_| UnknownLiveness::NoProc)?;
        if found.uninspectable > 0 {
            let example = found.uninspectable_pids.iter().min().copied().unwrap_or(0);
            return Err(UnknownLiveness::Uninspectable {
                processes: found.uninspectable,
                example,
            });
        }
        walker.writer_seen |= !found.held.is_empty();
        if !walker.writer_seen {
            return Err(UnknownLiveness::WritersNotSeen { files: files.len() });
        }
        Ok(found)
    }
}

impl WriterLiveness for Liveness {
    fn gone(&self, file: &WrittenFile<'_>) -> bool {
        let view = self.view.load();
        let answered = view.state.is_known() && view.started.is_some_and(|at| file.since < at);
        if answered && view.free.contains(&file.identity) {
            return true;
        }
        if !answered || !view.held.contains_key(&file.identity) {
            // Not held as of the last walk, but not proven free either (new,
            // touched since, or free once): the next walk will tell.
            self.wanted.store(true, Ordering::Release);
        }
        false
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn look_again(&self) {
        self.wanted.store(true, Ordering::Release);
    }
}

impl Liveness {
    /// This liveness as the rule a collector settles files and leaves live
    /// gauges out by (`DirCollector::settle_exited_writers`).
    #[must_use]
    pub fn for_collector(self: &Arc<Self>) -> impl WriterLiveness + Clone + 'static {
        SharedLiveness(Arc::clone(self))
    }
}

/// A shared [`Liveness`] as a [`WriterLiveness`].
#[derive(Debug, Clone)]
struct SharedLiveness(Arc<Liveness>);

impl WriterLiveness for SharedLiveness {
    fn gone(&self, file: &WrittenFile<'_>) -> bool {
        self.0.gone(file)
    }

    fn generation(&self) -> u64 {
        self.0.generation()
    }

    fn look_again(&self) {
        self.0.look_again();
    }
}

/// Logs a change of state: unknown with why (a warning: the directory is
/// served as Python's collector serves it), and known again.
fn log_change(dir: &Path, logged: &mut Option<LivenessState>, state: &LivenessState) {
    let was_known = logged.as_ref().map(LivenessState::is_known);
    match state {
        LivenessState::Unknown(why) if !matches!(logged, Some(LivenessState::Unknown(last)) if last == why) =>
        {
            tracing::warn!(
                "{}: liveness unknown: {why}; every file is read on every scrape, no live gauge is left out and nothing is folded or reaped, as with Python's collector",
                dir.display()
            );
        }
        LivenessState::Known { .. } if was_known != Some(true) => {
            tracing::info!(
                "{}: the writers of its files are visible here: files no process holds are read once more, then only when they change",
                dir.display()
            );
        }
        _ => {}
    }
    *logged = Some(state.clone());
}

/// The kind of network file system `dir` is on, by `statfs` magic number.
fn network_file_system(dir: &Path) -> Option<&'static str> {
    let stat = rustix::fs::statfs(dir).ok()?;
    // From linux/magic.h and the file systems' own sources.
    #[allow(clippy::unreadable_literal)]
    let kind = match stat.f_type as i64 as u32 {
        0x6969 => "NFS",
        0x517B => "SMB",
        0xFF534D42 => "CIFS",
        0xFE534D42 => "SMB2",
        0x00C36400 => "Ceph",
        0x01021997 => "9p",
        0x65735546 => "FUSE",
        0x47504653 => "GPFS",
        0x0BD00BD0 => "Lustre",
        0x6B414653 => "AFS",
        _ => return None,
    };
    Some(kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::TestHolder;
    use multiprom_format::FileName;

    fn gone(liveness: &Liveness, path: &Path, since: Instant) -> bool {
        let name = FileName::parse(path.file_name().unwrap().to_str().unwrap()).unwrap();
        liveness.gone(&WrittenFile {
            name: &name,
            identity: FileIdentity::of(path).unwrap(),
            since,
        })
    }

    #[test]
    fn a_file_is_gone_once_the_kernel_says_no_process_writes_it_whatever_its_name() {
        let dir = tempfile::tempdir().unwrap();
        // Named after this test's own live pid: the name is no evidence.
        let named_alive = dir
            .path()
            .join(format!("counter_{}.db", std::process::id()));
        let held = dir.path().join("counter_900001.db");
        let read = dir.path().join("counter_3.db");
        for path in [&named_alive, &held, &read] {
            std::fs::write(path, [0u8; 4096]).unwrap();
        }
        let liveness = Liveness::new(dir.path());
        let before = Instant::now();
        // Nothing is gone before a look.
        assert!(!gone(&liveness, &named_alive, before));
        let writer = TestHolder::start(&[&held], &[]);
        let reader = TestHolder::reading(&[&read], &[&read]);
        liveness.walk_now();
        assert!(gone(&liveness, &named_alive, before));
        assert!(gone(&liveness, &read, before), "a reader is no writer");
        assert!(!gone(&liveness, &held, before), "a live writer's file");
        assert_eq!(liveness.state(), LivenessState::Known { held: 1, free: 2 });
        // Something happened to the file after the last look began: only a
        // later look answers for it.
        assert!(!gone(&liveness, &named_alive, Instant::now()));
        drop(writer);
        drop(reader);
        assert!(!gone(&liveness, &held, before), "no look since");
        liveness.walk_now();
        assert!(gone(&liveness, &held, before), "its writer exited");
        assert!(liveness.is_free_path(&held));
    }

    #[test]
    fn the_held_files_are_asked_about_each_tick_and_their_release_brings_a_look() {
        let dir = tempfile::tempdir().unwrap();
        let held = dir.path().join("counter_1.db");
        std::fs::write(&held, [0u8; 4096]).unwrap();
        let liveness = Liveness::new(dir.path());
        let writer = TestHolder::start(&[&held], &[]);
        liveness.run_due();
        let generation = liveness.generation();
        // Within the minimum gap, nothing is due.
        liveness.run_due();
        assert_eq!(liveness.generation(), generation);
        std::thread::sleep(MIN_GAP);
        liveness.run_due();
        assert_eq!(liveness.generation(), generation, "still held: no look");
        drop(writer);
        liveness.run_due();
        assert_eq!(liveness.generation(), generation + 1, "released: a look");
    }
}
