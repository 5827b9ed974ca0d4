//! The read way to a file's bytes: the used bytes read with `pread` in
//! growing chunks, parsed as they arrive, every value kept.

use std::fs::File;

use multiprom_format::layout::{self, HEADER_LEN};
use multiprom_format::{frame_entry, EntryIter, ParseError, ReadErrorKind};

use super::entry::accept;
use super::key_hints::hinted_entry;
use super::{check_used, Access, EntryRef, ParseContext, Refreshed, TrackedFile};

/// How much of a file one `pread` asks for at first: one page, which holds
/// the header and a small file whole. More is read only up to the header's
/// `used` (prometheus_client's files are 64 KiB or more from the start, and
/// most of that is zeros), doubling while the entries read are good.
pub(super) const FIRST_READ: usize = 4096;

impl TrackedFile {
    /// The read path: `pread` the used bytes in growing chunks, parsing as
    /// they arrive, and keep every entry's value.
    pub(super) fn read_with_pread(
        &mut self,
        file: &File,
        size: u64,
        ctx: &mut ParseContext<'_>,
        head: Option<Vec<u8>>,
    ) -> Result<Option<Refreshed>, ParseError> {
        let ParseContext {
            keys,
            interner,
            hints,
            scratch,
        } = ctx;
        let got = match head {
            // Read ahead by another thread (see `Prefetched`).
            Some(head) => {
                **scratch = head;
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
            return Err(ParseError::new(
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
        let used = match check_used(used, size) {
            // A writer grows its file, then appends past the old end, then
            // moves `used`: past the size seen at open is growth between
            // that look and this read, unless the file is no bigger now.
            Err(past) if used > 0 && used as u64 > size => {
                let now = file.metadata().map_or(size, |meta| meta.len());
                check_used(used, now).map_err(|_| past)?
            }
            checked => checked?,
        } as usize;
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
                        failed = Some(e);
                        break;
                    }
                    None => break,
                }
            }
            if let Some(trouble) = failed {
                // An entry cut off by the end of what was read is not bad
                // yet: read more and try again. So is a key longer than
                // what was read (the walk judged it by that length) that
                // fits the file: its length is checked against the limit
                // below before any more is read.
                let incomplete = match trouble.kind {
                    ReadErrorKind::EntryPastUsed { .. }
                    | ReadErrorKind::UsedNotOnBoundary { .. } => true,
                    ReadErrorKind::BadKeyLength { len } => {
                        usize::try_from(len).is_ok_and(|len| len <= used)
                    }
                    _ => false,
                } && have < used;
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
                if let Err(problem) = frame_entry(pos, len, used) {
                    keys.release(parsed.iter().map(|e| e.key));
                    return Err(problem);
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
                return Err(ParseError::new(
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
}

pub(super) fn read_fully(file: &File, buf: &mut [u8], offset: u64) -> Result<usize, ParseError> {
    use std::os::unix::fs::FileExt;
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(ParseError::new(
                    offset + got as u64,
                    ReadErrorKind::Io(e.into()),
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
