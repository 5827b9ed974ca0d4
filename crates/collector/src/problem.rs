//! Problems with files and families, reported to people.

use multiprom_format::ReadError;

/// A type name as printed in conflicts (`counter`, `gauge`, ...).
pub type FamilyTypeName = &'static str;

/// Files that disagree about a family. Python's answer depends on directory
/// order; multiprom's rule is documented with each variant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
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
#[non_exhaustive]
pub enum Warning {
    /// A file was skipped.
    #[error("skipped {0}")]
    File(#[from] ReadError),
    /// An exemplar file was skipped: its `*.db` file's samples are merged
    /// as always, without its exemplars.
    #[error("skipped exemplars in {0}")]
    Exemplars(ReadError),
    /// A native histogram file was skipped: its `*.db` file's samples are
    /// merged as always, without its native histograms.
    #[error("skipped native histograms in {0}")]
    NativeHistograms(ReadError),
    /// Files disagree about a family.
    #[error("{0}")]
    Conflict(#[from] Conflict),
}
