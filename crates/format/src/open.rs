//! Opening `*.db` files for reading: only regular files (or symbolic links
//! to them) are opened, FIFOs without blocking, devices never.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use crate::error::{ReadError, ReadErrorKind};
use crate::identity::FileIdentity;

/// Opens a file for reading without blocking on FIFOs and without opening
/// devices: a `*.db` that is not a regular file, or a symbolic link to
/// one, is an error.
pub fn open_for_read(path: &Path) -> Result<(File, std::fs::Metadata), ReadError> {
    open_regular(rustix::fs::CWD, path, path)
}

/// How files are opened for reading: a FIFO does not block the open, a
/// terminal does not become the controlling one.
const READ_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);

/// Opens `name` (relative to `dir`; `path` names it in errors) if it is a
/// regular file, or a symbolic link to one.
///
/// The name itself is opened without following a symbolic link, so what is
/// opened is what the directory holds: a regular file, or a FIFO or socket
/// (opened without blocking, or refused by the kernel, then refused here).
/// A device node cannot be put there without root. A symbolic link can
/// point anywhere, so its target is first looked at without being opened
/// for reading (see `open_through_link`).
fn open_regular(
    dir: BorrowedFd<'_>,
    name: &Path,
    path: &Path,
) -> Result<(File, std::fs::Metadata), ReadError> {
    match rustix::fs::openat(dir, name, READ_FLAGS | OFlags::NOFOLLOW, Mode::empty()) {
        Ok(fd) => checked_file(File::from(fd), path),
        Err(rustix::io::Errno::LOOP) => open_through_link(dir, name, path),
        // A socket cannot be opened: say what it is rather than the
        // kernel's "no such device or address".
        Err(rustix::io::Errno::NXIO) => {
            let kind = rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                .ok()
                .filter(|stat| {
                    rustix::fs::FileType::from_raw_mode(stat.st_mode)
                        == rustix::fs::FileType::Socket
                })
                .map(|_| ReadErrorKind::NotAFile("a socket"));
            match kind {
                Some(kind) => Err(ReadError::new(path, 0, kind)),
                None => Err(ReadError::io(path, rustix::io::Errno::NXIO.into())),
            }
        }
        Err(e) => Err(ReadError::io(path, e.into())),
    }
}

/// Opens the target of the symbolic link `name` (relative to `dir`) if it
/// is a regular file, never opening anything else for reading: some
/// devices act when opened (a watchdog starts its countdown, a tape
/// rewinds), and a link in a directory others can write may point at one.
///
/// The target is looked at through an `O_PATH` descriptor, which runs no
/// device's open; only a regular file is then opened for reading, through
/// that descriptor (`/proc/self/fd/N`), so the file opened is the one
/// looked at even if the link changes meanwhile. Without `/proc` the link
/// is followed again and the file opened must be the one looked at (the
/// link could be switched to a device between the two steps; that is the
/// one window left, and only without `/proc`).
fn open_through_link(
    dir: BorrowedFd<'_>,
    name: &Path,
    path: &Path,
) -> Result<(File, std::fs::Metadata), ReadError> {
    let io = |e: rustix::io::Errno| ReadError::io(path, e.into());
    let target = File::from(
        rustix::fs::openat(dir, name, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).map_err(io)?,
    );
    let looked_at = target.metadata().map_err(|e| ReadError::io(path, e))?;
    if let Some(kind) = not_a_file(looked_at.file_type()) {
        return Err(ReadError::new(path, 0, kind));
    }
    let through = format!("/proc/self/fd/{}", target.as_raw_fd());
    let fd = match rustix::fs::open(through.as_str(), READ_FLAGS, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) if !Path::new("/proc/self/fd").is_dir() => {
            rustix::fs::openat(dir, name, READ_FLAGS, Mode::empty()).map_err(io)?
        }
        Err(e) => return Err(io(e)),
    };
    let (file, meta) = checked_file(File::from(fd), path)?;
    if FileIdentity::from_metadata(&meta) != FileIdentity::from_metadata(&looked_at) {
        return Err(ReadError::new(path, 0, ReadErrorKind::LinkChanged));
    }
    Ok((file, meta))
}

