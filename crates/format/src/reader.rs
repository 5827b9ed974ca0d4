//! Reading `*.db` files with `pread`, never `mmap`.
//!
//! Mapping a file that another process may truncate turns a bad file into a
//! SIGBUS; reading copies the bytes and turns it into an error. The walk over
//! entries is a pure function of a byte slice ([`EntryIter`]), so it can be
//! fuzzed and reused by the collector's incremental cache.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use crate::error::{ReadError, ReadErrorKind};
use crate::key::Key;
use crate::layout::{self, RawHeader, ValuePair, HEADER_LEN};

/// How much is read in the first `pread` by default: a fresh file's whole capacity.
const FIRST_READ: usize = layout::INITIAL_CAPACITY as usize;
/// The smallest first read: a page, as Python's reader does.
const MIN_FIRST_READ: usize = 4096;

/// The header of a file and its size when read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Bytes in use, including the 8-byte header.
    pub used: u64,
    /// File size (the writer's capacity) when read.
    pub file_size: u64,
}

/// Identity of a file on disk, for caches: a file deleted and re-created
/// under the same name gets a new inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileIdentity {
    /// Device number.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
}

/// The used region of a file, copied out with `pread`.
#[derive(Debug, Clone)]
pub struct UsedBytes {
    /// Header and file size.
    pub header: Header,
    /// Device and inode.
    pub identity: FileIdentity,
    /// Bytes `0..used`.
    pub bytes: Vec<u8>,
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
pub struct ParseError {
    /// Byte offset of the problem.
    pub offset: u64,
    /// What is wrong.
    pub kind: ReadErrorKind,
}

impl ParseError {
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
        let key_len = i64::from(i32::from_ne_bytes([
            len_bytes[0],
            len_bytes[1],
            len_bytes[2],
            len_bytes[3],
        ]));
        if key_len < 0 || key_len as u64 > used {
            return self.fail(pos, ReadErrorKind::BadKeyLength { len: key_len });
        }
        let key_len = key_len as usize;
        let end = pos + layout::entry_len(key_len);
        if end > self.used {
            return self.fail(
                pos,
                ReadErrorKind::EntryPastUsed {
                    end: end as u64,
                    used,
                },
            );
        }
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
    let mut entries = Vec::new();
    for raw in EntryIter::new(bytes, HEADER_LEN, header.used as usize) {
        let raw = raw?;
        let key = Key::decode(raw.key.as_bytes()).map_err(|e| ParseError {
            offset: raw.offset,
            kind: e.into(),
        })?;
        entries.push(Entry {
            offset: raw.offset,
            raw_key: raw.key.to_owned(),
            key,
            value: raw.value,
            timestamp: raw.timestamp,
        });
    }
    Ok(FileContents { header, entries })
}

/// Opens a file for reading without blocking on FIFOs and without opening
/// devices: a `*.db` that is not a regular file, or a symbolic link to
/// one, is an error.
pub fn open_for_read(path: &Path) -> Result<(File, std::fs::Metadata), ReadError> {
    open_regular(rustix::fs::CWD, path, path)
}

/// How files are opened for reading: a FIFO does not block the open, a
/// terminal does not become the controlling one.
const READ_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);

/// Opens `name` (relative to `dir`; `path` names it in errors) if it is a
/// regular file, or a symbolic link to one.
///
/// The name itself is opened without following a symbolic link, so what is
/// opened is what the directory holds: a regular file, or a FIFO or socket
/// (opened without blocking, or refused by the kernel, then refused here).
/// A device node cannot be put there without root. A symbolic link can
/// point anywhere, so its target is first looked at without being opened
/// for reading (see `open_through_link`).
fn open_regular(
    dir: BorrowedFd<'_>,
    name: &Path,
    path: &Path,
) -> Result<(File, std::fs::Metadata), ReadError> {
    match rustix::fs::openat(dir, name, READ_FLAGS | OFlags::NOFOLLOW, Mode::empty()) {
        Ok(fd) => checked_file(File::from(fd), path),
        Err(rustix::io::Errno::LOOP) => open_through_link(dir, name, path),
        Err(e) => Err(ReadError::io(path, &e.into())),
    }
}

