//! Compaction: folding the files of exited workers into one file per kind,
//! so a directory stays as small as its live workers however many have come
//! and gone, while every total stays exact.
//!
//! Python's multiprocess mode keeps every exited worker's counter,
//! histogram, summary and non-live gauge file for good, since deleting one
//! would make totals go backwards. A [`Compactor`] pass instead folds such
//! files into `counter_compacted.db`, `histogram_compacted.db`,
//! `summary_compacted.db` and `gauge_{sum,max,min,mostrecent}_compacted.db`,
//! in Python's own format: `prometheus_client` reads them like any other file
//! (the id `compacted` is no pid, so `mark_process_dead` never touches them,
//! and those gauge modes drop the `pid` label when merging). Gauges `all`
//! (one series per pid) and the `live*` modes are never folded
//! (`fold::fold_rule`).
//!
//! One pass, while the caller keeps its own scrapes out
//! (`DirCollector::while_not_collecting`):
//!
//! 1. **Pick** files with a decimal id whose writer is gone: no process
//!    held them in the last two liveness walks (`crate::liveness`).
//! 2. **Stage**: rename each into `.multiprom-compaction/` (no writer opens
//!    a file there, and no collector lists it), then, after a short settle,
//!    look through `/proc/*/fd` and `/proc/*/maps` for every staged inode.
//!    A file someone holds for writing (a process that opened it just
//!    before the rename) goes back at once, and so does every file when
//!    some process cannot be inspected.
//! 3. **Write** the new compacted file (old compacted + staged files, merged
//!    by their [`MergeRule`](multiprom_format::MergeRule)) in staging, and
//!    `fsync` it.
//! 4. **Journal** the staged names and the new file's (device, inode), and
//!    `fsync` the journal and directory.
//! 5. **Commit**: rename the new file over the compacted name and `fsync`
//!    the directory. The fold is committed exactly when the compacted name
//!    has the journal's inode.
//! 6. **Clean up**: delete the staged files, `fsync`, delete the journal.
//!
//! Exemplars ride along outside the journal (see `exemplars`): written into
//! the compacted exemplar file before step 5, the folded files' exemplar
//! files removed with them in step 6.
//!
//! Native histograms are totals, so they follow the journal (see
//! `natives`): the folded files' native files are staged and the new
//! `histogram_compacted.native` written whole in staging before step 4,
//! renamed into place right after the `*.db` commit of step 5 (recovery of
//! a committed fold finishes that rename), and the staged native files
//! deleted in step 6. A kill before the commit leaves every worker's native
//! histograms in its own file (recovery puts them back), one after it
//! leaves them in the compacted file only.
//!
//! [`Compactor::recover`] (run at open and before every pass) finishes or
//! undoes whatever a killed pass left: with a journal whose inode the
//! compacted name has, it deletes the staged files (their values are in the
//! compacted file); otherwise the old compacted file is untouched, so it puts
//! every staged file back. Either way nothing is lost or counted twice;
//! `docs/architecture.md` has the argument step by step.

mod error;
mod exemplars;
mod fold;
mod journal;
mod natives;
pub(crate) mod staging;
mod sync_dir;
#[cfg(test)]
mod tests;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use multiprom_format::native_file::native_histogram_path;
use multiprom_format::{read_file, FileIdentity, FileName, MetricKind, COMPACTED_ID};

pub use error::{CompactError, JournalError};
use exemplars::{fold_exemplars, remove_folded_exemplars};
use fold::{fold_rule, Fold};
use journal::Journal;
use staging::Staging;

use crate::process::busy;
use crate::set_aside::{set_aside, Aside};

/// Files folded per kind in one pass, so one pass holds scrapes back for a
/// bounded time; the rest wait for the next pass.
const MAX_FILES_PER_FOLD: usize = 2000;

