//! Why a compaction pass could not go on, and what is wrong with a journal
//! that cannot be read.

use std::path::PathBuf;

use multiprom_format::FileNameError;

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

/// The first line of a journal: its format and version.
pub(super) const MAGIC: &str = "multiprom compaction journal 1";

/// What is wrong with a journal's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// The first line is not the journal's header.
    #[error("does not start with {MAGIC:?}")]
    NotAJournal,
    /// A `target` or `folded` line is missing.
    #[error("missing {0:?} line")]
    MissingLine(&'static str),
    /// A `target` or `folded` line names no metrics file.
    #[error("{field} {value:?}: {source}")]
    BadName {
        /// The line's field (`target`, `folded`).
        field: &'static str,
        /// The name on the line.
        value: String,
        /// Why it is no metrics file name.
        source: FileNameError,
    },
    /// The `new` line is missing or not two numbers.
    #[error("missing or malformed \"new\" line")]
    BadNewLine,
    /// The text ends before the `end` line.
    #[error("no \"end\" line: the journal is incomplete")]
    Incomplete,
}
