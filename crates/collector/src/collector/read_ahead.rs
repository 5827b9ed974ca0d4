//! The read-ahead pipeline: files opened and read by other threads while this one parses.

use std::path::Path;

use multiprom_format::{MetricKind, OpenDir};

use crate::tracked::{Prefetched, ReadGuess};

/// Fewer files than this are read on one thread.
pub(super) const PREFETCH_MIN_FILES: usize = 64;

/// Files read ahead are handed to the parsing thread this many at a time:
/// one hand-off per file costs a futex wake-up and wait each, a tenth of a
/// cold collection on 4,000 files.
pub(super) const PREFETCH_BATCH: usize = 32;

/// Batches each reading thread has read ahead and the parsing thread not
/// yet taken, at most (`PREFETCH_BATCH` files each). With the batch each
/// reading thread is filling and the one being parsed, what is in flight is
/// bounded by 7 batches x 32 files x the most read ahead of one file
/// (64 KiB): 14 MiB.
pub(super) const PREFETCH_QUEUE: usize = 2;

/// Threads reading ahead, taking batches in turn. The kernel's work on
/// each file (open, `fstat`, read, close) is most of a cold collection, and
/// once keys are compared with the last file's instead of looked up (see
/// `tracked::KeyHints`) the parsing thread waits for one reading thread:
/// with two, all three keep two cores busy. Measured on two cores and the
/// Python package bench's 4,000 files: a cold collection 35 to 37 ms with
/// one reading thread, 30 to 33 ms with two.
pub(super) const PREFETCH_READERS: usize = 2;

/// A reading thread's work: batch `nth`, `nth + of`, `nth + 2 * of`... of
/// `PREFETCH_BATCH` files of `ahead` (in merge order, with their kinds),
/// read and sent in order to the parsing thread.
pub(super) fn read_ahead(
    ahead: &[(&Path, MetricKind)],
    dir: Option<&OpenDir>,
    sender: std::sync::mpsc::SyncSender<Vec<Option<Prefetched>>>,
    nth: usize,
    of: usize,
) {
    let mut guess = ReadGuess::default();
    for files in ahead.chunks(PREFETCH_BATCH).skip(nth).step_by(of) {
        let batch = files
            .iter()
            .map(|&(path, kind)| {
                let read = Prefetched::read(dir, path, guess.first_read(kind))?;
                guess.learn(kind, read.used());
                Some(read)
            })
            .collect();
        if sender.send(batch).is_err() {
            return;
        }
    }
}
