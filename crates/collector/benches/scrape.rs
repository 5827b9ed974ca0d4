//! What a scrape of a 4,000-file multiprocess directory costs: cold (a new
//! `DirCollector`, every key parsed), warm (the same collector, files
//! unchanged) and warm + Prometheus text (what a `/metrics` request does).
//! Figures and the Python reference: docs/benchmarks.md, "Collector".
//! The `io_floor` group times the per-file system calls alone, and the same
//! reads with files kept open, to show what changing the I/O could gain.
//! The `exemplars` group times a warm scrape of histograms with and without
//! an exemplar on every bucket, and the exemplar files' reads alone.
//! The `natives` group times a warm scrape of 1,000 workers' histograms
//! that also record native histograms, in the protobuf format (with the
//! native histograms) and in the text format (which reads none), each
//! encoded through its cache as the endpoint serves it, for exited and for
//! live workers (also with the caches emptied before each scrape), and what
//! reading the live workers' native files costs at least.
//!
//! `cargo bench -p multiprom-collector --bench scrape`
//!
//! Two directories of 4,000 files each, built once per run:
//!
//! * `realistic`: 800 pre-fork workers of an LLM server (vLLM-like metric
//!   names), 5 files each: counters, histograms, and `livesum`, `livemax`
//!   and `all` gauges, 113 entries per worker, as `prometheus_client` lays
//!   them out (every histogram bucket and `_sum` exists from the start).
//! * `tiny`: 1,000 workers with 4 files of 1 to 3 entries each, for contrast:
//!   the per-file cost with almost nothing in the files.
//!
//! They go in a temporary directory, removed at exit. With
//! `MULTIPROM_BENCH_DIR=<absolute dir>` set they go in `<dir>/realistic` and
//! `<dir>/tiny` instead and stay, for `tests/python/bench_collect.py` to time
//! the same files; multiprom's exposition of each is then also written to
//! `<dir>/<name>.multiprom.prom`, to compare with Python's. Add `-- --list` to
//! write the directories without running the benchmarks.

use std::fs::File;
use std::hint::black_box;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use criterion::{criterion_group, Bencher, BenchmarkId, Criterion};
use multiprom_collector::exposition::{LineCache, ProtobufCache};
use multiprom_collector::{scan_dir, DirCollector, Escaping, Format, Natives};
use multiprom_format::native_file::native_histogram_path;
use multiprom_format::read_map::{guard_sigbus, ReadMap};
use multiprom_format::{
    encode_key, float_to_go_string, native_record_layouts, open_for_read, read_exemplar_records,
    read_used_into_with_hint, ExemplarWriter, FileName, FileWriter, GaugeMode, MetricKind,
    NativeHistogramConfig, NativeHistogramWriter, NativeRecordLayout,
};

/// Files per scenario (the later issue's target is stated for 4,000).
const FILES: usize = 4000;
const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";

/// One built directory.
#[derive(Debug)]
struct Scenario {
    name: &'static str,
    dir: PathBuf,
    files: usize,
    entries: usize,
}

#[derive(Debug)]
struct Dirs {
    /// Where `MULTIPROM_BENCH_DIR` asked the directories to be kept.
    kept_in: Option<PathBuf>,
    scenarios: Vec<Scenario>,
}

/// The temporary directory the scenarios are built in (if one is), removed
/// by `main` when the run ends: a static is never dropped, and each run's
/// directories take half a gigabyte.
static TEMP: Mutex<Option<tempfile::TempDir>> = Mutex::new(None);

/// Builds both directories on first use (criterion runs every group in one
/// process, so once per run).
fn dirs() -> &'static Dirs {
    static DIRS: OnceLock<Dirs> = OnceLock::new();
    DIRS.get_or_init(|| {
        let (temp, root, kept_in) = match std::env::var_os("MULTIPROM_BENCH_DIR") {
            Some(root) => {
                let root = PathBuf::from(root);
                // cargo runs benches in the crate's directory, not the caller's.
                assert!(
                    root.is_absolute(),
                    "MULTIPROM_BENCH_DIR must be an absolute path"
                );
                (None, root.clone(), Some(root))
            }
            None => {
                let temp = tempfile::Builder::new()
                    .prefix("multiprom-scrape-bench-")
                    .tempdir()
                    .expect("temp dir");
                let root = temp.path().to_path_buf();
                (Some(temp), root, None)
            }
        };
        let scenarios = vec![
            build(&root, "realistic", write_realistic_worker, FILES / 5),
            build(&root, "tiny", write_tiny_worker, FILES / 4),
        ];
        for s in &scenarios {
            eprintln!(
                "scrape bench: {}: {} files, {} entries in {}",
                s.name,
                s.files,
                s.entries,
                s.dir.display()
            );
        }
        *TEMP.lock().unwrap_or_else(PoisonError::into_inner) = temp;
        Dirs { kept_in, scenarios }
    })
}

