//! When each cumulative series (a counter, a histogram, a summary) started
//! counting: what OTLP's `start_time_unix_nano`, Remote-Write 2.0's start
//! timestamp and the protobuf exposition's `created_timestamp` carry.
//!
//! Every counter of a multiprocess directory counts from zero since the
//! directory was made: a series no process has written yet is zero, and
//! the files of exited workers keep their counts (compaction folds them,
//! keeping every total). So a series' start is the directory's *epoch*
//! (its birth time, as the file system reports it; the time multiprom
//! first saw it where none is reported), until the series goes down or
//! away (its files were removed): then it starts again after the last
//! collection that still saw the old count. The epoch and those restarts
//! are kept in a small file in the directory (not a `*.db` file, so
//! Python's collector never reads it), so they stay the same across
//! multiprom's restarts while the directory lives, and a new directory
//! starts anew.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::family::{FamilyType, MergedFamily, MergedSample};
use crate::native_histograms::series_key;
use crate::Scrape;

/// The file in the directory that keeps the epoch and the restarts.
pub const START_TIMES_FILE: &str = ".multiprom-start-times.json";

/// A file of start times larger than this is not read (it holds one line
/// per restarted series; a corrupt or foreign file must not cost memory).
const MAX_FILE: u64 = 64 << 20;

/// The start times of one collection's cumulative series.
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use multiprom_collector::StartTimes;
/// let epoch = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
/// let times = StartTimes::from_epoch(epoch);
/// assert_eq!(times.epoch(), epoch);
/// ```
#[derive(Debug, Clone)]
pub struct StartTimes {
    epoch: SystemTime,
    /// Series that started after the epoch, by [`series_key`].
    restarted: Arc<HashMap<Vec<u8>, SystemTime>>,
}

impl PartialEq for StartTimes {
    fn eq(&self, other: &Self) -> bool {
        // The same map, handed on from collection to collection, is told
        // equal at a glance.
        self.epoch == other.epoch
            && (Arc::ptr_eq(&self.restarted, &other.restarted) || self.restarted == other.restarted)
    }
}

impl StartTimes {
    /// Every series started at `epoch`.
    #[must_use]
    pub fn from_epoch(epoch: SystemTime) -> Self {
        StartTimes {
            epoch,
            restarted: Arc::default(),
        }
    }

    /// When the directory's counting began.
    #[must_use]
    pub fn epoch(&self) -> SystemTime {
        self.epoch
    }

    /// When the series of `sample` (of `family`) started counting: a
    /// histogram's buckets, count and sum share their series' start (its
    /// labels without `le`).
    #[must_use]
    pub fn of(&self, family: &MergedFamily, sample: &MergedSample) -> SystemTime {
        if self.restarted.is_empty() {
            return self.epoch;
        }
        let mut key = Vec::new();
        key_of(&mut key, family, sample);
        self.restarted.get(&key).copied().unwrap_or(self.epoch)
    }

    /// Seconds since the Unix epoch, as the exposition formats write times.
    #[must_use]
    pub fn seconds(time: SystemTime) -> f64 {
        match time.duration_since(UNIX_EPOCH) {
            Ok(after) => after.as_secs_f64(),
            Err(before) => -before.duration().as_secs_f64(),
        }
    }
}

/// The series key of `sample`: its family's name and its labels, without
/// `le` for a histogram's samples.
fn key_of(out: &mut Vec<u8>, family: &MergedFamily, sample: &MergedSample) {
    let histogram = family.family_type == FamilyType::Histogram;
    series_key(
        out,
        &family.name,
        sample
            .labels
            .iter()
            .filter(|(name, _)| !(histogram && &**name == "le"))
            .map(|(n, v)| (&**n, &**v)),
    );
}

