//! Refreshing a collection's files: which may be mapped, then each read, here or through the read-ahead pipeline.

use std::path::PathBuf;

use crate::problem::Warning;

use super::file_entry::FileEntry;
use super::file_table::FileTable;
use super::quiet::Unsettled;
use super::refresh::Refreshing;

impl FileTable {
    /// Refreshes the files of `order` (of a quiet collection, only the ones
    /// not settled), deciding first which may be mapped; a cold collection's
    /// many reads go through the read-ahead threads. `true`: the plan must
    /// be worked out again.
    pub(super) fn refresh_files(
        &mut self,
        paths: &[PathBuf],
        order: &[usize],
        unsettled: Option<&Unsettled>,
        how: Refreshing<'_>,
        warnings: &mut Vec<Warning>,
    ) -> bool {
        let mut replan = false;
        let mut may_map = std::mem::take(&mut self.may_map);
        match unsettled {
            Some(unsettled) => {
                let indexes: Vec<usize> =
                    unsettled.refresh.iter().map(|&(index, _)| index).collect();
                self.decide_maps(&indexes, how, &mut may_map);
                for (&index, &map) in indexes.iter().zip(&may_map) {
                    replan |= self.refresh_file(index, map, None, how, warnings);
                }
            }
            None => {
                self.decide_maps(order, how, &mut may_map);
                if self.worth_reading_ahead(order, &may_map) {
                    replan |= self.refresh_reading_ahead(paths, order, &may_map, how, warnings);
                } else {
                    for (&index, &map) in order.iter().zip(&may_map) {
                        replan |= self.refresh_file(index, map, None, how, warnings);
                    }
                }
            }
        }
        self.may_map = may_map;
        replan
    }

    /// Decides, for each file of `order`, whether this collection may map it
    /// (`out[i]` for `order[i]`): a file already mapped stays mapped; any other
    /// is mapped from the second collection that reads it without trouble on,
    /// within `how.map_limit` maps, the companion files' included (`None`: no
    /// maps at all).
    ///
    /// A file's first collection reads it with `pread`: a collector that is
    /// used once (`multiprom scrape`, a process's first scrape) then costs one
    /// read per file instead of setting up a map, touching its pages and
    /// tearing it down, which costs several times more; a file still there at
    /// the next collection is worth mapping, so that later collections read
    /// its values without a system call.
    pub(super) fn decide_maps(&self, order: &[usize], how: Refreshing<'_>, out: &mut Vec<bool>) {
        out.clear();
        let Some(limit) = how.map_limit else {
            out.resize(order.len(), false);
            return;
        };
        // Live workers' native histogram files share the limit.
        let mut maps = self.maps + how.companion_maps;
        out.extend(order.iter().map(|&index| {
            let Some(Some(FileEntry {
                file: Some(file), ..
            })) = self.known.get(index)
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
}