/// A point in a pass or a recovery, reported to the caller's observer as it
/// is passed: for logging (files put back) and for the tests that kill a
/// pass at every step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// A file was moved into staging.
    Staged(FileName),
    /// The native histogram file of a staged file was moved into staging.
    NativeStaged(FileName),
    /// The new compacted native histogram file is written and flushed.
    NativeWritten(FileName),
    /// Holders were looked for; held files are back in place.
    Checked,
    /// The new compacted file is written and flushed (not yet journaled).
    Written(FileName),
    /// The journal is on disk.
    Journaled(FileName),
    /// The new compacted file replaced the old one: the fold is committed.
    Committed(FileName),
    /// The new compacted native histogram file replaced the old one.
    NativeCommitted(FileName),
    /// A folded file was deleted from staging.
    Removed(FileName),
    /// A folded file's native histogram file was deleted from staging.
    NativeRemoved(FileName),
    /// The journal is gone; the fold of this compacted file is complete.
    Finished(FileName),
    /// Recovery put a staged file back into the directory (under the name
    /// given).
    PutBack(FileName),
}

/// What one compaction pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompactPass {
    /// Files folded, by compacted file.
    pub folded: BTreeMap<FileName, Vec<FileName>>,
    /// Disk space freed (allocated blocks of the folded files and the old
    /// compacted files, less the new compacted files; native histogram
    /// files included).
    pub bytes_reclaimed: i64,
    /// Staged files that a process held, put back untouched.
    pub held: Vec<FileName>,
    /// Files that could not be folded (unreadable or damaged), put back
    /// untouched, with why.
    pub skipped: Vec<(FileName, String)>,
    /// How long the pass took.
    pub duration: Duration,
}

impl CompactPass {
    /// Number of files folded.
    #[must_use]
    pub fn files_folded(&self) -> usize {
        self.folded.values().map(Vec::len).sum()
    }
}

/// What recovery found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Recovery {
    /// A journal was found whose fold had been committed: its staged files
    /// were deleted.
    pub(crate) completed: Option<FileName>,
    /// A journal was found whose fold had not been committed: undone.
    pub(crate) undone: Option<FileName>,
    /// Staged files put back into the directory.
    pub(crate) put_back: Vec<FileName>,
}

/// Folds the files of exited writers in one directory (see the module docs).
#[derive(Debug)]
pub(crate) struct Compactor {
    staging: Staging,
}

impl Compactor {
    /// Takes charge of compacting `dir`: creates and locks its staging
    /// directory, then recovers from any pass an earlier process left
    /// unfinished. Run it while no collection of `dir` runs.
    pub(crate) fn open(
        dir: &Path,
        observer: &mut dyn FnMut(&Step),
    ) -> Result<(Compactor, Recovery), CompactError> {
        let compactor = Compactor {
            staging: Staging::open(dir)?,
        };
        let recovery = compactor.recover(observer)?;
        Ok((compactor, recovery))
    }

    /// The directory.
    fn dir(&self) -> &Path {
        self.staging.dir()
    }

    /// Finishes or undoes what an interrupted pass left. Idempotent: a
    /// recovery killed half-way is finished by the next one.
    pub(crate) fn recover(
        &self,
        observer: &mut dyn FnMut(&Step),
    ) -> Result<Recovery, CompactError> {
        let mut recovery = Recovery::default();
        if let Some(journal) = Journal::read(self.staging.path())? {
            let target = self.dir().join(journal.target.to_string());
            let current = match FileIdentity::of(&target) {
                Ok(id) => Some(id),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                // Not knowing is not "not committed": undoing a committed
                // fold would count its files twice. Stop until it can be
                // told.
                Err(source) => {
                    return Err(CompactError::Io {
                        path: target,
                        source,
                    })
                }
            };
            if current == Some(journal.new) {
                // Committed: the compacted file holds the staged values,
                // and the new native file (still in staging, if the kill
                // came between the two renames) the staged histograms.
                if natives::commit_new_native(&self.staging, &journal.target)? {
                    observer(&Step::NativeCommitted(journal.target.clone()));
                }
                natives::remove_staged_natives(&self.staging, &journal.folded, observer)?;
                for name in &journal.folded {
                    self.staging.remove(&name.to_string())?;
                    observer(&Step::Removed(name.clone()));
                }
                self.remove_exemplar_files(&journal.folded);
                recovery.completed = Some(journal.target.clone());
            } else {
                // Not committed: the old compacted file is untouched; the
                // staged files go back below, the new file is discarded.
                recovery.undone = Some(journal.target.clone());
            }
            self.staging
                .remove(&format!("{}{}", staging::NEW_PREFIX, journal.target))?;
            self.staging.sync()?;
            Journal::remove(self.staging.path())?;
            observer(&Step::Finished(journal.target));
        }
        self.discard_unjournaled_new_files()?;
        natives::discard_new_native(&self.staging)?;
        // Staged files no journal claims were never folded: they go back,
        // each native file beside its `*.db` file.
        for name in self.staging.staged_files()? {
            let back = self
                .staging
                .put_back(&name)
                .map_err(|source| CompactError::Io {
                    path: self.staging.staged(&name),
                    source,
                })?;
            natives::put_back_native(&self.staging, &name, &back)?;
            observer(&Step::PutBack(back.clone()));
            recovery.put_back.push(back);
        }
        // Native files whose `*.db` file went back before a kill.
        for name in natives::staged_natives(&self.staging) {
            natives::put_back_native(&self.staging, &name, &name)?;
        }
        if !recovery.put_back.is_empty() {
            self.staging.sync()?;
        }
        Ok(recovery)
    }

