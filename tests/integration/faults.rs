//! Fault injection: damaged, hostile and vanishing files, killed writers and
//! abusive HTTP clients against the real binary, with real prometheus_client
//! and Rust writers in their own processes.
//!
//! Every wait is bounded ([`PATIENCE`]); background threads stop through a
//! guard that is dropped even when an assertion panics.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use multiprom_client::{GaugeMode, MultiprocessRegistry};
use multiprom_format::{encode_key, layout, read_file};

use crate::bad_files::{cases, StopOnDrop};
use crate::harness::{multiprom, python, python_script, run_python, temp_dir, write_aged};
use crate::http_client::get;
use crate::serve::{partition_self, serve};
use crate::spawned_server::PATIENCE;

/// A valid counter file (`c_total` = `value`), small: 256 bytes.
fn good_counter_image(value: f64) -> Vec<u8> {
    let key = encode_key("c", "c_total", [], "A counter.");
    layout::file_image([(key.as_bytes(), value, 0.0)], 256)
}

fn write_good_counter(path: &Path, value: f64) {
    std::fs::write(path, good_counter_image(value)).unwrap();
}

/// A damaged header claiming almost 2 GiB in use, over a sparse file.
fn write_sparse_claim(path: &Path, size: u64) {
    write_aged(path, &0x7fff_fff8i32.to_ne_bytes());
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(size)
        .unwrap();
}

