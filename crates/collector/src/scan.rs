//! Listing a directory's `*.db` files, as Python's `glob('*.db')` does.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Every `*.db` name in `dir` (case-sensitive; dotfiles excluded, as glob
/// does), sorted by name bytes. Directories and other non-files are listed
/// too: reading them reports them as bad files instead of hiding them.
pub fn scan_dir(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = match entry {
            Ok(entry) => entry,
            // An entry that vanished mid-listing is simply not there.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let name = entry.file_name();
        let bytes = name.as_bytes();
        if bytes.ends_with(b".db") && !bytes.starts_with(b".") {
            paths.push(entry.path());
        }
    }
    paths.sort_unstable_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(paths)
}
