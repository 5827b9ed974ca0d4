//! Writing `*.db` files as `prometheus_client` does, safely shared with
//! readers in other processes.
//!
//! Differences from Python, all invisible to Python readers:
//! * A new file is built under a dot-name (which scans ignore), sized and
//!   given its header, then hard-linked into place. A reader never sees a
//!   0-byte or header-less file (Python's #1199).
//! * Files are sized with `ftruncate`, sparse, as Python sizes them (a file
//!   takes the disk or memory its entries take, not its capacity), but an
//!   entry's bytes are stored only into blocks that exist: before an entry
//!   is appended, the pages it reaches are given real blocks by writing
//!   zeros past `used` (nothing reads there). So a full disk is an error
//!   returned by the call that appends, not a SIGBUS on some later store
//!   into a hole, which is how Python's writer dies on a full tmpfs.
//! * Old mappings are kept alive when the file grows, so every [`ValueSlot`]
//!   handed out stays valid for as long as it is held.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::WriteError;
use crate::file_name::FileName;
use crate::layout::{self, HEADER_LEN, INITIAL_CAPACITY, MAX_USED};
use crate::mapping::{Mapping, ValueSlot};
use crate::{open, read};

/// An open `*.db` file that this process appends to and updates in place.
///
/// Exactly one writer may own a file (as in Python); appends take `&mut self`
/// and value updates go through lock-free [`ValueSlot`]s.
#[derive(Debug)]
pub struct FileWriter {
    path: PathBuf,
    file: File,
    mapping: Arc<Mapping>,
    used: usize,
    capacity: u64,
    /// Bytes from the start that have real blocks (at least `used`): what
    /// stores through the mapping may reach.
    allocated: u64,
    /// What is given real blocks at a time: the system's page, as a store
    /// through a map faults in (and needs blocks for) a whole page; 4 KiB on
    /// most hosts, 64 KiB on some aarch64 ones.
    page: u64,
    slots: HashMap<Box<str>, ValueSlot>,
}

/// A corrupt file a writer found where it was to continue, and moved aside
/// ([`FileWriter::open_setting_aside`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SetAside {
    /// What is wrong with it.
    pub problem: crate::ReadError,
    /// Where it is now.
    pub moved_to: PathBuf,
}

impl std::fmt::Display for SetAside {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}; moved to {} (no reader reads it there), and a new file begun",
            self.problem,
            self.moved_to.display()
        )
    }
}

/// `at` rounded up to a whole number of pages, at most `capacity`.
fn allocation_end(at: u64, capacity: u64, page: u64) -> u64 {
    at.div_ceil(page).saturating_mul(page).min(capacity)
}

impl FileWriter {
    /// Opens `dir/name`, creating it atomically if it does not exist. An
    /// existing file (a reused pid) is continued from its entries.
    pub fn open(dir: &Path, name: &FileName) -> Result<FileWriter, WriteError> {
        FileWriter::open_with_page(dir, name, crate::page_size() as u64)
    }

