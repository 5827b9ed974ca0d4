//! Listing a directory's `*.db` files, as Python's `glob('*.db')` does.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Every `*.db` name in `dir` (case-sensitive; dotfiles excluded, as glob
/// does), in the order the directory lists them (`readdir`), which is the
/// order Python's `glob` returns and so the order its collector merges in.
/// Directories and other non-files are listed too: reading them reports them
/// as bad files instead of hiding them.
pub fn scan_dir(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut names = Vec::new();
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
            names.push(name);
        }
    }
    Ok(names.into_iter().map(|name| dir.join(name)).collect())
}
