//! Exemplars: read from the exemplar files of the files merged, and the
//! latest of each series attached to its merged sample.
//!
//! An exemplar file's keys are the `*.db` entries' keys, so an exemplar
//! belongs to the series its entry is merged into. Of all the files merged
//! into a series, the exemplar with the latest timestamp is kept (on a tie,
//! the first in merge order); a histogram's stays on the bucket it was
//! recorded on. Exemplar files are looked for only in the `exemplars`
//! subdirectory, listed once per collection: a directory without one costs
//! one failed `open`.
//!
//! What each entry's key names is worked out once (see `exemplar_series`
//! and `exemplar_files`): a warm scrape reads the records and compares
//! timestamps, and decodes no key.

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use multiprom_format::exemplar_file::{exemplar_path, EXEMPLAR_DIR};
use multiprom_format::{read_exemplar_records, Exemplar, ReadError};

use crate::family::{FamilyType, MergedFamily, MergedSample};
use crate::problem::Warning;

use super::exemplar_files::ExemplarFiles;
use super::exemplar_series::{SeriesId, SeriesTable};
use super::file_entry::{path_bytes, FileEntry};

/// What exemplar collection keeps between scrapes.
#[derive(Debug, Default)]
pub(super) struct ExemplarState {
    /// The exemplar problems last reported, by exemplar file, so each is
    /// reported once.
    reported: BTreeMap<PathBuf, ReadError>,
    resolved: Resolved,
    /// Whether each series has a carrying sample in this scrape.
    wanted: Vec<bool>,
    /// The latest exemplar of each series read in this scrape.
    latest: Vec<Option<Exemplar>>,
    /// The series of each carrying sample of this scrape, in order.
    sample_series: Vec<SeriesId>,
    /// The bytes of the exemplar file being read, kept for the next one.
    buf: Vec<u8>,
    /// The listing of the collector's directory in which it was found to
    /// have no exemplar subdirectory.
    absent_in: Option<u64>,
}

/// What keys and samples resolved to, and the exemplars last attached:
/// numbers of one series table, so forgotten together.
#[derive(Debug, Default)]
struct Resolved {
    series: SeriesTable,
    files: ExemplarFiles,
    /// The exemplar each series last got: an unchanged one stays the same
    /// `Arc`, so an encoding's line cache copies its line.
    attached: Vec<Option<Arc<Exemplar>>>,
}

/// Whether OpenMetrics allows an exemplar on `sample` of a family of
/// `family_type` (as `prometheus_client`'s `_is_valid_exemplar_metric`, for
/// the types a directory holds).
fn may_carry(family_type: FamilyType, sample: &MergedSample) -> bool {
    match family_type {
        FamilyType::Counter => sample.name.ends_with("_total"),
        FamilyType::Histogram => sample.name.ends_with("_bucket"),
        FamilyType::Gauge | FamilyType::Summary => false,
    }
}

/// Reads the exemplar files of the good files of `order` (in `known`) and
/// attaches the latest exemplar of each series to its sample in `families`.
/// A bad exemplar file is skipped and reported in `warnings` once. `dir`:
/// the directory all the files are in, if they are in one, and which
/// listing of it this is (see `CollectorState::listings`; `None`: not
/// known).
pub(super) fn attach_exemplars(
    known: &[Option<FileEntry>],
    order: &[usize],
    dir: Option<(&Path, Option<u64>)>,
    families: &mut [MergedFamily],
    state: &mut ExemplarState,
    warnings: &mut Vec<Warning>,
) {
    let wanted = families.iter().any(|family| {
        family
            .samples
            .iter()
            .any(|sample| may_carry(family.family_type, sample))
    });
    if !wanted {
        return;
    }
    // Each directory's exemplar files, listed once: a listing's files share
    // one directory, so this is looked up by a byte comparison per file.
    let mut listed: Vec<(&Path, Option<HashSet<OsString>>)> = Vec::new();
    if let Some((dir, listing)) = dir {
        // One look: most directories have no exemplars, and their
        // collections should not pay a step per file for them; nor even
        // that look while the directory's listing is the one it found no
        // subdirectory in (the watch saw no name come or go since, the
        // subdirectory's included). A subdirectory that exists is listed
        // every time: what comes and goes inside it is not watched.
        if listing.is_some() && state.absent_in == listing {
            return;
        }
        let names = list_exemplar_dir(dir);
        if names.is_none() {
            state.reported.clear();
            state.resolved = Resolved::default();
            state.absent_in = listing;
            return;
        }
        state.absent_in = None;
        listed.push((dir, names));
    }
    let dir = dir.map(|(dir, _)| dir);
    state.want_samples(families);
    let mut problems: BTreeMap<PathBuf, ReadError> = BTreeMap::new();
    state.resolved.files.begin();
    for &index in order {
        let Some(entry) = known.get(index).and_then(Option::as_ref) else {
            continue;
        };
        let Some(file) = entry.file.as_ref().filter(|_| entry.problem.is_none()) else {
            continue;
        };
        let dir = match dir {
            Some(dir) => dir,
            None => entry.path.parent().unwrap_or(Path::new("")),
        };
        let at = match listed
            .iter()
            .rposition(|(seen, _)| path_bytes(seen) == path_bytes(dir))
        {
            Some(at) => at,
            None => {
                listed.push((dir, list_exemplar_dir(dir)));
                listed.len() - 1
            }
        };
        let Some(names) = &listed[at].1 else {
            continue;
        };
        let path = exemplar_path(dir, &file.name);
        if !path.file_name().is_some_and(|name| names.contains(name)) {
            continue;
        }
        if let Err(error) = state.offer(path.clone()) {
            if !error.is_vanished() {
                problems.insert(path, error);
            }
        }
    }
    state.resolved.files.end();
    for (path, error) in &problems {
        if state.reported.get(path) != Some(error) {
            warnings.push(Warning::Exemplars(error.clone()));
        }
    }
    state.reported = problems;
    state.attach(families);
    if state.resolved.series.wants_reset() {
        state.resolved = Resolved::default();
    }
}