    /// Opens `dir/name` as [`FileWriter::open`] does, but a corrupt file
    /// there (left by an earlier process with the same identifier: a key
    /// that is not JSON, a torn entry) is moved out of the `*.db` names, to
    /// `<name>.corrupt-<unix seconds>` where no reader reads it and a person
    /// can look at it, and a new file is begun; what was moved is returned
    /// for the caller to report. The policy of every multiprom writer:
    /// appending after the damage (`prometheus_client`'s writer) hides
    /// everything written from then on from every reader, and refusing
    /// would stop the application's metrics where `prometheus_client` lets
    /// it run. A file that cannot be moved (a read-only directory) is
    /// refused as [`FileWriter::open`] refuses it.
    pub fn open_setting_aside(
        dir: &Path,
        name: &FileName,
    ) -> Result<(FileWriter, Option<SetAside>), WriteError> {
        let problem = match FileWriter::open(dir, name) {
            Err(WriteError::Corrupt(problem)) => problem,
            opened => return opened.map(|writer| (writer, None)),
        };
        let path = dir.join(name.to_string());
        let seconds = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs());
        let moved_to = dir.join(format!("{name}.corrupt-{seconds}"));
        if std::fs::rename(&path, &moved_to).is_err() {
            return Err(WriteError::Corrupt(problem));
        }
        let writer = FileWriter::open(dir, name)?;
        Ok((writer, Some(SetAside { problem, moved_to })))
    }

    /// [`FileWriter::open`] giving blocks `page` bytes at a time: tests run
    /// the writer with another page size than the host's.
    pub(crate) fn open_with_page(
        dir: &Path,
        name: &FileName,
        page: u64,
    ) -> Result<FileWriter, WriteError> {
        let path = dir.join(name.to_string());
        let header = (HEADER_LEN as i32).to_ne_bytes();
        let file = open_or_create(dir, &path, INITIAL_CAPACITY, page, &header)?;
        FileWriter::from_existing(path, file, page)
    }

    fn from_existing(path: PathBuf, file: File, page: u64) -> Result<FileWriter, WriteError> {
        let meta = file.metadata().map_err(|e| WriteError::io(&path, e))?;
        // A FIFO, device (a symlink to /dev/zero) or socket named like our
        // file would swallow every value written through a map of it.
        if let Some(kind) = open::not_a_file(meta.file_type()) {
            return Err(crate::ReadError::new(&path, 0, kind).into());
        }
        let mut capacity = meta.len();
        if capacity < HEADER_LEN as u64 {
            // A 0-byte file left by a Python writer killed during creation
            // (or one shorter than a header): nothing in it can be lost.
            file.set_len(INITIAL_CAPACITY)
                .map_err(|e| WriteError::io(&path, e))?;
            capacity = INITIAL_CAPACITY;
        }
        let mut buf = Vec::new();
        read::read_at_most(&file, &mut buf, 0, HEADER_LEN).map_err(|e| WriteError::io(&path, e))?;
        let used_field = buf
            .get(..4)
            .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
        let mapping =
            Arc::new(Mapping::new(&file, capacity).map_err(|e| WriteError::io(&path, e))?);
        let mut writer = FileWriter {
            path,
            file,
            mapping,
            used: HEADER_LEN,
            capacity,
            allocated: 0,
            page,
            slots: HashMap::new(),
        };
        let meta = writer
            .file
            .metadata()
            .map_err(|e| WriteError::io(&writer.path, e))?;
        if used_field == 0 {
            // Sized but never initialised (a new file, or one whose Python
            // writer died before its header): nothing is in it. Python
            // sets the header to 8 here.
            writer.allocate(page)?;
            writer.mapping.publish_used(HEADER_LEN as u32);
            return Ok(writer);
        }
        // Continue from the existing entries, refusing a corrupt file: appending
        // after garbage would hide everything written from now on.
        // Checked entry by entry as it is read: a damaged header claiming
        // gigabytes over a sparse file costs one small read, not gigabytes.
        let prefix = read::read_valid_prefix_of(&writer.file, &meta, &writer.path)?;
        if let Some(problem) = prefix.problem {
            return Err(problem.at(&writer.path).into());
        }
        let header = prefix.header;
        for entry in prefix.entries {
            let slot = writer
                .mapping
                .slot(entry.value_offset() as usize)
                .ok_or_else(|| {
                    crate::ReadError::new(
                        &writer.path,
                        entry.offset,
                        crate::ReadErrorKind::UsedPastEnd {
                            used: header.used,
                            size: writer.capacity,
                        },
                    )
                })?;
            writer.slots.insert(entry.raw_key.into(), slot);
        }
        writer.used = header.used as usize;
        // Every page up to `used` holds entry bytes a writer stored, so it
        // has its blocks; the rest of the last one is given them here.
        writer.allocated = header.used;
        writer.allocate(header.used)?;
        Ok(writer)
    }

    /// Gives the file real blocks up to `end` (rounded up to a page), by
    /// writing zeros from `allocated`: past `used`, where nothing is read
    /// and this process is the only writer.
    fn allocate(&mut self, end: u64) -> Result<(), WriteError> {
        let end = allocation_end(end, self.capacity, self.page);
        if end > self.allocated {
            extend_with_zeros(&self.file, &self.path, self.allocated, end)?;
            self.allocated = end;
        }
        Ok(())
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes in use, including the header.
    #[must_use]
    pub fn used(&self) -> usize {
        self.used
    }

    /// Current file size.
    #[must_use]
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Number of entries.
    #[must_use]
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the file has no entries.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The slot of `key`, if the file has that entry.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<ValueSlot> {
        self.slots.get(key).cloned()
    }

    /// The slot of `key` (an encoded key, see [`crate::encode_key`]),
    /// appending an entry with value and timestamp 0.0 if there is none.
    pub fn slot(&mut self, key: &str) -> Result<ValueSlot, WriteError> {
        if let Some(slot) = self.slots.get(key) {
            return Ok(slot.clone());
        }
        let key_len = key.len();
        if key_len > i32::MAX as usize {
            return Err(WriteError::KeyTooLong { len: key_len });
        }
        let entry_len = layout::entry_len(key_len);
        let needed = self.used as u64 + entry_len as u64;
        if needed > MAX_USED {
            return Err(WriteError::FileFull {
                path: self.path.clone(),
            });
        }
        if needed > self.capacity {
            self.grow(needed)?;
        }
        self.allocate(needed)?;
        let mut entry = Vec::with_capacity(entry_len);
        layout::push_entry(&mut entry, key.as_bytes(), 0.0, 0.0);
        let offset = self.used;
        self.mapping.write_bytes(offset, &entry);
        self.used += entry_len;
        // Publish only after the entry bytes: a reader that sees the new
        // `used` sees the whole entry.
        self.mapping.publish_used(self.used as u32);
        let slot = self
            .mapping
            .slot(layout::value_offset(offset, key_len))
            .ok_or(WriteError::FileFull {
                path: self.path.clone(),
            })?;
        self.slots.insert(key.into(), slot.clone());
        Ok(slot)
    }

    /// Doubles the capacity (as Python does, with `ftruncate`) until
    /// `needed` bytes fit.
    fn grow(&mut self, needed: u64) -> Result<(), WriteError> {
        let mut capacity = self.capacity.max(1);
        while capacity < needed {
            capacity *= 2;
        }
        self.file
            .set_len(capacity)
            .map_err(|e| WriteError::io(&self.path, e))?;
        let mapping =
            Mapping::new(&self.file, capacity).map_err(|e| WriteError::io(&self.path, e))?;
        // Slots keep their own `Arc` to the old mapping, which stays valid and
        // shares the same pages: both map the same file.
        self.mapping = Arc::new(mapping);
        self.capacity = capacity;
        Ok(())
    }
}

