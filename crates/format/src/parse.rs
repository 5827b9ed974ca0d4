//! Parsing a file's bytes: the header, the entries, their keys and values,
//! and the good entries before the first bad one.
//!
//! Everything here is a pure function of a byte slice: no file is opened or
//! read (that is `read` and `open`), so it can be fuzzed and reused by the
//! collector's incremental cache. Nothing here panics or reads outside the
//! bytes it is given, whatever they contain.

use std::path::Path;

use crate::error::{ReadError, ReadErrorKind};
use crate::key::Key;
use crate::layout::{self, RawHeader, ValuePair, HEADER_LEN};

/// The header of a file and its size when read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Bytes in use, including the 8-byte header.
    pub used: u64,
    /// File size (the writer's capacity) when read.
    pub file_size: u64,
}

/// One entry as it lies in the bytes: the key is raw (undecoded) JSON.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RawEntry<'a> {
    /// Byte offset of the entry (its length field).
    pub offset: u64,
    /// The key, checked to be UTF-8 but not decoded.
    pub key: &'a str,
    /// The value.
    pub value: f64,
    /// The timestamp (seconds; 0.0 unless a `mostrecent` gauge was set).
    pub timestamp: f64,
}

impl RawEntry<'_> {
    /// Byte offset of the 8-byte value.
    #[must_use]
    pub fn value_offset(&self) -> u64 {
        layout::value_offset(self.offset as usize, self.key.len()) as u64
    }

    /// Byte offset just past this entry.
    #[must_use]
    pub fn end(&self) -> u64 {
        self.offset + layout::entry_len(self.key.len()) as u64
    }
}

/// A decoded entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Byte offset of the entry (its length field).
    pub offset: u64,
    /// The raw key as stored.
    pub raw_key: String,
    /// The decoded key.
    pub key: Key,
    /// The value.
    pub value: f64,
    /// The timestamp.
    pub timestamp: f64,
}

impl Entry {
    /// Decodes the key of `raw`.
    fn decode(raw: RawEntry<'_>) -> Result<Entry, ParseError> {
        let key = Key::decode(raw.key.as_bytes()).map_err(|e| ParseError {
            offset: raw.offset,
            kind: e.into(),
        })?;
        Ok(Entry {
            offset: raw.offset,
            raw_key: raw.key.to_owned(),
            key,
            value: raw.value,
            timestamp: raw.timestamp,
        })
    }

    /// Byte offset of the 8-byte value.
    #[must_use]
    pub fn value_offset(&self) -> u64 {
        layout::value_offset(self.offset as usize, self.raw_key.len()) as u64
    }
}

/// A whole file, read and decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct FileContents {
    /// Header and file size.
    pub header: Header,
    /// Every entry, in file order.
    pub entries: Vec<Entry>,
}

/// A problem found while walking bytes; [`ReadError`] without the path.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParseError {
    /// Byte offset of the problem.
    pub offset: u64,
    /// What is wrong.
    pub kind: ReadErrorKind,
}

impl ParseError {
    /// A problem of `kind` at byte `offset`.
    #[must_use]
    pub fn new(offset: u64, kind: ReadErrorKind) -> Self {
        ParseError { offset, kind }
    }

    /// Attaches the path.
    #[must_use]
    pub fn at(self, path: &Path) -> ReadError {
        ReadError::new(path, self.offset, self.kind)
    }
}

/// Checks the header of a file of `file_size` bytes whose first bytes are
/// `bytes` (at least 8 of them), and returns `used`.
pub fn parse_header(bytes: &[u8], file_size: u64) -> Result<Header, ParseError> {
    let err = |kind| ParseError { offset: 0, kind };
    if file_size == 0 {
        return Err(err(ReadErrorKind::Empty));
    }
    let Some(raw) = bytes.get(..HEADER_LEN) else {
        return Err(err(ReadErrorKind::TooShort {
            size: file_size.min(bytes.len() as u64),
        }));
    };
    let header: RawHeader = bytemuck::pod_read_unaligned(raw);
    let used = i64::from(header.used);
    if used == 0 {
        return Err(err(ReadErrorKind::HeaderNotWritten));
    }
    if used < HEADER_LEN as i64 {
        return Err(err(ReadErrorKind::UsedTooSmall { used }));
    }
    let used = used as u64;
    if used > file_size {
        return Err(err(ReadErrorKind::UsedPastEnd {
            used,
            size: file_size,
        }));
    }
    if !used.is_multiple_of(8) {
        return Err(err(ReadErrorKind::UsedNotOnBoundary { used }));
    }
    Ok(Header { used, file_size })
}

