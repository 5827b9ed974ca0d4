//! The file table: a listing's paths looked up by path, new files added and those no longer listed forgotten.
//!
//! It owns what is known of each file between collections: its entry, the
//! keys its entries were decoded into, whether it is mapped, and the last
//! collection's report of it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::intern::Interner;
use crate::keys::KeyTable;
use crate::tracked::{KeyHints, TrackedFile};

use super::file_entry::{file_name, path_bytes, FileEntry, PathKey};
use super::report_counts::ReportCounts;
use super::scrape::FileReport;

/// The files a collector has seen, by index and by path, with what their
/// entries' keys decode to and how many of them are mapped.
#[derive(Debug, Default)]
pub(super) struct FileTable {
    /// Each file seen, at the index it keeps while listed (`None`: a slot
    /// left free).
    pub(super) known: Vec<Option<FileEntry>>,
    /// The index in `known` of each path (the key shares `FileEntry::path`).
    pub(super) by_path: foldhash::HashMap<PathKey, usize>,
    /// Slots of `known` left empty by forgotten files, reused by new ones.
    free: Vec<usize>,
    pub(super) keys: KeyTable,
    pub(super) interner: Interner,
    pub(super) hints: KeyHints,
    /// The read buffer files are parsed from, kept between collections
    /// (see `SCRATCH_KEEP`).
    pub(super) scratch: Vec<u8>,
    /// How many files of `known` are mapped.
    pub(super) maps: usize,
    /// Whether each file of the collection under way may be mapped (see
    /// `decide_maps`), kept to reuse its allocation.
    pub(super) may_map: Vec<bool>,
    /// The last collection's file reports, and what they count.
    pub(super) reports: Arc<[FileReport]>,
    pub(super) report_counts: ReportCounts,
    /// Files forgotten (no longer listed) so far.
    files_forgotten: u64,
    /// `files_forgotten` and the key table's forgotten keys at the last
    /// interner sweep: when both are unchanged there is nothing to sweep.
    swept_at: (u64, u64),
}

impl FileTable {
    /// The index in `known` of each of `paths`, adding new files and
    /// forgetting those no longer listed; and whether it did either, when
    /// the plan must be worked out again.
    pub(super) fn index_paths(&mut self, paths: &[PathBuf]) -> (Vec<usize>, bool) {
        let mut order: Vec<usize> = Vec::with_capacity(paths.len());
        let mut changed = false;
        // Sized once for a first listing of thousands of files, rather than
        // grown by doubling.
        self.by_path
            .reserve(paths.len().saturating_sub(self.by_path.len()));
        self.known
            .reserve(paths.len().saturating_sub(self.known.len()));
        for path in paths {
            let index = match self.by_path.get(path_bytes(path)) {
                Some(&index) => index,
                None => {
                    let shared: Arc<Path> = Arc::from(path.as_path());
                    let known = FileEntry {
                        path: Arc::clone(&shared),
                        file: file_name(path).map(TrackedFile::new),
                        problem: None,
                        last_problem: None,
                    };
                    let index = match self.free.pop() {
                        Some(index) => {
                            self.known[index] = Some(known);
                            index
                        }
                        None => {
                            self.known.push(Some(known));
                            self.known.len() - 1
                        }
                    };
                    self.by_path.insert(PathKey(shared), index);
                    changed = true;
                    index
                }
            };
            order.push(index);
        }
        // Forget files no longer listed.
        let mut listed = vec![false; self.known.len()];
        for &index in &order {
            listed[index] = true;
        }
        for (index, listed) in listed.into_iter().enumerate() {
            if listed {
                continue;
            }
            if let Some(mut known) = self.known[index].take() {
                if let Some(file) = &mut known.file {
                    if file.is_mapped() {
                        self.maps -= 1;
                    }
                    file.reset(&mut self.keys);
                }
                self.by_path.remove(path_bytes(&known.path));
                self.free.push(index);
                changed = true;
                self.files_forgotten += 1;
            }
        }
        (order, changed)
    }

    /// Gives back memory a big file or a burst of keys left behind.
    /// `before_sweep` runs before the interner is swept: what still holds
    /// interned names (the plan) must let go of them first, or the sweep
    /// cannot free them.
    pub(super) fn give_back_memory(&mut self, before_sweep: impl FnOnce()) {
        if self.scratch.capacity() > SCRATCH_KEEP {
            self.scratch = Vec::new();
        }
        if self.interner.wants_sweep() {
            let forgotten = (self.files_forgotten, self.keys.forgotten());
            if forgotten == self.swept_at {
                // Growth from new files and keys only: nothing to give back, and
                // a sweep would throw away a plan that is still good.
                self.interner.rebaseline();
            } else {
                self.swept_at = forgotten;
                before_sweep();
                self.interner.sweep();
            }
        }
    }
}

/// The read buffer kept between collections; a bigger one is freed.
pub(super) const SCRATCH_KEEP: usize = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(names: &[&str]) -> Vec<PathBuf> {
        names.iter().map(|n| Path::new("/d").join(n)).collect()
    }

    // New paths are added in listing order; a path no longer listed is
    // forgotten and its slot reused by the next new path; a listing of the
    // same paths changes nothing.
    #[test]
    fn the_file_table_adds_forgets_and_reuses_slots() {
        let mut files = FileTable::default();
        let first = paths(&["counter_1.db", "counter_2.db", "notes.db"]);
        let (order, changed) = files.index_paths(&first);
        assert_eq!(order, [0, 1, 2]);
        assert!(changed);
        assert!(files.known[2].as_ref().is_some_and(|k| k.file.is_none()));

        let (order, changed) = files.index_paths(&first);
        assert_eq!(order, [0, 1, 2]);
        assert!(!changed);

        let second = paths(&["counter_1.db", "notes.db"]);
        let (order, changed) = files.index_paths(&second);
        assert_eq!(order, [0, 2]);
        assert!(changed && files.known[1].is_none());
        assert_eq!(files.files_forgotten, 1);
        assert!(!files.by_path.contains_key(path_bytes(&first[1])));

        let third = paths(&["gauge_all_3.db", "counter_1.db", "notes.db"]);
        assert_eq!(files.index_paths(&third).0, [1, 0, 2]);
        assert_eq!(files.by_path.get(path_bytes(&third[0])), Some(&1));
    }
}
