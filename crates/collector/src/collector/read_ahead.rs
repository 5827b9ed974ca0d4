//! The read-ahead pipeline: files opened and read by other threads while this one parses.

use super::file_table::FileTable;
use super::gather::cores;
use super::refresh::Refreshing;
use crate::problem::Warning;
use std::path::Path;
use std::path::PathBuf;
use std::sync::mpsc::Receiver;

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

impl FileTable {
    /// Whether enough files of `order` are to be read with `pread` (not
    /// mapped, `may_map`) for reading them ahead on other threads to pay.
    pub(super) fn worth_reading_ahead(&self, order: &[usize], may_map: &[bool]) -> bool {
        let reads = order
            .iter()
            .zip(may_map)
            .filter(|&(&index, &map)| !map && self.has_file(index))
            .count();
        reads >= PREFETCH_MIN_FILES && cores() > 1
    }

    /// Refreshes the files of `order` on this thread while other threads open
    /// and read the ones not mapped ahead of it, through bounded queues.
    /// `true`: the plan must be worked out again.
    pub(super) fn refresh_reading_ahead(
        &mut self,
        paths: &[PathBuf],
        order: &[usize],
        may_map: &[bool],
        how: Refreshing<'_>,
        warnings: &mut Vec<Warning>,
    ) -> bool {
        let ahead = self.files_to_read(paths, order, may_map);
        // The files of a directory are opened by name in it.
        let dir = ahead
            .first()
            .and_then(|(path, _)| OpenDir::open(path.parent()?).ok());
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..PREFETCH_READERS)
            .map(|_| std::sync::mpsc::sync_channel(PREFETCH_QUEUE))
            .unzip();
        let mut replan = false;
        std::thread::scope(|scope| {
            for (nth, sender) in senders.into_iter().enumerate() {
                let (ahead, dir) = (&ahead, dir.as_ref());
                // A thread that cannot be started drops its sender: this
                // thread then reads the files itself.
                let _ = std::thread::Builder::new().spawn_scoped(scope, move || {
                    read_ahead(ahead, dir, sender, nth, PREFETCH_READERS);
                });
            }
            let mut batches = BatchesInTurn::new(receivers);
            for (&index, &map) in order.iter().zip(may_map) {
                let prefetched = if !map && self.has_file(index) {
                    batches.next_file()
                } else {
                    None
                };
                replan |= self.refresh_file(index, map, prefetched, how, warnings);
            }
            // Dropping the receivers stops the reading threads if this side
            // stopped early.
            drop(batches);
        });
        replan
    }

    /// The files of `paths` to read with `pread` (not mapped, `may_map`), in
    /// merge order, with their kinds. `order` holds the index of each of
    /// `paths`, in the same order.
    fn files_to_read<'p>(
        &self,
        paths: &'p [PathBuf],
        order: &[usize],
        may_map: &[bool],
    ) -> Vec<(&'p Path, MetricKind)> {
        paths
            .iter()
            .zip(order)
            .zip(may_map)
            .filter(|&(_, &map)| !map)
            .filter_map(|((path, &index), _)| {
                let kind = self.known[index].as_ref()?.file.as_ref()?.name.kind();
                Some((path.as_path(), kind))
            })
            .collect()
    }
}

/// The files read ahead, taken batch by batch from each reading thread in
/// turn. Once one batch is missing (a reading thread stopped), no later
/// one is taken: its files would not be the ones it is taken for.
pub(super) struct BatchesInTurn {
    receivers: Vec<Receiver<Vec<Option<Prefetched>>>>,
    turn: std::iter::Cycle<std::ops::Range<usize>>,
    batch: std::vec::IntoIter<Option<Prefetched>>,
    stopped: bool,
}

impl BatchesInTurn {
    pub(super) fn new(receivers: Vec<Receiver<Vec<Option<Prefetched>>>>) -> Self {
        BatchesInTurn {
            turn: (0..receivers.len()).cycle(),
            receivers,
            batch: Vec::new().into_iter(),
            stopped: false,
        }
    }

    /// The next file read ahead (`None`: not read ahead, or the readers
    /// stopped; the refresh then reads it itself).
    pub(super) fn next_file(&mut self) -> Option<Prefetched> {
        if self.batch.len() == 0 && !self.stopped {
            let from = self.turn.next().and_then(|nth| self.receivers.get(nth));
            match from.and_then(|receiver| receiver.recv().ok()) {
                Some(next) => self.batch = next.into_iter(),
                None => self.stopped = true,
            }
        }
        self.batch.next().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::sync_channel;

    // A file whose header says `used`: its read-ahead tells it by `used()`.
    fn prefetched(dir: &Path, used: u32) -> Option<Prefetched> {
        let path = dir.join(format!("counter_{used}.db"));
        let mut bytes = used.to_le_bytes().to_vec();
        bytes.resize(8, 0);
        std::fs::write(&path, bytes).ok()?;
        Prefetched::read(None, &path, 4096)
    }

    // Batches are taken from each reader in turn; once a reader is gone,
    // nothing more is taken, even what another reader has sent.
    #[test]
    fn batches_come_from_each_reader_in_turn_until_one_stops() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let (first, first_rx) = sync_channel(4);
        let (second, second_rx) = sync_channel(4);
        let send = |to: &std::sync::mpsc::SyncSender<_>, used: &[u32]| {
            let batch = used.iter().map(|&u| prefetched(dir.path(), u)).collect();
            to.send(batch).unwrap_or_else(|e| panic!("send: {e}"));
        };
        send(&first, &[8, 16]);
        send(&second, &[24]);
        send(&second, &[40]);
        drop(first);
        let mut batches = BatchesInTurn::new(vec![first_rx, second_rx]);
        let mut taken = Vec::new();
        for _ in 0..5 {
            taken.push(batches.next_file().map(|p| p.used()));
        }
        assert_eq!(taken, [Some(8), Some(16), Some(24), None, None]);
    }
}
