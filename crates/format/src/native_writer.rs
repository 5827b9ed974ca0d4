//! Writing native histogram files (layout: [`crate::native_file`]).
//!
//! One process owns a file, as for `*.db` files. Threads of that process
//! record through [`NativeSeries`] handles: an observation into a bucket
//! the series already has is an atomic add under a shared lock, so
//! threads record side by side; only a new bucket (and, rarely, a lower
//! schema) takes the lock exclusively.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, Weak};

use crate::companion_file::{grow_companion, open_companion, OpenedCompanion};
use crate::error::WriteError;
use crate::file_name::FileName;
use crate::mapping::Mapping;
use crate::native_buckets::DEFAULT_ZERO_THRESHOLD;
use crate::native_buckets::{bucket_index, MAX_SCHEMA, MIN_SCHEMA};
use crate::native_file::{
    bucket_word, native_entry_len, native_header_bytes, native_histogram_path, parse_entry, word,
    MAX_NATIVE_BUCKETS, MAX_NATIVE_FILE_LEN, MOVED, NATIVE_HEADER_LEN, NATIVE_INITIAL_CAPACITY,
    NATIVE_RECORD_HEADER_LEN,
};
use crate::native_histogram::NativeHistogram;

/// How a new native histogram series records.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NativeHistogramConfig {
    /// The starting resolution, from -4 to 8 (clamped). Schema 3, the
    /// default, puts about 9% between bucket boundaries.
    pub schema: i8,
    /// Observations with an absolute value at most this go to the zero
    /// bucket.
    pub zero_threshold: f64,
    /// The most buckets a series keeps; one more lowers the schema (from 1
    /// to 65,536).
    pub max_buckets: u32,
}

impl Default for NativeHistogramConfig {
    fn default() -> Self {
        NativeHistogramConfig {
            schema: 3,
            zero_threshold: DEFAULT_ZERO_THRESHOLD,
            max_buckets: 160,
        }
    }
}

/// The native histogram file of one histogram `*.db` file, owned by this
/// process.
#[derive(Debug)]
pub struct NativeHistogramWriter {
    inner: Arc<Mutex<WriterInner>>,
}

/// The file, its mapping and every series, shared by the writer and its
/// series (a series appends its lower-schema record through it).
#[derive(Debug)]
struct WriterInner {
    path: PathBuf,
    file: File,
    mapping: Arc<Mapping>,
    used: usize,
    capacity: u64,
    series: HashMap<Box<str>, SeriesEntry>,
}

/// A series the file holds: where its current record is, and its handles
/// while any are alive (a series holds its writer, not the other way
/// round, so dropping every handle and the writer closes the file).
#[derive(Debug)]
struct SeriesEntry {
    record: usize,
    live: Weak<SeriesShared>,
}

impl SeriesEntry {
    fn of(series: &NativeSeries) -> SeriesEntry {
        let record = series.read().record;
        SeriesEntry {
            record,
            live: Arc::downgrade(&series.shared),
        }
    }
}

