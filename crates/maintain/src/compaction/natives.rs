//! What a fold does with native histograms: the folded workers' native
//! histogram files are added, series by series, into
//! `native-histograms/histogram_compacted.native`, exactly once.
//!
//! Native histograms are totals, like the values of the `*.db` files, so
//! they follow the journal's commit point rather than riding along as
//! exemplars do:
//!
//! 1. **Stage**: after the `*.db` files, each folded file's native file
//!    moves into the staging directory's `native-histograms/` (set aside
//!    and checked for holders like the `*.db` files: one a new process with
//!    the same pid holds goes back, its histograms stay where they are and
//!    are not folded). No writer opens a staged file: a new process with
//!    the pid starts a fresh one.
//! 2. **Write** the new compacted native file (the old one plus the staged
//!    ones, merged per series) whole under `native-new/` in staging, and
//!    `fsync` it, before the journal is written.
//! 3. **Commit** with the `*.db` file: right after the new compacted `*.db`
//!    file is renamed into place, the new native file is renamed over the
//!    compacted one.
//! 4. **Clean up**: the staged native files are deleted with the staged
//!    `*.db` files, before the journal goes.
//!
//! Recovery: a committed journal finishes the native commit (renames the
//! new file into place if it is still in staging) and deletes the staged
//! native files; anything else discards the new native file and puts each
//! staged native file back beside its `*.db` file (under the `*.db` file's
//! new name, if it went back under one). So after a crash at any point,
//! each worker's native histograms are either in its own file or in the
//! compacted one, never both and never neither.
//!
//! A worker's native file that cannot be read (damaged) does not stop the
//! fold: it goes back where it was, unfolded; its `*.db` file is folded, so
//! it is an orphan that reaping removes once its process is gone. Its
//! histograms, which no collector could read either, are lost. A damaged
//! compacted native file is replaced by one made of the staged files alone:
//! its histograms are lost, the rest is kept.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use multiprom_format::native_file::{
    native_histogram_path, MAX_NATIVE_BUCKETS, NATIVE_HISTOGRAM_DIR,
};
use multiprom_format::{
    read_native_histogram_file, FileIdentity, FileName, NativeHistogram, NativeHistogramConfig,
    NativeHistogramWriter, ReadErrorKind,
};

use super::error::CompactError;
use super::staging::Staging;
use super::sync_dir::sync_dir;
use super::Step;
use crate::process::busy;
use crate::set_aside::{move_no_replace, set_aside, Aside};

/// Where, in staging, the new compacted native file is written (as the
/// metrics directory of a `NativeHistogramWriter`). Not `new-`: recovery
/// removes every staged file of that prefix as a file.
pub(crate) const NEW_NATIVE_DIR: &str = "native-new";

/// An I/O error on `path`, as a compaction error.
fn io_at(path: &Path) -> impl FnOnce(io::Error) -> CompactError + '_ {
    move |source| CompactError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Moves the native files of `folded` (staged `*.db` files) into staging,
/// returns those staged (no file, or one a process holds, is left where it
/// is). An error leaves what was moved in staging, for the recovery.
pub(crate) fn stage_natives(
    staging: &Staging,
    folded: &[FileName],
    observer: &mut dyn FnMut(&Step),
) -> Result<Vec<FileName>, CompactError> {
    let present: Vec<FileName> = folded
        .iter()
        .filter(|name| {
            std::fs::symlink_metadata(native_histogram_path(staging.dir(), name)).is_ok()
        })
        .cloned()
        .collect();
    if present.is_empty() {
        return Ok(Vec::new());
    }
    let subdir = staging.path().join(NATIVE_HISTOGRAM_DIR);
    match std::fs::create_dir(&subdir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(io_at(&subdir)(e)),
        _ => {}
    }
    let aside = NativeAside {
        staging,
        observer: RefCell::new(observer),
    };
    let outcome = set_aside(present, &aside, |moved| {
        let staged: Vec<(PathBuf, FileIdentity)> = moved
            .iter()
            .map(|(name, id)| (native_histogram_path(staging.path(), name), *id))
            .collect();
        Ok::<_, io::Error>(busy(&staged))
    })
    .map_err(io_at(Path::new("/proc")))?;
    for (name, e) in outcome.not_moved {
        if e.kind() != io::ErrorKind::NotFound {
            tracing::warn!(
                "compaction: the native histograms of {name} are not folded (cannot move them): {e}"
            );
        }
    }
    if let Some((name, source)) = outcome.not_put_back.into_iter().next() {
        return Err(CompactError::Io {
            path: native_histogram_path(staging.path(), &name),
            source,
        });
    }
    Ok(outcome.free)
}

