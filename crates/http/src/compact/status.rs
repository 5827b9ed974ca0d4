//! What compaction has done so far in this process, for self-metrics, the
//! status page and logs.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::{CompactError, CompactPass};

#[derive(Debug, Clone, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct ResultLabels {
    result: String,
}

/// Running totals of compaction passes, registered as self-metrics.
#[derive(Debug, Clone, Default)]
pub struct CompactionTotals {
    passes: Family<ResultLabels, Counter>,
    files_folded: Counter,
    bytes_reclaimed: Counter,
    last_duration: Gauge<f64, AtomicU64>,
}

impl CompactionTotals {
    /// Registers `multiprom_compactions_total{result}`,
    /// `multiprom_compaction_folded_files_total`,
    /// `multiprom_compaction_reclaimed_bytes_total` and
    /// `multiprom_compaction_last_duration_seconds` in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let totals = CompactionTotals::default();
        registry.register(
            "compactions",
            "Compaction passes over the directory, by result: ok or error",
            totals.passes.clone(),
        );
        for result in ["ok", "error"] {
            drop(totals.passes.get_or_create(&ResultLabels {
                result: result.to_owned(),
            }));
        }
        registry.register(
            "compaction_folded_files",
            "Files of exited workers folded into *_compacted.db files",
            totals.files_folded.clone(),
        );
        registry.register_with_unit(
            "compaction_reclaimed",
            "Disk space freed by compaction",
            Unit::Bytes,
            totals.bytes_reclaimed.clone(),
        );
        registry.register_with_unit(
            "compaction_last_duration",
            "Time the last compaction pass took",
            Unit::Seconds,
            totals.last_duration.clone(),
        );
        totals
    }

    /// Counts one pass.
    pub fn record(&self, result: &Result<CompactPass, CompactError>) {
        let label = if result.is_ok() { "ok" } else { "error" };
        self.passes
            .get_or_create(&ResultLabels {
                result: label.to_owned(),
            })
            .inc();
        if let Ok(pass) = result {
            self.files_folded.inc_by(pass.files_folded() as u64);
            self.bytes_reclaimed
                .inc_by(u64::try_from(pass.bytes_reclaimed).unwrap_or(0));
            self.last_duration.set(pass.duration.as_secs_f64());
        }
    }

    /// One line for the status page.
    #[must_use]
    pub fn summary(&self) -> String {
        let count = |r: &str| {
            self.passes
                .get_or_create(&ResultLabels {
                    result: r.to_owned(),
                })
                .get()
        };
        format!(
            "Compaction: {} passes ({} failed), {} files of exited workers folded, {} bytes reclaimed; last pass {:.1} ms.",
            count("ok") + count("error"),
            count("error"),
            self.files_folded.get(),
            self.bytes_reclaimed.get(),
            self.last_duration.get() * 1000.0
        )
    }
}