/// Writes `workers` workers' files into `root/name` (emptied of `*.db` first,
/// so a kept directory can be rebuilt) and checks that they merge cleanly.
fn build(
    root: &Path,
    name: &'static str,
    write_worker: fn(&Path, u32, &mut Values) -> usize,
    workers: usize,
) -> Scenario {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).expect("create scenario dir");
    for entry in std::fs::read_dir(&dir).expect("list scenario dir") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_some_and(|e| e == "db") {
            std::fs::remove_file(&path).expect("remove old file");
        }
    }
    let mut values = Values(0x9E37_79B9_7F4A_7C15);
    // Pids as a real pre-fork server's: a block of consecutive numbers.
    let entries = (0..workers as u32)
        .map(|i| write_worker(&dir, 41_000 + i, &mut values))
        .sum();
    // Write back the 256 MiB of new files now, not while being measured
    // (the pages stay cached; every figure is with a warm page cache).
    match std::process::Command::new("sync").status() {
        Ok(status) if status.success() => {}
        other => eprintln!("scrape bench: sync failed ({other:?}); figures may be noisier"),
    }
    let scrape = DirCollector::new(&dir).collect().expect("collect");
    assert_eq!(scrape.stats.files_ok, FILES, "{name}: every file merges");
    assert_eq!(scrape.files.len(), FILES, "{name}: nothing else in the dir");
    Scenario {
        name,
        dir,
        files: FILES,
        entries,
    }
}

/// Deterministic pseudo-random values (xorshift64), so runs see the same
/// files and the merge adds real numbers, not zeros.
#[derive(Debug)]
struct Values(u64);

impl Values {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A whole number in `0..n`, as a count.
    fn count(&mut self, n: u64) -> f64 {
        (self.next() % n) as f64
    }

