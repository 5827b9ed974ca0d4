//! The memory mapping behind a [`crate::FileWriter`] and its value slots.
//!
//! Storing into a shared file mapping needs raw pointers, so this is one of
//! the modules with `unsafe` code (the crate docs list them). Every access
//! is bounds-checked against the mapping's length before the pointer is
//! formed.
#![allow(unsafe_code)]

use std::fmt;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use memmap2::{MmapOptions, MmapRaw};

use crate::layout::VALUE_PAIR_LEN;

/// A shared, writable mapping of a whole file.
pub(crate) struct Mapping {
    raw: MmapRaw,
}

impl fmt::Debug for Mapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mapping")
            .field("len", &self.raw.len())
            .finish()
    }
}

impl Mapping {
    /// Maps the first `len` bytes of `file` (which must be at least that long).
    pub(crate) fn new(file: &File, len: u64) -> io::Result<Mapping> {
        let len = usize::try_from(len).map_err(|_| io::Error::other("file too large to map"))?;
        let raw = MmapOptions::new().len(len).map_raw(file)?;
        Ok(Mapping { raw })
    }

    fn len(&self) -> usize {
        self.raw.len()
    }

    /// Copies `bytes` into the mapping at `offset`.
    ///
    /// # Panics
    /// If the range is outside the mapping: callers size the file first, so
    /// that would be a bug in this crate, not bad input.
    pub(crate) fn write_bytes(&self, offset: usize, bytes: &[u8]) {
        let end = offset.checked_add(bytes.len());
        assert!(
            end.is_some_and(|end| end <= self.len()),
            "write past the mapping"
        );
        // SAFETY: the range [offset, offset + len) lies inside the mapping
        // (checked above), the mapping lives as long as `self`, and `bytes`
        // cannot overlap it (it is an ordinary slice we were handed). Bytes
        // past `used` are not read or written by anyone else: this process is
        // the file's only writer and readers stop at `used`.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.raw.as_mut_ptr().add(offset),
                bytes.len(),
            );
        }
    }

    /// Stores the `used` header with release ordering, after the entry bytes.
    pub(crate) fn publish_used(&self, used: u32) {
        assert!(self.len() >= 4, "mapping shorter than the header");
        // SAFETY: the mapping is page-aligned and at least 4 bytes long, so
        // offset 0 is a valid, aligned location for an AtomicU32 for the
        // lifetime of `self`, in a writable mapping. Other processes only
        // ever read it (this process is the file's only writer), and an
        // `AtomicU32` is the one way this process touches it, so the
        // reference to it is to interior-mutable memory, as it must be.
        let header = unsafe { &*(self.raw.as_ptr() as *const AtomicU32) };
        header.store(used, Ordering::Release);
    }

    /// The `count` 8-byte words at `offset` as atomics, or `None` if they are
    /// not inside the mapping or `offset` is not 8-byte aligned. Exemplar
    /// records are read and written through these words only.
    pub(crate) fn words(&self, offset: usize, count: usize) -> Option<&[AtomicU64]> {
        let end = count.checked_mul(8)?.checked_add(offset)?;
        if end > self.len() || !offset.is_multiple_of(8) {
            return None;
        }
        // SAFETY: the range is inside the mapping (checked above) and
        // 8-byte aligned (the mapping is page-aligned, `offset` a multiple
        // of 8), so it holds `count` valid `AtomicU64` locations for as long
        // as `&self` lives. The memory is shared with other processes and
        // other threads; every access from this process goes through these
        // atomics, so handing out shared references to them is sound.
        Some(unsafe {
            std::slice::from_raw_parts(self.raw.as_ptr().add(offset).cast::<AtomicU64>(), count)
        })
    }

    /// A handle to the value and timestamp at `value_offset`, or `None` if
    /// they are not inside the mapping or not 8-byte aligned.
    pub(crate) fn slot(self: &Arc<Self>, value_offset: usize) -> Option<ValueSlot> {
        let end = value_offset.checked_add(VALUE_PAIR_LEN)?;
        if end > self.len() || !value_offset.is_multiple_of(8) {
            return None;
        }
        // SAFETY: in bounds (checked above), so the pointer stays inside the
        // same allocation.
        let ptr = unsafe { self.raw.as_ptr().add(value_offset) };
        Some(ValueSlot {
            ptr: ptr.cast::<AtomicU64>(),
            _mapping: Arc::clone(self),
        })
    }
}

