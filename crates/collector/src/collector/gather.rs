//! Gathering values: copying the plan's values out of the files, split between threads on a big directory.

use crate::op::Op;
use crate::plan::PlannedFile;

use super::file_entry::{tracked_file, FileEntry};

/// Copies the values of `files` (whose operations are `ops`, in order) into
/// `out`, but those of files settled for the plan of generation `settled`,
/// whose values `out` holds already.
pub(super) fn gather(
    known: &[Option<FileEntry>],
    files: &[PlannedFile],
    mut ops: &[Op],
    settled: Option<u64>,
    mut out: &mut [(f64, f64)],
) -> Result<(), usize> {
    for planned in files {
        let n = planned.entries.min(ops.len()).min(out.len());
        let (file_ops, rest_ops) = ops.split_at(n);
        let (file_out, rest_out) = std::mem::take(&mut out).split_at_mut(n);
        ops = rest_ops;
        out = rest_out;
        let Some(file) = tracked_file(known, planned.index) else {
            file_out.fill((0.0, 0.0));
            continue;
        };
        if settled.is_some_and(|generation| file.is_settled(generation)) {
            continue;
        }
        file.gather_values(file_ops, file_out)
            .map_err(|_| planned.index)?;
    }
    out.fill((0.0, 0.0));
    Ok(())
}

/// Below this many entries one thread copies the values: a thread's start
/// costs more than it saves.
pub(super) const ENTRIES_PER_THREAD: usize = 50_000;

/// How many threads copy the values of `entries` entries: one per
/// `ENTRIES_PER_THREAD`, at most one per core, at most four.
pub(super) fn gather_threads(entries: usize) -> usize {
    (entries / ENTRIES_PER_THREAD).clamp(1, cores().min(4))
}

/// The cores this process may use.
pub(super) fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}
