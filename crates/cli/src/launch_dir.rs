//! The multiprocess directory a launcher (`run`, `demo`) owns: a fresh
//! private one that is removed at the end, or the user's, cleaned of stale
//! files at start and left in place.

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::exit_code::ExitCode;
use crate::{http_service, listen};

/// What a launcher (`run`, `demo`) sets up before it starts anything: the
/// directory and the runtime. [`Launch::prepare`] also binds the listener,
/// so a busy port fails before any worker starts.
pub(crate) struct Launch {
    /// The workers' directory.
    pub dir: MetricsDir,
    /// The async runtime.
    pub runtime: tokio::runtime::Runtime,
}

impl Launch {
    /// Sets everything up, or prints one line prefixed with `command` and
    /// returns the exit code (2 for a bad directory or address).
    pub(crate) fn prepare(
        command: &str,
        dir: Option<&Path>,
        existing: ExistingFiles,
        temp_prefix: &str,
        listen: Option<&str>,
    ) -> Result<(Launch, Option<TcpListener>), ExitCode> {
        let dir = MetricsDir::prepare(dir, existing, temp_prefix).map_err(|err| {
            eprintln!("{command}: {err}");
            ExitCode::from(2)
        })?;
        let listener = listen.map(listen::bind).transpose().map_err(|err| {
            eprintln!("{command}: {err}");
            ExitCode::from(2)
        })?;
        let runtime = http_service::runtime().map_err(|err| {
            eprintln!("{command}: cannot start: {err}");
            ExitCode::FAILURE
        })?;
        Ok((Launch { dir, runtime }, listener))
    }

    /// Stops the runtime (its blocking pool may be reading the directory),
    /// then removes the directory if it is a temporary one.
    pub(crate) fn finish(self, command: &str) {
        self.runtime
            .shutdown_timeout(std::time::Duration::from_secs(5));
        if let Err(err) = self.dir.remove_if_temporary() {
            eprintln!("{command}: {err}");
        }
    }
}

/// What to do with `*.db` files already in a given directory: files left by
/// an earlier run make wrong metrics, but they may also be someone else's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExistingFiles {
    /// Remove them (`run --dir`; `--keep-files` says otherwise).
    Remove,
    /// Leave them (`run --keep-files`, or a directory from the environment,
    /// which multiprom did not create and so does not clean).
    Keep,
    /// Refuse the directory, naming `flag` as the way to remove them
    /// (`demo`: its files are throwaway, a directory holding others is a
    /// mistake more often than not).
    Refuse {
        /// The flag that removes them instead.
        flag: &'static str,
    },
}

/// The directory the workers write to.
pub(crate) enum MetricsDir {
    /// Ours: removed at the end.
    Temporary(tempfile::TempDir),
    /// The user's: left in place.
    Given(PathBuf),
}

impl MetricsDir {
    /// A private temporary directory (mode 0700, named `<prefix>XXXXXX`), or
    /// `dir`, created if missing, made absolute (workers get it in
    /// `PROMETHEUS_MULTIPROC_DIR`, and one that changes directory must still
    /// write to the same place), with `*.db` files already there handled as
    /// `existing` says.
    pub(crate) fn prepare(
        dir: Option<&Path>,
        existing: ExistingFiles,
        prefix: &str,
    ) -> Result<MetricsDir, String> {
        let Some(dir) = dir else {
            let temp = tempfile::Builder::new()
                .prefix(prefix)
                .tempdir()
                .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
            // tempfile already makes it 0700; say so explicitly, it is the point.
            std::fs::set_permissions(temp.path(), std::fs::Permissions::from_mode(0o700))
                .map_err(|e| format!("{}: {e}", temp.path().display()))?;
            return Ok(MetricsDir::Temporary(temp));
        };
        // A file in the way is "not a directory", not create_dir_all's
        // "File exists".
        if dir.exists() && !dir.is_dir() {
            return Err(format!("{}: not a directory", dir.display()));
        }
        let dir = std::path::absolute(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
        // Every worker would die writing its first metric file: say so
        // once, before any starts. A real file, not access(2), which
        // passes for root on a read-only file system.
        tempfile::Builder::new()
            .prefix(".multiprom-write-check")
            .tempfile_in(&dir)
            .map_err(|e| format!("{}: workers cannot write here: {e}", dir.display()))?;
        match existing {
            ExistingFiles::Remove => remove_stale_files(&dir)?,
            ExistingFiles::Keep => {}
            ExistingFiles::Refuse { flag } => {
                let found = db_files(&dir)?.len();
                if found > 0 {
                    return Err(format!(
                        "{} already holds {found} *.db file{}; pass {flag} to remove them first, or use an empty directory",
                        dir.display(),
                        plural(found)
                    ));
                }
            }
        }
        Ok(MetricsDir::Given(dir))
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        match self {
            MetricsDir::Temporary(dir) => dir.path(),
            MetricsDir::Given(dir) => dir,
        }
    }

    /// Removes the directory if it is ours; leaves a given one alone.
    pub(crate) fn remove_if_temporary(self) -> Result<(), String> {
        match self {
            MetricsDir::Temporary(temp) => {
                let path = temp.path().to_path_buf();
                temp.close()
                    .map_err(|e| format!("cannot remove {}: {e}", path.display()))
            }
            MetricsDir::Given(_) => Ok(()),
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The regular `*.db` files in `dir` (a directory named x.db is not ours to
/// delete).
fn db_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut paths = multiprom_format::scan_dir(dir)
        .map_err(|e| format!("{}: cannot list: {e}", dir.display()))?;
    paths.retain(|path| std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()));
    Ok(paths)
}

/// Removes what an earlier run left in `dir` (`*.db` files, their
/// companions, an interrupted compaction's staged files), never a file a
/// running process uses, logging how many; refuses a directory another
/// multiprom serves.
fn remove_stale_files(dir: &Path) -> Result<(), String> {
    let cleared = multiprom_maintain::clear_stale(dir).map_err(|error| match error {
        multiprom_maintain::ClearError::InUse { .. } => format!(
            "{error}: give this run another --dir, or pass --keep-files to leave its files alone"
        ),
        other => format!("cannot remove stale files: {other} (pass --keep-files to keep them)"),
    })?;
    if cleared.removed > 0 {
        // The counts start anew: the directory's birth (or an earlier
        // run's record) is no start for them.
        if let Err(e) = multiprom_collector::restart_counting(dir, std::time::SystemTime::now()) {
            tracing::warn!(
                "{}: cannot record that counting starts anew: {e}",
                dir.display()
            );
        }
    }
    if cleared.removed + cleared.removed_companions > 0 {
        tracing::info!(
            "removed {} stale *.db file{}{} from {} (left by an earlier run)",
            cleared.removed,
            plural(cleared.removed),
            match cleared.removed_companions {
                0 => String::new(),
                n => format!(" and {n} of their exemplar or native histogram files"),
            },
            dir.display()
        );
    }
    if cleared.in_use > 0 {
        tracing::info!(
            "kept {} file{} in {} that running processes have open (not left by an earlier run)",
            cleared.in_use,
            plural(cleared.in_use),
            dir.display()
        );
    }
    Ok(())
}
