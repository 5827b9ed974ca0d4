//! A quiet collection: one whose listing came with no directory event and
//! no look at every file, on a plan and listing it shares with the last
//! collection. Nothing but the files' values and appended entries can have
//! changed, and settled files' not even those, so such a collection walks
//! only the files that are not settled: on a directory of a thousand gone
//! workers and a few live ones, a few dozen entries of the file table
//! instead of all of them, several times a scrape.

use crate::plan::Plan;

use super::file_entry::FileEntry;

/// The files not settled after a collection, for the next one if it is
/// quiet.
#[derive(Debug, Default)]
pub(super) struct Unsettled {
    /// The generation of the plan the lists are for.
    pub generation: u64,
    /// Files to look at (bad ones too): index in the file table, position
    /// in the listing.
    pub refresh: Vec<(usize, usize)>,
    /// The planned ones among them, in plan order.
    pub planned: Vec<PlannedUnsettled>,
    /// How many files are settled.
    pub settled: usize,
}

/// A planned file that is not settled.
#[derive(Debug, Clone, Copy)]
pub(super) struct PlannedUnsettled {
    /// Its position in the plan's files.
    pub position: usize,
    /// Its index in the file table.
    pub index: usize,
    /// Its first operation in the plan, and how many it has.
    pub first_op: usize,
    pub entries: usize,
}

fn settled(known: Option<&FileEntry>, generation: u64) -> bool {
    known
        .and_then(|k| k.file.as_ref().filter(|_| k.problem.is_none()))
        .is_some_and(|file| file.is_settled(generation))
}

impl Unsettled {
    /// Worked out from the whole file table `known` and its plan `plan` (of
    /// generation `generation`), for the files of `order`.
    pub(super) fn of(
        known: &[Option<FileEntry>],
        plan: &Plan,
        generation: u64,
        order: &[usize],
    ) -> Unsettled {
        let mut unsettled = Unsettled {
            generation,
            ..Unsettled::default()
        };
        for (position, &index) in order.iter().enumerate() {
            if settled(known[index].as_ref(), generation) {
                unsettled.settled += 1;
            } else {
                unsettled.refresh.push((index, position));
            }
        }
        let mut first_op = 0;
        for (position, planned) in plan.files.iter().enumerate() {
            if !settled(known[planned.index].as_ref(), generation) {
                unsettled.planned.push(PlannedUnsettled {
                    position,
                    index: planned.index,
                    first_op,
                    entries: planned.entries,
                });
            }
            first_op += planned.entries;
        }
        unsettled
    }

    /// After a quiet collection on the same plan: the files of `self` that
    /// are still not settled in the file table `known`.
    pub(super) fn still(mut self, known: &[Option<FileEntry>]) -> Unsettled {
        let generation = self.generation;
        let before = self.refresh.len();
        self.refresh
            .retain(|&(index, _)| !settled(known[index].as_ref(), generation));
        self.settled += before - self.refresh.len();
        self.planned
            .retain(|planned| !settled(known[planned.index].as_ref(), generation));
        self
    }
}
