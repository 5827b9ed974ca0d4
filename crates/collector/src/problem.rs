//! Problems with files and families, reported to people.

use std::fmt;
use std::path::PathBuf;

use multiprom_format::{ReadError, ReadErrorKind};

/// A type name as printed in conflicts (`counter`, `gauge`, ...).
pub type FamilyTypeName = &'static str;

/// What is wrong with a file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProblemKind {
    /// The reader rejected the file (or its name).
    #[error("{0}")]
    Read(ReadErrorKind),
    /// A histogram bucket's `le` label does not parse as a number (or is NaN).
    #[error("histogram bucket bound le={0:?} is not a number")]
    BadBucketBound(String),
    /// An entry with an empty family name (Python refuses to build the metric).
    #[error("entry has an empty metric name")]
    EmptyFamilyName,
    /// A symbolic link whose target does not exist (it will not go away by
    /// itself, unlike a file that vanished because its worker was reaped).
    #[error("dangling symbolic link")]
    DanglingSymlink,
}

/// A file that was skipped, with where and why. Displays as
/// `path: offset N: reason`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct FileProblem {
    /// The file.
    pub path: PathBuf,
    /// Byte offset of the problem (0 for file-level problems).
    pub offset: u64,
    /// What is wrong.
    pub kind: ProblemKind,
}

impl FileProblem {
    /// Whether the file simply vanished (a reaped worker), which is not damage.
    #[must_use]
    pub fn is_vanished(&self) -> bool {
        self.kind == ProblemKind::Read(ReadErrorKind::Vanished)
    }
}

impl fmt::Display for FileProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: offset {}: {}",
            self.path.display(),
            self.offset,
            self.kind
        )
    }
}

impl From<ReadError> for FileProblem {
    fn from(err: ReadError) -> Self {
        FileProblem {
            path: err.path,
            offset: err.offset,
            kind: ProblemKind::Read(err.kind),
        }
    }
}

/// Files that disagree about a family. Python's answer depends on directory
/// order; multiprom's rule is documented with each variant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Conflict {
    /// Two types for one family: the first file (in merge order) wins, entries
    /// from files of other types are dropped.
    #[error("family {family:?} is a {kept} in {kept_file} but a {dropped} in {dropped_file}: the {dropped} entries are dropped")]
    Type {
        /// Family name.
        family: String,
        /// The type kept.
        kept: FamilyTypeName,
        /// The first file that set it.
        kept_file: String,
        /// The type dropped.
        dropped: FamilyTypeName,
        /// A file whose entries were dropped.
        dropped_file: String,
    },
    /// Two help texts: the first entry (in merge order) wins, as in Python.
    #[error(
        "family {family:?} has help {kept:?} and also {other:?} (in {other_file}): using the first"
    )]
    Help {
        /// Family name.
        family: String,
        /// The help kept.
        kept: String,
        /// The other help text.
        other: String,
        /// A file with the other text.
        other_file: String,
    },
    /// Two or more gauge modes: the last file (in merge order) wins for the
    /// whole family, as Python's last-processed file does.
    #[error("gauge {family:?} is written with modes {modes}: merging all of it as {used}")]
    GaugeMode {
        /// Family name.
        family: String,
        /// The modes seen, in merge order.
        modes: String,
        /// The mode used.
        used: &'static str,
    },
}

/// Something worth telling a person once: a skipped file or a conflict.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Warning {
    /// A file was skipped.
    #[error("skipped {0}")]
    File(#[from] FileProblem),
    /// Files disagree about a family.
    #[error("{0}")]
    Conflict(#[from] Conflict),
}