/// A directory held open to open the files in it by name (`openat`), so
/// that each open looks up one name instead of walking the directory's
/// whole path again: on a cold collection of 4,000 files the path walks are
/// a noticeable share of the system time.
///
/// A file whose parent is not this directory is opened by its path. Names
/// are looked up in the directory that was opened, even if another one has
/// taken its path since: the files read are the ones a listing of it named.
#[derive(Debug)]
pub struct OpenDir {
    path: PathBuf,
    fd: OwnedFd,
}

impl OpenDir {
    /// Opens the directory at `path` (not following a symlink in its last
    /// component any differently from `open`).
    pub fn open(path: &Path) -> io::Result<OpenDir> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(OpenDir {
            path: path.to_path_buf(),
            fd,
        })
    }

    /// The directory's path, as given to [`OpenDir::open`].
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// [`open_for_read`] of `path`, by its name in this directory when it
    /// is in it.
    pub fn open_for_read(&self, path: &Path) -> Result<(File, std::fs::Metadata), ReadError> {
        match self.name_of(path) {
            Some(name) => open_regular(self.fd.as_fd(), name, path),
            None => open_for_read(path),
        }
    }

    /// `path`'s last component, if `path` names a file in this directory.
    fn name_of<'p>(&self, path: &'p Path) -> Option<&'p Path> {
        // Nearly every path is this directory's path, a `/` and a plain
        // name: told by its bytes, without walking the components of both
        // paths (hundreds of instructions per file, more than this
        // process's own part of the open).
        let rest = path
            .as_os_str()
            .as_bytes()
            .strip_prefix(self.path.as_os_str().as_bytes())
            .and_then(|rest| rest.strip_prefix(b"/"));
        if let Some(name) = rest {
            if !name.is_empty() && !name.contains(&b'/') && name != b"." && name != b".." {
                return Some(Path::new(OsStr::from_bytes(name)));
            }
        }
        match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) if parent == self.path => Some(Path::new(name)),
            _ => None,
        }
    }
}

/// `file` with its metadata if it is a regular file.
fn checked_file(file: File, path: &Path) -> Result<(File, std::fs::Metadata), ReadError> {
    let meta = file.metadata().map_err(|e| ReadError::io(path, e))?;
    if let Some(kind) = not_a_file(meta.file_type()) {
        return Err(ReadError::new(path, 0, kind));
    }
    Ok((file, meta))
}

