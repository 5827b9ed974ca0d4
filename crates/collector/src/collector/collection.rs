//! One collection: the steps of a collection of a listing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use multiprom_format::exemplar_file::EXEMPLAR_DIR;

use super::exemplars::{attach_exemplars, ExemplarSettling};
use super::file_table::FileTable;
use super::listing::{mark_changes, Listing};
use super::merge::MergeState;
use super::natives::{merge_natives, native_files, read_live_beside, Settling};
use super::pass::Pass;
use super::quiet::Unsettled;
use super::refresh::Refreshing;
use super::scrape::{CollectError, Exemplars, Natives, Scrape, ScrapeStats};
use super::settle::SettleState;
use super::state::CollectorState;

/// One collection of `paths` (in merge order) into `state`: the files
/// looked up in the file table, refreshed, merged, and reported.
pub(super) fn collect_paths(
    state: &mut CollectorState,
    paths: &Arc<Vec<PathBuf>>,
    pass: Pass<'_>,
) -> Scrape {
    let CollectorState {
        files,
        listing,
        merge,
        settling,
        natives,
        exemplars,
        collections: _,
    } = state;
    let mut warnings = Vec::new();
    let mut stats = ScrapeStats::default();
    let settle = pass.exited.is_some();
    let (order, unsettled) = order_of(files, listing, merge, settling, paths, settle);
    let refreshing = Refreshing {
        now: Instant::now(),
        map_limit: pass.map_limit,
        companion_maps: natives.mapped_files() + exemplars.mapped_files(),
        exited: pass.exited,
        generation: merge.plan_generation,
        collection: pass.collection,
    };
    merge.replan |=
        files.refresh_files(paths, &order, unsettled.as_ref(), refreshing, &mut warnings);
    // The companions are found before the merge, so that live workers'
    // are read on the other cores while this one merges the `*.db` files.
    let dir = pass.dir.map(|dir| (dir, Some(listing.listings)));
    let native_files = match pass.natives {
        Natives::Skip => None,
        Natives::Merge => native_files(
            &files.known,
            &order,
            dir,
            pass.exited.map(|_| Settling {
                generation: merge.plan_generation,
                version: settling.settle_version,
                unsettled: unsettled
                    .as_ref()
                    .filter(|unsettled| unsettled.generation == merge.plan_generation)
                    .map(|unsettled| unsettled.refresh.as_slice()),
            }),
            natives,
        ),
    };
    let maps = pass.map_limit.map(|limit| limit.saturating_sub(files.maps));
    // The exemplar files' share: what the natives' maps leave, while the
    // watch watches their subdirectory (what makes a map trusted).
    let exemplar_maps = maps
        .filter(|_| pass.exemplars == Exemplars::Attach && exemplars.saw_dir())
        .and_then(|maps| {
            let subdir = pass.dir?.join(EXEMPLAR_DIR);
            let watched = listing.watch.as_mut()?.watch_subdir(&subdir);
            watched.then(|| maps.saturating_sub(natives.mapped_files()))
        });
    let (families, live_natives) = read_live_beside(natives, native_files.as_ref(), maps, || {
        let (mut families, planned) = merge.merge_order(
            files,
            settling,
            &order,
            unsettled.as_ref(),
            pass,
            &mut warnings,
        );
        stats.planned = planned;
        merge.report_new_conflicts(&mut warnings);
        if pass.exemplars == Exemplars::Attach {
            attach_exemplars(
                &files.known,
                &order,
                dir,
                pass.exited.map(|_| ExemplarSettling {
                    generation: merge.plan_generation,
                    full_look: listing.full_look,
                    version: settling.settle_version,
                }),
                exemplar_maps,
                &mut families,
                exemplars,
                &mut warnings,
            );
        }
        families
    });
    let merged_natives = merge_natives(native_files, live_natives, natives, &mut warnings);
    let quiet = unsettled
        .as_ref()
        .filter(|unsettled| unsettled.generation == merge.plan_generation);
    let reports = files.file_reports(&order, quiet);
    files.report_counts.count_into(&mut stats);
    if settle {
        stats.files_settled = settling.keep_unsettled(
            unsettled,
            &files.known,
            &merge.plan,
            merge.plan_generation,
            &order,
        );
    }
    give_back_memory(files, merge);
    listing.keep_order(paths, order);
    stats.series = families.iter().map(|f| f.samples.len()).sum();
    stats.duration = pass.start.elapsed();
    Scrape {
        families,
        natives: merged_natives,
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
/// when the listing is the same), and, for a quiet collection (`settle`,
/// on a quiet listing of the same paths), the files not settled, the only
/// ones it looks at.
fn order_of(
    files: &mut FileTable,
    listing: &mut Listing,
    merge: &mut MergeState,
    settling: &mut SettleState,
    paths: &Arc<Vec<PathBuf>>,
    settle: bool,
) -> (Vec<usize>, Option<Unsettled>) {
    let quiet_listing = std::mem::take(&mut listing.quiet_listing);
    let (order, order_reused) = match listing.take_last_order(paths) {
        Some(order) => (order, true),
        None => {
            let (order, changed) = files.index_paths(paths);
            merge.replan |= changed;
            (order, false)
        }
    };
    let quiet = settle && quiet_listing && order_reused;
    let unsettled = settling.take_unsettled(quiet, merge.plan_generation);
    (order, unsettled)
}

/// Gives back memory a big file or a burst of keys left behind: the
/// file table's, and the merge's, whose plan is dropped when the interner
/// it refers into is swept.
fn give_back_memory(files: &mut FileTable, merge: &mut MergeState) {
    merge.shrink_values();
    files.give_back_memory(|| merge.forget_plan());
}
