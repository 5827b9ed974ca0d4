//! Reading ahead: a file opened and its first bytes read by another
//! thread, and how much to read of a file at first.

use std::fs::File;
use std::path::Path;

use multiprom_format::layout::HEADER_LEN;
use multiprom_format::{open_for_read, MetricKind, OpenDir};

use super::pread::FIRST_READ;

/// A file opened, and its first bytes read, ahead of its refresh by another
/// thread: the system calls and the copying out of the page cache overlap
/// with parsing the files before it.
#[derive(Debug)]
pub(crate) struct Prefetched {
    pub(super) file: File,
    pub(super) meta: std::fs::Metadata,
    pub(super) head: Vec<u8>,
}

/// The most a read ahead takes of one file; the rest, if any, is read by
/// the refresh itself (as the entries prove good). Bounds what files in
/// flight between the threads can cost.
const PREFETCH_MAX: usize = 64 * 1024;

impl Prefetched {
    /// Opens `path` (by name in `dir` if it is there), reads its first
    /// `guess` bytes (at least a page) and then, if the header's `used` is
    /// more, up to it, at most `PREFETCH_MAX` bytes. `None` on any trouble:
    /// the refresh then does it all again itself and reports what it finds.
    pub(crate) fn read(dir: Option<&OpenDir>, path: &Path, guess: usize) -> Option<Prefetched> {
        let (file, meta) = match dir {
            Some(dir) => dir.open_for_read(path),
            None => open_for_read(path),
        }
        .ok()?;
        let size = usize::try_from(meta.len()).ok()?;
        let first = guess
            .clamp(FIRST_READ, PREFETCH_MAX)
            .min(size)
            .max(HEADER_LEN);
        // Read into the vector's spare capacity: a zero-filled buffer would
        // cost writing every byte twice, and this thread's time is most of
        // a cold collection's.
        let mut head = Vec::with_capacity(first);
        read_into_spare(&file, &mut head).ok()?;
        let want = Prefetched::used_in(&head).min(size).min(PREFETCH_MAX);
        if want > head.len() && head.len() == first {
            head.reserve_exact(want - head.len());
            read_into_spare(&file, &mut head).ok()?;
        }
        Some(Prefetched { file, meta, head })
    }

    /// The bytes in use, as the header read says (0 if it says nothing
    /// sensible).
    pub(crate) fn used(&self) -> usize {
        Prefetched::used_in(&self.head)
    }

    fn used_in(head: &[u8]) -> usize {
        head.get(..4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .and_then(|used| usize::try_from(used).ok())
            .unwrap_or(0)
    }
}

/// How much to read of a file at first, learned from the files read before
/// it: a directory's files of one kind hold about the same (each worker
/// writes the same metrics), so reading as much as the last one of its kind
/// used saves a second read per file. 4,000 files of which a quarter are
/// histograms a few pages long cost 1,000 fewer system calls.
#[derive(Debug, Default)]
pub(crate) struct ReadGuess {
    last_used: Vec<(MetricKind, usize)>,
}

impl ReadGuess {
    /// How much to read first of a file of `kind`.
    pub(crate) fn first_read(&self, kind: MetricKind) -> usize {
        self.last_used
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(FIRST_READ, |&(_, used)| used)
    }

    /// Learns that a file of `kind` used `used` bytes.
    pub(crate) fn learn(&mut self, kind: MetricKind, used: usize) {
        match self.last_used.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, last)) => *last = used,
            None => self.last_used.push((kind, used)),
        }
    }
}

/// Reads the file's bytes from offset `buf.len()` on into the spare
/// capacity of `buf` (stopping early only at the end of the file), without
/// zero-filling it first.
fn read_into_spare(file: &File, buf: &mut Vec<u8>) -> std::io::Result<()> {
    while buf.len() < buf.capacity() {
        let offset = buf.len() as u64;
        match rustix::io::pread(file, rustix::buffer::spare_capacity(buf), offset) {
            Ok(0) => break,
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
