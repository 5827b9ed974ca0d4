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

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use multiprom_format::layout::{self, HEADER_LEN, MAX_KEY_LEN};
use multiprom_format::read_map::{MapView, ReadMap};
use multiprom_format::{open_for_read, EntryIter, FileName, MetricKind, OpenDir, ReadErrorKind};

use crate::intern::Interner;
use crate::keys::{KeyId, KeyTable};
use crate::plan::Op;
use crate::problem::ProblemKind;

/// How long a file may stay as a writer leaves it while creating it (0 bytes,
/// or sized with `used` = 0) before it is reported as bad, counted from its
/// last modification (or from when the collector first saw it like this,
/// whichever is earlier, in case its clock is off). prometheus_client
/// creates a file, sizes it and writes its header within microseconds; a
/// file that stays like this had its writer killed in between.
pub(crate) const CREATION_GRACE: Duration = Duration::from_secs(10);

/// The largest file mapped or read (4 GiB: entry offsets are 32-bit).
const MAX_FILE_SIZE: u64 = u32::MAX as u64;

/// How much of a file one `pread` asks for at first: one page, which holds
/// the header and a small file whole. More is read only up to the header's
/// `used` (prometheus_client's files are 64 KiB or more from the start, and
/// most of that is zeros), doubling while the entries read are good.
const FIRST_READ: usize = 4096;

/// One entry: its key and where its value is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EntryRef {
    pub key: KeyId,
    pub value_at: u32,
}

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

/// Why a file contributes nothing this scrape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Trouble {
    pub offset: u64,
    pub kind: ProblemKind,
}

