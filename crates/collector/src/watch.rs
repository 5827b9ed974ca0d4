//! Knowing when a directory changed without looking at it: an inotify watch
//! on the directory, read by the collection itself.
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
//! The kernel queues an inotify event in the system call that caused it, so
//! a non-blocking read of the descriptor at the start of a collection
//! returns every event about the directory made before it: one `read` when
//! nothing happened. No thread reads the queue in between, so nothing is
//! handed from thread to thread on a poll, and the queue is bounded by the
//! kernel (`fs.inotify.max_queued_events`); past it the kernel reports an
//! overflow.
//!
//! The exemplar subdirectory can be watched too ([`DirWatch::watch_subdir`]):
//! a collector that keeps live workers' exemplar files mapped learns so of
//! one replaced, rewritten or removed under its map. Opens there are not
//! reported: nothing waits for one.
//!
//! When the watch cannot be set (a network file system, no inotify
//! instances left), events were lost (the queue overflowed) or the
//! directory itself was removed or moved, the collector lists the directory
//! and looks at every file (a `stat` each) instead: correct, only slower.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

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
    /// Names in the watched subdirectory whose files were touched, added,
    /// removed or renamed.
    pub subdir_touched: HashSet<OsString>,
    /// The subdirectory's watch ended (it was removed or moved, or events
    /// were lost): what is known of its files is to be forgotten.
    pub subdir_unwatched: bool,
}

/// What the watch asks the kernel to report. Closes are left out: they
/// change nothing a collection reads.
const WATCHED: WatchFlags = WatchFlags::ATTRIB
    .union(WatchFlags::CREATE)
    .union(WatchFlags::OPEN)
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MODIFY)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF);

/// What the watch of a subdirectory asks the kernel to report.
const SUBDIR_WATCHED: WatchFlags = WATCHED.difference(WatchFlags::OPEN);

/// Room for a few hundred events per `read`; any event fits (a name is at
/// most 255 bytes).
const BUFFER: usize = 16 * 1024;

/// A watch on one directory.
pub(crate) struct DirWatch {
    inotify: OwnedFd,
    buffer: Box<[MaybeUninit<u8>]>,
    /// The watch descriptor of the watched subdirectory, if one is.
    subdir: Option<i32>,
}

impl std::fmt::Debug for DirWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirWatch").finish_non_exhaustive()
    }
}

impl DirWatch {
    /// Starts watching `dir`. Everything that happens from now on is
    /// reported; the caller lists the directory once after this returns.
    pub(crate) fn new(dir: &Path) -> std::io::Result<DirWatch> {
        let inotify = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        inotify::add_watch(&inotify, dir, WATCHED)?;
        Ok(DirWatch {
            inotify,
            buffer: Box::new_uninit_slice(BUFFER),
            subdir: None,
        })
    }

    /// Watches `subdir` (a subdirectory of the watched directory) too, if it
    /// is not watched already; whether it is now. Events about its files
    /// come in [`Changes::subdir_touched`].
    pub(crate) fn watch_subdir(&mut self, subdir: &Path) -> bool {
        if self.subdir.is_none() {
            self.subdir = inotify::add_watch(&self.inotify, subdir, SUBDIR_WATCHED).ok();
        }
        self.subdir.is_some()
    }

