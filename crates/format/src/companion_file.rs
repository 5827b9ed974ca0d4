//! Opening companion files for writing and reading their used bytes: the
//! exemplar and native histogram files a process keeps in a subdirectory
//! beside its `*.db` files.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;

use crate::error::{ReadError, ReadErrorKind, WriteError};
use crate::file_name::FileName;
use crate::mapping::Mapping;
use crate::open::open_for_read;
use crate::parse::ParseError;
use crate::writer::{extend_with_zeros, open_or_create};
use crate::{open, read};

/// An opened companion file and its whole contents.
pub(crate) struct OpenedCompanion {
    pub(crate) file: File,
    /// Every byte of the file (its capacity), to parse before appending.
    pub(crate) bytes: Vec<u8>,
    pub(crate) capacity: u64,
}

/// Opens the companion file at `path` (in a subdirectory of the metrics
/// directory, made if missing), creating it with `header` and
/// `initial_capacity` if it does not exist, and reads it whole. Anything
/// but a regular file, or a file past `max_len`, is refused: the caller
/// parses the bytes and refuses a file that is not whole, since appending
/// after garbage would hide every later record from readers.
pub(crate) fn open_companion(
    path: &Path,
    header: &[u8],
    initial_capacity: u64,
    max_len: u64,
) -> Result<OpenedCompanion, WriteError> {
    let subdir = path.parent().unwrap_or(Path::new("."));
    match std::fs::create_dir(subdir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(WriteError::io(subdir, e)),
    }
    // Real blocks for the whole capacity: records are written anywhere in
    // it through the map.
    let file = open_or_create(subdir, path, initial_capacity, initial_capacity, header)?;
    let meta = file.metadata().map_err(|e| WriteError::io(path, e))?;
    if let Some(kind) = open::not_a_file(meta.file_type()) {
        return Err(crate::ReadError::new(path, 0, kind).into());
    }
    let capacity = meta.len();
    if capacity > max_len {
        return Err(WriteError::FileFull {
            path: path.to_path_buf(),
        });
    }
    let mut bytes = Vec::new();
    read::read_at_most(&file, &mut bytes, 0, capacity as usize)
        .map_err(|e| WriteError::io(path, e))?;
    Ok(OpenedCompanion {
        file,
        bytes,
        capacity,
    })
}

/// Opens the companion file at `path` for reading: the file and its size,
/// refused past `max_len` (what one foreign or damaged file may cost).
pub(crate) fn open_companion_for_read(path: &Path, max_len: u64) -> Result<(File, u64), ReadError> {
    let (file, meta) = open_for_read(path)?;
    let size = meta.len();
    if size > max_len {
        return Err(ReadError::new(path, 0, ReadErrorKind::TooLarge { size }));
    }
    Ok((file, size))
}

/// Reads the used bytes of the companion `file` (at `path`, `size` bytes)
/// into `buf`, cleared first: its `header_len`-byte header, checked by
/// `parse_header` (which gives `used`), then the rest up to `used`.
pub(crate) fn read_companion_used(
    file: &File,
    path: &Path,
    size: u64,
    buf: &mut Vec<u8>,
    header_len: usize,
    parse_header: impl Fn(&[u8], u64) -> Result<usize, ParseError>,
) -> Result<(), ReadError> {
    let io = |e: std::io::Error| ReadError::new(path, 0, ReadErrorKind::Io(e.into()));
    buf.clear();
    read::read_at_most(file, buf, 0, header_len).map_err(io)?;
    let used = parse_header(buf, size).map_err(|e| e.at(path))?;
    read::read_at_most(file, buf, header_len as u64, used - header_len).map_err(io)?;
    if buf.len() < used {
        return Err(ReadError::new(
            path,
            0,
            ReadErrorKind::Truncated {
                wanted: used as u64,
                got: buf.len() as u64,
            },
        ));
    }
    Ok(())
}

/// The companion file name of a `*.db` file name with `suffix`:
/// `histogram_7.db` and `.native` give `histogram_7.native`.
pub(crate) fn companion_file_name(name: &FileName, suffix: &str) -> String {
    let db = name.to_string();
    let stem = db.strip_suffix(".db").unwrap_or(&db);
    format!("{stem}{suffix}")
}

/// The `*.db` file name a companion file name with `suffix` belongs to.
pub(crate) fn db_name_of_companion(name: &str, suffix: &str) -> Option<FileName> {
    let stem = name.strip_suffix(suffix)?;
    format!("{stem}.db").parse().ok()
}

/// What a companion file's header must hold: `used` (u32) at offset 0, the
/// `magic` at 4 and the `version` (u32) at 8, in a header of `len` bytes.
pub(crate) struct CompanionHeader {
    pub(crate) len: usize,
    pub(crate) magic: [u8; 4],
    pub(crate) version: u32,
    /// The problem of a file without the magic or version.
    pub(crate) foreign: ReadErrorKind,
}

impl CompanionHeader {
    /// Where the entries end: `used` from the header of `bytes` (the first
    /// bytes of a file of `file_size`), checked against the file.
    pub(crate) fn used(&self, bytes: &[u8], file_size: u64) -> Result<usize, ParseError> {
        let fail = |kind| ParseError::new(0, kind);
        if file_size == 0 {
            return Err(fail(ReadErrorKind::Empty));
        }
        let Some(header) = bytes.get(..self.len.max(12)) else {
            return Err(fail(ReadErrorKind::TooShort { size: file_size }));
        };
        let u32_at = |at: usize| {
            u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
        };
        if header[4..8] != self.magic || u32_at(8) != self.version {
            return Err(fail(self.foreign.clone()));
        }
        let used = u64::from(u32_at(0));
        if used < self.len as u64 {
            return Err(fail(ReadErrorKind::UsedTooSmall { used: used as i64 }));
        }
        if used > file_size {
            return Err(fail(ReadErrorKind::UsedPastEnd {
                used,
                size: file_size,
            }));
        }
        Ok(used as usize)
    }
}

/// Grows the companion `file` (at `path`, `capacity` bytes now) by doubling
/// until `needed` bytes fit, at most `max_len` (but never below `needed`),
/// with written zeros, and maps it anew: the new capacity and mapping.
/// Handles into the old mapping stay valid: both map the same file.
pub(crate) fn grow_companion(
    file: &File,
    path: &Path,
    capacity: u64,
    needed: u64,
    max_len: u64,
) -> Result<(u64, Arc<Mapping>), WriteError> {
    let mut grown = capacity.max(1);
    while grown < needed {
        grown *= 2;
    }
    let grown = grown.min(max_len).max(needed);
    extend_with_zeros(file, path, capacity, grown)?;
    let mapping = Mapping::new(file, grown).map_err(|e| WriteError::io(path, e))?;
    Ok((grown, Arc::new(mapping)))
}
