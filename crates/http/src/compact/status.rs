//! What compaction has done so far in this process, for self-metrics, the
//! status page and logs.

use std::sync::atomic::{AtomicU64, Ordering};

use multiprom_collector::{FamilyType, MergedFamily};

use super::{CompactError, CompactPass};
use crate::self_metrics::{counter, family, gauge, labels, sample};

/// Running totals of compaction passes: the `multiprom_compaction*`
/// self-metrics.
#[derive(Debug, Default)]
pub struct CompactionTotals {
    passes_ok: AtomicU64,
    passes_failed: AtomicU64,
    files_folded: AtomicU64,
    bytes_reclaimed: AtomicU64,
    /// The last pass's duration in seconds, as `f64` bits.
    last_duration: AtomicU64,
}

impl CompactionTotals {
    /// Counts one pass.
    pub fn record(&self, result: &Result<CompactPass, CompactError>) {
        match result {
            Ok(pass) => {
                self.passes_ok.fetch_add(1, Ordering::Relaxed);
                self.files_folded
                    .fetch_add(pass.files_folded() as u64, Ordering::Relaxed);
                self.bytes_reclaimed.fetch_add(
                    u64::try_from(pass.bytes_reclaimed).unwrap_or(0),
                    Ordering::Relaxed,
                );
                self.last_duration
                    .store(pass.duration.as_secs_f64().to_bits(), Ordering::Relaxed);
            }
            Err(_) => {
                self.passes_failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// `multiprom_compactions_total{result}`,
    /// `multiprom_compaction_folded_files_total`,
    /// `multiprom_compaction_reclaimed_bytes_total` and
    /// `multiprom_compaction_last_duration_seconds`.
    pub(crate) fn families(&self) -> Vec<MergedFamily> {
        let ok = self.passes_ok.load(Ordering::Relaxed) as f64;
        let failed = self.passes_failed.load(Ordering::Relaxed) as f64;
        vec![
            family(
                "multiprom_compactions",
                "Compaction passes over the directory, by result: ok or error.",
                FamilyType::Counter,
                vec![
                    sample(
                        "multiprom_compactions_total",
                        labels(&[("result", "error")]),
                        failed,
                    ),
                    sample(
                        "multiprom_compactions_total",
                        labels(&[("result", "ok")]),
                        ok,
                    ),
                ],
            ),
            counter(
                "multiprom_compaction_folded_files",
                "Files of exited workers folded into *_compacted.db files.",
                self.files_folded.load(Ordering::Relaxed) as f64,
            ),
            counter(
                "multiprom_compaction_reclaimed_bytes",
                "Disk space freed by compaction.",
                self.bytes_reclaimed.load(Ordering::Relaxed) as f64,
            ),
            gauge(
                "multiprom_compaction_last_duration_seconds",
                "Time the last compaction pass took.",
                f64::from_bits(self.last_duration.load(Ordering::Relaxed)),
            ),
        ]
    }

    /// One line for the status page.
    #[must_use]
    pub fn summary(&self) -> String {
        let ok = self.passes_ok.load(Ordering::Relaxed);
        let failed = self.passes_failed.load(Ordering::Relaxed);
        format!(
            "Compaction: {} passes ({} failed), {} files of exited workers folded, {} bytes reclaimed; last pass {:.1} ms.",
            ok + failed,
            failed,
            self.files_folded.load(Ordering::Relaxed),
            self.bytes_reclaimed.load(Ordering::Relaxed),
            f64::from_bits(self.last_duration.load(Ordering::Relaxed)) * 1000.0
        )
    }
}
