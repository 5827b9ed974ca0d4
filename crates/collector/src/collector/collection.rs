//! One collection: the steps of a collection of a listing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use multiprom_format::exemplar_file::EXEMPLAR_DIR;

use super::exemplars::{attach_exemplars, ExemplarSettling};
use super::file_table::FileTable;
use super::listing::mark_changes;
use super::merge::MergeState;
use super::natives::{merge_natives, native_files, read_live_beside, Settling};
use super::quiet::Unsettled;
use super::refresh::Refreshing;
use super::scrape::{CollectError, Exemplars, Natives, Scrape, ScrapeStats};
use super::state::{CollectorState, Pass};

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
    let refreshing = Refreshing {
        now: Instant::now(),
        map_limit: pass.map_limit,
        companion_maps: state.natives.mapped_files() + state.exemplars.mapped_files(),
        exited: pass.exited,
        generation: state.merge.plan_generation,
        collection: pass.collection,
    };
    if state
        .files
        .refresh_files(paths, &order, unsettled.as_ref(), refreshing, &mut warnings)
    {
        state.merge.replan = true;
    }
    // The companions are found before the merge, so that live workers'
    // are read on the other cores while this one merges the `*.db` files.
    let native_files = match pass.natives {
        Natives::Skip => None,
        Natives::Merge => native_files(
            &state.files.known,
            &order,
            pass.dir.map(|dir| (dir, Some(state.listing.listings))),
            pass.exited.map(|_| Settling {
                generation: state.merge.plan_generation,
                version: state.settling.settle_version,
                unsettled: unsettled
                    .as_ref()
                    .filter(|unsettled| unsettled.generation == state.merge.plan_generation)
                    .map(|unsettled| unsettled.refresh.as_slice()),
            }),
            &mut state.natives,
        ),
    };
    let maps = pass
        .map_limit
        .map(|limit| limit.saturating_sub(state.files.maps));
    // The exemplar files' share: what the natives' maps leave, while the
    // watch watches their subdirectory (what makes a map trusted).
    let exemplar_maps = maps
        .filter(|_| pass.exemplars == Exemplars::Attach && state.exemplars.saw_dir())
        .and_then(|maps| {
            let subdir = pass.dir?.join(EXEMPLAR_DIR);
            let watched = state.listing.watch.as_mut()?.watch_subdir(&subdir);
            watched.then(|| maps.saturating_sub(state.natives.mapped_files()))
        });
    let mut native_state = std::mem::take(&mut state.natives);
    let (families, live_natives) =
        read_live_beside(&mut native_state, native_files.as_ref(), maps, || {
            let (mut families, planned) = state.merge.merge_order(
                &mut state.files,
                &mut state.settling,
                &order,
                unsettled.as_ref(),
                pass,
                &mut warnings,
            );
            stats.planned = planned;
            state.merge.report_new_conflicts(&mut warnings);
            if pass.exemplars == Exemplars::Attach {
                attach_exemplars(
                    &state.files.known,
                    &order,
                    pass.dir.map(|dir| (dir, Some(state.listing.listings))),
                    pass.exited.map(|_| ExemplarSettling {
                        generation: state.merge.plan_generation,
                        full_look: state.listing.full_look,
                        version: state.settling.settle_version,
                    }),
                    exemplar_maps,
                    &mut families,
                    &mut state.exemplars,
                    &mut warnings,
                );
            }
            families
        });
    state.natives = native_state;
    let natives = merge_natives(
        native_files,
        live_natives,
        &mut state.natives,
        &mut warnings,
    );
    let quiet = unsettled
        .as_ref()
        .filter(|unsettled| unsettled.generation == state.merge.plan_generation);
    let reports = state.files.file_reports(&order, quiet);
    let counts = state.files.report_counts;
    stats.files_ok = counts.ok;
    stats.files_bad = counts.bad;
    stats.files_vanished = counts.vanished;
    stats.bytes_read = counts.bytes_read;
    if pass.exited.is_some() {
        stats.files_settled = state.settling.keep_unsettled(
            unsettled,
            &state.files.known,
            &state.merge.plan,
            state.merge.plan_generation,
            &order,
        );
    }
    give_back_memory(&mut state.files, &mut state.merge);
    state.listing.last_paths = Some((Arc::clone(paths), order));
    stats.series = families.iter().map(|f| f.samples.len()).sum();
    stats.duration = pass.start.elapsed();
    Scrape {
        families,
        natives,
        files: reports,
        warnings,
        stats,
    }
}

/// The listing of `dir`, from the watch's events when nothing changed,
/// else from the directory; marks files touched since the last collection.
pub(super) fn changed_listing(
    dir: &Path,
    state: &mut CollectorState,
    now: Instant,
) -> Result<Arc<Vec<PathBuf>>, CollectError> {
    let listed = state.listing.list(dir, now, state.collections)?;
    let look_again = mark_changes(
        dir,
        &listed,
        &mut state.files,
        &mut state.exemplars,
        &mut state.settling.exited_live,
    );
    if look_again {
        state.settling.look_again = true;
    }
    Ok(listed.paths)
}

/// The index in the file table of each of `paths` (the last collection's
/// when the listing is the same), and, for a quiet collection, the files
/// not settled, the only ones it looks at.
fn order_of(
    state: &mut CollectorState,
    paths: &Arc<Vec<PathBuf>>,
    settling: bool,
) -> (Vec<usize>, Option<Unsettled>) {
    let quiet_listing = std::mem::take(&mut state.listing.quiet_listing);
    let (order, order_reused) = match state.listing.last_paths.take() {
        Some((last, order)) if Arc::ptr_eq(&last, paths) => (order, true),
        _ => {
            let (order, changed) = state.files.index_paths(paths);
            if changed {
                state.merge.replan = true;
            }
            (order, false)
        }
    };
    let generation = state.merge.plan_generation;
    let unsettled = state.settling.unsettled.take().filter(|unsettled| {
        settling && quiet_listing && order_reused && unsettled.generation == generation
    });
    if unsettled.is_none() {
        // Events may have brought settled files back.
        state.settling.settle_version += 1;
    }
    (order, unsettled)
}

/// Gives back memory a big file or a burst of keys left behind: the
/// file table's, and the merge's, whose plan is dropped when the interner
/// it refers into is swept.
fn give_back_memory(files: &mut FileTable, merge: &mut MergeState) {
    merge.shrink_values();
    files.give_back_memory(|| merge.forget_plan());
}