impl NativeHistogramWriter {
    /// Opens the native histogram file of `dir/name`
    /// (`dir/native-histograms/...`), creating the subdirectory and the
    /// file if they do not exist. An existing file (a reused pid) is
    /// continued: its series keep counting from where they were.
    pub fn open(dir: &Path, name: &FileName) -> Result<NativeHistogramWriter, WriteError> {
        let path = native_histogram_path(dir, name);
        let header = native_header_bytes(NATIVE_HEADER_LEN as u32);
        let OpenedCompanion {
            file,
            bytes,
            capacity,
        } = open_companion(&path, &header, NATIVE_INITIAL_CAPACITY, MAX_NATIVE_FILE_LEN)?;
        // Refuse anything that is not a whole native histogram file:
        // appending after garbage would hide every later record.
        crate::native_file::parse_native_histogram_file(&bytes, capacity)
            .map_err(|e| e.at(&path))?;
        let used = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
        let mapping =
            Arc::new(Mapping::new(&file, capacity).map_err(|e| WriteError::io(&path, e))?);
        let mut series: HashMap<Box<str>, SeriesEntry> = HashMap::new();
        let mut at = NATIVE_HEADER_LEN;
        while at < used {
            let parsed = parse_entry(&bytes, at, used).map_err(|e| e.at(&path))?;
            if !parsed.moved {
                // A key's last record is its current one.
                series.insert(
                    parsed.key.into(),
                    SeriesEntry {
                        record: parsed.record,
                        live: Weak::new(),
                    },
                );
            }
            at = parsed.end;
        }
        let inner = Arc::new(Mutex::new(WriterInner {
            path,
            file,
            mapping,
            used,
            capacity,
            series,
        }));
        Ok(NativeHistogramWriter { inner })
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> PathBuf {
        lock(&self.inner).path.clone()
    }

    /// The series of `key` (the `*.db` key form: the histogram's name as
    /// family and sample, its labels, its help), appending an empty record
    /// made by `config` if there is none. An existing series keeps the
    /// layout it has.
    pub fn series(
        &self,
        key: &str,
        config: NativeHistogramConfig,
    ) -> Result<NativeSeries, WriteError> {
        let mut state = lock(&self.inner);
        if let Some(entry) = state.series.get(key) {
            if let Some(shared) = entry.live.upgrade() {
                return Ok(NativeSeries { shared });
            }
            if let Some(record) = RecordState::load(&state.mapping, entry.record) {
                let series = NativeSeries::new(key, record, Arc::clone(&self.inner));
                state.series.insert(key.into(), SeriesEntry::of(&series));
                return Ok(series);
            }
        }
        let config = NativeHistogramConfig {
            schema: config.schema.clamp(MIN_SCHEMA, MAX_SCHEMA),
            zero_threshold: if config.zero_threshold >= 0.0 && config.zero_threshold.is_finite() {
                config.zero_threshold
            } else {
                DEFAULT_ZERO_THRESHOLD
            },
            max_buckets: config.max_buckets.clamp(1, MAX_NATIVE_BUCKETS),
        };
        let empty = NativeHistogram::empty(config.schema, config.zero_threshold);
        let record = state.append(key, &empty, config.max_buckets as usize)?;
        let series = NativeSeries::new(key, record, Arc::clone(&self.inner));
        state.series.insert(key.into(), SeriesEntry::of(&series));
        Ok(series)
    }
}

impl WriterInner {
    /// Appends a record for `key` holding `histogram`, with room for
    /// `capacity` buckets, and publishes it.
    fn append(
        &mut self,
        key: &str,
        histogram: &NativeHistogram,
        capacity: usize,
    ) -> Result<RecordState, WriteError> {
        let capacity = capacity.max(histogram.bucket_count()).max(1);
        let len = native_entry_len(key.len(), capacity);
        let at = self.used;
        let end = at as u64 + len as u64;
        if end > MAX_NATIVE_FILE_LEN || end > u64::from(u32::MAX) {
            return Err(WriteError::FileFull {
                path: self.path.clone(),
            });
        }
        if end > self.capacity {
            self.grow(end)?;
        }
        let mut entry = Vec::with_capacity(len);
        entry.extend_from_slice(&(key.len() as u32).to_le_bytes());
        entry.extend_from_slice(key.as_bytes());
        entry.resize(native_entry_len(key.len(), 0) - NATIVE_RECORD_HEADER_LEN, 0);
        let record = at + entry.len();
        let push = |entry: &mut Vec<u8>, w: u64| entry.extend_from_slice(&w.to_le_bytes());
        push(&mut entry, (capacity as u64) << 32);
        push(&mut entry, u64::from(i32::from(histogram.schema) as u32));
        push(&mut entry, histogram.zero_threshold.to_bits());
        push(&mut entry, histogram.zero_count);
        push(&mut entry, histogram.nan_count);
        push(&mut entry, histogram.sum.to_bits());
        push(&mut entry, histogram.bucket_count() as u64);
        let mut index = foldhash::HashMap::with_capacity_and_hasher(
            histogram.bucket_count(),
            foldhash::fast::RandomState::default(),
        );
        let sides = [(&histogram.positive, false), (&histogram.negative, true)];
        for (buckets, negative) in sides {
            for &(i, count) in buckets {
                let bucket = bucket_word(i, negative);
                index.insert(bucket, index.len());
                push(&mut entry, bucket);
                push(&mut entry, count);
            }
        }
        entry.resize(len, 0);
        self.mapping.write_bytes(at, &entry);
        self.used = end as usize;
        self.mapping.publish_used(self.used as u32);
        Ok(RecordState {
            mapping: Arc::clone(&self.mapping),
            record,
            schema: histogram.schema,
            zero_threshold: histogram.zero_threshold,
            capacity,
            index,
        })
    }

