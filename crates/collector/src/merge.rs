//! The merge: `MultiProcessCollector._read_metrics` + `_accumulate_metrics`,
//! over files in the order given (a directory's listing order, as Python's
//! `glob`), step by step: the output equals Python's `merge()` given the same
//! files in the same order (the differential tests check exactly this).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use multiprom_format::{float_to_go_string, GaugeMode, MetricKind};

use crate::family::{FamilyType, LabelSet, MergedFamily, MergedSample};
use crate::intern::{addr, ByPtr, Interner, LabelTuple, Pairs};
use crate::parsed_file::{ParsedEntry, ParsedFile};
use crate::problem::Conflict;

/// Caches that outlive one scrape: exposed label sets and bucket tuples.
/// Cleared before the interner is swept.
#[derive(Debug, Default)]
pub(crate) struct MergeCache {
    exposed: HashMap<ByPtr<Pairs>, LabelSet>,
    bucket_tuples: HashMap<(ByPtr<Pairs>, u64), LabelTuple>,
    suffixed: HashMap<(ByPtr<str>, &'static str), Arc<str>>,
}

impl MergeCache {
    pub(crate) fn clear(&mut self) {
        self.exposed.clear();
        self.bucket_tuples.clear();
        self.suffixed.clear();
    }

    /// `dict(labels)` sorted by name: the last of repeated names wins.
    fn exposed(&mut self, tuple: &LabelTuple) -> LabelSet {
        self.exposed
            .entry(ByPtr(Arc::clone(tuple)))
            .or_insert_with(|| {
                let mut pairs: Vec<(Arc<str>, Arc<str>)> = Vec::with_capacity(tuple.len());
                for (name, value) in tuple.iter() {
                    match pairs.iter_mut().find(|(n, _)| n == name) {
                        Some(pair) => pair.1 = Arc::clone(value),
                        None => pairs.push((Arc::clone(name), Arc::clone(value))),
                    }
                }
                pairs.sort_by(|a, b| a.0.cmp(&b.0));
                Arc::from(pairs)
            })
            .clone()
    }

    fn bucket_tuple(
        &mut self,
        interner: &mut Interner,
        without_le: &LabelTuple,
        bound: f64,
    ) -> LabelTuple {
        self.bucket_tuples
            .entry((ByPtr(Arc::clone(without_le)), bound.to_bits()))
            .or_insert_with(|| {
                let mut pairs = without_le.to_vec();
                pairs.push((
                    interner.string("le"),
                    interner.string(&float_to_go_string(bound)),
                ));
                interner.tuple(pairs)
            })
            .clone()
    }

    fn suffixed(
        &mut self,
        interner: &mut Interner,
        family: &Arc<str>,
        suffix: &'static str,
    ) -> Arc<str> {
        self.suffixed
            .entry((ByPtr(Arc::clone(family)), suffix))
            .or_insert_with(|| interner.string(&format!("{family}{suffix}")))
            .clone()
    }
}

/// One family while its files are walked (`_read_metrics`).
struct FamilyAcc<'a> {
    name: Arc<str>,
    help: Arc<str>,
    family_type: FamilyType,
    first_file: &'a Path,
    /// Whether a help conflict was recorded (one per family and scrape).
    help_conflict: bool,
    /// Types whose entries were dropped (one conflict per family and type).
    dropped_types: Vec<FamilyType>,
    modes: Vec<GaugeMode>,
    samples: Vec<(&'a ParsedEntry, f64, f64)>,
}

/// Samples of one label set, in insertion order (a Python dict).
struct Group {
    samples: Vec<(Arc<str>, LabelTuple, f64)>,
}

impl Group {
    fn find(&self, name: &Arc<str>, labels: &LabelTuple) -> Option<usize> {
        self.samples
            .iter()
            .position(|(n, l, _)| Arc::ptr_eq(n, name) && Arc::ptr_eq(l, labels))
    }

    fn set(&mut self, name: &Arc<str>, labels: &LabelTuple, value: f64) {
        match self.find(name, labels) {
            Some(i) => self.samples[i].2 = value,
            None => self
                .samples
                .push((Arc::clone(name), Arc::clone(labels), value)),
        }
    }

