//! What `/proc` says about the processes behind a directory's files: whether
//! a pid is alive, how far the kernel's pid counter has moved, and which
//! processes hold a file open or mapped.
//!
//! All of it describes *this* pid namespace. A collector in another namespace
//! (another container without `shareProcessNamespace`) sees other processes
//! or none under the writers' pids: a pid number is never proof that a
//! file's writer is gone (see `crate::liveness`, which asks the kernel
//! first and falls back to [`holders`] only where every process can be
//! looked at).

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use multiprom_format::{write_lease, FileIdentity, WriteLease};

use crate::proc_stat::ProcStat;
use rustix::io::Errno;
use rustix::process::{test_kill_process, Pid};

/// Whether a process exists, as far as this pid namespace can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessState {
    /// Running (or stopped, or another user's process).
    Alive,
    /// Exited but not yet collected by its parent.
    Zombie,
    /// No such process.
    Gone,
    /// Not a pid that can be checked (0, or above the pid range).
    Unknown,
}

impl ProcessState {
    /// Whether the process has exited (gone or a zombie).
    #[must_use]
    pub const fn is_dead(self) -> bool {
        matches!(self, ProcessState::Zombie | ProcessState::Gone)
    }

    /// `alive`, `zombie`, `dead` or `unknown`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            ProcessState::Alive => "alive",
            ProcessState::Zombie => "zombie",
            ProcessState::Gone => "dead",
            ProcessState::Unknown => "unknown",
        }
    }
}

/// Checks whether process `pid` exists in this pid namespace.
///
/// * `kill(pid, 0)` failing with `ESRCH`: no such process, gone.
/// * A zombie (`/proc/<pid>/stat` state `Z` or `X`) has exited and only waits
///   for its parent to collect its status.
/// * `EPERM` means the process exists (another user's): alive.
///
/// ```
/// use multiprom_maintain::{process_state, ProcessState};
/// assert_eq!(process_state(std::process::id()), ProcessState::Alive);
/// assert_eq!(process_state(0), ProcessState::Unknown);
/// ```
#[must_use]
pub fn process_state(pid: u32) -> ProcessState {
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return ProcessState::Unknown;
    };
    match test_kill_process(pid) {
        Ok(()) | Err(Errno::PERM) => {
            if is_zombie(pid.as_raw_nonzero().get()) {
                ProcessState::Zombie
            } else {
                ProcessState::Alive
            }
        }
        Err(Errno::SRCH) => ProcessState::Gone,
        // Anything else: do not guess "dead".
        Err(_) => ProcessState::Alive,
    }
}

/// Whether no process of this pid namespace has `pid`: `kill(pid, 0)`
/// fails with `ESRCH`. One system call, for checks made on every scrape; a
/// zombie is not gone (see [`process_state`]).
#[must_use]
pub fn is_gone(pid: u32) -> bool {
    i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .is_some_and(|pid| test_kill_process(pid) == Err(Errno::SRCH))
}

/// Whether `/proc/<pid>/stat` shows a zombie (`Z`) or dead (`X`) state. No
/// `/proc` (or a race with the process going away): not a zombie, so the
/// next check decides.
fn is_zombie(pid: i32) -> bool {
    ProcStat::read(pid).is_some_and(|stat| stat.has_exited())
}

/// The pid most recently handed out in this pid namespace (the last field of
/// `/proc/loadavg`), or `None` where `/proc` does not say.
///
/// The kernel hands out pids in increasing order and wraps at `pid_max`, so
/// between two readings `a` and `b` exactly the pids in `PidWindow { a, b }`
/// can have been given to new processes (unless more than `pid_max` processes
/// were created in between).
#[must_use]
pub(crate) fn last_allocated_pid() -> Option<u32> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_ascii_whitespace().nth(4)?.parse().ok()
}

/// The pids the kernel may have handed out between two readings of
/// [`last_allocated_pid`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PidWindow {
    /// The earlier reading.
    pub(crate) before: u32,
    /// The later reading.
    pub(crate) after: u32,
}

