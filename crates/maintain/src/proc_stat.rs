//! `/proc/<pid>/stat`: the one reader of it. The maintainer asks it whether
//! a process has exited (a zombie) or is a kernel thread; the endpoint's
//! `process_*` metrics ask it for times and memory. Read by hand: a few
//! fields of one line, where a `/proc` crate would bring far more.

use std::fmt::Display;

/// The fields of `/proc/<pid>/stat` multiprom reads, in its units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// The state letter (`R`, `S`, `Z`, ...).
    pub state: u8,
    /// The kernel's flags for the process (`PF_*`).
    pub flags: u64,
    /// User CPU time, in clock ticks...
    pub user_ticks: u64,
    /// ...and system CPU time.
    pub system_ticks: u64,
    /// When it started, in clock ticks after boot.
    pub start_ticks: u64,
    /// Virtual memory size, bytes.
    pub virtual_bytes: u64,
    /// Resident set size, pages.
    pub resident_pages: u64,
}

/// `PF_KTHREAD`: a kernel thread.
const KERNEL_THREAD: u64 = 0x0020_0000;

impl ProcStat {
    /// Reads `/proc/<pid>/stat` (`pid` a number, or `self`). `None` where
    /// `/proc` does not say (no `/proc`, the process gone).
    #[must_use]
    pub fn read(pid: impl Display) -> Option<ProcStat> {
        ProcStat::parse(&std::fs::read(format!("/proc/{pid}/stat")).ok()?)
    }

    /// Parses one `/proc/<pid>/stat` line: `pid (comm) state ppid ...`.
    /// `comm` may hold spaces and parentheses, so fields are counted from
    /// the last `)`. Fields (1-based, proc(5)): 3 state, 9 flags, 14 utime,
    /// 15 stime, 22 starttime, 23 vsize, 24 rss.
    #[must_use]
    pub fn parse(line: &[u8]) -> Option<ProcStat> {
        let close = line.iter().rposition(|&b| b == b')')?;
        let rest = std::str::from_utf8(line.get(close + 1..)?).ok()?;
        let mut fields = rest.split_ascii_whitespace();
        // Field 3 is the first after the comm; `field(n)` takes field `n`
        // from a position past the ones taken so far.
        let state = *fields.next()?.as_bytes().first()?;
        let mut at = 3;
        let mut field = |n: usize| -> Option<u64> {
            let value = fields.nth(n - at - 1)?;
            at = n;
            value.parse().ok()
        };
        Some(ProcStat {
            state,
            flags: field(9)?,
            user_ticks: field(14)?,
            system_ticks: field(15)?,
            start_ticks: field(22)?,
            virtual_bytes: field(23)?,
            resident_pages: field(24)?,
        })
    }

    /// Exited, and only waiting for its parent to collect its status
    /// (state `Z`, or `X` while it goes).
    #[must_use]
    pub fn has_exited(&self) -> bool {
        matches!(self.state, b'Z' | b'X')
    }

    /// A kernel thread: it holds no user's file.
    #[must_use]
    pub fn is_kernel_thread(&self) -> bool {
        self.flags & KERNEL_THREAD != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_counted_from_the_last_parenthesis() {
        // A comm with spaces and a ')' in it; fields from proc(5).
        let line = b"4242 (we ird) (name) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 1000 123456789 300 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n";
        assert_eq!(
            ProcStat::parse(line),
            Some(ProcStat {
                state: b'S',
                flags: 4_194_560,
                user_ticks: 250,
                system_ticks: 50,
                start_ticks: 1000,
                virtual_bytes: 123_456_789,
                resident_pages: 300,
            })
        );
        assert!(ProcStat::parse(b"4242 (cut short) S 1 2").is_none());
        assert!(ProcStat::parse(b"no parenthesis").is_none());
        let kthread = b"2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 2 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 0 0 0 0 0 0 0";
        let kthread = ProcStat::parse(kthread).unwrap();
        assert!(kthread.is_kernel_thread() && !kthread.has_exited());
        let zombie = b"77 (gone) Z 1 77 77 0 -1 4227140 0 0 0 0 0 0 0 0 20 0 1 0 9 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0";
        assert!(ProcStat::parse(zombie).unwrap().has_exited());
    }

    #[test]
    fn reads_this_process() {
        let me = ProcStat::read("self").unwrap();
        assert!(me.state.is_ascii_uppercase(), "{}", me.state as char);
        assert!(!me.has_exited() && !me.is_kernel_thread());
        assert!(me.resident_pages > 0);
    }
}
