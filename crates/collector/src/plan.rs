//! The merge plan: Python's `MultiProcessCollector._read_metrics` and
//! `_accumulate_metrics`, worked out once for the files and keys a directory
//! holds, then applied to fresh values on every scrape.
//!
//! Which output series an entry feeds, how (add, set, min, max, most
//! recent, histogram bucket), and in which order families and samples come
//! out depend only on the files (in merge order), their types and gauge
//! modes, and their keys: not on the values. So the plan is rebuilt only
//! when one of those changes, and a warm scrape is a walk over the values
//! applying one precomputed operation each. The one exception is a gauge in
//! `mostrecent`/`livemostrecent` mode, whose samples appear in the order
//! they were first set by a newer timestamp: its order is worked out from
//! the values at apply time, as Python does.
//!
//! The building follows Python step by step (see `docs/merge.md`); the
//! differential tests compare the result with the real `prometheus_client`.

use foldhash::{HashMap, HashMapExt, HashSet};
use std::path::Path;
use std::sync::Arc;

use multiprom_format::{float_to_go_string, GaugeMode, MergeRule, MetricKind};

use crate::family::{FamilyType, LabelSet, MergedFamily, MergedSample};
use crate::intern::{addr, ByPtr, Interner, LabelTuple, Pairs};
use crate::keys::{KeyInfo, KeyTable};
pub(crate) use crate::op::Op;
use crate::problem::Conflict;
use crate::tracked::{EntryRef, TrackedFile};

mod restricted;
pub(crate) use restricted::RestrictedPlan;

/// Caches that outlive one plan: exposed label sets, bucket and pid tuples,
/// suffixed names. Cleared before the interner is swept.
#[derive(Debug, Default)]
pub(crate) struct PlanCache {
    exposed: HashMap<ByPtr<Pairs>, LabelSet>,
    bucket_tuples: HashMap<(ByPtr<Pairs>, u64), LabelTuple>,
    pid_tuples: HashMap<(ByPtr<Pairs>, ByPtr<str>), LabelTuple>,
    suffixed: HashMap<(ByPtr<str>, &'static str), Arc<str>>,
    /// The interned name `pid`.
    pid_name: Option<Arc<str>>,
    /// Scratch for `exposed`, kept to reuse its allocation.
    pairs: Vec<(Arc<str>, Arc<str>)>,
}

impl PlanCache {
    pub(crate) fn clear(&mut self) {
        self.exposed.clear();
        self.bucket_tuples.clear();
        self.pid_tuples.clear();
        self.suffixed.clear();
        self.pid_name = None;
        self.pairs.clear();
    }

    /// `dict(labels)` sorted by name: the last of repeated names wins.
    fn exposed(&mut self, tuple: &LabelTuple) -> LabelSet {
        let pairs = &mut self.pairs;
        self.exposed
            .entry(ByPtr(Arc::clone(tuple)))
            .or_insert_with(|| {
                pairs.clear();
                for (name, value) in tuple.iter() {
                    match pairs.iter_mut().find(|(n, _)| n == name) {
                        Some(pair) => pair.1 = Arc::clone(value),
                        None => pairs.push((Arc::clone(name), Arc::clone(value))),
                    }
                }
                pairs.sort_by(|a, b| a.0.cmp(&b.0));
                Arc::from(&pairs[..])
            })
            .clone()
    }

    /// `labels + (('le', floatToGoString(bound)),)`.
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

