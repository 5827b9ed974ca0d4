//! Read-only shared mappings of `*.db` files that a shrinking file cannot
//! crash.
//!
//! A collector that keeps every file mapped reads values with plain memory
//! loads: no system call per file per scrape. The hazard is truncation:
//! prometheus_client never shrinks its files, but people and tools do (a
//! stray `truncate`, a file rewritten in place, a full tmpfs), and a load
//! from a mapped page that now lies past the end of the file raises SIGBUS,
//! which kills the process.
//!
//! So every load goes through [`ReadMap::read`], which runs the reads with a
//! guard set on the current thread, and a process-wide SIGBUS handler that
//! recognises a fault inside the guarded mapping: it maps an anonymous zero
//! page over the faulting page (so the load completes, reading zeros),
//! records the fault, and returns. `read` then reports [`Shrunk`] and the
//! mapping is never read again. A SIGBUS anywhere else (not on a guarded
//! thread, or outside the guarded mapping) goes to whatever handler was
//! installed before (Rust's own stack-overflow handler, a host's handler, or
//! the default action), exactly as if this module did not exist.
//!
//! The handler is (re)installed by [`guard_sigbus`] (a host may replace it
//! after us, e.g. Python's `faulthandler.enable()`); callers check it before
//! reading through maps and fall back to `pread` when it cannot be had.
//!
//! The handler only reads two thread-local atomics, calls `mmap(2)` (a raw
//! system call) and writes a thread-local flag: nothing that allocates, locks
//! or unwinds.
//!
//! Other processes write the mapped bytes while they are read, so no Rust
//! reference to them is ever made (a `&[u8]` would promise they do not
//! change): the mapping is a [`MmapRaw`], and [`MapView`] reads it through
//! raw pointers, with atomic loads for single words and a byte copy for
//! ranges. Words that matter on their own (`used`, values) are loaded
//! atomically with `Relaxed` ordering, the one kind of atomic access that
//! the standard library promises works on read-only memory (see "Atomic
//! accesses to read-only memory" in `std::sync::atomic`; a wider or
//! stronger load may be compiled to an instruction that writes, a
//! compare-and-swap, and faults on a read-only page). Maps are read only on
//! targets where that promise covers 8 bytes (`READ_ONLY_ATOMIC_LOADS`);
//! elsewhere [`guard_sigbus`] says no and callers read with `pread`.
#![allow(unsafe_code)]

use std::fmt;
use std::fs::File;
use std::io;
use std::sync::atomic::{
    compiler_fence, fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
use std::sync::Mutex;

use memmap2::{MmapOptions, MmapRaw};

/// Whether this target promises that 8-byte `Relaxed` atomic loads work on
/// read-only memory (the table in `std::sync::atomic`, "Atomic accesses to
/// read-only memory"). Maps are read only where it does.
const READ_ONLY_ATOMIC_LOADS: bool = cfg!(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "loongarch64",
    target_arch = "mips64",
    target_arch = "mips64r6",
    target_arch = "powerpc64",
    target_arch = "riscv64",
    target_arch = "sparc64",
    target_arch = "s390x",
));

// Shared between a thread and the signal handler that interrupts it: atomics
// (relaxed: one thread) behind signal fences (`compiler_fence`), so the
// compiler keeps their accesses where they are written. With plain cells
// an optimised build may assume a read through a map cannot change them,
// and carry the `false` stored before the read past it: the fault went
// unnoticed and the map's zero page read as values.
thread_local! {
    /// The address range `[start, end)` being read on this thread, or empty.
    static GUARDED_START: AtomicUsize = const { AtomicUsize::new(0) };
    static GUARDED_END: AtomicUsize = const { AtomicUsize::new(0) };
    /// Set by the handler when a guarded read faulted.
    static FAULTED: AtomicBool = const { AtomicBool::new(false) };
}

/// The page size, read once before the handler is installed.
static PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);
/// The SIGBUS action in force before ours (leaked, never freed: the handler
/// may be reading it on another thread at any time).
static PREVIOUS: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());
/// Serialises installation.
static INSTALL: Mutex<()> = Mutex::new(());

/// A guarded read found that the file had shrunk under the mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shrunk;

impl fmt::Display for Shrunk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("file shrank under its memory map")
    }
}

impl std::error::Error for Shrunk {}

