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
/// a single-threaded `main` (an example, a doctest, a test target with
/// `harness = false`).
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
    let threads = std::fs::read_dir("/proc/self/task")?.count();
    if threads != 1 {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("refusing to fork a process with {threads} threads"),
        ));
    }
    // SAFETY (of the fork in `fork_and_wait`): the process has exactly one
    // thread (checked above; only this thread could start another, and it is
    // here), so no lock is held by a thread that will be missing in the
    // child, and the child may run arbitrary code.
    fork_and_wait(child, None)
}

/// [`run_in_forked_child`] in a process that runs other threads besides the
/// calling one: exactly the threads named in `others` (names as
/// `/proc/self/task/*/comm` shows them, that is cut to 15 bytes), no more
/// and no fewer, or it refuses. The child is killed with `SIGKILL` if it has
/// not ended within `timeout`.
///
/// Only the calling thread goes on in the child. A lock that one of
/// `others` held at the fork stays held there, so the child must take no
/// lock those threads may hold: it would wait for ever (hence the timeout;
/// a lock is never seen half-updated). The allocator's locks are safe: the C
/// library's `fork` takes them before and releases them after. This is for
/// testing code that is forked beside threads of its own, as a collector
/// is in a pre-fork server whose master runs other threads; the harness's threads are kept out by running the test
/// from a `main` of its own (`harness = false`).
///
/// ```
/// use std::time::Duration;
/// use multiprom_format::fork::run_in_forked_child_beside;
/// // A doctest's `main` runs alone: beside no other thread.
/// let hung = run_in_forked_child_beside(&[], Duration::from_millis(200), || loop {
///     std::thread::sleep(Duration::from_secs(1));
/// })?;
/// assert_eq!((hung.code, hung.signal), (None, Some(9)), "killed at the timeout");
/// let refused = run_in_forked_child_beside(&["no such thread"], Duration::from_secs(5), || 0);
/// assert_eq!(refused.unwrap_err().kind(), std::io::ErrorKind::Unsupported);
/// # Ok::<(), std::io::Error>(())
/// ```
#[cfg(any(test, feature = "test-util"))]
pub fn run_in_forked_child_beside(
    others: &[&str],
    timeout: std::time::Duration,
    child: impl FnOnce() -> i32,
) -> io::Result<ForkedChildExit> {
    let mut running = other_threads()?;
    let mut expected: Vec<String> = others.iter().map(|name| comm(name)).collect();
    running.sort();
    expected.sort();
    if running != expected {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("refusing to fork beside threads {running:?}; expected {expected:?}"),
        ));
    }
    // SAFETY (of the fork in `fork_and_wait`): the only other threads are
    // the ones the caller named and vouched for; the child takes none of
    // their locks, and one it did take would hang it, not corrupt it (the
    // timeout ends it then).
    fork_and_wait(child, Some(std::time::Instant::now() + timeout))
}

/// A thread name as the kernel keeps it: at most 15 bytes.
#[cfg(any(test, feature = "test-util"))]
fn comm(name: &str) -> String {
    let mut end = name.len().min(15);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name[..end].to_owned()
}

/// The names of this process's threads other than the calling one.
#[cfg(any(test, feature = "test-util"))]
fn other_threads() -> io::Result<Vec<String>> {
    // `/proc/thread-self` links to `<pid>/task/<tid>` of the calling thread.
    let me = std::fs::read_link("/proc/thread-self")?;
    let mut names = Vec::new();
    for task in std::fs::read_dir("/proc/self/task")? {
        let task = task?;
        if Some(task.file_name().as_os_str()) == me.file_name() {
            continue;
        }
        match std::fs::read_to_string(task.path().join("comm")) {
            Ok(name) => names.push(name.trim_end_matches('\n').to_owned()),
            // The thread ended since the listing.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(names)
}

/// Forks, runs `child` in the child and waits for it, killing it once
/// `deadline` has passed. The callers check the threads the fork leaves
/// behind.
#[cfg(any(test, feature = "test-util"))]
fn fork_and_wait(
    child: impl FnOnce() -> i32,
    deadline: Option<std::time::Instant>,
) -> io::Result<ForkedChildExit> {
    use std::io::Write as _;
    // Buffered output would otherwise be written by both processes.
    let _ = io::stdout().flush();
    let _ = io::stderr().flush();
    // SAFETY: the callers have checked which threads run beside this one
    // (see theirs); `fork` itself has no other precondition.
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
    let mut deadline = deadline;
    let mut status: libc::c_int = 0;
    loop {
        let flags = if deadline.is_some() { libc::WNOHANG } else { 0 };
        // SAFETY: `status` is a valid, writable c_int and `pid` is our child,
        // not yet waited for.
        let rc = unsafe { libc::waitpid(pid, &mut status, flags) };
        if rc == pid {
            break;
        }
        if rc == 0 {
            // Still running (only with a deadline, which WNOHANG means).
            if deadline.is_some_and(|deadline| std::time::Instant::now() >= deadline) {
                // SAFETY: `pid` is our child, not yet waited for, so the
                // pid cannot have been reused for another process.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                deadline = None;
            } else {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            continue;
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

    #[test]
    fn refuses_to_fork_beside_threads_it_was_not_told_of() {
        // Beside this test's thread: the harness's main thread (named after
        // nothing we know) and perhaps other tests'.
        let err =
            run_in_forked_child_beside(&[], std::time::Duration::from_secs(5), || 0).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::Unsupported, "{err}");
        let names = other_threads().unwrap();
        assert!(!names.is_empty());
        assert_eq!(comm("notify-rs inotify loop"), "notify-rs inoti");
    }
}
