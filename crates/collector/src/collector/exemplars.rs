//! Exemplars: read from the exemplar files of the files merged, and the
//! latest of each series attached to its merged sample.
//!
//! An exemplar file's keys are the `*.db` entries' keys, so an exemplar
//! belongs to the series its entry is merged into. Of all the files merged
//! into a series, the exemplar with the latest timestamp is kept (on a tie,
//! the first in merge order); a histogram's stays on the bucket it was
//! recorded on. Exemplar files are looked for only in the `exemplars`
//! subdirectory: a directory without one costs one failed `stat`. A settled
//! file's exemplar file (its writer is gone) is read once and its records
//! kept, so a warm scrape reads only the live workers' exemplar files, and
//! those through maps (`live_exemplars`). While collections are quiet (no
//! event, nothing newly settled, the same listing and plan), a scrape takes
//! the last walk's steps again: one per run of kept files, one per other
//! file, so its cost follows the live workers, not the directory.
//!
//! What each entry's key names is worked out once (see `exemplar_series`
//! and `exemplar_files`): a warm scrape reads the records and compares
//! timestamps, and decodes no key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use multiprom_format::exemplar_file::{exemplar_path, EXEMPLAR_DIR};
use multiprom_format::{read_exemplar_records, Exemplar, ReadError, ReadErrorKind};

use crate::family::{FamilyType, MergedFamily, MergedSample};
use crate::problem::Warning;
use crate::tracked::TrackedFile;
use crate::watch::Changes;

use super::exemplar_files::ExemplarFiles;
use super::exemplar_series::{SeriesId, SeriesTable};
use super::file_entry::{path_bytes, FileEntry};
use super::live_exemplars::{LiveExemplarFile, MapRead, MappedExemplars};

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
    latest: Vec<Option<Arc<Exemplar>>>,
    /// The series of each carrying sample of this scrape, in order.
    sample_series: Vec<SeriesId>,
    /// The bytes of the exemplar file being read, kept for the next one.
    buf: Vec<u8>,
    /// The listing of the collector's directory in which it was last looked
    /// at for an exemplar subdirectory, and whether it had one.
    looked_in: Option<(u64, bool)>,
    /// The last look found an exemplar subdirectory.
    saw_dir: bool,
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
    /// What the exemplar file of each settled file held, by the file's
    /// index in the file table.
    settled: Vec<Option<KeptRecords>>,
    /// Numbers each [`KeptRecords`] made, so that a run of them is known.
    kept_so_far: u64,
    /// The runs of consecutive kept files of the last scrape, in merge
    /// order, each with the winner of each series within it.
    runs: Vec<KeptRun>,
    /// The live files kept mapped.
    mapped: MappedExemplars,
    /// The last walk's steps, to take again while collections are quiet.
    plan: Option<QuietPlan>,
}

/// Consecutive settled files (in merge order) whose exemplars are kept,
/// with the exemplar each series gets from them alone. The latest of a
/// series is the first with the highest timestamp in merge order; as long
/// as no timestamp is NaN that is the same taken run by run (the winner of
/// a run against the winner so far), so a poll offers each run's winners
/// instead of every record of every file.
#[derive(Debug)]
struct KeptRun {
    /// The files' [`KeptRecords::number`]s, in order...
    numbers: Vec<u64>,
    /// ...and their indexes in the file table.
    indexes: Vec<usize>,
    /// The winner of each series in the run; `None` when a record's
    /// timestamp is NaN (then every record is offered in order).
    winners: Option<Vec<(SeriesId, Arc<Exemplar>)>>,
}

