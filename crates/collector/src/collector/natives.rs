//! Native histograms: read from the companion files of the histogram files
//! merged (`native-histograms/histogram_<id>.native`, see
//! [`multiprom_format::native_file`]) and merged per series.
//!
//! Every listed histogram file's companion is read, dead workers' and the
//! compacted file's too, as their `*.db` values are merged: a native
//! histogram counts every observation ever made, as the classic one does.
//! The merge goes in merge order (files as listed, each file's series in
//! file order), so the same directory always gives the same sums.
//!
//! A companion that is missing is the usual case (a process that records
//! no native histogram); a bad one costs its native histograms and a
//! warning, once, never a sample and never the scrape. What each key names
//! is decoded once and kept, so a warm scrape decodes no key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use multiprom_format::native_file::{native_histogram_path, NATIVE_HISTOGRAM_DIR};
use multiprom_format::{
    read_native_histogram_file_into, Key, MetricKind, NativeHistogramFile, ReadError,
};

use crate::native_histograms::{series_key, NativeHistograms};
use crate::problem::Warning;

use super::file_entry::{path_bytes, FileEntry};
use super::gather::cores;

/// What native histogram collection keeps between scrapes.
#[derive(Debug, Default)]
pub(super) struct NativeState {
    /// The native histogram files last reported bad, so each problem is
    /// reported once.
    reported: BTreeMap<PathBuf, ReadError>,
    /// The series each key read names (`None`: a key that does not decode),
    /// by the key as written.
    keys: foldhash::HashMap<Box<str>, Option<Arc<[u8]>>>,
    /// The bytes of the files being read, one buffer per reading thread,
    /// kept for the next scrape.
    bufs: Vec<Vec<u8>>,
    /// Buckets being merged, kept for the next merge.
    scratch: Vec<(i32, u64)>,
}

/// Reads the native histogram files of the good histogram files of `order`
/// (in `known`) and merges them per series. A bad native histogram file is
/// skipped and reported in `warnings` once. `dir`: the directory all the
/// files are in, if they are in one.
pub(super) fn collect_natives(
    known: &[Option<FileEntry>],
    order: &[usize],
    dir: Option<&Path>,
    state: &mut NativeState,
    warnings: &mut Vec<Warning>,
) -> NativeHistograms {
    let mut natives = NativeHistograms::default();
    // Whether each directory has a native histogram subdirectory, looked at
    // once: a directory without one (prometheus_client's alone) costs one
    // `stat` per collection, not a failed `open` per histogram file.
    let mut looked: Vec<(&Path, bool)> = Vec::new();
    if let Some(dir) = dir {
        let has = has_native_dir(dir);
        if !has {
            state.reported.clear();
            state.keys.clear();
            return natives;
        }
        looked.push((dir, has));
    }
    let mut paths: Vec<PathBuf> = Vec::new();
    for &index in order {
        let Some(entry) = known.get(index).and_then(Option::as_ref) else {
            continue;
        };
        let Some(file) = entry.file.as_ref().filter(|_| entry.problem.is_none()) else {
            continue;
        };
        if file.name.kind() != MetricKind::Histogram {
            continue;
        }
        let dir = match dir {
            Some(dir) => dir,
            None => entry.path.parent().unwrap_or(Path::new("")),
        };
        let has = match looked
            .iter()
            .rfind(|(seen, _)| path_bytes(seen) == path_bytes(dir))
        {
            Some(&(_, has)) => has,
            None => {
                let has = has_native_dir(dir);
                looked.push((dir, has));
                has
            }
        };
        if has {
            paths.push(native_histogram_path(dir, &file.name));
        }
    }
    let mut problems: BTreeMap<PathBuf, ReadError> = BTreeMap::new();
    let mut keys_read = 0;
    let read = read_all(&paths, &mut state.bufs);
    for (path, read) in paths.into_iter().zip(read) {
        match read {
            Ok(read) => {
                keys_read += read.entries.len();
                for entry in read.entries {
                    if let Some(series) = state.series_of(entry.raw_key) {
                        natives.merge(&series, entry.histogram, &mut state.scratch);
                    }
                }
            }
            // Missing: a process without native histograms (or reaped).
            Err(error) if error.is_vanished() => {}
            Err(error) => {
                problems.insert(path, error);
            }
        }
    }
    for (path, error) in &problems {
        if state.reported.get(path) != Some(error) {
            warnings.push(Warning::NativeHistograms(error.clone()));
        }
    }
    state.reported = problems;
    if state.keys.len() > 2 * keys_read + 1024 {
        // Keys of files gone or rewritten piled up.
        state.keys.clear();
    }
    for buf in &mut state.bufs {
        if buf.capacity() > BUF_KEEP {
            *buf = Vec::new();
        }
    }
    natives
}

