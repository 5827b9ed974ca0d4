//! What a collector keeps between collections, and how one collection runs.

use std::path::Path;
use std::time::Instant;

use crate::filter::NameFilter;
use crate::writers::ExitedWriters;

use super::exemplars::ExemplarState;
use super::exited::ExitedLive;
use super::file_table::FileTable;
use super::listing::Listing;
use super::merge::MergeState;
use super::natives::NativeState;
use super::quiet::Unsettled;
use super::scrape::{CollectOptions, Exemplars, Natives};

/// What a collector keeps between collections: the file table, the plan
/// and its values, the listing and the directory watch.
#[derive(Debug, Default)]
pub(super) struct CollectorState {
    /// The files seen, their keys, maps and reports.
    pub(super) files: FileTable,
    /// The directory watch and the listings it keeps.
    pub(super) listing: Listing,
    /// The merge plan, its values and what it last reported.
    pub(super) merge: MergeState,
    /// Bumped whenever files may have become settled or unsettled: settled
    /// sums made at another version are stale.
    pub(super) settle_version: u64,
    /// The files not settled after the last collection, for a quiet one.
    pub(super) unsettled: Option<Unsettled>,
    /// The exemplar files last reported bad, and what exemplar keys resolved to.
    pub(super) exemplars: ExemplarState,
    /// The native histogram files last reported bad, and what their keys name.
    pub(super) natives: NativeState,
    pub(super) collections: u64,
    /// The generation of the caller's liveness last asked about settled
    /// files.
    pub(super) liveness_generation: Option<u64>,
    /// The live gauges left out as their writers are gone.
    pub(super) exited_live: ExitedLive,
    /// Ask the caller's liveness for a new look at the processes: a file
    /// was opened while this collector opened it too.
    pub(super) look_again: bool,
}

/// How one collection runs.
#[derive(Clone, Copy)]
pub(super) struct Pass<'a> {
    pub(super) options: CollectOptions,
    /// Files may be mapped, up to this many maps (`None`: none).
    pub(super) map_limit: Option<usize>,
    pub(super) start: Instant,
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
            filter: None,
            exited: None,
            dir: None,
            natives: Natives::Merge,
            exemplars: Exemplars::Attach,
        }
    }
}
