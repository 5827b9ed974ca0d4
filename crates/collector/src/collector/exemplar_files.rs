//! [`ExemplarFiles`]: what each entry of each exemplar file resolved to, so
//! a scrape resolves only the entries it has not seen.
//!
//! An entry stays where it was written (a file only grows, a record is
//! rewritten in place), so an entry is known by its offset. Its key is
//! compared too, byte for byte: a file replaced under the same path (a
//! compaction, a new process with a reused pid) can hold other keys at the
//! same offsets, and a comparison is cheaper than telling replaced files
//! apart by `stat`.

use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::sync::Arc;

use super::exemplar_series::{SeriesId, SeriesTable};

/// The resolved entries of the exemplar files read, by path.
#[derive(Debug, Default)]
pub(super) struct ExemplarFiles {
    files: foldhash::HashMap<Vec<u8>, ResolvedFile>,
    /// Counts the scrapes: a file not read in the last one is forgotten.
    scrape: u64,
}

/// One exemplar file's entries with their series, in file order.
#[derive(Debug, Default)]
struct ResolvedFile {
    entries: Vec<ResolvedEntry>,
    /// The scrape that last read it.
    read_in: u64,
}

#[derive(Debug)]
struct ResolvedEntry {
    offset: u64,
    /// Shared with the series table.
    key: Arc<str>,
    series: Option<SeriesId>,
}

impl ExemplarFiles {
    /// Starts a scrape.
    pub(super) fn begin(&mut self) {
        self.scrape += 1;
    }

    /// The entries of the exemplar file at `path`, read in this scrape, to
    /// resolve in file order.
    pub(super) fn file(&mut self, path: PathBuf) -> FileCursor<'_> {
        // By its bytes, as the file table keys paths (hashing a `Path`
        // walks its components); the path is the key, with no copy.
        let file = self
            .files
            .entry(path.into_os_string().into_vec())
            .or_default();
        file.read_in = self.scrape;
        FileCursor { file, at: 0 }
    }

    /// Ends a scrape: forgets the files it did not read (gone, bad, or of
    /// files no longer merged).
    pub(super) fn end(&mut self) {
        let scrape = self.scrape;
        self.files.retain(|_, file| file.read_in == scrape);
    }
}

/// One exemplar file's entries, resolved in file order.
#[derive(Debug)]
pub(super) struct FileCursor<'a> {
    file: &'a mut ResolvedFile,
    /// Where the next entry is looked for.
    at: usize,
}

impl FileCursor<'_> {
    /// The series of the entry at `offset` with `raw_key` (entries come in
    /// increasing offset order): from the last read when it had this entry,
    /// else resolved by `table`.
    pub(super) fn series(
        &mut self,
        offset: u64,
        raw_key: &str,
        table: &mut SeriesTable,
    ) -> Option<SeriesId> {
        let entries = &mut self.file.entries;
        // Entries left out of this read (being written) keep their place.
        while entries.get(self.at).is_some_and(|e| e.offset < offset) {
            self.at += 1;
        }
        let at = self.at;
        self.at += 1;
        match entries.get_mut(at) {
            Some(kept) if kept.offset == offset => {
                if *kept.key != *raw_key {
                    (kept.key, kept.series) = table.resolve_key(raw_key);
                }
                kept.series
            }
            _ => {
                let (key, series) = table.resolve_key(raw_key);
                entries.insert(
                    at,
                    ResolvedEntry {
                        offset,
                        key,
                        series,
                    },
                );
                series
            }
        }
    }
}