    /// Removes the exemplar files of folded files (their exemplars are in
    /// the compacted file's). A failure leaves them for reaping, which
    /// removes exemplar files without a `*.db` file once their process is
    /// gone.
    fn remove_exemplar_files(&self, folded: &[FileName]) {
        for name in folded {
            if let Err(e) = remove_folded_exemplars(self.dir(), name) {
                tracing::warn!("compaction: cannot remove the exemplar file of folded {name}: {e}");
            }
        }
    }

    fn discard_unjournaled_new_files(&self) -> Result<(), CompactError> {
        let entries =
            std::fs::read_dir(self.staging.path()).map_err(|source| CompactError::Io {
                path: self.staging.path().to_owned(),
                source,
            })?;
        for entry in entries.flatten() {
            if let Some(name) = entry.file_name().to_str() {
                // A new file no journal names was never committed, and a
                // half-written journal was never in force.
                if name.starts_with(staging::NEW_PREFIX) || name == journal::JOURNAL_TMP {
                    self.staging.remove(name)?;
                }
            }
        }
        Ok(())
    }

    /// One pass over the directory against the running system. Run it while
    /// no collection of the directory runs.
    ///
    /// A pass that fails half-way (a full disk, say) recovers before it
    /// returns the error, so the directory is whole again either way.
    pub(crate) fn pass(
        &self,
        is_free: &dyn Fn(&Path) -> bool,
        observer: &mut dyn FnMut(&Step),
    ) -> Result<CompactPass, CompactError> {
        self.recover(observer)?;
        let result = self.pass_after_recovery(is_free, observer);
        if result.is_err() {
            // If this fails too, the next pass tries again first.
            let _ = self.recover(observer);
        }
        result
    }

    fn pass_after_recovery(
        &self,
        is_free: &dyn Fn(&Path) -> bool,
        observer: &mut dyn FnMut(&Step),
    ) -> Result<CompactPass, CompactError> {
        let start = Instant::now();
        let mut pass = CompactPass::default();
        let listing =
            multiprom_format::scan_dir(self.dir()).map_err(|source| CompactError::Io {
                path: self.dir().to_owned(),
                source,
            })?;
        let candidates = pick(&listing, is_free);
        if candidates.is_empty() {
            pass.duration = start.elapsed();
            return Ok(pass);
        }

        let staging = ObservedStaging {
            staging: &self.staging,
            observer: RefCell::new(&mut *observer),
        };
        let outcome = set_aside(candidates, &staging, |staged| {
            let staged: Vec<(PathBuf, FileIdentity)> = staged
                .iter()
                .map(|(name, id)| (self.staging.staged(name), *id))
                .collect();
            Ok::<_, std::io::Error>(busy(&staged))
        })
        .map_err(|source| CompactError::Io {
            path: PathBuf::from("/proc"),
            source,
        })?;
        if let Some((name, source)) = outcome.not_put_back.into_iter().next() {
            return Err(CompactError::Io {
                path: self.staging.staged(&name),
                source,
            });
        }
        pass.held = outcome.held;
        let staged = outcome.free;
        observer(&Step::Checked);

        let mut by_kind: BTreeMap<MetricKind, Vec<FileName>> = BTreeMap::new();
        for name in staged {
            by_kind.entry(name.kind()).or_default().push(name);
        }
        for (kind, names) in by_kind {
            self.fold(kind, names, &mut pass, observer)?;
        }
        pass.duration = start.elapsed();
        Ok(pass)
    }