    /// `labels_key + (('pid', pid),)` for a gauge file, as its exposed
    /// label set: `dict(labels)` sorted by name, with `pid` set to the
    /// file's (appended last, a `pid` label of the key's own is overridden).
    ///
    /// Made from the key's exposed set, which a directory's files share,
    /// with the pid put in its place by name; the result is its own exposed
    /// set (sorted, one pair per name), and is recorded as such, so a
    /// gauge series costs one label set, not a tuple and then a set. Not
    /// interned: `labels` and `pid` are, so the pair of their addresses
    /// already names one set, and within a family every label set has a pid
    /// or none has (one gauge mode per family), so no set made otherwise
    /// can be taken for one of these. A directory of 1,000 workers with ten
    /// labelled gauge series each makes 10,000 of them on a cold collection.
    fn with_pid(
        &mut self,
        interner: &mut Interner,
        labels: &LabelTuple,
        pid: &Arc<str>,
    ) -> LabelTuple {
        let key = (ByPtr(Arc::clone(labels)), ByPtr(Arc::clone(pid)));
        if let Some(set) = self.pid_tuples.get(&key) {
            return Arc::clone(set);
        }
        let base = self.exposed(labels);
        let name = Arc::clone(self.pid_name.get_or_insert_with(|| interner.string("pid")));
        let at = base.partition_point(|(n, _)| **n < *name);
        let after = at + usize::from(base.get(at).is_some_and(|(n, _)| **n == *name));
        let set: LabelSet = base[..at]
            .iter()
            .cloned()
            .chain(std::iter::once((name, Arc::clone(pid))))
            .chain(base[after..].iter().cloned())
            .collect();
        self.exposed
            .insert(ByPtr(Arc::clone(&set)), Arc::clone(&set));
        self.pid_tuples.insert(key, Arc::clone(&set));
        set
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

/// Where an output sample's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// A slot's value.
    Slot(u32),
    /// A bucket slot's running total over its histogram's buckets.
    Cumulative(u32),
    /// The total of a histogram label set's buckets (`_count`).
    Count(u32),
}

#[derive(Debug, Clone)]
struct PlanSample {
    name: Arc<str>,
    labels: LabelSet,
    source: Source,
}

#[derive(Debug, Clone)]
struct PlanFamily {
    name: Arc<str>,
    help: Arc<str>,
    family_type: FamilyType,
    gauge_mode: Option<GaugeMode>,
    /// Samples in output order (empty for a most-recent family).
    samples: Vec<PlanSample>,
    /// A most-recent family: its candidate series, each with the index of
    /// its label set (the output order is decided at apply time).
    most_recent: Vec<(PlanSample, u32)>,
}

impl PlanFamily {
    /// The family's name, help, type and mode, with no samples.
    fn clone_without_samples(&self) -> PlanFamily {
        PlanFamily {
            name: Arc::clone(&self.name),
            help: Arc::clone(&self.help),
            family_type: self.family_type,
            gauge_mode: self.gauge_mode,
            samples: Vec::new(),
            most_recent: Vec::new(),
        }
    }
}

/// A file of the plan, in merge order, with how many entries it has.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PlannedFile {
    pub index: usize,
    pub entries: usize,
}

/// The plan for one set of files.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    /// Files in merge order.
    pub files: Vec<PlannedFile>,
    /// One operation per entry of `files`, in order.
    pub ops: Vec<Op>,
    slot_count: usize,
    /// Bucket slots of each histogram label set, in ascending bound order.
    bucket_sets: Vec<Vec<u32>>,
    families: Vec<PlanFamily>,
    /// Conflicts between the files.
    pub conflicts: HashSet<Conflict>,
}

/// One series being accumulated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    value: f64,
    timestamp: f64,
    /// When it was first set (`u32::MAX`: not set), for `setdefault` and for
    /// the order of most-recent samples.
    first_set: u32,
}

const UNSET: u32 = u32::MAX;

/// Per-scrape working memory, kept between scrapes to avoid reallocating.
#[derive(Debug, Default)]
pub(crate) struct Accumulators {
    slots: Vec<Slot>,
    cumulative: Vec<f64>,
    counts: Vec<f64>,
    sequence: u32,
}

impl Accumulators {
    /// Starts a scrape of `plan`.
    pub(crate) fn start(&mut self, plan: &Plan) {
        self.slots.clear();
        self.slots.resize(
            plan.slot_count,
            Slot {
                value: 0.0,
                timestamp: 0.0,
                first_set: UNSET,
            },
        );
        self.sequence = 0;
    }

    /// Slot `slot` as it stands.
    pub(crate) fn get(&self, slot: u32) -> Slot {
        self.slots[slot as usize]
    }