/// `inspect` on a header claiming 2 GiB over a sparse file, with its address
/// space limited to 1 GiB: reading (or allocating) what the header claims
/// would abort it. The dangling symbolic link, the device and the FIFO next
/// to it are reported as bad, each with its reason, without blocking.
#[test]
fn inspect_reads_what_is_there_not_what_a_header_claims() {
    let dir = temp_dir();
    let d = dir.path();
    write_sparse_claim(&d.join("counter_1.db"), 3 << 30);
    write_sparse_claim(&d.join("counter_2.db"), 10 << 30);
    std::os::unix::fs::symlink(d.join("missing"), d.join("counter_3.db")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", d.join("counter_4.db")).unwrap();
    let fifo = Command::new("mkfifo")
        .arg(d.join("counter_5.db"))
        .status()
        .unwrap();
    assert!(fifo.success());
    let bin = multiprom().get_program().to_owned();
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#"ulimit -v 1048576 && exec "$0" inspect --check "$1""#)
        .arg(bin)
        .arg(d)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let line = |name: &str| {
        stdout
            .lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("no line for {name}:\n{stdout}\n{stderr}"))
            .to_owned()
    };
    assert!(line("counter_1.db").contains("offset 8: key is not valid JSON"));
    assert!(line("counter_2.db").contains("over the 4 GiB limit"));
    assert!(line("counter_3.db").contains("dangling symbolic link"));
    assert!(line("counter_4.db").contains("not a regular file (a device)"));
    assert!(line("counter_5.db").contains("not a regular file (a FIFO)"));

    // The table shows the header as claimed, and no entries.
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#"ulimit -v 1048576 && exec "$0" inspect "$1""#)
        .arg(multiprom().get_program())
        .arg(d.join("counter_1.db"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("0 entries, used 2147483640 of 3221225472 bytes"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Open file descriptors of process `pid`.
fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// Waits (at most [`PATIENCE`]) until `check` holds.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !check() {
        assert!(Instant::now() < deadline, "{what}: not within {PATIENCE:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// With `--max-connections 4`, thirty idle connections leave the server
/// holding four: its descriptors do not grow past that, the cap is logged,
/// and a scrape waits (unanswered) until connections close, then succeeds.
#[test]
fn connection_cap_holds_and_a_scrape_succeeds_once_connections_free_up() {
    let dir = temp_dir();
    write_good_counter(&dir.path().join("counter_1.db"), 7.0);
    let (mut server, addr) = serve(dir.path(), &["--max-connections", "4"]);
    assert_eq!(get(addr, "/metrics", &[]).status, 200);
    let pid = server.pid();
    // Let the finished request's connection close on the server side.
    let baseline = fd_count(pid);
    let idle: Vec<TcpStream> = (0..30).map(|_| TcpStream::connect(addr).unwrap()).collect();
    server.wait_for_stderr("4 connections open, the limit (--max-connections)");
    let held = fd_count(pid);
    assert!(
        held <= baseline + 4,
        "{held} descriptors with 30 idle connections, {baseline} before: the cap of 4 did not hold"
    );
    // A scrape now waits in the listen backlog: no answer while the cap is
    // reached (a short look, it is an absence being checked).
    let mut waiting = TcpStream::connect(addr).unwrap();
    waiting
        .write_all(
            format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .unwrap();
    waiting
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut first = [0u8; 1];
    let early = waiting.read(&mut first);
    assert!(
        matches!(&early, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "answered while the cap was reached: {early:?}"
    );
    drop(idle);
    waiting.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut response = Vec::new();
    waiting.read_to_end(&mut response).unwrap();
    let response = String::from_utf8_lossy(&response);
    assert!(
        response.starts_with("HTTP/1.1 200 OK\r\n") && response.contains("\nc_total 7.0\n"),
        "{response}"
    );
    // The idle connections' places are given back.
    eventually("descriptors back to the baseline", || {
        fd_count(pid) <= baseline
    });
}
/// Resident memory of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

/// Set in the environment of the Rust worker processes this test binary
/// starts as itself.
const WRITER_ENV: &str = "MULTIPROM_FAULTS_WRITER";

/// A Rust worker (this test binary re-run with [`WRITER_ENV`] set): the
/// metrics of tests/python/fault_writer.py, through multiprom-client, in a
/// loop until killed. A no-op as an ordinary test.
#[test]
fn fault_writer_process() {
    if std::env::var_os(WRITER_ENV).is_none() {
        return;
    }
    let registry = MultiprocessRegistry::from_env().unwrap();
    let jobs = registry
        .counter_family("jobs", "Jobs done.", &["kind"])
        .unwrap();
    let latency = registry
        .histogram_family("latency_seconds", "Latency.", &[0.1, 0.5, 1.0], &["kind"])
        .unwrap();
    let busy = registry
        .gauge("busy", "Busy workers.", GaugeMode::LiveSum)
        .unwrap();
    busy.set(1.0);
    println!("ready");
    for step in 0u64.. {
        let kind = format!("k{}", step / 10 % 5000);
        jobs.labels(&[&kind]).unwrap().inc();
        latency
            .labels(&[&kind])
            .unwrap()
            .observe((step % 13) as f64 / 10.0);
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Worker processes, killed (SIGKILL) when dropped.
struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn start_worker(dir: &Path, rust: bool) -> Child {
    let mut cmd = if rust {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "faults::fault_writer_process",
            "--test-threads=1",
            "--nocapture",
            "--quiet",
        ])
        .env(WRITER_ENV, "1");
        cmd
    } else {
        let mut cmd = Command::new(python());
        cmd.arg(python_script("fault_writer.py"));
        cmd
    };
    cmd.env("PROMETHEUS_MULTIPROC_DIR", dir)
        .env_remove("prometheus_multiproc_dir")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a worker")
}

/// A small, fast pseudo-random sequence (xorshift), seeded from the clock;
/// the seed is printed so a failure can be replayed.
struct Chance(u64);

impl Chance {
    fn new(what: &str) -> Chance {
        let seed = std::env::var("MULTIPROM_FAULTS_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        eprintln!("{what}: MULTIPROM_FAULTS_SEED={seed}");
        Chance(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Checks that `text` is a well-formed text exposition: every line a
/// `# HELP`/`# TYPE` comment or `name{labels} value` with a number. Returns
/// the samples as (series, value).
fn parse_exposition(text: &str) -> Vec<(String, f64)> {
    let mut samples = Vec::new();
    for line in text.lines() {
        if line.starts_with("# HELP ") || line.starts_with("# TYPE ") {
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("not a sample line: {line:?}"));
        let name_end = series.find('{').unwrap_or(series.len());
        let name = &series[..name_end];
        assert!(
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':'),
            "bad metric name in {line:?}"
        );
        assert!(
            name_end == series.len() || series.ends_with('}'),
            "bad labels in {line:?}"
        );
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("bad value in {line:?}")),
        };
        samples.push((series.to_owned(), value));
    }
    samples
}

/// What scrapes under faults must show: every counter series never goes
/// down, and every histogram's `_count` equals its `+Inf` bucket.
#[derive(Default)]
struct ScrapeChecks {
    counters: HashMap<String, f64>,
    scrapes: usize,
}

impl ScrapeChecks {
    fn check(&mut self, text: &str) {
        let samples = parse_exposition(text);
        let mut inf_buckets = HashMap::new();
        let mut counts = HashMap::new();
        for (series, value) in &samples {
            if series.starts_with("jobs_total") {
                let before = self.counters.insert(series.clone(), *value);
                if let Some(before) = before {
                    assert!(
                        *value >= before,
                        "{series} went down from {before} to {value} (scrape {})",
                        self.scrapes
                    );
                }
            } else if let Some(labels) = series.strip_prefix("latency_seconds_bucket") {
                if let Some(rest) = labels.strip_suffix(",le=\"+Inf\"}") {
                    inf_buckets.insert(format!("{rest}}}"), *value);
                }
            } else if let Some(labels) = series.strip_prefix("latency_seconds_count") {
                counts.insert(labels.to_owned(), *value);
            }
        }
        assert_eq!(
            inf_buckets.len(),
            counts.len(),
            "histogram series without both _count and +Inf"
        );
        for (labels, count) in &counts {
            assert_eq!(
                inf_buckets.get(labels),
                Some(count),
                "latency_seconds_count{labels} differs from its +Inf bucket"
            );
        }
        // Every series seen before is still there.
        for series in self.counters.keys() {
            assert!(
                samples.iter().any(|(s, _)| s == series),
                "{series} disappeared"
            );
        }
        self.scrapes += 1;
    }
}

/// Sum of `jobs_total` over every good file, read with the format crate
/// (not the collector).
fn jobs_on_disk(dir: &Path) -> f64 {
    let mut total = 0.0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("counter_") || !name.ends_with(".db") {
            continue;
        }
        if let Ok(contents) = read_file(&path) {
            total += contents
                .entries
                .iter()
                .filter(|e| e.key.sample == "jobs_total")
                .map(|e| e.value)
                .sum::<f64>();
        }
    }
    total
}

/// A file a writer was killed while creating (0 bytes, or `used` = 0): it
/// holds nothing, and Python's collector fails on it.
fn left_half_created(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| b.len() < 8 || b[..4] == [0; 4])
}

/// Makes a bad file at a path.
type MakeFile = fn(&Path);

/// Python and Rust workers write while being killed (SIGKILL) at random
/// moments and replaced, and every kind of bad file appears, changes and
/// disappears; meanwhile `serve` is scraped as fast as it answers. Every
/// scrape answers 200 and parses, counters never go down, histogram counts
/// match their `+Inf` buckets; at the end the output equals Python's merge
/// of the same files and the counters' sum equals what is on disk.
#[test]
fn killed_writers_and_damaged_files_during_scrapes() {
    let tmp = temp_dir();
    let dir = tmp.path().join("metrics");
    let staging = tmp.path().join("staging");
    std::fs::create_dir(&dir).unwrap();
    std::fs::create_dir(&staging).unwrap();
    // Every kind of bad file, made once, moved in and out by renaming.
    let cases = cases();
    for case in &cases {
        (case.make)(&staging.join(std::ffi::OsStr::from_bytes(case.file)));
    }
    let extra: Vec<(&str, MakeFile)> = vec![
        ("counter_900001.db", |p| write_sparse_claim(p, 3 << 30)),
        ("counter_900002.db", |p| write_sparse_claim(p, 5 << 30)),
        ("counter_900003.db", |p| {
            std::os::unix::fs::symlink("/dev/zero", p).unwrap()
        }),
        ("counter_900004.db", |p| {
            let socket = std::os::unix::net::UnixListener::bind(p).unwrap();
            drop(socket);
        }),
    ];
    for (name, make) in &extra {
        make(&staging.join(name));
    }
    let mut names: Vec<std::ffi::OsString> = cases
        .iter()
        .map(|c| std::ffi::OsStr::from_bytes(c.file).to_owned())
        .collect();
    names.extend(extra.iter().map(|(n, _)| (*n).into()));

    let (server, addr) = serve(&dir, &[]);
    let server_pid = server.pid();
    let stop = AtomicBool::new(false);
    let mut chance = Chance::new("killed_writers_and_damaged_files_during_scrapes");
    let mut workers = Workers((0..6).map(|i| start_worker(&dir, i % 3 == 2)).collect());
    let mut checks = ScrapeChecks::default();
    let mut kills = 0;
    std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        // Bad files appear, change and disappear.
        let damage = s.spawn(|| {
            let mut chance = Chance(0x9e37_79b9_7f4a_7c15);
            let in_place = dir.join("counter_900100.db");
            let mut moves = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let name = &names[chance.below(names.len() as u64) as usize];
                let (from, to) = if dir.join(name).symlink_metadata().is_ok() {
                    (dir.join(name), staging.join(name))
                } else {
                    (staging.join(name), dir.join(name))
                };
                std::fs::rename(from, to).unwrap();
                moves += 1;
                // A good file truncated and rewritten in place (same inode:
                // the server may have it mapped), or replaced by renaming.
                match chance.below(4) {
                    0 => write_good_counter(&in_place, 1.0),
                    1 => {
                        if let Ok(file) = std::fs::File::options().write(true).open(&in_place) {
                            let _ = file.set_len(chance.below(300));
                        }
                    }
                    2 => {
                        let tmp = staging.join("replacement");
                        write_good_counter(&tmp, 2.0);
                        std::fs::rename(&tmp, &in_place).unwrap();
                    }
                    _ => {
                        let _ = std::fs::remove_file(&in_place);
                    }
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            moves
        });
        let scraper = s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let response = get(addr, "/metrics", &[]);
                assert_eq!(response.status, 200, "{}", response.text());
                checks.check(&response.text());
            }
        });
        // Kill a random worker at a random moment, start a new one.
        let end = Instant::now() + Duration::from_secs(12);
        while Instant::now() < end && !scraper.is_finished() {
            std::thread::sleep(Duration::from_millis(100 + chance.below(400)));
            let victim = chance.below(workers.0.len() as u64) as usize;
            let mut old = std::mem::replace(
                &mut workers.0[victim],
                start_worker(&dir, chance.below(3) == 0),
            );
            old.kill().unwrap();
            old.wait().unwrap();
            kills += 1;
        }
        stop.store(true, Ordering::Relaxed);
        scraper.join().unwrap();
        let moves = damage.join().unwrap();
        assert!(moves > 100, "only {moves} bad-file moves");
    });
    drop(workers);
    assert!(checks.scrapes > 50, "only {} scrapes", checks.scrapes);
    eprintln!(
        "killed_writers_and_damaged_files_during_scrapes: {} scrapes, {kills} workers killed",
        checks.scrapes
    );
    assert!(kills >= 20, "only {kills} workers killed");

    // Quiet now: bad files out, half-created files (nothing in them; Python
    // fails on them) out.
    for name in &names {
        let path = dir.join(name);
        if path.symlink_metadata().is_ok_and(|m| m.is_dir()) {
            std::fs::remove_dir(&path).unwrap();
        } else if path.symlink_metadata().is_ok() {
            std::fs::remove_file(&path).unwrap();
        }
    }
    let _ = std::fs::remove_file(dir.join("counter_900100.db"));
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if left_half_created(&path) {
            std::fs::remove_file(&path).unwrap();
        }
    }
    let text = get(addr, "/metrics", &[]).text();
    checks.check(&text);
    let (ours, _self_metrics) = partition_self(&text);
    let python = String::from_utf8(run_python(
        "serve_python_exposition.py",
        &[dir.to_str().unwrap(), "text"],
        &[],
    ))
    .unwrap();
    assert_eq!(ours.concat(), python, "final output differs from Python's");
    let served: f64 = parse_exposition(&text)
        .iter()
        .filter(|(s, _)| s.starts_with("jobs_total"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(served, jobs_on_disk(&dir));
    assert!(served > 0.0);
    // The server kept its memory and descriptors in bounds throughout.
    assert!(fd_count(server_pid) < 64, "{} fds", fd_count(server_pid));
    assert!(
        rss_kib(server_pid) < 128 * 1024,
        "RSS {} KiB",
        rss_kib(server_pid)
    );
}
