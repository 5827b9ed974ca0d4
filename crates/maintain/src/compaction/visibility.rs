//! Whether this process can see the directory's writers at all. Folding is
//! only safe when every process that may hold a file shows up in `/proc`:
//! in another pid namespace, or on another machine sharing the directory, a
//! live writer would look dead and its file would be folded under it.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, SystemTime};

use multiprom_format::{FileIdentity, FileName};

use crate::process::{holders, last_allocated_pid};

/// Files changed this recently are taken to have a writer right now.
const RECENT: Duration = Duration::from_secs(30);

/// Why compaction refuses to run on a directory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum WritersNotVisible {
    /// No usable `/proc`.
    #[error("/proc is not readable here, so there is no telling which processes hold the files")]
    NoProc,
    /// The directory is on a network file system.
    #[error(
        "the directory is on a network file system ({0}): writers on other machines cannot be seen"
    )]
    NetworkFileSystem(&'static str),
    /// Files are being written, yet no visible process holds any of them.
    #[error("{recent} file(s) were written in the last {}s but no process visible here holds any file of the directory: the writers run in another pid namespace (container) or on another machine", RECENT.as_secs())]
    WritersElsewhere {
        /// Files modified within the last thirty seconds.
        recent: usize,
    },
    /// A writer's process cannot be inspected.
    #[error("the writer of {file} (pid {pid}) cannot be inspected (its /proc/{pid}/fd or maps is not readable): run multiprom as the workers' user or as root")]
    CannotInspect {
        /// The writer's pid.
        pid: u32,
        /// Its file.
        file: String,
    },
}

impl WritersNotVisible {
    /// Whether this stays so for as long as the process runs (no `/proc`, a
    /// network file system), as opposed to what a later look may settle
    /// (a writer seen holding its file proves the writers are visible).
    #[must_use]
    pub(crate) const fn is_permanent(&self) -> bool {
        matches!(
            self,
            WritersNotVisible::NoProc | WritersNotVisible::NetworkFileSystem(_)
        )
    }
}

/// Checks that the writers of `dir` are visible from here. Short-lived
/// workers that have all just exited look like writers elsewhere, so a
/// caller that is refused for a reason that is not permanent looks again
/// before each pass until it is allowed.
pub(crate) fn check_writers_visible(dir: &Path) -> Result<(), WritersNotVisible> {
    if last_allocated_pid().is_none() || std::fs::read_dir("/proc/self/fd").is_err() {
        return Err(WritersNotVisible::NoProc);
    }
    if let Some(kind) = network_file_system(dir) {
        return Err(WritersNotVisible::NetworkFileSystem(kind));
    }
    let Ok(listing) = multiprom_collector::scan_dir(dir) else {
        // An unreadable directory fails the first pass, with its own error.
        return Ok(());
    };
    let now = SystemTime::now();
    let mut ids = HashSet::new();
    let mut writers = Vec::new();
    let mut recent = 0;
    for path in &listing {
        let Ok(meta) = std::fs::metadata(path) else {
            continue;
        };
        ids.insert(FileIdentity::from_metadata(&meta));
        if let Some((pid, name)) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| Some((FileName::parse(n).ok()?.pid()?, n)))
        {
            writers.push((pid, name.to_owned()));
        }
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        if now.duration_since(modified).unwrap_or_default() < RECENT {
            recent += 1;
        }
    }
    let found = holders(&ids).map_err(|_| WritersNotVisible::NoProc)?;
    if let Some((pid, file)) = writers
        .into_iter()
        .find(|(pid, _)| found.uninspectable_pids.contains(pid))
    {
        return Err(WritersNotVisible::CannotInspect { pid, file });
    }
    if recent > 0 && found.held.is_empty() {
        return Err(WritersNotVisible::WritersElsewhere { recent });
    }
    Ok(())
}

/// The kind of network file system `dir` is on, by `statfs` magic number.
fn network_file_system(dir: &Path) -> Option<&'static str> {
    let stat = rustix::fs::statfs(dir).ok()?;
    // From linux/magic.h and the file systems' own sources.
    #[allow(clippy::unreadable_literal)]
    let kind = match stat.f_type as i64 as u32 {
        0x6969 => "NFS",
        0x517B => "SMB",
        0xFF534D42 => "CIFS",
        0xFE534D42 => "SMB2",
        0x00C36400 => "Ceph",
        0x01021997 => "9p",
        0x65735546 => "FUSE",
        0x47504653 => "GPFS",
        0x0BD00BD0 => "Lustre",
        0x6B414653 => "AFS",
        _ => return None,
    };
    Some(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_directory_with_no_writers_is_fine() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(check_writers_visible(dir.path()), Ok(()));
    }

    #[test]
    fn fresh_files_nobody_holds_mean_the_writers_are_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("counter_1234567.db"), [0u8; 16]).unwrap();
        assert_eq!(
            check_writers_visible(dir.path()),
            Err(WritersNotVisible::WritersElsewhere { recent: 1 })
        );
    }
}
