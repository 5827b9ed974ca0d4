//! One collection: what a collector keeps between collections, and the steps of a collection of a listing.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crate::filter::NameFilter;
use crate::intern::Interner;
use crate::keys::KeyTable;
use crate::plan::{Accumulators, Plan, PlanCache, RestrictedPlan};
use crate::problem::{Conflict, Warning};
use crate::settled_sums::SettledSums;
use crate::tracked::KeyHints;
use crate::watch::DirWatch;
use crate::writers::ExitedWriters;

use super::file_table::{index_paths, FileEntry, PathKey};
use super::listing::KeptListing;
use super::merge::merge_order;
use super::quiet::Unsettled;
use super::refresh::refresh_files;
use super::reports::{file_reports, ReportCounts};
use super::scrape::{CollectOptions, FileReport, Scrape, ScrapeStats};
use super::settle::keep_unsettled;

#[derive(Debug, Default)]
pub(super) struct CollectorState {
    pub(super) known: Vec<Option<FileEntry>>,
    /// The index in `known` of each path (the key shares `FileEntry::path`).
    pub(super) by_path: foldhash::HashMap<PathKey, usize>,
    pub(super) free: Vec<usize>,
    pub(super) keys: KeyTable,
    pub(super) interner: Interner,
    pub(super) hints: KeyHints,
    pub(super) plan_cache: PlanCache,
    pub(super) plan: Plan,
    /// Counts the plans built: a settled file's values in `values` are
    /// those of the plan of this generation.
    pub(super) plan_generation: u64,
    /// The last listing that had files left out, the files left out, and
    /// the rest: the same listing less the same files is the same listing.
    pub(super) kept: Option<KeptListing>,
    /// The last collection's file reports, and what they count.
    pub(super) reports: Arc<[FileReport]>,
    pub(super) report_counts: ReportCounts,
    /// The listing of the collection under way came with no event and no
    /// look at every file: nothing but the files' values and appended
    /// entries can have changed since the last collection.
    pub(super) quiet_listing: bool,
    /// Bumped whenever files may have become settled or unsettled: settled
    /// sums made at another version are stale.
    pub(super) settle_version: u64,
    /// The files not settled after the last collection, for a quiet one.
    pub(super) unsettled: Option<Unsettled>,
    /// What recent filters keep of `plan` (cleared with each new plan),
    /// with the settled files' share of each.
    pub(super) restricted: Vec<(NameFilter, RestrictedPlan, SettledSums)>,
    /// The settled files' share of `plan`.
    pub(super) settled_sums: SettledSums,
    /// The plan must be rebuilt before the next use.
    pub(super) replan: bool,
    pub(super) accumulators: Accumulators,
    /// Each plan operation's value (and timestamp), copied out of the files.
    pub(super) values: Vec<(f64, f64)>,
    pub(super) scratch: Vec<u8>,
    pub(super) reported_conflicts: foldhash::HashSet<Conflict>,
    pub(super) maps: usize,
    /// Whether each file of the collection under way may be mapped (see
    /// `decide_maps`), kept to reuse its allocation.
    pub(super) may_map: Vec<bool>,
    pub(super) collections: u64,
    /// The directory watch, when one could be set.
    pub(super) watch: Option<DirWatch>,
    /// The process that set `watch`.
    pub(super) watch_pid: u32,
    /// The listing of the collection under way came with a full look.
    pub(super) full_look: bool,
    /// When setting a watch last failed (it is tried again after a while).
    pub(super) watch_failed: Option<Instant>,
    /// The listing as of the last change, in listing order.
    pub(super) listing: Option<Arc<Vec<PathBuf>>>,
    /// The paths of the last collection and their indexes in `known`: when
    /// the next collection has the very same paths (no event changed the
    /// listing), the lookups by path are skipped.
    pub(super) last_paths: Option<(Arc<Vec<PathBuf>>, Vec<usize>)>,
    /// When every file was last looked at.
    pub(super) last_full_look: Option<Instant>,
    /// Files forgotten (no longer listed) so far.
    pub(super) files_forgotten: u64,
    /// `files_forgotten` and the key table's forgotten keys at the last
    /// interner sweep: when both are unchanged there is nothing to sweep.
    pub(super) swept_at: (u64, u64),
}

/// How one collection runs.
#[derive(Clone, Copy)]
pub(super) struct Pass<'a> {
    pub(super) options: CollectOptions,
    /// Files may be mapped, up to this many maps (`None`: none).
    pub(super) map_limit: Option<usize>,
    pub(super) start: Instant,
    /// Keep only the samples it names.
    pub(super) filter: Option<&'a NameFilter>,
    /// Settle files whose writer this says is gone (`None`: settle none).
    pub(super) exited: Option<&'a ExitedWriters>,
}

