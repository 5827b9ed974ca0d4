//! Fork detection for writers, and forking a single-threaded process.
//!
//! A process made by `fork()` inherits its parent's shared mappings: a store
//! through an inherited [`crate::ValueSlot`] would land in the parent's file.
//! Python notices the fork by comparing `os.getpid()` on every update; a
//! `getpid` system call per update is far too slow for Rust's atomic-cost
//! updates, so a `pthread_atfork` child handler bumps [`fork_generation`]
//! instead and writers compare that (one relaxed atomic load) before storing.
//!
//! Only forks made through libc's `fork()` (which `nix`, `libc::fork`, Python
//! extensions and `std::process::Command` all use) run the handler; a raw
//! `clone` system call does not.
#![allow(unsafe_code)]

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Forks seen by this process's ancestry since [`watch_forks`] was first
/// called: 0 in the original process, 1 in its children, 2 in grandchildren.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The `pthread_atfork` child handler. Runs in the child only, before `fork()`
/// returns there, so it must be async-signal-safe: one atomic add is.
extern "C" fn bump_generation_in_child() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// Starts counting forks (idempotent) and returns the current generation.
///
/// Call this before handing out any slot whose users compare
/// [`fork_generation`]; forks before the first call are not counted.
pub fn watch_forks() -> io::Result<u64> {
    static INSTALLED: OnceLock<i32> = OnceLock::new();
    let rc = *INSTALLED.get_or_init(|| {
        // SAFETY: registers a handler with the C library. The handler is a
        // plain `extern "C" fn` that lives for the whole program and only does
        // an atomic add, which is async-signal-safe as a fork child handler
        // must be. `OnceLock` makes sure it is registered once.
        unsafe { libc::pthread_atfork(None, None, Some(bump_generation_in_child)) }
    });
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(fork_generation())
}

/// The current fork generation (see [`watch_forks`]). A writer that recorded
/// the generation when it made a slot, and now sees a different one, is in a
/// forked child and must not store through that slot.
#[inline]
#[must_use]
pub fn fork_generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

/// How a child run by [`run_in_forked_child`] ended.
#[cfg(any(test, feature = "test-util"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForkedChildExit {
    /// The child's pid.
    pub pid: u32,
    /// Its exit code, if it exited.
    pub code: Option<i32>,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
}

#[cfg(any(test, feature = "test-util"))]
impl ForkedChildExit {
    /// Whether the child exited with code 0.
    #[must_use]
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// Forks this process, runs `child` in the child (its return value is the exit
/// code; a panic exits with 101) and waits for it.
///
/// Refuses (with [`io::ErrorKind::Unsupported`]) unless the process has exactly
/// one thread: after forking a multi-threaded process the child may only call
/// async-signal-safe functions, because locks held by the other threads stay
/// locked forever. With one thread nothing is held, so the child may run any
/// code. This exists to test fork safety end to end without `unsafe` outside
/// this crate; test binaries run their tests on extra threads, so call it from
/// a single-threaded `main` (an example, a doctest).
///
/// Linux only (the thread count comes from `/proc/self/task`). Only with
/// the `test-util` feature: a tool for this workspace's tests.
///
/// ```
/// use multiprom_format::fork::{fork_generation, run_in_forked_child, watch_forks};
/// let parent = watch_forks()?;
/// let exit = run_in_forked_child(|| i32::from(fork_generation() != parent + 1))?;
/// assert!(exit.success(), "the child saw the wrong generation: {exit:?}");
/// assert_ne!(exit.pid, std::process::id());
/// assert_eq!(fork_generation(), parent);
/// # Ok::<(), std::io::Error>(())
/// ```
#[cfg(any(test, feature = "test-util"))]
pub fn run_in_forked_child(child: impl FnOnce() -> i32) -> io::Result<ForkedChildExit> {
    use std::io::Write as _;
    let threads = std::fs::read_dir("/proc/self/task")?.count();
    if threads != 1 {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("refusing to fork a process with {threads} threads"),
        ));
    }
    // Buffered output would otherwise be written by both processes.
    let _ = io::stdout().flush();
    let _ = io::stderr().flush();
    // SAFETY: the process has exactly one thread (checked above; only this
    // thread could start another, and it is here), so no lock is held by a
    // thread that will be missing in the child, and the child may run
    // arbitrary code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(101);
        let _ = io::stdout().flush();
        let _ = io::stderr().flush();
        // SAFETY: `_exit` ends the child without running the parent's atexit
        // handlers or unwinding back into the caller's stack.
        unsafe { libc::_exit(code) }
    }
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: `status` is a valid, writable c_int and `pid` is our child.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            break;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    Ok(ForkedChildExit {
        pid: pid.unsigned_abs(),
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_to_fork_a_multithreaded_process() {
        // The test harness runs this on its own thread, so there are two.
        let err = run_in_forked_child(|| 0).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::Unsupported, "{err}");
        assert_eq!(watch_forks().unwrap(), fork_generation());
    }
}
