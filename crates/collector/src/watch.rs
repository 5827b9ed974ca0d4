//! Knowing when a directory changed without looking at it: inotify (through
//! `notify`) on the directory.
//!
//! Workers write values through their maps, which raises no event; creating,
//! sizing, growing, truncating, rewriting, renaming and removing a file do.
//! So between events the directory's listing (and so the merge order) is
//! unchanged and every file is as it was apart from its values and appended
//! entries, which a warm scrape reads from the maps anyway. An event about a
//! name makes the next scrape look at that file again; an event that adds or
//! removes a name makes it list the directory again.
//!
//! Opens are reported too (this process's among them): a file whose writer
//! is gone is not read again until something opens it (see
//! `DirCollector::settle_exited_writers`), since a new writer must open a
//! file before it can map it.
//!
//! Events reach `notify`'s thread a moment after the change. So that a
//! scrape sees every change made before it started, each [`DirWatch::take`]
//! first touches a private sentinel file watched by the same inotify
//! instance and waits for that event: one inotify queue is delivered in
//! order, so once the sentinel's event has arrived, so has every earlier
//! event about the directory.
//!
//! The sentinel lives in a directory of its own under the temporary
//! directory (`$TMPDIR`, else `/tmp`), removed when the watch is dropped. A
//! process killed with SIGKILL cannot remove it; so that such directories do
//! not pile up (gunicorn kills workers that time out), the owner holds an
//! `flock` on its sentinel for as long as it lives, and every new watch
//! removes the sentinel directories whose lock is free (the owner is gone)
//! and which are more than a minute old (older than any owner that has not
//! taken its lock yet).
//!
//! When the watch cannot be set (a network file system, no inotify
//! instances left), events were lost (the kernel queue overflowed) or the
//! sentinel's event does not come in time, the collector lists the
//! directory and looks at every file (a `stat` each) instead: correct, only
//! slower.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime};

use rustix::fs::{flock, FlockOperation};

use notify::event::{AccessKind, EventKind, ModifyKind};
use notify::{RecommendedWatcher, RecursiveMode, Watcher};

/// What happened since the last look.
#[derive(Debug, Default)]
pub(crate) struct Changes {
    /// Names were added, removed or renamed: list the directory again.
    pub relist: bool,
    /// Events may have been lost, or the directory itself went away: list
    /// it and look at every file.
    pub everything: bool,
    /// Names whose files were touched (sized, truncated, written, replaced).
    pub touched: HashSet<OsString>,
    /// Names whose files were opened (by anyone: this process too).
    pub opened: HashSet<OsString>,
}

/// Events so far, and how many sentinel events arrived.
#[derive(Debug, Default)]
struct EventsSoFar {
    changes: Changes,
    barriers: u64,
}

/// How long a scrape waits for its sentinel event before looking at
/// everything instead.
const BARRIER_WAIT: Duration = Duration::from_millis(200);

/// Names of sentinel directories in the temporary directory start so.
const SENTINEL_DIR_PREFIX: &str = "multiprom-watch-";

/// A sentinel directory whose lock is free is removed only when it is older
/// than this: its owner creates and locks the sentinel within microseconds.
const ABANDONED_AFTER: Duration = Duration::from_secs(60);

/// Removes the sentinel directories under `temp` that no live process
/// holds: the lock on their sentinel is free and they are old enough.
/// Anything unexpected (not a directory, no sentinel, unreadable) is left.
fn remove_abandoned_sentinels(temp: &Path) {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with(SENTINEL_DIR_PREFIX) {
            continue;
        }
        let dir = entry.path();
        let old_enough = entry
            .metadata()
            .ok()
            .filter(std::fs::Metadata::is_dir)
            .and_then(|m| m.modified().ok())
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|age| age > ABANDONED_AFTER);
        if !old_enough {
            continue;
        }
        let Ok(sentinel) = File::open(dir.join("sentinel")) else {
            continue;
        };
        if flock(&sentinel, FlockOperation::NonBlockingLockExclusive).is_ok() {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

/// A watch on one directory.
pub(crate) struct DirWatch {
    shared: Arc<(Mutex<EventsSoFar>, Condvar)>,
    sentinel: File,
    // Kept alive: dropping them stops the watch and removes the sentinel.
    _watcher: RecommendedWatcher,
    _sentinel_dir: tempfile::TempDir,
}

impl std::fmt::Debug for DirWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirWatch").finish_non_exhaustive()
    }
}

