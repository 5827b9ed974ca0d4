//! One file as a collector tracks it across scrapes.
//!
//! Files are append-only: a file seen before is parsed only from where the
//! last parse stopped, and each entry is kept as a key id (see
//! [`crate::keys`]) and the offset of its value. Two ways to get at the bytes:
//!
//! * **mapped**: from its second collection on (see the collector's
//!   `decide_maps`), the file is mapped read-only once ([`ReadMap`]); a scrape
//!   reads the header's `used` and the values with plain loads, no system
//!   call, and only new entries are copied out and parsed. The map is
//!   replaced when `used` outgrows it. A file shrunk under the map is caught
//!   by the SIGBUS guard and reported, never a crash.
//! * **read**: the used bytes are read with `pread` (a file's first
//!   collection; every collection when maps are off, or past the limit on
//!   maps), parsing as they arrive, and the values are kept per entry.
//!
//! Either way a file costs bounded time and memory: parsing stops at the
//! first bad entry, so a header claiming gigabytes in use in a sparse file
//! costs one small read, and a key longer than [`MAX_KEY_LEN`] is bad.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use multiprom_format::layout::{self, HEADER_LEN};
use multiprom_format::read_map::ReadMap;
use multiprom_format::{open_for_read, FileIdentity, FileName, ParseError, ReadErrorKind};

use crate::intern::Interner;
use crate::keys::KeyTable;
use crate::stamp::FileStamp;
use mapped::map_len;

mod entry;
mod key_hints;
mod mapped;
mod pread;
mod prefetch;
mod values;

pub(crate) use entry::EntryRef;
pub(crate) use key_hints::KeyHints;
pub(crate) use prefetch::{Prefetched, ReadGuess};

/// The collector's tables and buffers a refresh parses with: what every
/// step of reading a file shares, passed as one.
#[derive(Debug)]
pub(crate) struct ParseContext<'a> {
    /// Each distinct key, decoded once.
    pub keys: &'a mut KeyTable,
    /// Names and label sets, shared between keys.
    pub interner: &'a mut Interner,
    /// The last file of each kind's keys, to compare with.
    pub hints: &'a mut KeyHints,
    /// The read buffer, kept between files.
    pub scratch: &'a mut Vec<u8>,
}

/// How long a file may stay as a writer leaves it while creating it (0 bytes,
/// or sized with `used` = 0) before it is reported as bad, counted from its
/// last modification (or from when the collector first saw it like this,
/// whichever is earlier, in case its clock is off). prometheus_client
/// creates a file, sizes it and writes its header within microseconds; a
/// file that stays like this had its writer killed in between.
pub(crate) const CREATION_GRACE: Duration = Duration::from_secs(10);

/// The largest file mapped or read (4 GiB: entry offsets are 32-bit).
const MAX_FILE_SIZE: u64 = u32::MAX as u64;

/// How a file's bytes are reached.
#[derive(Debug)]
enum Access {
    /// Not open (new, or after a problem).
    Closed,
    /// Mapped; values are read from the map at merge time.
    Mapped(ReadMap),
    /// Read with `pread`; `values` holds each entry's value and timestamp
    /// from the last read.
    Read { values: Vec<(f64, f64)> },
}

/// What a refresh found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refreshed {
    /// Same entries as before (values may have changed).
    Unchanged,
    /// Entries were added, or the file was parsed afresh.
    Changed,
}

