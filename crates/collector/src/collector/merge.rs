//! Merging: the plan worked out for the files, and applied to their values, whole or restricted by a filter.

use crate::filter::NameFilter;
use crate::plan::{Accumulators, Plan, PlanCache, PlanInput, RestrictedPlan};
use crate::settled_sums::{OpGroup, SettledSums};
use crate::tracked::Settled;

use super::file_entry::{tracked_file, FileEntry};
use super::file_table::FileTable;
use super::gather::{gather, gather_threads};
use super::pass::Pass;
use super::quiet::PlannedUnsettled;
use super::quiet::Unsettled;
use super::scrape::CollectOptions;
use super::settle::SettleState;
use super::threads::on_threads;
use crate::family::MergedFamily;
use crate::problem::{Conflict, Warning};

/// What the merge keeps between collections: the plan, what filters keep
/// of it, the settled files' share of it, and the buffers it is applied
/// with.
#[derive(Debug, Default)]
pub(super) struct MergeState {
    /// What outlives one plan (see `PlanCache`).
    pub(super) plan_cache: PlanCache,
    /// Which entry of which file feeds which output series: worked out
    /// again only when files or keys change.
    pub(super) plan: Plan,
    /// Counts the plans built: a settled file's values in `values` are
    /// those of the plan of this generation.
    pub(super) plan_generation: u64,
    /// What recent filters keep of `plan` (cleared with each new plan),
    /// with the settled files' share of each.
    restricted: Vec<(NameFilter, RestrictedPlan, SettledSums)>,
    /// The settled files' share of `plan`.
    settled_sums: SettledSums,
    /// The plan must be rebuilt before the next use.
    pub(super) replan: bool,
    /// Where the plan is applied, kept to reuse its memory.
    accumulators: Accumulators,
    /// Each plan operation's value (and timestamp), copied out of the files.
    values: Vec<(f64, f64)>,
    /// The plan's conflicts already reported, so each is reported once.
    reported_conflicts: foldhash::HashSet<Conflict>,
}

/// Applies `plan` to the values of its files. `Err(index)`: that file shrank
/// under its map.
///
/// Two steps: the values are first copied out of the files into `values`
/// (one per plan operation, in order), then applied in order. The copy is
/// what costs (the values are spread over every file's pages); it is split
/// between threads on a big directory. The applying stays on one thread, in
/// merge order, so every sum adds its terms in Python's order.
pub(super) fn apply(
    known: &[Option<FileEntry>],
    plan: &Plan,
    mut settled: Option<(u64, u64, &mut SettledSums)>,
    scope: Option<&[PlannedUnsettled]>,
    accumulators: &mut Accumulators,
    values: &mut Vec<(f64, f64)>,
) -> Result<(), usize> {
    let generation = settled.as_ref().map(|(generation, _, _)| *generation);
    // No clearing: gather writes every slot (a 3 MB memset per scrape on
    // 4,000 files otherwise).
    values.resize(plan.ops.len(), (0.0, 0.0));
    let threads = gather_threads(plan.ops.len());
    if let Some(planned) = scope {
        // A quiet collection: only the files not settled have new values.
        for file in planned {
            let end = (file.first_op + file.entries).min(plan.ops.len());
            let Some(tracked) = tracked_file(known, file.index) else {
                values[file.first_op..end].fill((0.0, 0.0));
                continue;
            };
            tracked
                .gather_values(
                    &plan.ops[file.first_op..end],
                    &mut values[file.first_op..end],
                )
                .map_err(|_| file.index)?;
        }
    } else if threads <= 1 {
        gather(known, &plan.files, &plan.ops, generation, values)?;
    } else {
        // Contiguous runs of files with about the same number of entries.
        let per_thread = plan.ops.len().div_ceil(threads);
        let mut chunks = Vec::with_capacity(threads);
        let (mut first_file, mut first_op, mut entries) = (0, 0, 0);
        for (i, planned) in plan.files.iter().enumerate() {
            entries += planned.entries;
            if entries - first_op >= per_thread || i + 1 == plan.files.len() {
                chunks.push((first_file..i + 1, first_op..entries.min(plan.ops.len())));
                first_file = i + 1;
                first_op = entries.min(plan.ops.len());
            }
        }
        let mut slices = Vec::with_capacity(chunks.len());
        let mut rest = values.as_mut_slice();
        for (_, ops) in &chunks {
            let (slice, tail) = rest.split_at_mut(ops.len());
            slices.push(slice);
            rest = tail;
        }
        let work = chunks.into_iter().zip(slices);
        let results = on_threads(work, threads, |((files, ops), slice)| {
            gather(known, &plan.files[files], &plan.ops[ops], generation, slice)
        });
        results.into_iter().collect::<Result<(), usize>>()?;
    }
    let runs = || {
        let mut first_op = 0u32;
        plan.files
            .iter()
            .map(|planned| {
                let start = first_op;
                first_op = first_op.saturating_add(planned.entries as u32);
                (planned.index, OpGroup::Run(start, first_op))
            })
            .collect()
    };
    if apply_settled(
        known,
        plan,
        settled
            .as_mut()
            .map(|(generation, version, sums)| (*generation, *version, &mut **sums)),
        runs,
        accumulators,
        values,
    ) {
        return Ok(());
    }
    accumulators.start(plan);
    for (&op, &(value, timestamp)) in plan.ops.iter().zip(values.iter()) {
        accumulators.apply(op, value, timestamp);
    }
    Ok(())
}