/// Opens the target of the symbolic link `name` (relative to `dir`) if it
/// is a regular file, never opening anything else for reading: some
/// devices act when opened (a watchdog starts its countdown, a tape
/// rewinds), and a link in a directory others can write may point at one.
///
/// The target is looked at through an `O_PATH` descriptor, which runs no
/// device's open; only a regular file is then opened for reading, through
/// that descriptor (`/proc/self/fd/N`), so the file opened is the one
/// looked at even if the link changes meanwhile. Without `/proc` the link
/// is followed again and the file opened must be the one looked at (the
/// link could be switched to a device between the two steps; that is the
/// one window left, and only without `/proc`).
fn open_through_link(
    dir: BorrowedFd<'_>,
    name: &Path,
    path: &Path,
) -> Result<(File, std::fs::Metadata), ReadError> {
    let io = |e: rustix::io::Errno| ReadError::io(path, &e.into());
    let target = File::from(
        rustix::fs::openat(dir, name, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).map_err(io)?,
    );
    let looked_at = target.metadata().map_err(|e| ReadError::io(path, &e))?;
    if let Some(kind) = not_a_file(looked_at.file_type()) {
        return Err(ReadError::new(path, 0, kind));
    }
    let through = format!("/proc/self/fd/{}", target.as_raw_fd());
    let fd = match rustix::fs::open(through.as_str(), READ_FLAGS, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) if !Path::new("/proc/self/fd").is_dir() => {
            rustix::fs::openat(dir, name, READ_FLAGS, Mode::empty()).map_err(io)?
        }
        Err(e) => return Err(io(e)),
    };
    let (file, meta) = checked_file(File::from(fd), path)?;
    if (meta.dev(), meta.ino()) != (looked_at.dev(), looked_at.ino()) {
        return Err(ReadError::new(path, 0, ReadErrorKind::LinkChanged));
    }
    Ok((file, meta))
}

/// A directory held open to open the files in it by name (`openat`), so
/// that each open looks up one name instead of walking the directory's
/// whole path again: on a cold collection of 4,000 files the path walks are
/// a noticeable share of the system time.
///
/// A file whose parent is not this directory is opened by its path. Names
/// are looked up in the directory that was opened, even if another one has
/// taken its path since: the files read are the ones a listing of it named.
#[derive(Debug)]
pub struct OpenDir {
    path: PathBuf,
    fd: OwnedFd,
}

impl OpenDir {
    /// Opens the directory at `path` (not following a symlink in its last
    /// component any differently from `open`).
    pub fn open(path: &Path) -> io::Result<OpenDir> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(OpenDir {
            path: path.to_path_buf(),
            fd,
        })
    }

    /// The directory's path, as given to [`OpenDir::open`].
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// [`open_for_read`] of `path`, by its name in this directory when it
    /// is in it.
    pub fn open_for_read(&self, path: &Path) -> Result<(File, std::fs::Metadata), ReadError> {
        match self.name_of(path) {
            Some(name) => open_regular(self.fd.as_fd(), name, path),
            None => open_for_read(path),
        }
    }

    /// `path`'s last component, if `path` names a file in this directory.
    fn name_of<'p>(&self, path: &'p Path) -> Option<&'p Path> {
        // Nearly every path is this directory's path, a `/` and a plain
        // name: told by its bytes, without walking the components of both
        // paths (hundreds of instructions per file, more than this
        // process's own part of the open).
        let rest = path
            .as_os_str()
            .as_bytes()
            .strip_prefix(self.path.as_os_str().as_bytes())
            .and_then(|rest| rest.strip_prefix(b"/"));
        if let Some(name) = rest {
            if !name.is_empty() && !name.contains(&b'/') && name != b"." && name != b".." {
                return Some(Path::new(OsStr::from_bytes(name)));
            }
        }
        match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) if parent == self.path => Some(Path::new(name)),
            _ => None,
        }
    }
}

