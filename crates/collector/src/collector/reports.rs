//! File reports: what the last collection saw of each file, made anew only when one changed.

use std::sync::Arc;

use super::file_entry::FileEntry;
use super::file_table::FileTable;
use super::quiet::Unsettled;
use super::report_counts::ReportCounts;
use super::scrape::FileReport;

/// What a file's report says now: `known`'s.
pub(super) fn file_report(known: &FileEntry) -> FileReport {
    let good = known.problem.is_none();
    let file = known.file.as_ref().filter(|_| good);
    FileReport {
        path: known.path.clone(),
        name: known.file.as_ref().map(|f| f.name.clone()),
        file_size: file.map_or(0, |f| f.file_size),
        used: file.map_or(0, |f| f.used),
        entries: file.map_or(0, |f| f.entries.len()),
        problem: known.problem.as_deref().cloned(),
    }
}

/// Whether `report` still says what `known`'s report would, compared
/// field by field without making one (which costs reference counts, on
/// every file of every scrape).
pub(super) fn still_reports(report: &FileReport, known: &FileEntry) -> bool {
    let good = known.problem.is_none();
    let file = known.file.as_ref().filter(|_| good);
    // The same path (the very `Arc`) is the same entry of the file table,
    // whose name never changes.
    Arc::ptr_eq(&report.path, &known.path)
        && report.file_size == file.map_or(0, |f| f.file_size)
        && report.used == file.map_or(0, |f| f.used)
        && report.entries == file.map_or(0, |f| f.entries.len())
        && report.problem.as_ref() == known.problem.as_deref()
}

impl FileTable {
    /// The reports of the files of `order`: the last collection's when none
    /// changed, else new ones. A quiet collection (`scope`) compares only the
    /// files that are not settled: the others did not change.
    pub(super) fn file_reports(
        &mut self,
        order: &[usize],
        scope: Option<&Unsettled>,
    ) -> Arc<[FileReport]> {
        let known = || order.iter().filter_map(|&index| self.known[index].as_ref());
        let unchanged = match scope {
            Some(unsettled) => unsettled.refresh.iter().all(|&(index, position)| {
                let report = self.reports.get(position);
                let known = self.known[index].as_ref();
                matches!((report, known), (Some(report), Some(known)) if still_reports(report, known))
            }),
            None => {
                self.reports.len() == known().count()
                    && self
                        .reports
                        .iter()
                        .zip(known())
                        .all(|(report, known)| still_reports(report, known))
            }
        };
        if !unchanged {
            self.reports = known().map(file_report).collect();
            self.report_counts = ReportCounts::of(&self.reports);
        }
        Arc::clone(&self.reports)
    }
}