    /// Folds the staged `names` of `kind` into its compacted file and
    /// commits (steps 3 to 6 of the module docs).
    fn fold(
        &self,
        kind: MetricKind,
        names: Vec<FileName>,
        pass: &mut CompactPass,
        observer: &mut dyn FnMut(&Step),
    ) -> Result<(), CompactError> {
        let Some(rule) = fold_rule(kind) else {
            return Ok(());
        };
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| CompactError::Io { path, source }
        };
        let put_back_all = |names: &[FileName]| -> Result<(), CompactError> {
            for name in names {
                self.staging
                    .put_back(name)
                    .map_err(io(&self.staging.staged(name)))?;
            }
            Ok(())
        };
        let target = FileName::new(kind, COMPACTED_ID).map_err(|e| CompactError::Io {
            path: self.dir().to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, e),
        })?;
        let target_path = self.dir().join(target.to_string());
        let mut fold = Fold::new(rule);
        let mut reclaimed: i64 = 0;
        match read_file(&target_path) {
            Ok(contents) => {
                for e in contents.entries {
                    fold.add(&e.raw_key, e.value, e.timestamp);
                }
                reclaimed += allocated(&target_path);
            }
            Err(e) if e.kind == multiprom_format::ReadErrorKind::Vanished => {}
            Err(e) => {
                // Our own file, damaged by someone: fold nothing into it.
                put_back_all(&names)?;
                for name in names {
                    pass.skipped
                        .push((name, format!("{target} cannot be read: {e}")));
                }
                return Ok(());
            }
        }
        let mut folded = Vec::new();
        for name in names {
            let path = self.staging.staged(&name);
            match read_file(&path) {
                Ok(contents) => {
                    for e in contents.entries {
                        fold.add(&e.raw_key, e.value, e.timestamp);
                    }
                    reclaimed += allocated(&path);
                    folded.push(name);
                }
                Err(e) => {
                    // Damaged files stay as they were: collectors report
                    // and skip them, as before.
                    put_back_all(std::slice::from_ref(&name))?;
                    pass.skipped.push((name, e.to_string()));
                }
            }
        }
        if folded.is_empty() {
            return Ok(());
        }
        // Before the commit: a crash from here on leaves exemplars twice at
        // worst, never lost (see `exemplars`).
        if let Err(why) = fold_exemplars(self.dir(), &target, &folded) {
            tracing::warn!(
                "compaction: some exemplars of the files folded into {target} are lost: {why}"
            );
        }

        // Totals: staged and written before the journal, committed with
        // the `*.db` file (see `natives`).
        let mut staged_natives = Vec::new();
        if kind == MetricKind::Histogram {
            staged_natives = natives::stage_natives(&self.staging, &folded, observer)?;
            if natives::write_new_native(&self.staging, &target, &mut staged_natives)? {
                observer(&Step::NativeWritten(target.clone()));
            }
        }

        let new_name = format!("{}{target}", staging::NEW_PREFIX);
        let new_path = self.staging.path().join(&new_name);
        self.staging.remove(&new_name)?;
        let new_id = (|| {
            use std::io::Write;
            let mut file = std::fs::File::options()
                .write(true)
                .create_new(true)
                .open(&new_path)?;
            file.write_all(&fold.image())?;
            file.sync_all()?;
            let meta = file.metadata()?;
            Ok(FileIdentity::from_metadata(&meta))
        })()
        .map_err(io(&new_path))?;
        observer(&Step::Written(target.clone()));

        let journal = Journal {
            target: target.clone(),
            new: new_id,
            folded: folded.clone(),
        };
        journal.write(self.staging.path())?;
        observer(&Step::Journaled(target.clone()));

        std::fs::rename(&new_path, &target_path).map_err(io(&target_path))?;
        sync_dir::sync_dir(self.dir())?;
        observer(&Step::Committed(target.clone()));
        reclaimed -= allocated(&target_path);
        let native_path = native_histogram_path(self.dir(), &target);
        let old_native = allocated(&native_path);
        if natives::commit_new_native(&self.staging, &target)? {
            observer(&Step::NativeCommitted(target.clone()));
            reclaimed += old_native - allocated(&native_path);
        }
        for name in &staged_natives {
            reclaimed += allocated(&native_histogram_path(self.staging.path(), name));
        }

        for name in &folded {
            self.staging.remove(&name.to_string())?;
            observer(&Step::Removed(name.clone()));
        }
        natives::remove_staged_natives(&self.staging, &staged_natives, observer)?;
        // While the journal is there, so recovery finishes it if need be.
        self.remove_exemplar_files(&folded);
        // The deletions must be on disk before the journal goes: staged
        // files that came back without it would be put back and counted
        // twice.
        sync_dir::sync_dir(self.staging.path())?;
        Journal::remove(self.staging.path())?;
        observer(&Step::Finished(target.clone()));
        pass.bytes_reclaimed += reclaimed;
        pass.folded.insert(target, folded);
        Ok(())
    }
}