/// Native files moved between the metrics directory and staging, the
/// observer told of each staged.
struct NativeAside<'a, 'o> {
    staging: &'a Staging,
    observer: RefCell<&'a mut (dyn FnMut(&Step) + 'o)>,
}

impl Aside<FileName> for NativeAside<'_, '_> {
    fn move_aside(&self, name: &FileName) -> io::Result<FileIdentity> {
        let staged = native_histogram_path(self.staging.path(), name);
        move_no_replace(&native_histogram_path(self.staging.dir(), name), &staged)?;
        (self.observer.borrow_mut())(&Step::NativeStaged(name.clone()));
        FileIdentity::of(&staged)
    }

    fn put_back(&self, name: &FileName) -> io::Result<()> {
        move_no_replace(
            &native_histogram_path(self.staging.path(), name),
            &native_histogram_path(self.staging.dir(), name),
        )
    }
}

/// Series merged in the order they are first seen.
#[derive(Default)]
struct Merged {
    series: Vec<(String, NativeHistogram)>,
    index: HashMap<String, usize>,
}

impl Merged {
    fn add(&mut self, key: String, histogram: NativeHistogram) {
        match self.index.get(&key) {
            Some(&i) => self.series[i].1.merge(&histogram),
            None => {
                self.index.insert(key.clone(), self.series.len());
                self.series.push((key, histogram));
            }
        }
    }
}

/// Writes the new compacted native file of `target` into staging: the
/// compacted one's series plus those of the `staged` native files. Staged
/// files that cannot be read go back into the directory, unfolded, and are
/// taken out of `staged`. Returns whether a new file was written (none when
/// nothing was staged).
pub(crate) fn write_new_native(
    staging: &Staging,
    target: &FileName,
    staged: &mut Vec<FileName>,
) -> Result<bool, CompactError> {
    let mut merged = Merged::default();
    let mut unreadable = Vec::new();
    for name in staged.iter() {
        match read_native_histogram_file(&native_histogram_path(staging.path(), name)) {
            Ok(file) => file
                .entries
                .into_iter()
                .for_each(|e| merged.add(e.raw_key, e.histogram)),
            Err(e) => {
                tracing::warn!(
                    "compaction: the native histograms of {name} are lost (not folded): {e}"
                );
                unreadable.push(name.clone());
            }
        }
    }
    for name in &unreadable {
        let staged_path = native_histogram_path(staging.path(), name);
        move_no_replace(&staged_path, &native_histogram_path(staging.dir(), name))
            .map_err(io_at(&staged_path))?;
    }
    staged.retain(|name| !unreadable.contains(name));
    if staged.is_empty() {
        return Ok(false);
    }
    let old = native_histogram_path(staging.dir(), target);
    let mut all = Merged::default();
    match read_native_histogram_file(&old) {
        Ok(file) => file
            .entries
            .into_iter()
            .for_each(|e| all.add(e.raw_key, e.histogram)),
        Err(e) => match &e.kind {
            ReadErrorKind::Vanished => {}
            // Not known to be damaged: replacing it could lose what is in it.
            ReadErrorKind::Io(err) => {
                return Err(io_at(&old)(io::Error::new(err.kind(), e.to_string())))
            }
            _ => tracing::warn!(
                "compaction: the native histograms of {target} are lost (it is damaged and replaced): {e}"
            ),
        },
    }
    for (key, histogram) in merged.series {
        all.add(key, histogram);
    }

    discard_new_native(staging)?;
    let new_dir = staging.path().join(NEW_NATIVE_DIR);
    std::fs::create_dir_all(&new_dir).map_err(io_at(&new_dir))?;
    let as_io = |e: multiprom_format::WriteError| io::Error::other(e.to_string());
    let new_path = native_histogram_path(&new_dir, target);
    let writer = NativeHistogramWriter::open(&new_dir, target)
        .map_err(as_io)
        .map_err(io_at(&new_path))?;
    for (key, histogram) in all.series {
        let config = NativeHistogramConfig {
            schema: histogram.schema,
            zero_threshold: histogram.zero_threshold,
            // Room for what it holds: nothing observes into this file.
            max_buckets: (histogram.bucket_count() as u32).clamp(1, MAX_NATIVE_BUCKETS),
        };
        writer
            .series(&key, config)
            .and_then(|series| series.add(&histogram))
            .map_err(as_io)
            .map_err(io_at(&new_path))?;
    }
    drop(writer);
    std::fs::File::open(&new_path)
        .and_then(|f| f.sync_all())
        .map_err(io_at(&new_path))?;
    sync_dir(&new_dir.join(NATIVE_HISTOGRAM_DIR))?;
    sync_dir(&new_dir)?;
    Ok(true)
}