/// Makes sure the SIGBUS handler that guarded reads rely on is in force,
/// installing it (again) if another handler replaced it. Returns whether it
/// is; reads through maps must not be attempted when it is not.
///
/// Costs one `sigaction(2)` when the handler is already ours. Always `false`
/// on a target where loads from a read-only map are not promised to work
/// (see the module docs).
pub fn guard_sigbus() -> bool {
    if !READ_ONLY_ATOMIC_LOADS {
        return false;
    }
    let handler = on_sigbus as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
        as libc::sighandler_t;
    // SAFETY: `sigaction` is a plain C struct of integers, pointers and a
    // signal set, for which all zero bytes are a valid value.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: with a null new action, `sigaction` changes nothing and only
    // writes the current action into `current`, a valid struct we own.
    if unsafe { libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut current) } != 0 {
        return false;
    }
    if current.sa_sigaction == handler {
        return true;
    }
    let _lock = INSTALL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if PAGE_SIZE.load(Ordering::Relaxed) == 0 {
        let page = crate::page_size();
        if !page.is_power_of_two() {
            return false;
        }
        PAGE_SIZE.store(page, Ordering::Relaxed);
    }
    // SAFETY: as above; re-read under the lock so two installers cannot
    // record our own handler as the previous one.
    if unsafe { libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut current) } != 0 {
        return false;
    }
    if current.sa_sigaction == handler {
        return true;
    }
    // Publish the previous action before ours can run.
    PREVIOUS.store(Box::into_raw(Box::new(current)), Ordering::Release);
    // SAFETY: all zero bytes are a valid `sigaction` (as above).
    let mut ours: libc::sigaction = unsafe { std::mem::zeroed() };
    ours.sa_sigaction = handler;
    ours.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
    // SAFETY: `sa_mask` is a valid signal set we own.
    unsafe { libc::sigemptyset(&mut ours.sa_mask) };
    // SAFETY: `ours` is fully set: a handler with the three-argument
    // signature SA_SIGINFO requires, that only does async-signal-safe work
    // (see `on_sigbus`), and an empty mask. `PREVIOUS` was published above,
    // before the handler can run.
    unsafe { libc::sigaction(libc::SIGBUS, &ours, std::ptr::null_mut()) == 0 }
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel hands a valid siginfo to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let start = GUARDED_START.with(|s| s.load(Ordering::Relaxed));
    let end = GUARDED_END.with(|e| e.load(Ordering::Relaxed));
    let page = PAGE_SIZE.load(Ordering::Relaxed);
    if start <= addr && addr < end && page != 0 {
        let base = addr & !(page - 1);
        // SAFETY: `base` is a page inside the mapping this thread is
        // reading in `ReadMap::read` (the guarded range is set only there,
        // only for that map, and only on this thread), so MAP_FIXED replaces
        // a page of ours and nothing else. No reference into that mapping
        // exists, so no Rust value changes under a reference; the `ReadMap`
        // is poisoned and never read again, and it unmaps its whole range
        // (zero page included) when dropped. The faulting load then
        // completes, reading zeros.
        let mapped = unsafe {
            libc::mmap(
                base as *mut libc::c_void,
                page,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if mapped != libc::MAP_FAILED {
            FAULTED.with(|f| f.store(true, Ordering::Relaxed));
            return;
        }
    }
    // Not ours: hand it to the previous disposition.
    let previous = PREVIOUS.load(Ordering::Acquire);
    if previous.is_null() {
        reset_to_default(sig);
        return;
    }
    // SAFETY: `previous` points to a sigaction that was fully written before
    // it was published (release/acquire) and is never freed or changed.
    let previous = unsafe { &*previous };
    let action = previous.sa_sigaction;
    if action == libc::SIG_DFL || action == libc::SIG_IGN {
        // Returning re-runs the faulting load, which faults again and now
        // gets the default action (a core dump), as without us.
        reset_to_default(sig);
    } else if previous.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous action was installed with SA_SIGINFO, so its
        // handler field holds a function of this signature.
        let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(action) };
        handler(sig, info, context);
    } else {
        // SAFETY: without SA_SIGINFO (and not SIG_DFL or SIG_IGN, checked
        // above) the handler field holds a function of this signature.
        let handler: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(action) };
        handler(sig);
    }
}

fn reset_to_default(sig: libc::c_int) {
    // SAFETY: all zero bytes are a valid `sigaction`; it is set to SIG_DFL
    // with an empty mask. `sigemptyset` and `sigaction` are
    // async-signal-safe, so this may run in the handler.
    unsafe {
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut default.sa_mask);
        libc::sigaction(sig, &default, std::ptr::null_mut());
    }
}

