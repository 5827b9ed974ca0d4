//! Listing the directory: from the watch's events when nothing changed, else afresh.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::watch::{Changes, DirWatch};
use multiprom_format::scan_dir;

use super::exemplars::ExemplarState;
use super::exited::ExitedLive;
use super::file_entry::{path_bytes, FileEntry};
use super::file_table::FileTable;
use super::scrape::CollectError;

/// A listing, the files left out of it, and the rest.
type KeptListing = (Arc<Vec<PathBuf>>, Arc<HashSet<PathBuf>>, Arc<Vec<PathBuf>>);

/// The directory watch and what the listings of the last collections
/// were: what tells a collection whether it must list the directory afresh
/// and look at every file, or may go on from its last listing.
#[derive(Debug, Default)]
pub(super) struct Listing {
    /// The directory watch, when one could be set.
    pub(super) watch: Option<DirWatch>,
    /// The process that set `watch`.
    watch_pid: u32,
    /// When setting a watch last failed (it is tried again after a while).
    watch_failed: Option<Instant>,
    /// The listing as of the last change, in listing order.
    paths: Option<Arc<Vec<PathBuf>>>,
    /// Counts the times the directory was listed afresh: while it stays
    /// the same, the watch saw no name added, removed or renamed in the
    /// directory (so no subdirectory came or went either).
    pub(super) listings: u64,
    /// When every file was last looked at.
    last_full_look: Option<Instant>,
    /// The listing of the collection under way came with a full look.
    pub(super) full_look: bool,
    /// The listing of the collection under way came with no event and no
    /// look at every file: nothing but the files' values and appended
    /// entries can have changed since the last collection.
    pub(super) quiet_listing: bool,
    /// When the watch's events were last taken.
    events_taken_at: Option<Instant>,
    /// The paths of the last collection and their indexes in the file
    /// table: when the next collection has the very same paths (no event
    /// changed the listing), the lookups by path are skipped.
    last_paths: Option<(Arc<Vec<PathBuf>>, Vec<usize>)>,
    /// The last listing that had files left out, the files left out, and
    /// the rest: the same listing less the same files is the same listing.
    kept: Option<KeptListing>,
}

/// How often every file is looked at even when no event said it changed, as
/// a guard against anything a watch can miss.
pub(super) const RESYNC: Duration = Duration::from_secs(60);

/// A listing, and what the watch said happened since the last one.
pub(super) struct Listed {
    pub(super) paths: Arc<Vec<PathBuf>>,
    /// Every file is to be looked at (no watch, events missed, or the
    /// periodic resync).
    pub(super) full_look: bool,
    pub(super) changes: Changes,
    /// When the events were taken before these: opens this collector made
    /// since are among `changes.opened`.
    pub(super) last_take: Option<Instant>,
}

impl Listing {
    /// Keeps `order`, the index in the file table of each of `paths`, for
    /// the next collection.
    pub(super) fn keep_order(&mut self, paths: &Arc<Vec<PathBuf>>, order: Vec<usize>) {
        self.last_paths = Some((Arc::clone(paths), order));
    }

    /// The last collection's index in the file table of each of its paths,
    /// taken, when `paths` is its very listing (the same `Arc`): the
    /// lookups by path can be skipped.
    pub(super) fn take_last_order(&mut self, paths: &Arc<Vec<PathBuf>>) -> Option<Vec<usize>> {
        match self.last_paths.take() {
            Some((last, order)) if Arc::ptr_eq(&last, paths) => Some(order),
            _ => None,
        }
    }

    /// `listing` less the files of `left_out`. The same listing less the
    /// same files as last time is the same listing (the same `Arc`): a
    /// collection on it need not look every path up again, and can be a
    /// quiet one.
    pub(super) fn less(
        &mut self,
        listing: Arc<Vec<PathBuf>>,
        left_out: Arc<HashSet<PathBuf>>,
    ) -> Arc<Vec<PathBuf>> {
        let paths = match self.kept.take() {
            Some((last, left, kept))
                if Arc::ptr_eq(&last, &listing) && Arc::ptr_eq(&left, &left_out) =>
            {
                kept
            }
            _ => {
                let mut kept = Vec::clone(&listing);
                kept.retain(|p| !left_out.contains(p));
                Arc::new(kept)
            }
        };
        self.kept = Some((listing, left_out, Arc::clone(&paths)));
        paths
    }

