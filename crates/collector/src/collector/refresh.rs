//! Refreshing one file: reading it, and the problem it has.

use std::path::Path;
use std::time::Instant;

use multiprom_format::{FileName, ParseError, ReadError, ReadErrorKind};

use crate::problem::Warning;
use crate::tracked::{ParseContext, Prefetched, Refreshed, Settled};
use crate::writers::{ExitedWriters, WrittenFile};

use super::file_entry::set_problem;
use super::state::CollectorState;

/// Refreshes the file at `state.files.known[index]` and records its problem. A
/// settled file is left as it is; with `exited`, a good file whose writer
/// it says is gone becomes one to settle.
pub(super) fn refresh_file(
    state: &mut CollectorState,
    index: usize,
    may_map: bool,
    now: Instant,
    prefetched: Option<Prefetched>,
    exited: Option<&ExitedWriters>,
    warnings: &mut Vec<Warning>,
) {
    let Some(known) = state.files.known[index].as_mut() else {
        return;
    };
    if exited.is_some()
        && known.problem.is_none()
        && known
            .file
            .as_ref()
            .is_some_and(|file| file.is_settled(state.merge.plan_generation))
    {
        return;
    }
    let collection = state.collections;
    let was_bad = known.problem.is_some();
    let problem = match &mut known.file {
        None => Some(name_problem(&known.path)),
        Some(file) => {
            let was_mapped = file.is_mapped();
            let mut ctx = ParseContext {
                keys: &mut state.files.keys,
                interner: &mut state.files.interner,
                hints: &mut state.files.hints,
                scratch: &mut state.files.scratch,
            };
            let result = file.refresh(&known.path, may_map, &mut ctx, now, prefetched);
            match (was_mapped, file.is_mapped()) {
                (false, true) => state.files.maps += 1,
                (true, false) => state.files.maps -= 1,
                _ => {}
            }
            match result {
                Ok(refreshed) => {
                    if refreshed == Refreshed::Changed {
                        state.merge.replan = true;
                    }
                    if let Some(exited) = exited {
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
                            file.writer_gone_in = collection;
                        }
                    }
                    None
                }
                Err(trouble) => Some(file_problem(&known.path, trouble)),
            }
        }
    };
    if was_bad || problem.is_some() {
        state.merge.replan = true;
    }
    set_problem(known, problem, warnings);
}

/// Whether `state.files.known[index]` is a file to read (not a bad name).
pub(super) fn has_file(state: &CollectorState, index: usize) -> bool {
    state.files.known[index]
        .as_ref()
        .is_some_and(|known| known.file.is_some())
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

/// Drops the file at `index`, which shrank under its map, with its
/// problem: the plan is then worked out again without it.
pub(super) fn drop_shrunk(state: &mut CollectorState, index: usize, warnings: &mut Vec<Warning>) {
    if let Some(known) = state.files.known[index].as_mut() {
        if let Some(file) = &mut known.file {
            if file.is_mapped() {
                state.files.maps -= 1;
            }
            file.reset(&mut state.files.keys);
        }
        let trouble = ParseError::new(0, ReadErrorKind::ShrankUnderMap);
        let problem = file_problem(&known.path, trouble);
        set_problem(known, Some(problem), warnings);
    }
    state.merge.replan = true;
}
