//! The counts of the last collection's file reports, kept with them for the collection's statistics.

use super::scrape::{FileReport, FileState, ScrapeStats};

/// What the file reports count: files ok, bad and vanished, bytes read.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct ReportCounts {
    pub(super) ok: usize,
    pub(super) bad: usize,
    pub(super) vanished: usize,
    pub(super) bytes_read: u64,
}

impl ReportCounts {
    pub(super) fn of(reports: &[FileReport]) -> ReportCounts {
        let mut counts = ReportCounts::default();
        for report in reports {
            match report.state() {
                FileState::Ok => {
                    counts.ok += 1;
                    counts.bytes_read += report.used;
                }
                FileState::Bad => counts.bad += 1,
                FileState::Vanished => counts.vanished += 1,
            }
        }
        counts
    }

    /// Writes the counts into a collection's statistics.
    pub(super) fn count_into(self, stats: &mut ScrapeStats) {
        stats.files_ok = self.ok;
        stats.files_bad = self.bad;
        stats.files_vanished = self.vanished;
        stats.bytes_read = self.bytes_read;
    }
}
