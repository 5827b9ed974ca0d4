//! `process_*` metrics, read from `/proc`: multiprom's own (named as
//! client_golang and node_exporter name them, so the usual dashboards and
//! alerts work) and, when asked for, the live writers' of the directory,
//! one series per `pid` label, so they join with the workers' own
//! `pid`-labelled series (`liveall`/`all` gauges).
//!
//! These are the endpoint's self-metrics, built into its answer like the
//! `multiprom_*` ones, so they live here rather than with the `/proc` code
//! of `multiprom-maintain` (which decides what may be done to files: who
//! holds them, whether a pid is alive). `/proc/<pid>/stat` is read by hand:
//! three fields of one line; a `/proc` crate would bring far more than
//! that. Where `/proc` is missing or a process is gone, its
//! series are left out: never an error, never a failed scrape.

use std::collections::BTreeSet;

use multiprom_collector::{FamilyType, FileReport, MergedFamily, MergedSample};

use crate::self_metrics::{counter, family, gauge, labels, sample};

/// What `/proc/<pid>/stat` says about a process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ProcStat {
    /// User plus system CPU time, in seconds.
    pub cpu_seconds: f64,
    /// Start time, Unix seconds.
    pub start_time_seconds: f64,
    /// Virtual memory size, bytes.
    pub virtual_memory_bytes: f64,
    /// Resident set size, bytes.
    pub resident_memory_bytes: f64,
}

/// Clock ticks per second and page size: what turns `stat`'s units into
/// seconds and bytes.
fn units() -> (f64, f64) {
    (
        rustix::param::clock_ticks_per_second() as f64,
        rustix::param::page_size() as f64,
    )
}

/// The system's boot time, Unix seconds (`btime` in `/proc/stat`), read
/// once: `/proc/stat` is costly to read (the kernel sums every processor's
/// counters for it) and the boot time does not change, so Python's
/// `ProcessCollector` reads it once too.
fn boot_time() -> Option<f64> {
    static BOOT: std::sync::OnceLock<Option<f64>> = std::sync::OnceLock::new();
    *BOOT.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("btime "))?
            .trim()
            .parse()
            .ok()
    })
}

/// Parses one `/proc/<pid>/stat` line.
///
/// `pid (comm) state ppid ...`: `comm` may hold spaces and parentheses, so
/// fields are counted from the last `)`. Fields (1-based, proc(5)): 14 utime,
/// 15 stime, 22 starttime (ticks after boot), 23 vsize (bytes), 24 rss
/// (pages).
pub(crate) fn parse_stat(line: &str, ticks: f64, page: f64, boot: f64) -> Option<ProcStat> {
    let rest = &line[line.rfind(')')? + 1..];
    // `rest` starts at field 3 (state).
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    let field = |n: usize| -> Option<f64> { fields.get(n - 3)?.parse::<f64>().ok() };
    Some(ProcStat {
        cpu_seconds: (field(14)? + field(15)?) / ticks,
        start_time_seconds: boot + field(22)? / ticks,
        virtual_memory_bytes: field(23)?,
        resident_memory_bytes: field(24)? * page,
    })
}

fn read_stat(pid: &str) -> Option<ProcStat> {
    let line = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (ticks, page) = units();
    parse_stat(&line, ticks, page, boot_time()?)
}

/// multiprom's own `process_*` families (those that can be read).
/// How many descriptors this process has open, counting one more for the
/// listing of `/proc/self/fd` as client_golang does. Since Linux 6.2 the
/// size `stat` gives that directory is the count, with no listing: the
/// maintainer keeps a descriptor per file of the directory open, and
/// listing thousands of them on every scrape cost more than the scrape.
fn open_fds() -> Option<usize> {
    let counted = std::fs::metadata("/proc/self/fd")
        .ok()
        .and_then(|meta| usize::try_from(meta.len()).ok())
        .filter(|&n| n > 0);
    match counted {
        Some(n) => Some(n + 1),
        None => std::fs::read_dir("/proc/self/fd").ok().map(Iterator::count),
    }
}

pub(crate) fn own() -> Vec<MergedFamily> {
    let mut families = Vec::with_capacity(6);
    let stat = read_stat("self");
    if let Some(stat) = &stat {
        families.push(counter(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            stat.cpu_seconds,
        ));
    }
    if let Some(fds) = open_fds() {
        families.push(gauge(
            "process_open_fds",
            "Number of open file descriptors.",
            fds as f64,
        ));
    }
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    if let Some(max) = limit.current {
        families.push(gauge(
            "process_max_fds",
            "Maximum number of open file descriptors.",
            max as f64,
        ));
    }
    if let Some(stat) = stat {
        families.push(gauge(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            stat.virtual_memory_bytes,
        ));
        families.push(gauge(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            stat.resident_memory_bytes,
        ));
        families.push(gauge(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            stat.start_time_seconds,
        ));
    }
    families
}

