//! Whether any process on this machine has a file open for writing, asked
//! of the kernel itself: a read lease (`fcntl(F_SETLEASE, F_RDLCK)`) is
//! granted only while no open file description of the file has write
//! access (`i_writecount` is zero), and a writable shared map keeps its open
//! file description alive after the descriptor is closed. So a writer that
//! maps its file (prometheus_client's `MmapedDict`, multiprom's writers)
//! holds off the lease for as long as it lives, in whatever pid namespace
//! or container it runs, whoever it runs as; a reader does not.
//!
//! The lease is let go at once (and with the descriptor). A writer that
//! opens the file in the microseconds it is held waits in `open` for its
//! release, as the kernel makes lease breakers wait; it does not fail (an
//! `O_NONBLOCK` open would, and no metrics writer opens so). The kernel
//! tells a lease holder of a break by a signal: SIGURG here, whose default
//! action is to do nothing, rather than SIGIO, whose default is to
//! terminate the holder.

#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// `F_SETSIG` from `<asm-generic/fcntl.h>` (the same on every Linux
/// architecture), which the `libc` crate does not name.
const F_SETSIG: libc::c_int = 10;

/// What the kernel says of a file's writers.
#[derive(Debug)]
pub enum WriteLease {
    /// No process has the file open or mapped for writing.
    NoWriter,
    /// Some process has (the lease was refused with `EAGAIN`).
    Writer,
    /// The kernel cannot say: the file could not be opened, or leases are
    /// refused for it (not the file's owner without `CAP_LEASE`, leases
    /// disabled by `fs.leases-enable`, a file system without them).
    Unknown(io::Error),
}

/// Asks whether some process has the file at `path` open or mapped for
/// writing (see the module docs). Costs an `open`, three `fcntl`s and a
/// `close`. The `open` raises an inotify event on the file; to ask again
/// and again without one, keep a [`LeaseProbe`].
#[must_use]
pub fn write_lease(path: &Path) -> WriteLease {
    match LeaseProbe::open(path) {
        Ok(probe) => probe.writers(),
        Err(e) => WriteLease::Unknown(e),
    }
}

/// A file opened read-only to ask, as often as needed, whether some process
/// has it open or mapped for writing: each [`LeaseProbe::writers`] is two
/// `fcntl`s on the open descriptor, with no new `open` (so no inotify
/// event). It keeps the file (and its disk space) alive while it is kept,
/// as an open descriptor does: drop it once the file is gone.
#[derive(Debug)]
pub struct LeaseProbe {
    file: File,
}

impl LeaseProbe {
    /// Opens `path` read-only for probing.
    pub fn open(path: &Path) -> io::Result<LeaseProbe> {
        // Non-blocking: should someone hold a write lease on the file, the
        // open fails rather than waits for it.
        let file = File::options()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)?;
        // SAFETY: `fcntl` on a descriptor this function owns (open until
        // `file` drops), with integer arguments only (F_SETSIG takes a
        // signal number). No memory is passed.
        if unsafe { libc::fcntl(file.as_raw_fd(), F_SETSIG, libc::SIGURG) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(LeaseProbe { file })
    }

    /// The file, to `stat` it.
    #[must_use]
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Whether some process has the file open or mapped for writing, as of
    /// now.
    #[must_use]
    pub fn writers(&self) -> WriteLease {
        let fd = self.file.as_raw_fd();
        // SAFETY: `fcntl` on the descriptor `self` owns, with integer
        // arguments only (F_SETLEASE takes a lease type).
        if unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_RDLCK) } != 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) => WriteLease::Writer,
                _ => WriteLease::Unknown(e),
            };
        }
        // SAFETY: as above. Should this fail, the lease goes with the
        // descriptor; a writer's `open` meanwhile waits, it does not fail.
        unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK) };
        WriteLease::NoWriter
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_file_open_for_writing_anywhere_has_a_writer_and_one_open_for_reading_has_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("counter_1.db");
        std::fs::write(&path, [0u8; 4096]).unwrap();
        assert!(matches!(write_lease(&path), WriteLease::NoWriter));
        let reader = File::open(&path).unwrap();
        assert!(matches!(write_lease(&path), WriteLease::NoWriter));
        drop(reader);
        let mut writer = File::options().append(true).open(&path).unwrap();
        assert!(matches!(write_lease(&path), WriteLease::Writer));
        writer.write_all(b"x").unwrap();
        drop(writer);
        assert!(matches!(write_lease(&path), WriteLease::NoWriter));
        let map = crate::FileWriter::open(
            dir.path(),
            &crate::FileName::new(crate::MetricKind::Counter, "2").unwrap(),
        )
        .unwrap();
        let mapped = dir.path().join("counter_2.db");
        assert!(matches!(write_lease(&mapped), WriteLease::Writer));
        drop(map);
        assert!(matches!(write_lease(&mapped), WriteLease::NoWriter));
        assert!(matches!(
            write_lease(&dir.path().join("missing.db")),
            WriteLease::Unknown(_)
        ));
        // A probe kept open asks again with no new open.
        let probe = LeaseProbe::open(&mapped).unwrap();
        assert!(matches!(probe.writers(), WriteLease::NoWriter));
        let again = File::options()
            .read(true)
            .write(true)
            .open(&mapped)
            .unwrap();
        assert!(matches!(probe.writers(), WriteLease::Writer));
        drop(again);
        assert!(matches!(probe.writers(), WriteLease::NoWriter));
    }
}