impl Trouble {
    fn read(offset: u64, kind: ReadErrorKind) -> Self {
        Trouble {
            offset,
            kind: ProblemKind::Read(kind),
        }
    }
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
    identity: Option<(u64, u64)>,
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
    /// Inode, size, modification and change times when last opened.
    stamp: Option<Stamp>,
    /// Whether the file's writer is gone, so its contents cannot change
    /// until something opens or touches it (see `DirCollector::settle_exited_writers`).
    pub settled: Settled,
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

/// What `stat` says of a file, to tell whether it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            ino: meta.ino(),
            size: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
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
        }
    }

    /// Marks the file as touched if `stat` shows it changed since it was
    /// last opened (for when no inotify events say so).
    pub(crate) fn touch_if_changed(&mut self, path: &Path) {
        let now = std::fs::metadata(path).ok().map(|m| Stamp::of(&m));
        if now.is_none() || now != self.stamp {
            self.suspect = true;
        }
        self.settled = Settled::No;
    }

    /// Marks the file as touched: the next refresh reopens it, remaps it at
    /// its current size and checks that the entries parsed so far are still
    /// where they were (else parses it afresh).
    pub(crate) fn touched(&mut self) {
        self.suspect = true;
        self.settled = Settled::No;
    }

    /// Marks the file as opened by someone: a writer may be back (a new
    /// process with the pid of the one that wrote it), so it is read again.
    pub(crate) fn opened(&mut self) {
        self.settled = Settled::No;
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
    }

    /// Brings the entries up to date with the file at `path`. `map` says
    /// whether it may be mapped (the caller counts maps and has checked the
    /// SIGBUS guard). On a problem everything parsed is forgotten and the
    /// file is closed, so the next refresh starts afresh.
    // The collector's shared tables and buffers are passed one by one, as
    // to every step below, rather than bundled for this one function.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn refresh(
        &mut self,
        path: &Path,
        map: bool,
        keys: &mut KeyTable,
        interner: &mut Interner,
        hints: &mut KeyHints,
        scratch: &mut Vec<u8>,
        now: Instant,
        prefetched: Option<Prefetched>,
    ) -> Result<Refreshed, Trouble> {
        let result = match &self.access {
            Access::Mapped(_) if map && !self.suspect => {
                self.refresh_mapped(path, false, keys, interner, hints, scratch)
            }
            _ => {
                self.suspect = false;
                self.reopen(path, map, keys, interner, hints, scratch, prefetched)
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
                    self.reset(keys);
                    return Err(Trouble::read(0, kind));
                }
                let had = !self.entries.is_empty();
                self.reset(keys);
                Ok(if had {
                    Refreshed::Changed
                } else {
                    Refreshed::Unchanged
                })
            }
            Err(trouble) => {
                self.creating_since = None;
                self.reset(keys);
                Err(trouble)
            }
        }
    }

    /// Opens the file and parses it, from where parsing stopped if it is the
    /// same file (same inode, not shrunk), else from scratch.
    #[allow(clippy::too_many_arguments)]
    fn reopen(
        &mut self,
        path: &Path,
        map: bool,
        keys: &mut KeyTable,
        interner: &mut Interner,
        hints: &mut KeyHints,
        scratch: &mut Vec<u8>,
        prefetched: Option<Prefetched>,
    ) -> Result<Option<Refreshed>, Trouble> {
        let (file, meta, head) = match prefetched {
            Some(Prefetched { file, meta, head }) => (file, meta, Some(head)),
            None => {
                let (file, meta) =
                    open_for_read(path).map_err(|e| Trouble::read(e.offset, e.kind))?;
                (file, meta, None)
            }
        };
        let identity = (meta.dev(), meta.ino());
        let size = meta.len();
        self.stamp = Some(Stamp::of(&meta));
        let mut changed = false;
        if self.identity != Some(identity) {
            changed |= !self.entries.is_empty();
            self.reset(keys);
            self.identity = Some(identity);
        }
        self.file_size = size;
        if size == 0 {
            return Ok(None);
        }
        if size < HEADER_LEN as u64 {
            return Err(Trouble::read(0, ReadErrorKind::TooShort { size }));
        }
        if size > MAX_FILE_SIZE {
            return Err(Trouble::read(
                0,
                ReadErrorKind::Io(format!("file is {size} bytes, over the 4 GiB limit")),
            ));
        }
        if map {
            let mapped = ReadMap::new(&file, map_len(&file, size))
                .map_err(|e| Trouble::read(0, ReadErrorKind::Io(e.to_string())))?;
            drop(file);
            // The same file (inode) as before, but it may have been rewritten
            // in place: keep what was parsed only if it is still there.
            let intact = mapped
                .read(|view| {
                    self.entries_intact(|at, len, out| view.copy_to(at, len, out), keys, scratch)
                })
                .map_err(|_| shrunk())?;
            if !intact {
                changed |= !self.entries.is_empty();
                self.forget_entries(keys);
            }
            self.access = Access::Mapped(mapped);
            let refreshed = self.refresh_mapped(path, true, keys, interner, hints, scratch)?;
            return Ok(refreshed.map(|r| if changed { Refreshed::Changed } else { r }));
        }
        let refreshed = self.read_with_pread(&file, size, keys, interner, hints, scratch, head)?;
        Ok(refreshed.map(|r| if changed { Refreshed::Changed } else { r }))
    }

    /// The mapped path: read `used`, parse what is new, remap if the file
    /// grew past the map (unless it was `just_mapped` at its full size).
    fn refresh_mapped(
        &mut self,
        path: &Path,
        just_mapped: bool,
        keys: &mut KeyTable,
        interner: &mut Interner,
        hints: &mut KeyHints,
        scratch: &mut Vec<u8>,
    ) -> Result<Option<Refreshed>, Trouble> {
        let Access::Mapped(map) = &self.access else {
            return Err(Trouble::read(0, ReadErrorKind::Io("not mapped".into())));
        };
        let map_len = map.len() as u64;
        let used = map
            .read(|view| view.u32_acquire(0))
            .map_err(|_| shrunk())?
            .unwrap_or(0);
        // Python reads `used` as a signed 32-bit integer.
        let used = i64::from(used as i32);
        if used == 0 {
            return Ok(None);
        }
        if used > map_len as i64 && !just_mapped {
            // Grown since mapped (writers grow by extending the file):
            // map it again at its new size.
            self.access = Access::Closed;
            return self.reopen(path, true, keys, interner, hints, scratch, None);
        }
        let used = check_used(used, map_len)?;
        if (used as usize) < self.parsed_up_to {
            // Shrunk in place: someone rewrote the file. Start over.
            let map = std::mem::replace(&mut self.access, Access::Closed);
            keys.release(self.entries.iter().map(|e| e.key));
            self.entries.clear();
            self.parsed_up_to = HEADER_LEN;
            self.access = map;
        }
        self.used = used;
        if used as usize == self.parsed_up_to {
            return Ok(Some(Refreshed::Unchanged));
        }
        let Access::Mapped(map) = &self.access else {
            return Ok(Some(Refreshed::Unchanged));
        };
        let kind = self.name.kind();
        let from = self.parsed_up_to;
        let mut parsed = Vec::new();
        let outcome = map
            .read(|view| {
                parse_mapped(
                    view,
                    from,
                    used as usize,
                    kind,
                    keys,
                    interner,
                    scratch,
                    &mut parsed,
                )
            })
            .map_err(|_| shrunk());
        match outcome {
            Ok(Ok(end)) => {
                self.parsed_up_to = end;
                self.entries.extend(parsed);
                Ok(Some(Refreshed::Changed))
            }
            Ok(Err(trouble)) | Err(trouble) => {
                keys.release(parsed.iter().map(|e| e.key));
                Err(trouble)
            }
        }
    }

    /// The read path: `pread` the used bytes in growing chunks, parsing as
    /// they arrive, and keep every entry's value.
    #[allow(clippy::too_many_arguments)]
    fn read_with_pread(
        &mut self,
        file: &File,
        size: u64,
        keys: &mut KeyTable,
        interner: &mut Interner,
        hints: &mut KeyHints,
        scratch: &mut Vec<u8>,
        head: Option<Vec<u8>>,
    ) -> Result<Option<Refreshed>, Trouble> {
        let got = match head {
            // Read ahead by another thread (see `Prefetched`).
            Some(head) => {
                *scratch = head;
                scratch.len()
            }
            None => {
                // The header, and as much as the last scrape needed, in one read.
                let first = (self.used as usize)
                    .max(FIRST_READ)
                    .min(size as usize)
                    .max(HEADER_LEN);
                scratch.clear();
                scratch.resize(first, 0);
                let got = read_fully(file, &mut scratch[..], 0)?;
                scratch.truncate(got);
                got
            }
        };
        let Some(header) = scratch.get(..4) else {
            return Err(Trouble::read(
                0,
                ReadErrorKind::Truncated {
                    wanted: HEADER_LEN as u64,
                    got: got as u64,
                },
            ));
        };
        let used = i64::from(i32::from_le_bytes([
            header[0], header[1], header[2], header[3],
        ]));
        if used == 0 {
            return Ok(None);
        }
        let used = check_used(used, size)? as usize;
        let bytes: &[u8] = scratch;
        let intact = used >= self.parsed_up_to
            && self.entries_intact(
                |at, len, out| match bytes.get(at..at + len) {
                    Some(b) => {
                        out.extend_from_slice(b);
                        true
                    }
                    None => false,
                },
                keys,
                &mut Vec::new(),
            );
        if !intact {
            self.forget_entries(keys);
        }
        let kind = self.name.kind();
        let before = self.entries.len();
        let mut pos = self.parsed_up_to;
        let hint = hints.of(kind);
        let mut hinted = 0;
        let mut parsed = Vec::with_capacity(hint.len().saturating_sub(before));
        // Parse what has arrived; read more only while entries are good.
        loop {
            let have = scratch.len().min(used);
            let bytes = &scratch[..have];
            let mut failed = None;
            while pos < have {
                if let Some(entry) = hinted_entry(bytes, pos, hint, &mut hinted, keys) {
                    pos = entry.value_at as usize + layout::VALUE_PAIR_LEN;
                    parsed.push(entry);
                    continue;
                }
                let mut iter = EntryIter::new(bytes, pos, have);
                match iter.next() {
                    Some(Ok(raw)) => {
                        match accept(raw.key.as_bytes(), raw.offset, kind, keys, interner) {
                            Ok(key) => parsed.push(EntryRef {
                                key,
                                value_at: raw.value_offset() as u32,
                            }),
                            Err(trouble) => {
                                failed = Some(trouble);
                                break;
                            }
                        }
                        pos = iter.position();
                    }
                    Some(Err(e)) => {
                        failed = Some(Trouble::read(e.offset, e.kind));
                        break;
                    }
                    None => break,
                }
            }
            if let Some(trouble) = failed {
                // An entry cut off by the end of what was read is not bad
                // yet: read more and try again.
                let incomplete = matches!(
                    trouble.kind,
                    ProblemKind::Read(
                        ReadErrorKind::EntryPastUsed { .. }
                            | ReadErrorKind::UsedNotOnBoundary { .. }
                    )
                ) && have < used;
                if !incomplete {
                    keys.release(parsed.iter().map(|e| e.key));
                    return Err(trouble);
                }
            }
            if pos >= used || have >= used {
                break;
            }
            // The entry at `pos` runs past what was read: refuse a length
            // over the limit before reading any more of it.
            if let Some(len) = scratch.get(pos..pos + 4) {
                let key_len = i32::from_le_bytes([len[0], len[1], len[2], len[3]]);
                if key_len as usize > MAX_KEY_LEN {
                    keys.release(parsed.iter().map(|e| e.key));
                    return Err(Trouble::read(
                        pos as u64,
                        ReadErrorKind::BadKeyLength {
                            len: i64::from(key_len),
                        },
                    ));
                }
            }
            // Read the next chunk, doubling each time so a big file costs
            // few reads, never past `used`.
            let want = (scratch.len() * 2).max(pos + FIRST_READ).min(used);
            let start = scratch.len();
            scratch.resize(want, 0);
            let got = read_fully(file, &mut scratch[start..], start as u64)?;
            scratch.truncate(start + got);
            if got == 0 {
                keys.release(parsed.iter().map(|e| e.key));
                return Err(Trouble::read(
                    start as u64,
                    ReadErrorKind::Truncated {
                        wanted: used as u64,
                        got: start as u64,
                    },
                ));
            }
        }
        self.parsed_up_to = pos;
        self.used = used as u64;
        if self.entries.is_empty() {
            self.entries = parsed;
        } else {
            self.entries.extend(parsed);
        }
        if before == 0 {
            hints.remember(kind, &self.entries);
        }
        let values = self
            .entries
            .iter()
            .map(|e| {
                let at = e.value_at as usize;
                (read_f64(scratch, at), read_f64(scratch, at + 8))
            })
            .collect();
        self.access = Access::Read { values };
        Ok(Some(if self.entries.len() != before {
            Refreshed::Changed
        } else {
            Refreshed::Unchanged
        }))
    }

    /// Copies the values (and, for most-recent gauges, the timestamps) of
    /// this file's entries into `out`, one per entry, as `ops` (the plan's
    /// operations for them) need. `Err` if the file shrank under its map.
    /// Every slot of `out` is written (zero where the file has no entry for
    /// it), so the caller need not clear `out` first.
    pub(crate) fn gather_values(&self, ops: &[Op], out: &mut [(f64, f64)]) -> Result<(), Trouble> {
        let written = match &self.access {
            Access::Mapped(map) => map
                .read(|view| {
                    let mut written = 0;
                    for ((entry, &op), slot) in self.entries.iter().zip(ops).zip(out.iter_mut()) {
                        let at = entry.value_at as usize;
                        let value = view.f64_at(at).unwrap_or(0.0);
                        let timestamp = match op {
                            Op::MostRecent(_) => view.f64_at(at + 8).unwrap_or(0.0),
                            _ => 0.0,
                        };
                        *slot = (value, timestamp);
                        written += 1;
                    }
                    written
                })
                .map_err(|_| shrunk())?,
            Access::Read { values } => {
                for (slot, &value) in out.iter_mut().zip(values) {
                    *slot = value;
                }
                values.len().min(out.len())
            }
            Access::Closed => 0,
        };
        out[written..].fill((0.0, 0.0));
        Ok(())
    }
}