    /// A fraction in `[0, 1)`.
    fn fraction(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// An open file of one worker; `set` writes one entry (values are set, not
/// added, so rebuilding a kept directory gives the same files).
struct WorkerFile {
    writer: FileWriter,
    entries: usize,
}

impl WorkerFile {
    fn open(dir: &Path, kind: MetricKind, pid: u32) -> WorkerFile {
        let name = FileName::new(kind, pid.to_string()).expect("file name");
        WorkerFile {
            writer: FileWriter::open(dir, &name).expect("open worker file"),
            entries: 0,
        }
    }

    fn set(&mut self, family: &str, sample: &str, labels: &[(&str, &str)], help: &str, v: f64) {
        let key = encode_key(family, sample, labels.iter().copied(), help);
        self.writer.slot(&key).expect("slot").set(v);
        self.entries += 1;
    }

    /// A counter series: family `name`, sample `name_total`, as Python's
    /// `Counter` writes it.
    fn counter(&mut self, name: &str, labels: &[(&str, &str)], help: &str, v: f64) {
        self.set(name, &format!("{name}_total"), labels, help, v);
    }

    /// A histogram child as Python's `Histogram` creates it: `_sum`, then one
    /// `_bucket` entry per bound (ending with `+Inf`), each with its own
    /// (non-cumulative) count.
    fn histogram(&mut self, name: &str, bounds: &[f64], help: &str, values: &mut Values) {
        let labels = [("model_name", MODEL)];
        self.set(name, &format!("{name}_sum"), &labels, help, {
            values.fraction() * 5000.0
        });
        let bucket = format!("{name}_bucket");
        for &bound in bounds.iter().chain([f64::INFINITY].iter()) {
            let le = float_to_go_string(bound);
            let labels = [("model_name", MODEL), ("le", le.as_str())];
            self.set(name, &bucket, &labels, help, values.count(200));
        }
    }
}

/// The files of one vLLM-like worker: 27 counter entries (10 families),
/// 76 histogram entries (4 histograms of 15 to 21 buckets), 3 `livesum`,
/// 2 `livemax` and 5 `all` gauge entries; 113 entries in 5 files.
fn write_realistic_worker(dir: &Path, pid: u32, values: &mut Values) -> usize {
    let m = ("model_name", MODEL);
    let mut counters = WorkerFile::open(dir, MetricKind::Counter, pid);
    let v = &mut *values;
    counters.counter(
        "vllm:prompt_tokens",
        &[m],
        "Number of prefill tokens processed.",
        v.count(1 << 24),
    );
    counters.counter(
        "vllm:generation_tokens",
        &[m],
        "Number of generation tokens processed.",
        v.count(1 << 24),
    );
    for reason in ["stop", "length", "abort"] {
        counters.counter(
            "vllm:request_success",
            &[m, ("finished_reason", reason)],
            "Count of successfully processed requests.",
            v.count(100_000),
        );
    }
    counters.counter(
        "vllm:num_preemptions",
        &[m],
        "Cumulative number of preemption from the engine.",
        v.count(100),
    );
    counters.counter(
        "vllm:prefix_cache_queries",
        &[m],
        "Prefix cache queries, in terms of number of queried tokens.",
        v.count(1 << 24),
    );
    counters.counter(
        "vllm:prefix_cache_hits",
        &[m],
        "Prefix cache hits, in terms of number of cached tokens.",
        v.count(1 << 24),
    );
    for handler in [
        "/v1/completions",
        "/v1/chat/completions",
        "/v1/models",
        "/health",
    ] {
        for status in ["2xx", "4xx", "5xx"] {
            counters.counter(
                "http_requests",
                &[("handler", handler), ("method", "POST"), ("status", status)],
                "Total number of requests by method, status and handler.",
                v.count(100_000),
            );
        }
    }
    for code in ["400", "408", "429", "500", "503"] {
        counters.counter(
            "vllm:request_errors",
            &[m, ("code", code)],
            "Requests that failed, by HTTP status code.",
            v.count(1000),
        );
    }
    counters.counter(
        "vllm:spec_decode_num_draft_tokens",
        &[m],
        "Number of draft tokens.",
        v.count(1 << 20),
    );
    counters.counter(
        "vllm:spec_decode_num_accepted_tokens",
        &[m],
        "Number of accepted tokens.",
        v.count(1 << 20),
    );

    let mut histograms = WorkerFile::open(dir, MetricKind::Histogram, pid);
    histograms.histogram(
        "vllm:time_to_first_token_seconds",
        &[
            0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
            10.0, 20.0, 40.0, 80.0, 160.0,
        ],
        "Histogram of time to first token in seconds.",
        values,
    );
    histograms.histogram(
        "vllm:time_per_output_token_seconds",
        &[
            0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
            10.0, 20.0, 40.0, 80.0,
        ],
        "Histogram of time per output token in seconds.",
        values,
    );
    histograms.histogram(
        "vllm:e2e_request_latency_seconds",
        &[
            0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
        ],
        "Histogram of end to end request latency in seconds.",
        values,
    );
    // prometheus_client's default buckets.
    histograms.histogram(
        "http_request_duration_seconds",
        &[
            0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
        ],
        "Latency of HTTP requests in seconds.",
        values,
    );

    let v = &mut *values;
    let mut live_sum = WorkerFile::open(dir, MetricKind::Gauge(GaugeMode::LiveSum), pid);
    for (name, help) in [
        (
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
        ),
        (
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
        ),
        (
            "vllm:num_requests_swapped",
            "Number of requests swapped to CPU.",
        ),
    ] {
        live_sum.set(name, name, &[m], help, v.count(64));
    }
    let mut live_max = WorkerFile::open(dir, MetricKind::Gauge(GaugeMode::LiveMax), pid);
    for (name, help) in [
        (
            "vllm:gpu_cache_usage_perc",
            "GPU KV-cache usage. 1 means 100 percent usage.",
        ),
        (
            "vllm:cpu_cache_usage_perc",
            "CPU KV-cache usage. 1 means 100 percent usage.",
        ),
    ] {
        live_max.set(name, name, &[m], help, v.fraction());
    }
    // `all` keeps one series per pid: these grow the output with the workers.
    let mut all = WorkerFile::open(dir, MetricKind::Gauge(GaugeMode::All), pid);
    all.set(
        "vllm:cache_config_info",
        "vllm:cache_config_info",
        &[
            ("block_size", "16"),
            ("cache_dtype", "auto"),
            ("gpu_memory_utilization", "0.9"),
            ("num_cpu_blocks", "2048"),
            ("num_gpu_blocks", "27910"),
        ],
        "Information of the LLMEngine CacheConfig.",
        1.0,
    );
    all.set(
        "worker_start_time_seconds",
        "worker_start_time_seconds",
        &[],
        "Start time of the worker since unix epoch in seconds.",
        1.7e9 + v.count(86_400),
    );
    for state in ["idle", "prefill", "decode"] {
        all.set(
            "worker_state",
            "worker_state",
            &[("state", state)],
            "Whether the worker is in this state (1) or not (0).",
            v.count(2),
        );
    }
    [counters, histograms, live_sum, live_max, all]
        .iter()
        .map(|f| f.entries)
        .sum()
}

/// A worker with almost nothing in its files: 3 counter entries, 1 `livesum`,
/// 2 `livemax` and 1 `all` gauge entry; 7 entries in 4 files.
fn write_tiny_worker(dir: &Path, pid: u32, values: &mut Values) -> usize {
    let mut counters = WorkerFile::open(dir, MetricKind::Counter, pid);
    for code in ["200", "404", "500"] {
        counters.counter(
            "requests",
            &[("code", code)],
            "Requests.",
            values.count(1000),
        );
    }
    let mut live_sum = WorkerFile::open(dir, MetricKind::Gauge(GaugeMode::LiveSum), pid);
    live_sum.set("in_flight", "in_flight", &[], "In flight.", values.count(8));
    let mut live_max = WorkerFile::open(dir, MetricKind::Gauge(GaugeMode::LiveMax), pid);
    live_max.set("queue", "queue", &[], "Queue length.", values.count(100));
    live_max.set(
        "memory",
        "memory",
        &[],
        "Memory in use.",
        values.count(1 << 30),
    );
    let mut all = WorkerFile::open(dir, MetricKind::Gauge(GaugeMode::All), pid);
    all.set("up", "up", &[], "Up.", 1.0);
    [counters, live_sum, live_max, all]
        .iter()
        .map(|f| f.entries)
        .sum()
}

fn scrape(c: &mut Criterion) {
    let dirs = dirs();
    let mut g = c.benchmark_group("scrape");
    for s in &dirs.scenarios {
        let dir = s.dir.as_path();
        if let Some(root) = &dirs.kept_in {
            let text = DirCollector::new(dir)
                .collect()
                .expect("collect")
                .encode(Format::Prometheus);
            let out = root.join(format!("{}.multiprom.prom", s.name));
            std::fs::write(out, text).expect("write exposition");
        }
        let id = |what| BenchmarkId::new(s.name, what);
        // Every key parsed and interned, every file read; the collector's
        // creation and drop are included (a one-shot `multiprom scrape`).
        g.bench_function(id("cold"), |b| {
            b.iter(|| {
                DirCollector::new(black_box(dir))
                    .collect()
                    .expect("collect")
            })
        });
        // Files unchanged since the last collection: each is opened, stat'ed
        // and read again, values are taken at known offsets, then merged.
        let warm = DirCollector::new(dir);
        warm.collect().expect("collect");
        g.bench_function(id("warm"), |b| {
            b.iter(|| black_box(&warm).collect().expect("collect"))
        });
        // What a `/metrics` request costs: warm collection + Prometheus text.
        g.bench_function(id("warm_encode"), |b| {
            b.iter(|| {
                black_box(&warm)
                    .collect()
                    .expect("collect")
                    .encode(Format::Prometheus)
            })
        });
    }
    g.finish();
}

/// The per-file system calls alone, without parsing or merging: what the
/// warm path's design costs at least, beside designs that keep files open
/// across scrapes. Not multiprom code paths (except `list`); they bound what
/// changing the collector's I/O could gain.
fn io_floor(c: &mut Criterion) {
    let dirs = dirs();
    let mut g = c.benchmark_group("io_floor");
    for s in &dirs.scenarios {
        let dir = s.dir.as_path();
        let paths = scan_dir(dir).expect("list");
        let id = |what| BenchmarkId::new(s.name, what);
        // The collector's listing: readdir + one `PathBuf` per file.
        g.bench_function(id("list"), |b| {
            b.iter(|| scan_dir(black_box(dir)).expect("list"))
        });
        // What a warm scrape does per file today: open, fstat, one pread of
        // the used bytes (sized from the last read, as the collector does), close.
        let mut buf = Vec::new();
        let used: Vec<usize> = paths
            .iter()
            .map(|path| {
                let (file, meta) = open_for_read(path).expect("open");
                let header =
                    read_used_into_with_hint(&file, &meta, path, &mut buf, 0).expect("read");
                header.used as usize
            })
            .collect();
        g.bench_function(id("open_fstat_pread_close"), |b| {
            b.iter(|| {
                for (path, &hint) in paths.iter().zip(&used) {
                    let (file, meta) = open_for_read(path).expect("open");
                    read_used_into_with_hint(&file, &meta, path, &mut buf, hint).expect("read");
                }
            })
        });
        // Files kept open across scrapes: one pread each, of the same size.
        let open: Vec<File> = paths
            .iter()
            .map(|p| File::open(p).expect("open (needs 4,000 fds)"))
            .collect();
        let mut bytes = vec![0u8; used.iter().copied().max().unwrap_or(0).max(4096)];
        g.bench_function(id("pread_kept_open"), |b| {
            b.iter(|| {
                for (file, &used) in open.iter().zip(&used) {
                    pread(file, &mut bytes[..used.max(4096)]);
                }
            })
        });
        // Kept open, reading exactly the used bytes (the collector's first
        // read is at least a page, like Python's, even for a 300-byte file).
        g.bench_function(id("pread_used_kept_open"), |b| {
            b.iter(|| {
                for (file, &used) in open.iter().zip(&used) {
                    pread(file, &mut bytes[..used]);
                }
            })
        });
        // Kept open, plus a stat by path per file to notice a replaced
        // (re-created, new inode) or removed file.
        g.bench_function(id("stat_pread_kept_open"), |b| {
            b.iter(|| {
                for ((path, file), &used) in paths.iter().zip(&open).zip(&used) {
                    black_box(std::fs::metadata(path).expect("stat").ino());
                    pread(file, &mut bytes[..used.max(4096)]);
                }
            })
        });
    }
    g.finish();
}

/// Workers, histograms per worker and buckets per histogram of the
/// `exemplars` group: 20,000 bucket series with an exemplar each.
const EXEMPLAR_WORKERS: u32 = 100;
const EXEMPLAR_HISTOGRAMS: usize = 10;
const EXEMPLAR_BUCKETS: usize = 20;

/// 100 workers' histogram files, every bucket with an exemplar (a 32-digit
/// trace id) when `exemplars`; in a temporary directory under `/dev/shm`
/// if there is one (tmpfs, as the scrape benchmarks' own directories).
fn exemplar_dir(exemplars: bool) -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("temp dir");
    for pid in 0..EXEMPLAR_WORKERS {
        let name = FileName::new(MetricKind::Histogram, pid.to_string()).expect("name");
        let mut file = FileWriter::open(dir.path(), &name).expect("file");
        let kept =
            exemplars.then(|| ExemplarWriter::open(dir.path(), &name).expect("exemplar file"));
        for h in 0..EXEMPLAR_HISTOGRAMS {
            let family = format!("latency_{h}_seconds");
            let sample = format!("{family}_bucket");
            for b in 0..EXEMPLAR_BUCKETS {
                let le = float_to_go_string(b as f64 / 4.0);
                let key = encode_key(&family, &sample, [("le", le.as_str())], "Latency.");
                file.slot(&key).expect("slot").set(1.0);
                if let Some(kept) = &kept {
                    kept.slot(&key)
                        .expect("exemplar slot")
                        .store(
                            [("trace_id", "4bf92f3577b34da6a3ce929d0e0e4736")],
                            0.1,
                            1.7e9,
                        )
                        .expect("store");
                }
            }
        }
    }
    dir
}

/// What exemplars add to a warm scrape, and what reading their files alone
/// costs (the floor of any collector that reads them every scrape).
fn exemplars(c: &mut Criterion) {
    let mut g = c.benchmark_group("exemplars");
    for with in [false, true] {
        let dir = exemplar_dir(with);
        let warm = DirCollector::new(dir.path());
        warm.collect().expect("collect");
        let id = if with { "with" } else { "without" };
        g.bench_function(BenchmarkId::new("warm", id), |b| {
            b.iter(|| black_box(&warm).collect().expect("collect"))
        });
        if with {
            let files: Vec<PathBuf> = std::fs::read_dir(dir.path().join("exemplars"))
                .expect("list")
                .map(|e| e.expect("entry").path())
                .collect();
            // What the collector reads: each file into one reused buffer,
            // every record's seal checked, nothing decoded or allocated.
            let mut buf = Vec::new();
            g.bench_function("read_exemplar_files", |b| {
                b.iter(|| {
                    for file in &files {
                        let read = read_exemplar_records(file, &mut buf, |record| {
                            black_box(record.timestamp);
                        });
                        black_box(read.expect("read"));
                    }
                })
            });
        }
    }
    g.finish();
}

/// Workers, histograms per worker and observations per histogram of the
/// `natives` group.
const NATIVE_WORKERS: u32 = 1000;
const NATIVE_HISTOGRAMS: [&str; 4] = ["/", "/api/items", "/api/search", "/login"];
const NATIVE_OBSERVATIONS: usize = 500;
/// prometheus_client's default buckets (before `+Inf`).
const DEFAULT_BOUNDS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

/// 1,000 workers' histogram files, each with 4 request-latency series
/// (prometheus_client's default buckets) and their native histograms
/// (schema 3, the default) of the same observations: log-normal latencies
/// around 50 ms, a few seconds at the tail, some 25 to 35 buckets each.
fn native_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("temp dir");
    let mut values = Values(0x2545_F491_4F6C_DD1D);
    let help = "Request latency.";
    let name = "http_request_duration_seconds";
    for pid in 0..NATIVE_WORKERS {
        let file_name = FileName::new(MetricKind::Histogram, pid.to_string()).expect("name");
        let mut file = FileWriter::open(dir.path(), &file_name).expect("file");
        let natives = NativeHistogramWriter::open(dir.path(), &file_name).expect("natives");
        for route in NATIVE_HISTOGRAMS {
            let labels = [("route", route)];
            let native = natives
                .series(
                    &encode_key(name, name, labels, help),
                    NativeHistogramConfig::default(),
                )
                .expect("series");
            let mut counts = [0u32; DEFAULT_BOUNDS.len() + 1];
            let mut sum = 0.0;
            for _ in 0..NATIVE_OBSERVATIONS {
                // Sum of three uniforms: roughly normal, then exponentiated.
                let normal = values.fraction() + values.fraction() + values.fraction() - 1.5;
                let latency = 0.05 * (2.0 * normal).exp();
                native.observe(latency);
                sum += latency;
                let at = DEFAULT_BOUNDS.partition_point(|&bound| bound < latency);
                counts[at] += 1;
            }
            let sample = format!("{name}_sum");
            let key = encode_key(name, &sample, labels, help);
            file.slot(&key).expect("slot").set(sum);
            let bucket = format!("{name}_bucket");
            let bounds = DEFAULT_BOUNDS.iter().chain([f64::INFINITY].iter());
            for (&bound, &count) in bounds.zip(&counts) {
                let le = float_to_go_string(bound);
                let key = encode_key(name, &bucket, [("le", le.as_str()), ("route", route)], help);
                file.slot(&key).expect("slot").set(f64::from(count));
            }
        }
    }
    dir
}