/// Walks the entries in `bytes[start..used]`.
///
/// `start` must be 8 or the end of a previously returned entry. The iterator
/// yields at most one error and then stops. It never panics and never reads
/// outside `bytes`, whatever they contain.
#[derive(Debug, Clone)]
pub struct EntryIter<'a> {
    bytes: &'a [u8],
    /// The file offset of `bytes[0]`.
    base: usize,
    pos: usize,
    used: usize,
    failed: bool,
}

impl<'a> EntryIter<'a> {
    /// Entries from offset `start` up to `used` (clamped to `bytes.len()`).
    #[must_use]
    pub fn new(bytes: &'a [u8], start: usize, used: usize) -> Self {
        EntryIter {
            bytes,
            base: 0,
            pos: start.max(HEADER_LEN),
            used: used.min(bytes.len()),
            failed: false,
        }
    }

    /// Entries in a window of a file: `window` holds the file's bytes from
    /// offset `start` on, and entries are walked from `start` up to `used`
    /// (clamped to the window's end). Offsets in the results and errors are
    /// file offsets. `start` must be 8 or the end of an earlier entry.
    ///
    /// ```
    /// use multiprom_format::{layout, EntryIter};
    /// let key: &[u8] = br#"["a", "a", {}, ""]"#;
    /// let image = layout::file_image([(key, 1.0, 0.0), (key, 2.0, 0.0)], 4096);
    /// let second = 8 + layout::entry_len(key.len());
    /// let used = second + layout::entry_len(key.len());
    /// let entries: Vec<_> = EntryIter::window(&image[second..used], second, used)
    ///     .map(|e| e.map(|e| (e.offset, e.value)))
    ///     .collect();
    /// assert_eq!(entries, [Ok((second as u64, 2.0))]);
    /// ```
    #[must_use]
    pub fn window(window: &'a [u8], start: usize, used: usize) -> Self {
        let start = start.max(HEADER_LEN);
        EntryIter {
            bytes: window,
            base: start,
            pos: start,
            used: used.min(start.saturating_add(window.len())),
            failed: false,
        }
    }

    /// Offset of the next entry.
    #[must_use]
    pub fn position(&self) -> usize {
        self.pos
    }

    fn fail(
        &mut self,
        offset: usize,
        kind: ReadErrorKind,
    ) -> Option<Result<RawEntry<'a>, ParseError>> {
        self.failed = true;
        Some(Err(ParseError {
            offset: offset as u64,
            kind,
        }))
    }
}

/// Frames the entry at `pos` of a file whose entries end at `used`, from
/// its 4-byte length field: the key's length and where the entry ends. The
/// one check of an entry's framing every reader of `*.db` entries makes
/// (through a copy, a map, or read part by part): a negative length, one
/// past `used` or over [`layout::MAX_KEY_LEN`] is a bad key length, an entry
/// that ends past `used` is one past the used bytes.
///
/// ```
/// use multiprom_format::{frame_entry, layout, ReadErrorKind};
/// assert_eq!(frame_entry(8, &5u32.to_le_bytes(), 100), Ok((5, 8 + layout::entry_len(5))));
/// let long = ((layout::MAX_KEY_LEN + 1) as u32).to_le_bytes();
/// let problem = frame_entry(8, &long, usize::MAX).unwrap_err();
/// assert!(matches!(problem.kind, ReadErrorKind::BadKeyLength { .. }));
/// ```
pub fn frame_entry(pos: usize, len: &[u8], used: usize) -> Result<(usize, usize), ParseError> {
    let fail = |kind| ParseError {
        offset: pos as u64,
        kind,
    };
    let Some(&[a, b, c, d]) = len.get(..4) else {
        return Err(fail(ReadErrorKind::UsedNotOnBoundary { used: used as u64 }));
    };
    let key_len = i32::from_ne_bytes([a, b, c, d]);
    let key_len = usize::try_from(key_len)
        .ok()
        .filter(|&n| n <= used && n <= layout::MAX_KEY_LEN)
        .ok_or_else(|| {
            fail(ReadErrorKind::BadKeyLength {
                len: i64::from(key_len),
            })
        })?;
    let end = pos + layout::entry_len(key_len);
    if end > used {
        return Err(fail(ReadErrorKind::EntryPastUsed {
            end: end as u64,
            used: used as u64,
        }));
    }
    Ok((key_len, end))
}