impl TrackedFile {
    /// Copies the values of some of this file's entries into `values`:
    /// for each `pick`, the entry `pick - first_op` into `values[pick]`, as
    /// `ops[pick]` needs (the plan's operations and values, indexed alike).
    /// An entry the file no longer has reads as zero. `Err` if the file
    /// shrank under its map.
    pub(crate) fn gather_picked(
        &self,
        picks: &[u32],
        first_op: usize,
        ops: &[Op],
        values: &mut [(f64, f64)],
    ) -> Result<(), Trouble> {
        let entry = |pick: u32| (pick as usize).checked_sub(first_op);
        match &self.access {
            Access::Mapped(map) => map
                .read(|view| {
                    for &pick in picks {
                        let (Some(slot), Some(op)) =
                            (values.get_mut(pick as usize), ops.get(pick as usize))
                        else {
                            continue;
                        };
                        *slot = match entry(pick).and_then(|e| self.entries.get(e)) {
                            Some(entry) => {
                                let at = entry.value_at as usize;
                                let value = view.f64_at(at).unwrap_or(0.0);
                                let timestamp = match op {
                                    Op::MostRecent(_) => view.f64_at(at + 8).unwrap_or(0.0),
                                    _ => 0.0,
                                };
                                (value, timestamp)
                            }
                            None => (0.0, 0.0),
                        };
                    }
                })
                .map_err(|_| shrunk()),
            Access::Read { values: read } => {
                for &pick in picks {
                    if let Some(slot) = values.get_mut(pick as usize) {
                        *slot = entry(pick)
                            .and_then(|e| read.get(e))
                            .copied()
                            .unwrap_or((0.0, 0.0));
                    }
                }
                Ok(())
            }
            Access::Closed => {
                for &pick in picks {
                    if let Some(slot) = values.get_mut(pick as usize) {
                        *slot = (0.0, 0.0);
                    }
                }
                Ok(())
            }
        }
    }
}