    /// `defaultdict(float)` then `+=`: a new sample starts at 0.0.
    fn add(&mut self, name: &Arc<str>, labels: &LabelTuple, value: f64) {
        match self.find(name, labels) {
            Some(i) => self.samples[i].2 += value,
            None => self
                .samples
                .push((Arc::clone(name), Arc::clone(labels), 0.0 + value)),
        }
    }
}

/// Insertion-ordered groups keyed by label tuple.
#[derive(Default)]
struct Groups {
    list: Vec<Group>,
    index: HashMap<usize, usize>,
}

impl Groups {
    fn get(&mut self, labels: &LabelTuple) -> &mut Group {
        let list = &mut self.list;
        let i = *self.index.entry(addr(labels)).or_insert_with(|| {
            list.push(Group {
                samples: Vec::new(),
            });
            list.len() - 1
        });
        &mut self.list[i]
    }
}

fn family_type(kind: MetricKind) -> FamilyType {
    match kind {
        MetricKind::Counter => FamilyType::Counter,
        MetricKind::Gauge(_) => FamilyType::Gauge,
        MetricKind::Histogram => FamilyType::Histogram,
        MetricKind::Summary => FamilyType::Summary,
    }
}

/// Merges `files` (good files, in merge order) into families.
pub(crate) fn merge<'a>(
    files: impl IntoIterator<Item = (&'a Path, &'a ParsedFile)>,
    accumulate: bool,
    interner: &mut Interner,
    cache: &mut MergeCache,
    conflicts: &mut HashSet<Conflict>,
) -> Vec<MergedFamily> {
    let mut families: Vec<FamilyAcc<'a>> = Vec::new();
    let mut index: HashMap<usize, usize> = HashMap::new();
    for (path, file) in files {
        let kind = file.name.kind();
        let ftype = family_type(kind);
        for (entry, &(value, timestamp)) in file.entries.iter().zip(&file.values) {
            let i = *index.entry(addr(&entry.family)).or_insert_with(|| {
                families.push(FamilyAcc {
                    name: Arc::clone(&entry.family),
                    help: Arc::clone(&entry.help),
                    family_type: ftype,
                    first_file: path,
                    help_conflict: false,
                    dropped_types: Vec::new(),
                    modes: Vec::new(),
                    samples: Vec::new(),
                });
                families.len() - 1
            });
            let family = &mut families[i];
            if family.family_type != ftype {
                if family.dropped_types.contains(&ftype) {
                    continue;
                }
                family.dropped_types.push(ftype);
                conflicts.insert(Conflict::Type {
                    family: family.name.to_string(),
                    kept: family.family_type.as_str(),
                    kept_file: family.first_file.display().to_string(),
                    dropped: ftype.as_str(),
                    dropped_file: path.display().to_string(),
                });
                continue;
            }
            if !family.help_conflict && !Arc::ptr_eq(&family.help, &entry.help) {
                family.help_conflict = true;
                conflicts.insert(Conflict::Help {
                    family: family.name.to_string(),
                    kept: family.help.to_string(),
                    other: entry.help.to_string(),
                    other_file: path.display().to_string(),
                });
            }
            if let MetricKind::Gauge(mode) = kind {
                if family.modes.last() != Some(&mode) {
                    family.modes.push(mode);
                }
            }
            family.samples.push((entry, value, timestamp));
        }
    }
    families
        .into_iter()
        .map(|family| accumulate_family(family, accumulate, interner, cache, conflicts))
        .collect()
}