impl<'a> Iterator for EntryIter<'a> {
    type Item = Result<RawEntry<'a>, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.used {
            return None;
        }
        let pos = self.pos;
        let at = pos - self.base;
        let used = self.used as u64;
        let Some(len_bytes) = self.bytes.get(at..at + 4).filter(|_| pos + 4 <= self.used) else {
            return self.fail(pos, ReadErrorKind::UsedNotOnBoundary { used });
        };
        let (key_len, end) = match frame_entry(pos, len_bytes, self.used) {
            Ok(frame) => frame,
            Err(problem) => return self.fail(pos, problem.kind),
        };
        let key_bytes = &self.bytes[at + 4..at + 4 + key_len];
        let key = match std::str::from_utf8(key_bytes) {
            Ok(key) => key,
            Err(e) => return self.fail(pos + 4 + e.valid_up_to(), ReadErrorKind::InvalidUtf8),
        };
        let end_at = end - self.base;
        let pair: ValuePair = bytemuck::pod_read_unaligned(&self.bytes[end_at - 16..end_at]);
        self.pos = end;
        Some(Ok(RawEntry {
            offset: pos as u64,
            key,
            value: pair.value,
            timestamp: pair.timestamp,
        }))
    }
}

/// Parses a whole file image (as `pread` would return it): header, every
/// entry, every key decoded. Never panics.
pub fn parse_file(bytes: &[u8], file_size: u64) -> Result<FileContents, ParseError> {
    let header = parse_header(bytes, file_size)?;
    if (bytes.len() as u64) < header.used {
        return Err(ParseError {
            offset: bytes.len() as u64,
            kind: ReadErrorKind::Truncated {
                wanted: header.used,
                got: bytes.len() as u64,
            },
        });
    }
    let entries = EntryIter::new(bytes, HEADER_LEN, header.used as usize)
        .map(|raw| raw.and_then(Entry::decode))
        .collect::<Result<_, _>>()?;
    Ok(FileContents { header, entries })
}

/// The good entries at the start of a file, and what stopped the reading.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidPrefix {
    /// Header and file size.
    pub header: Header,
    /// Every entry before the first bad one, decoded.
    pub entries: Vec<Entry>,
    /// The first bad entry (or the file ending before `used`); `None` when
    /// every entry up to `used` is good.
    pub problem: Option<ParseError>,
}

/// A walk over a file's entries up to the first bad one, fed the file's
/// bytes as they are read: it says how far the bytes must go for the walk
/// to go on, so that a reader never reads further than one entry whose
/// length field has been checked past the good entries.
#[derive(Debug)]
pub(crate) struct PrefixWalk {
    header: Header,
    entries: Vec<Entry>,
    /// Offset of the next entry.
    pos: usize,
}

/// Where a [`PrefixWalk`] stands after walking the bytes it was given.
#[derive(Debug, PartialEq)]
pub(crate) enum Walked {
    /// The walk is over: the problem that stopped it, or `None` when every
    /// entry up to `used` is good.
    Done(Option<ParseError>),
    /// The bytes end inside the next entry, whose length field checks out
    /// (or is not there yet): walk again with the bytes up to this offset.
    NeedUpTo(usize),
}

impl PrefixWalk {
    /// A walk over the entries of a file with this (checked) header.
    pub(crate) fn new(header: Header) -> Self {
        PrefixWalk {
            header,
            entries: Vec::new(),
            pos: HEADER_LEN,
        }
    }