fn shrunk() -> Trouble {
    Trouble::read(
        0,
        ReadErrorKind::Io("the file shrank under its memory map".into()),
    )
}

/// Checks a non-zero `used` against a file of `size` bytes.
fn check_used(used: i64, size: u64) -> Result<u64, Trouble> {
    if used < HEADER_LEN as i64 {
        return Err(Trouble::read(0, ReadErrorKind::UsedTooSmall { used }));
    }
    let used = used as u64;
    if used > size {
        return Err(Trouble::read(0, ReadErrorKind::UsedPastEnd { used, size }));
    }
    if !used.is_multiple_of(8) {
        return Err(Trouble::read(0, ReadErrorKind::UsedNotOnBoundary { used }));
    }
    Ok(used)
}

/// Parses entries `[from, used)` through a map, one entry at a time (its
/// length field first, so a damaged one costs nothing to reject). Returns
/// where parsing stopped (`used`) or the first problem.
#[allow(clippy::too_many_arguments)]
fn parse_mapped(
    view: &MapView<'_>,
    from: usize,
    used: usize,
    kind: MetricKind,
    keys: &mut KeyTable,
    interner: &mut Interner,
    scratch: &mut Vec<u8>,
    parsed: &mut Vec<EntryRef>,
) -> Result<usize, Trouble> {
    let mut pos = from;
    while pos < used {
        let key_len = match view.u32_acquire(pos) {
            Some(len) if pos + 4 <= used => len as i32,
            _ => {
                return Err(Trouble::read(
                    pos as u64,
                    ReadErrorKind::UsedNotOnBoundary { used: used as u64 },
                ))
            }
        };
        if key_len < 0 || key_len as usize > used || key_len as usize > MAX_KEY_LEN {
            return Err(Trouble::read(
                pos as u64,
                ReadErrorKind::BadKeyLength {
                    len: i64::from(key_len),
                },
            ));
        }
        let end = pos + layout::entry_len(key_len as usize);
        if end > used {
            return Err(Trouble::read(
                pos as u64,
                ReadErrorKind::EntryPastUsed {
                    end: end as u64,
                    used: used as u64,
                },
            ));
        }
        scratch.clear();
        if !view.copy_to(pos, end - pos, scratch) {
            return Err(shrunk());
        }
        let raw = match EntryIter::window(scratch, pos, end).next() {
            Some(Ok(raw)) => raw,
            Some(Err(e)) => return Err(Trouble::read(e.offset, e.kind)),
            None => {
                return Err(Trouble::read(
                    pos as u64,
                    ReadErrorKind::UsedNotOnBoundary { used: used as u64 },
                ))
            }
        };
        let key = accept(raw.key.as_bytes(), raw.offset, kind, keys, interner)?;
        parsed.push(EntryRef {
            key,
            value_at: raw.value_offset() as u32,
        });
        pos = end;
    }
    Ok(pos)
}