/// The live writers' `process_*` numbers, as `multiprom_worker_process_*`
/// families labelled `pid` with the file names' process identifier (the
/// value Python puts in the `pid` label of `liveall`/`all` gauges).
/// Only numeric identifiers of processes that exist are read; in another
/// pid namespace the pids name other processes (as for reaping),
/// which is why this is opt-in.
pub(crate) fn workers(files: &[FileReport]) -> Vec<MergedFamily> {
    let pids: BTreeSet<u32> = files
        .iter()
        .filter_map(|f| f.name.as_ref()?.pid())
        .collect();
    let (ticks, page) = units();
    let Some(boot) = boot_time() else {
        return Vec::new();
    };
    let mut cpu = Vec::new();
    let mut rss = Vec::new();
    let mut start = Vec::new();
    // Numeric order, as people read pids (the exposition does not sort).
    for pid in pids {
        let Ok(line) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // A zombie has released its memory and is no live writer.
        if is_zombie_line(&line) {
            continue;
        }
        let Some(stat) = parse_stat(&line, ticks, page, boot) else {
            continue;
        };
        let pid = pid.to_string();
        let with_pid = |name: &str, value: f64| -> MergedSample {
            sample(name, labels(&[("pid", &pid)]), value)
        };
        cpu.push(with_pid(
            "multiprom_worker_process_cpu_seconds_total",
            stat.cpu_seconds,
        ));
        rss.push(with_pid(
            "multiprom_worker_process_resident_memory_bytes",
            stat.resident_memory_bytes,
        ));
        start.push(with_pid(
            "multiprom_worker_process_start_time_seconds",
            stat.start_time_seconds,
        ));
    }
    if cpu.is_empty() {
        return Vec::new();
    }
    vec![
        family(
            "multiprom_worker_process_cpu_seconds",
            "User and system CPU time of each live writer of the directory, in seconds.",
            FamilyType::Counter,
            cpu,
        ),
        family(
            "multiprom_worker_process_resident_memory_bytes",
            "Resident memory of each live writer of the directory, in bytes.",
            FamilyType::Gauge,
            rss,
        ),
        family(
            "multiprom_worker_process_start_time_seconds",
            "Start time of each live writer of the directory since unix epoch, in seconds.",
            FamilyType::Gauge,
            start,
        ),
    ]
}

fn is_zombie_line(line: &str) -> bool {
    line.rfind(')')
        .and_then(|close| line.get(close + 1..close + 3))
        .is_some_and(|state| state == " Z" || state == " X")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_fds_counts_as_a_listing_of_proc_self_fd_does() {
        // Other tests' threads open and close descriptors meanwhile: the
        // two counts agree in one of a few tries.
        let agree = (0..20).any(|_| {
            let listed = std::fs::read_dir("/proc/self/fd").unwrap().count();
            open_fds() == Some(listed)
        });
        assert!(agree, "{:?}", open_fds());
    }
    use std::time::{SystemTime, UNIX_EPOCH};

    fn now_seconds() -> f64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    }

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        // A comm with spaces and a ')' in it; fields from proc(5).
        let line = "4242 (we ird) (name) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 1000 123456789 300 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n";
        let stat = parse_stat(line, 100.0, 4096.0, 1_700_000_000.0).unwrap();
        assert_eq!(
            stat,
            ProcStat {
                cpu_seconds: 3.0,
                start_time_seconds: 1_700_000_010.0,
                virtual_memory_bytes: 123_456_789.0,
                resident_memory_bytes: 300.0 * 4096.0,
            }
        );
        assert!(parse_stat("4242 (cut short) S 1 2", 100.0, 4096.0, 0.0).is_none());
        assert!(parse_stat("no parenthesis", 100.0, 4096.0, 0.0).is_none());
    }

    #[test]
    fn own_metrics_describe_this_process() {
        let families = own();
        let names: Vec<&str> = families.iter().map(|f| &*f.name).collect();
        assert_eq!(
            names,
            [
                "process_cpu_seconds",
                "process_open_fds",
                "process_max_fds",
                "process_virtual_memory_bytes",
                "process_resident_memory_bytes",
                "process_start_time_seconds"
            ]
        );
        let value = |name: &str| {
            families
                .iter()
                .find(|f| &*f.name == name)
                .map(|f| f.samples[0].value)
                .unwrap()
        };
        assert!(value("process_resident_memory_bytes") > 1_000_000.0);
        assert!(value("process_open_fds") >= 3.0);
        let started = value("process_start_time_seconds");
        assert!(started <= now_seconds() + 1.0 && started > now_seconds() - 3600.0);
    }
}
