//! What the kernel charges per file for a cold collection's reads, and how
//! much of it batching the system calls through `io_uring` would save.
//!
//! A collector that has parsed nothing yet opens, examines, reads and closes
//! every `*.db` file of the directory. This program times that sequence over
//! all of a directory's files, four ways, in turn, several rounds. Each
//! file is read as the collector reads it: its used bytes (what its header
//! said when the directory was listed), at least 4 KiB, at most 64 KiB,
//! never past its end.
//!
//! * `syscalls`: `openat` (by name, in the directory held open), `fstat`,
//!   one `pread`, `close`: one thread, as each of the collector's reading
//!   threads does.
//! * `syscalls x2`: the same on two threads, each taking every other file:
//!   the kernel's part of a cold collection spread over two cores, the
//!   least wall time on two cores for any collector that opens and reads
//!   every file.
//! * `io_uring`: the same open, read and close linked in one ring, 64 files
//!   per submission, into direct descriptors (no file table), no `fstat`.
//! * `io_uring+statx`: as above plus a `statx` of each name, because the
//!   collector keeps each file's identity (device, inode, size, times) to
//!   tell a replaced file from a grown one, and a ring cannot `fstat` a
//!   direct descriptor.
//!
//! ```sh
//! cargo run --release -p multiprom-format --example open_read_cost -- DIR
//! ```
//!
//! Linux only. It reads the files and changes nothing.

// The ring's submissions point into buffers and names this function owns
// until the completions are reaped; that is the contract of `io_uring`'s
// `push`, which is `unsafe` for it.
#![allow(unsafe_code)]

use std::error::Error;
use std::ffi::CString;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use io_uring::{opcode, squeue, types, IoUring};

/// The least and the most read of one file, as the collector reads.
const MIN_READ: usize = 4096;
const MAX_READ: usize = 64 * 1024;
const BATCH: usize = 64;
const ROUNDS: usize = 15;
// `O_CLOEXEC` is refused for direct descriptors, which no `exec` can leak.
const FLAGS: i32 = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY;

fn main() -> Result<(), Box<dyn Error>> {
    let dir = std::env::args_os()
        .nth(1)
        .ok_or("usage: open_read_cost DIR")?;
    let mut names = Vec::new();
    let mut lens = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let entry = entry?;
        let name = entry.file_name().into_encoded_bytes();
        if name.ends_with(b".db") {
            // A file too short to say (a writer still creating it) is
            // read as the collector would read it first: one page. No read
            // goes past the end: a short read would break the ring's links.
            let file = File::open(entry.path())?;
            let mut used = [0u8; 4];
            let len = match file.read_exact_at(&mut used, 0) {
                Ok(()) => usize::try_from(u32::from_le_bytes(used)).unwrap_or(MAX_READ),
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => MIN_READ,
                Err(e) => return Err(e.into()),
            };
            let size = usize::try_from(file.metadata()?.len()).unwrap_or(MAX_READ);
            lens.push(len.clamp(MIN_READ, MAX_READ).min(size));
            names.push(CString::new(name)?);
        }
    }
    if names.is_empty() {
        return Err("no *.db files in that directory".into());
    }
    let dir = File::open(&dir)?;
    let dirfd = dir.as_raw_fd();

    let mut ring = IoUring::builder()
        .setup_single_issuer()
        .setup_coop_taskrun()
        .build((BATCH * 4) as u32)?;
    ring.submitter().register_files_sparse(BATCH as u32)?;
    let mut bufs = vec![vec![0u8; MAX_READ]; BATCH];
    // SAFETY: `statx` is plain data; all zeroes is a valid value.
    let mut stats = vec![unsafe { std::mem::zeroed::<libc::statx>() }; BATCH];

    let files: Vec<(&CString, usize)> = names.iter().zip(lens.iter().copied()).collect();
    let mut times: [Vec<Duration>; 4] = Default::default();
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let a = syscalls(dirfd, files.iter().copied())?;
        times[0].push(start.elapsed());
        let start = Instant::now();
        let b = std::thread::scope(|scope| {
            let other = scope.spawn(|| {
                syscalls(dirfd, files.iter().copied().skip(1).step_by(2)).map_err(|e| e.to_string())
            });
            let here = syscalls(dirfd, files.iter().copied().step_by(2)).map_err(|e| e.to_string());
            let other = other
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            Ok::<_, String>(here? + other?)
        })?;
        times[1].push(start.elapsed());
        let start = Instant::now();
        let c = ring_reads(&mut ring, dirfd, &files, &mut bufs, None)?;
        times[2].push(start.elapsed());
        let start = Instant::now();
        let d = ring_reads(&mut ring, dirfd, &files, &mut bufs, Some(&mut stats))?;
        times[3].push(start.elapsed());
        if [b, c, d] != [a; 3] {
            return Err(
                format!("the ways read different amounts: {a}, {b}, {c}, {d} bytes").into(),
            );
        }
    }
    println!(
        "{} files, {ROUNDS} rounds; per file: best (median)",
        names.len()
    );
    for (label, mut t) in ["syscalls", "syscalls x2", "io_uring", "io_uring+statx"]
        .into_iter()
        .zip(times)
    {
        t.sort();
        let per_file = |d: Duration| d.as_secs_f64() * 1e6 / names.len() as f64;
        println!(
            "{label:>15}: {:5.2} us ({:5.2} us), {:6.2} ms for all",
            per_file(t[0]),
            per_file(t[t.len() / 2]),
            t[0].as_secs_f64() * 1e3
        );
    }
    Ok(())
}

