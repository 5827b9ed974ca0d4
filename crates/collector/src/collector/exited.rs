//! What the caller's [`WriterLiveness`] decides at the start of a
//! collection: settled files whose writer is back are read again (see
//! `SettleState::bring_back_held`), and the `gauge_live*` files of writers
//! that are gone are left out.
//!
//! [`WriterLiveness`]: crate::WriterLiveness

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use multiprom_format::{FileIdentity, FileName, MetricKind};

use crate::writers::{ExitedWriters, WrittenFile};

use super::file_entry::{file_name, path_bytes};
use super::file_table::FileTable;

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

    /// `given` (files the caller leaves out) and the `gauge_live*` files of
    /// `listing` whose writer `exited` says is gone, as
    /// `mark_process_dead` would have removed them. `files`: what the file
    /// table knows of them; `quiet_listing`: the listing came with no event.
    pub(super) fn with_exited_live_gauges(
        &mut self,
        files: &FileTable,
        quiet_listing: bool,
        listing: &Arc<Vec<PathBuf>>,
        given: Arc<HashSet<PathBuf>>,
        exited: &ExitedWriters,
    ) -> Arc<HashSet<PathBuf>> {
        let generation = exited.generation();
        let unchanged = quiet_listing
            && self
                .last_asked
                .as_ref()
                .is_some_and(|(last, asked)| Arc::ptr_eq(last, listing) && *asked == generation);
        self.last_asked = Some((Arc::clone(listing), generation));
        if unchanged {
            match &self.last {
                None => return given,
                Some((last_given, last)) if same_given(last_given, &given) => {
                    return Arc::clone(last)
                }
                Some(_) => {}
            }
        }
        let live = match &self.live {
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
                self.live = Some((Arc::clone(listing), Arc::clone(&live)));
                live
            }
        };
        let mut left_out = HashSet::new();
        let mut retired = std::mem::take(&mut self.retired);
        for (path, name) in live.iter() {
            let known = retired.get(path).copied().or_else(|| {
                let index = *files.by_path.get(path_bytes(path))?;
                let file = files.known.get(index)?.as_ref()?.file.as_ref()?;
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
        self.retired = retired;
        if left_out.is_empty() {
            self.last = None;
            return given;
        }
        left_out.extend(given.iter().cloned());
        if let Some((last_given, last)) = &self.last {
            if same_given(last_given, &given) && **last == left_out {
                return Arc::clone(last);
            }
        }
        let left_out = Arc::new(left_out);
        self.last = Some((given, Arc::clone(&left_out)));
        left_out
    }
}

/// Whether the caller left out the same files: the same set, or none
/// either time (a caller that leaves nothing out makes a new empty set
/// each time).
fn same_given(last: &Arc<HashSet<PathBuf>>, given: &Arc<HashSet<PathBuf>>) -> bool {
    Arc::ptr_eq(last, given) || (last.is_empty() && given.is_empty())
}
