//! Settling the files of exited writers once their values are read whole.

use crate::tracked::Settled;

use super::exited::ExitedLive;
use super::file_entry::FileEntry;
use super::quiet::Unsettled;
use super::state::CollectorState;

/// What settling keeps between collections: which version of the settled
/// files the sums are for, the files not settled, and what the caller's
/// liveness last said of the files and of the live gauges.
#[derive(Debug, Default)]
pub(super) struct SettleState {
    /// Bumped whenever files may have become settled or unsettled: settled
    /// sums made at another version are stale.
    pub(super) settle_version: u64,
    /// The files not settled after the last collection, for a quiet one.
    pub(super) unsettled: Option<Unsettled>,
    /// The generation of the caller's liveness last asked about settled
    /// files.
    pub(super) liveness_generation: Option<u64>,
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
}

/// Keeps the files not settled after this collection, for the next one if
/// it is quiet: how many files are settled.
pub(super) fn keep_unsettled(
    state: &mut CollectorState,
    unsettled: Option<Unsettled>,
    order: &[usize],
) -> usize {
    let next = match unsettled {
        Some(unsettled) if unsettled.generation == state.merge.plan_generation => {
            unsettled.still(&state.files.known)
        }
        _ => Unsettled::of(
            &state.files.known,
            &state.merge.plan,
            state.merge.plan_generation,
            order,
        ),
    };
    let settled = next.settled;
    state.settling.unsettled = Some(next);
    settled
}
