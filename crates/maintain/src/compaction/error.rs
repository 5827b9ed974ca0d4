//! Why a compaction pass could not go on.

use std::path::PathBuf;

use super::journal::JournalError;

/// A compaction pass stopped. Whatever it had done is undone or finished by
/// the next pass's recovery, so no value is lost or counted twice.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompactError {
    /// A file operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The journal exists but cannot be understood: whether its fold was
    /// committed is unknown, so nothing more is done until a person looks.
    #[error("{}: damaged compaction journal ({reason}); compaction stops until it is repaired or removed (see docs/operations.md)", path.display())]
    Journal {
        /// The journal.
        path: PathBuf,
        /// What is wrong with it.
        reason: JournalError,
    },
    /// Another process compacts this directory.
    #[error("{}: another multiprom compacts this directory (its lock is held)", path.display())]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
}
