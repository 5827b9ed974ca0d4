//! Reaping: what `prometheus_client.multiprocess.mark_process_dead(pid)` does,
//! for every pid in the directory whose process is gone.
//!
//! `mark_process_dead` deletes `gauge_live*_<pid>.db` and nothing else:
//! counters, histograms, summaries and non-live gauges of dead processes are
//! kept, so totals never go backwards. Python relies on the application
//! calling it (gunicorn's `child_exit` hook); a crashed worker is never
//! marked. Here the pid in the file name is checked instead:
//!
//! * `kill(pid, 0)` failing with `ESRCH`: no such process, dead.
//! * A zombie (`/proc/<pid>/stat` state `Z` or `X`) is dead too: it has exited
//!   and only waits for its parent to collect its status.
//! * `EPERM` means the process exists (another user's): alive.
//!
//! Caveats (documented in `docs/operations.md`):
//! * pid namespaces: the pids are the writers' pids in *their* namespace. A
//!   collector in another namespace (another container without
//!   `shareProcessNamespace`) sees other processes or none under those
//!   numbers, and would remove live workers' files. Only reap where the
//!   workers' pids are visible.
//! * pid reuse: once a pid is reused by an unrelated process the old file
//!   looks alive until that process exits too; reaping early (each scrape and
//!   periodically) keeps the window small. Ids that are not pids (a custom
//!   `process_identifier`) are never reaped.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use multiprom_collector::scan_dir;
use multiprom_format::{FileName, MetricKind};
use rustix::io::Errno;
use rustix::process::{test_kill_process, Pid};

/// Whether a process exists, as far as this pid namespace can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessState {
    /// Running (or stopped, or another user's process).
    Alive,
    /// Exited but not yet collected by its parent.
    Zombie,
    /// No such process.
    Gone,
    /// Not a pid that can be checked (0, or above the pid range).
    Unknown,
}

impl ProcessState {
    /// Whether the process has exited (gone or a zombie).
    #[must_use]
    pub const fn is_dead(self) -> bool {
        matches!(self, ProcessState::Zombie | ProcessState::Gone)
    }

    /// `alive`, `zombie`, `dead` or `unknown`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            ProcessState::Alive => "alive",
            ProcessState::Zombie => "zombie",
            ProcessState::Gone => "dead",
            ProcessState::Unknown => "unknown",
        }
    }
}

/// Checks whether process `pid` exists in this pid namespace.
///
/// ```
/// use multiprom_http::reap::{process_state, ProcessState};
/// assert_eq!(process_state(std::process::id()), ProcessState::Alive);
/// assert_eq!(process_state(0), ProcessState::Unknown);
/// ```
#[must_use]
pub fn process_state(pid: u32) -> ProcessState {
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return ProcessState::Unknown;
    };
    match test_kill_process(pid) {
        Ok(()) | Err(Errno::PERM) => {
            if is_zombie(pid.as_raw_nonzero().get()) {
                ProcessState::Zombie
            } else {
                ProcessState::Alive
            }
        }
        Err(Errno::SRCH) => ProcessState::Gone,
        // Anything else: do not guess "dead".
        Err(_) => ProcessState::Alive,
    }
}

/// Whether `/proc/<pid>/stat` shows a zombie (`Z`) or dead (`X`) state. No
/// `/proc` (or a race with the process going away): not a zombie, so the
/// next check decides.
fn is_zombie(pid: i32) -> bool {
    let Ok(stat) = std::fs::read(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `pid (comm) S ...`: comm may contain spaces and parentheses, so the
    // state is the first field after the *last* `)`.
    let Some(close) = stat.iter().rposition(|&b| b == b')') else {
        return false;
    };
    matches!(stat.get(close + 1..close + 3), Some([b' ', b'Z' | b'X']))
}

/// The `gauge_live*` files of dead processes that were removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reaped {
    /// Removed files with the pid of the dead process, in name order.
    pub removed: Vec<(PathBuf, u32)>,
    /// Files that could not be removed, with why.
    pub failed: Vec<(PathBuf, String)>,
}