    /// The listing of `dir`, from the watch's events when nothing changed,
    /// else from the directory, with the events. `collections`: how many
    /// collections came before this one.
    pub(super) fn list(
        &mut self,
        dir: &Path,
        now: Instant,
        collections: u64,
    ) -> Result<Listed, CollectError> {
        // A watch set before a fork (a collector made in a pre-fork
        // server's master) shares its inotify descriptor with the parent:
        // reading it would take the parent's events. Set a new one; dropping
        // the inherited one closes only this process's descriptor.
        let pid = std::process::id();
        if self.watch_pid != pid {
            self.watch = None;
            self.watch_pid = pid;
        }
        let changes = match &mut self.watch {
            Some(watch) => watch.take(),
            None => Changes {
                everything: true,
                ..Changes::default()
            },
        };
        // Opens this collector made since the last take are among `opened`.
        let last_take = self.events_taken_at.replace(now);
        if changes.everything {
            // Events were lost or the directory went away: start a new watch
            // (before listing, so nothing between the two is missed).
            self.watch = None;
            // A collector's first collection reads every file afresh with
            // `pread` (see `decide_maps`), so it needs no watch yet; the
            // second sets one before it lists, and reopens every file
            // anyway to map it. A collector used once (a process's first
            // scrape, `multiprom scrape`) so never pays for a watch, nor for
            // the event its every open of a file raises in one.
            let retry = collections > 0
                && self
                    .watch_failed
                    .is_none_or(|failed| now.saturating_duration_since(failed) >= RESYNC);
            if retry {
                match DirWatch::new(dir) {
                    Ok(watch) => {
                        self.watch = Some(watch);
                        self.watch_failed = None;
                    }
                    Err(_) => self.watch_failed = Some(now),
                }
            }
        }
        let full_look = changes.everything
            || self
                .last_full_look
                .is_none_or(|at| now.saturating_duration_since(at) >= RESYNC);
        let paths = match self.paths.take() {
            Some(listing) if !full_look && !changes.relist => listing,
            _ => match scan_dir(dir) {
                Ok(listing) => {
                    self.listings += 1;
                    Arc::new(listing)
                }
                Err(source) => {
                    self.watch = None;
                    return Err(CollectError {
                        dir: dir.to_path_buf(),
                        source,
                    });
                }
            },
        };
        if full_look {
            tracing::debug!(
                "{}: looking at every file ({})",
                dir.display(),
                if collections == 0 {
                    "first collection"
                } else if self.watch.is_none() {
                    "no directory watch"
                } else if changes.everything {
                    "events may have been missed"
                } else {
                    "periodic resync"
                }
            );
            self.last_full_look = Some(now);
            self.full_look = true;
        }
        self.quiet_listing = self.watch.is_some()
            && !full_look
            && !changes.relist
            && changes.touched.is_empty()
            && changes.opened.is_empty();
        self.paths = Some(Arc::clone(&paths));
        Ok(Listed {
            paths,
            full_look,
            changes,
            last_take,
        })
    }
}

/// Marks what `listed` says changed in `dir` since the last collection: on
/// a full look, every file of the table whose file changed, and every live
/// gauge left out; else the files the events name. The exemplar files'
/// share of the events goes to `exemplars`. `true`: a file was opened
/// while this collector opened it too, and the caller's liveness is to
/// look at the processes again.
pub(super) fn mark_changes(
    dir: &Path,
    listed: &Listed,
    files: &mut FileTable,
    exemplars: &mut ExemplarState,
    exited_live: &mut ExitedLive,
) -> bool {
    let changes = &listed.changes;
    let mut look_again = false;
    if listed.full_look {
        exemplars.watched(changes, true);
        for known in files.known.iter_mut().flatten() {
            if let Some(file) = &mut known.file {
                file.touch_if_changed(&known.path);
            }
        }
        exited_live.look_at_every_file();
    } else {
        exemplars.watched(changes, false);
        let touched = changes.touched.iter().map(|name| (name, true));
        let opened = changes.opened.iter().map(|name| (name, false));
        for (name, touched) in touched.chain(opened) {
            let path = dir.join(name);
            if let Some(&index) = files.by_path.get(path_bytes(&path)) {
                if let Some(Some(FileEntry {
                    file: Some(file), ..
                })) = files.known.get_mut(index)
                {
                    if touched {
                        file.touched();
                    } else if listed
                        .last_take
                        .is_some_and(|at| file.opened_by_us_since(at))
                    {
                        // Ours, perhaps with another: a new look tells.
                        file.opened_perhaps_by_us();
                        look_again = true;
                    } else {
                        file.opened();
                    }
                }
            } else {
                exited_live.event(&path);
            }
        }
    }
    look_again
}