/// Restricted plans kept for this many filters at most: routers poll with a
/// few fixed sets of names; a client cycling through many only costs a
/// restriction of the plan per request.
pub(super) const RESTRICTED_PLANS: usize = 8;

/// What `filter` keeps of `plan`, worked out once per plan and filter,
/// with the settled files' share of it.
pub(super) fn restricted_plan<'a>(
    cache: &'a mut Vec<(NameFilter, RestrictedPlan, SettledSums)>,
    plan: &Plan,
    filter: &NameFilter,
) -> (&'a RestrictedPlan, &'a mut SettledSums) {
    let at = match cache.iter().position(|(f, _, _)| f == filter) {
        Some(at) => at,
        None => {
            if cache.len() >= RESTRICTED_PLANS {
                cache.remove(0);
            }
            let restricted = plan.restrict(filter);
            cache.push((filter.clone(), restricted, SettledSums::default()));
            cache.len() - 1
        }
    };
    let (_, restricted, sums) = &mut cache[at];
    (restricted, sums)
}

/// Merges `values` into `accumulators` from the settled files' share when
/// some of the files of `groups` (worked out only when the share must be
/// worked out again) are settled and the share allows it: `true` if it did,
/// `false` if the caller must walk every operation in order.
pub(super) fn apply_settled<'a>(
    known: &[Option<FileEntry>],
    plan: &Plan,
    settled: Option<(u64, u64, &mut SettledSums)>,
    groups: impl FnOnce() -> Vec<(usize, OpGroup<'a>)>,
    accumulators: &mut Accumulators,
    values: &[(f64, f64)],
) -> bool {
    let Some((generation, version, sums)) = settled else {
        return false;
    };
    if !sums.is_for(generation, version) {
        let groups = groups();
        let since: Vec<bool> = groups
            .iter()
            .map(|&(index, _)| {
                tracked_file(known, index).is_some_and(|file| file.is_settled(generation))
            })
            .collect();
        *sums = SettledSums::build(
            plan,
            (generation, version),
            groups.into_iter().map(|(_, ops)| ops),
            &since,
            values,
        );
    }
    sums.apply(plan, accumulators, values)
}