/// Opens, examines, reads and closes `files` (name, bytes to read) in turn;
/// the bytes read.
fn syscalls<'a>(
    dirfd: i32,
    files: impl Iterator<Item = (&'a CString, usize)>,
) -> Result<usize, Box<dyn Error>> {
    let mut buf = vec![0u8; MAX_READ];
    let mut total = 0;
    for (name, len) in files {
        let failed = |what: &str| {
            let err = std::io::Error::last_os_error();
            format!("{what} {}: {err}", name.to_string_lossy())
        };
        // SAFETY: `name` is NUL-terminated, `st` and `buf` are writable for
        // the lengths given, and `fd` is closed once, here.
        unsafe {
            let fd = libc::openat(dirfd, name.as_ptr(), FLAGS | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(failed("cannot open").into());
            }
            let mut st: libc::stat = std::mem::zeroed();
            // The error is taken before `close`, which may set `errno` too.
            let result = if libc::fstat(fd, &mut st) < 0 {
                Err(failed("cannot fstat"))
            } else {
                match libc::pread(fd, buf.as_mut_ptr().cast(), len, 0) {
                    got if got < 0 => Err(failed("cannot read")),
                    got => Ok(got as usize),
                }
            };
            libc::close(fd);
            total += result?;
        }
    }
    Ok(total)
}

fn ring_reads(
    ring: &mut IoUring,
    dirfd: i32,
    files: &[(&CString, usize)],
    bufs: &mut [Vec<u8>],
    mut stats: Option<&mut Vec<libc::statx>>,
) -> Result<usize, Box<dyn Error>> {
    const OPEN: u64 = 1;
    const READ_DONE: u64 = 2;
    let mut total = 0;
    for chunk in files.chunks(BATCH) {
        let mut pushed = 0;
        {
            let mut sq = ring.submission();
            for (slot, (&(name, len), buf)) in chunk.iter().zip(bufs.iter_mut()).enumerate() {
                let fixed = types::Fixed(slot as u32);
                let target = types::DestinationSlot::try_from_slot_target(slot as u32)
                    .map_err(|_| "slot out of range")?;
                let open = opcode::OpenAt::new(types::Fd(dirfd), name.as_ptr())
                    .flags(FLAGS)
                    .file_index(Some(target))
                    .build()
                    .flags(squeue::Flags::IO_LINK)
                    .user_data(OPEN);
                let read = opcode::Read::new(fixed, buf.as_mut_ptr(), len.min(buf.len()) as u32)
                    .offset(0)
                    .build()
                    .flags(squeue::Flags::IO_LINK)
                    .user_data(READ_DONE);
                let close = opcode::Close::new(fixed).build();
                // SAFETY: the names, buffers and `statx` records outlive the
                // `submit_and_wait` below, which reaps every entry pushed
                // here before they are touched again.
                unsafe {
                    if let Some(stats) = stats.as_deref_mut() {
                        let st = &mut stats[slot] as *mut libc::statx;
                        let statx = opcode::Statx::new(types::Fd(dirfd), name.as_ptr(), st.cast())
                            .flags(libc::AT_SYMLINK_NOFOLLOW)
                            .mask(libc::STATX_BASIC_STATS)
                            .build();
                        sq.push(&statx)?;
                        pushed += 1;
                    }
                    sq.push(&open)?;
                    sq.push(&read)?;
                    sq.push(&close)?;
                }
                pushed += 3;
            }
        }
        ring.submit_and_wait(pushed)?;
        let mut reaped = 0;
        for done in ring.completion() {
            reaped += 1;
            if done.result() < 0 {
                let err = std::io::Error::from_raw_os_error(-done.result());
                let first = chunk
                    .first()
                    .map(|(n, _)| n.to_string_lossy())
                    .unwrap_or_default();
                return Err(format!(
                    "an operation on one of the {} files from {first} on failed: {err}",
                    chunk.len()
                )
                .into());
            }
            if done.user_data() == READ_DONE {
                total += done.result() as usize;
            }
        }
        if reaped != pushed {
            return Err(format!("{reaped} completions for {pushed} submissions").into());
        }
    }
    Ok(total)
}
