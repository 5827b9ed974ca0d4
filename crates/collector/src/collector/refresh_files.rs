//! Refreshing a collection's files: which may be mapped, then each read, here or through the read-ahead pipeline.

use std::path::PathBuf;
use std::time::Instant;

use crate::problem::Warning;

use super::file_entry::FileEntry;
use super::quiet::Unsettled;
use super::read_ahead::{refresh_reading_ahead, worth_reading_ahead};
use super::refresh::refresh_file;
use super::state::{CollectorState, Pass};

/// Refreshes the files of `order` (of a quiet collection, only the ones
/// not settled), deciding first which may be mapped; a cold collection's
/// many reads go through the read-ahead threads.
pub(super) fn refresh_files(
    state: &mut CollectorState,
    paths: &[PathBuf],
    order: &[usize],
    unsettled: Option<&Unsettled>,
    pass: Pass<'_>,
    warnings: &mut Vec<Warning>,
) {
    let now = Instant::now();
    let mut may_map = std::mem::take(&mut state.files.may_map);
    match unsettled {
        Some(unsettled) => {
            let indexes: Vec<usize> = unsettled.refresh.iter().map(|&(index, _)| index).collect();
            decide_maps(state, &indexes, pass.map_limit, &mut may_map);
            for (&index, &map) in indexes.iter().zip(&may_map) {
                refresh_file(state, index, map, now, None, pass.exited, warnings);
            }
        }
        None => {
            decide_maps(state, order, pass.map_limit, &mut may_map);
            if worth_reading_ahead(state, order, &may_map) {
                refresh_reading_ahead(state, paths, order, &may_map, now, pass.exited, warnings);
            } else {
                for (&index, &map) in order.iter().zip(&may_map) {
                    refresh_file(state, index, map, now, None, pass.exited, warnings);
                }
            }
        }
    }
    state.files.may_map = may_map;
}

/// Decides, for each file of `order`, whether this collection may map it
/// (`out[i]` for `order[i]`): a file already mapped stays mapped; any other
/// is mapped from the second collection that reads it without trouble on,
/// within `map_limit` maps (`None`: no maps at all).
///
/// A file's first collection reads it with `pread`: a collector that is
/// used once (`multiprom scrape`, a process's first scrape) then costs one
/// read per file instead of setting up a map, touching its pages and
/// tearing it down, which costs several times more; a file still there at
/// the next collection is worth mapping, so that later collections read
/// its values without a system call.
pub(super) fn decide_maps(
    state: &CollectorState,
    order: &[usize],
    map_limit: Option<usize>,
    out: &mut Vec<bool>,
) {
    out.clear();
    let Some(limit) = map_limit else {
        out.resize(order.len(), false);
        return;
    };
    // Live workers' native histogram files share the limit.
    let mut maps = state.files.maps + state.natives.mapped_files() + state.exemplars.mapped_files();
    out.extend(order.iter().map(|&index| {
        let Some(Some(FileEntry {
            file: Some(file), ..
        })) = state.files.known.get(index)
        else {
            return false;
        };
        if file.is_mapped() {
            return true;
        }
        if !file.was_read() || maps >= limit {
            return false;
        }
        maps += 1;
        true
    }));
}