    /// Puts slot `slot` back as [`Accumulators::get`] gave it.
    pub(crate) fn put(&mut self, slot: u32, state: Slot) {
        *self.slot(slot) = state;
    }

    /// Applies `op` with an entry's value and timestamp.
    #[inline]
    pub(crate) fn apply(&mut self, op: Op, value: f64, timestamp: f64) {
        match op {
            Op::Skip => {}
            // A new sample starts at 0.0 (`defaultdict(float)`), then `+=`.
            Op::Add(slot) => self.slot(slot).value += value,
            Op::Set(slot) => self.slot(slot).value = value,
            Op::Min(slot) => self.keep_one(slot, MergeRule::Min, value),
            Op::Max(slot) => self.keep_one(slot, MergeRule::Max, value),
            Op::MostRecent(index) => {
                let sequence = self.sequence;
                let slot = self.slot(index);
                // `float(timestamp or 0)`; a series never set by a newer
                // timestamp than 0.0 is not printed.
                if MergeRule::MostRecent.replaces(slot.value, slot.timestamp, value, timestamp) {
                    slot.value = value;
                    slot.timestamp = timestamp;
                    if slot.first_set == UNSET {
                        slot.first_set = sequence;
                        self.sequence += 1;
                    }
                }
            }
        }
    }

    /// `setdefault`, then the value `rule` keeps (`min`, `max`).
    #[inline]
    fn keep_one(&mut self, slot: u32, rule: MergeRule, value: f64) {
        let slot = self.slot(slot);
        if slot.first_set == UNSET {
            slot.value = value;
            slot.first_set = 0;
        } else if rule.replaces(slot.value, 0.0, value, 0.0) {
            slot.value = value;
        }
    }

    fn slot(&mut self, index: u32) -> &mut Slot {
        // Slot indexes come from the plan that sized `slots`.
        &mut self.slots[index as usize]
    }

    /// Finishes the scrape: the merged families, in output order.
    pub(crate) fn finish(&mut self, plan: &Plan) -> Vec<MergedFamily> {
        self.finish_families(plan, &plan.families, 0..plan.bucket_sets.len() as u32)
    }

    /// Finishes a scrape of the part of `plan` that `restricted` keeps.
    pub(crate) fn finish_restricted(
        &mut self,
        plan: &Plan,
        restricted: &RestrictedPlan,
    ) -> Vec<MergedFamily> {
        self.finish_families(plan, &restricted.families, restricted.sets.iter().copied())
    }

    /// The merged `families`, whose histogram samples need the running
    /// totals of the bucket sets `sets` (of `plan`).
    fn finish_families(
        &mut self,
        plan: &Plan,
        families: &[PlanFamily],
        sets: impl Iterator<Item = u32>,
    ) -> Vec<MergedFamily> {
        self.cumulative.clear();
        self.cumulative.resize(plan.slot_count, 0.0);
        self.counts.clear();
        self.counts.resize(plan.bucket_sets.len(), 0.0);
        for set in sets {
            let mut acc = 0.0;
            for &slot in &plan.bucket_sets[set as usize] {
                acc += self.slots[slot as usize].value;
                self.cumulative[slot as usize] = acc;
            }
            self.counts[set as usize] = acc;
        }
        let value = |source: Source| match source {
            Source::Slot(slot) => self.slots[slot as usize].value,
            Source::Cumulative(slot) => self.cumulative[slot as usize],
            Source::Count(set) => self.counts[set as usize],
        };
        families
            .iter()
            .map(|family| {
                let samples = if family.most_recent.is_empty() {
                    family
                        .samples
                        .iter()
                        .map(|s| MergedSample {
                            name: Arc::clone(&s.name),
                            labels: Arc::clone(&s.labels),
                            value: value(s.source),
                            exemplar: None,
                        })
                        .collect()
                } else {
                    self.most_recent_samples(family)
                };
                MergedFamily {
                    name: Arc::clone(&family.name),
                    help: Arc::clone(&family.help),
                    family_type: family.family_type,
                    gauge_mode: family.gauge_mode,
                    samples,
                }
            })
            .collect()
    }