/// A read buffer kept between collections; a bigger one is freed.
const BUF_KEEP: usize = 1 << 20;

/// Below this many files one thread reads them: a thread's start costs
/// more than it saves.
const FILES_PER_THREAD: usize = 128;

/// Reads the native histogram files at `paths`, results in the same order,
/// split between threads on many files (reading is most of what native
/// histograms cost a scrape: opening, copying and parsing every file, as
/// workers write them through maps that no event reports). `bufs`: one
/// read buffer per thread, kept between calls.
fn read_all(
    paths: &[PathBuf],
    bufs: &mut Vec<Vec<u8>>,
) -> Vec<Result<NativeHistogramFile, ReadError>> {
    let threads = (paths.len() / FILES_PER_THREAD).clamp(1, cores().min(4));
    if bufs.len() < threads {
        bufs.resize_with(threads, Vec::new);
    }
    let read_chunk = |chunk: &[PathBuf], buf: &mut Vec<u8>| {
        chunk
            .iter()
            .map(|path| read_native_histogram_file_into(path, buf))
            .collect::<Vec<_>>()
    };
    if threads == 1 {
        return read_chunk(paths, &mut bufs[0]);
    }
    let per_thread = paths.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let mut chunks = paths.chunks(per_thread).zip(bufs.iter_mut());
        let here = chunks.next();
        let handles: Vec<_> = chunks
            .map(|(chunk, buf)| scope.spawn(move || read_chunk(chunk, buf)))
            .collect();
        let mut read = here.map_or_else(Vec::new, |(chunk, buf)| read_chunk(chunk, buf));
        for handle in handles {
            // A panic in a reading thread is a bug; pass it on.
            read.extend(
                handle
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p)),
            );
        }
        read
    })
}

impl NativeState {
    /// The series `raw_key` names: its family name and sorted labels, as
    /// [`series_key`] encodes them; decoded the first time the key is read.
    fn series_of(&mut self, raw_key: String) -> Option<Arc<[u8]>> {
        if let Some(series) = self.keys.get(raw_key.as_str()) {
            return series.clone();
        }
        let series = Key::decode(raw_key.as_bytes()).ok().map(|key| {
            let mut labels: Vec<(&str, &str)> = key
                .labels
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_str()))
                .collect();
            labels.sort_unstable();
            let mut bytes = Vec::new();
            series_key(&mut bytes, &key.family, labels.into_iter());
            Arc::from(bytes)
        });
        self.keys.insert(raw_key.into_boxed_str(), series.clone());
        series
    }
}

/// Whether `dir` has a native histogram subdirectory (one that cannot be
/// looked at counts as none: native histograms are then left out, never
/// the samples).
fn has_native_dir(dir: &Path) -> bool {
    std::fs::metadata(dir.join(NATIVE_HISTOGRAM_DIR)).is_ok_and(|meta| meta.is_dir())
}

#[cfg(test)]
mod tests {
    use multiprom_format::{encode_key, FileName, NativeHistogramConfig, NativeHistogramWriter};

    use super::*;

    #[test]
    fn reads_split_between_threads_come_back_in_order() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let written = [0, 150, 299];
        let paths: Vec<PathBuf> = (0..300)
            .map(|n| {
                let name = FileName::new(MetricKind::Histogram, n.to_string())
                    .unwrap_or_else(|e| panic!("{e}"));
                if written.contains(&n) {
                    let writer = NativeHistogramWriter::open(dir.path(), &name)
                        .unwrap_or_else(|e| panic!("{e}"));
                    let key = encode_key("h", "h", [("n", n.to_string().as_str())], "");
                    writer
                        .series(&key, NativeHistogramConfig::default())
                        .unwrap_or_else(|e| panic!("{e}"))
                        .observe(n as f64);
                }
                native_histogram_path(dir.path(), &name)
            })
            .collect();
        let mut bufs = Vec::new();
        let read = read_all(&paths, &mut bufs);
        assert_eq!(read.len(), paths.len());
        for (n, read) in read.iter().enumerate() {
            match read {
                Ok(file) => {
                    assert!(written.contains(&n), "{n}");
                    assert_eq!(file.entries[0].histogram.sum, n as f64);
                }
                Err(error) => assert!(error.is_vanished() && !written.contains(&n), "{n}"),
            }
        }
        assert_eq!(
            bufs.len(),
            (300 / FILES_PER_THREAD).clamp(1, cores().min(4))
        );
    }
}
