//! An entry of the file table: a `*.db` path the collector has seen, with what it knows of the file, and paths as keys.

use std::borrow::Borrow;
use std::ffi::OsStr;
use std::hash::{Hash, Hasher};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use multiprom_format::{FileName, ReadError};

use crate::problem::Warning;
use crate::stamp::FileStamp;
use crate::tracked::TrackedFile;

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