/// A lock-free handle to one entry's value and timestamp in a mapped file.
///
/// Cloning is cheap. The handle keeps its mapping alive, so it stays valid
/// when the file grows (new mappings are made, old ones are kept) and even
/// after the [`crate::FileWriter`] is dropped.
///
/// # What other processes can do to the file
///
/// * **Delete or rename it** (`mark_process_dead`, a reaper, `rm`): harmless.
///   The mapping keeps the file's pages alive; updates land in a file no
///   reader lists any more, as with Python.
/// * **Truncate it** (`truncate -s 0`, `: > file`, a tool rewriting it in
///   place): a load or store through a slot whose page now lies past the end
///   of the file raises **SIGBUS**, and unless the process handles SIGBUS it
///   dies, exactly as a Python worker does in the same case. The format
///   cannot prevent this: the file is shared through `mmap` with no lock
///   that other processes would honour, and there is no way to keep another
///   process from shrinking a file it can write. Catching the signal here
///   would mean a process-wide handler in the host application and would
///   hide lost updates, so the slot does not. Nothing multiprom does ever
///   truncates a file (its collector only reads, its reaper only deletes);
///   keep other tools from shrinking files in the directory (see the
///   security notes in docs/operations.md).
/// * **Fill the disk**: files this crate creates or grows get real zero
///   bytes, and a file adopted from an earlier process (a reused pid, e.g.
///   a dead Python worker's `ftruncate`-sized file with holes) has its holes
///   filled when it is opened, so a full disk is an error from the call that
///   creates the metric, never a SIGBUS on a later update.
#[derive(Clone)]
pub struct ValueSlot {
    /// Points at the value; the timestamp is the next `AtomicU64`.
    ptr: *const AtomicU64,
    _mapping: Arc<Mapping>,
}

// SAFETY: the pointer targets shared memory that is only ever accessed through
// atomics, and the `Arc<Mapping>` keeps the mapping alive for as long as any
// clone exists, on whichever thread.
unsafe impl Send for ValueSlot {}
// SAFETY: as above; all access is atomic.
unsafe impl Sync for ValueSlot {}

impl fmt::Debug for ValueSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ValueSlot")
            .field("value", &self.get())
            .field("timestamp", &self.timestamp())
            .finish()
    }
}

impl ValueSlot {
    fn value_cell(&self) -> &AtomicU64 {
        // SAFETY: `ptr` is 8-byte aligned and 16 bytes from the end of the
        // mapping at most (checked in `Mapping::slot`), and `_mapping` keeps
        // the mapping alive for the lifetime of `self`.
        unsafe { &*self.ptr }
    }

    fn timestamp_cell(&self) -> &AtomicU64 {
        // SAFETY: as in `value_cell`; `ptr + 1` is the second half of the
        // 16-byte pair, also in bounds and aligned.
        unsafe { &*self.ptr.add(1) }
    }

    /// The current value.
    #[must_use]
    pub fn get(&self) -> f64 {
        f64::from_bits(self.value_cell().load(Ordering::Relaxed))
    }

    /// The current timestamp (seconds since the epoch; 0.0 if never set).
    #[must_use]
    pub fn timestamp(&self) -> f64 {
        f64::from_bits(self.timestamp_cell().load(Ordering::Relaxed))
    }

    /// Sets the value (the timestamp is left alone).
    pub fn set(&self, value: f64) {
        self.value_cell().store(value.to_bits(), Ordering::Relaxed);
    }

    /// Sets the value and its timestamp, for `mostrecent` gauges.
    pub fn set_with_timestamp(&self, value: f64, timestamp: f64) {
        self.value_cell().store(value.to_bits(), Ordering::Relaxed);
        self.timestamp_cell()
            .store(timestamp.to_bits(), Ordering::Relaxed);
    }

    /// Adds `delta` atomically (compare-and-swap loop); returns the new value.
    pub fn add(&self, delta: f64) -> f64 {
        let cell = self.value_cell();
        let mut current = cell.load(Ordering::Relaxed);
        loop {
            let new = f64::from_bits(current) + delta;
            match cell.compare_exchange_weak(
                current,
                new.to_bits(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return new,
                Err(actual) => current = actual,
            }
        }
    }
}
