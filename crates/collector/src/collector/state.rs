//! What a collector keeps between collections: its parts, each of which
//! owns its own data and the work on it.

use super::exemplars::ExemplarState;
use super::file_table::FileTable;
use super::listing::Listing;
use super::merge::MergeState;
use super::natives::NativeState;
use super::settle::SettleState;

/// What a collector keeps between collections, part by part: the file
/// table, the listing and the directory watch, the plan and its values,
/// the settling of exited writers' files, and the native histogram and
/// exemplar files.
#[derive(Debug, Default)]
pub(super) struct CollectorState {
    /// The files seen, their keys, maps and reports.
    pub(super) files: FileTable,
    /// The directory watch and the listings it keeps.
    pub(super) listing: Listing,
    /// The merge plan, its values and what it last reported.
    pub(super) merge: MergeState,
    /// Which files are settled, and what the caller's liveness last said.
    pub(super) settling: SettleState,
    /// The exemplar files last reported bad, and what exemplar keys resolved to.
    pub(super) exemplars: ExemplarState,
    /// The native histogram files last reported bad, and what their keys name.
    pub(super) natives: NativeState,
    /// Counts the collections.
    pub(super) collections: u64,
}