    /// Doubles the capacity until `needed` bytes fit.
    fn grow(&mut self, needed: u64) -> Result<(), WriteError> {
        let (capacity, mapping) = grow_companion(
            &self.file,
            &self.path,
            self.capacity,
            needed,
            MAX_NATIVE_FILE_LEN,
        )?;
        self.mapping = mapping;
        self.capacity = capacity;
        Ok(())
    }
}

/// Where a series' current record is and how it records.
#[derive(Debug)]
struct RecordState {
    mapping: Arc<Mapping>,
    /// Byte offset of the record (after key and padding).
    record: usize,
    schema: i8,
    zero_threshold: f64,
    capacity: usize,
    /// Bucket word to slot number.
    index: foldhash::HashMap<u64, usize>,
}

impl RecordState {
    /// The record at byte `record` of `mapping`, as this writer (or an
    /// earlier one) made it; `None` if it lies outside the mapping.
    fn load(mapping: &Arc<Mapping>, record: usize) -> Option<RecordState> {
        let header = mapping.words(record, word::BUCKETS)?;
        let load = |n: usize| header[n].load(Ordering::Relaxed);
        let capacity = ((load(word::FLAGS_CAPACITY) >> 32) as usize).max(1);
        let schema = (load(word::SCHEMA) as u32 as i32).clamp(MIN_SCHEMA.into(), MAX_SCHEMA.into());
        let zero_threshold = f64::from_bits(load(word::ZERO_THRESHOLD));
        let used = (load(word::BUCKETS_USED) as u32 as usize).min(capacity);
        let buckets = mapping.words(record + word::BUCKETS * 8, 2 * capacity)?;
        let index = (0..used)
            .map(|slot| (buckets[2 * slot].load(Ordering::Relaxed), slot))
            .collect();
        Some(RecordState {
            mapping: Arc::clone(mapping),
            record,
            schema: schema as i8,
            zero_threshold,
            capacity,
            index,
        })
    }

    /// The record's words (header and buckets).
    fn words(&self) -> Option<&[AtomicU64]> {
        self.mapping
            .words(self.record, word::BUCKETS + 2 * self.capacity)
    }

    /// The histogram the record holds now.
    fn snapshot(&self) -> NativeHistogram {
        let mut histogram = NativeHistogram::empty(self.schema, self.zero_threshold);
        let Some(words) = self.words() else {
            return histogram;
        };
        let load = |n: usize| words[n].load(Ordering::Relaxed);
        histogram.zero_count = load(word::ZERO_COUNT);
        histogram.nan_count = load(word::NAN_COUNT);
        histogram.sum = f64::from_bits(load(word::SUM));
        let used = (load(word::BUCKETS_USED) as u32 as usize).min(self.capacity);
        for slot in 0..used {
            let count = load(word::BUCKETS + 2 * slot + 1);
            let bucket = load(word::BUCKETS + 2 * slot);
            if count == 0 {
                continue;
            }
            let index = bucket as u32 as i32;
            if bucket >> 32 == 1 {
                histogram.negative.push((index, count));
            } else {
                histogram.positive.push((index, count));
            }
        }
        histogram.positive.sort_unstable_by_key(|&(i, _)| i);
        histogram.negative.sort_unstable_by_key(|&(i, _)| i);
        histogram
    }
}

/// A lock-free handle to one native histogram series in a mapped file.
///
/// Cloning is cheap; clones record into the same series. The handle keeps
/// its mapping alive, so it stays valid when the file grows and after the
/// [`NativeHistogramWriter`] is dropped (as [`crate::ValueSlot`] does; the
/// same notes on what other processes can do to the file apply).
#[derive(Debug, Clone)]
pub struct NativeSeries {
    shared: Arc<SeriesShared>,
}

#[derive(Debug)]
struct SeriesShared {
    key: Box<str>,
    record: RwLock<RecordState>,
    writer: Arc<Mutex<WriterInner>>,
}

/// Where an observation goes.
enum Target {
    Nan,
    Zero,
    Bucket(u64),
}

impl NativeSeries {
    fn new(key: &str, record: RecordState, writer: Arc<Mutex<WriterInner>>) -> NativeSeries {
        NativeSeries {
            shared: Arc::new(SeriesShared {
                key: key.into(),
                record: RwLock::new(record),
                writer,
            }),
        }
    }