/// The keys of the last file of each kind parsed from its start, in file
/// order.
///
/// Every worker of a pool writes the same metrics, mostly in the same
/// order, so a file's entries usually sit at the offsets of the last file
/// of its kind and hold the very same key bytes. Comparing those bytes with
/// the key the table holds costs one `memcmp`, where looking the key up
/// costs a UTF-8 check, a hash and a probe of the table: the biggest share
/// of parsing a directory's files for the first time. A hint that does not
/// match costs that comparison at most, and the entry is then looked up as
/// without hints; a hint's key that was forgotten since (its id free or
/// reused) fails the comparison. Hints hold no references: the table may
/// forget their keys at any time.
#[derive(Debug, Default)]
pub(crate) struct KeyHints {
    by_kind: Vec<(MetricKind, Vec<EntryRef>)>,
}

impl KeyHints {
    /// The entries of the last file of `kind` parsed from its start.
    fn of(&self, kind: MetricKind) -> &[EntryRef] {
        self.by_kind
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(&[], |(_, entries)| entries)
    }

    /// Remembers `entries`, a file of `kind` parsed from its start.
    fn remember(&mut self, kind: MetricKind, entries: &[EntryRef]) {
        match self.by_kind.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, hint)) => {
                hint.clear();
                hint.extend_from_slice(entries);
            }
            None => self.by_kind.push((kind, entries.to_vec())),
        }
    }
}