impl PidWindow {
    /// Whether a process created between the two readings may have `pid`
    /// (the counter wraps around at `pid_max`).
    #[must_use]
    pub(crate) fn may_have_reused(self, pid: u32) -> bool {
        if self.after >= self.before {
            self.before < pid && pid <= self.after
        } else {
            pid > self.before || pid <= self.after
        }
    }
}

/// Which of `files` some process has open or mapped for writing.
///
/// Only a writer's hold counts: prometheus_client's writer keeps its file
/// open for reading and writing and maps it shared and writable, as
/// multiprom's writers do. A reader (Python's collector opening each file
/// for a moment, another multiprom mapping them read-only) holds files too,
/// but can never change them; counting it would keep every file alive
/// for as long as any collector runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Holders {
    /// The files that are open for writing (`/proc/*/fd`, `/proc/*/fdinfo`)
    /// or mapped shared and writable (`/proc/*/maps`) by a process that
    /// could be inspected, each with one such process.
    pub(crate) held: HashMap<FileIdentity, u32>,
    /// Processes whose fds or maps could not be read (another user's,
    /// without the privilege to look): they might hold any of the files.
    /// Kernel threads and zombies hold no file and are not counted.
    pub(crate) uninspectable: usize,
    /// Their pids.
    pub(crate) uninspectable_pids: HashSet<u32>,
}

impl Holders {
    /// Whether some process holds `file` for writing.
    pub(crate) fn holds(&self, file: &FileIdentity) -> bool {
        self.held.contains_key(file)
    }
}

/// Looks through every process's open files and memory maps for `files`
/// held for writing (see [`Holders`]).
///
/// This costs a directory listing per process and a read of its maps, so it
/// runs off any scrape: in the liveness walks and before a file is removed
/// or folded. A process that exits while being looked at holds nothing.
pub(crate) fn holders(files: &HashSet<FileIdentity>) -> io::Result<Holders> {
    let mut found = Holders::default();
    if files.is_empty() {
        return Ok(found);
    }
    let me = std::process::id();
    for entry in std::fs::read_dir("/proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            // Our own reads are short-lived preads and read-only maps,
            // never a writer's hold.
            continue;
        }
        match process_holds(pid, files, &mut found.held) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {} // exited meanwhile
            Err(_) if holds_nothing(pid) => {}
            Err(_) => {
                found.uninspectable += 1;
                found.uninspectable_pids.insert(pid);
            }
        }
        if found.held.len() == files.len() {
            break;
        }
    }
    Ok(found)
}

/// Which of `files` (path and identity) must be taken as held: those some
/// process has open or mapped for writing, as the kernel says
/// ([`write_lease`]); for a file it will not answer for, as `/proc` says,
/// and every such file where some process cannot be inspected (it might
/// hold any) or `/proc` cannot be read. What a file is checked against
/// just before it is moved aside, removed or folded.
pub(crate) fn busy(files: &[(PathBuf, FileIdentity)]) -> HashSet<FileIdentity> {
    let mut held = HashSet::new();
    let mut unanswered = HashSet::new();
    for (path, id) in files {
        match write_lease(path) {
            WriteLease::NoWriter => {}
            WriteLease::Writer => {
                held.insert(*id);
            }
            WriteLease::Unknown(_) => {
                unanswered.insert(*id);
            }
        }
    }
    if !unanswered.is_empty() {
        match holders(&unanswered) {
            Ok(found) if found.uninspectable == 0 => held.extend(found.held.into_keys()),
            _ => held.extend(unanswered),
        }
    }
    held
}

fn process_holds(
    pid: u32,
    files: &HashSet<FileIdentity>,
    held: &mut HashMap<FileIdentity, u32>,
) -> io::Result<()> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    for line in maps.lines() {
        if let Some(id) = mapped_for_writing(line) {
            if files.contains(&id) {
                held.entry(id).or_insert(pid);
            }
        }
    }
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
        let Ok(fd) = fd else { continue };
        // `stat` through the magic link reaches the open file itself, even
        // one whose name was removed.
        let Ok(id) = FileIdentity::of(&fd.path()) else {
            continue;
        };
        if files.contains(&id) && !held.contains_key(&id) && open_for_writing(pid, &fd.file_name())
        {
            held.insert(id, pid);
        }
    }
    Ok(())
}

