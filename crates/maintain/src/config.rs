//! What a [`crate::Maintainer`] does to its directory, and how often.

use std::time::Duration;

/// The work of a [`crate::Maintainer`]: reaping, compaction, both or
/// neither.
///
/// ```
/// use std::time::Duration;
/// use multiprom_maintain::{CompactConfig, MaintainConfig, ReapConfig};
///
/// let config = MaintainConfig::new()
///     .reap(ReapConfig::default().with_grace(Duration::from_secs(60)))
///     .compact(CompactConfig::default());
/// assert_eq!(config.reap.unwrap().interval, Duration::from_secs(5));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MaintainConfig {
    /// Reap exited processes' `gauge_live*` files (see [`ReapConfig`]).
    pub reap: Option<ReapConfig>,
    /// Fold exited workers' files (see [`CompactConfig`]).
    pub compact: Option<CompactConfig>,
}

impl MaintainConfig {
    /// No work: neither reaping nor compaction.
    #[must_use]
    pub fn new() -> Self {
        MaintainConfig::default()
    }

    /// With reaping.
    #[must_use]
    pub fn reap(mut self, reap: ReapConfig) -> Self {
        self.reap = Some(reap);
        self
    }

    /// With compaction.
    #[must_use]
    pub fn compact(mut self, compact: CompactConfig) -> Self {
        self.compact = Some(compact);
        self
    }
}

/// Reaping: what `mark_process_dead` does, for every live-gauge file whose
/// writer is gone (by the maintainer's [`crate::Liveness`]).
///
/// The live gauges of a writer that is gone leave every collection that
/// asks (`DirCollector::leave_out_exited_live_gauges`) at once; the files
/// themselves are removed `grace` after that, by the passes made every
/// `interval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReapConfig {
    /// How long a live-gauge file's process must have been gone before the
    /// file is removed: long enough for any `child_exit` hook calling
    /// `mark_process_dead` to finish first.
    pub grace: Duration,
    /// How often the directory is looked through for files to remove.
    pub interval: Duration,
}

impl Default for ReapConfig {
    /// Five minutes' grace, a look every five seconds.
    fn default() -> Self {
        ReapConfig {
            grace: Duration::from_secs(300),
            interval: Duration::from_secs(5),
        }
    }
}

impl ReapConfig {
    /// With `grace`.
    #[must_use]
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// With `interval`.
    #[must_use]
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }
}

/// Compaction: folding exited workers' counter, histogram, summary and
/// gauge sum/max/min/mostrecent files into one `*_compacted.db` file per
/// kind, every `interval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompactConfig {
    /// How often a pass runs.
    pub interval: Duration,
    /// Whether a writer must have been seen from here before files the
    /// kernel will not answer for are taken for gone (see
    /// [`CompactConfig::with_writers_visible`]).
    pub check_writers_visible: bool,
}

impl Default for CompactConfig {
    /// A pass every thirty seconds, after the writers are seen visible.
    fn default() -> Self {
        CompactConfig {
            interval: Duration::from_secs(30),
            check_writers_visible: true,
        }
    }
}

impl CompactConfig {
    /// With `interval`.
    #[must_use]
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Takes the writers' processes as visible from here without having
    /// seen one, for a host that knows they are (it started them in its own
    /// pid namespace): files the kernel will not answer for are then taken
    /// for gone as soon as `/proc` shows no holder (see
    /// [`crate::Liveness::assume_writers_visible`]).
    #[must_use]
    pub fn with_writers_visible(mut self) -> Self {
        self.check_writers_visible = false;
        self
    }
}