    /// Records one observation.
    pub fn observe(&self, value: f64) {
        {
            let record = self.read();
            if record.add(value, 1) {
                return;
            }
        }
        // A bucket this series does not have yet.
        let mut record = self.write();
        if record.add(value, 1) {
            return;
        }
        let target = record.target(value);
        if let Target::Bucket(bucket) = target {
            if record.index.len() < record.capacity {
                record.append_bucket(bucket, 1);
                record.add_sum(value);
                return;
            }
        }
        // Full: lower the schema until the new bucket fits.
        let mut histogram = record.snapshot();
        let abs = value.abs();
        loop {
            let index = bucket_index(abs, histogram.schema);
            let side = if value < 0.0 {
                &histogram.negative
            } else {
                &histogram.positive
            };
            let has = side.binary_search_by_key(&index, |&(i, _)| i).is_ok();
            if has || histogram.bucket_count() < record.capacity || histogram.schema == MIN_SCHEMA {
                break;
            }
            histogram.reduce_to(histogram.schema - 1);
        }
        if !self.replace_record(&mut record, &histogram) {
            // No new record (the file is full or unwritable): the
            // observation still counts, in the nearest bucket there is.
            record.add_nearest(value);
            return;
        }
        if !record.add(value, 1) {
            if let Target::Bucket(bucket) = record.target(value) {
                if record.index.len() < record.capacity {
                    record.append_bucket(bucket, 1);
                    record.add_sum(value);
                    return;
                }
            }
            record.add_nearest(value);
        }
    }

    /// Adds a whole histogram's observations (the compaction of dead
    /// processes' series into one): at the coarser of the two schemas and
    /// the wider zero bucket.
    pub fn add(&self, histogram: &NativeHistogram) -> Result<(), WriteError> {
        let mut record = self.write();
        let mut merged = record.snapshot();
        merged.merge(histogram);
        let same_layout = merged.schema == record.schema
            && merged.zero_threshold.to_bits() == record.zero_threshold.to_bits()
            && merged.bucket_count() <= record.capacity;
        if same_layout {
            let Some(words) = record.words() else {
                return Ok(());
            };
            words[word::ZERO_COUNT].store(merged.zero_count, Ordering::Relaxed);
            words[word::NAN_COUNT].store(merged.nan_count, Ordering::Relaxed);
            words[word::SUM].store(merged.sum.to_bits(), Ordering::Relaxed);
            let sides = [(&merged.positive, false), (&merged.negative, true)];
            for (buckets, negative) in sides {
                for &(i, count) in buckets {
                    let bucket = bucket_word(i, negative);
                    match record.index.get(&bucket) {
                        Some(&slot) => {
                            if let Some(words) = record.words() {
                                words[word::BUCKETS + 2 * slot + 1].store(count, Ordering::Relaxed);
                            }
                        }
                        None => record.append_bucket(bucket, count),
                    }
                }
            }
            return Ok(());
        }
        let capacity = record.capacity.max(merged.bucket_count());
        self.replace_with(&mut record, &merged, capacity)
    }

    /// The histogram the series holds now.
    #[must_use]
    pub fn snapshot(&self) -> NativeHistogram {
        self.read().snapshot()
    }

    /// Moves the series to a new record holding `histogram`; `false` if
    /// it could not be written.
    fn replace_record(&self, record: &mut RecordState, histogram: &NativeHistogram) -> bool {
        let capacity = record.capacity;
        self.replace_with(record, histogram, capacity).is_ok()
    }