/// Whether fd `fd` of `pid` was opened for writing: the access mode in
/// `/proc/<pid>/fdinfo/<fd>`'s `flags:` (octal). Unreadable: taken as
/// writing, so a file is never taken for free by mistake.
fn open_for_writing(pid: u32, fd: &std::ffi::OsStr) -> bool {
    let Ok(info) = std::fs::read_to_string(
        Path::new("/proc")
            .join(pid.to_string())
            .join("fdinfo")
            .join(fd),
    ) else {
        return true;
    };
    let flags = info
        .lines()
        .find_map(|line| line.strip_prefix("flags:"))
        .and_then(|flags| u32::from_str_radix(flags.trim(), 8).ok());
    // O_ACCMODE: 0 is O_RDONLY.
    flags.is_none_or(|flags| flags & 0o3 != 0)
}

/// Whether `pid` is a kernel thread or a zombie (from `/proc/<pid>/stat`,
/// readable for every process): neither holds a user's file, so neither
/// makes the files' holders unknown when its fds cannot be read.
fn holds_nothing(pid: u32) -> bool {
    ProcStat::read(pid).is_some_and(|stat| stat.has_exited() || stat.is_kernel_thread())
}

/// The file behind one `/proc/<pid>/maps` line,
/// `start-end perms offset MAJOR:MINOR INODE [path]` (hex device numbers),
/// if it is mapped shared and writable (`rw-s`): a writer's map.
fn mapped_for_writing(line: &str) -> Option<FileIdentity> {
    let mut fields = line.split_ascii_whitespace();
    let perms = fields.nth(1)?.as_bytes();
    if perms.get(1) != Some(&b'w') || perms.get(3) != Some(&b's') {
        return None;
    }
    let dev = fields.nth(1)?;
    let ino: u64 = fields.next()?.parse().ok()?;
    if ino == 0 {
        return None; // anonymous memory
    }
    let (major, minor) = dev.split_once(':')?;
    let major = u32::from_str_radix(major, 16).ok()?;
    let minor = u32::from_str_radix(minor, 16).ok()?;
    Some(FileIdentity {
        dev: rustix::fs::makedev(major, minor),
        ino,
    })
}

/// A `python3` process that maps some files and holds others open until it
/// is dropped: what [`holders`] must find (as a writer holds them), or not
/// (as a reader holds them), for this crate's tests.
#[cfg(test)]
pub(crate) struct TestHolder {
    child: std::process::Child,
}

#[cfg(test)]
impl TestHolder {
    /// Returns once the process maps each of `mapped` (its first page,
    /// shared and writable) and holds each of `open` open for reading and
    /// writing, as prometheus_client's writer does.
    pub(crate) fn start(mapped: &[&std::path::Path], open: &[&std::path::Path]) -> TestHolder {
        TestHolder::hold("write", mapped, open)
    }

    /// As [`TestHolder::start`], read-only: as a collector holds them.
    pub(crate) fn reading(mapped: &[&std::path::Path], open: &[&std::path::Path]) -> TestHolder {
        TestHolder::hold("read", mapped, open)
    }

    fn hold(how: &str, mapped: &[&std::path::Path], open: &[&std::path::Path]) -> TestHolder {
        let script = "import mmap,sys,time\n\
            w=sys.argv[1]=='write'; n=int(sys.argv[2]); keep=[]\n\
            for p in sys.argv[3:3+n]:\n    f=open(p,'r+b' if w else 'rb'); keep.append(mmap.mmap(f.fileno(),4096,access=mmap.ACCESS_WRITE if w else mmap.ACCESS_READ)); f.close()\n\
            for p in sys.argv[3+n:]:\n    keep.append(open(p,'r+b' if w else 'rb'))\n\
            print('ready',flush=True); sys.stdin.read()";
        let mut child = std::process::Command::new("python3")
            .args(["-c", script, how])
            .arg(mapped.len().to_string())
            .args(mapped)
            .args(open)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line.trim(), "ready");
        TestHolder { child }
    }
}