impl DirWatch {
    /// Starts watching `dir`. Everything that happens from now on is
    /// reported; the caller lists the directory once after this returns.
    pub(crate) fn new(dir: &Path) -> notify::Result<DirWatch> {
        remove_abandoned_sentinels(&std::env::temp_dir());
        let sentinel_dir = tempfile::Builder::new()
            .prefix(SENTINEL_DIR_PREFIX)
            .tempdir()
            .map_err(notify::Error::io)?;
        let sentinel_path = sentinel_dir.path().join("sentinel");
        let sentinel = File::create(&sentinel_path).map_err(notify::Error::io)?;
        // Held while this process (or a child it forked, which inherits the
        // descriptor) lives: the directory is in use. Where the file system
        // has no locks, nobody can take this one either, so nothing removes
        // the directory early; it is merely left behind after a SIGKILL.
        let _ = flock(&sentinel, FlockOperation::NonBlockingLockExclusive);
        let shared = Arc::new((Mutex::new(EventsSoFar::default()), Condvar::new()));
        let sink = Arc::clone(&shared);
        // notify reports absolute paths (it joins a relative one to the
        // working directory), so the directory is known by its absolute
        // path, or an event about it would be taken for one of its files.
        let watched = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        let marker: PathBuf = sentinel_path.clone();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let (lock, arrived) = &*sink;
                let mut shared = lock
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Ok(event) = &event {
                    if event.paths.contains(&marker) {
                        // Setting only the modification time is reported as a
                        // modification (IN_MODIFY), not as IN_ATTRIB.
                        if matches!(event.kind, EventKind::Modify(_)) {
                            shared.barriers += 1;
                            arrived.notify_all();
                        }
                        return;
                    }
                }
                let changes = &mut shared.changes;
                let event = match event {
                    Ok(event) => event,
                    Err(_) => {
                        changes.everything = true;
                        return;
                    }
                };
                if event.need_rescan() {
                    changes.everything = true;
                    return;
                }
                match event.kind {
                    // An open may be a writer's (whose writes through its
                    // map raise no event): a settled file is read again.
                    EventKind::Access(AccessKind::Open(_)) => {
                        for path in &event.paths {
                            if let Some(name) = path.file_name() {
                                changes.opened.insert(name.to_owned());
                            }
                        }
                        return;
                    }
                    // Closes change nothing.
                    EventKind::Access(_) => return,
                    EventKind::Create(_)
                    | EventKind::Remove(_)
                    | EventKind::Modify(ModifyKind::Name(_)) => {
                        changes.relist = true;
                    }
                    EventKind::Modify(_) => {}
                    EventKind::Any | EventKind::Other => changes.everything = true,
                }
                for path in &event.paths {
                    match path.file_name() {
                        // An event about the directory itself (removed, moved):
                        // the watch is gone with it.
                        _ if *path == watched => changes.everything = true,
                        Some(name) => {
                            changes.touched.insert(name.to_owned());
                        }
                        None => changes.everything = true,
                    }
                }
            })?;
        watcher.watch(dir, RecursiveMode::NonRecursive)?;
        watcher.watch(&sentinel_path, RecursiveMode::NonRecursive)?;
        Ok(DirWatch {
            shared,
            sentinel,
            _watcher: watcher,
            _sentinel_dir: sentinel_dir,
        })
    }

    /// Everything that happened before this call and since the last one.
    pub(crate) fn take(&self) -> Changes {
        let (lock, arrived) = &*self.shared;
        let mut shared = lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let wanted = shared.barriers + 1;
        // Any change of its times raises an event, whatever the value.
        let barrier_sent = self.sentinel.set_modified(SystemTime::now()).is_ok();
        let mut in_time = false;
        if barrier_sent {
            let (guard, _) = arrived
                .wait_timeout_while(shared, BARRIER_WAIT, |s| s.barriers < wanted)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            shared = guard;
            in_time = shared.barriers >= wanted;
        }
        let mut changes = std::mem::take(&mut shared.changes);
        if !in_time {
            changes.everything = true;
        }
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sentinel directory under `temp`, dated `age` back; the sentinel
    /// file is returned open, for a test to lock.
    fn sentinel_dir(temp: &Path, name: &str, age: Duration) -> File {
        let dir = temp.join(name);
        std::fs::create_dir(&dir).unwrap();
        let sentinel = File::create(dir.join("sentinel")).unwrap();
        File::open(&dir)
            .unwrap()
            .set_modified(SystemTime::now() - age)
            .unwrap();
        sentinel
    }

    #[test]
    fn removes_only_old_unlocked_sentinel_directories() {
        let temp = tempfile::tempdir().unwrap();
        let old = Duration::from_secs(3600);
        drop(sentinel_dir(temp.path(), "multiprom-watch-gone", old));
        let live = sentinel_dir(temp.path(), "multiprom-watch-live", old);
        flock(&live, FlockOperation::NonBlockingLockExclusive).unwrap();
        drop(sentinel_dir(
            temp.path(),
            "multiprom-watch-young",
            Duration::ZERO,
        ));
        drop(sentinel_dir(temp.path(), "something-else", old));
        std::fs::create_dir(temp.path().join("multiprom-watch-empty")).unwrap();
        remove_abandoned_sentinels(temp.path());
        let mut left: Vec<String> = std::fs::read_dir(temp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "multiprom-watch-empty",
                "multiprom-watch-live",
                "multiprom-watch-young",
                "something-else"
            ]
        );
        drop(live);
    }

    #[test]
    fn a_watch_holds_the_lock_on_its_sentinel() {
        let dir = tempfile::tempdir().unwrap();
        let watch = DirWatch::new(dir.path()).unwrap();
        let other = File::open(watch._sentinel_dir.path().join("sentinel")).unwrap();
        assert!(flock(&other, FlockOperation::NonBlockingLockExclusive).is_err());
        drop(watch);
    }

    #[test]
    fn the_directory_moved_away_is_seen_when_named_relatively() {
        // A directory named relative to the working directory (the crate's,
        // under cargo test).
        let dir = tempfile::tempdir_in(".").unwrap();
        let relative = Path::new(dir.path().file_name().unwrap());
        let watch = DirWatch::new(relative).unwrap();
        assert!(!watch.take().everything, "the barrier event did not arrive");
        let moved = dir.path().with_extension("moved");
        std::fs::rename(dir.path(), &moved).unwrap();
        let changes = watch.take();
        std::fs::rename(&moved, dir.path()).unwrap();
        assert!(changes.everything, "{:?}", changes.touched);
    }

    #[test]
    fn sees_changes_made_before_take() {
        let dir = tempfile::tempdir().unwrap();
        let watch = DirWatch::new(dir.path()).unwrap();
        let first = watch.take();
        assert!(!first.everything, "the barrier event did not arrive");
        std::fs::write(dir.path().join("counter_1.db"), b"x").unwrap();
        let changes = watch.take();
        assert!(!changes.everything);
        assert!(changes.relist);
        assert!(changes
            .touched
            .contains(std::ffi::OsStr::new("counter_1.db")));
        let quiet = watch.take();
        assert!(!quiet.relist && !quiet.everything && quiet.touched.is_empty());
    }
}