/// The pid in a file id as `os.getpid()` writes it (`1234`), or as a staged
/// file put back under a taken name has it (`1234.1`): plain decimals, no
/// sign or leading zeros.
fn exited_writer_pid(id: &str) -> Option<u32> {
    let plain = |digits: &str| -> Option<u32> {
        digits
            .parse::<u32>()
            .ok()
            .filter(|n| n.to_string() == digits)
    };
    match id.split_once('.') {
        None => plain(id),
        Some((pid, n)) => plain(n).and(plain(pid)),
    }
}

/// The staging directory as a place to set files aside, telling the
/// observer of each file staged.
struct ObservedStaging<'a> {
    staging: &'a Staging,
    observer: RefCell<&'a mut dyn FnMut(&Step)>,
}

impl Aside<FileName> for ObservedStaging<'_> {
    fn move_aside(&self, name: &FileName) -> std::io::Result<FileIdentity> {
        self.staging.stage(name)?;
        (self.observer.borrow_mut())(&Step::Staged(name.clone()));
        FileIdentity::of(&self.staging.staged(name)).inspect_err(|_| {
            // Not known, not folded: the recovery puts it back if this
            // cannot.
            let _ = self.staging.put_back(name);
        })
    }

    fn put_back(&self, name: &FileName) -> std::io::Result<()> {
        self.staging.put_back(name).map(drop)
    }
}

/// Disk space a file takes (allocated blocks: Python's files are sparse).
fn allocated(path: &Path) -> i64 {
    std::fs::metadata(path).map_or(0, |m| (m.blocks() * 512) as i64)
}

/// The files of `listing` that may be folded: a kind with a fold rule, a
/// decimal id (as `os.getpid()` writes it, or a worker index), alone or
/// followed by `.<n>` (a staged file put back beside a newer file of the
/// same name, [`Staging::put_back`]), and a writer that `is_free` says is
/// gone (no process holds the file: the liveness rule). At most
/// [`MAX_FILES_PER_FOLD`] per kind.
fn pick(listing: &[PathBuf], is_free: &dyn Fn(&Path) -> bool) -> Vec<FileName> {
    let mut per_kind: BTreeMap<MetricKind, usize> = BTreeMap::new();
    let mut picked = Vec::new();
    for path in listing {
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| FileName::parse(n).ok())
        else {
            continue;
        };
        if fold_rule(name.kind()).is_none() {
            continue;
        }
        if exited_writer_pid(name.id()).is_none() || !is_free(path) {
            continue;
        }
        let count = per_kind.entry(name.kind()).or_default();
        if *count < MAX_FILES_PER_FOLD {
            *count += 1;
            picked.push(name);
        }
    }
    picked
}
