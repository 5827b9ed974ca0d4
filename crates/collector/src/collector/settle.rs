//! Settling the files of exited writers once their values are read whole, and
//! reading them again once the caller's liveness says their writer is back.

use crate::plan::Plan;
use crate::tracked::Settled;
use crate::writers::{ExitedWriters, WrittenFile};

use super::exited::ExitedLive;
use super::file_entry::FileEntry;
use super::quiet::Unsettled;

/// What settling keeps between collections: which version of the settled
/// files the sums are for, the files not settled, and what the caller's
/// liveness last said of the files and of the live gauges.
#[derive(Debug, Default)]
pub(super) struct SettleState {
    /// Bumped whenever files may have become settled or unsettled: settled
    /// sums made at another version are stale.
    pub(super) settle_version: u64,
    /// The files not settled after the last collection, for a quiet one.
    unsettled: Option<Unsettled>,
    /// The generation of the caller's liveness last asked about settled
    /// files.
    liveness_generation: Option<u64>,
    /// The live gauges left out as their writers are gone.
    pub(super) exited_live: ExitedLive,
    /// Ask the caller's liveness for a new look at the processes: a file
    /// was opened while this collector opened it too.
    pub(super) look_again: bool,
}

/// Marks the files of `indexes` (planned files) whose writer is gone, and
/// whose values the collection just read whole into the value buffer, as
/// settled: how many became so.
pub(super) fn settle_gathered(
    known: &mut [Option<FileEntry>],
    indexes: impl Iterator<Item = usize>,
    generation: u64,
    collection: u64,
) -> usize {
    let mut newly = 0;
    for index in indexes {
        if let Some(Some(FileEntry {
            file: Some(file),
            problem: None,
            ..
        })) = known.get_mut(index)
        {
            if matches!(file.settled, Settled::WriterGone | Settled::Yes { .. })
                && !file.is_settled(generation)
            {
                file.settled = Settled::Yes {
                    plan: generation,
                    since: collection,
                };
                newly += 1;
            }
        }
    }
    newly
}

impl SettleState {
    /// The files not settled after the last collection, taken, when this
    /// one is `quiet` (settling, on a quiet listing of the same paths) on
    /// the same plan (of generation `generation`). Otherwise none, and the
    /// settled sums are stale: events may have brought settled files back.
    pub(super) fn take_unsettled(&mut self, quiet: bool, generation: u64) -> Option<Unsettled> {
        let unsettled = self
            .unsettled
            .take()
            .filter(|unsettled| quiet && unsettled.generation == generation);
        if unsettled.is_none() {
            // Events may have brought settled files back.
            self.settle_version += 1;
        }
        unsettled
    }

    /// Reads again, from this collection on, every settled file of `known`
    /// whose writer `exited` no longer says is gone: asked only when its
    /// generation moved. `true`: files were brought back, so the collection
    /// is not a quiet one (it must look at them).
    pub(super) fn bring_back_held(
        &mut self,
        known: &mut [Option<FileEntry>],
        exited: &ExitedWriters,
    ) -> bool {
        let generation = exited.generation();
        if self.liveness_generation == Some(generation) {
            return false;
        }
        self.liveness_generation = Some(generation);
        let mut back = false;
        for entry in known.iter_mut().flatten() {
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
            self.settle_version += 1;
        }
        back
    }

    /// After a merge that read the values of the files of `indexes` (the
    /// quiet collection's planned files, or all planned files) whole:
    /// settles those whose writer is gone.
    pub(super) fn settle_merged(
        &mut self,
        known: &mut [Option<FileEntry>],
        indexes: impl Iterator<Item = usize>,
        generation: u64,
        collection: u64,
    ) {
        if settle_gathered(known, indexes, generation, collection) > 0 {
            self.settle_version += 1;
        }
    }

    /// Keeps the files not settled after this collection, for the next one
    /// if it is quiet: how many files are settled. `unsettled`: the ones
    /// this collection started from; `plan` and `generation`: the plan of
    /// the files of `order` in `known`.
    pub(super) fn keep_unsettled(
        &mut self,
        unsettled: Option<Unsettled>,
        known: &[Option<FileEntry>],
        plan: &Plan,
        generation: u64,
        order: &[usize],
    ) -> usize {
        let next = match unsettled {
            Some(unsettled) if unsettled.generation == generation => unsettled.still(known),
            _ => Unsettled::of(known, plan, generation, order),
        };
        let settled = next.settled;
        self.unsettled = Some(next);
        settled
    }
}
