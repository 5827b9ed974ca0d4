//! Listing a directory's `*.db` files, as Python's `glob('*.db')` does:
//! the files the collector merges and the maintainer reaps and folds.

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, RawDir};

/// Every `*.db` name in `dir` (case-sensitive; dotfiles excluded, as glob
/// does), in the order the directory lists them (`readdir`), which is the
/// order Python's `glob` returns and so the order its collector merges in.
/// Directories and other non-files are listed too: reading them reports them
/// as bad files instead of hiding them.
///
/// Read with `getdents64` into one buffer (rustix's `RawDir`): each entry's
/// name is looked at where the kernel put it, and only the `*.db` ones are
/// copied, once, into their path. (`std::fs::read_dir` allocates a name
/// per entry and the path is then a second allocation; on 4,000 files that
/// was a fifth of the listing's time. rustix's `Dir` still copies each name
/// into a `CString`, and starts with a buffer of a few dozen entries.)
pub fn scan_dir(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    // Room for about 1,500 entries per `getdents64`; a name is at most 255
    // bytes, so any entry fits.
    let mut buf = Vec::with_capacity(LISTING_BUFFER);
    let mut entries = RawDir::new(fd, buf.spare_capacity_mut());
    let base = dir.as_os_str().as_bytes();
    let mut paths = Vec::new();
    loop {
        let entry = match entries.next() {
            None => break,
            Some(Ok(entry)) => entry,
            // Interrupted: nothing was consumed, so the next call asks again.
            Some(Err(rustix::io::Errno::INTR)) => continue,
            // The directory was removed while being listed: what was listed
            // is all there is (as `readdir` ends there).
            Some(Err(rustix::io::Errno::NOENT)) => break,
            Some(Err(e)) => return Err(e.into()),
        };
        let name = entry.file_name().to_bytes();
        if name.ends_with(b".db") && !name.starts_with(b".") {
            let mut path = Vec::with_capacity(base.len() + 1 + name.len());
            path.extend_from_slice(base);
            if !base.is_empty() && !base.ends_with(b"/") {
                path.push(b'/');
            }
            path.extend_from_slice(name);
            paths.push(PathBuf::from(OsString::from_vec(path)));
        }
    }
    Ok(paths)
}

/// The listing's `getdents64` buffer.
const LISTING_BUFFER: usize = 64 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    /// What `glob('*.db')` lists, through the standard library's listing.
    fn listed_by_std(dir: &Path) -> Vec<PathBuf> {
        let mut paths = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name();
            let bytes = name.as_bytes();
            if bytes.ends_with(b".db") && !bytes.starts_with(b".") {
                paths.push(dir.join(name));
            }
        }
        paths
    }

    #[test]
    fn lists_what_glob_lists_in_directory_order() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        for i in 0..300 {
            std::fs::write(dir.join(format!("counter_{i}.db")), b"").unwrap();
        }
        for name in [
            ".hidden.db",
            "notes.txt",
            "db",
            "x.DB",
            "gauge_all_\u{e9}.db",
        ] {
            std::fs::write(dir.join(name), b"").unwrap();
        }
        std::fs::create_dir(dir.join("a_dir.db")).unwrap();
        let listed = scan_dir(dir).unwrap();
        assert_eq!(listed.len(), 302);
        assert_eq!(listed, listed_by_std(dir));
        // A directory given with a trailing separator names its files alike.
        let mut with_slash = dir.as_os_str().to_owned();
        with_slash.push("/");
        assert_eq!(scan_dir(Path::new(&with_slash)).unwrap(), listed);
        assert!(scan_dir(&dir.join("missing")).is_err());
    }

    /// A listing larger than one `getdents64` buffer: the buffer is read
    /// again and again, and no entry is lost or repeated at the seams.
    #[test]
    fn lists_a_directory_of_many_buffers() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        // 200-byte names: about 220 bytes per entry, 330 at 64 KiB.
        let pad = "x".repeat(180);
        for i in 0..2_000 {
            std::fs::write(dir.join(format!("gauge_all_{pad}_{i:05}.db")), b"").unwrap();
        }
        let listed = scan_dir(dir).unwrap();
        assert_eq!(listed.len(), 2_000);
        assert_eq!(listed, listed_by_std(dir));
        let mut names: Vec<_> = listed.iter().filter_map(|p| p.file_name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 2_000);
    }
}
