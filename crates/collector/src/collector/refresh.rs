//! Refreshing one file: reading it, and the problem it has.

use std::path::Path;
use std::time::Instant;

use multiprom_format::{FileName, ParseError, ReadError, ReadErrorKind};

use crate::problem::Warning;
use crate::tracked::{ParseContext, Prefetched, Refreshed, Settled};
use crate::writers::{ExitedWriters, WrittenFile};

use super::file_entry::set_problem;
use super::file_table::FileTable;

/// What a collection's refresh of its files goes by.
#[derive(Clone, Copy)]
pub(super) struct Refreshing<'a> {
    pub(super) now: Instant,
    /// Files may be mapped, up to this many maps (`None`: none).
    pub(super) map_limit: Option<usize>,
    /// The maps the native histogram and exemplar files hold: they share
    /// the limit.
    pub(super) companion_maps: usize,
    /// Settle files whose writer this says is gone (`None`: settle none).
    pub(super) exited: Option<&'a ExitedWriters>,
    /// The generation of the plan a settled file is settled for.
    pub(super) generation: u64,
    /// The collection under way, kept by a file found to settle.
    pub(super) collection: u64,
}

impl FileTable {
    /// Refreshes the file at `known[index]` and records its problem. A
    /// settled file is left as it is; with `exited`, a good file whose
    /// writer it says is gone becomes one to settle. `true`: the plan must
    /// be worked out again (the file's entries changed, or it is bad or was).
    pub(super) fn refresh_file(
        &mut self,
        index: usize,
        may_map: bool,
        prefetched: Option<Prefetched>,
        how: Refreshing<'_>,
        warnings: &mut Vec<Warning>,
    ) -> bool {
        let Some(known) = self.known[index].as_mut() else {
            return false;
        };
        if how.exited.is_some()
            && known.problem.is_none()
            && known
                .file
                .as_ref()
                .is_some_and(|file| file.is_settled(how.generation))
        {
            return false;
        }
        let mut replan = false;
        let was_bad = known.problem.is_some();
        let problem = match &mut known.file {
            None => Some(name_problem(&known.path)),
            Some(file) => {
                let was_mapped = file.is_mapped();
                let mut ctx = ParseContext {
                    keys: &mut self.keys,
                    interner: &mut self.interner,
                    hints: &mut self.hints,
                    scratch: &mut self.scratch,
                };
                let result = file.refresh(&known.path, may_map, &mut ctx, how.now, prefetched);
                match (was_mapped, file.is_mapped()) {
                    (false, true) => self.maps += 1,
                    (true, false) => self.maps -= 1,
                    _ => {}
                }
                match result {
                    Ok(refreshed) => {
                        if refreshed == Refreshed::Changed {
                            replan = true;
                        }
                        if let Some(exited) = how.exited {
                            let gone = |identity| {
                                exited.test(&WrittenFile {
                                    name: &file.name,
                                    identity,
                                    since: file.last_event(),
                                })
                            };
                            if file.settled == Settled::No
                                && file.is_mapped()
                                && file.identity().is_some_and(gone)
                            {
                                file.settled = Settled::WriterGone;
                                file.writer_gone_in = how.collection;
                            }
                        }
                        None
                    }
                    Err(trouble) => Some(file_problem(&known.path, trouble)),
                }
            }
        };
        if was_bad || problem.is_some() {
            replan = true;
        }
        set_problem(known, problem, warnings);
        replan
    }

    /// Whether `known[index]` is a file to read (not a bad name).
    pub(super) fn has_file(&self, index: usize) -> bool {
        self.known[index]
            .as_ref()
            .is_some_and(|known| known.file.is_some())
    }

    /// Drops the file at `index`, which shrank under its map, with its
    /// problem: the plan must then be worked out again without it.
    pub(super) fn drop_shrunk(&mut self, index: usize, warnings: &mut Vec<Warning>) {
        if let Some(known) = self.known[index].as_mut() {
            if let Some(file) = &mut known.file {
                if file.is_mapped() {
                    self.maps -= 1;
                }
                file.reset(&mut self.keys);
            }
            let trouble = ParseError::new(0, ReadErrorKind::ShrankUnderMap);
            let problem = file_problem(&known.path, trouble);
            set_problem(known, Some(problem), warnings);
        }
    }
}

/// Why a file whose name is not a metrics file name is skipped.
pub(super) fn name_problem(path: &Path) -> ReadError {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Only called for names that did not parse; parse again for the reason.
    let kind = match FileName::parse(&name) {
        Err(e) => ReadErrorKind::BadFileName(e),
        Ok(_) => ReadErrorKind::NotAMetricsFileName,
    };
    ReadError::new(path, 0, kind)
}

pub(super) fn file_problem(path: &Path, trouble: ParseError) -> ReadError {
    let problem = trouble.at(path);
    // Opening a symbolic link whose target is missing also says "not found",
    // but unlike a reaped worker's file it stays: damage, not a race.
    let dangling = problem.is_vanished()
        && std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if dangling {
        ReadError::new(path, problem.offset, ReadErrorKind::DanglingSymlink)
    } else {
        problem
    }
}
