//! Making a directory's renames and removals durable.

use std::fs::File;
use std::path::Path;

use super::error::CompactError;

/// `fsync` on a directory, so renames and removals in it are on disk.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), CompactError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| CompactError::Io {
            path: dir.to_owned(),
            source,
        })
}
