//! This process's native histogram files: one
//! `native-histograms/histogram_<id>.native` per multiprocess directory,
//! the companion of the `histogram_<id>.db` file prometheus_client's
//! value class writes there: `<id>` is what its process identifier
//! answers (`os.getpid()` by default; the caller passes any other's
//! answer), as the collector pairs a native file with the `*.db` file of
//! its name.
//!
//! A forked child inherits its parent's open writers and their mappings;
//! writing through them would land in the parent's file. So the writers
//! are kept with the fork generation they were opened at, and a child
//! (a new generation) forgets them and opens its own pid's files.
//!
//! `prometheus_client.values.close_all_multiprocess_files()` closes them
//! too (a test suite calls it before removing and re-making the directory):
//! the writers are dropped and the close counted in the [`Epoch`], so every
//! series opens its file again on its next observation, in the directory
//! as it is then, rather than writing on into an unlinked file.
//!
//! Only cold paths come here (a series' first observation, or its first
//! after a fork or a close). The lock is held with the GIL held and never
//! across a call into Python: no other thread can hold it when the process
//! forks (`os.fork` holds the GIL), so a child never finds it locked.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use multiprom_format::fork::fork_generation;
use multiprom_format::{NativeHistogramConfig, NativeSeries, ProcessFileError, ProcessFiles};

/// The files of the current fork generation, by directory and file id
/// (a file is opened once: two writers of one file would overwrite each
/// other's records); only their native histogram files are used here.
struct Writers {
    generation: u64,
    by_file: HashMap<(PathBuf, String), ProcessFiles>,
}

static WRITERS: Mutex<Option<Writers>> = Mutex::new(None);

/// How many times [`close_all`] dropped the writers.
static CLOSES: AtomicU64 = AtomicU64::new(0);

/// Which files a series bound now writes to: those of this fork
/// generation, opened since the last close. A series bound in another
/// epoch must open its file again.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Epoch {
    fork_generation: u64,
    closes: u64,
}

/// The current [`Epoch`]: two relaxed atomic loads.
#[inline]
pub(crate) fn epoch() -> Epoch {
    Epoch {
        fork_generation: fork_generation(),
        closes: CLOSES.load(Ordering::Relaxed),
    }
}

/// Closes this process's native files: the writers are dropped (unmapped
/// once no series holds them) and every series opens its file again on
/// its next observation.
pub(crate) fn close_all() {
    let closed = {
        let mut writers = WRITERS.lock().unwrap_or_else(PoisonError::into_inner);
        CLOSES.fetch_add(1, Ordering::Relaxed);
        writers.take()
    };
    // Unmapped outside the lock.
    drop(closed);
}

/// The series of `key` in this process's native histogram file in `dir`,
/// named with `id` (`None`: the pid), opening the file if this process
/// (this fork generation, since the last close) has not yet, and whether
/// it did. The error says why there is none, for the one warning.
pub(crate) fn series(
    dir: &Path,
    id: Option<String>,
    key: &str,
    config: NativeHistogramConfig,
) -> Result<(NativeSeries, bool), String> {
    let generation = fork_generation();
    let mut writers = WRITERS.lock().unwrap_or_else(PoisonError::into_inner);
    let current = match writers.take() {
        Some(current) if current.generation == generation => current,
        // A new process (or the first use): the inherited writers are the
        // parent's. Dropping them unmaps them here only.
        _ => Writers {
            generation,
            by_file: HashMap::new(),
        },
    };
    let current = writers.insert(current);
    let file = (
        dir.to_owned(),
        id.unwrap_or_else(|| std::process::id().to_string()),
    );
    let opened = !current.by_file.contains_key(&file);
    let files = current
        .by_file
        .entry(file)
        .or_insert_with_key(|(_, id)| ProcessFiles::new(id.as_str()));
    let writer = match files.native_file(dir) {
        Ok(writer) => writer,
        Err(error) => {
            let error = match error {
                ProcessFileError::BadIdentifier(e) => format!("histogram_{}.db: {e}", files.id()),
                ProcessFileError::Write(e) => e.to_string(),
            };
            // Tried again (and reported as opened) on the next observation.
            current.by_file.retain(|_, files| files.has_native_file());
            return Err(error);
        }
    };
    let series = writer.series(key, config).map_err(|e| e.to_string())?;
    Ok((series, opened))
}