/// A read-only, shared mapping of the first bytes of a file.
pub struct ReadMap {
    /// Raw: no reference to the bytes is ever made (see the module docs).
    map: MmapRaw,
    /// A guarded read faulted: the mapping holds zero pages now.
    poisoned: AtomicBool,
}

impl fmt::Debug for ReadMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadMap")
            .field("len", &self.map.len())
            .field("poisoned", &self.poisoned.load(Ordering::Relaxed))
            .finish()
    }
}

impl ReadMap {
    /// Maps the first `len` bytes of `file` read-only (`len` > 0). The file
    /// may be closed afterwards.
    pub fn new(file: &File, len: usize) -> io::Result<ReadMap> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty mapping"));
        }
        let map = MmapOptions::new().len(len).map_raw_read_only(file)?;
        Ok(ReadMap {
            map,
            poisoned: AtomicBool::new(false),
        })
    }

    /// Mapped length in bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the mapping is empty (never: see [`ReadMap::new`]).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    /// Runs `read` with a view of the mapping, guarded against the file
    /// shrinking under it. Call [`guard_sigbus`] (once per batch of reads)
    /// before: without the handler a shrunk file still raises SIGBUS.
    ///
    /// After a fault the mapping stays poisoned: every later call returns
    /// `Err(Shrunk)` without reading.
    pub fn read<R>(&self, read: impl FnOnce(&MapView<'_>) -> R) -> Result<R, Shrunk> {
        if self.poisoned.load(Ordering::Relaxed) {
            return Err(Shrunk);
        }
        let start = self.map.as_ptr() as usize;
        let previous = (
            GUARDED_START.with(|s| s.swap(start, Ordering::Relaxed)),
            GUARDED_END.with(|e| e.swap(start + self.map.len(), Ordering::Relaxed)),
        );
        let faulted_before = FAULTED.with(|f| f.swap(false, Ordering::Relaxed));
        // The guard is in place before the first load from the map...
        compiler_fence(Ordering::SeqCst);
        let result = read(&MapView { map: self });
        // ...and the handler's flag is read after the last one.
        compiler_fence(Ordering::SeqCst);
        let faulted = FAULTED.with(|f| f.swap(faulted_before, Ordering::Relaxed));
        GUARDED_START.with(|s| s.store(previous.0, Ordering::Relaxed));
        GUARDED_END.with(|e| e.store(previous.1, Ordering::Relaxed));
        if faulted {
            self.poisoned.store(true, Ordering::Relaxed);
            return Err(Shrunk);
        }
        Ok(result)
    }
}

/// Reads from a [`ReadMap`] inside [`ReadMap::read`]: bounds-checked, copying,
/// never handing out a reference into the shared bytes (another process
/// writes them concurrently).
#[derive(Debug)]
pub struct MapView<'a> {
    map: &'a ReadMap,
}