/// Removes `gauge_live*_<pid>.db` for every pid in `dir` whose process is
/// dead, as `mark_process_dead(pid)` would. Never touches any other file.
pub fn reap_dead(dir: &Path) -> io::Result<Reaped> {
    reap_dead_with(dir, process_state)
}

/// [`reap_dead`] with a custom liveness check (for tests and for hosts that
/// know their workers better).
pub fn reap_dead_with(
    dir: &Path,
    mut state_of: impl FnMut(u32) -> ProcessState,
) -> io::Result<Reaped> {
    let mut reaped = Reaped::default();
    let mut known: HashMap<u32, bool> = HashMap::new();
    for path in scan_dir(dir)? {
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| FileName::parse(n).ok())
        else {
            continue;
        };
        let MetricKind::Gauge(mode) = name.kind() else {
            continue;
        };
        if !mode.is_live() {
            continue;
        }
        // Only plain decimal pids: "0042" or "+42" are not what os.getpid()
        // writes, so they are someone's custom identifier.
        let Some(pid) = name.pid().filter(|p| p.to_string() == name.id()) else {
            continue;
        };
        let dead = *known.entry(pid).or_insert_with(|| state_of(pid).is_dead());
        if !dead {
            continue;
        }
        match std::fs::remove_file(&path) {
            Ok(()) => reaped.removed.push((path, pid)),
            // Someone else (Python's mark_process_dead) was first.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => reaped.failed.push((path, e.to_string())),
        }
    }
    Ok(reaped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_only_live_gauges_of_dead_pids() {
        let dir = tempfile::tempdir().unwrap();
        let names = [
            "gauge_livesum_100.db",
            "gauge_liveall_100.db",
            "gauge_livemostrecent_100.db",
            "gauge_livemin_100.db",
            "gauge_livemax_100.db",
            "gauge_sum_100.db",
            "gauge_all_100.db",
            "counter_100.db",
            "histogram_100.db",
            "summary_100.db",
            "gauge_livesum_200.db",
            "gauge_livesum_0100.db",
            "gauge_livesum_worker.db",
            "gauge_livesum_100.txt",
            "app.db",
        ];
        for name in names {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        let reaped = reap_dead_with(dir.path(), |pid| {
            if pid == 100 {
                ProcessState::Gone
            } else {
                ProcessState::Alive
            }
        })
        .unwrap();
        let removed: Vec<_> = reaped
            .removed
            .iter()
            .map(|(p, pid)| (p.file_name().unwrap().to_str().unwrap().to_owned(), *pid))
            .collect();
        assert_eq!(
            removed,
            [
                ("gauge_liveall_100.db".to_owned(), 100),
                ("gauge_livemax_100.db".to_owned(), 100),
                ("gauge_livemin_100.db".to_owned(), 100),
                ("gauge_livemostrecent_100.db".to_owned(), 100),
                ("gauge_livesum_100.db".to_owned(), 100),
            ]
        );
        let mut left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "app.db",
                "counter_100.db",
                "gauge_all_100.db",
                "gauge_livesum_0100.db",
                "gauge_livesum_100.txt",
                "gauge_livesum_200.db",
                "gauge_livesum_worker.db",
                "gauge_sum_100.db",
                "histogram_100.db",
                "summary_100.db",
            ]
        );
    }

    #[test]
    fn zombies_count_as_dead() {
        // A child that exits and is not waited for is a zombie.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let mut state = process_state(pid);
        for _ in 0..500 {
            if state != ProcessState::Alive {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            state = process_state(pid);
        }
        assert_eq!(state, ProcessState::Zombie);
        assert!(state.is_dead());
        child.wait().unwrap();
        assert_eq!(process_state(pid), ProcessState::Gone);
    }

    #[test]
    fn unknown_pids_are_never_dead() {
        assert_eq!(process_state(0), ProcessState::Unknown);
        assert_eq!(process_state(u32::MAX), ProcessState::Unknown);
        assert!(!ProcessState::Unknown.is_dead());
        // pid 1 exists in every namespace (and may be another user's: EPERM).
        assert_eq!(process_state(1), ProcessState::Alive);
    }
}
