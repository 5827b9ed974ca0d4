//! [`WriterLiveness`]: the caller's word on which files' writers are gone.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use multiprom_format::{FileIdentity, FileName};

/// A file whose writer the collector asks about.
#[derive(Debug, Clone, Copy)]
pub struct WrittenFile<'a> {
    /// Its name.
    pub name: &'a FileName,
    /// The file the collector reads under that name.
    pub identity: FileIdentity,
    /// When the collector last saw something happen to the file: first
    /// found, opened by anyone, written, resized or replaced (as its
    /// directory watch reports). A writer that opened the file at or before
    /// this moment may still hold it; an answer about the file must rest on
    /// a look at the processes taken after it.
    pub since: Instant,
}

/// Tells whether the writer of a file is gone for good, so that the file
/// cannot change until something opens it again (see
/// [`crate::DirCollector::settle_exited_writers`]).
///
/// `multiprom-maintain`'s `Liveness` is the real one: a file is gone only
/// when no process has it open or mapped for writing. A closure over the
/// file's name is one too, for tests and for callers with their own rule.
pub trait WriterLiveness: Send + Sync {
    /// Whether the writer of `file` is gone. `true` only when that is known:
    /// unsure means `false` (the file is read on every collection, as
    /// Python's collector reads it).
    fn gone(&self, file: &WrittenFile<'_>) -> bool;

    /// Changes whenever an answer of [`WriterLiveness::gone`] may have gone
    /// from `true` back to `false` (a process holds a file again): the
    /// collector then asks again about every settled file.
    fn generation(&self) -> u64 {
        0
    }

    /// Asks for a new look at the processes soon: a file was opened at
    /// about the time the collector opened it itself, so the opener may be
    /// a writer no look has seen yet. Until that look, answers stand.
    fn look_again(&self) {}
}

impl<F> WriterLiveness for F
where
    F: Fn(&FileName) -> bool + Send + Sync,
{
    fn gone(&self, file: &WrittenFile<'_>) -> bool {
        self(file.name)
    }
}

/// A shared [`WriterLiveness`].
#[derive(Clone)]
pub(crate) struct ExitedWriters(Arc<dyn WriterLiveness>);

impl ExitedWriters {
    pub(crate) fn new(liveness: impl WriterLiveness + 'static) -> Self {
        ExitedWriters(Arc::new(liveness))
    }

    /// Whether the writer of `file` is gone.
    pub(crate) fn test(&self, file: &WrittenFile<'_>) -> bool {
        self.0.gone(file)
    }

    /// See [`WriterLiveness::generation`].
    pub(crate) fn generation(&self) -> u64 {
        self.0.generation()
    }

    /// See [`WriterLiveness::look_again`].
    pub(crate) fn look_again(&self) {
        self.0.look_again();
    }
}

impl fmt::Debug for ExitedWriters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ExitedWriters")
    }
}
