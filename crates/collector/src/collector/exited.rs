//! What the caller's [`WriterLiveness`] decides at the start of a
//! collection: settled files whose writer is back are read again, and the
//! `gauge_live*` files of writers that are gone are left out.
//!
//! [`WriterLiveness`]: crate::WriterLiveness

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use multiprom_format::{FileIdentity, FileName, MetricKind};

use crate::tracked::Settled;
use crate::writers::{ExitedWriters, WrittenFile};

use super::file_entry::{file_name, path_bytes, FileEntry};
use super::state::CollectorState;

/// A `gauge_live*` file left out because its writer is gone: which file it
/// was, and when something last happened to it. It is remembered apart
/// from the file table, which forgets the paths a collection leaves out.
#[derive(Debug, Clone, Copy)]
pub(super) struct RetiredLive {
    identity: FileIdentity,
    since: Instant,
}

/// The live-gauge files of a listing, with their names.
type LiveFiles = Arc<Vec<(PathBuf, FileName)>>;

/// A set of paths, shared.
type Paths = Arc<HashSet<PathBuf>>;

/// What is kept between collections about live gauges left out.
#[derive(Debug, Default)]
pub(super) struct ExitedLive {
    /// The live-gauge files of `listing`, found once per listing.
    live: Option<(Arc<Vec<PathBuf>>, LiveFiles)>,
    /// The live-gauge files left out, by path.
    retired: HashMap<PathBuf, RetiredLive>,
    /// The last answer, and what it was given: the same answer (the same
    /// `Arc`) keeps the listing the same, so a collection stays quiet.
    last: Option<(Paths, Paths)>,
    /// The listing and liveness generation of the last answer: with no
    /// event since, and the same of both, the answer is the same.
    last_asked: Option<(Arc<Vec<PathBuf>>, u64)>,
}

impl ExitedLive {
    /// Something happened to the file at `path` (opened, written,
    /// replaced): if it was left out, no look at the processes taken
    /// before now can keep it out.
    pub(super) fn event(&mut self, path: &Path) {
        if let Some(retired) = self.retired.get_mut(path) {
            retired.since = Instant::now();
        }
    }

    /// Every file is looked at: a file left out that is another file now
    /// (replaced without an event) is a new file.
    pub(super) fn look_at_every_file(&mut self) {
        self.retired
            .retain(|path, retired| FileIdentity::of(path).is_ok_and(|id| id == retired.identity));
    }
}

/// Reads again, from this collection on, every settled file whose writer
/// `exited` no longer says is gone: asked only when its generation moved.
pub(super) fn bring_back_held(state: &mut CollectorState, exited: &ExitedWriters) {
    let generation = exited.generation();
    if state.settling.liveness_generation == Some(generation) {
        return;
    }
    state.settling.liveness_generation = Some(generation);
    let mut back = false;
    for entry in state.files.known.iter_mut().flatten() {
        let FileEntry {
            file: Some(file), ..
        } = entry
        else {
            continue;
        };
        if file.settled == Settled::No {
            continue;
        }
        let gone = file.identity().is_some_and(|identity| {
            exited.test(&WrittenFile {
                name: &file.name,
                identity,
                since: file.last_event(),
            })
        });
        if !gone {
            file.unsettle();
            back = true;
        }
    }
    if back {
        // Not a quiet collection: it must look at the files brought back.
        state.listing.quiet_listing = false;
        state.settling.settle_version += 1;
    }
}

/// `given` (files the caller leaves out) and the `gauge_live*` files of
/// `listing` whose writer `exited` says is gone, as
/// `mark_process_dead` would have removed them.
pub(super) fn with_exited_live_gauges(
    state: &mut CollectorState,
    listing: &Arc<Vec<PathBuf>>,
    given: Arc<HashSet<PathBuf>>,
    exited: &ExitedWriters,
) -> Arc<HashSet<PathBuf>> {
    let generation = exited.generation();
    let unchanged = state.listing.quiet_listing
        && state
            .settling
            .exited_live
            .last_asked
            .as_ref()
            .is_some_and(|(last, asked)| Arc::ptr_eq(last, listing) && *asked == generation);
    state.settling.exited_live.last_asked = Some((Arc::clone(listing), generation));
    if unchanged {
        match &state.settling.exited_live.last {
            None => return given,
            Some((last_given, last)) if same_given(last_given, &given) => return Arc::clone(last),
            Some(_) => {}
        }
    }
    let live = match &state.settling.exited_live.live {
        Some((last, live)) if Arc::ptr_eq(last, listing) => Arc::clone(live),
        _ => {
            let live: LiveFiles = Arc::new(
                listing
                    .iter()
                    .filter_map(|path| {
                        let name = file_name(path)?;
                        let MetricKind::Gauge(mode) = name.kind() else {
                            return None;
                        };
                        mode.is_live().then(|| (path.clone(), name))
                    })
                    .collect(),
            );
            state.settling.exited_live.live = Some((Arc::clone(listing), Arc::clone(&live)));
            live
        }
    };
    let mut left_out = HashSet::new();
    let mut retired = std::mem::take(&mut state.settling.exited_live.retired);
    for (path, name) in live.iter() {
        let known = retired.get(path).copied().or_else(|| {
            let index = *state.files.by_path.get(path_bytes(path))?;
            let file = state.files.known.get(index)?.as_ref()?.file.as_ref()?;
            Some(RetiredLive {
                identity: file.identity()?,
                since: file.last_event(),
            })
        });
        let gone = known.is_some_and(|known| {
            exited.test(&WrittenFile {
                name,
                identity: known.identity,
                since: known.since,
            })
        });
        match (gone, known) {
            (true, Some(known)) => {
                left_out.insert(path.clone());
                retired.insert(path.clone(), known);
            }
            _ => {
                retired.remove(path);
            }
        }
    }
    retired.retain(|path, _| left_out.contains(path));
    state.settling.exited_live.retired = retired;
    if left_out.is_empty() {
        state.settling.exited_live.last = None;
        return given;
    }
    left_out.extend(given.iter().cloned());
    if let Some((last_given, last)) = &state.settling.exited_live.last {
        if same_given(last_given, &given) && **last == left_out {
            return Arc::clone(last);
        }
    }
    let left_out = Arc::new(left_out);
    state.settling.exited_live.last = Some((given, Arc::clone(&left_out)));
    left_out
}

/// Whether the caller left out the same files: the same set, or none
/// either time (a caller that leaves nothing out makes a new empty set
/// each time).
fn same_given(last: &Arc<HashSet<PathBuf>>, given: &Arc<HashSet<PathBuf>>) -> bool {
    Arc::ptr_eq(last, given) || (last.is_empty() && given.is_empty())
}
