//! [`merge_files`]: given files, merged once.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::plan::Accumulators;

use super::collection::collect_paths;
use super::exemplars::attach_exemplars;
use super::file_entry::path_bytes;
use super::merge::{apply, build_plan};
use super::natives::collect_natives;
use super::pass::Pass;
use super::scrape::{CollectOptions, Scrape};
use super::state::CollectorState;

/// Reads and merges the given files once, in the order given, as Python's
/// `MultiProcessCollector.merge(files, accumulate)` does (a file given twice
/// is merged twice, as there), except that bad files are skipped and
/// reported.
///
/// Files that do not exist are reported as [vanished](crate::FileState::Vanished),
/// never as errors: Python's upstream test `test_missing_gauge_file_during_merge`
/// expects a merge of missing files to return nothing, not to fail.
///
/// ```
/// use multiprom_collector::{merge_files, CollectOptions, FileState};
/// let dir = tempfile::tempdir()?;
/// let scrape = merge_files([dir.path().join("gauge_liveall_9999999.db")], CollectOptions::default());
/// assert!(scrape.families.is_empty());
/// assert_eq!(scrape.files[0].state(), FileState::Vanished);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn merge_files<P: AsRef<Path>>(
    files: impl IntoIterator<Item = P>,
    options: CollectOptions,
) -> Scrape {
    let start = Instant::now();
    let paths: Vec<PathBuf> = files
        .into_iter()
        .map(|p| p.as_ref().to_path_buf())
        .collect();
    if has_duplicates(&paths) {
        // Each occurrence is merged again, as Python reads it again.
        return merge_with_duplicates(&paths, options, start);
    }
    collect_paths(
        &mut CollectorState::default(),
        &Arc::new(paths),
        Pass::once(options, start),
    )
}

/// Whether a path is given twice, compared as `FileTable::by_path` compares
/// them (by their bytes).
pub(super) fn has_duplicates(paths: &[PathBuf]) -> bool {
    let mut seen = HashSet::with_capacity(paths.len());
    paths.iter().any(|p| !seen.insert(path_bytes(p)))
}

/// `merge_files` for a list naming some file more than once.
pub(super) fn merge_with_duplicates(
    paths: &[PathBuf],
    options: CollectOptions,
    start: Instant,
) -> Scrape {
    // Read every distinct file once, then plan over the occurrences.
    let mut state = CollectorState::default();
    let mut distinct: Vec<PathBuf> = Vec::new();
    let mut seen = HashSet::new();
    for path in paths {
        if seen.insert(path_bytes(path)) {
            distinct.push(path.clone());
        }
    }
    let mut scrape = collect_paths(&mut state, &Arc::new(distinct), Pass::once(options, start));
    let order: Vec<usize> = paths
        .iter()
        .filter_map(|p| state.files.by_path.get(path_bytes(p)).copied())
        .collect();
    let plan = build_plan(
        &mut state.files,
        &mut state.merge.plan_cache,
        &order,
        options,
    );
    let mut accumulators = Accumulators::default();
    if apply(
        &state.files.known,
        &plan,
        None,
        None,
        &mut accumulators,
        &mut Vec::new(),
    )
    .is_ok()
    {
        scrape.families = accumulators.finish(&plan);
        // The distinct files' exemplars were read (and any problem reported)
        // by the collection above.
        attach_exemplars(
            &state.files.known,
            &order,
            None,
            None,
            None,
            &mut scrape.families,
            &mut state.exemplars,
            &mut Vec::new(),
        );
        // Each occurrence merged again, as its samples are.
        scrape.natives = collect_natives(
            &state.files.known,
            &order,
            None,
            None,
            None,
            &mut state.natives,
            &mut Vec::new(),
        );
        scrape.stats.series = scrape.families.iter().map(|f| f.samples.len()).sum();
    }
    scrape
}