    /// Everything that happened before this call and since the last one.
    pub(crate) fn take(&mut self) -> Changes {
        let mut changes = Changes::default();
        let mut reader = inotify::Reader::new(&self.inotify, &mut self.buffer);
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(Errno::AGAIN) => break,
                Err(Errno::INTR) => continue,
                Err(_) => {
                    changes.everything = true;
                    changes.subdir_unwatched = true;
                    break;
                }
            };
            let flags = event.events();
            let name = event.file_name().map(|n| OsStr::from_bytes(n.to_bytes()));
            if self.subdir.is_some() && self.subdir == Some(event.wd()) {
                let ended = ReadFlags::IGNORED
                    | ReadFlags::UNMOUNT
                    | ReadFlags::DELETE_SELF
                    | ReadFlags::MOVE_SELF;
                if flags.intersects(ended) {
                    // Removed by the kernel with the directory, or to be.
                    if flags.contains(ReadFlags::IGNORED) {
                        self.subdir = None;
                    }
                    changes.subdir_unwatched = true;
                } else if let Some(name) = name.filter(|n| !n.is_empty()) {
                    changes.subdir_touched.insert(name.to_owned());
                }
                continue;
            }
            if flags.intersects(
                ReadFlags::QUEUE_OVERFLOW
                    | ReadFlags::IGNORED
                    | ReadFlags::UNMOUNT
                    | ReadFlags::DELETE_SELF
                    | ReadFlags::MOVE_SELF,
            ) {
                // Lost events, or the directory (and the watch with it) is
                // gone: the caller sets a new watch and looks at everything.
                changes.everything = true;
                continue;
            }
            let Some(name) = name.filter(|n| !n.is_empty()) else {
                // About the directory itself: opened (listed by anyone,
                // this collector too) changes nothing; its own attributes
                // changing (a `chmod`, say) is looked at in full.
                if !flags.contains(ReadFlags::OPEN) {
                    changes.everything = true;
                }
                continue;
            };
            if flags.contains(ReadFlags::OPEN) {
                // An open may be a writer's (whose writes through its map
                // raise no event): a settled file is read again.
                changes.opened.insert(name.to_owned());
                continue;
            }
            if flags.intersects(
                ReadFlags::CREATE | ReadFlags::DELETE | ReadFlags::MOVED_FROM | ReadFlags::MOVED_TO,
            ) {
                changes.relist = true;
            }
            changes.touched.insert(name.to_owned());
        }
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directory_moved_away_is_seen_when_named_relatively() {
        // A directory named relative to the working directory (the crate's,
        // under cargo test).
        let dir = tempfile::tempdir_in(".").unwrap();
        let relative = Path::new(dir.path().file_name().unwrap());
        let mut watch = DirWatch::new(relative).unwrap();
        assert!(!watch.take().everything);
        let moved = dir.path().with_extension("moved");
        std::fs::rename(dir.path(), &moved).unwrap();
        let changes = watch.take();
        std::fs::rename(&moved, dir.path()).unwrap();
        assert!(changes.everything, "{:?}", changes.touched);
    }

    #[test]
    fn sees_changes_made_before_take() {
        let dir = tempfile::tempdir().unwrap();
        let mut watch = DirWatch::new(dir.path()).unwrap();
        let first = watch.take();
        assert!(!first.everything);
        std::fs::write(dir.path().join("counter_1.db"), b"x").unwrap();
        let changes = watch.take();
        assert!(!changes.everything);
        assert!(changes.relist);
        assert!(changes
            .touched
            .contains(std::ffi::OsStr::new("counter_1.db")));
        assert!(changes
            .opened
            .contains(std::ffi::OsStr::new("counter_1.db")));
        let quiet = watch.take();
        assert!(!quiet.relist && !quiet.everything && quiet.touched.is_empty());
    }

    #[test]
    fn an_open_is_reported_apart_from_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gauge_all_1.db");
        std::fs::write(&path, b"x").unwrap();
        let mut watch = DirWatch::new(dir.path()).unwrap();
        drop(std::fs::File::open(&path).unwrap());
        let _ = std::fs::read_dir(dir.path()).unwrap().count();
        let changes = watch.take();
        assert!(!changes.everything && !changes.relist);
        assert!(changes.touched.is_empty(), "{:?}", changes.touched);
        assert!(changes
            .opened
            .contains(std::ffi::OsStr::new("gauge_all_1.db")));
    }

    #[test]
    fn a_watched_subdirectory_reports_its_files_apart() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("exemplars");
        let mut watch = DirWatch::new(dir.path()).unwrap();
        assert!(!watch.watch_subdir(&sub), "no such subdirectory yet");
        std::fs::create_dir(&sub).unwrap();
        assert!(watch.take().relist);
        assert!(watch.watch_subdir(&sub));
        let file = sub.join("counter_1.exemplars");
        std::fs::write(&file, b"x").unwrap();
        drop(std::fs::File::open(&file).unwrap());
        let changes = watch.take();
        assert!(!changes.everything && !changes.relist && !changes.subdir_unwatched);
        assert!(changes.touched.is_empty() && changes.opened.is_empty());
        assert_eq!(
            changes.subdir_touched,
            HashSet::from([OsString::from("counter_1.exemplars")])
        );
        // Opens alone are not reported there.
        drop(std::fs::File::open(&file).unwrap());
        assert!(watch.take().subdir_touched.is_empty());

        std::fs::remove_file(&file).unwrap();
        std::fs::remove_dir(&sub).unwrap();
        let changes = watch.take();
        assert!(changes.subdir_unwatched && !changes.everything);
        assert!(!watch.watch_subdir(&sub), "the watch ended with it");
    }

    #[test]
    fn a_full_queue_asks_for_everything() {
        let dir = tempfile::tempdir().unwrap();
        let mut watch = DirWatch::new(dir.path()).unwrap();
        let limit: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(16384);
        let path = dir.path().join("counter_1.db");
        std::fs::write(&path, b"x").unwrap();
        // Each open is an event (the kernel merges only identical
        // events in a row, so an open and a write alternate).
        for _ in 0..=limit {
            drop(std::fs::File::open(&path).unwrap());
            std::fs::write(&path, b"y").unwrap();
        }
        assert!(watch.take().everything);
        assert!(!watch.take().everything, "the queue is read empty");
    }
}