/// `file` with its metadata if it is a regular file.
fn checked_file(file: File, path: &Path) -> Result<(File, std::fs::Metadata), ReadError> {
    let meta = file.metadata().map_err(|e| ReadError::io(path, &e))?;
    if let Some(kind) = not_a_file(meta.file_type()) {
        return Err(ReadError::new(path, 0, kind));
    }
    Ok((file, meta))
}

/// [`ReadErrorKind::NotAFile`] unless `ft` is a regular file.
pub(crate) fn not_a_file(ft: std::fs::FileType) -> Option<ReadErrorKind> {
    if ft.is_file() {
        return None;
    }
    let what = if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() || ft.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    };
    Some(ReadErrorKind::NotAFile(what))
}

/// Reads up to `len` bytes at `offset`, stopping early only at end of file.
pub(crate) fn read_at_most(
    file: &File,
    buf: &mut Vec<u8>,
    offset: u64,
    len: usize,
) -> io::Result<usize> {
    let start = buf.len();
    buf.resize(start + len, 0);
    let mut got = 0;
    while got < len {
        match file.read_at(&mut buf[start + got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                buf.truncate(start + got);
                return Err(e);
            }
        }
    }
    buf.truncate(start + got);
    Ok(got)
}

/// Copies the used region of an open file into `buf` (cleared first).
///
/// Like Python, reads the first block, takes `used` from it, then reads the
/// rest. A file that grew since it was opened is fine (`used` is re-checked
/// against a fresh size); one that shrank is [`ReadErrorKind::Truncated`].
pub fn read_used_into(
    file: &File,
    meta: &std::fs::Metadata,
    path: &Path,
    buf: &mut Vec<u8>,
) -> Result<Header, ReadError> {
    read_used_into_with_hint(file, meta, path, buf, FIRST_READ)
}

/// [`read_used_into`] with the first `pread` sized from `used_hint` (at least
/// a page): a caller that knows how much the file used last time reads an
/// unchanged file in exactly one call of exactly its used bytes, instead of
/// a fresh file's whole 64 KiB capacity.
pub fn read_used_into_with_hint(
    file: &File,
    meta: &std::fs::Metadata,
    path: &Path,
    buf: &mut Vec<u8>,
    used_hint: usize,
) -> Result<Header, ReadError> {
    buf.clear();
    let mut size = meta.len();
    if size == 0 {
        return Err(ReadError::new(path, 0, ReadErrorKind::Empty));
    }
    let first = usize::try_from(size)
        .unwrap_or(usize::MAX)
        .min(used_hint.max(MIN_FIRST_READ));
    read_at_most(file, buf, 0, first).map_err(|e| ReadError::io(path, &e))?;
    let mut header = parse_header(buf, size.max(buf.len() as u64));
    if let Err(ParseError {
        kind: ReadErrorKind::UsedPastEnd { .. },
        ..
    }) = header
    {
        // The writer may have grown the file since we looked.
        size = file.metadata().map_err(|e| ReadError::io(path, &e))?.len();
        header = parse_header(buf, size);
    }
    let mut header = header.map_err(|e| e.at(path))?;
    header.file_size = size;
    let used = header.used as usize;
    if used > buf.len() {
        let have = buf.len();
        read_at_most(file, buf, have as u64, used - have).map_err(|e| ReadError::io(path, &e))?;
    }
    if buf.len() < used {
        return Err(ReadError::new(
            path,
            buf.len() as u64,
            ReadErrorKind::Truncated {
                wanted: used as u64,
                got: buf.len() as u64,
            },
        ));
    }
    buf.truncate(used);
    Ok(header)
}