    /// Walks on through `bytes`, the file's bytes from offset 0: each call
    /// is given at least the bytes of the one before.
    pub(crate) fn walk(&mut self, bytes: &[u8]) -> Walked {
        let used = self.header.used as usize;
        let have = bytes.len().min(used);
        let mut iter = EntryIter::new(&bytes[..have], self.pos, have);
        let mut stopped = None;
        for raw in iter.by_ref() {
            let raw = match raw {
                Ok(raw) => raw,
                Err(problem) => {
                    stopped = Some(problem);
                    break;
                }
            };
            match Entry::decode(raw) {
                Ok(entry) => self.entries.push(entry),
                Err(problem) => return Walked::Done(Some(problem)),
            }
        }
        let pos = iter.position();
        self.pos = pos;
        if pos >= used {
            return Walked::Done(None);
        }
        if have >= used {
            return Walked::Done(stopped);
        }
        // The entry at `pos` may run past the bytes (the walk stopped there
        // for want of them, not for damage). Check its length field against
        // the real `used` and the key limit before asking for any of it.
        let Some(len) = bytes.get(pos..pos + 4) else {
            return Walked::NeedUpTo(pos + 4);
        };
        let end = match frame_entry(pos, len, used) {
            Ok((_, end)) => end,
            Err(problem) => return Walked::Done(Some(problem)),
        };
        if end <= have {
            // The whole entry was there: the walk's verdict stands.
            return Walked::Done(stopped);
        }
        Walked::NeedUpTo(end)
    }

