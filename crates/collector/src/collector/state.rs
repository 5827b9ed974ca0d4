//! What a collector keeps between collections, and how one collection runs.

use std::path::Path;
use std::time::Instant;

use crate::filter::NameFilter;
use crate::writers::ExitedWriters;

use super::exemplars::ExemplarState;
use super::file_table::FileTable;
use super::listing::Listing;
use super::merge::MergeState;
use super::natives::NativeState;
use super::scrape::{CollectOptions, Exemplars, Natives};
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

/// How one collection runs.
#[derive(Clone, Copy)]
pub(super) struct Pass<'a> {
    pub(super) options: CollectOptions,
    /// Files may be mapped, up to this many maps (`None`: none).
    pub(super) map_limit: Option<usize>,
    pub(super) start: Instant,
    /// Which collection this is (0: a merge of files once).
    pub(super) collection: u64,
    /// Keep only the samples it names.
    pub(super) filter: Option<&'a NameFilter>,
    /// Settle files whose writer this says is gone (`None`: settle none).
    pub(super) exited: Option<&'a ExitedWriters>,
    /// The directory every file is in, when they all are in one (a
    /// directory's listing): its exemplar files are looked for once, not
    /// per file.
    pub(super) dir: Option<&'a Path>,
    /// Whether the native histogram files are read.
    pub(super) natives: Natives,
    /// Whether exemplars are attached.
    pub(super) exemplars: Exemplars,
}

impl Pass<'_> {
    /// A collection of files once, with nothing kept for a next one.
    pub(super) fn once(options: CollectOptions, start: Instant) -> Pass<'static> {
        Pass {
            options,
            map_limit: None,
            start,
            collection: 0,
            filter: None,
            exited: None,
            dir: None,
            natives: Natives::Merge,
            exemplars: Exemplars::Attach,
        }
    }
}