impl ExemplarState {
    /// Numbers the series of the samples of `families` that may carry an
    /// exemplar, and readies this scrape's latest exemplars.
    fn want_samples(&mut self, families: &[MergedFamily]) {
        let series = &mut self.resolved.series;
        self.sample_series.clear();
        for family in families {
            for sample in &family.samples {
                if may_carry(family.family_type, sample) {
                    let at = self.sample_series.len();
                    self.sample_series.push(series.resolve_sample(at, sample));
                }
            }
        }
        series.keep_samples(self.sample_series.len());
        let count = series.len();
        self.wanted.clear();
        self.wanted.resize(count, false);
        for &id in &self.sample_series {
            self.wanted[id] = true;
        }
        self.latest.clear();
        self.latest.resize_with(count, || None);
    }

    /// Offers the exemplars of the exemplar file at `path`: each replaces
    /// the latest of its series when strictly later (on a tie, or a NaN,
    /// the first kept stays). Only a winner's labels are decoded.
    fn offer(&mut self, path: PathBuf) -> Result<(), ReadError> {
        let Resolved { series, files, .. } = &mut self.resolved;
        let (wanted, latest) = (&self.wanted, &mut self.latest);
        let mut cursor = files.file(path.clone());
        read_exemplar_records(&path, &mut self.buf, |record| {
            let Some(id) = cursor.series(record.offset, record.raw_key, series) else {
                return;
            };
            // A series numbered in this scrape has no sample in it.
            if !wanted.get(id).copied().unwrap_or(false) {
                return;
            }
            let kept = &mut latest[id];
            if kept
                .as_ref()
                .is_none_or(|kept| record.timestamp > kept.timestamp)
            {
                if let Some(exemplar) = record.exemplar() {
                    *kept = Some(exemplar);
                }
            }
        })
        .map(|_| ())
    }

    /// Attaches the latest exemplar of each carrying sample's series.
    fn attach(&mut self, families: &mut [MergedFamily]) {
        let attached = &mut self.resolved.attached;
        attached.resize(self.wanted.len(), None);
        for &id in &self.sample_series {
            // Once per series (two samples may share one).
            if !std::mem::take(&mut self.wanted[id]) {
                continue;
            }
            attached[id] = match self.latest[id].take() {
                Some(latest) if attached[id].as_deref() != Some(&latest) => Some(Arc::new(latest)),
                Some(_) => attached[id].take(),
                None => None,
            };
        }
        let mut series = self.sample_series.iter();
        for family in families {
            let family_type = family.family_type;
            for sample in &mut family.samples {
                if may_carry(family_type, sample) {
                    sample.exemplar = series.next().and_then(|&id| attached[id].clone());
                }
            }
        }
    }
}

/// The names in `dir/exemplars`, or `None` when there is no such directory
/// (or it cannot be listed: exemplars are then left out, never the samples).
fn list_exemplar_dir(dir: &Path) -> Option<HashSet<OsString>> {
    let entries = std::fs::read_dir(dir.join(EXEMPLAR_DIR)).ok()?;
    Some(
        entries
            .filter_map(Result::ok)
            .map(|entry| entry.file_name())
            .collect(),
    )
}