/// A settled file's exemplars: its writer is gone, so they stay as read
/// until something opens or touches its `*.db` file (which a writer taking
/// the identifier over does before writing any exemplar, and a compaction
/// or a removal does to the `*.db` file too).
#[derive(Debug)]
struct KeptRecords {
    /// The `*.db` file's path (the file table's own, compared by address:
    /// a table slot taken by another file is told apart).
    path: Arc<Path>,
    /// What its settling looked like when read: the collection its writer
    /// was seen gone in and its change count.
    settled: (u64, u64),
    /// The records that name a series and hold an exemplar, in file order
    /// (none when the exemplar file does not exist).
    records: Vec<(SeriesId, Arc<Exemplar>)>,
    /// Told apart from every other kept file's records.
    number: u64,
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

/// How the files of a collection are settled (see
/// `DirCollector::settle_exited_writers`), for exemplar files to be kept.
#[derive(Debug, Clone, Copy)]
pub(super) struct ExemplarSettling {
    /// The merge plan's generation: a file settled for it is.
    pub(super) generation: u64,
    /// This collection looks at every file: nothing kept is trusted.
    pub(super) full_look: bool,
    /// The settling version (see `SettleState::settle_version`): the
    /// same one, on the same plan, means no file settled or changed since.
    pub(super) version: u64,
}

/// Reads the exemplar files of the good files of `order` (in `known`) and
/// attaches the latest exemplar of each series to its sample in `families`.
/// A bad exemplar file is skipped and reported in `warnings` once. `dir`:
/// the directory all the files are in, if they are in one, and which
/// listing of it this is (see `Listing::listings`; `None`: not
/// known). With `settling`, a settled file's exemplar file is read once
/// and kept (a missing one too) until the file stops being settled. `maps`:
/// how many live files' exemplar files may be kept mapped (`None`: none).
#[allow(clippy::too_many_arguments)]
pub(super) fn attach_exemplars(
    known: &[Option<FileEntry>],
    order: &[usize],
    dir: Option<(&Path, Option<u64>)>,
    settling: Option<ExemplarSettling>,
    maps: Option<usize>,
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
    // Whether each directory has an exemplar subdirectory, looked at once:
    // a listing's files share one directory, so this is looked up by a
    // byte comparison per file.
    let mut looked: Vec<(&Path, bool)> = Vec::new();
    if let Some((dir, listing)) = dir {
        // One look: most directories have no exemplars, and their
        // collections should not pay a step per file for them; nor even
        // that look while the directory's listing is the one it was made
        // in (the watch saw no name come or go since, the subdirectory's
        // included).
        let has = match state.looked_in {
            Some((looked, has)) if listing == Some(looked) => has,
            _ => has_exemplar_dir(dir),
        };
        state.looked_in = listing.map(|listing| (listing, has));
        if !has {
            if state.saw_dir {
                state.reported.clear();
                state.resolved = Resolved::default();
                state.saw_dir = false;
            }
            return;
        }
        state.saw_dir = true;
        looked.push((dir, true));
    }
    let dir = dir.map(|(dir, _)| dir);
    state.want_samples(families);
    state.resolved.files.begin();
    if maps.is_none() {
        state.resolved.mapped.clear();
    }
    state.resolved.mapped.begin();
    // A quiet stretch of collections (nothing settled, no event, the same
    // listing and plan) leaves every settled file and what was kept of it
    // as it was: the last walk's steps are taken again, a step per run of
    // kept files and per other file, not per file.
    let quiet = settling
        .filter(|s| dir.is_some() && !s.full_look)
        .map(|s| (s.generation, s.version));
    let plan = std::mem::take(&mut state.resolved.plan)
        .filter(|plan| quiet == Some(plan.settled) && plan.order.as_slice() == order);
    let mut walk = Walk {
        known,
        dir,
        looked,
        settling,
        maps,
        problems: BTreeMap::new(),
    };
    let plan = match plan {
        Some(plan) => {
            let mut still = true;
            for step in &plan.steps {
                match *step {
                    Step::Run(run) => state.offer_kept_run(run),
                    Step::File(index) => still &= walk.file(state, index),
                }
            }
            still.then_some(plan)
        }
        None => {
            // The kept files met since the last file read, and how many
            // runs of them were offered so far.
            let mut run: Vec<usize> = Vec::new();
            let mut runs = 0;
            let mut steps = Vec::new();
            let mut still = true;
            for &index in order {
                if walk.is_kept(state, index) {
                    run.push(index);
                    continue;
                }
                // Offered in merge order: the kept files before this one
                // first.
                if !run.is_empty() {
                    steps.push(Step::Run(runs));
                }
                state.offer_run(&mut run, &mut runs);
                steps.push(Step::File(index));
                still &= walk.file(state, index);
            }
            if !run.is_empty() {
                steps.push(Step::Run(runs));
            }
            state.offer_run(&mut run, &mut runs);
            state.resolved.runs.truncate(runs);
            quiet.filter(|_| still).map(|settled| QuietPlan {
                settled,
                order: order.to_vec(),
                steps,
            })
        }
    };
    state.resolved.plan = plan;
    let problems = walk.problems;
    state.resolved.files.end();
    state.resolved.mapped.end();
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

/// Steps of a walk of a collection's files, taken again while the
/// collections are quiet.
#[derive(Debug)]
struct QuietPlan {
    /// The plan generation and settling version it holds for.
    settled: (u64, u64),
    /// The files walked, in merge order.
    order: Vec<usize>,
    steps: Vec<Step>,
}

#[derive(Debug, Clone, Copy)]
enum Step {
    /// Offer the kept run of this number.
    Run(usize),
    /// Look at the file of this index of the file table.
    File(usize),
}

/// What a walk of the files goes by.
struct Walk<'a> {
    known: &'a [Option<FileEntry>],
    /// The directory all the files are in, if they are in one.
    dir: Option<&'a Path>,
    /// Whether each directory looked at has an exemplar subdirectory.
    looked: Vec<(&'a Path, bool)>,
    settling: Option<ExemplarSettling>,
    maps: Option<usize>,
    problems: BTreeMap<PathBuf, ReadError>,
}

/// A file of the walk that is merged and may have exemplars: its entry,
/// directory, and how it is settled if its writer is gone.
struct Walked<'a> {
    entry: &'a FileEntry,
    file: &'a TrackedFile,
    dir: &'a Path,
    settled: Option<(u64, u64)>,
}

impl<'a> Walk<'a> {
    /// The file at `index`, unless it has no exemplars to offer (not
    /// merged, bad, or in a directory without an exemplar subdirectory).
    fn walked(&mut self, index: usize) -> Option<Walked<'a>> {
        let entry = self.known.get(index).and_then(Option::as_ref)?;
        let file = entry.file.as_ref().filter(|_| entry.problem.is_none())?;
        let dir = match self.dir {
            Some(dir) => dir,
            None => entry.path.parent().unwrap_or(Path::new("")),
        };
        let has = match self
            .looked
            .iter()
            .rfind(|(seen, _)| path_bytes(seen) == path_bytes(dir))
        {
            Some(&(_, has)) => has,
            None => {
                let has = has_exemplar_dir(dir);
                self.looked.push((dir, has));
                has
            }
        };
        if !has {
            return None;
        }
        let settled = self
            .settling
            .filter(|s| file.is_settled(s.generation))
            .map(|_| (file.writer_gone_in, file.changes()));
        Some(Walked {
            entry,
            file,
            dir,
            settled,
        })
    }