/// [`apply`] for the operations `restricted` keeps: only their values are
/// copied out of the files, then they are applied in plan order. A file to
/// settle is read whole (a settled file's values must all be there for the
/// next collection, filtered or not); a settled one not at all. A quiet
/// collection (`scope`) looks only at the files that are not settled.
pub(super) fn apply_restricted(
    known: &[Option<FileEntry>],
    plan: &Plan,
    restricted: &RestrictedPlan,
    mut sums: Option<(u64, u64, &mut SettledSums)>,
    scope: Option<&[PlannedUnsettled]>,
    accumulators: &mut Accumulators,
    values: &mut Vec<(f64, f64)>,
) -> Result<(), usize> {
    let settled = sums.as_ref().map(|(generation, _, _)| *generation);
    values.resize(plan.ops.len(), (0.0, 0.0));
    let file_of = |index: usize| tracked_file(known, index);
    // Each file not settled: its position in the plan, its index, and the
    // range of its operations.
    let all_files = || {
        let mut first_op = 0;
        plan.files
            .iter()
            .enumerate()
            .map(move |(position, planned)| {
                let start = first_op;
                first_op += planned.entries;
                (position, planned.index, start, planned.entries)
            })
    };
    let candidates: Box<dyn Iterator<Item = (usize, usize, usize, usize)>> = match scope {
        Some(planned) => Box::new(
            planned
                .iter()
                .map(|p| (p.position, p.index, p.first_op, p.entries)),
        ),
        None => Box::new(all_files()),
    };
    for (position, index, first_op, entries) in candidates {
        let Some(file) = file_of(index) else {
            continue;
        };
        let end = (first_op + entries).min(plan.ops.len());
        if let Some(generation) = settled {
            if file.is_settled(generation) {
                continue;
            }
            if file.settled != Settled::No {
                // To settle: read whole.
                file.gather_values(&plan.ops[first_op..end], &mut values[first_op..end])
                    .map_err(|_| index)?;
                continue;
            }
        }
        // Its picks, if the filter keeps any of its operations.
        let Ok(at) = restricted
            .files
            .binary_search_by_key(&position, |part| part.position)
        else {
            continue;
        };
        let part = restricted.files[at];
        let picks = &restricted.ops[part.picks.0..part.picks.1];
        file.gather_picked(picks, part.first_op, &plan.ops, values)
            .map_err(|_| index)?;
    }
    let groups = || {
        restricted
            .files
            .iter()
            .filter_map(|part| {
                let planned = plan.files.get(part.position)?;
                let picks = &restricted.ops[part.picks.0..part.picks.1];
                Some((planned.index, OpGroup::Picks(picks)))
            })
            .collect()
    };
    if apply_settled(
        known,
        plan,
        sums.as_mut()
            .map(|(generation, version, sums)| (*generation, *version, &mut **sums)),
        groups,
        accumulators,
        values,
    ) {
        return Ok(());
    }
    accumulators.start(plan);
    for &pick in &restricted.ops {
        let (value, timestamp) = values[pick as usize];
        accumulators.apply(plan.ops[pick as usize], value, timestamp);
    }
    Ok(())
}

/// Whether `plan` covers exactly the good files of `order` with their
/// current entry counts.
pub(super) fn same_files(plan: &Plan, order: &[usize], known: &[Option<FileEntry>]) -> bool {
    let mut planned = plan.files.iter();
    for &index in order {
        let Some(known) = known.get(index).and_then(Option::as_ref) else {
            continue;
        };
        let Some(file) = known.file.as_ref().filter(|_| known.problem.is_none()) else {
            continue;
        };
        match planned.next() {
            Some(p) if p.index == index && p.entries == file.entries.len() => {}
            _ => return false,
        }
    }
    planned.next().is_none()
}

/// A plan for the good files of `order`, in that order.
pub(super) fn build_plan(
    files: &mut FileTable,
    plan_cache: &mut PlanCache,
    order: &[usize],
    options: CollectOptions,
) -> Plan {
    let inputs = order.iter().filter_map(|&index| {
        let known = files.known.get(index)?.as_ref()?;
        if known.problem.is_some() {
            return None;
        }
        Some(PlanInput {
            index,
            path: &known.path,
            file: known.file.as_ref()?,
        })
    });
    Plan::build(
        inputs,
        &files.keys,
        options.accumulate,
        &mut files.interner,
        plan_cache,
    )
}