/// A tracked file.
#[derive(Debug)]
pub(crate) struct TrackedFile {
    pub name: FileName,
    /// Device and inode of the file the entries were parsed from.
    identity: Option<FileIdentity>,
    access: Access,
    /// Bytes in use when last looked at.
    pub used: u64,
    /// File size when last opened.
    pub file_size: u64,
    /// Where parsing continues.
    parsed_up_to: usize,
    pub entries: Vec<EntryRef>,
    /// Since when the file has looked like one being created.
    creating_since: Option<Instant>,
    /// Something touched the file (an inotify event, a resync): look at it
    /// again before trusting the map.
    suspect: bool,
    /// Identity, size, modification and change times when last opened.
    stamp: Option<FileStamp>,
    /// Whether the file's writer is gone, so its contents cannot change
    /// until something opens or touches it (see `DirCollector::settle_exited_writers`).
    pub settled: Settled,
    /// The collection in which its writer was last seen gone (the file
    /// going from [`Settled::No`] to [`Settled::WriterGone`]): a file that
    /// settles again after an event is told apart from one that stayed
    /// settled.
    pub writer_gone_in: u64,
    /// Bumped whenever something may have changed the file or its
    /// companions (an event, a resync, a reset): what a companion kept open
    /// between scrapes checks before it is trusted.
    changes: u64,
    /// When the file was first found, or last opened, changed or replaced
    /// as far as events and looks tell: whether its writer is gone is only
    /// answered from a look at the processes taken after this.
    last_event: Instant,
    /// When this collector last opened the file itself: the watch reports
    /// its own opens too, and those are no writer's.
    own_open_at: Option<Instant>,
}

/// Whether a file can still change under its map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settled {
    /// Its writer may still write to it: read it on every collection.
    No,
    /// Its writer is gone: once its values are read whole, it is settled.
    WriterGone,
    /// Its writer is gone and its values, as of the plan of generation
    /// `plan`, are in the collector's value buffer since collection
    /// `since`: it need not be looked at again until an event names it.
    Yes {
        /// The generation of the plan its values were gathered for.
        plan: u64,
        /// The collection that gathered them.
        since: u64,
    },
}

impl TrackedFile {
    pub(crate) fn new(name: FileName) -> Self {
        TrackedFile {
            name,
            identity: None,
            access: Access::Closed,
            used: 0,
            file_size: 0,
            parsed_up_to: HEADER_LEN,
            entries: Vec::new(),
            creating_since: None,
            suspect: false,
            stamp: None,
            settled: Settled::No,
            writer_gone_in: 0,
            changes: 0,
            last_event: Instant::now(),
            own_open_at: None,
        }
    }

    /// Marks the file as touched if `stat` shows it changed since it was
    /// last opened (for when no inotify events say so).
    pub(crate) fn touch_if_changed(&mut self, path: &Path) {
        let now = FileStamp::of(path);
        if now.is_none() || now != self.stamp {
            self.suspect = true;
            self.last_event = Instant::now();
        }
        self.settled = Settled::No;
        self.changes += 1;
    }

    /// Marks the file as touched: the next refresh reopens it, remaps it at
    /// its current size and checks that the entries parsed so far are still
    /// where they were (else parses it afresh).
    pub(crate) fn touched(&mut self) {
        self.suspect = true;
        self.last_event = Instant::now();
        self.settled = Settled::No;
        self.changes += 1;
    }

    /// Marks the file as opened by someone: a writer may be back (a new
    /// process with the pid of the one that wrote it), so it is read again.
    pub(crate) fn opened(&mut self) {
        self.last_event = Instant::now();
        self.settled = Settled::No;
        self.changes += 1;
    }

    /// Whether this collector opened the file itself at or after `at`.
    pub(crate) fn opened_by_us_since(&self, at: Instant) -> bool {
        self.own_open_at.is_some_and(|own| own >= at)
    }

    /// Marks the file as opened, by this collector perhaps: it is read
    /// again, but what is known of its writer stands (the caller asks for a
    /// new look at the processes, in case someone else opened it too).
    pub(crate) fn opened_perhaps_by_us(&mut self) {
        self.settled = Settled::No;
        self.changes += 1;
    }

    /// Lets a settled file be read again: a process holds it once more.
    pub(crate) fn unsettle(&mut self) {
        self.settled = Settled::No;
        self.changes += 1;
    }

    /// The file the entries were parsed from, if it was opened.
    pub(crate) fn identity(&self) -> Option<FileIdentity> {
        self.identity
    }

    /// See the field: when something last happened to the file.
    pub(crate) fn last_event(&self) -> Instant {
        self.last_event
    }