/// [`ReadErrorKind::NotAFile`] unless `ft` is a regular file.
pub(crate) fn not_a_file(ft: std::fs::FileType) -> Option<ReadErrorKind> {
    if ft.is_file() {
        return None;
    }
    let what = if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() || ft.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    };
    Some(ReadErrorKind::NotAFile(what))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{FileExt, MetadataExt};

    fn make_fifo(path: &Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
    }

    /// A file opened by name in an `OpenDir` is the file at its path, with
    /// the same checks and errors as `open_for_read`.
    #[test]
    fn open_dir_opens_files_by_name_with_the_same_checks() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("metrics");
        std::fs::create_dir(&dir).unwrap();
        let file = dir.join("counter_1.db");
        std::fs::write(&file, b"\x10\0\0\0\0\0\0\0").unwrap();
        let open = OpenDir::open(&dir).unwrap();
        assert_eq!(open.path(), dir);

        let (opened, meta) = open.open_for_read(&file).unwrap();
        let by_path = std::fs::metadata(&file).unwrap();
        assert_eq!((meta.dev(), meta.ino()), (by_path.dev(), by_path.ino()));
        let mut head = [0u8; 8];
        opened.read_exact_at(&mut head, 0).unwrap();
        assert_eq!(head[0], 0x10);

        // Missing: vanished, as by path.
        let missing = open.open_for_read(&dir.join("gone_1.db")).unwrap_err();
        assert_eq!(missing.kind, ReadErrorKind::Vanished);
        assert_eq!(missing.path, dir.join("gone_1.db"));

        // A FIFO is refused without blocking; a directory is refused.
        let fifo = dir.join("fifo_1.db");
        make_fifo(&fifo);
        let refused = open.open_for_read(&fifo).unwrap_err();
        assert_eq!(refused.kind, ReadErrorKind::NotAFile("a FIFO"));
        std::fs::create_dir(dir.join("dir_1.db")).unwrap();
        let refused = open.open_for_read(&dir.join("dir_1.db")).unwrap_err();
        assert_eq!(refused.kind, ReadErrorKind::NotAFile("a directory"));

        // A file elsewhere is opened by its path.
        let elsewhere = root.path().join("counter_2.db");
        std::fs::write(&elsewhere, b"x").unwrap();
        let (_, meta) = open.open_for_read(&elsewhere).unwrap();
        assert_eq!(meta.len(), 1);

        // By name: the directory open is the one used, even once its path
        // names another directory.
        std::fs::rename(&dir, root.path().join("moved")).unwrap();
        std::fs::create_dir(&dir).unwrap();
        let (_, meta) = open.open_for_read(&file).unwrap();
        assert_eq!(meta.ino(), by_path.ino());
    }

    /// An `OpenDir` opens by name exactly the paths whose parent is its
    /// directory, however they are spelt, and nothing that merely starts
    /// with its path.
    #[test]
    fn open_dir_knows_its_own_files_by_any_spelling() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("metrics");
        std::fs::create_dir(&dir).unwrap();
        let open = OpenDir::open(&dir).unwrap();
        let d = dir.display();
        let name_of = |path: String| {
            open.name_of(Path::new(&path))
                .map(|name| name.to_str().unwrap().to_owned())
        };
        for path in [
            format!("{d}/counter_1.db"),
            format!("{d}//counter_1.db"),
            format!("{d}/./counter_1.db"),
        ] {
            assert_eq!(name_of(path).as_deref(), Some("counter_1.db"));
        }
        for path in [
            format!("{d}x.db"),
            format!("{d}x/counter_1.db"),
            format!("{d}/sub/counter_1.db"),
            format!("{d}/.."),
            format!("{d}/."),
            format!("{d}"),
            "counter_1.db".to_owned(),
        ] {
            assert_eq!(name_of(path.clone()), None, "{path}");
        }
    }

    /// A symbolic link to something other than a regular file is refused
    /// without its target being opened for reading (an open of some
    /// devices acts on them); a link to a regular file is read.
    #[test]
    fn a_link_is_followed_only_to_a_regular_file() {
        use rustix::fs::inotify;
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("metrics");
        std::fs::create_dir(&dir).unwrap();
        let fifo = root.path().join("fifo");
        make_fifo(&fifo);
        let link = dir.join("gauge_all_1.db");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        // The kernel reports every open of the FIFO to this watch.
        let watch =
            inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).unwrap();
        inotify::add_watch(&watch, &fifo, inotify::WatchFlags::OPEN).unwrap();
        let opens = || {
            let mut events = [0u8; 1024];
            match rustix::io::read(&watch, &mut events) {
                Ok(n) => n,
                Err(rustix::io::Errno::AGAIN) => 0,
                Err(e) => panic!("{e}"),
            }
        };

        let by_path = open_for_read(&link).unwrap_err();
        assert_eq!(by_path.kind, ReadErrorKind::NotAFile("a FIFO"));
        let by_name = OpenDir::open(&dir)
            .unwrap()
            .open_for_read(&link)
            .unwrap_err();
        assert_eq!(by_name.kind, ReadErrorKind::NotAFile("a FIFO"));
        assert_eq!(opens(), 0, "the FIFO was opened through the link");

        // The watch does see opens: the FIFO itself, named directly, is
        // opened (without blocking) and then refused.
        let direct = open_for_read(&fifo).unwrap_err();
        assert_eq!(direct.kind, ReadErrorKind::NotAFile("a FIFO"));
        assert!(opens() > 0, "the watch saw no open");

        // A link to a regular file is read, by path and by name.
        let file = root.path().join("counter.db");
        std::fs::write(&file, b"\x08\0\0\0\0\0\0\0").unwrap();
        let link = dir.join("counter_1.db");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let target = std::fs::metadata(&file).unwrap().ino();
        assert_eq!(open_for_read(&link).unwrap().1.ino(), target);
        let open = OpenDir::open(&dir).unwrap();
        assert_eq!(open.open_for_read(&link).unwrap().1.ino(), target);

        // A dangling link: vanished, as the file it named.
        std::fs::remove_file(&file).unwrap();
        assert_eq!(
            open.open_for_read(&link).unwrap_err().kind,
            ReadErrorKind::Vanished
        );
    }
}
