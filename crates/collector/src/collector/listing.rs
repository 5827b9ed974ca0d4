//! Listing the directory: from the watch's events when nothing changed, else afresh.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::watch::{Changes, DirWatch};
use multiprom_format::scan_dir;

use super::file_entry::{path_bytes, FileEntry};
use super::scrape::CollectError;
use super::state::CollectorState;

/// A listing, the files left out of it, and the rest.
pub(super) type KeptListing = (Arc<Vec<PathBuf>>, Arc<HashSet<PathBuf>>, Arc<Vec<PathBuf>>);

/// The directory watch and what the listings of the last collections
/// were: what tells a collection whether it must list the directory afresh
/// and look at every file, or may go on from its last listing.
#[derive(Debug, Default)]
pub(super) struct Listing {
    /// The directory watch, when one could be set.
    pub(super) watch: Option<DirWatch>,
    /// The process that set `watch`.
    pub(super) watch_pid: u32,
    /// When setting a watch last failed (it is tried again after a while).
    pub(super) watch_failed: Option<Instant>,
    /// The listing as of the last change, in listing order.
    pub(super) paths: Option<Arc<Vec<PathBuf>>>,
    /// Counts the times the directory was listed afresh: while it stays
    /// the same, the watch saw no name added, removed or renamed in the
    /// directory (so no subdirectory came or went either).
    pub(super) listings: u64,
    /// When every file was last looked at.
    pub(super) last_full_look: Option<Instant>,
    /// The listing of the collection under way came with a full look.
    pub(super) full_look: bool,
    /// The listing of the collection under way came with no event and no
    /// look at every file: nothing but the files' values and appended
    /// entries can have changed since the last collection.
    pub(super) quiet_listing: bool,
    /// When the watch's events were last taken.
    pub(super) events_taken_at: Option<Instant>,
    /// The paths of the last collection and their indexes in the file table: when
    /// the next collection has the very same paths (no event changed the
    /// listing), the lookups by path are skipped.
    pub(super) last_paths: Option<(Arc<Vec<PathBuf>>, Vec<usize>)>,
    /// The last listing that had files left out, the files left out, and
    /// the rest: the same listing less the same files is the same listing.
    pub(super) kept: Option<KeptListing>,
}

/// How often every file is looked at even when no event said it changed, as
/// a guard against anything a watch can miss.
pub(super) const RESYNC: Duration = Duration::from_secs(60);

/// The listing of `dir`, from the watch's events when nothing changed, else
/// from the directory; marks files touched since the last collection.
pub(super) fn changed_listing(
    dir: &Path,
    state: &mut CollectorState,
    now: Instant,
) -> Result<Arc<Vec<PathBuf>>, CollectError> {
    // A watch set before a fork (a collector made in a pre-fork
    // server's master) shares its inotify descriptor with the parent:
    // reading it would take the parent's events. Set a new one; dropping
    // the inherited one closes only this process's descriptor.
    let pid = std::process::id();
    if state.listing.watch_pid != pid {
        state.listing.watch = None;
        state.listing.watch_pid = pid;
    }
    let changes = match &mut state.listing.watch {
        Some(watch) => watch.take(),
        None => Changes {
            everything: true,
            ..Changes::default()
        },
    };
    // Opens this collector made since the last take are among `opened`.
    let last_take = state.listing.events_taken_at.replace(now);
    if changes.everything {
        // Events were lost or the directory went away: start a new watch
        // (before listing, so nothing between the two is missed).
        state.listing.watch = None;
        // A collector's first collection reads every file afresh with
        // `pread` (see `decide_maps`), so it needs no watch yet; the
        // second sets one before it lists, and reopens every file
        // anyway to map it. A collector used once (a process's first
        // scrape, `multiprom scrape`) so never pays for a watch, nor for
        // the event its every open of a file raises in one.
        let retry = state.collections > 0
            && state
                .listing
                .watch_failed
                .is_none_or(|failed| now.saturating_duration_since(failed) >= RESYNC);
        if retry {
            match DirWatch::new(dir) {
                Ok(watch) => {
                    state.listing.watch = Some(watch);
                    state.listing.watch_failed = None;
                }
                Err(_) => state.listing.watch_failed = Some(now),
            }
        }
    }
    let full_look = changes.everything
        || state
            .listing
            .last_full_look
            .is_none_or(|at| now.saturating_duration_since(at) >= RESYNC);
    let listing = match state.listing.paths.take() {
        Some(listing) if !full_look && !changes.relist => listing,
        _ => match scan_dir(dir) {
            Ok(listing) => {
                state.listing.listings += 1;
                Arc::new(listing)
            }
            Err(source) => {
                state.listing.watch = None;
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
            if state.collections == 0 {
                "first collection"
            } else if state.listing.watch.is_none() {
                "no directory watch"
            } else if changes.everything {
                "events may have been missed"
            } else {
                "periodic resync"
            }
        );
        state.listing.last_full_look = Some(now);
        state.listing.full_look = true;
        state.exemplars.watched(&changes, true);
        for known in state.files.known.iter_mut().flatten() {
            if let Some(file) = &mut known.file {
                file.touch_if_changed(&known.path);
            }
        }
        state.settling.exited_live.look_at_every_file();
    } else {
        state.exemplars.watched(&changes, false);
        let touched = changes.touched.iter().map(|name| (name, true));
        let opened = changes.opened.iter().map(|name| (name, false));
        for (name, touched) in touched.chain(opened) {
            let path = dir.join(name);
            if let Some(&index) = state.files.by_path.get(path_bytes(&path)) {
                if let Some(Some(FileEntry {
                    file: Some(file), ..
                })) = state.files.known.get_mut(index)
                {
                    if touched {
                        file.touched();
                    } else if last_take.is_some_and(|at| file.opened_by_us_since(at)) {
                        // Ours, perhaps with another: a new look tells.
                        file.opened_perhaps_by_us();
                        state.settling.look_again = true;
                    } else {
                        file.opened();
                    }
                }
            } else {
                state.settling.exited_live.event(&path);
            }
        }
    }
    state.listing.quiet_listing = state.listing.watch.is_some()
        && !full_look
        && !changes.relist
        && changes.touched.is_empty()
        && changes.opened.is_empty();
    state.listing.paths = Some(Arc::clone(&listing));
    Ok(listing)
}
