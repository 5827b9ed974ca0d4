//! The mapped way to a file's bytes: `used` and new entries read through
//! the map, remapped when the file outgrows it.

use std::fs::File;
use std::path::Path;

use multiprom_format::layout::HEADER_LEN;
use multiprom_format::read_map::MapView;
use multiprom_format::{frame_entry, EntryIter, MetricKind, ParseError, ReadErrorKind};

use super::entry::accept;
use super::pread::read_fully;
use super::{check_used, shrunk, Access, EntryRef, ParseContext, Refreshed, TrackedFile};

impl TrackedFile {
    /// The mapped path: read `used`, parse what is new, remap if the file
    /// grew past the map (read it instead if it was `just_mapped`).
    pub(super) fn refresh_mapped(
        &mut self,
        path: &Path,
        just_mapped: bool,
        ctx: &mut ParseContext<'_>,
    ) -> Result<Option<Refreshed>, ParseError> {
        let Access::Mapped(map) = &self.access else {
            // Callers map the file first; one that is not mapped is opened
            // and mapped afresh rather than reported as damaged.
            return self.reopen(path, true, ctx, None);
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
        if used > map_len as i64 {
            self.access = Access::Closed;
            if !just_mapped {
                // Grown since mapped (writers grow by extending the file):
                // map it again at its new size.
                return self.reopen(path, true, ctx, None);
            }
            // Grown in the moment between reading `used` to size the map
            // and reading it again (a writer adding series in a burst):
            // not damage. Read this once; the next collection maps it.
            return self.reopen(path, false, ctx, None);
        }
        let used = check_used(used, map_len)?;
        if (used as usize) < self.parsed_up_to {
            // Shrunk in place: someone rewrote the file. Start over.
            let map = std::mem::replace(&mut self.access, Access::Closed);
            ctx.keys.release(self.entries.iter().map(|e| e.key));
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
            .read(|view| parse_mapped(view, from..used as usize, kind, ctx, &mut parsed))
            .map_err(|_| shrunk());
        match outcome {
            Ok(Ok(end)) => {
                self.parsed_up_to = end;
                self.entries.extend(parsed);
                Ok(Some(Refreshed::Changed))
            }
            Ok(Err(trouble)) | Err(trouble) => {
                ctx.keys.release(parsed.iter().map(|e| e.key));
                Err(trouble)
            }
        }
    }
}

/// Parses entries `[from, used)` through a map, one entry at a time (its
/// length field first, so a damaged one costs nothing to reject). Returns
/// where parsing stopped (`used`) or the first problem.
fn parse_mapped(
    view: &MapView<'_>,
    range: std::ops::Range<usize>,
    kind: MetricKind,
    ctx: &mut ParseContext<'_>,
    parsed: &mut Vec<EntryRef>,
) -> Result<usize, ParseError> {
    let std::ops::Range {
        start: mut pos,
        end: used,
    } = range;
    let ParseContext {
        keys,
        interner,
        scratch,
        ..
    } = ctx;
    while pos < used {
        let len = match view.u32_acquire(pos) {
            Some(len) if pos + 4 <= used => len.to_ne_bytes(),
            _ => {
                return Err(ParseError::new(
                    pos as u64,
                    ReadErrorKind::UsedNotOnBoundary { used: used as u64 },
                ))
            }
        };
        let (_, end) = frame_entry(pos, &len, used)?;
        scratch.clear();
        if !view.copy_to(pos, end - pos, scratch) {
            return Err(shrunk());
        }
        let raw = match EntryIter::window(scratch, pos, end).next() {
            Some(Ok(raw)) => raw,
            Some(Err(e)) => return Err(e),
            None => {
                return Err(ParseError::new(
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

/// How much of a file of `size` bytes to map: the used bytes (read from the
/// header) rounded up to whole pages, plus one page to grow into, not the
/// whole file. prometheus_client's files are 64 KiB or more of which a few
/// kilobytes are used; where they are not sparse (tmpfs, the Rust writer's
/// zero-filled files), the kernel maps every cached page of a mapping it can
/// (fault-around), and a map of the whole file would show as that much RSS.
/// A file that grows past its map is mapped again.
pub(super) fn map_len(file: &File, size: u64) -> usize {
    let mut header = [0u8; 4];
    let used = match read_fully(file, &mut header, 0) {
        Ok(4) => u64::try_from(i32::from_le_bytes(header)).unwrap_or(0),
        _ => 0,
    };
    map_len_of(used, size, multiprom_format::page_size() as u64)
}

/// [`map_len`] for `used` bytes of `size`, in pages of `page` bytes (the
/// system's: 4 KiB on most hosts, 64 KiB on some aarch64 ones).
fn map_len_of(used: u64, size: u64, page: u64) -> usize {
    let len = if used == 0 || used > size {
        // Being created, or damaged: the checks that follow say which.
        size
    } else {
        (used.div_ceil(page) + 1) * page
    };
    // `size` was checked against MAX_FILE_SIZE (4 GiB), which fits.
    usize::try_from(len.min(size)).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::map_len_of;

    #[test]
    fn maps_whole_pages_of_the_used_bytes_and_one_more() {
        let mib = 1 << 20;
        for page in [4096, 65536] {
            assert_eq!(map_len_of(8, mib, page), 2 * page as usize);
            assert_eq!(map_len_of(page, mib, page), 2 * page as usize);
            assert_eq!(map_len_of(page + 1, mib, page), 3 * page as usize);
            // Never past the end of the file, and all of it while the
            // header says nothing sensible.
            assert_eq!(map_len_of(8, page, page), page as usize);
            assert_eq!(map_len_of(0, mib, page), mib as usize);
            assert_eq!(map_len_of(mib + 1, mib, page), mib as usize);
        }
    }
}
