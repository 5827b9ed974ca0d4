//! Typed errors with path and byte-offset context.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::file_name::FileNameError;
use crate::key::KeyError;

/// What is wrong with a file, without the path (see [`ReadError`]).
///
/// Non-exhaustive: new kinds of damage get their own variants.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadErrorKind {
    /// The name is not a metrics file name (`app.db`, `gauge_bogus_1.db`).
    #[error("{0}")]
    BadFileName(#[from] FileNameError),
    /// The file disappeared between listing and reading (a reaped worker).
    #[error("file vanished while being read")]
    Vanished,
    /// A directory, socket, FIFO or device named `*.db`.
    #[error("not a regular file ({0})")]
    NotAFile(&'static str),
    /// The name has the form of no metrics file, and [`FileNameError`] has
    /// no more to say (a name that is not UTF-8, say).
    #[error("not a metrics file name")]
    NotAMetricsFileName,
    /// A symbolic link whose target does not exist: unlike a file that
    /// vanished because its worker was reaped, it will not go away by itself.
    #[error("dangling symbolic link")]
    DanglingSymlink,
    /// A symbolic link named a regular file when it was looked at and
    /// another file when it was opened: someone switched it in between.
    #[error("the symbolic link changed while it was opened")]
    LinkChanged,
    /// Larger than a reader that addresses the file with 32-bit offsets can
    /// take (Python's format describes at most 2 GiB in use).
    #[error("file is {size} bytes, over the 4 GiB limit")]
    TooLarge {
        /// File size in bytes.
        size: u64,
    },
    /// The file shrank under a read-only memory map of it
    /// ([`crate::read_map::Shrunk`]): the map is not read again.
    #[error("the file shrank under its memory map")]
    ShrankUnderMap,
    /// An error from the operating system (permission denied, ...).
    #[error("cannot read: {0}")]
    Io(IoError),
    /// A 0-byte file: Python creates the file and only then sizes it, so a
    /// worker killed in between leaves this behind (prometheus_client #1199).
    #[error("0-byte file: a writer was killed while creating it (prometheus_client issue #1199)")]
    Empty,
    /// Shorter than the 8-byte header.
    #[error("file is {size} bytes, shorter than the 8-byte header")]
    TooShort {
        /// File size in bytes.
        size: u64,
    },
    /// `used` is 0: the file was sized but its header never written.
    #[error("header never written (used = 0): a writer was killed while creating the file")]
    HeaderNotWritten,
    /// `used` below the header size (or negative).
    #[error("header says {used} bytes used, less than the 8-byte header")]
    UsedTooSmall {
        /// The `used` field.
        used: i64,
    },
    /// `used` beyond the end of the file.
    #[error("header says {used} bytes used, but the file has only {size} bytes")]
    UsedPastEnd {
        /// The `used` field.
        used: u64,
        /// File size in bytes.
        size: u64,
    },
    /// `used` does not end where an entry ends.
    #[error("header says {used} bytes used, which is not on an entry boundary")]
    UsedNotOnBoundary {
        /// The `used` field.
        used: u64,
    },
    /// A negative key length, or one longer than the used region.
    #[error("invalid key length {len}")]
    BadKeyLength {
        /// The key length field.
        len: i64,
    },
    /// The entry (key, padding, value, timestamp) runs past `used`.
    #[error("entry ends at byte {end}, past the {used} bytes in use")]
    EntryPastUsed {
        /// Where the entry would end.
        end: u64,
        /// The `used` field.
        used: u64,
    },
    /// The file shrank while being read (someone truncated it).
    #[error("file shrank while being read: wanted {wanted} bytes, got {got}")]
    Truncated {
        /// Bytes expected.
        wanted: u64,
        /// Bytes read.
        got: u64,
    },
    /// An exemplar file without multiprom's magic, version or record size.
    #[error("not a multiprom exemplar file (magic, version or record size differs)")]
    NotAnExemplarFile,
    /// A native histogram file without multiprom's magic or version.
    #[error("not a multiprom native histogram file (magic or version differs)")]
    NotANativeHistogramFile,
    /// A native histogram record that no writer makes (schema out of
    /// range, more buckets in use than it has room for, ...).
    #[error("invalid native histogram record: {0}")]
    BadNativeHistogramRecord(&'static str),
    /// The key is not UTF-8.
    #[error("key is not valid UTF-8")]
    InvalidUtf8,
    /// The key is not JSON, or not of the `[family, sample, {labels}, help]` shape.
    #[error("{0}")]
    BadKey(#[from] KeyError),
}

impl From<crate::read_map::Shrunk> for ReadErrorKind {
    fn from(_: crate::read_map::Shrunk) -> Self {
        ReadErrorKind::ShrankUnderMap
    }
}

/// A file that could not be read, with where and why.
///
/// Displays as `path: offset N: reason`, the form `multiprom inspect --check`
/// prints. File-level problems (vanished, 0-byte, ...) are at offset 0.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub struct ReadError {
    /// The file.
    pub path: PathBuf,
    /// Byte offset of the problem (of the entry, for entry problems).
    pub offset: u64,
    /// What is wrong.
    pub kind: ReadErrorKind,
}

impl fmt::Display for ReadError {
    /// The path with its control characters escaped: a file name is
    /// anyone's text, and one holding a line break would otherwise forge
    /// a line of its own in a log or on a terminal.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: offset {}: {}",
            printable(&self.path.to_string_lossy()),
            self.offset,
            self.kind
        )
    }
}

