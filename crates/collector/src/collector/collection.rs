//! One collection: what a collector keeps between collections, and the steps of a collection of a listing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use multiprom_format::{MetricKind, OpenDir, ReadErrorKind};

use crate::filter::NameFilter;
use crate::intern::Interner;
use crate::keys::KeyTable;
use crate::plan::{Accumulators, Plan, PlanCache, RestrictedPlan};
use crate::problem::{Conflict, ProblemKind, Warning};
use crate::settled_sums::SettledSums;
use crate::tracked::{KeyHints, ReadFault};
use crate::watch::DirWatch;
use crate::writers::ExitedWriters;

use super::file_table::{index_paths, set_problem, FileEntry, PathKey};
use super::gather::cores;
use super::listing::KeptListing;
use super::merge::{apply, apply_restricted, build_plan, restricted_plan, same_files};
use super::quiet::Unsettled;
use super::read_ahead::{read_ahead, PREFETCH_MIN_FILES, PREFETCH_QUEUE, PREFETCH_READERS};
use super::refresh::{decide_maps, file_problem, has_file, refresh_file};
use super::reports::{file_reports, ReportCounts};
use super::scrape::{CollectOptions, FileReport, Scrape, ScrapeStats};
use super::settle::settle_gathered;

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

/// One collection of `paths` (in merge order) into `state`.
pub(super) fn collect_paths(
    state: &mut CollectorState,
    paths: &Arc<Vec<PathBuf>>,
    pass: Pass<'_>,
) -> Scrape {
    let Pass {
        options,
        map_limit,
        start,
        filter,
        exited,
    } = pass;
    let now = Instant::now();
    let mut warnings = Vec::new();
    let mut stats = ScrapeStats::default();

    let quiet_listing = std::mem::take(&mut state.quiet_listing);
    let (order, order_reused) = match state.last_paths.take() {
        Some((last, order)) if Arc::ptr_eq(&last, paths) => (order, true),
        _ => (index_paths(state, paths), false),
    };
    // A quiet collection looks only at the files that are not settled.
    let generation = state.plan_generation;
    let unsettled = state.unsettled.take().filter(|unsettled| {
        exited.is_some() && quiet_listing && order_reused && unsettled.generation == generation
    });
    if unsettled.is_none() {
        // Events may have brought settled files back.
        state.settle_version += 1;
    }

    let mut may_map = std::mem::take(&mut state.may_map);
    if let Some(unsettled) = &unsettled {
        let indexes: Vec<usize> = unsettled.refresh.iter().map(|&(index, _)| index).collect();
        decide_maps(state, &indexes, map_limit, &mut may_map);
        for (&index, &map) in indexes.iter().zip(&may_map) {
            refresh_file(state, index, map, now, None, exited, &mut warnings);
        }
        state.may_map = may_map;
    } else {
        decide_maps(state, &order, map_limit, &mut may_map);
        // Files read with `pread`: other threads open and read them ahead
        // while this one parses, through bounded queues.
        let reads = order
            .iter()
            .zip(&may_map)
            .filter(|&(&index, &map)| !map && has_file(state, index))
            .count();
        if reads >= PREFETCH_MIN_FILES && cores() > 1 {
            // `order` holds the index of each of `paths`, in the same order.
            let ahead: Vec<(&Path, MetricKind)> = paths
                .iter()
                .zip(&order)
                .zip(&may_map)
                .filter(|&(_, &map)| !map)
                .filter_map(|((path, &index), _)| {
                    let kind = state.known[index].as_ref()?.file.as_ref()?.name.kind();
                    Some((path.as_path(), kind))
                })
                .collect();
            // The files of a directory are opened by name in it.
            let dir = ahead
                .first()
                .and_then(|(path, _)| OpenDir::open(path.parent()?).ok());
            let (senders, receivers): (Vec<_>, Vec<_>) = (0..PREFETCH_READERS)
                .map(|_| std::sync::mpsc::sync_channel(PREFETCH_QUEUE))
                .unzip();
            std::thread::scope(|scope| {
                for (nth, sender) in senders.into_iter().enumerate() {
                    let (ahead, dir) = (&ahead, dir.as_ref());
                    // A thread that cannot be started drops its sender: this
                    // thread then reads the files itself.
                    let _ = std::thread::Builder::new().spawn_scoped(scope, move || {
                        read_ahead(ahead, dir, sender, nth, PREFETCH_READERS);
                    });
                }
                let mut batch = Vec::new().into_iter();
                // Batches come in turn from each reading thread. Once one is
                // missing (a reading thread stopped), no later one is taken:
                // its files would not be the ones it is taken for.
                let mut turn = (0..PREFETCH_READERS).cycle();
                let mut readers_stopped = false;
                for (&index, &map) in order.iter().zip(&may_map) {
                    let prefetched = if !map && has_file(state, index) {
                        if batch.len() == 0 && !readers_stopped {
                            let from = turn.next().and_then(|nth| receivers.get(nth));
                            match from.and_then(|receiver| receiver.recv().ok()) {
                                Some(next) => batch = next.into_iter(),
                                None => readers_stopped = true,
                            }
                        }
                        batch.next().flatten()
                    } else {
                        None
                    };
                    refresh_file(state, index, map, now, prefetched, exited, &mut warnings);
                }
                // Dropping the receivers stops the reading threads if this side
                // stopped early.
                drop(receivers);
            });
        } else {
            for (&index, &map) in order.iter().zip(&may_map) {
                refresh_file(state, index, map, now, None, exited, &mut warnings);
            }
        }
        state.may_map = may_map;
    }

    let mut families = Vec::new();
    // At most twice: a file that shrank under its map is dropped and the
    // plan rebuilt without it.
    for _ in 0..3 {
        // A quiet collection's files are the last one's, and a file whose
        // entries changed asked for a new plan.
        let same = unsettled.is_some() || same_files(&state.plan, &order, &state.known);
        if state.replan || !same {
            state.plan = build_plan(state, &order, options);
            state.interner.settle();
            state.restricted.clear();
            state.plan_generation += 1;
            state.replan = false;
            stats.planned = true;
        }
        let settled = exited.map(|_| state.plan_generation);
        let scope = unsettled
            .as_ref()
            .filter(|unsettled| unsettled.generation == state.plan_generation)
            .map(|unsettled| unsettled.planned.as_slice());
        let version = state.settle_version;
        let applied = match filter {
            None => apply(
                &state.known,
                &state.plan,
                settled.map(|generation| (generation, version, &mut state.settled_sums)),
                scope,
                &mut state.accumulators,
                &mut state.values,
            )
            .map(|()| state.accumulators.finish(&state.plan)),
            Some(filter) => {
                let (restricted, sums) =
                    restricted_plan(&mut state.restricted, &state.plan, filter);
                apply_restricted(
                    &state.known,
                    &state.plan,
                    restricted,
                    settled.map(|generation| (generation, version, sums)),
                    scope,
                    &mut state.accumulators,
                    &mut state.values,
                )
                .map(|()| {
                    // Only the samples named (a most-recent family was
                    // merged whole, for its order); a family left with
                    // nothing is left out, as Python's `_restricted_metric`
                    // leaves it out.
                    filter.restrict(
                        state
                            .accumulators
                            .finish_restricted(&state.plan, restricted),
                    )
                })
            }
        };
        match applied {
            Ok(merged) => {
                families = merged;
                if let Some(generation) = settled {
                    let collection = state.collections;
                    let newly = match scope {
                        Some(planned) => {
                            let indexes = planned.iter().map(|p| p.index);
                            settle_gathered(&mut state.known, indexes, generation, collection)
                        }
                        None => {
                            let indexes = state.plan.files.iter().map(|p| p.index);
                            settle_gathered(&mut state.known, indexes, generation, collection)
                        }
                    };
                    if newly > 0 {
                        state.settle_version += 1;
                    }
                }
                break;
            }
            Err(index) => {
                if let Some(known) = state.known[index].as_mut() {
                    if let Some(file) = &mut known.file {
                        if file.is_mapped() {
                            state.maps -= 1;
                        }
                        file.reset(&mut state.keys);
                    }
                    let trouble = ReadFault {
                        offset: 0,
                        kind: ProblemKind::Read(ReadErrorKind::Io(
                            "the file shrank under its memory map".into(),
                        )),
                    };
                    let problem = file_problem(&known.path, trouble);
                    set_problem(known, Some(problem), &mut warnings);
                }
                state.replan = true;
            }
        }
    }

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

    let quiet = unsettled
        .as_ref()
        .filter(|unsettled| unsettled.generation == state.plan_generation);
    let reports = file_reports(state, &order, quiet);
    let counts = state.report_counts;
    stats.files_ok = counts.ok;
    stats.files_bad = counts.bad;
    stats.files_vanished = counts.vanished;
    stats.bytes_read = counts.bytes_read;
    if exited.is_some() {
        let next = match unsettled {
            Some(unsettled) if unsettled.generation == state.plan_generation => {
                unsettled.still(state)
            }
            _ => Unsettled::of(state, &order),
        };
        stats.files_settled = next.settled;
        state.unsettled = Some(next);
    }

    // Give back memory a big file or a burst of keys left behind.
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
    state.last_paths = Some((Arc::clone(paths), order));
    stats.series = families.iter().map(|f| f.samples.len()).sum();
    stats.duration = start.elapsed();
    Scrape {
        families,
        files: reports,
        warnings,
        stats,
    }
}

/// The read buffer kept between collections; a bigger one is freed.
pub(super) const SCRATCH_KEEP: usize = 1 << 20;