/// Renames the new compacted native file of `target` into place, if it is
/// in staging; returns whether it was.
pub(crate) fn commit_new_native(
    staging: &Staging,
    target: &FileName,
) -> Result<bool, CompactError> {
    let new_path = native_histogram_path(&staging.path().join(NEW_NATIVE_DIR), target);
    if std::fs::symlink_metadata(&new_path).is_err() {
        return Ok(false);
    }
    let subdir = staging.dir().join(NATIVE_HISTOGRAM_DIR);
    std::fs::create_dir_all(&subdir).map_err(io_at(&subdir))?;
    let to = native_histogram_path(staging.dir(), target);
    std::fs::rename(&new_path, &to).map_err(io_at(&to))?;
    sync_dir(&subdir)?;
    Ok(true)
}

/// Deletes the staged native files of `folded` (their histograms are in
/// the committed compacted file), durably.
pub(crate) fn remove_staged_natives(
    staging: &Staging,
    folded: &[FileName],
    observer: &mut dyn FnMut(&Step),
) -> Result<(), CompactError> {
    let mut removed = false;
    for name in folded {
        let path = native_histogram_path(staging.path(), name);
        match std::fs::remove_file(&path) {
            Ok(()) => {
                removed = true;
                observer(&Step::NativeRemoved(name.clone()));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_at(&path)(e)),
        }
    }
    if removed {
        sync_dir(&staging.path().join(NATIVE_HISTOGRAM_DIR))?;
    }
    Ok(())
}

/// Removes any new compacted native file from staging (never committed).
pub(crate) fn discard_new_native(staging: &Staging) -> Result<(), CompactError> {
    let subdir = staging
        .path()
        .join(NEW_NATIVE_DIR)
        .join(NATIVE_HISTOGRAM_DIR);
    let Ok(entries) = std::fs::read_dir(&subdir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(io_at(&path)(e)),
            _ => {}
        }
    }
    Ok(())
}

/// Puts the staged native file of `name` back beside the `*.db` file it
/// went with, now called `back`. Returns whether there was one. If that
/// name is taken, it stays in staging (unread, never counted twice) with a
/// warning, and the next recovery tries again.
pub(crate) fn put_back_native(
    staging: &Staging,
    name: &FileName,
    back: &FileName,
) -> Result<bool, CompactError> {
    let staged = native_histogram_path(staging.path(), name);
    if std::fs::symlink_metadata(&staged).is_err() {
        return Ok(false);
    }
    let subdir = staging.dir().join(NATIVE_HISTOGRAM_DIR);
    std::fs::create_dir_all(&subdir).map_err(io_at(&subdir))?;
    match move_no_replace(&staged, &native_histogram_path(staging.dir(), back)) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            tracing::warn!(
                "compaction recovery: cannot put the native histograms of {name} back: {back}'s exist; left in {}",
                staged.display()
            );
            Ok(false)
        }
        Err(e) => Err(io_at(&staged)(e)),
    }
}

/// The `*.db` names of the native files waiting in staging.
pub(crate) fn staged_natives(staging: &Staging) -> Vec<FileName> {
    let subdir: PathBuf = staging.path().join(NATIVE_HISTOGRAM_DIR);
    let Ok(entries) = std::fs::read_dir(&subdir) else {
        return Vec::new();
    };
    let mut names: Vec<FileName> = entries
        .flatten()
        .filter_map(|e| {
            multiprom_format::native_file::db_name_of_native_histogram_file(e.file_name().to_str()?)
        })
        .collect();
    names.sort();
    names
}