/// `text` with control characters (line breaks, escape sequences) shown
/// escaped (`\n`, `\u{1b}`), everything else as it is: safe for one line
/// of a log or a terminal.
///
/// ```
/// use multiprom_format::printable;
/// assert_eq!(printable("counter_1\n.db"), "counter_1\\n.db");
/// assert_eq!(printable("caf\u{e9}.db"), "caf\u{e9}.db");
/// ```
#[must_use]
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

impl ReadError {
    /// A problem of `kind` at byte `offset` of the file at `path`.
    #[must_use]
    pub fn new(path: impl Into<PathBuf>, offset: u64, kind: ReadErrorKind) -> Self {
        ReadError {
            path: path.into(),
            offset,
            kind,
        }
    }

    /// Whether the file simply vanished (a reaped worker), which is not
    /// damage.
    #[must_use]
    pub fn is_vanished(&self) -> bool {
        self.kind == ReadErrorKind::Vanished
    }

    pub(crate) fn io(path: impl Into<PathBuf>, err: std::io::Error) -> Self {
        let kind = if err.kind() == std::io::ErrorKind::NotFound {
            ReadErrorKind::Vanished
        } else {
            ReadErrorKind::Io(err.into())
        };
        ReadError::new(path, 0, kind)
    }
}

/// The [`std::io::Error`] of a [`ReadErrorKind::Io`], shared: a
/// [`ReadErrorKind`] is `Clone` and `PartialEq`, which a
/// [`std::io::Error`] is not.
///
/// Displays as the error it holds. Two are equal when their
/// [`kind`](IoError::kind)s and their texts are.
#[derive(Debug, Clone)]
pub struct IoError(Arc<std::io::Error>);

impl IoError {
    /// The error.
    #[must_use]
    pub fn get(&self) -> &std::io::Error {
        &self.0
    }

    /// The error's kind ([`std::io::Error::kind`]).
    #[must_use]
    pub fn kind(&self) -> std::io::ErrorKind {
        self.0.kind()
    }

    /// The operating system's error number, if it came from one
    /// ([`std::io::Error::raw_os_error`]).
    #[must_use]
    pub fn raw_os_error(&self) -> Option<i32> {
        self.0.raw_os_error()
    }
}

impl From<std::io::Error> for IoError {
    fn from(err: std::io::Error) -> Self {
        IoError(Arc::new(err))
    }
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq for IoError {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || (self.kind() == other.kind() && self.0.to_string() == other.0.to_string())
    }
}

impl Eq for IoError {}

/// Why a file could not be created, opened for writing or grown.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// An I/O error (directory missing, permission denied, disk full).
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// An existing file is corrupt, so appending to it would lose data.
    #[error("refusing to write into a corrupt file: {0}")]
    Corrupt(#[from] ReadError),
    /// The file would exceed the 2 GiB that its 32-bit header can describe.
    #[error("{}: file would exceed 2 GiB (the header's 32-bit limit)", path.display())]
    FileFull {
        /// The file.
        path: PathBuf,
    },
    /// The key is longer than an entry can hold, or than readers take
    /// ([`crate::layout::MAX_KEY_LEN`]).
    #[error("key of {len} bytes is too long (readers take keys of at most 1 MiB)")]
    KeyTooLong {
        /// Key length in bytes.
        len: usize,
    },
}

impl WriteError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        WriteError::Io {
            path: path.into(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The collector's reports and the tests that read them go by these
    /// texts.
    #[test]
    fn kinds_without_an_io_error_read_as_before() {
        assert_eq!(
            ReadErrorKind::from(crate::read_map::Shrunk).to_string(),
            "the file shrank under its memory map"
        );
        assert_eq!(
            ReadErrorKind::TooLarge { size: 1 << 33 }.to_string(),
            "file is 8589934592 bytes, over the 4 GiB limit"
        );
        assert_eq!(
            ReadErrorKind::NotAMetricsFileName.to_string(),
            "not a metrics file name"
        );
        assert_eq!(
            ReadErrorKind::LinkChanged.to_string(),
            "the symbolic link changed while it was opened"
        );
        assert_eq!(
            ReadErrorKind::DanglingSymlink.to_string(),
            "dangling symbolic link"
        );
        assert_eq!(
            ReadErrorKind::from(KeyError::EmptyFamilyName).to_string(),
            "entry has an empty metric name"
        );
        assert_eq!(
            ReadErrorKind::from(KeyError::BadBucketBound("abc".into())).to_string(),
            "histogram bucket bound le=\"abc\" is not a number"
        );
    }

    /// An I/O error reads as the operating system's text, as it did when
    /// it was kept as that text.
    #[test]
    fn an_io_error_reads_as_the_system_says_it() {
        let denied = std::io::Error::from_raw_os_error(13);
        let text = format!("cannot read: {denied}");
        let kind = ReadErrorKind::Io(denied.into());
        assert_eq!(kind.to_string(), text);
        assert_eq!(text, "cannot read: Permission denied (os error 13)");
        let ReadErrorKind::Io(err) = &kind else {
            unreachable!()
        };
        assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
        assert_eq!(err.raw_os_error(), Some(13));
        assert_eq!(kind.clone(), kind);
        assert_eq!(
            kind,
            ReadErrorKind::Io(std::io::Error::from_raw_os_error(13).into())
        );
        assert_ne!(
            kind,
            ReadErrorKind::Io(std::io::Error::from_raw_os_error(1).into())
        );
    }
}