    /// How many times something may have changed the file or its
    /// companions: unchanged, a companion looked at before is as it was
    /// then, or grown by its writer.
    pub(crate) fn changes(&self) -> u64 {
        self.changes
    }

    /// Whether the file's contents, and its values in the value buffer of
    /// the plan of `generation`, are as they were at the last collection.
    pub(crate) fn is_settled(&self, generation: u64) -> bool {
        self.settled_since(generation).is_some()
    }

    /// The collection since which the file is settled, if it is, for the
    /// plan of `generation`.
    pub(crate) fn settled_since(&self, generation: u64) -> Option<u64> {
        match self.settled {
            Settled::Yes { plan, since } if plan == generation && !self.suspect => Some(since),
            _ => None,
        }
    }

    /// Whether the last refresh read the file (through a map or `pread`)
    /// without trouble: not new, not reset after a problem.
    pub(crate) fn was_read(&self) -> bool {
        !matches!(self.access, Access::Closed)
    }

    /// Whether the file is mapped (and so holds a map count).
    pub(crate) fn is_mapped(&self) -> bool {
        matches!(self.access, Access::Mapped(_))
    }

    /// Whether every entry parsed so far still holds its key where it was:
    /// its length field and key bytes are compared with the key table's
    /// copy of the key (the table keeps each distinct key once, so this
    /// costs no memory per file). `copy(offset, len, out)` appends the
    /// file's bytes at `offset`.
    fn entries_intact(
        &self,
        mut copy: impl FnMut(usize, usize, &mut Vec<u8>) -> bool,
        keys: &KeyTable,
        buf: &mut Vec<u8>,
    ) -> bool {
        self.entries.iter().all(|entry| {
            let raw = keys.raw(entry.key);
            let framed = 4 + raw.len() + layout::pad_len(raw.len());
            let Some(start) = (entry.value_at as usize).checked_sub(framed) else {
                return false;
            };
            buf.clear();
            copy(start, 4 + raw.len(), buf)
                && buf.get(..4) == Some(&(raw.len() as u32).to_le_bytes()[..])
                && buf.get(4..) == Some(raw)
        })
    }

    /// Forgets the entries parsed, keeping the file open.
    fn forget_entries(&mut self, keys: &mut KeyTable) {
        keys.release(self.entries.iter().map(|e| e.key));
        self.entries.clear();
        self.parsed_up_to = HEADER_LEN;
    }

    /// Forgets everything parsed, giving the keys back.
    pub(crate) fn reset(&mut self, keys: &mut KeyTable) {
        keys.release(self.entries.iter().map(|e| e.key));
        self.entries = Vec::new();
        self.parsed_up_to = HEADER_LEN;
        self.identity = None;
        self.access = Access::Closed;
        self.used = 0;
        self.file_size = 0;
        self.settled = Settled::No;
        self.changes += 1;
    }

