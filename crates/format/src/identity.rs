//! Which file a path names: device and inode.

use std::fs::Metadata;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// A file's identity on disk (`st_dev`, `st_ino`): a file deleted and
/// re-created under the same name, or renamed over, gets a new one, so
/// caches keyed by it never mistake one file for another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileIdentity {
    /// Device number.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
}

impl FileIdentity {
    /// The identity in metadata already fetched.
    #[must_use]
    pub fn from_metadata(meta: &Metadata) -> FileIdentity {
        FileIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }

    /// The identity of what `path` names now (following symbolic links).
    pub fn of(path: &Path) -> io::Result<FileIdentity> {
        std::fs::metadata(path).map(|meta| FileIdentity::from_metadata(&meta))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_recreated_under_its_name_is_another_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        std::fs::write(&path, b"x").unwrap();
        let before = FileIdentity::of(&path).unwrap();
        let held = std::fs::File::open(&path).unwrap();
        assert_eq!(
            FileIdentity::from_metadata(&held.metadata().unwrap()),
            before
        );
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, b"x").unwrap();
        assert_ne!(FileIdentity::of(&path).unwrap(), before);
        assert!(FileIdentity::of(&dir.path().join("missing")).is_err());
    }
}