    fn replace_with(
        &self,
        record: &mut RecordState,
        histogram: &NativeHistogram,
        capacity: usize,
    ) -> Result<(), WriteError> {
        let mut state = lock(&self.shared.writer);
        let new = state.append(&self.shared.key, histogram, capacity)?;
        if let Some(entry) = state.series.get_mut(&*self.shared.key) {
            entry.record = new.record;
        }
        drop(state);
        // Only now the old record is marked: a reader that sees both takes
        // the later one.
        if let Some(words) = record.words() {
            let flags = words[word::FLAGS_CAPACITY].load(Ordering::Relaxed);
            words[word::FLAGS_CAPACITY].store(flags | u64::from(MOVED), Ordering::Release);
        }
        *record = new;
        Ok(())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, RecordState> {
        self.shared
            .record
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, RecordState> {
        self.shared
            .record
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl RecordState {
    fn target(&self, value: f64) -> Target {
        if value.is_nan() {
            return Target::Nan;
        }
        let abs = value.abs();
        if abs <= self.zero_threshold {
            return Target::Zero;
        }
        Target::Bucket(bucket_word(bucket_index(abs, self.schema), value < 0.0))
    }

    /// Adds `count` observations of `value` where the record has room
    /// already; `false` if its bucket is not there yet.
    fn add(&self, value: f64, count: u64) -> bool {
        let Some(words) = self.words() else {
            // Never: the record was bounds-checked when it was made.
            return true;
        };
        let cell = match self.target(value) {
            Target::Nan => &words[word::NAN_COUNT],
            Target::Zero => &words[word::ZERO_COUNT],
            Target::Bucket(bucket) => match self.index.get(&bucket) {
                Some(&slot) => &words[word::BUCKETS + 2 * slot + 1],
                None => return false,
            },
        };
        cell.fetch_add(count, Ordering::Relaxed);
        self.add_sum(value * count as f64);
        true
    }

    fn add_sum(&self, value: f64) {
        let Some(words) = self.words() else {
            return;
        };
        let sum = &words[word::SUM];
        let mut current = sum.load(Ordering::Relaxed);
        loop {
            let new = (f64::from_bits(current) + value).to_bits();
            match sum.compare_exchange_weak(current, new, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }

    /// Appends a bucket with `count` (the exclusive lock is held): its
    /// words first, then `buckets_used` covers it.
    fn append_bucket(&mut self, bucket: u64, count: u64) {
        let slot = self.index.len();
        let Some(words) = self.words() else {
            return;
        };
        if slot >= self.capacity {
            return;
        }
        words[word::BUCKETS + 2 * slot].store(bucket, Ordering::Relaxed);
        words[word::BUCKETS + 2 * slot + 1].store(count, Ordering::Relaxed);
        words[word::BUCKETS_USED].store(slot as u64 + 1, Ordering::Release);
        self.index.insert(bucket, slot);
    }

    /// Counts `value` in the bucket nearest its own on its side (the
    /// record is full at the coarsest schema, or no new record could be
    /// made), or in the zero bucket if its side has none.
    fn add_nearest(&self, value: f64) {
        let Some(words) = self.words() else {
            return;
        };
        let negative = value < 0.0;
        let want = bucket_index(value.abs(), self.schema);
        let nearest = self
            .index
            .iter()
            .filter(|(&b, _)| (b >> 32 == 1) == negative)
            .min_by_key(|(&b, _)| (i64::from(b as u32 as i32) - i64::from(want)).abs())
            .map(|(_, &slot)| slot);
        let cell = match nearest {
            Some(slot) => &words[word::BUCKETS + 2 * slot + 1],
            None => &words[word::ZERO_COUNT],
        };
        cell.fetch_add(1, Ordering::Relaxed);
        self.add_sum(value);
    }
}

fn lock(inner: &Mutex<WriterInner>) -> MutexGuard<'_, WriterInner> {
    inner.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native_file::read_native_histogram_file;
    use crate::MetricKind;

    fn writer(dir: &Path) -> NativeHistogramWriter {
        let name = FileName::new(MetricKind::Histogram, "7").unwrap();
        NativeHistogramWriter::open(dir, &name).unwrap()
    }

    const KEY: &str = r#"["latency", "latency", {"route": "/"}, "Latency."]"#;

    /// What observing `values` one by one at `schema` gives, with no limit.
    fn expected(values: &[f64], schema: i8) -> NativeHistogram {
        let mut h = NativeHistogram::empty(schema, DEFAULT_ZERO_THRESHOLD);
        for &v in values {
            let mut one = NativeHistogram::empty(schema, DEFAULT_ZERO_THRESHOLD);
            one.sum = v;
            if v.is_nan() {
                one.nan_count = 1;
            } else if v.abs() <= DEFAULT_ZERO_THRESHOLD {
                one.zero_count = 1;
            } else if v > 0.0 {
                one.positive.push((bucket_index(v, schema), 1));
            } else {
                one.negative.push((bucket_index(-v, schema), 1));
            }
            h.merge(&one);
        }
        h
    }

    #[test]
    fn observations_are_read_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let series = writer(dir.path())
            .series(KEY, NativeHistogramConfig::default())
            .unwrap();
        let values = [0.002, 0.5, 0.51, 1.0, 1.0, 3.7, 0.0, -2.0, 250.0];
        for v in values {
            series.observe(v);
        }
        let want = expected(&values, 3);
        assert_eq!(series.snapshot(), want);
        let name = FileName::new(MetricKind::Histogram, "7").unwrap();
        let file = read_native_histogram_file(&native_histogram_path(dir.path(), &name)).unwrap();
        assert_eq!(file.entries.len(), 1);
        assert_eq!(file.entries[0].raw_key, KEY);
        assert_eq!(file.entries[0].histogram, want);
        assert_eq!(want.count(), values.len() as u64);
    }

    #[test]
    fn a_full_series_lowers_its_schema_and_keeps_every_observation() {
        let dir = tempfile::tempdir().unwrap();
        let config = NativeHistogramConfig {
            max_buckets: 8,
            ..NativeHistogramConfig::default()
        };
        let series = writer(dir.path()).series(KEY, config).unwrap();
        let values: Vec<f64> = (1..=200).map(|n| f64::from(n) * 0.01).collect();
        for &v in &values {
            series.observe(v);
        }
        let got = series.snapshot();
        assert!(got.schema < 3 && got.bucket_count() <= 8, "{got:?}");
        assert_eq!(got, expected(&values, got.schema));
        // The reader takes the current record, not the moved ones.
        let name = FileName::new(MetricKind::Histogram, "7").unwrap();
        let file = read_native_histogram_file(&native_histogram_path(dir.path(), &name)).unwrap();
        assert_eq!(file.entries.len(), 1);
        assert_eq!(file.entries[0].histogram, got);
    }

    #[test]
    fn a_reopened_file_continues_its_series() {
        let dir = tempfile::tempdir().unwrap();
        {
            let series = writer(dir.path())
                .series(KEY, NativeHistogramConfig::default())
                .unwrap();
            series.observe(1.5);
            series.observe(2.5);
        }
        let series = writer(dir.path())
            .series(KEY, NativeHistogramConfig::default())
            .unwrap();
        series.observe(1.5);
        series.observe(9.0);
        assert_eq!(series.snapshot(), expected(&[1.5, 2.5, 1.5, 9.0], 3));
    }

    #[test]
    fn adding_histograms_merges_them() {
        let dir = tempfile::tempdir().unwrap();
        let series = writer(dir.path())
            .series(KEY, NativeHistogramConfig::default())
            .unwrap();
        series.observe(1.5);
        let coarse = expected(&[1.5, 0.3, -4.0], 1);
        series.add(&coarse).unwrap();
        assert_eq!(series.snapshot(), expected(&[1.5, 1.5, 0.3, -4.0], 1));
        let same = expected(&[1.5, 100.0], 1);
        series.add(&same).unwrap();
        assert_eq!(
            series.snapshot(),
            expected(&[1.5, 1.5, 0.3, -4.0, 1.5, 100.0], 1)
        );
    }

    #[test]
    fn threads_lose_no_observation() {
        let dir = tempfile::tempdir().unwrap();
        let config = NativeHistogramConfig {
            max_buckets: 20,
            ..NativeHistogramConfig::default()
        };
        let series = writer(dir.path()).series(KEY, config).unwrap();
        std::thread::scope(|s| {
            for t in 0..4 {
                let series = series.clone();
                s.spawn(move || {
                    for n in 0..5000 {
                        series.observe(f64::from(n % 97 + t) * 0.013 + 0.001);
                    }
                });
            }
        });
        let got = series.snapshot();
        assert_eq!(got.count(), 20_000);
        assert!(got.bucket_count() <= 20);
    }

    #[test]
    fn the_file_grows_and_every_series_stays_readable() {
        let dir = tempfile::tempdir().unwrap();
        let writer = writer(dir.path());
        // 100 records of 2,616 bytes: four doublings past the first 64 KiB.
        let series: Vec<NativeSeries> = (0..100)
            .map(|n| {
                let key = format!(r#"["h", "h", {{"n": "{n}"}}, "H."]"#);
                writer
                    .series(&key, NativeHistogramConfig::default())
                    .unwrap()
            })
            .collect();
        for (n, s) in series.iter().enumerate() {
            s.observe(n as f64 + 0.5);
        }
        let name = FileName::new(MetricKind::Histogram, "7").unwrap();
        let path = native_histogram_path(dir.path(), &name);
        assert!(std::fs::metadata(&path).unwrap().len() >= 100 * 2616);
        let file = read_native_histogram_file(&path).unwrap();
        assert_eq!(file.entries.len(), 100);
        for (n, entry) in file.entries.iter().enumerate() {
            assert_eq!(entry.histogram, expected(&[n as f64 + 0.5], 3));
        }
    }
}