    /// Brings the entries up to date with the file at `path`. `map` says
    /// whether it may be mapped (the caller counts maps and has checked the
    /// SIGBUS guard). On a problem everything parsed is forgotten and the
    /// file is closed, so the next refresh starts afresh.
    pub(crate) fn refresh(
        &mut self,
        path: &Path,
        map: bool,
        ctx: &mut ParseContext<'_>,
        now: Instant,
        prefetched: Option<Prefetched>,
    ) -> Result<Refreshed, ParseError> {
        let result = match &self.access {
            Access::Mapped(_) if map && !self.suspect => self.refresh_mapped(path, false, ctx),
            _ => {
                self.suspect = false;
                self.reopen(path, map, ctx, prefetched)
            }
        };
        match result {
            Ok(Some(refreshed)) => {
                self.creating_since = None;
                Ok(refreshed)
            }
            // Being created: empty for now, bad if it stays so.
            Ok(None) => {
                let since = *self.creating_since.get_or_insert(now);
                let modified_long_ago = std::fs::metadata(path)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|m| SystemTime::now().duration_since(m).ok())
                    .is_some_and(|age| age >= CREATION_GRACE);
                if modified_long_ago || now.saturating_duration_since(since) >= CREATION_GRACE {
                    let kind = if self.file_size == 0 {
                        ReadErrorKind::Empty
                    } else {
                        ReadErrorKind::HeaderNotWritten
                    };
                    self.reset(ctx.keys);
                    return Err(ParseError::new(0, kind));
                }
                let had = !self.entries.is_empty();
                self.reset(ctx.keys);
                Ok(if had {
                    Refreshed::Changed
                } else {
                    Refreshed::Unchanged
                })
            }
            Err(trouble) => {
                self.creating_since = None;
                self.reset(ctx.keys);
                Err(trouble)
            }
        }
    }

    /// Opens the file and parses it, from where parsing stopped if it is the
    /// same file (same inode, not shrunk), else from scratch.
    fn reopen(
        &mut self,
        path: &Path,
        map: bool,
        ctx: &mut ParseContext<'_>,
        prefetched: Option<Prefetched>,
    ) -> Result<Option<Refreshed>, ParseError> {
        self.own_open_at = Some(Instant::now());
        let (file, meta, head) = match prefetched {
            Some(Prefetched { file, meta, head }) => (file, meta, Some(head)),
            None => {
                let (file, meta) =
                    open_for_read(path).map_err(|e| ParseError::new(e.offset, e.kind))?;
                (file, meta, None)
            }
        };
        let identity = FileIdentity::from_metadata(&meta);
        let size = meta.len();
        self.stamp = Some(FileStamp::from_metadata(&meta));
        let mut changed = false;
        if self.identity != Some(identity) {
            changed |= !self.entries.is_empty();
            self.reset(ctx.keys);
            self.identity = Some(identity);
            // Another file under the name: another writer, perhaps.
            self.last_event = Instant::now();
        }
        self.file_size = size;
        if size == 0 {
            return Ok(None);
        }
        if size < HEADER_LEN as u64 {
            return Err(ParseError::new(0, ReadErrorKind::TooShort { size }));
        }
        if size > MAX_FILE_SIZE {
            return Err(ParseError::new(0, ReadErrorKind::TooLarge { size }));
        }
        if map {
            let mapped = ReadMap::new(&file, map_len(&file, size))
                .map_err(|e| ParseError::new(0, ReadErrorKind::Io(e.into())))?;
            drop(file);
            // The same file (inode) as before, but it may have been rewritten
            // in place: keep what was parsed only if it is still there.
            let intact = mapped
                .read(|view| {
                    self.entries_intact(
                        |at, len, out| view.copy_to(at, len, out),
                        ctx.keys,
                        ctx.scratch,
                    )
                })
                .map_err(|_| shrunk())?;
            if !intact {
                changed |= !self.entries.is_empty();
                self.forget_entries(ctx.keys);
            }
            self.access = Access::Mapped(mapped);
            let refreshed = self.refresh_mapped(path, true, ctx)?;
            return Ok(refreshed.map(|r| if changed { Refreshed::Changed } else { r }));
        }
        let refreshed = self.read_with_pread(&file, size, ctx, head)?;
        Ok(refreshed.map(|r| if changed { Refreshed::Changed } else { r }))
    }
}

fn shrunk() -> ParseError {
    ParseError::new(0, ReadErrorKind::ShrankUnderMap)
}

/// Checks a non-zero `used` against a file of `size` bytes.
fn check_used(used: i64, size: u64) -> Result<u64, ParseError> {
    if used < HEADER_LEN as i64 {
        return Err(ParseError::new(0, ReadErrorKind::UsedTooSmall { used }));
    }
    let used = used as u64;
    if used > size {
        return Err(ParseError::new(
            0,
            ReadErrorKind::UsedPastEnd { used, size },
        ));
    }
    if !used.is_multiple_of(8) {
        return Err(ParseError::new(
            0,
            ReadErrorKind::UsedNotOnBoundary { used },
        ));
    }
    Ok(used)
}
