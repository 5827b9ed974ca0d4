//! The file table: every `*.db` path the collector has seen, by index and by path, with what it knows of each file.

use std::borrow::Borrow;
use std::ffi::OsStr;
use std::hash::{Hash, Hasher};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use multiprom_format::{FileName, ReadError};

use crate::problem::Warning;
use crate::stamp::FileStamp;
use crate::tracked::TrackedFile;

use super::collection::CollectorState;

/// A `*.db` name the collector has seen, with what it knows of the file.
#[derive(Debug)]
pub(super) struct FileEntry {
    pub(super) path: Arc<Path>,
    /// The parsed name (`None`: not a metrics file name).
    pub(super) file: Option<TrackedFile>,
    /// Why it contributes nothing now, if it does not. Boxed, as is the
    /// next field: rare, and big inline, they spread the file table (walked
    /// several times a scrape) over twice the memory.
    pub(super) problem: Option<Box<ReadError>>,
    /// The problem last reported, so each is reported once.
    pub(super) last_problem: Option<Box<ProblemState>>,
}

/// A path as a hash key, by its bytes: paths are compared as given, as
/// Python compares the names `glob` returns or a caller passes (every path
/// of a listing is the directory joined with a name, so they agree).
/// `Path`'s own `Hash` walks the components instead, so that `a//b` and
/// `a/b` hash alike; that took a few hundred instructions per file, on every
/// collection, on the collecting thread.
#[derive(Debug)]
pub(super) struct PathKey(pub(super) Arc<Path>);

pub(super) fn path_bytes(path: &Path) -> &[u8] {
    path.as_os_str().as_bytes()
}

impl PartialEq for PathKey {
    fn eq(&self, other: &Self) -> bool {
        path_bytes(&self.0) == path_bytes(&other.0)
    }
}

impl Eq for PathKey {}

// Hashes as the `[u8]` it borrows as, so lookups by bytes find it.
impl Hash for PathKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        path_bytes(&self.0).hash(state);
    }
}

impl Borrow<[u8]> for PathKey {
    fn borrow(&self) -> &[u8] {
        path_bytes(&self.0)
    }
}

/// What a skipped file looked like when its problem was reported: the problem
/// plus the file's identity, size, and modification and change times. A warning is due when
/// this changes, so a file stuck in one bad state is reported once, and one
/// that is replaced, rewritten or damaged differently is reported again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ProblemState {
    pub(super) problem: ReadError,
    pub(super) stamp: Option<FileStamp>,
}

/// The tracked file at `index` of the file table, if there is one.
pub(super) fn tracked_file(known: &[Option<FileEntry>], index: usize) -> Option<&TrackedFile> {
    known.get(index)?.as_ref()?.file.as_ref()
}

/// The index in `state.known` of each of `paths`, adding new files and
/// forgetting those no longer listed.
pub(super) fn index_paths(state: &mut CollectorState, paths: &[PathBuf]) -> Vec<usize> {
    let mut order: Vec<usize> = Vec::with_capacity(paths.len());
    // Sized once for a first listing of thousands of files, rather than
    // grown by doubling.
    state
        .by_path
        .reserve(paths.len().saturating_sub(state.by_path.len()));
    state
        .known
        .reserve(paths.len().saturating_sub(state.known.len()));
    for path in paths {
        let index = match state.by_path.get(path_bytes(path)) {
            Some(&index) => index,
            None => {
                let shared: Arc<Path> = Arc::from(path.as_path());
                let known = FileEntry {
                    path: Arc::clone(&shared),
                    file: file_name(path).map(TrackedFile::new),
                    problem: None,
                    last_problem: None,
                };
                let index = match state.free.pop() {
                    Some(index) => {
                        state.known[index] = Some(known);
                        index
                    }
                    None => {
                        state.known.push(Some(known));
                        state.known.len() - 1
                    }
                };
                state.by_path.insert(PathKey(shared), index);
                state.replan = true;
                index
            }
        };
        order.push(index);
    }
    // Forget files no longer listed.
    let mut listed = vec![false; state.known.len()];
    for &index in &order {
        listed[index] = true;
    }
    for (index, listed) in listed.into_iter().enumerate() {
        if listed {
            continue;
        }
        if let Some(mut known) = state.known[index].take() {
            if let Some(file) = &mut known.file {
                if file.is_mapped() {
                    state.maps -= 1;
                }
                file.reset(&mut state.keys);
            }
            state.by_path.remove(path_bytes(&known.path));
            state.free.push(index);
            state.replan = true;
            state.files_forgotten += 1;
        }
    }
    order
}

/// Records `problem` as the file's current one and queues a warning when it
/// differs from the last one reported.
pub(super) fn set_problem(
    known: &mut FileEntry,
    problem: Option<ReadError>,
    warnings: &mut Vec<Warning>,
) {
    let problem_state = problem.as_ref().map(|problem| ProblemState {
        problem: problem.clone(),
        stamp: FileStamp::of(&known.path),
    });
    if problem_state.as_ref() != known.last_problem.as_deref() {
        if let Some(p) = &problem {
            warnings.push(Warning::File(p.clone()));
        }
        known.last_problem = problem_state.map(Box::new);
    }
    known.problem = problem.map(Box::new);
}

/// The file name as Python reads it: by its text, with bytes that are not
/// UTF-8 replaced (Python's `glob` returns them as lone surrogates and
/// merges the file all the same; only a gauge in an `all` mode shows the
/// id, as the `pid` label).
pub(super) fn file_name(path: &Path) -> Option<FileName> {
    // What follows the last `/` is the name when it is a plain one (always,
    // for a listed file): taken by bytes, as walking the path's components
    // costs more than parsing the name.
    let name = match path_bytes(path).rsplit(|&b| b == b'/').next() {
        Some(name) if !name.is_empty() && name != b"." && name != b".." => OsStr::from_bytes(name),
        _ => path.file_name()?,
    };
    // `to_str` first: it only checks, where `to_string_lossy` also scans
    // for what to replace.
    match name.to_str() {
        Some(text) => FileName::parse(text).ok(),
        None => FileName::parse(&name.to_string_lossy()).ok(),
    }
}

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
        let mut state = CollectorState::default();
        let first = paths(&["counter_1.db", "counter_2.db", "notes.db"]);
        assert_eq!(index_paths(&mut state, &first), [0, 1, 2]);
        assert!(state.replan);
        assert!(state.known[2].as_ref().is_some_and(|k| k.file.is_none()));

        state.replan = false;
        assert_eq!(index_paths(&mut state, &first), [0, 1, 2]);
        assert!(!state.replan);

        let second = paths(&["counter_1.db", "notes.db"]);
        assert_eq!(index_paths(&mut state, &second), [0, 2]);
        assert!(state.replan && state.known[1].is_none());
        assert_eq!(state.files_forgotten, 1);
        assert!(!state.by_path.contains_key(path_bytes(&first[1])));

        let third = paths(&["gauge_all_3.db", "counter_1.db", "notes.db"]);
        assert_eq!(index_paths(&mut state, &third), [1, 0, 2]);
        assert_eq!(state.by_path.get(path_bytes(&third[0])), Some(&1));
    }
}