/// Extends `file` from `from` to `to` bytes with written zeros (no holes), so
/// running out of disk is an error now rather than a SIGBUS later.
pub(crate) fn extend_with_zeros(
    file: &File,
    path: &Path,
    from: u64,
    to: u64,
) -> Result<(), WriteError> {
    const CHUNK: usize = 64 * 1024;
    let zeros = [0u8; CHUNK];
    let mut offset = from;
    while offset < to {
        let n = ((to - offset) as usize).min(CHUNK);
        file.write_all_at(&zeros[..n], offset)
            .map_err(|e| WriteError::io(path, e))?;
        offset += n as u64;
    }
    Ok(())
}

/// Opens `path` for writing, or creates it (in `dir`, sized to `capacity`,
/// real blocks for its first `allocated` bytes, starting with `header`) if
/// it does not exist. Opening does not block on
/// a FIFO or take a terminal as controlling terminal; the caller refuses
/// anything but a regular file.
pub(crate) fn open_or_create(
    dir: &Path,
    path: &Path,
    capacity: u64,
    allocated: u64,
    header: &[u8],
) -> Result<File, WriteError> {
    let opened = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path);
    match opened {
        Ok(file) => Ok(file),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            create_atomically(dir, path, capacity, allocated, header)
        }
        Err(e) => Err(WriteError::io(path, e)),
    }
}

