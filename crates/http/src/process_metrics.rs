//! `process_*` metrics, read from `/proc`: multiprom's own (named as
//! client_golang and node_exporter name them, so the usual dashboards and
//! alerts work) and, when asked for, the live writers' of the directory,
//! one series per `pid` label, so they join with the workers' own
//! `pid`-labelled series (`liveall`/`all` gauges).
//!
//! These are the endpoint's self-metrics, built into its answer like the
//! `multiprom_*` ones; `/proc/<pid>/stat` is read by the maintainer's
//! reader of it ([`ProcStat`]), and turned into seconds and bytes here.
//! Where `/proc` is missing or a process is gone, its series are left out:
//! never an error, never a failed scrape.

use std::collections::BTreeSet;

use multiprom_collector::{FamilyType, FileReport, MergedFamily, MergedSample};
use multiprom_maintain::ProcStat;

use crate::self_metrics::{counter, family, gauge, labels, sample};

/// What `/proc/<pid>/stat` says about a process, in seconds and bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ProcessFigures {
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

/// `stat`'s figures in seconds and bytes, with `ticks` clock ticks a second,
/// `page` bytes a page, and the system booted at `boot` (Unix seconds).
pub(crate) fn figures(stat: &ProcStat, ticks: f64, page: f64, boot: f64) -> ProcessFigures {
    ProcessFigures {
        cpu_seconds: (stat.user_ticks + stat.system_ticks) as f64 / ticks,
        start_time_seconds: boot + stat.start_ticks as f64 / ticks,
        virtual_memory_bytes: stat.virtual_bytes as f64,
        resident_memory_bytes: stat.resident_pages as f64 * page,
    }
}

fn read_stat(pid: &str) -> Option<ProcessFigures> {
    let (ticks, page) = units();
    Some(figures(&ProcStat::read(pid)?, ticks, page, boot_time()?))
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
        // A zombie has released its memory and is no live writer.
        let Some(stat) = ProcStat::read(pid).filter(|stat| !stat.has_exited()) else {
            continue;
        };
        let stat = figures(&stat, ticks, page, boot);
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
    fn figures_are_in_seconds_and_bytes() {
        let stat = ProcStat {
            state: b'S',
            flags: 0,
            user_ticks: 250,
            system_ticks: 50,
            start_ticks: 1000,
            virtual_bytes: 123_456_789,
            resident_pages: 300,
        };
        assert_eq!(
            figures(&stat, 100.0, 4096.0, 1_700_000_000.0),
            ProcessFigures {
                cpu_seconds: 3.0,
                start_time_seconds: 1_700_000_010.0,
                virtual_memory_bytes: 123_456_789.0,
                resident_memory_bytes: 300.0 * 4096.0,
            }
        );
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
