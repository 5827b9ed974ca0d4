//! What `stat` says of a file, to tell whether it changed.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use multiprom_format::FileIdentity;

/// A file's identity, size, and modification and change times: when any of
/// them differs, the file was replaced, written, truncated or had its
/// metadata changed (a rename or `chmod` moves the change time only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileStamp {
    identity: FileIdentity,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileStamp {
    /// The stamp in metadata already fetched.
    pub(crate) fn from_metadata(meta: &Metadata) -> FileStamp {
        FileStamp {
            identity: FileIdentity::from_metadata(meta),
            size: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// The stamp of whatever `path` names now (`None` if nothing).
    pub(crate) fn of(path: &Path) -> Option<FileStamp> {
        std::fs::metadata(path)
            .ok()
            .map(|meta| FileStamp::from_metadata(&meta))
    }
}