impl MapView<'_> {
    fn ptr(&self, offset: usize, len: usize, align: usize) -> Option<*const u8> {
        let end = offset.checked_add(len)?;
        if end > self.map.map.len() || !offset.is_multiple_of(align) {
            return None;
        }
        // SAFETY: `offset + len <= map.len()`, so the pointer stays inside
        // the mapping (one past its end at most, for an empty range).
        Some(unsafe { self.map.map.as_ptr().add(offset) })
    }

    /// The 4-byte little-endian word at `offset` (4-aligned), with acquire
    /// ordering: the header's `used`, after which every byte up to it is
    /// written.
    #[must_use]
    pub fn u32_acquire(&self, offset: usize) -> Option<u32> {
        let ptr = self.ptr(offset, 4, 4)?;
        // SAFETY: `ptr` is in bounds and 4-aligned (checked by `ptr`; the
        // mapping is page-aligned), and the mapping lives as long as `self`.
        // The `&AtomicU32` lives only for the load: the bytes are written by
        // other processes, and an atomic load is the access that tolerates
        // that. The page is mapped PROT_READ, and a `Relaxed` load of 4
        // bytes is one the standard library promises works on read-only
        // memory (`guard_sigbus` holds reads back on targets where it does
        // not promise 8): it compiles to a plain load, never to a write.
        let used =
            unsafe { AtomicU32::from_ptr(ptr.cast::<u32>().cast_mut()) }.load(Ordering::Relaxed);
        // Acquire by a fence rather than an `Acquire` load, which is not
        // promised to work on read-only memory: it pairs with the writer's
        // release store of `used`, so the bytes below `used` read after this
        // are the ones written before it.
        fence(Ordering::Acquire);
        Some(used)
    }

    /// The 8-byte float at `offset` (8-aligned), as writers store it.
    #[must_use]
    pub fn f64_at(&self, offset: usize) -> Option<f64> {
        let ptr = self.ptr(offset, 8, 8)?;
        // SAFETY: in bounds and 8-aligned (checked by `ptr`), inside a
        // mapping that lives as long as `self`; the `&AtomicU64` lives only
        // for the load. A `Relaxed` 8-byte load works on this read-only map
        // on every target `guard_sigbus` lets read it (see
        // `READ_ONLY_ATOMIC_LOADS`). Writers store values as whole aligned
        // words (Python's `struct.pack_into` of an aligned double is one
        // 8-byte store, the Rust writer's are atomic), so the load sees the
        // old value or the new one, never a mix.
        Some(f64::from_bits(
            unsafe { AtomicU64::from_ptr(ptr as *mut u64) }.load(Ordering::Relaxed),
        ))
    }

    /// The 8-byte little-endian word at `offset` (8-aligned), loaded whole
    /// with `Relaxed` ordering: a count or bucket word of a native
    /// histogram record, which writers store and add to atomically.
    #[must_use]
    #[inline]
    pub fn u64_at(&self, offset: usize) -> Option<u64> {
        let ptr = self.ptr(offset, 8, 8)?;
        // SAFETY: as in `f64_at`: in bounds and 8-aligned, inside a mapping
        // that lives as long as `self`, loaded by a `Relaxed` 8-byte atomic
        // load, which works on this read-only map on every target
        // `guard_sigbus` lets read it.
        Some(unsafe { AtomicU64::from_ptr(ptr as *mut u64) }.load(Ordering::Relaxed))
    }

    /// Calls `each` with the `n` pairs of 8-byte words from `offset`
    /// (8-aligned) on, in order, each word loaded whole as
    /// [`MapView::u64_at`] loads it, until `each` returns `false`. `None`,
    /// and nothing loaded, if any of them lies out of bounds; else whether
    /// `each` went through all of them. One bounds check for the lot: a
    /// reader of a record's buckets loads tens of pairs.
    #[inline]
    pub fn u64_pairs_at(
        &self,
        offset: usize,
        n: usize,
        mut each: impl FnMut(u64, u64) -> bool,
    ) -> Option<bool> {
        let ptr = self.ptr(offset, n.checked_mul(16)?, 8)?;
        for k in 0..n {
            // SAFETY: `offset` is 8-aligned and `offset + 16 * n <=
            // map.len()` (checked by `ptr`), so both words of pair `k < n`
            // lie in the mapping, 8-aligned; loaded as in `u64_at`, by
            // `Relaxed` 8-byte atomic loads living only for the load.
            let (first, second) = unsafe {
                let at = ptr.add(16 * k) as *mut u64;
                (
                    AtomicU64::from_ptr(at).load(Ordering::Relaxed),
                    AtomicU64::from_ptr(at.add(1)).load(Ordering::Relaxed),
                )
            };
            if !each(first, second) {
                return Some(false);
            }
        }
        Some(true)
    }

    /// Appends `len` bytes at `offset` to `out`; `false` if out of bounds.
    pub fn copy_to(&self, offset: usize, len: usize, out: &mut Vec<u8>) -> bool {
        let Some(ptr) = self.ptr(offset, len, 1) else {
            return false;
        };
        out.reserve(len);
        // SAFETY: `len` bytes from `ptr` lie in the mapping (checked by
        // `ptr`), which lives as long as `self`; `out` has room for them past
        // its length (reserved above) and is this process's heap memory, so
        // the two cannot overlap, and `set_len` covers exactly the bytes
        // written.
        //
        // Other processes may write these bytes during the copy (a worker
        // updating a value in a range copied with its key). That is sound:
        // no reference to the shared bytes exists, only this raw copy, and
        // the result is plain bytes in our own buffer, where any bit pattern
        // is a valid `u8`. What a racing write can do is leave a torn word
        // in the copy: part old, part new value. Callers copy keys and
        // framing, which writers never change once `used` covers them
        // (entries are appended, then published by `used`), and read
        // values they need to be whole with `f64_at`; a torn value in a
        // copied range is one sample from mid-update, no worse than reading
        // it a moment earlier or later, and the next read sees it whole.
        // One caveat, by the letter of Rust's memory model: a writer in
        // this same process (a `ValueSlot` of the same file) storing
        // atomically during this non-atomic copy is a data race there, even
        // though the machine does exactly what is described above (a byte
        // copy, no write to the map). A copy by per-word `Relaxed` loads
        // would close that gap at some cost per byte.
        unsafe {
            std::ptr::copy_nonoverlapping(ptr, out.as_mut_ptr().add(out.len()), len);
            out.set_len(out.len() + len);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn reads_and_survives_a_file_shrinking_under_the_map() {
        assert!(guard_sigbus());
        // Three of the system's pages (4 KiB or 64 KiB): after the cut the
        // third is wholly past the end of the file, which is what faults.
        let page = crate::page_size();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("counter_1.db");
        let mut file = File::create(&path).unwrap();
        let mut bytes = vec![0u8; 3 * page];
        bytes[..4].copy_from_slice(&24u32.to_le_bytes());
        let at = 2 * page;
        bytes[at..at + 8].copy_from_slice(&2.5f64.to_bits().to_le_bytes());
        file.write_all(&bytes).unwrap();
        let map = ReadMap::new(&File::open(&path).unwrap(), bytes.len()).unwrap();
        let read = map
            .read(|view| {
                (
                    view.u32_acquire(0),
                    view.f64_at(at),
                    view.f64_at(at - 1),
                    view.u64_at(at),
                    view.u64_at(3 * page - 4),
                )
            })
            .unwrap();
        let bits = 2.5f64.to_bits();
        assert_eq!(read, (Some(24), Some(2.5), None, Some(bits), None));

        // Someone truncates the file: the page at `at` is past the end now.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(100)
            .unwrap();
        assert_eq!(map.read(|view| view.f64_at(at)), Err(Shrunk));
        // Poisoned for good, even for pages still backed.
        assert_eq!(map.read(|view| view.u32_acquire(0)), Err(Shrunk));

        // A fresh map of what is left reads fine.
        let again = ReadMap::new(&File::open(&path).unwrap(), 100).unwrap();
        assert_eq!(again.read(|view| view.u32_acquire(0)), Ok(Some(24)));
    }

    #[test]
    fn copies_are_bounds_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        std::fs::write(&path, b"0123456789abcdef").unwrap();
        let map = ReadMap::new(&File::open(&path).unwrap(), 16).unwrap();
        let mut out = b"<".to_vec();
        let copied = map
            .read(|view| (view.copy_to(4, 6, &mut out), view.copy_to(10, 7, &mut out)))
            .unwrap();
        assert_eq!(copied, (true, false));
        assert_eq!(out, b"<456789");
    }

    #[test]
    fn pair_loads_are_bounds_checked_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.native");
        let words: Vec<u8> = (1..=6u64).flat_map(u64::to_le_bytes).collect();
        std::fs::write(&path, &words).unwrap();
        let map = ReadMap::new(&File::open(&path).unwrap(), words.len()).unwrap();
        let loads = map
            .read(|view| {
                let mut out = vec![0];
                let mut push = |a, b| {
                    out.extend([a, b]);
                    true
                };
                let all = view.u64_pairs_at(8, 2, &mut push);
                // The third pair would end past the end: none is loaded.
                let past_end = view.u64_pairs_at(16, 3, &mut push);
                let misaligned = view.u64_pairs_at(4, 1, &mut push);
                let none = view.u64_pairs_at(48, 0, &mut push);
                let mut first_only = Vec::new();
                let stopped = view.u64_pairs_at(0, 3, |a, _| {
                    first_only.push(a);
                    false
                });
                (out, first_only, [all, past_end, misaligned, none, stopped])
            })
            .unwrap();
        assert_eq!(
            loads,
            (
                vec![0, 2, 3, 4, 5],
                vec![1],
                [Some(true), None, None, Some(true), Some(false)]
            )
        );
    }

    #[test]
    fn a_fault_outside_any_guard_is_not_swallowed() {
        // The fault must kill a process, so the test runs itself again as a
        // child (selected by an environment variable) and checks how it died.
        const CHILD: &str = "MULTIPROM_READ_MAP_UNGUARDED_FAULT";
        if let Some(path) = std::env::var_os(CHILD) {
            assert!(guard_sigbus());
            let file = File::open(&path).unwrap();
            // SAFETY (test): the map is only read through a raw pointer.
            let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(0)
                .unwrap();
            // SAFETY (test): a deliberate load past the end of the file,
            // with no guard active.
            let byte = unsafe { std::ptr::read_volatile(map.as_ptr().add(4096)) };
            std::process::exit(i32::from(byte));
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        std::fs::write(&path, vec![1u8; 8192]).unwrap();
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "read_map::tests::a_fault_outside_any_guard_is_not_swallowed",
                "--nocapture",
            ])
            .env(CHILD, &path)
            .output()
            .unwrap()
            .status;
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGBUS), "{status:?}");
    }
}