/// Warm scrapes of the same 1,000 histogram files with native histograms,
/// side by side: a protobuf scrape (with the native histograms, as
/// Prometheus asks when native histograms are on) and a text scrape (which
/// reads no native file), for exited workers and for live ones.
///
/// The collector learns which writers are gone from the caller
/// ([`DirCollector::settle_exited_writers`]); the HTTP endpoint answers
/// with pid liveness (a pid no process has). The files here are written by
/// this process, whose writers are dropped before the benchmark runs, so
/// nothing writes them; their pids (0 to 999) name no running worker. So
/// each collector is given the endpoint's answer for the case it times:
/// `exited/*` "gone" for every file (workers that have exited: their files
/// settle after a few scrapes), `live/*` "alive" for every file (running
/// workers: every scrape reads every file, native companions included).
/// Nothing else in the collector depends on which processes exist.
///
/// `live/read_floor` is what the live protobuf scrape cannot go below with
/// files read by system calls: one `open`, one `pread` of the used bytes
/// and one `close` per native histogram file, nothing parsed or merged.
/// `live/map_floor` is the same through maps kept between scrapes: the
/// loads of `used` and of every current record's counts and buckets in
/// use, word by word, nothing merged. `live/protobuf_without_natives` is
/// the protobuf scrape of the same files without native histograms: what
/// the live protobuf scrape costs beyond reading them (and
/// `exited/protobuf_without_natives` the same for exited workers). `live/floor` is
/// both in one iteration, the native loads on the other cores while this
/// one makes the scrape without native histograms, then on this one too,
/// in small chunks, so that the cores finish together
/// (`live/floor_one_thread`: all on this thread, one after the other):
/// the floor of the live protobuf scrape, measured with the caches holding
/// what one scrape leaves for the next (the two timed apart each find
/// their own words cached, which one scrape doing both does not).
/// `live_cold/*` are `live/{protobuf,text,protobuf_without_natives,floor,map_floor}`
/// with the caches emptied before each scrape (not timed), as a scrape
/// seconds after the last one on a busy host finds them.
fn natives(c: &mut Criterion) {
    let mut g = c.benchmark_group("natives");
    let dir = native_dir();
    for (case, gone) in [("exited", true), ("live", false)] {
        let warm = DirCollector::new(dir.path())
            .settle_exited_writers(move |_: &multiprom_format::FileName| gone);
        let protobuf = || {
            warm.collect_with(|_| Default::default(), None, Natives::Merge)
                .expect("collect")
        };
        // Enough collections to map, watch and settle.
        for _ in 0..5 {
            let scrape = protobuf();
            assert_eq!(scrape.natives.len(), NATIVE_HISTOGRAMS.len());
            assert!(scrape.warnings.is_empty(), "{:?}", scrape.warnings);
        }
        let settled = protobuf().stats.files_settled;
        assert_eq!(settled, if gone { NATIVE_WORKERS as usize } else { 0 });
        // Each encoded through its cache, as the endpoint serves them.
        let mut cache = ProtobufCache::default();
        g.bench_function(format!("{case}/protobuf"), |b| {
            b.iter(|| {
                let scrape = black_box(protobuf());
                let mut out = Vec::new();
                cache.encode(
                    Arc::clone(&scrape),
                    &scrape.natives,
                    None,
                    Escaping::Underscores,
                    &mut out,
                );
                out
            })
        });
        let mut lines = LineCache::default();
        g.bench_function(format!("{case}/text"), |b| {
            b.iter(|| {
                let scrape = black_box(&warm).collect().expect("collect");
                let mut out = String::new();
                lines.encode(Format::Prometheus, Escaping::Underscores, scrape, &mut out);
                out
            })
        });
        if !gone {
            let paths: Vec<PathBuf> = (0..NATIVE_WORKERS)
                .map(|pid| {
                    let name = FileName::new(MetricKind::Histogram, pid.to_string()).expect("name");
                    native_histogram_path(dir.path(), &name)
                })
                .collect();
            let used: Vec<usize> = paths
                .iter()
                .map(|path| {
                    let header = std::fs::read(path).expect("native file");
                    u32::from_le_bytes(header[..4].try_into().expect("header")) as usize
                })
                .collect();
            let mut buf = vec![0u8; used.iter().copied().max().unwrap_or(0)];
            g.bench_function("live/read_floor", |b| {
                b.iter(|| {
                    for (path, &used) in paths.iter().zip(&used) {
                        let file = File::open(path).expect("open");
                        pread(&file, &mut buf[..used]);
                    }
                })
            });
            let mapped: Vec<(ReadMap, Vec<NativeRecordLayout>)> = paths
                .iter()
                .zip(&used)
                .map(|(path, &used)| {
                    let bytes = std::fs::read(path).expect("native file");
                    let mut layouts = Vec::new();
                    native_record_layouts(&bytes, 0, used, &mut layouts).expect("layouts");
                    let file = File::open(path).expect("open");
                    (ReadMap::new(&file, bytes.len()).expect("map"), layouts)
                })
                .collect();
            assert!(guard_sigbus());
            // The loads of the words a scrape must read from the native
            // files: `used`, and each current record's counts and buckets
            // in use.
            let load_natives = |mapped: &[(ReadMap, Vec<NativeRecordLayout>)]| {
                let mut total = 0u64;
                for (map, layouts) in mapped {
                    let read = map.read(|view| {
                        let mut total = u64::from(view.u32_acquire(0).unwrap_or(0));
                        for layout in layouts {
                            let word = |n: usize| view.u64_at(layout.record + 8 * n);
                            let used = word(6).unwrap_or(0) as u32 as usize;
                            for n in 3..6 {
                                total = total.wrapping_add(word(n).unwrap_or(0));
                            }
                            for n in 7..7 + 2 * used {
                                total = total.wrapping_add(word(n).unwrap_or(0));
                            }
                        }
                        total
                    });
                    total = total.wrapping_add(read.expect("not shrunk"));
                }
                total
            };
            // The scrape without native histograms, encoded through its
            // cache as the protobuf scrape is.
            let classic_cache = std::cell::RefCell::new(ProtobufCache::default());
            let classic = || {
                let scrape = black_box(&warm)
                    .collect_with(|_| Default::default(), None, Natives::Skip)
                    .expect("collect");
                let mut out = Vec::new();
                classic_cache.borrow_mut().encode(
                    Arc::clone(&scrape),
                    &scrape.natives,
                    None,
                    Escaping::Underscores,
                    &mut out,
                );
                out
            };
            g.bench_function("live/map_floor", |b| {
                b.iter(|| black_box(load_natives(&mapped)))
            });
            // Both in one scrape, as the protobuf scrape must: the native
            // words pass through the caches between the `*.db` values of
            // one scrape and the next's. The native loads on the other
            // cores while this one reads the `*.db` values, then on this
            // one too, in small chunks taken in turn, so that the cores
            // finish together: the two wait on memory side by side.
            let threads = std::thread::available_parallelism()
                .map_or(1, usize::from)
                .clamp(1, 4);
            let chunks: Vec<_> = mapped.chunks(mapped.len().div_ceil(16).max(1)).collect();
            let natives_beside_classic = || {
                let next = AtomicUsize::new(0);
                let take = || {
                    let mut total = 0u64;
                    while let Some(chunk) = chunks.get(next.fetch_add(1, Ordering::Relaxed)) {
                        total = total.wrapping_add(load_natives(chunk));
                    }
                    total
                };
                std::thread::scope(|scope| {
                    let others: Vec<_> = (1..threads).map(|_| scope.spawn(take)).collect();
                    let classic = classic();
                    let mut total = take();
                    for other in others {
                        total = total.wrapping_add(other.join().expect("loads"));
                    }
                    (classic, total)
                })
            };
            // The same with the caches emptied before each scrape, as a
            // scrape every 15 s on a busy host finds them: the warm rows
            // above let the `*.db` values stay cached from one scrape to
            // the next, which favours the text scrape.
            let mut evict = evict_caches(threads);
            g.measurement_time(Duration::from_secs(1));
            g.bench_function("live_cold/protobuf", |b| {
                timed_after(b, &mut evict, || {
                    let scrape = protobuf();
                    let mut out = Vec::new();
                    cache.encode(
                        Arc::clone(&scrape),
                        &scrape.natives,
                        None,
                        Escaping::Underscores,
                        &mut out,
                    );
                    out
                })
            });
            g.bench_function("live_cold/text", |b| {
                timed_after(b, &mut evict, || {
                    let scrape = warm.collect().expect("collect");
                    let mut out = String::new();
                    lines.encode(Format::Prometheus, Escaping::Underscores, scrape, &mut out);
                    out
                })
            });
            g.bench_function("live_cold/protobuf_without_natives", |b| {
                timed_after(b, &mut evict, classic)
            });
            g.bench_function("live_cold/floor", |b| {
                timed_after(b, &mut evict, natives_beside_classic)
            });
            g.bench_function("live_cold/map_floor", |b| {
                timed_after(b, &mut evict, || load_natives(&mapped))
            });
            g.measurement_time(Duration::from_secs(5));
            g.bench_function("live/floor", |b| {
                b.iter(|| black_box(natives_beside_classic()))
            });
            g.bench_function("live/floor_one_thread", |b| {
                b.iter(|| (black_box(classic()), black_box(load_natives(&mapped))))
            });
        }
        let mut cache = ProtobufCache::default();
        g.bench_function(format!("{case}/protobuf_without_natives"), |b| {
            b.iter(|| {
                let scrape = black_box(&warm)
                    .collect_with(|_| Default::default(), None, Natives::Skip)
                    .expect("collect");
                let mut out = Vec::new();
                cache.encode(
                    Arc::clone(&scrape),
                    &scrape.natives,
                    None,
                    Escaping::Underscores,
                    &mut out,
                );
                out
            })
        });
    }
    g.finish();
}

