//! The part of a merge plan that a [`NameFilter`] keeps.
//!
//! A router polling `?name[]=` for a handful of samples should not pay for
//! the whole directory: the restricted plan names the operations that feed
//! the kept samples, so a filtered collection copies, applies and encodes
//! only those. The operations keep their order, so every sum still adds its
//! terms in Python's order and the kept samples come out byte for byte as
//! in an unfiltered collection.

use super::{Plan, PlanFamily, PlanSample, Source};
use crate::filter::NameFilter;

/// What a filter keeps of a [`Plan`]. Its families may still hold samples
/// the filter leaves out (a most-recent family's, which decide its order):
/// restrict the merged families with the filter.
#[derive(Debug, Default)]
pub(crate) struct RestrictedPlan {
    /// The kept families, with only their kept samples (none is empty).
    pub(super) families: Vec<PlanFamily>,
    /// The plan operations that feed a kept sample, by their index in
    /// `Plan::ops`, ascending.
    pub ops: Vec<u32>,
    /// Per planned file that has any of `ops`: its position in
    /// `Plan::files`, the index in `Plan::ops` of its first operation, and
    /// the range of `ops` that are its.
    pub files: Vec<RestrictedFile>,
    /// The bucket sets whose running totals a kept sample needs.
    pub(super) sets: Vec<u32>,
}

/// One file's share of a [`RestrictedPlan`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct RestrictedFile {
    /// Position in `Plan::files`.
    pub position: usize,
    /// Index in `Plan::ops` of the file's first operation.
    pub first_op: usize,
    /// Range of `RestrictedPlan::ops` that are this file's.
    pub picks: (usize, usize),
}

impl Plan {
    /// What `filter` keeps of this plan.
    pub(crate) fn restrict(&self, filter: &NameFilter) -> RestrictedPlan {
        let mut needed = vec![false; self.slot_count];
        let mut sets = Vec::new();
        let mut set_of_slot: Option<Vec<u32>> = None;
        let need_set = |set: u32, needed: &mut Vec<bool>, sets: &mut Vec<u32>| {
            if !sets.contains(&set) {
                sets.push(set);
                for &slot in &self.bucket_sets[set as usize] {
                    needed[slot as usize] = true;
                }
            }
        };
        let mut families = Vec::new();
        for family in &self.families {
            let keep = |sample: &PlanSample| filter.keeps(&sample.name);
            let samples: Vec<PlanSample> =
                family.samples.iter().filter(|s| keep(s)).cloned().collect();
            // A most-recent family's order is worked out from all its
            // series (a label set comes where its first series was set), so
            // all are merged and the kept ones picked after ordering.
            let most_recent = if family.most_recent.iter().any(|(s, _)| keep(s)) {
                family.most_recent.clone()
            } else {
                Vec::new()
            };
            if samples.is_empty() && most_recent.is_empty() {
                continue;
            }
            for sample in samples.iter().chain(most_recent.iter().map(|(s, _)| s)) {
                match sample.source {
                    Source::Slot(slot) => needed[slot as usize] = true,
                    Source::Count(set) => need_set(set, &mut needed, &mut sets),
                    Source::Cumulative(slot) => {
                        let owners = set_of_slot.get_or_insert_with(|| {
                            let mut owners = vec![u32::MAX; self.slot_count];
                            for (set, slots) in self.bucket_sets.iter().enumerate() {
                                for &s in slots {
                                    owners[s as usize] = set as u32;
                                }
                            }
                            owners
                        });
                        let set = owners[slot as usize];
                        if set != u32::MAX {
                            need_set(set, &mut needed, &mut sets);
                        }
                    }
                }
            }
            families.push(PlanFamily {
                samples,
                most_recent,
                ..family.clone_without_samples()
            });
        }
        let mut restricted = RestrictedPlan {
            families,
            sets,
            ..RestrictedPlan::default()
        };
        let mut first_op = 0;
        for (position, planned) in self.files.iter().enumerate() {
            let start = restricted.ops.len();
            let end_op = (first_op + planned.entries).min(self.ops.len());
            for (i, op) in self.ops[first_op..end_op].iter().enumerate() {
                if op.slot().is_some_and(|slot| needed[slot as usize]) {
                    restricted.ops.push((first_op + i) as u32);
                }
            }
            if restricted.ops.len() > start {
                restricted.files.push(RestrictedFile {
                    position,
                    first_op,
                    picks: (start, restricted.ops.len()),
                });
            }
            first_op = end_op;
        }
        restricted
    }
}