/// `_accumulate_metrics` for one family.
fn accumulate_family(
    family: FamilyAcc<'_>,
    accumulate: bool,
    interner: &mut Interner,
    cache: &mut MergeCache,
    conflicts: &mut HashSet<Conflict>,
) -> MergedFamily {
    let mode = family.modes.last().copied();
    if family.modes.len() > 1 {
        let mut seen: Vec<&str> = Vec::new();
        for m in &family.modes {
            if !seen.contains(&m.as_str()) {
                seen.push(m.as_str());
            }
        }
        conflicts.insert(Conflict::GaugeMode {
            family: family.name.to_string(),
            modes: seen.join(", "),
            used: mode.map_or("all", GaugeMode::as_str),
        });
    }
    let mut groups = Groups::default();
    let mut timestamps: HashMap<(usize, usize), f64> = HashMap::new();
    let mut buckets: Vec<(LabelTuple, Vec<(f64, f64)>)> = Vec::new();
    let mut bucket_index: HashMap<usize, usize> = HashMap::new();
    for (entry, value, timestamp) in family.samples {
        match family.family_type {
            FamilyType::Gauge => {
                let mode = mode.unwrap_or(GaugeMode::All);
                let labels = if mode.keeps_pid() {
                    &entry.labels
                } else {
                    &entry.labels_no_pid
                };
                let name = &entry.sample;
                match mode {
                    GaugeMode::Min | GaugeMode::LiveMin => {
                        let group = groups.get(labels);
                        match group.find(name, labels) {
                            Some(i) if value < group.samples[i].2 => group.samples[i].2 = value,
                            Some(_) => {}
                            None => group.set(name, labels, value),
                        }
                    }
                    GaugeMode::Max | GaugeMode::LiveMax => {
                        let group = groups.get(labels);
                        match group.find(name, labels) {
                            Some(i) if value > group.samples[i].2 => group.samples[i].2 = value,
                            Some(_) => {}
                            None => group.set(name, labels, value),
                        }
                    }
                    GaugeMode::Sum | GaugeMode::LiveSum => {
                        groups.get(labels).add(name, labels, value)
                    }
                    GaugeMode::MostRecent | GaugeMode::LiveMostRecent => {
                        let seen = timestamps.entry((addr(labels), addr(name))).or_insert(0.0);
                        // A series never set (timestamp 0.0) prints nothing.
                        if *seen < timestamp {
                            *seen = timestamp;
                            groups.get(labels).set(name, labels, value);
                        }
                    }
                    GaugeMode::All | GaugeMode::LiveAll => {
                        groups.get(labels).set(name, labels, value)
                    }
                }
            }
            FamilyType::Histogram => match &entry.bucket {
                Some(bucket) => {
                    let i = *bucket_index
                        .entry(addr(&bucket.without_le))
                        .or_insert_with(|| {
                            buckets.push((Arc::clone(&bucket.without_le), Vec::new()));
                            buckets.len() - 1
                        });
                    let bounds = &mut buckets[i].1;
                    // A dict keyed by float: 0.0 and -0.0 are one key, and the
                    // first one inserted is the one printed.
                    match bounds.iter_mut().find(|(b, _)| *b == bucket.bound) {
                        Some((_, sum)) => *sum += value,
                        None => bounds.push((bucket.bound, 0.0 + value)),
                    }
                }
                None => groups
                    .get(&entry.labels)
                    .add(&entry.sample, &entry.labels, value),
            },
            FamilyType::Counter | FamilyType::Summary => {
                groups
                    .get(&entry.labels)
                    .add(&entry.sample, &entry.labels, value);
            }
        }
    }
    if !buckets.is_empty() {
        let bucket_name = cache.suffixed(interner, &family.name, "_bucket");
        let count_name = cache.suffixed(interner, &family.name, "_count");
        for (labels, mut bounds) in buckets {
            bounds.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut acc = 0.0;
            for (bound, value) in bounds {
                let tuple = cache.bucket_tuple(interner, &labels, bound);
                let group = groups.get(&labels);
                if accumulate {
                    acc += value;
                    group.set(&bucket_name, &tuple, acc);
                } else {
                    group.set(&bucket_name, &tuple, value);
                }
            }
            if accumulate {
                groups.get(&labels).set(&count_name, &labels, acc);
            }
        }
    }
    let mut samples = Vec::new();
    for group in groups.list {
        for (name, tuple, value) in group.samples {
            samples.push(MergedSample {
                name,
                labels: cache.exposed(&tuple),
                value,
            });
        }
    }
    MergedFamily {
        name: family.name,
        help: family.help,
        family_type: family.family_type,
        gauge_mode: if family.family_type == FamilyType::Gauge {
            mode
        } else {
            None
        },
        samples,
    }
}
