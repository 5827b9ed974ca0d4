//! Reading `*.db` files with `pread`, never `mmap`.
//!
//! Mapping a file that another process may truncate turns a bad file into a
//! SIGBUS (unless the map is read as `read_map` does); reading copies the
//! bytes and turns it into an error. The bytes read are parsed by `parse`.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::{ReadError, ReadErrorKind};
use crate::identity::FileIdentity;
use crate::layout;
use crate::open::open_for_read;
use crate::parse::{
    parse_header, FileContents, Header, ParseError, PrefixWalk, ValidPrefix, Walked,
};

/// How much is read in the first `pread` by default: a fresh file's whole capacity.
const FIRST_READ: usize = layout::INITIAL_CAPACITY as usize;
/// The smallest first read: a page, as Python's reader does.
const MIN_FIRST_READ: usize = 4096;

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

/// Reads the first bytes of an open file into `buf` (cleared first) and
/// checks its header: `used_hint` bytes, at least a page, at most the file.
///
/// A file that grew since it was opened is fine: `used` past the size in
/// `meta` is checked again against a fresh size.
fn read_header(
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
    read_at_most(file, buf, 0, first).map_err(|e| ReadError::io(path, e))?;
    let mut header = parse_header(buf, size.max(buf.len() as u64));
    if let Err(ParseError {
        kind: ReadErrorKind::UsedPastEnd { .. },
        ..
    }) = header
    {
        // The writer may have grown the file since we looked.
        size = file.metadata().map_err(|e| ReadError::io(path, e))?.len();
        header = parse_header(buf, size);
    }
    let mut header = header.map_err(|e| e.at(path))?;
    header.file_size = size;
    Ok(header)
}

/// Copies the used region of an open file into `buf` (cleared first).
///
/// Like Python, reads the first block, takes `used` from it, then reads the
/// rest. A file that grew since it was opened is fine (`used` is re-checked
/// against a fresh size); one that shrank is [`ReadErrorKind::Truncated`].
///
/// The first `pread` is sized from `used_hint` (at least a page): a caller
/// that knows how much the file used last time reads an unchanged file in
/// exactly one call of exactly its used bytes, instead of a fresh file's
/// whole 64 KiB capacity.
pub fn read_used_into_with_hint(
    file: &File,
    meta: &std::fs::Metadata,
    path: &Path,
    buf: &mut Vec<u8>,
    used_hint: usize,
) -> Result<Header, ReadError> {
    let header = read_header(file, meta, path, buf, used_hint)?;
    let used = header.used as usize;
    if used > buf.len() {
        let have = buf.len();
        read_at_most(file, buf, have as u64, used - have).map_err(|e| ReadError::io(path, e))?;
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
    let header = read_used_into_with_hint(&file, &meta, path, &mut bytes, FIRST_READ)?;
    Ok(UsedBytes {
        header,
        identity: FileIdentity::from_metadata(&meta),
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
pub(crate) fn read_valid_prefix_of(
    file: &File,
    meta: &std::fs::Metadata,
    path: &Path,
) -> Result<ValidPrefix, ReadError> {
    let mut buf = Vec::new();
    let header = read_header(file, meta, path, &mut buf, FIRST_READ)?;
    let used = header.used as usize;
    let mut walk = PrefixWalk::new(header);
    loop {
        let wanted = match walk.walk(&buf) {
            Walked::Done(problem) => return Ok(walk.finish(problem)),
            Walked::NeedUpTo(wanted) => wanted,
        };
        // Reads double, so a file of many entries costs few calls.
        let want = wanted.max(buf.len() * 2).min(used);
        let start = buf.len();
        let got = read_at_most(file, &mut buf, start as u64, want - start)
            .map_err(|e| ReadError::io(path, e))?;
        if got == 0 {
            let problem = ParseError {
                offset: start as u64,
                kind: ReadErrorKind::Truncated {
                    wanted: used as u64,
                    got: start as u64,
                },
            };
            return Ok(walk.finish(Some(problem)));
        }
    }
}
