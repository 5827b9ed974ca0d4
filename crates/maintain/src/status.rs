//! What maintenance has done so far in this process: running totals kept
//! as it works, and the snapshot a host reads for its metrics, status page
//! or logs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::compaction::{CompactError, CompactPass};
use crate::liveness::LivenessState;

/// What a [`crate::Maintainer`] has done since it was made.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct MaintenanceStatus {
    /// `gauge_live*` files removed because their process was gone (zero
    /// when reaping is off).
    pub reaped_files: u64,
    /// Compaction's totals; `None` when compaction is off, or refused
    /// because the writers' processes cannot be seen from here.
    pub compaction: Option<CompactionStatus>,
    /// Whether the writers of the directory's files can be told gone, and
    /// if not, why: what every decision about exited writers rests on.
    pub liveness: LivenessState,
}

/// Totals of the compaction passes.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct CompactionStatus {
    /// Passes that finished.
    pub passes_ok: u64,
    /// Passes that stopped with an error (what they had done was undone or
    /// finished by the next recovery).
    pub passes_failed: u64,
    /// Files of exited workers folded into `*_compacted.db` files.
    pub files_folded: u64,
    /// Disk space freed.
    pub bytes_reclaimed: u64,
    /// How long the last finished pass took.
    pub last_duration: Duration,
}

/// The running totals, updated by whichever thread runs maintenance and
/// read by any.
#[derive(Debug, Default)]
pub(crate) struct Totals {
    reaped_files: AtomicU64,
    passes_ok: AtomicU64,
    passes_failed: AtomicU64,
    files_folded: AtomicU64,
    bytes_reclaimed: AtomicU64,
    /// The last pass's duration in nanoseconds.
    last_duration_nanos: AtomicU64,
}

impl Totals {
    /// Counts removed `gauge_live*` files.
    pub(crate) fn count_reaped(&self, files: usize) {
        self.reaped_files.fetch_add(files as u64, Ordering::Relaxed);
    }

    /// Counts one compaction pass.
    pub(crate) fn count_pass(&self, result: &Result<CompactPass, CompactError>) {
        match result {
            Ok(pass) => {
                self.passes_ok.fetch_add(1, Ordering::Relaxed);
                self.files_folded
                    .fetch_add(pass.files_folded() as u64, Ordering::Relaxed);
                self.bytes_reclaimed.fetch_add(
                    u64::try_from(pass.bytes_reclaimed).unwrap_or(0),
                    Ordering::Relaxed,
                );
                self.last_duration_nanos.store(
                    u64::try_from(pass.duration.as_nanos()).unwrap_or(u64::MAX),
                    Ordering::Relaxed,
                );
            }
            Err(_) => {
                self.passes_failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A snapshot; `compacting` says whether compaction is on.
    pub(crate) fn status(&self, compacting: bool) -> MaintenanceStatus {
        MaintenanceStatus {
            reaped_files: self.reaped_files.load(Ordering::Relaxed),
            compaction: compacting.then(|| CompactionStatus {
                passes_ok: self.passes_ok.load(Ordering::Relaxed),
                passes_failed: self.passes_failed.load(Ordering::Relaxed),
                files_folded: self.files_folded.load(Ordering::Relaxed),
                bytes_reclaimed: self.bytes_reclaimed.load(Ordering::Relaxed),
                last_duration: Duration::from_nanos(
                    self.last_duration_nanos.load(Ordering::Relaxed),
                ),
            }),
            liveness: LivenessState::NotWalked,
        }
    }
}