/// The sample whose value tells whether a series went down: a counter's
/// `_total`, a histogram's or summary's `_count` (a sum may fall with
/// negative observations; a count never does).
fn counts(family: &MergedFamily, sample: &MergedSample) -> bool {
    match family.family_type {
        FamilyType::Counter => sample.name.ends_with("_total"),
        FamilyType::Histogram | FamilyType::Summary => sample.name.ends_with("_count"),
        FamilyType::Gauge => false,
    }
}

/// Records that every series of `dir` starts counting anew at `at`: for
/// whoever removed the directory's `*.db` files (its counts) while keeping
/// the directory, whose birth time would otherwise still be taken for the
/// start of the new counts. Replaces the file (a new one renamed over it).
pub fn restart_counting(dir: &Path, at: SystemTime) -> std::io::Result<()> {
    let path = dir.join(START_TIMES_FILE);
    let tmp = path.with_extension("json.tmp");
    let written = std::fs::write(&tmp, encode(&StartTimes::from_epoch(at)))
        .and_then(|()| std::fs::rename(&tmp, &path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// What is known of a directory's start times between collections: kept
/// by the served view, updated by each whole collection it reads.
#[derive(Debug, Default)]
pub(crate) struct StartTimeBook {
    state: Option<BookState>,
}

#[derive(Debug)]
struct BookState {
    times: StartTimes,
    /// Each series' counting sample's value at the last collection.
    last: HashMap<Vec<u8>, f64>,
    /// When the last collection was taken.
    last_time: SystemTime,
    /// The last collection read (shared collections are read once).
    last_collection: u64,
    /// Whether the file could be written (it is tried once more only when
    /// there is something new to keep).
    file: Option<PathBuf>,
}

impl StartTimeBook {
    /// The start times as they are (the first call reads the directory's
    /// file, or makes it).
    pub(crate) fn current(&mut self, dir: &Path, now: SystemTime) -> StartTimes {
        self.state
            .get_or_insert_with(|| BookState::load(dir, now))
            .times
            .clone()
    }

    /// The start times after `scrape` (a whole collection of `dir`, taken
    /// at `now`): the first call reads the directory's file (or makes it),
    /// later ones note the series that went down or away.
    pub(crate) fn observe(&mut self, dir: &Path, scrape: &Scrape, now: SystemTime) -> StartTimes {
        let state = self.state.get_or_insert_with(|| BookState::load(dir, now));
        if scrape.stats.collection != 0 && scrape.stats.collection <= state.last_collection {
            return state.times.clone();
        }
        state.last_collection = scrape.stats.collection;
        let mut seen: HashMap<Vec<u8>, f64> = HashMap::with_capacity(state.last.len());
        let mut new_restarts = Vec::new();
        let mut key = Vec::new();
        for family in &scrape.families {
            for sample in family.samples.iter().filter(|s| counts(family, s)) {
                key.clear();
                key_of(&mut key, family, sample);
                if let Some(&before) = state.last.get(&key) {
                    // NaN compares false: a NaN count is no restart.
                    if sample.value < before {
                        new_restarts.push((key.clone(), state.last_time));
                    }
                }
                seen.insert(key.clone(), sample.value);
            }
        }
        // A series gone (its files removed) that comes back starts anew.
        for gone in state.last.keys().filter(|k| !seen.contains_key(*k)) {
            new_restarts.push((gone.clone(), state.last_time));
        }
        state.last = seen;
        state.last_time = now;
        if !new_restarts.is_empty() {
            let restarted = Arc::make_mut(&mut state.times.restarted);
            restarted.extend(new_restarts);
            state.save();
        }
        state.times.clone()
    }
}

impl BookState {
    /// The directory's file, or a new epoch (written to a new file).
    fn load(dir: &Path, now: SystemTime) -> BookState {
        let path = dir.join(START_TIMES_FILE);
        let mut state = BookState {
            times: StartTimes::from_epoch(now),
            last: HashMap::new(),
            last_time: now,
            last_collection: 0,
            file: Some(path.clone()),
        };
        match read_file(&path) {
            Ok(Some(times)) => state.times = times,
            Ok(None) => {
                // The directory's birth: no series counted before it.
                let born = std::fs::metadata(dir).and_then(|m| m.created()).ok();
                state.times = StartTimes::from_epoch(born.map_or(now, |b| b.min(now)));
                state.save();
            }
            Err(why) => {
                tracing::warn!(
                    "{}: {why}; counting starts anew from now (the file is replaced)",
                    path.display()
                );
                state.save();
            }
        }
        state
    }

    /// Writes the file (a new one renamed over the old, so a reader never
    /// sees half of it). A directory multiprom cannot write to keeps the
    /// start times in memory only: said once.
    fn save(&mut self) {
        let Some(path) = &self.file else { return };
        let text = encode(&self.times);
        let tmp = path.with_extension("json.tmp");
        let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            tracing::info!(
                "{}: cannot keep start times ({e}); they last until multiprom stops",
                path.display()
            );
            self.file = None;
        }
    }
}

/// The file as JSON: `{"epoch_unix_nanos": N, "restarted": [[N, family,
/// [name, value, ...]], ...]}`.
fn encode(times: &StartTimes) -> String {
    let restarted: Vec<serde_json::Value> = times
        .restarted
        .iter()
        .map(|(key, at)| {
            let mut parts = split_key(key).into_iter();
            let family = parts.next().unwrap_or_default();
            serde_json::json!([nanos(*at), family, parts.collect::<Vec<_>>()])
        })
        .collect();
    serde_json::json!({
        "epoch_unix_nanos": nanos(times.epoch),
        "restarted": restarted,
    })
    .to_string()
}

fn read_file(path: &Path) -> Result<Option<StartTimes>, String> {
    use std::io::Read;
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read: {e}")),
    };
    let mut text = String::new();
    file.take(MAX_FILE + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read: {e}"))?;
    if text.len() as u64 > MAX_FILE {
        return Err(format!("larger than {MAX_FILE} bytes"));
    }
    decode(&text).map(Some)
}

fn decode(text: &str) -> Result<StartTimes, String> {
    let bad = || "not a multiprom start time file".to_owned();
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("{}: {e}", bad()))?;
    let epoch = value
        .get("epoch_unix_nanos")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(bad)?;
    let mut restarted = HashMap::new();
    for entry in value
        .get("restarted")
        .and_then(serde_json::Value::as_array)
        .ok_or_else(bad)?
    {
        let (Some(at), Some(family), Some(labels)) = (
            entry.get(0).and_then(serde_json::Value::as_u64),
            entry.get(1).and_then(serde_json::Value::as_str),
            entry.get(2).and_then(serde_json::Value::as_array),
        ) else {
            return Err(bad());
        };
        let labels: Option<Vec<&str>> = labels.iter().map(serde_json::Value::as_str).collect();
        let labels = labels.ok_or_else(bad)?;
        if labels.len() % 2 != 0 {
            return Err(bad());
        }
        let mut key = Vec::new();
        series_key(
            &mut key,
            family,
            labels.chunks_exact(2).map(|pair| (pair[0], pair[1])),
        );
        restarted.insert(key, from_nanos(at));
    }
    Ok(StartTimes {
        epoch: from_nanos(epoch),
        restarted: Arc::new(restarted),
    })
}

/// The texts of a [`series_key`], in order.
fn split_key(mut key: &[u8]) -> Vec<String> {
    let mut parts = Vec::new();
    while key.len() >= 8 {
        let mut len = [0u8; 8];
        len.copy_from_slice(&key[..8]);
        let len = usize::try_from(u64::from_le_bytes(len)).unwrap_or(usize::MAX);
        let Some(text) = key.get(8..8usize.saturating_add(len)) else {
            break;
        };
        parts.push(String::from_utf8_lossy(text).into_owned());
        key = &key[8 + len..];
    }
    parts
}

fn nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn from_nanos(nanos: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DirCollector;

    fn at(seconds: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(seconds)
    }

    #[test]
    fn counting_restarted_replaces_the_directorys_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let first = StartTimeBook::default().current(dir.path(), at(2_000_000_000));
        assert!(first.epoch() <= at(2_000_000_000));
        restart_counting(dir.path(), at(2_100_000_000)).unwrap();
        let again = StartTimeBook::default().current(dir.path(), at(2_200_000_000));
        assert_eq!(again.epoch(), at(2_100_000_000));
    }

    #[test]
    fn a_damaged_file_is_replaced_and_counting_starts_from_now() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(START_TIMES_FILE);
        std::fs::write(&path, b"\x00not json").unwrap();
        let times = StartTimeBook::default().current(dir.path(), at(2_000_000_000));
        assert_eq!(times.epoch(), at(2_000_000_000));
        // Replaced by a good one, which the next reader takes.
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(decode(&text).map(|t| t.epoch()), Ok(at(2_000_000_000)));
    }

    #[test]
    fn the_file_round_trips() {
        let mut key = Vec::new();
        series_key(
            &mut key,
            "requests",
            [("route", "/a\"b"), ("x", "é")].into_iter(),
        );
        let times = StartTimes {
            epoch: at(1_700_000_000),
            restarted: Arc::new(HashMap::from([(key, at(1_700_000_100))])),
        };
        assert_eq!(decode(&encode(&times)), Ok(times));
        assert!(decode("{}").is_err());
        assert!(decode("[1]").is_err());
        assert!(decode(r#"{"epoch_unix_nanos": 1, "restarted": [[1, "a", ["odd"]]]}"#).is_err());
    }

    #[test]
    fn a_series_that_goes_down_or_away_starts_again_after_the_last_collection_that_saw_it() {
        let dir = tempfile::tempdir().unwrap();
        let counter = |value: f64, collection: u64| {
            let family = MergedFamily {
                name: "c".into(),
                help: "h".into(),
                family_type: FamilyType::Counter,
                gauge_mode: None,
                samples: vec![MergedSample {
                    name: "c_total".into(),
                    labels: Arc::new([]),
                    value,
                    exemplar: None,
                }],
            };
            let mut scrape = DirCollector::new(dir.path()).collect().unwrap();
            let scrape = Arc::make_mut(&mut scrape);
            scrape.families = if value.is_nan() { vec![] } else { vec![family] };
            scrape.stats.collection = collection;
            scrape.clone()
        };
        let mut book = StartTimeBook::default();
        let first = book.observe(dir.path(), &counter(5.0, 1), at(2_000_000_000));
        let born = std::fs::metadata(dir.path()).unwrap().created().ok();
        assert_eq!(first.epoch(), born.unwrap_or(at(2_000_000_000)));
        let family_of = |s: &Scrape| (s.families[0].clone(), s.families[0].samples[0].clone());
        let up = counter(7.0, 2);
        let times = book.observe(dir.path(), &up, at(2_000_000_010));
        let (f, s) = family_of(&up);
        assert_eq!(times.of(&f, &s), first.epoch());
        let down = counter(1.0, 3);
        let times = book.observe(dir.path(), &down, at(2_000_000_020));
        assert_eq!(times.of(&f, &s), at(2_000_000_010));
        // Kept across a restart of multiprom.
        let again =
            StartTimeBook::default().observe(dir.path(), &counter(1.0, 1), at(2_000_000_030));
        assert_eq!(again.of(&f, &s), at(2_000_000_010));
        // Away, then back.
        book.observe(dir.path(), &counter(f64::NAN, 4), at(2_000_000_040));
        let times = book.observe(dir.path(), &counter(3.0, 5), at(2_000_000_050));
        assert_eq!(times.of(&f, &s), at(2_000_000_020));
    }
}