/// Reads the used region of the file at `path`.
pub fn read_used_bytes(path: &Path) -> Result<UsedBytes, ReadError> {
    let (file, meta) = open_for_read(path)?;
    let mut bytes = Vec::new();
    let header = read_used_into(&file, &meta, path, &mut bytes)?;
    Ok(UsedBytes {
        header,
        identity: FileIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
        },
        bytes,
    })
}

/// Reads and fully validates a file: header, framing, UTF-8, every key.
///
/// Entries are checked as they are read, so a file costs what its good
/// entries cost: a header claiming gigabytes in use over a sparse file (or
/// a key length of a gigabyte) is rejected after one small read.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// use multiprom_format::{read_file, ReadErrorKind};
/// let path = dir.path().join("counter_1.db");
/// std::fs::write(&path, b"").unwrap();
/// let err = read_file(&path).unwrap_err();
/// assert_eq!(err.kind, ReadErrorKind::Empty);
/// assert!(err.to_string().ends_with("offset 0: 0-byte file: a writer was killed while creating it (prometheus_client issue #1199)"));
/// ```
pub fn read_file(path: &Path) -> Result<FileContents, ReadError> {
    let prefix = read_valid_prefix(path)?;
    match prefix.problem {
        Some(problem) => Err(problem.at(path)),
        None => Ok(FileContents {
            header: prefix.header,
            entries: prefix.entries,
        }),
    }
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

/// Reads a file's entries up to the first bad one, checking each as it
/// arrives ([`read_file`] without giving up the good entries).
///
/// Reads grow by doubling and never go further than one entry whose length
/// field has been checked (at most [`layout::MAX_KEY_LEN`] plus framing)
/// past the good entries: memory and time are bounded by what the file
/// really holds, not by what its header claims. Files are read with `pread`,
/// never mapped. `Err` only for what stops reading before the first entry:
/// I/O errors, not a regular file, a bad header.
pub fn read_valid_prefix(path: &Path) -> Result<ValidPrefix, ReadError> {
    let (file, meta) = open_for_read(path)?;
    read_valid_prefix_of(&file, &meta, path)
}

/// [`read_valid_prefix`] on a file already open.
pub fn read_valid_prefix_of(
    file: &File,
    meta: &std::fs::Metadata,
    path: &Path,
) -> Result<ValidPrefix, ReadError> {
    let mut buf = Vec::new();
    let mut size = meta.len();
    if size == 0 {
        return Err(ReadError::new(path, 0, ReadErrorKind::Empty));
    }
    let first = usize::try_from(size).unwrap_or(usize::MAX).min(FIRST_READ);
    read_at_most(file, &mut buf, 0, first).map_err(|e| ReadError::io(path, &e))?;
    let mut header = parse_header(&buf, size.max(buf.len() as u64));
    if let Err(ParseError {
        kind: ReadErrorKind::UsedPastEnd { .. },
        ..
    }) = header
    {
        // The writer may have grown the file since we looked.
        size = file.metadata().map_err(|e| ReadError::io(path, &e))?.len();
        header = parse_header(&buf, size);
    }
    let mut header = header.map_err(|e| e.at(path))?;
    header.file_size = size;
    let used = header.used as usize;
    let mut entries = Vec::new();
    let mut pos = HEADER_LEN;
    let done = |entries, problem| {
        Ok(ValidPrefix {
            header,
            entries,
            problem,
        })
    };
    loop {
        let have = buf.len().min(used);
        let mut iter = EntryIter::new(&buf[..have], pos, have);
        let mut stopped = None;
        for raw in iter.by_ref() {
            match raw {
                Ok(raw) => match Key::decode(raw.key.as_bytes()) {
                    Ok(key) => entries.push(Entry {
                        offset: raw.offset,
                        raw_key: raw.key.to_owned(),
                        key,
                        value: raw.value,
                        timestamp: raw.timestamp,
                    }),
                    Err(e) => {
                        let problem = ParseError {
                            offset: raw.offset,
                            kind: e.into(),
                        };
                        return done(entries, Some(problem));
                    }
                },
                Err(e) => {
                    stopped = Some(e);
                    break;
                }
            }
        }
        pos = iter.position();
        if pos >= used {
            return done(entries, None);
        }
        if have >= used {
            return done(entries, stopped);
        }
        // The entry at `pos` may run past what was read. Check its length
        // field against the real `used` and the key limit before reading
        // any of it.
        let mut wanted = pos + 4;
        if let Some(len) = buf.get(pos..pos + 4) {
            let key_len = i32::from_ne_bytes([len[0], len[1], len[2], len[3]]);
            let bad_len = ParseError {
                offset: pos as u64,
                kind: ReadErrorKind::BadKeyLength {
                    len: i64::from(key_len),
                },
            };
            let Ok(key_len) = usize::try_from(key_len) else {
                return done(entries, Some(bad_len));
            };
            if key_len > used || key_len > layout::MAX_KEY_LEN {
                return done(entries, Some(bad_len));
            }
            let end = pos + layout::entry_len(key_len);
            if end > used {
                let problem = ParseError {
                    offset: pos as u64,
                    kind: ReadErrorKind::EntryPastUsed {
                        end: end as u64,
                        used: used as u64,
                    },
                };
                return done(entries, Some(problem));
            }
            if end <= have {
                // The whole entry was there: the walk's verdict stands.
                return done(entries, stopped);
            }
            wanted = end;
        }
        let want = wanted.max(buf.len() * 2).min(used);
        let start = buf.len();
        let got = read_at_most(file, &mut buf, start as u64, want - start)
            .map_err(|e| ReadError::io(path, &e))?;
        if got == 0 {
            let problem = ParseError {
                offset: start as u64,
                kind: ReadErrorKind::Truncated {
                    wanted: used as u64,
                    got: start as u64,
                },
            };
            return done(entries, Some(problem));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    fn make_fifo(path: &Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
    }

    /// A file opened by name in an `OpenDir` is the file at its path, with
    /// the same checks and errors as `open_for_read`.
    #[test]
    fn open_dir_opens_files_by_name_with_the_same_checks() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("metrics");
        std::fs::create_dir(&dir).unwrap();
        let file = dir.join("counter_1.db");
        std::fs::write(&file, b"\x10\0\0\0\0\0\0\0").unwrap();
        let open = OpenDir::open(&dir).unwrap();
        assert_eq!(open.path(), dir);

        let (opened, meta) = open.open_for_read(&file).unwrap();
        let by_path = std::fs::metadata(&file).unwrap();
        assert_eq!((meta.dev(), meta.ino()), (by_path.dev(), by_path.ino()));
        let mut head = [0u8; 8];
        opened.read_exact_at(&mut head, 0).unwrap();
        assert_eq!(head[0], 0x10);

        // Missing: vanished, as by path.
        let missing = open.open_for_read(&dir.join("gone_1.db")).unwrap_err();
        assert_eq!(missing.kind, ReadErrorKind::Vanished);
        assert_eq!(missing.path, dir.join("gone_1.db"));

        // A FIFO is refused without blocking; a directory is refused.
        let fifo = dir.join("fifo_1.db");
        make_fifo(&fifo);
        let refused = open.open_for_read(&fifo).unwrap_err();
        assert_eq!(refused.kind, ReadErrorKind::NotAFile("a FIFO"));
        std::fs::create_dir(dir.join("dir_1.db")).unwrap();
        let refused = open.open_for_read(&dir.join("dir_1.db")).unwrap_err();
        assert_eq!(refused.kind, ReadErrorKind::NotAFile("a directory"));

        // A file elsewhere is opened by its path.
        let elsewhere = root.path().join("counter_2.db");
        std::fs::write(&elsewhere, b"x").unwrap();
        let (_, meta) = open.open_for_read(&elsewhere).unwrap();
        assert_eq!(meta.len(), 1);

        // By name: the directory open is the one used, even once its path
        // names another directory.
        std::fs::rename(&dir, root.path().join("moved")).unwrap();
        std::fs::create_dir(&dir).unwrap();
        let (_, meta) = open.open_for_read(&file).unwrap();
        assert_eq!(meta.ino(), by_path.ino());
    }

    /// An `OpenDir` opens by name exactly the paths whose parent is its
    /// directory, however they are spelt, and nothing that merely starts
    /// with its path.
    #[test]
    fn open_dir_knows_its_own_files_by_any_spelling() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("metrics");
        std::fs::create_dir(&dir).unwrap();
        let open = OpenDir::open(&dir).unwrap();
        let d = dir.display();
        let name_of = |path: String| {
            open.name_of(Path::new(&path))
                .map(|name| name.to_str().unwrap().to_owned())
        };
        for path in [
            format!("{d}/counter_1.db"),
            format!("{d}//counter_1.db"),
            format!("{d}/./counter_1.db"),
        ] {
            assert_eq!(name_of(path).as_deref(), Some("counter_1.db"));
        }
        for path in [
            format!("{d}x.db"),
            format!("{d}x/counter_1.db"),
            format!("{d}/sub/counter_1.db"),
            format!("{d}/.."),
            format!("{d}/."),
            format!("{d}"),
            "counter_1.db".to_owned(),
        ] {
            assert_eq!(name_of(path.clone()), None, "{path}");
        }
    }

    /// A symbolic link to something other than a regular file is refused
    /// without its target being opened for reading (an open of some
    /// devices acts on them); a link to a regular file is read.
    #[test]
    fn a_link_is_followed_only_to_a_regular_file() {
        use rustix::fs::inotify;
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("metrics");
        std::fs::create_dir(&dir).unwrap();
        let fifo = root.path().join("fifo");
        make_fifo(&fifo);
        let link = dir.join("gauge_all_1.db");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        // The kernel reports every open of the FIFO to this watch.
        let watch =
            inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).unwrap();
        inotify::add_watch(&watch, &fifo, inotify::WatchFlags::OPEN).unwrap();
        let opens = || {
            let mut events = [0u8; 1024];
            match rustix::io::read(&watch, &mut events) {
                Ok(n) => n,
                Err(rustix::io::Errno::AGAIN) => 0,
                Err(e) => panic!("{e}"),
            }
        };

        let by_path = open_for_read(&link).unwrap_err();
        assert_eq!(by_path.kind, ReadErrorKind::NotAFile("a FIFO"));
        let by_name = OpenDir::open(&dir)
            .unwrap()
            .open_for_read(&link)
            .unwrap_err();
        assert_eq!(by_name.kind, ReadErrorKind::NotAFile("a FIFO"));
        assert_eq!(opens(), 0, "the FIFO was opened through the link");

        // The watch does see opens: the FIFO itself, named directly, is
        // opened (without blocking) and then refused.
        let direct = open_for_read(&fifo).unwrap_err();
        assert_eq!(direct.kind, ReadErrorKind::NotAFile("a FIFO"));
        assert!(opens() > 0, "the watch saw no open");

        // A link to a regular file is read, by path and by name.
        let file = root.path().join("counter.db");
        std::fs::write(&file, b"\x08\0\0\0\0\0\0\0").unwrap();
        let link = dir.join("counter_1.db");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let target = std::fs::metadata(&file).unwrap().ino();
        assert_eq!(open_for_read(&link).unwrap().1.ino(), target);
        let open = OpenDir::open(&dir).unwrap();
        assert_eq!(open.open_for_read(&link).unwrap().1.ino(), target);

        // A dangling link: vanished, as the file it named.
        std::fs::remove_file(&file).unwrap();
        assert_eq!(
            open.open_for_read(&link).unwrap_err().kind,
            ReadErrorKind::Vanished
        );
    }
}