    /// The entries walked so far, and what stopped the walk.
    pub(crate) fn finish(self, problem: Option<ParseError>) -> ValidPrefix {
        ValidPrefix {
            header: self.header,
            entries: self.entries,
            problem,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_over_the_limit_is_refused_however_the_file_is_read() {
        // Wholly inside the bytes given: the walk refuses it as a walk of
        // a file read part by part (and a map) does.
        let key = vec![b'k'; layout::MAX_KEY_LEN + 1];
        let image = layout::file_image([(key.as_slice(), 1.0, 0.0)], 0);
        let problem = parse_file(&image, image.len() as u64).unwrap_err();
        assert_eq!(
            problem.kind,
            ReadErrorKind::BadKeyLength {
                len: (layout::MAX_KEY_LEN + 1) as i64
            }
        );
        // At the limit, the length is taken (the key is then not JSON).
        let key = vec![b'k'; layout::MAX_KEY_LEN];
        let image = layout::file_image([(key.as_slice(), 1.0, 0.0)], 0);
        let problem = parse_file(&image, image.len() as u64).unwrap_err();
        assert!(
            !matches!(problem.kind, ReadErrorKind::BadKeyLength { .. }),
            "{problem:?}"
        );
    }
    use crate::layout::entry_len;

    fn image(entries: &[(&str, f64, f64)], capacity: usize) -> Vec<u8> {
        layout::file_image(
            entries.iter().map(|&(k, v, t)| (k.as_bytes(), v, t)),
            capacity,
        )
    }

    #[test]
    fn parses_valid_image() {
        let key = r#"["a", "a_total", {}, "h"]"#;
        let bytes = image(
            &[
                (key, 1.5, 0.0),
                (r#"["g", "g", {"x": "y"}, ""]"#, -2.0, 7.0),
            ],
            4096,
        );
        let contents = parse_file(&bytes, 4096).unwrap();
        assert_eq!(contents.entries.len(), 2);
        assert_eq!(contents.entries[0].value, 1.5);
        assert_eq!(contents.entries[1].timestamp, 7.0);
        assert_eq!(contents.entries[1].offset, 8 + entry_len(key.len()) as u64);
        assert_eq!(contents.entries[0].value_offset() % 8, 0);
    }

    #[test]
    fn each_corruption_has_its_own_error() {
        let key = r#"["a", "a_total", {}, "h"]"#;
        let good = image(&[(key, 1.0, 0.0)], 256);
        let used = 8 + entry_len(key.len());
        let with = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut b = good.clone();
            f(&mut b);
            parse_file(&b, b.len() as u64).unwrap_err()
        };
        let set_used = |b: &mut Vec<u8>, v: i32| b[..4].copy_from_slice(&v.to_ne_bytes());
        assert_eq!(parse_file(&[], 0).unwrap_err().kind, ReadErrorKind::Empty);
        assert_eq!(
            parse_file(&[8, 0, 0], 3).unwrap_err().kind,
            ReadErrorKind::TooShort { size: 3 }
        );
        assert_eq!(
            with(&|b| set_used(b, 0)).kind,
            ReadErrorKind::HeaderNotWritten
        );
        assert_eq!(
            with(&|b| set_used(b, -5)).kind,
            ReadErrorKind::UsedTooSmall { used: -5 }
        );
        assert_eq!(
            with(&|b| set_used(b, 4)).kind,
            ReadErrorKind::UsedTooSmall { used: 4 }
        );
        assert_eq!(
            with(&|b| set_used(b, 1 << 20)).kind,
            ReadErrorKind::UsedPastEnd {
                used: 1 << 20,
                size: 256
            }
        );
        assert_eq!(
            with(&|b| set_used(b, used as i32 + 4)).kind,
            ReadErrorKind::UsedNotOnBoundary {
                used: used as u64 + 4
            }
        );
        // Eight more bytes "in use" hold a zero key length: a 24-byte entry
        // that cannot fit.
        assert_eq!(
            with(&|b| set_used(b, used as i32 + 8)),
            ParseError {
                offset: used as u64,
                kind: ReadErrorKind::EntryPastUsed {
                    end: (used + entry_len(0)) as u64,
                    used: used as u64 + 8
                },
            }
        );
        assert_eq!(
            with(&|b| b[8..12].copy_from_slice(&(-1i32).to_ne_bytes())).kind,
            ReadErrorKind::BadKeyLength { len: -1 }
        );
        assert_eq!(
            with(&|b| b[8..12].copy_from_slice(&(i32::MAX).to_ne_bytes())).kind,
            ReadErrorKind::BadKeyLength {
                len: i64::from(i32::MAX)
            }
        );
        let past = with(&|b| b[8..12].copy_from_slice(&(key.len() as i32 + 8).to_ne_bytes()));
        assert!(
            matches!(past.kind, ReadErrorKind::EntryPastUsed { .. }),
            "{past:?}"
        );
        let utf8 = with(&|b| b[13] = 0xff);
        assert_eq!((utf8.offset, utf8.kind), (13, ReadErrorKind::InvalidUtf8));
        let json = with(&|b| b[12] = b'{');
        assert!(
            matches!(
                json.kind,
                ReadErrorKind::BadKey(crate::KeyError::InvalidJson(_))
            ),
            "{json:?}"
        );
        assert_eq!(json.offset, 8);
        let shape_key = r#"["a", "a_total", {}, 5]"#;
        let shape = parse_file(&image(&[(shape_key, 1.0, 0.0)], 256), 256).unwrap_err();
        assert!(
            matches!(
                shape.kind,
                ReadErrorKind::BadKey(crate::KeyError::WrongShape(_))
            ),
            "{shape:?}"
        );
        let short = parse_file(&good[..used - 8], 256).unwrap_err();
        assert!(
            matches!(short.kind, ReadErrorKind::Truncated { .. }),
            "{short:?}"
        );
    }

    /// A walk asks for the bytes of the next entry once its length field
    /// checks out, and for no more; a bad length field ends it at once.
    #[test]
    fn a_prefix_walk_asks_for_one_checked_entry_at_a_time() {
        let key = r#"["a", "a_total", {}, "h"]"#;
        let bytes = image(&[(key, 1.0, 0.0), (key, 2.0, 0.0)], 4096);
        let first_end = 8 + entry_len(key.len());
        let used = first_end + entry_len(key.len());
        let header = parse_header(&bytes, 4096).unwrap();
        let mut walk = PrefixWalk::new(header);
        assert_eq!(walk.walk(&bytes[..8]), Walked::NeedUpTo(12));
        assert_eq!(walk.walk(&bytes[..12]), Walked::NeedUpTo(first_end));
        assert_eq!(
            walk.walk(&bytes[..first_end + 2]),
            Walked::NeedUpTo(first_end + 4)
        );
        assert_eq!(walk.walk(&bytes[..first_end + 4]), Walked::NeedUpTo(used));
        assert_eq!(walk.walk(&bytes), Walked::Done(None));
        let prefix = walk.finish(None);
        assert_eq!(
            prefix.entries.iter().map(|e| e.value).collect::<Vec<_>>(),
            [1.0, 2.0]
        );

        let mut huge = bytes.clone();
        huge[first_end..first_end + 4].copy_from_slice(&i32::MAX.to_ne_bytes());
        let mut walk = PrefixWalk::new(header);
        assert_eq!(
            walk.walk(&huge[..first_end + 4]),
            Walked::Done(Some(ParseError {
                offset: first_end as u64,
                kind: ReadErrorKind::BadKeyLength {
                    len: i64::from(i32::MAX)
                },
            }))
        );
    }
}