    /// Whether nothing kept may be trusted: every file is looked at, as
    /// after lost events. What a settled file's read finds is kept all the
    /// same, so that the collections after this one need not read it again.
    fn trusts_nothing(&self) -> bool {
        self.settling.is_some_and(|s| s.full_look)
    }

    /// Whether the file at `index` is settled and its exemplars kept.
    fn is_kept(&mut self, state: &ExemplarState, index: usize) -> bool {
        if self.trusts_nothing() {
            return false;
        }
        self.walked(index).is_some_and(|walked| {
            walked
                .settled
                .is_some_and(|settled| state.is_kept(index, &walked.entry.path, settled))
        })
    }

    /// Offers the exemplars of the file at `index`: its kept ones, or read
    /// (through a map if it is a live writer's, else with `pread`, and kept
    /// if it is settled). Whether the file is a live writer's (or has
    /// nothing to offer): else the walk is not one to take again as it was.
    fn file(&mut self, state: &mut ExemplarState, index: usize) -> bool {
        let Some(Walked {
            entry,
            file,
            dir,
            settled,
        }) = self.walked(index)
        else {
            return true;
        };
        if let Some(settled) = settled.filter(|_| !self.trusts_nothing()) {
            if state.is_kept(index, &entry.path, settled) {
                state.offer_kept(index);
                return false;
            }
        }
        // A live writer's file (or any, with no settling) through its map;
        // a settled one is read once and kept instead.
        let settled_now = self.settling.is_some_and(|s| file.is_settled(s.generation));
        if let Some(maps) = self.maps.filter(|_| !settled_now) {
            let live = LiveExemplarFile {
                index,
                db_path: &entry.path,
                changes: file.changes(),
                dir,
                name: &file.name,
            };
            match state.read_mapped(live, maps) {
                MapRead::Read | MapRead::Missing => return true,
                MapRead::Shrunk => {
                    let path = live.path();
                    let error = ReadError::new(&path, 0, ReadErrorKind::ShrankUnderMap);
                    self.problems.insert(path, error);
                    return true;
                }
                MapRead::Pread => {}
            }
        }
        let path = exemplar_path(dir, &file.name);
        let keep = settled.map(|settled| (index, &entry.path, settled));
        // A file with no exemplars has no exemplar file: not a problem.
        if let Err(error) = state.offer(path.clone(), keep) {
            if !error.is_vanished() {
                self.problems.insert(path, error);
            }
        }
        !settled_now
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
    /// the first kept stays). Only a winner's labels are decoded, unless
    /// the file is to be kept (`keep`: its index in the file table, its
    /// `*.db` path and how it is settled): then every record's are, and
    /// kept for the next scrapes (none when the file is missing).
    fn offer(
        &mut self,
        path: PathBuf,
        keep: Option<(usize, &Arc<Path>, (u64, u64))>,
    ) -> Result<(), ReadError> {
        let Resolved {
            series,
            files,
            settled,
            kept_so_far,
            ..
        } = &mut self.resolved;
        let (wanted, latest) = (&self.wanted, &mut self.latest);
        let mut records = Vec::new();
        let mut cursor = files.file(path.clone());
        let read = read_exemplar_records(&path, &mut self.buf, |record| {
            let Some(id) = cursor.series(record.offset, record.raw_key, series) else {
                return;
            };
            let wins = wanted.get(id).copied().unwrap_or(false)
                && latest[id]
                    .as_ref()
                    .is_none_or(|kept| record.timestamp > kept.timestamp);
            if keep.is_some() {
                if let Some(exemplar) = record.exemplar() {
                    let exemplar = Arc::new(exemplar);
                    if wins {
                        latest[id] = Some(Arc::clone(&exemplar));
                    }
                    records.push((id, exemplar));
                }
            } else if wins {
                // A series numbered in this scrape has no sample in it.
                if let Some(exemplar) = record.exemplar() {
                    latest[id] = Some(Arc::new(exemplar));
                }
            }
        });
        let whole = match &read {
            Ok(_) => true,
            Err(error) => error.is_vanished(),
        };
        if let Some((index, db_path, how)) = keep.filter(|_| whole) {
            if settled.len() <= index {
                settled.resize_with(index + 1, || None);
            }
            *kept_so_far += 1;
            settled[index] = Some(KeptRecords {
                path: Arc::clone(db_path),
                settled: how,
                records,
                number: *kept_so_far,
            });
        }
        read.map(|_| ())
    }

    /// Offers the exemplars of a live file through its map (made if fewer
    /// than `maps` are), as [`ExemplarState::offer`] offers a file read.
    fn read_mapped(&mut self, file: LiveExemplarFile<'_>, maps: usize) -> MapRead {
        let Resolved { series, mapped, .. } = &mut self.resolved;
        let (wanted, latest) = (&self.wanted, &mut self.latest);
        let may_map = mapped.len() < maps;
        mapped.read(file, may_map, series, |id, exemplar| {
            let wins = wanted.get(id).copied().unwrap_or(false)
                && latest[id]
                    .as_ref()
                    .is_none_or(|kept| exemplar.timestamp > kept.timestamp);
            if wins {
                latest[id] = Some(Arc::clone(exemplar));
            }
        })
    }

    /// Files kept mapped.
    pub(super) fn mapped_files(&self) -> usize {
        self.resolved.mapped.len()
    }

    /// Whether the last collection that looked found an exemplar
    /// subdirectory (so its watch is worth setting).
    pub(super) fn saw_dir(&self) -> bool {
        self.saw_dir
    }

    /// Takes what the directory watch saw in the exemplar subdirectory:
    /// the maps of files touched there are dropped; all of them when its
    /// watch ended or every file is looked at again (`everything`).
    pub(super) fn watched(&mut self, changes: &Changes, everything: bool) {
        if everything || changes.subdir_unwatched {
            self.resolved.mapped.clear();
        } else {
            self.resolved.mapped.forget_named(&changes.subdir_touched);
        }
    }

    /// Whether the records of the settled file at `index` of the file
    /// table (with `db_path`) are kept from a read with it settled as
    /// `settled` is now.
    fn is_kept(&self, index: usize, db_path: &Arc<Path>, settled: (u64, u64)) -> bool {
        self.resolved
            .settled
            .get(index)
            .and_then(Option::as_ref)
            .is_some_and(|kept| Arc::ptr_eq(&kept.path, db_path) && kept.settled == settled)
    }

    /// Offers the kept records of the files of `run` (indexes of the file
    /// table, each [`ExemplarState::is_kept`], in merge order), as
    /// [`ExemplarState::offer`] would offer them file by file: through the
    /// winners of the run, found again only when its files are not those of
    /// the same run of the last scrape. `runs` counts the runs offered;
    /// `run` is emptied.
    fn offer_run(&mut self, run: &mut Vec<usize>, runs: &mut usize) {
        if run.is_empty() {
            return;
        }
        let kept = &self.resolved.settled;
        let numbers = run.iter().map(|&index| {
            kept.get(index)
                .and_then(Option::as_ref)
                .map_or(0, |k| k.number)
        });
        let cached = &mut self.resolved.runs;
        let same = cached
            .get(*runs)
            .is_some_and(|last| last.numbers.iter().copied().eq(numbers.clone()));
        if !same {
            let mut winners: foldhash::HashMap<SeriesId, usize> = foldhash::HashMap::default();
            let mut order: Vec<(SeriesId, Arc<Exemplar>)> = Vec::new();
            let mut nan = false;
            for &index in run.iter() {
                for (id, exemplar) in kept_records(kept, index) {
                    nan |= exemplar.timestamp.is_nan();
                    match winners.get(id) {
                        Some(&at) if exemplar.timestamp > order[at].1.timestamp => {
                            order[at].1 = Arc::clone(exemplar);
                        }
                        Some(_) => {}
                        None => {
                            winners.insert(*id, order.len());
                            order.push((*id, Arc::clone(exemplar)));
                        }
                    }
                }
            }
            let summary = KeptRun {
                numbers: numbers.collect(),
                indexes: run.clone(),
                winners: (!nan).then_some(order),
            };
            if cached.len() > *runs {
                cached[*runs] = summary;
            } else {
                cached.push(summary);
            }
        }
        self.offer_kept_run(*runs);
        *runs += 1;
        run.clear();
    }

    /// Offers the kept run of number `run` of the last walk: its winners,
    /// or (a timestamp of it being NaN) each of its records in order.
    fn offer_kept_run(&mut self, run: usize) {
        let Some(kept) = self.resolved.runs.get(run) else {
            return;
        };
        let (wanted, latest) = (&self.wanted, &mut self.latest);
        let mut offer = |id: SeriesId, exemplar: &Arc<Exemplar>| {
            offer_latest(wanted, latest, id, exemplar);
        };
        match &kept.winners {
            Some(winners) => {
                for (id, exemplar) in winners {
                    offer(*id, exemplar);
                }
            }
            None => {
                for &index in &kept.indexes {
                    for (id, exemplar) in kept_records(&self.resolved.settled, index) {
                        offer(*id, exemplar);
                    }
                }
            }
        }
    }

    /// Offers the kept records of the file at `index`, in order.
    fn offer_kept(&mut self, index: usize) {
        for (id, exemplar) in kept_records(&self.resolved.settled, index) {
            offer_latest(&self.wanted, &mut self.latest, *id, exemplar);
        }
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
                Some(latest) if attached[id].as_deref() != Some(&*latest) => Some(latest),
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

/// Makes `exemplar` the latest of series `id` if it is wanted and strictly
/// later than the latest so far (on a tie, or a NaN, the first stays).
fn offer_latest(
    wanted: &[bool],
    latest: &mut [Option<Arc<Exemplar>>],
    id: SeriesId,
    exemplar: &Arc<Exemplar>,
) {
    if !wanted.get(id).copied().unwrap_or(false) {
        return;
    }
    let latest = &mut latest[id];
    if latest
        .as_ref()
        .is_none_or(|latest| exemplar.timestamp > latest.timestamp)
    {
        *latest = Some(Arc::clone(exemplar));
    }
}

/// The kept records of the file at `index` (none if nothing is kept).
fn kept_records(kept: &[Option<KeptRecords>], index: usize) -> &[(SeriesId, Arc<Exemplar>)] {
    kept.get(index)
        .and_then(Option::as_ref)
        .map_or(&[][..], |kept| kept.records.as_slice())
}

/// Whether `dir` has an exemplar subdirectory (one that cannot be looked
/// at counts as none: exemplars are then left out, never the samples).
fn has_exemplar_dir(dir: &Path) -> bool {
    std::fs::metadata(dir.join(EXEMPLAR_DIR)).is_ok_and(|m| m.is_dir())
}
