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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use multiprom_format::exemplar_file::{exemplar_path, EXEMPLAR_DIR};
use multiprom_format::{float_to_go_string, read_exemplar_file, Exemplar, Key, ReadError};

use crate::family::{FamilyType, MergedFamily, MergedSample};
use crate::parse::parse_python_float;
use crate::problem::Warning;

use super::file_entry::{path_bytes, FileEntry};

/// Labels sorted by name.
type SortedLabels = Vec<(String, String)>;

/// The exemplar problems last reported, by exemplar file, so each is
/// reported once.
#[derive(Debug, Default)]
pub(super) struct ExemplarReports {
    reported: BTreeMap<PathBuf, ReadError>,
}

/// The latest exemplar of each series: by sample name, then by labels.
#[derive(Debug, Default)]
struct Latest {
    by_name: HashMap<String, HashMap<SortedLabels, Arc<Exemplar>>>,
}

impl Latest {
    fn offer(&mut self, raw_key: &str, exemplar: &Exemplar) {
        let Ok(key) = Key::decode(raw_key.as_bytes()) else {
            return;
        };
        if !(key.sample.ends_with("_total") || key.sample.ends_with("_bucket")) {
            return;
        }
        let Some(labels) = merged_labels(key.labels) else {
            return;
        };
        let series = self.by_name.entry(key.sample).or_default();
        // Strictly later replaces: on a tie (or a NaN) the first kept stays.
        let later = series
            .get(&labels)
            .is_none_or(|kept| exemplar.timestamp > kept.timestamp);
        if later {
            series.insert(labels, Arc::new(exemplar.clone()));
        }
    }

    fn of(&self, sample: &MergedSample) -> Option<&Arc<Exemplar>> {
        let series = self.by_name.get(&*sample.name)?;
        let mut labels: SortedLabels = sample
            .labels
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        labels.sort_unstable();
        series.get(&labels)
    }
}

/// A key's labels as the merge labels its series: sorted by name, `le` as
/// `floatToGoString(float(le))`. `None` for an `le` that is not a number
/// (a file holding it is not merged).
fn merged_labels(mut labels: Vec<(String, String)>) -> Option<SortedLabels> {
    for (name, value) in &mut labels {
        if name == "le" {
            *value = float_to_go_string(parse_python_float(value)?);
        }
    }
    labels.sort_unstable();
    Some(labels)
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
/// the directory all the files are in, if they are in one.
pub(super) fn attach_exemplars(
    known: &[Option<FileEntry>],
    order: &[usize],
    dir: Option<&Path>,
    families: &mut [MergedFamily],
    reports: &mut ExemplarReports,
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
    if let Some(dir) = dir {
        // One look: most directories have no exemplars, and their
        // collections should not pay a step per file for them.
        let names = list_exemplar_dir(dir);
        if names.is_none() {
            reports.reported.clear();
            return;
        }
        listed.push((dir, names));
    }
    let mut latest = Latest::default();
    let mut problems: BTreeMap<PathBuf, ReadError> = BTreeMap::new();
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
        match read_exemplar_file(&path) {
            Ok(read) => {
                for held in &read.entries {
                    latest.offer(&held.raw_key, &held.exemplar);
                }
            }
            Err(error) if error.is_vanished() => {}
            Err(error) => {
                problems.insert(path, error);
            }
        }
    }
    for (path, error) in &problems {
        if reports.reported.get(path) != Some(error) {
            warnings.push(Warning::Exemplars(error.clone()));
        }
    }
    reports.reported = problems;
    if latest.by_name.is_empty() {
        return;
    }
    for family in families {
        let family_type = family.family_type;
        for sample in &mut family.samples {
            if may_carry(family_type, sample) {
                sample.exemplar = latest.of(sample).cloned();
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