    /// A most-recent family's samples: label sets in the order their first
    /// sample was set, samples within a label set in the order they were set
    /// (Python's dict insertion order).
    fn most_recent_samples(&self, family: &PlanFamily) -> Vec<MergedSample> {
        let mut set: Vec<(u32, u32, &PlanSample, f64)> = family
            .most_recent
            .iter()
            .filter_map(|(sample, group)| {
                let Source::Slot(slot) = sample.source else {
                    return None;
                };
                let slot = self.slots[slot as usize];
                (slot.first_set != UNSET).then_some((*group, slot.first_set, sample, slot.value))
            })
            .collect();
        let mut group_first: HashMap<u32, u32> = HashMap::new();
        for (group, first, _, _) in &set {
            let entry = group_first.entry(*group).or_insert(*first);
            *entry = (*entry).min(*first);
        }
        set.sort_by_key(|(group, first, _, _)| (group_first[group], *first));
        set.into_iter()
            .map(|(_, _, sample, value)| MergedSample {
                name: Arc::clone(&sample.name),
                labels: Arc::clone(&sample.labels),
                value,
                exemplar: None,
            })
            .collect()
    }
}

/// A file the plan is built from: its place in the tracked files, path (for
/// conflict messages) and entries.
pub(crate) struct PlanInput<'a> {
    pub index: usize,
    pub path: &'a Path,
    pub file: &'a TrackedFile,
}

/// The last file of a kind whose entries were walked one by one: a later
/// file with the same keys takes its operations (`ops[start..]`).
struct Template<'a> {
    kind: MetricKind,
    entries: &'a [EntryRef],
    start: usize,
}

/// One family while the files are walked (`_read_metrics`).
struct FamilyAcc<'a> {
    name: Arc<str>,
    help: Arc<str>,
    family_type: FamilyType,
    first_file: &'a Path,
    help_conflict: bool,
    dropped_types: Vec<FamilyType>,
    modes: Vec<GaugeMode>,
    /// (op index, key, pid of the file).
    members: Vec<(usize, &'a KeyInfo, Arc<str>)>,
}

/// A family's samples grouped by label set, as Python's dict of dicts:
/// groups in insertion order, samples within a group in insertion order.
///
/// One vector holds every sample, each group's chained from its first to
/// its last, rather than a vector per group: a gauge in `all` mode has a
/// group per series (10,000 on a directory of 1,000 workers with ten
/// labelled series each), and a vector each was as many allocations per
/// plan.
#[derive(Default)]
struct Groups {
    /// Each group's first and last sample.
    list: Vec<(u32, u32)>,
    index: HashMap<usize, usize>,
    samples: Vec<GroupSample>,
}

struct GroupSample {
    name: Arc<str>,
    labels: LabelTuple,
    source: Source,
    /// The next sample of the group (`NO_SAMPLE`: the last).
    next: u32,
}

const NO_SAMPLE: u32 = u32::MAX;

impl Groups {
    /// The group of `labels`, made (empty) if new.
    fn get(&mut self, labels: &LabelTuple) -> Group<'_> {
        let list = &mut self.list;
        let at = *self.index.entry(addr(labels)).or_insert_with(|| {
            list.push((NO_SAMPLE, NO_SAMPLE));
            list.len() - 1
        });
        Group { groups: self, at }
    }

    /// Every sample, group by group, each group's in insertion order.
    fn into_samples(self) -> impl Iterator<Item = GroupSample> {
        let mut order = Vec::with_capacity(self.samples.len());
        for &(first, _) in &self.list {
            let mut at = first;
            while at != NO_SAMPLE {
                order.push(at as usize);
                at = self.samples[at as usize].next;
            }
        }
        let mut samples: Vec<Option<GroupSample>> = self.samples.into_iter().map(Some).collect();
        order.into_iter().filter_map(move |at| samples[at].take())
    }
}

/// One group of [`Groups`].
struct Group<'g> {
    groups: &'g mut Groups,
    at: usize,
}