/// Empties the caches when called: `threads` threads (one per core the
/// scrape uses) each write one cache line in every 64 bytes of its own
/// 64 MiB, twice the last-level cache of the machines measured.
fn evict_caches(threads: usize) -> impl FnMut() {
    let mut buffers = vec![vec![0u64; (64 << 20) / 8]; threads];
    move || {
        std::thread::scope(|scope| {
            for buffer in &mut buffers {
                scope.spawn(move || {
                    for word in buffer.iter_mut().step_by(8) {
                        *word = word.wrapping_add(1);
                    }
                });
            }
        });
    }
}

/// Times `scrape` alone, each run after `evict`.
fn timed_after<R>(b: &mut Bencher<'_>, evict: &mut impl FnMut(), mut scrape: impl FnMut() -> R) {
    b.iter_custom(|iterations| {
        let mut total = Duration::ZERO;
        for _ in 0..iterations {
            evict();
            let start = Instant::now();
            black_box(scrape());
            total += start.elapsed();
        }
        total
    })
}

fn pread(file: &File, into: &mut [u8]) {
    black_box(file.read_at(into, 0).expect("pread"));
}

// `criterion_group!` defines a public function without documentation.
#[allow(missing_docs)]
mod group {
    use super::*;

    criterion_group! {
        name = benches;
        // Each iteration is milliseconds to a few hundred: 10 samples in 5 s
        // keep the whole run to a couple of minutes on 2 cores.
        config = Criterion::default()
            .sample_size(10)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(5));
        targets = scrape, io_floor, exemplars, natives
    }
}
/// `criterion_main!`'s `main`, and the scenarios' directory removed after.
fn main() {
    group::benches();
    Criterion::default().configure_from_args().final_summary();
    drop(TEMP.lock().unwrap_or_else(PoisonError::into_inner).take());
}
