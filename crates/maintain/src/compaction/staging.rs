//! The staging directory, `.multiprom-compaction/` inside the metrics
//! directory: files being folded wait here, outside the `*.db` namespace
//! (no writer opens and no collector lists them), on the same file system so
//! every move is an atomic rename.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use multiprom_format::{FileName, STAGING_DIR};
use rustix::fs::{flock, FlockOperation};

use super::error::CompactError;
use super::sync_dir::sync_dir;
use crate::set_aside::move_no_replace;

/// The lock file's name in the staging directory.
pub(crate) const LOCK: &str = "lock";
/// Prefix of a new compacted file before it replaces the old one.
pub(crate) const NEW_PREFIX: &str = "new-";

/// The staging directory of one metrics directory, locked for as long as
/// this value lives: two compactors on one directory would each take the
/// other's staged files for their own.
#[derive(Debug)]
pub(crate) struct Staging {
    dir: PathBuf,
    path: PathBuf,
    _lock: File,
}

impl Staging {
    /// Creates (if needed) and locks the staging directory of `dir`.
    pub(crate) fn open(dir: &Path) -> Result<Staging, CompactError> {
        let path = dir.join(STAGING_DIR);
        match std::fs::create_dir(&path) {
            Ok(()) => sync_dir(dir)?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(source) => return Err(CompactError::Io { path, source }),
        }
        let lock_path = path.join(LOCK);
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|source| CompactError::Io {
                path: lock_path.clone(),
                source,
            })?;
        match flock(&lock, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(CompactError::Locked { path: lock_path })
            }
            Err(e) => {
                return Err(CompactError::Io {
                    path: lock_path,
                    source: e.into(),
                })
            }
        }
        Ok(Staging {
            dir: dir.to_owned(),
            path,
            _lock: lock,
        })
    }

    /// The metrics directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The staging directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Where `name` waits while staged.
    pub(crate) fn staged(&self, name: &FileName) -> PathBuf {
        self.path.join(name.to_string())
    }

    /// Moves `name` out of the metrics directory into staging.
    pub(crate) fn stage(&self, name: &FileName) -> io::Result<()> {
        move_no_replace(&self.dir.join(name.to_string()), &self.staged(name))
    }

    /// Moves a staged file back under its own name or, if a new file took
    /// that name meanwhile (its pid was reused), under `<id>.<n>`: either
    /// way its values are in the directory again. Returns the name used.
    pub(crate) fn put_back(&self, name: &FileName) -> io::Result<FileName> {
        let from = self.staged(name);
        let mut target = name.clone();
        for n in 1..=1000u32 {
            match move_no_replace(&from, &self.dir.join(target.to_string())) {
                Ok(()) => return Ok(target),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    target = FileName::new(name.kind(), format!("{}.{n}", name.id()))
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                }
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("no free name to put {name} back under"),
        ))
    }

    /// The metrics files waiting in staging, in name order.
    pub(crate) fn staged_files(&self) -> Result<Vec<FileName>, CompactError> {
        let mut names = Vec::new();
        let entries = std::fs::read_dir(&self.path).map_err(|source| CompactError::Io {
            path: self.path.clone(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| CompactError::Io {
                path: self.path.clone(),
                source,
            })?;
            if let Some(name) = entry
                .file_name()
                .to_str()
                .and_then(|n| FileName::parse(n).ok())
            {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    /// Removes a file in staging; one already gone is fine.
    pub(crate) fn remove(&self, name: &str) -> Result<(), CompactError> {
        let path = self.path.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(CompactError::Io { path, source }),
        }
    }

    /// Flushes both directories' entries to disk.
    pub(crate) fn sync(&self) -> Result<(), CompactError> {
        sync_dir(&self.path)?;
        sync_dir(&self.dir)
    }
}
