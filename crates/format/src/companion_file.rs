//! Opening companion files for writing and reading their used bytes: the
//! exemplar and native histogram files a process keeps in a subdirectory
//! beside its `*.db` files.

use std::fs::File;
use std::io;
use std::path::Path;

use crate::error::{ReadError, ReadErrorKind, WriteError};
use crate::open::open_for_read;
use crate::parse::ParseError;
use crate::writer::open_or_create;
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
    let file = open_or_create(subdir, path, initial_capacity, header)?;
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
    let io = |e: std::io::Error| ReadError::new(path, 0, ReadErrorKind::Io(e.to_string()));
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
