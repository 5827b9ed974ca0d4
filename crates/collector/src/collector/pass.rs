//! How one collection runs: what the caller asked for, and what the
//! collector allows.

use std::path::Path;
use std::time::Instant;

use crate::filter::NameFilter;
use crate::writers::ExitedWriters;

use super::scrape::{CollectOptions, Exemplars, Natives};

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