impl Pass<'_> {
    /// A collection of files once, with nothing kept for a next one.
    pub(super) fn once(options: CollectOptions, start: Instant) -> Pass<'static> {
        Pass {
            options,
            map_limit: None,
            start,
            filter: None,
            exited: None,
        }
    }
}

/// One collection of `paths` (in merge order) into `state`: the files
/// looked up in the file table, refreshed, merged, and reported.
pub(super) fn collect_paths(
    state: &mut CollectorState,
    paths: &Arc<Vec<PathBuf>>,
    pass: Pass<'_>,
) -> Scrape {
    let mut warnings = Vec::new();
    let mut stats = ScrapeStats::default();
    let (order, unsettled) = order_of(state, paths, pass.exited.is_some());
    refresh_files(
        state,
        paths,
        &order,
        unsettled.as_ref(),
        pass,
        &mut warnings,
    );
    let families = merge_order(
        state,
        &order,
        unsettled.as_ref(),
        pass,
        &mut stats,
        &mut warnings,
    );
    report_new_conflicts(state, &mut warnings);
    let quiet = unsettled
        .as_ref()
        .filter(|unsettled| unsettled.generation == state.plan_generation);
    let reports = file_reports(state, &order, quiet);
    let counts = state.report_counts;
    stats.files_ok = counts.ok;
    stats.files_bad = counts.bad;
    stats.files_vanished = counts.vanished;
    stats.bytes_read = counts.bytes_read;
    if pass.exited.is_some() {
        stats.files_settled = keep_unsettled(state, unsettled, &order);
    }
    give_back_memory(state);
    state.last_paths = Some((Arc::clone(paths), order));
    stats.series = families.iter().map(|f| f.samples.len()).sum();
    stats.duration = pass.start.elapsed();
    Scrape {
        families,
        files: reports,
        warnings,
        stats,
    }
}

/// The index in the file table of each of `paths` (the last collection's
/// when the listing is the same), and, for a quiet collection, the files
/// not settled, the only ones it looks at.
fn order_of(
    state: &mut CollectorState,
    paths: &Arc<Vec<PathBuf>>,
    settling: bool,
) -> (Vec<usize>, Option<Unsettled>) {
    let quiet_listing = std::mem::take(&mut state.quiet_listing);
    let (order, order_reused) = match state.last_paths.take() {
        Some((last, order)) if Arc::ptr_eq(&last, paths) => (order, true),
        _ => (index_paths(state, paths), false),
    };
    let generation = state.plan_generation;
    let unsettled = state.unsettled.take().filter(|unsettled| {
        settling && quiet_listing && order_reused && unsettled.generation == generation
    });
    if unsettled.is_none() {
        // Events may have brought settled files back.
        state.settle_version += 1;
    }
    (order, unsettled)
}

/// Queues a warning for each conflict of the plan not reported yet, in a
/// stable order.
fn report_new_conflicts(state: &mut CollectorState, warnings: &mut Vec<Warning>) {
    let mut new_conflicts: Vec<Conflict> = state
        .plan
        .conflicts
        .iter()
        .filter(|c| !state.reported_conflicts.contains(*c))
        .cloned()
        .collect();
    new_conflicts.sort_by_key(ToString::to_string);
    if state.reported_conflicts.len() > 10_000 {
        state.reported_conflicts.clear();
    }
    for conflict in new_conflicts {
        state.reported_conflicts.insert(conflict.clone());
        warnings.push(Warning::Conflict(conflict));
    }
}

/// Gives back memory a big file or a burst of keys left behind.
fn give_back_memory(state: &mut CollectorState) {
    if state.scratch.capacity() > SCRATCH_KEEP {
        state.scratch = Vec::new();
    }
    if state.values.capacity() > 2 * state.values.len() + 1024 {
        state.values.shrink_to_fit();
    }
    if state.interner.wants_sweep() {
        let forgotten = (state.files_forgotten, state.keys.forgotten());
        if forgotten == state.swept_at {
            // Growth from new files and keys only: nothing to give back, and
            // a sweep would throw away a plan that is still good.
            state.interner.rebaseline();
        } else {
            state.swept_at = forgotten;
            state.plan_cache.clear();
            state.plan = Plan::default();
            state.replan = true;
            state.interner.sweep();
        }
    }
}

/// The read buffer kept between collections; a bigger one is freed.
pub(super) const SCRATCH_KEEP: usize = 1 << 20;