/// The entry at `pos` of `bytes` (a file's bytes from its start), taking a
/// reference to its key, if it holds the key of the hint entry at the same
/// offset. `cursor` is where to look in `hint`; it only moves forward, as
/// `pos` does.
fn hinted_entry(
    bytes: &[u8],
    pos: usize,
    hint: &[EntryRef],
    cursor: &mut usize,
    keys: &mut KeyTable,
) -> Option<EntryRef> {
    loop {
        let entry = hint.get(*cursor)?;
        // A hint's entries are contiguous from the header on.
        let start = match cursor.checked_sub(1) {
            None => HEADER_LEN,
            Some(before) => hint[before].value_at as usize + layout::VALUE_PAIR_LEN,
        };
        if start > pos {
            return None;
        }
        *cursor += 1;
        if start < pos {
            continue;
        }
        let len = keys.raw(entry.key).len();
        let end = pos + layout::entry_len(len);
        let framed = bytes.get(pos..end)?;
        if len == 0 || framed[..4] != (len as u32).to_le_bytes() {
            return None;
        }
        return keys
            .acquire_same(entry.key, &framed[4..4 + len])
            .then(|| EntryRef {
                key: entry.key,
                value_at: layout::value_offset(pos, len) as u32,
            });
    }
}

/// Looks a raw key up (decoding it if new) and checks it suits a file of
/// `kind`; on a problem no reference is kept.
fn accept(
    raw: &[u8],
    offset: u64,
    kind: MetricKind,
    keys: &mut KeyTable,
    interner: &mut Interner,
) -> Result<KeyId, Trouble> {
    let id = keys
        .acquire(raw, interner)
        .map_err(|kind| Trouble::read(offset, kind))?;
    let info = keys.get(id);
    let problem = info.problem().or_else(|| {
        (kind == MetricKind::Histogram)
            .then(|| info.histogram_problem())
            .flatten()
    });
    if let Some(kind) = problem {
        keys.release([id]);
        return Err(Trouble { offset, kind });
    }
    Ok(id)
}

/// How much of a file of `size` bytes to map: the used bytes (read from the
/// header) rounded up to whole pages, plus one page to grow into, not the
/// whole file. prometheus_client's files are 64 KiB or more of which a few
/// kilobytes are used; where they are not sparse (tmpfs, the Rust writer's
/// zero-filled files), the kernel maps every cached page of a mapping it can
/// (fault-around), and a map of the whole file would show as that much RSS.
/// A file that grows past its map is mapped again.
fn map_len(file: &File, size: u64) -> usize {
    const PAGE: u64 = 4096;
    let mut header = [0u8; 4];
    let used = match read_fully(file, &mut header, 0) {
        Ok(4) => u64::try_from(i32::from_le_bytes(header)).unwrap_or(0),
        _ => 0,
    };
    let len = if used == 0 || used > size {
        // Being created, or damaged: the checks that follow say which.
        size
    } else {
        (used.div_ceil(PAGE) + 1) * PAGE
    };
    // `size` was checked against MAX_FILE_SIZE (4 GiB), which fits.
    usize::try_from(len.min(size)).unwrap_or(usize::MAX)
}

/// A file opened, and its first bytes read, ahead of its refresh by another
/// thread: the system calls and the copying out of the page cache overlap
/// with parsing the files before it.
#[derive(Debug)]
pub(crate) struct Prefetched {
    file: File,
    meta: std::fs::Metadata,
    head: Vec<u8>,
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

fn read_fully(file: &File, buf: &mut [u8], offset: u64) -> Result<usize, Trouble> {
    use std::os::unix::fs::FileExt;
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(Trouble::read(
                    offset + got as u64,
                    ReadErrorKind::Io(e.to_string()),
                ))
            }
        }
    }
    Ok(got)
}

fn read_f64(buf: &[u8], at: usize) -> f64 {
    buf.get(at..at + 8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map_or(0.0, f64::from_le_bytes)
}
