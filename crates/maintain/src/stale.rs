//! [`clear_stale`]: a directory made ready for a new run, without the files
//! an earlier one left (its counters would add to the new run's) and
//! without touching what a running process still uses.

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};

use multiprom_format::FileIdentity;

use crate::compaction::staging::{self, Staging};
use crate::compaction::CompactError;
use crate::companion::Companion;
use crate::process::holders;

/// What [`clear_stale`] removed and kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Cleared {
    /// `*.db` files removed.
    pub removed: usize,
    /// Companion files (exemplars, native histograms) removed: their `*.db`
    /// file was gone.
    pub removed_companions: usize,
    /// Files kept because a process has them open or mapped (a writer of
    /// some other run or application that uses the directory).
    pub in_use: usize,
}

/// Why [`clear_stale`] removed nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClearError {
    /// Another multiprom holds the directory's compaction lock: it serves
    /// this directory now, and its files are not stale.
    #[error("another multiprom is using {} (it holds {}); nothing was removed", .dir.display(), .lock.display())]
    InUse {
        /// The directory.
        dir: PathBuf,
        /// The lock file held.
        lock: PathBuf,
    },
    /// The directory, or a file in it, could not be listed, locked or
    /// removed.
    #[error("{}: {source}", .path.display())]
    Io {
        /// What failed.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// Removes from `dir` the `*.db` files an earlier run left, their companion
/// files (`exemplars/`, `native-histograms/`, a compacted native histogram
/// included: it would be folded into the new run's totals) and an
/// interrupted compaction's staged files, keeping every file a process has
/// open or mapped (a process this one may not inspect, or any without
/// `/proc`, counts as holding nothing). Holds the compaction lock while it
/// works (where it may write the directory), so no compactor starts
/// meanwhile; refuses, removing nothing, when another multiprom holds it.
///
/// ```no_run
/// let cleared = multiprom_maintain::clear_stale(std::path::Path::new("/run/metrics"))?;
/// println!("removed {} files", cleared.removed);
/// # Ok::<(), multiprom_maintain::ClearError>(())
/// ```
pub fn clear_stale(dir: &Path) -> Result<Cleared, ClearError> {
    // A directory this process may not write has no lock to take (nor can
    // anything be removed from it): then only the files' holders protect.
    let staging = match Staging::open(dir) {
        Ok(staging) => Some(staging),
        Err(CompactError::Locked { path }) => {
            return Err(ClearError::InUse {
                dir: dir.to_owned(),
                lock: path,
            })
        }
        Err(_) => None,
    };
    let io_error = |path: &Path| {
        let path = path.to_owned();
        move |source| ClearError::Io { path, source }
    };
    let mut db_files: Vec<PathBuf> = multiprom_format::scan_dir(dir)
        .map_err(io_error(dir))?
        .into_iter()
        // A directory or a link named x.db is not ours to delete.
        .filter(|path| std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()))
        .collect();
    let mut companions = Vec::new();
    for companion in Companion::ALL {
        let Ok(entries) = std::fs::read_dir(dir.join(companion.subdir())) else {
            continue;
        };
        for entry in entries.flatten() {
            let file_name = entry.file_name();
            if let Some(db) = file_name
                .to_str()
                .and_then(|name| companion.db_name_of(name))
            {
                companions.push((entry.path(), dir.join(db.to_string())));
            }
        }
    }
    let staged: Vec<PathBuf> = match &staging {
        Some(staging) => std::fs::read_dir(staging.path())
            .map_err(io_error(staging.path()))?
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.file_name() != Some(staging::LOCK.as_ref()))
            .collect(),
        None => Vec::new(),
    };
    // Without a readable /proc (a sandbox) no holder can be seen: every
    // file is taken for stale, as before holders were looked for.
    let in_use = held(
        db_files
            .iter()
            .chain(companions.iter().map(|(path, _)| path)),
    )
    .unwrap_or_default();
    let mut cleared = Cleared::default();
    db_files.retain(|path| {
        let keep = in_use.contains(path);
        cleared.in_use += usize::from(keep);
        !keep
    });
    for path in &db_files {
        if remove(path).map_err(io_error(path))? {
            cleared.removed += 1;
        }
    }
    for (path, db) in &companions {
        if in_use.contains(path) {
            cleared.in_use += 1;
        } else if !db.exists() && remove(path).map_err(io_error(path))? {
            cleared.removed_companions += 1;
        }
    }
    for path in &staged {
        let removed = match std::fs::remove_dir_all(path) {
            Err(e) if e.kind() == io::ErrorKind::NotADirectory => std::fs::remove_file(path),
            other => other,
        };
        match removed {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(io_error(path)(e)),
            _ => {}
        }
    }
    Ok(cleared)
}

/// Which of `paths` some process has open or mapped.
fn held<'a>(paths: impl Iterator<Item = &'a PathBuf>) -> io::Result<HashSet<PathBuf>> {
    let by_identity: Vec<(FileIdentity, &PathBuf)> = paths
        .filter_map(|path| Some((FileIdentity::of(path).ok()?, path)))
        .collect();
    let identities: HashSet<FileIdentity> = by_identity.iter().map(|(id, _)| *id).collect();
    let found = holders(&identities)?;
    Ok(by_identity
        .into_iter()
        .filter(|(id, _)| found.holds(id))
        .map(|(_, path)| path.clone())
        .collect())
}

/// Removes `path`: `true` if it was there.
fn remove(path: &Path) -> io::Result<bool> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}