#[cfg(test)]
impl Drop for TestHolder {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_window_covers_the_pids_handed_out_in_it_wrapping_included() {
        let moved = PidWindow {
            before: 100,
            after: 200,
        };
        assert!(moved.may_have_reused(150) && moved.may_have_reused(200));
        assert!(!moved.may_have_reused(100) && !moved.may_have_reused(201));
        let wrapped = PidWindow {
            before: 4_000_000,
            after: 500,
        };
        assert!(wrapped.may_have_reused(4_100_000) && wrapped.may_have_reused(400));
        assert!(!wrapped.may_have_reused(600));
        assert!(!PidWindow {
            before: 7,
            after: 7
        }
        .may_have_reused(7));
    }

    #[test]
    fn zombies_count_as_dead() {
        // A child that exits and is not waited for is a zombie.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let mut state = process_state(pid);
        for _ in 0..500 {
            if state != ProcessState::Alive {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            state = process_state(pid);
        }
        assert_eq!(state, ProcessState::Zombie);
        assert!(state.is_dead());
        child.wait().unwrap();
        assert_eq!(process_state(pid), ProcessState::Gone);
    }

    #[test]
    fn unknown_pids_are_never_dead() {
        assert_eq!(process_state(0), ProcessState::Unknown);
        assert_eq!(process_state(u32::MAX), ProcessState::Unknown);
        assert!(!ProcessState::Unknown.is_dead());
        // pid 1 exists in every namespace (and may be another user's: EPERM).
        assert_eq!(process_state(1), ProcessState::Alive);
    }

    #[test]
    fn the_pid_counter_moves_when_a_process_starts() {
        let before = last_allocated_pid().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let after = last_allocated_pid().unwrap();
        assert!(PidWindow { before, after }.may_have_reused(pid));
    }

    #[test]
    fn finds_a_file_another_process_maps_or_holds_open() {
        let dir = tempfile::tempdir().unwrap();
        let mapped = dir.path().join("mapped");
        let open = dir.path().join("open");
        let idle = dir.path().join("idle");
        for f in [&mapped, &open, &idle] {
            std::fs::write(f, [0u8; 4096]).unwrap();
        }
        let ids: HashSet<FileIdentity> = [&mapped, &open, &idle]
            .iter()
            .map(|f| FileIdentity::of(f).unwrap())
            .collect();
        let holder = TestHolder::start(&[&mapped], &[&open]);
        let found = holders(&ids).unwrap();
        drop(holder);
        // A reader's hold is none: it never changes a file.
        let reader = TestHolder::reading(&[&mapped], &[&open]);
        assert!(holders(&ids).unwrap().held.is_empty());
        drop(reader);
        let expected: HashSet<FileIdentity> = [&mapped, &open]
            .iter()
            .map(|f| FileIdentity::of(f).unwrap())
            .collect();
        assert_eq!(found.held.keys().copied().collect::<HashSet<_>>(), expected);
        assert!(holders(&ids).unwrap().held.is_empty());
    }

    #[test]
    fn maps_lines() {
        let id = mapped_for_writing(
            "7f1c2a000000-7f1c2a010000 rw-s 00000000 00:1a 1234567    /dev/shm/counter_1.db",
        );
        assert_eq!(
            id,
            Some(FileIdentity {
                dev: rustix::fs::makedev(0, 0x1a),
                ino: 1_234_567
            })
        );
        assert_eq!(
            mapped_for_writing("7ffd1000-7ffd2000 rw-p 00000000 00:00 0    [stack]"),
            None
        );
        // A reader's map (read-only) and a private copy are no writer's.
        assert_eq!(
            mapped_for_writing("7f1c2a000000-7f1c2a010000 r--s 00000000 00:1a 1234567  /x.db"),
            None
        );
        assert_eq!(
            mapped_for_writing("7f1c2a000000-7f1c2a010000 rw-p 00000000 00:1a 1234567  /x.db"),
            None
        );
        assert_eq!(mapped_for_writing("garbage"), None);
    }
}