/// Builds the file at `path` (in `dir`) under a hidden temporary name, sized
/// to `capacity` (real zeros for its first `allocated` bytes, a hole after)
/// and starting with `header`, and links it into place. If another process
/// created it first, that file is opened.
fn create_atomically(
    dir: &Path,
    path: &Path,
    capacity: u64,
    allocated: u64,
    header: &[u8],
) -> Result<File, WriteError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let name = path.file_name().map_or_else(
        || std::borrow::Cow::Borrowed("file"),
        |n| n.to_string_lossy(),
    );
    let tmp = dir.join(format!(".{name}.{}.{nanos}.tmp", std::process::id()));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| WriteError::io(path, e))?;
    // Errors name the file being created, not its temporary name: that is
    // the one the caller asked for.
    let result = (|| {
        file.set_len(capacity)
            .map_err(|e| WriteError::io(path, e))?;
        extend_with_zeros(&file, path, 0, allocated.min(capacity))?;
        file.write_all_at(header, 0)
            .map_err(|e| WriteError::io(path, e))?;
        match std::fs::hard_link(&tmp, path) {
            Ok(()) => Ok(Some(())),
            // Someone else created it first: use theirs.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(None),
            // File systems without hard links: rename is atomic too, but it
            // replaces, so only rename when nothing is there. The window
            // between the check and the rename is the one race left, and
            // only on such file systems; a file appearing in it was created
            // under the same process id, i.e. a misconfiguration.
            Err(_) if path.exists() => Ok(None),
            Err(_) => std::fs::rename(&tmp, path)
                .map(Some)
                .map_err(|e| WriteError::io(path, e)),
        }
    })();
    let _ = std::fs::remove_file(&tmp);
    match result? {
        Some(()) => Ok(file),
        None => OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| WriteError::io(path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{encode_key, read_file, MetricKind};

    #[test]
    fn creates_appends_grows_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let name = FileName::new(MetricKind::Counter, "77").unwrap();
        let mut writer = FileWriter::open(dir.path(), &name).unwrap();
        assert_eq!(writer.capacity(), INITIAL_CAPACITY);
        let first = writer.slot(&encode_key("c", "c_total", [], "h")).unwrap();
        first.add(1.0);
        // Enough entries to double the file twice.
        let mut slots = Vec::new();
        for i in 0..3000 {
            let key = encode_key("c", "c_total", [("i", i.to_string().as_str())], "h");
            let slot = writer.slot(&key).unwrap();
            slot.set(f64::from(i));
            slots.push(slot);
        }
        assert_eq!(writer.capacity(), INITIAL_CAPACITY * 4);
        // The first slot is in the oldest mapping and still works.
        first.add(2.0);
        assert_eq!(first.get(), 3.0);
        let size = std::fs::metadata(writer.path()).unwrap().len();
        assert_eq!(size, writer.capacity());
        let contents = read_file(writer.path()).unwrap();
        assert_eq!(contents.entries.len(), 3001);
        assert_eq!(contents.entries[0].value, 3.0);
        assert_eq!(contents.entries[3000].value, 2999.0);
        // No temporary files left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

        let used = writer.used();
        drop(writer);
        let mut again = FileWriter::open(dir.path(), &name).unwrap();
        assert_eq!(again.used(), used);
        assert_eq!(again.len(), 3001);
        let slot = again.slot(&encode_key("c", "c_total", [], "h")).unwrap();
        assert_eq!(slot.get(), 3.0);
        assert_eq!(
            again.used(),
            used,
            "existing key must not be appended again"
        );
        // Old handles remain usable after the writer is gone.
        slots[5].add(1.0);
        assert_eq!(slot.get(), 3.0);
        assert_eq!(read_file(again.path()).unwrap().entries[6].value, 6.0);
    }

    #[test]
    fn adopts_zero_byte_file_and_refuses_corrupt_one() {
        let dir = tempfile::tempdir().unwrap();
        let name = FileName::new(MetricKind::Summary, "5").unwrap();
        std::fs::write(dir.path().join(name.to_string()), b"").unwrap();
        let mut writer = FileWriter::open(dir.path(), &name).unwrap();
        writer
            .slot(&encode_key("s", "s_count", [], ""))
            .unwrap()
            .add(1.0);
        assert_eq!(read_file(writer.path()).unwrap().entries.len(), 1);

        let bad = FileName::new(MetricKind::Summary, "6").unwrap();
        let mut bytes = vec![0u8; 64];
        bytes[..4].copy_from_slice(&40i32.to_ne_bytes());
        bytes[8..12].copy_from_slice(&(-3i32).to_ne_bytes());
        std::fs::write(dir.path().join(bad.to_string()), &bytes).unwrap();
        let err = FileWriter::open(dir.path(), &bad).unwrap_err();
        assert!(matches!(err, WriteError::Corrupt(_)), "{err}");
    }

    #[test]
    fn refuses_what_is_not_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = FileName::new(MetricKind::Counter, "1").unwrap();
        let status = std::process::Command::new("mkfifo")
            .arg(dir.path().join(fifo.to_string()))
            .status()
            .unwrap();
        assert!(status.success());
        let device = FileName::new(MetricKind::Counter, "2").unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join(device.to_string())).unwrap();
        let directory = FileName::new(MetricKind::Counter, "3").unwrap();
        std::fs::create_dir(dir.path().join(directory.to_string())).unwrap();
        for (name, what) in [(fifo, "a FIFO"), (device, "a device"), (directory, "")] {
            // Opening must not block on the FIFO either.
            let err = FileWriter::open(dir.path(), &name).unwrap_err();
            let text = err.to_string();
            assert!(
                matches!(err, WriteError::Corrupt(_)) && text.contains(what)
                    || matches!(err, WriteError::Io { .. }) && what.is_empty(),
                "{name}: {text}"
            );
        }
    }

    #[test]
    fn adopting_a_sparse_file_claiming_gigabytes_reads_little() {
        let dir = tempfile::tempdir().unwrap();
        let name = FileName::new(MetricKind::Counter, "4").unwrap();
        let path = dir.path().join(name.to_string());
        // A damaged header: almost 2 GiB in use, over a 3 GiB hole.
        std::fs::write(&path, 0x7fff_fff8i32.to_ne_bytes()).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(3 << 30)
            .unwrap();
        let err = FileWriter::open(dir.path(), &name).unwrap_err();
        // The first entry (a zero-length key) is refused at offset 8,
        // before anything past the first read is read.
        assert!(err.to_string().contains("offset 8:"), "{err}");
        let prefix = read::read_valid_prefix(&path).unwrap();
        assert_eq!(prefix.header.used, 0x7fff_fff8);
        assert!(prefix.entries.is_empty());
        assert_eq!(prefix.problem.map(|p| p.offset), Some(8));
    }

    /// Where the first hole of the file at `path` starts (its length when
    /// it has none).
    fn first_hole(path: &Path) -> u64 {
        let file = std::fs::File::open(path).unwrap();
        rustix::fs::seek(&file, rustix::fs::SeekFrom::Hole(0)).unwrap()
    }

    /// Bytes the file at `path` has blocks for.
    fn allocated(path: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).unwrap().blocks() * 512
    }

    /// The page sizes the writer is run with: the common 4 KiB and the
    /// 64 KiB of some aarch64 hosts, whatever this host's is.
    const PAGES: [u64; 2] = [4096, 65536];

    #[test]
    fn files_are_sparse_taking_the_pages_their_entries_fill() {
        for page in PAGES {
            let dir = tempfile::tempdir().unwrap();
            let name = FileName::new(MetricKind::Counter, "9").unwrap();
            let path = dir.path().join(name.to_string());
            let mut writer = FileWriter::open_with_page(dir.path(), &name, page).unwrap();
            assert!(first_hole(&path) >= page, "{page}");
            assert!(
                allocated(&path) <= 2 * page,
                "{page}: a new file takes its first page, not its capacity"
            );
            // Entries up to past the second growth: every byte up to `used`
            // has its blocks after each append, the rest of the file is a
            // hole (with 64 KiB pages, the first growth fills a page).
            for i in 0..600 {
                let path_label = "p".repeat(200) + &i.to_string();
                let key = encode_key("c", "c_total", [("path", path_label.as_str())], "h");
                writer.slot(&key).unwrap().set(f64::from(i));
                assert!(first_hole(&path) >= writer.used as u64, "{page}: entry {i}");
            }
            assert_eq!(writer.capacity, 4 * INITIAL_CAPACITY, "{page}");
            assert!(
                allocated(&path) < writer.capacity,
                "{page}: the tail stays a hole"
            );
            assert!(allocated(&path) <= writer.used as u64 + 2 * page, "{page}");
            assert!(
                allocated(&path).is_multiple_of(page) || allocated(&path) == writer.capacity,
                "{page}: blocks are given a whole page at a time"
            );
            assert_eq!(read_file(&path).unwrap().entries.len(), 600);
        }
    }

    #[test]
    fn adopting_a_file_with_holes_gives_its_last_page_blocks() {
        for page in PAGES {
            let dir = tempfile::tempdir().unwrap();
            let name = FileName::new(MetricKind::Counter, "8").unwrap();
            let path = dir.path().join(name.to_string());
            // As prometheus_client leaves a file: one entry, then a hole up
            // to the 1 MiB capacity (ftruncate).
            let key = encode_key("c", "c_total", [], "h");
            let image = layout::file_image([(key.as_bytes(), 5.0, 0.0)], 4096);
            std::fs::write(&path, &image).unwrap();
            let file = std::fs::File::options().write(true).open(&path).unwrap();
            file.set_len(1 << 20).unwrap();
            assert_eq!(
                first_hole(&path),
                4096,
                "the test needs a file system with holes"
            );
            let mut writer = FileWriter::open_with_page(dir.path(), &name, page).unwrap();
            assert_eq!(
                first_hole(&path),
                page,
                "adopting gives the rest of the last page its blocks"
            );
            assert_eq!(writer.slot(&key).unwrap().get(), 5.0);
            let other = encode_key("d", "d_total", [("path", "p".repeat(5000).as_str())], "h");
            writer.slot(&other).unwrap().set(1.0);
            assert!(first_hole(&path) >= writer.used as u64, "{page}");
            assert!(
                allocated(&path) < 1 << 19,
                "{page}: the adopted file stays sparse"
            );
            assert_eq!(read_file(&path).unwrap().entries.len(), 2);
        }
    }

    #[test]
    fn a_new_file_has_blocks_for_a_whole_system_page() {
        let page = crate::page_size() as u64;
        let dir = tempfile::tempdir().unwrap();
        let name = FileName::new(MetricKind::Counter, "10").unwrap();
        let writer = FileWriter::open(dir.path(), &name).unwrap();
        assert_eq!(writer.page, page);
        assert!(first_hole(writer.path()) >= page.min(INITIAL_CAPACITY));
    }

    #[test]
    fn allocation_ends_on_a_page_boundary() {
        for page in PAGES {
            assert_eq!(allocation_end(1, 1 << 20, page), page);
            assert_eq!(allocation_end(page, 1 << 20, page), page);
            assert_eq!(allocation_end(page + 1, 1 << 20, page), 2 * page);
            // Never past the file's end.
            assert_eq!(allocation_end(page + 1, page + 8, page), page + 8);
        }
    }

    #[test]
    fn missing_directory_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let name = FileName::new(MetricKind::Counter, "1").unwrap();
        let err = FileWriter::open(&dir.path().join("nope"), &name).unwrap_err();
        assert!(matches!(err, WriteError::Io { .. }), "{err}");
    }
}