impl Group<'_> {
    fn find(&self, name: &Arc<str>, labels: &LabelTuple) -> Option<usize> {
        let mut at = self.groups.list[self.at].0;
        while at != NO_SAMPLE {
            let sample = &self.groups.samples[at as usize];
            if Arc::ptr_eq(&sample.name, name) && Arc::ptr_eq(&sample.labels, labels) {
                return Some(at as usize);
            }
            at = sample.next;
        }
        None
    }

    fn push(&mut self, name: &Arc<str>, labels: &LabelTuple, source: Source) {
        let samples = &mut self.groups.samples;
        let at = samples.len() as u32;
        samples.push(GroupSample {
            name: Arc::clone(name),
            labels: Arc::clone(labels),
            source,
            next: NO_SAMPLE,
        });
        let (first, last) = &mut self.groups.list[self.at];
        if *first == NO_SAMPLE {
            *first = at;
        } else {
            samples[*last as usize].next = at;
        }
        *last = at;
    }

    /// The slot of a sample, inserting it (with a new slot) if new.
    fn slot(&mut self, name: &Arc<str>, labels: &LabelTuple, slots: &mut usize) -> u32 {
        if let Some(at) = self.find(name, labels) {
            if let Source::Slot(slot) = self.groups.samples[at].source {
                return slot;
            }
        }
        let slot = *slots as u32;
        *slots += 1;
        self.push(name, labels, Source::Slot(slot));
        slot
    }

    /// `samples[(name, labels)] = source`: replaces in place, or appends.
    fn set(&mut self, name: &Arc<str>, labels: &LabelTuple, source: Source) {
        match self.find(name, labels) {
            Some(at) => self.groups.samples[at].source = source,
            None => self.push(name, labels, source),
        }
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

impl Plan {
    /// How many series slots the plan merges into.
    pub(crate) fn slot_count(&self) -> usize {
        self.slot_count
    }

    /// Works out the merge of `files` (good files, in merge order).
    pub(crate) fn build<'a>(
        files: impl IntoIterator<Item = PlanInput<'a>>,
        keys: &'a KeyTable,
        accumulate: bool,
        interner: &mut Interner,
        cache: &mut PlanCache,
    ) -> Plan {
        let mut plan = Plan::default();
        let mut families: Vec<FamilyAcc<'a>> = Vec::new();
        let mut index: HashMap<usize, usize> = HashMap::new();
        let mut templates: Vec<Template<'a>> = Vec::new();
        let mut copies: Vec<(usize, usize, usize)> = Vec::new();
        for input in files {
            let kind = input.file.name.kind();
            let ftype = family_type(kind);
            plan.files.push(PlannedFile {
                index: input.index,
                entries: input.file.entries.len(),
            });
            let start = plan.ops.len();
            let entries = &input.file.entries;
            // The same keys, in the same order, as the last file of its kind
            // (each worker writes the same metrics): its entries feed the
            // same series the same way, so they take that file's operations
            // once those are worked out, and add nothing else to the merge.
            // Not for gauges: a gauge family's mode is its last file's, and
            // in `all` modes each file's samples are its own (pid label).
            let reusable = !matches!(kind, MetricKind::Gauge(_));
            if reusable {
                if let Some(template) = templates.iter().find(|t| t.kind == kind) {
                    if template.entries.len() == entries.len()
                        && template
                            .entries
                            .iter()
                            .zip(entries)
                            .all(|(a, b)| a.key == b.key)
                    {
                        plan.ops.resize(start + entries.len(), Op::Skip);
                        copies.push((template.start, start, entries.len()));
                        continue;
                    }
                }
                let template = Template {
                    kind,
                    entries,
                    start,
                };
                match templates.iter_mut().find(|t| t.kind == kind) {
                    Some(t) => *t = template,
                    None => templates.push(template),
                }
            }
            let pid = interner.string(input.file.name.id());
            for entry in entries {
                let op_index = plan.ops.len();
                plan.ops.push(Op::Skip);
                let key = keys.get(entry.key);
                let i = *index.entry(addr(&key.family)).or_insert_with(|| {
                    families.push(FamilyAcc {
                        name: Arc::clone(&key.family),
                        help: Arc::clone(&key.help),
                        family_type: ftype,
                        first_file: input.path,
                        help_conflict: false,
                        dropped_types: Vec::new(),
                        modes: Vec::new(),
                        members: Vec::new(),
                    });
                    families.len() - 1
                });
                let family = &mut families[i];
                if family.family_type != ftype {
                    if !family.dropped_types.contains(&ftype) {
                        family.dropped_types.push(ftype);
                        plan.conflicts.insert(Conflict::Type {
                            family: family.name.to_string(),
                            kept: family.family_type.as_str(),
                            kept_file: family.first_file.display().to_string(),
                            dropped: ftype.as_str(),
                            dropped_file: input.path.display().to_string(),
                        });
                    }
                    continue;
                }
                if !family.help_conflict && !Arc::ptr_eq(&family.help, &key.help) {
                    family.help_conflict = true;
                    plan.conflicts.insert(Conflict::Help {
                        family: family.name.to_string(),
                        kept: family.help.to_string(),
                        other: key.help.to_string(),
                        other_file: input.path.display().to_string(),
                    });
                }
                if let MetricKind::Gauge(mode) = kind {
                    if family.modes.last() != Some(&mode) {
                        family.modes.push(mode);
                    }
                }
                family.members.push((op_index, key, Arc::clone(&pid)));
            }
        }
        for family in families {
            let planned = plan.accumulate_family(family, accumulate, interner, cache);
            plan.families.push(planned);
        }
        for (from, to, len) in copies {
            plan.ops.copy_within(from..from + len, to);
        }
        plan
    }

    /// `_accumulate_metrics` for one family: assigns slots and operations,
    /// and the output order.
    fn accumulate_family(
        &mut self,
        family: FamilyAcc<'_>,
        accumulate: bool,
        interner: &mut Interner,
        cache: &mut PlanCache,
    ) -> PlanFamily {
        let mode = family.modes.last().copied();
        if family.modes.len() > 1 {
            let mut seen: Vec<&str> = Vec::new();
            for m in &family.modes {
                if !seen.contains(&m.as_str()) {
                    seen.push(m.as_str());
                }
            }
            self.conflicts.insert(Conflict::GaugeMode {
                family: family.name.to_string(),
                modes: seen.join(", "),
                used: mode.map_or("all", GaugeMode::as_str),
            });
        }
        let mut groups = Groups::default();
        if family.family_type == FamilyType::Gauge && mode.unwrap_or(GaugeMode::All).keeps_pid() {
            // Most likely a series per entry: one label set each, with its
            // file's pid. Sized once rather than grown by doubling.
            let series = family.members.len();
            groups.index.reserve(series);
            groups.list.reserve(series);
            groups.samples.reserve(series);
            cache.pid_tuples.reserve(series);
            cache.exposed.reserve(series);
        }
        let mut most_recent: Vec<(PlanSample, u32)> = Vec::new();
        let mut most_recent_index: HashMap<(usize, usize), u32> = HashMap::new();
        let mut most_recent_groups: HashMap<usize, u32> = HashMap::new();
        // Histogram buckets: per label set without `le`, (bound, raw slot)
        // in insertion order.
        let mut buckets: Vec<(LabelTuple, Vec<(f64, u32)>)> = Vec::new();
        let mut bucket_index: HashMap<usize, usize> = HashMap::new();
        for (op_index, key, pid) in family.members {
            let op = match family.family_type {
                FamilyType::Gauge => {
                    let mode = mode.unwrap_or(GaugeMode::All);
                    let labels = if mode.keeps_pid() {
                        cache.with_pid(interner, &key.labels, &pid)
                    } else {
                        Arc::clone(&key.labels_no_pid)
                    };
                    let name = &key.sample;
                    match MergeRule::of_gauge(mode) {
                        MergeRule::MostRecent => {
                            let next = self.slot_count as u32;
                            let slot = *most_recent_index
                                .entry((addr(&labels), addr(name)))
                                .or_insert_with(|| {
                                    self.slot_count += 1;
                                    let groups = most_recent_groups.len() as u32;
                                    let group =
                                        *most_recent_groups.entry(addr(&labels)).or_insert(groups);
                                    most_recent.push((
                                        PlanSample {
                                            name: Arc::clone(name),
                                            labels: cache.exposed(&labels),
                                            source: Source::Slot(next),
                                        },
                                        group,
                                    ));
                                    next
                                });
                            Op::MostRecent(slot)
                        }
                        MergeRule::Min => Op::Min(groups.get(&labels).slot(
                            name,
                            &labels,
                            &mut self.slot_count,
                        )),
                        MergeRule::Max => Op::Max(groups.get(&labels).slot(
                            name,
                            &labels,
                            &mut self.slot_count,
                        )),
                        MergeRule::Sum => Op::Add(groups.get(&labels).slot(
                            name,
                            &labels,
                            &mut self.slot_count,
                        )),
                        MergeRule::PerProcess => Op::Set(groups.get(&labels).slot(
                            name,
                            &labels,
                            &mut self.slot_count,
                        )),
                    }
                }
                FamilyType::Histogram => match &key.bucket {
                    Some(Ok(bucket)) => {
                        let i =
                            *bucket_index
                                .entry(addr(&bucket.without_le))
                                .or_insert_with(|| {
                                    buckets.push((Arc::clone(&bucket.without_le), Vec::new()));
                                    buckets.len() - 1
                                });
                        let bounds = &mut buckets[i].1;
                        // A dict keyed by float: 0.0 and -0.0 are one key,
                        // and the first one inserted is the one printed.
                        let slot = match bounds.iter().find(|(b, _)| *b == bucket.bound) {
                            Some(&(_, slot)) => slot,
                            None => {
                                let slot = self.slot_count as u32;
                                self.slot_count += 1;
                                bounds.push((bucket.bound, slot));
                                slot
                            }
                        };
                        Op::Add(slot)
                    }
                    // A bucket bound that is not a number makes the file bad
                    // before it gets here.
                    Some(Err(_)) => Op::Skip,
                    None => Op::Add(groups.get(&key.labels).slot(
                        &key.sample,
                        &key.labels,
                        &mut self.slot_count,
                    )),
                },
                FamilyType::Counter | FamilyType::Summary => Op::Add(groups.get(&key.labels).slot(
                    &key.sample,
                    &key.labels,
                    &mut self.slot_count,
                )),
            };
            self.ops[op_index] = op;
        }
        if !buckets.is_empty() {
            let bucket_name = cache.suffixed(interner, &family.name, "_bucket");
            let count_name = cache.suffixed(interner, &family.name, "_count");
            for (labels, mut bounds) in buckets {
                bounds.sort_by(|a, b| a.0.total_cmp(&b.0));
                let set = self.bucket_sets.len() as u32;
                self.bucket_sets
                    .push(bounds.iter().map(|&(_, slot)| slot).collect());
                for (bound, slot) in bounds {
                    let tuple = cache.bucket_tuple(interner, &labels, bound);
                    let source = if accumulate {
                        Source::Cumulative(slot)
                    } else {
                        Source::Slot(slot)
                    };
                    groups.get(&labels).set(&bucket_name, &tuple, source);
                }
                if accumulate {
                    groups
                        .get(&labels)
                        .set(&count_name, &labels, Source::Count(set));
                }
            }
        }
        let mut samples = Vec::with_capacity(groups.samples.len());
        for sample in groups.into_samples() {
            samples.push(PlanSample {
                name: sample.name,
                labels: cache.exposed(&sample.labels),
                source: sample.source,
            });
        }
        PlanFamily {
            name: family.name,
            help: family.help,
            family_type: family.family_type,
            gauge_mode: if family.family_type == FamilyType::Gauge {
                mode
            } else {
                None
            },
            samples,
            most_recent,
        }
    }
}