impl MergeState {
    /// Merges the files of `order`: plans anew when files or entries
    /// changed, then applies the plan to the values (whole, or restricted to
    /// the filter's names), and settles the files whose writer is gone
    /// once their values are read whole. A file that shrank under its map
    /// is dropped and the plan rebuilt without it, at most twice. With the
    /// families, whether a plan was worked out.
    pub(super) fn merge_order(
        &mut self,
        files: &mut FileTable,
        settling: &mut SettleState,
        order: &[usize],
        unsettled: Option<&Unsettled>,
        pass: Pass<'_>,
        warnings: &mut Vec<Warning>,
    ) -> (Vec<MergedFamily>, bool) {
        let mut planned = false;
        for _ in 0..3 {
            // A quiet collection's files are the last one's, and a file whose
            // entries changed asked for a new plan.
            let same = unsettled.is_some() || same_files(&self.plan, order, &files.known);
            if self.replan || !same {
                self.plan_again(files, order, pass.options);
                planned = true;
            }
            let settled = pass.exited.map(|_| self.plan_generation);
            let scope = unsettled
                .filter(|unsettled| unsettled.generation == self.plan_generation)
                .map(|unsettled| unsettled.planned.as_slice());
            match self.apply_plan(
                &files.known,
                settling.settle_version,
                pass.filter,
                settled,
                scope,
            ) {
                Ok(families) => {
                    if let Some(generation) = settled {
                        let (known, collection) = (&mut files.known, pass.collection);
                        match scope {
                            Some(planned) => {
                                let indexes = planned.iter().map(|p| p.index);
                                settling.settle_merged(known, indexes, generation, collection);
                            }
                            None => {
                                let indexes = self.plan.files.iter().map(|p| p.index);
                                settling.settle_merged(known, indexes, generation, collection);
                            }
                        }
                    }
                    return (families, planned);
                }
                Err(index) => {
                    files.drop_shrunk(index, warnings);
                    self.replan = true;
                }
            }
        }
        (Vec::new(), planned)
    }

    /// Works out a new plan for the files of `order`.
    fn plan_again(&mut self, files: &mut FileTable, order: &[usize], options: CollectOptions) {
        self.plan = build_plan(files, &mut self.plan_cache, order, options);
        files.interner.settle();
        self.restricted.clear();
        self.plan_generation += 1;
        self.replan = false;
    }

    /// Applies the plan to the values of the files of `known`, keeping what
    /// `filter` names (all without one). `settled`: the generation files are
    /// settled for, when settling, and `version` the settle version; `scope`:
    /// the files a quiet collection reads. `Err(index)`: that file shrank
    /// under its map.
    fn apply_plan(
        &mut self,
        known: &[Option<FileEntry>],
        version: u64,
        filter: Option<&NameFilter>,
        settled: Option<u64>,
        scope: Option<&[PlannedUnsettled]>,
    ) -> Result<Vec<MergedFamily>, usize> {
        match filter {
            None => apply(
                known,
                &self.plan,
                settled.map(|generation| (generation, version, &mut self.settled_sums)),
                scope,
                &mut self.accumulators,
                &mut self.values,
            )
            .map(|()| self.accumulators.finish(&self.plan)),
            Some(filter) => {
                let (restricted, sums) = restricted_plan(&mut self.restricted, &self.plan, filter);
                apply_restricted(
                    known,
                    &self.plan,
                    restricted,
                    settled.map(|generation| (generation, version, sums)),
                    scope,
                    &mut self.accumulators,
                    &mut self.values,
                )
                .map(|()| {
                    // Only the samples named (a most-recent family was merged
                    // whole, for its order); a family left with nothing is left
                    // out, as Python's `_restricted_metric` leaves it out.
                    filter.restrict(self.accumulators.finish_restricted(&self.plan, restricted))
                })
            }
        }
    }

    /// Queues a warning for each conflict of the plan not reported yet, in a
    /// stable order.
    pub(super) fn report_new_conflicts(&mut self, warnings: &mut Vec<Warning>) {
        let mut new_conflicts: Vec<Conflict> = self
            .plan
            .conflicts
            .iter()
            .filter(|c| !self.reported_conflicts.contains(*c))
            .cloned()
            .collect();
        new_conflicts.sort_by_key(ToString::to_string);
        if self.reported_conflicts.len() > 10_000 {
            self.reported_conflicts.clear();
        }
        for conflict in new_conflicts {
            self.reported_conflicts.insert(conflict.clone());
            warnings.push(Warning::Conflict(conflict));
        }
    }

    /// Gives back the value buffer a burst of entries left behind.
    pub(super) fn shrink_values(&mut self) {
        if self.values.capacity() > 2 * self.values.len() + 1024 {
            self.values.shrink_to_fit();
        }
    }

    /// Drops the plan and what outlives it, as the interner they refer into
    /// is about to be swept: the next merge plans anew.
    pub(super) fn forget_plan(&mut self) {
        self.plan_cache.clear();
        self.plan = Plan::default();
        self.replan = true;
    }
}
