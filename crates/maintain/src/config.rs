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

/// Reaping: what `mark_process_dead` does, for every pid in the directory
/// whose process has exited. Only where the workers' pids are visible (the
/// same pid namespace).
///
/// The live gauges of an exited process leave every collection that asks
/// ([`crate::Maintainer::retired_live_gauges`]) at once; the files
/// themselves are removed `grace` after the process is gone, by the passes
/// made every `interval`.
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
    /// Whether to check, before compacting, that the writers' processes are
    /// visible from here (see [`CompactConfig::with_writers_visible`]).
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

    /// Skips the check that the writers' processes are visible from here,
    /// for a host that knows they are (it started them in its own pid
    /// namespace, on a local file system). A writer in another pid
    /// namespace would look exited, and its file would be folded under it.
    #[must_use]
    pub fn with_writers_visible(mut self) -> Self {
        self.check_writers_visible = false;
        self
    }
}
