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

mod connection_flood;
mod http_abuse;

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

/// What the open file descriptors of process `pid` are.
fn fd_targets(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .map(|target| target.to_string_lossy().into_owned())
        .collect()
}

/// Open sockets of process `pid`: its listener and its connections. Other
/// descriptors come and go with what a scrape reads.
fn socket_count(pid: u32) -> usize {
    fd_targets(pid)
        .iter()
        .filter(|target| target.starts_with("socket:"))
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
/// holding four: each one arriving at the cap is let in by closing the one
/// that has waited longest, so its descriptors do not grow past that, the
/// cap is logged, and a scrape is answered while all thirty are still open
/// on the client's side.
#[test]
fn connection_cap_holds_and_a_scrape_is_let_in_by_closing_idle_connections() {
    let dir = temp_dir();
    write_good_counter(&dir.path().join("counter_1.db"), 7.0);
    // A header timeout longer than the test, so that only making room can
    // close the idle connections.
    let (mut server, addr) = serve(
        dir.path(),
        &["--max-connections", "4", "--header-read-timeout", "120s"],
    );
    // The second scrape sets the directory watch, which holds descriptors
    // of its own for as long as the server lives.
    for _ in 0..2 {
        assert_eq!(get(addr, "/metrics", &[]).status, 200);
    }
    let pid = server.pid();
    // Let the finished request's connection close on the server side.
    let baseline = fd_count(pid);
    let baseline_sockets = socket_count(pid);
    let idle: Vec<TcpStream> = (0..30).map(|_| TcpStream::connect(addr).unwrap()).collect();
    server.wait_for_stderr("4 connections open, the limit (--max-connections)");
    // Those closed to make room see their end (the others would block).
    let closed = |idle: &[TcpStream]| {
        idle.iter()
            .filter(|&stream| {
                stream.set_nonblocking(true).unwrap();
                // `Read` is implemented for `&TcpStream`.
                let mut stream = stream;
                matches!(stream.read(&mut [0u8; 1]), Ok(0))
            })
            .count()
    };
    eventually("all thirty let in, the longest waiting closed", || {
        closed(&idle) >= 26
    });
    assert_eq!(closed(&idle), 26);
    let held = socket_count(pid);
    assert!(
        held <= baseline_sockets + 4,
        "{held} sockets with 30 idle connections, {baseline_sockets} before: the cap of 4 did not hold: {:?}",
        fd_targets(pid)
    );
    let response = get(addr, "/metrics", &[]);
    assert_eq!(response.status, 200);
    assert!(response.text().contains("\nc_total 7.0\n"));
    // The scrape took the place of one more.
    assert_eq!(closed(&idle), 27);
    drop(idle);
    eventually("descriptors back to the baseline", || {
        fd_count(pid) <= baseline
    });
}

/// Whether process `pid` holds a TCP socket connected to `client` (a local
/// address of this process): the server's end of that connection.
fn holds_connection_from(pid: u32, client: std::net::SocketAddr) -> bool {
    let sockets: std::collections::HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy();
            Some(
                target
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_owned(),
            )
        })
        .collect();
    let peer = format!(":{:04X}", client.port());
    std::fs::read_to_string(format!("/proc/{pid}/net/tcp"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .any(|fields| fields[2].ends_with(&peer) && sockets.contains(fields[9]))
}

/// A client that asks for more than the socket buffers hold and never
/// reads is closed by the server once its answer has waited
/// `--write-timeout` (1 s here, against 10 s by default), while the client
/// keeps its end open.
#[test]
fn a_client_that_stops_reading_is_closed_after_the_write_timeout() {
    let dir = temp_dir();
    connection_flood::write_flood_dir(dir.path());
    let (server, addr) = serve(dir.path(), &["--write-timeout", "1s"]);
    let pid = server.pid();
    let mut stream = TcpStream::connect(addr).unwrap();
    let client = stream.local_addr().unwrap();
    stream.set_write_timeout(Some(PATIENCE)).unwrap();
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n")
        .repeat(connection_flood::PIPELINED);
    stream.write_all(request.as_bytes()).unwrap();
    let sent = Instant::now();
    eventually("the connection accepted", || {
        holds_connection_from(pid, client)
    });
    eventually("the connection closed by the server", || {
        !holds_connection_from(pid, client)
    });
    // Making the answers takes a moment; the default timeout would take
    // ten seconds more.
    let took = sent.elapsed();
    assert!(took < Duration::from_secs(8), "closed only after {took:?}");
    drop(stream);
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
/// down, and every histogram's `_count` equals its highest (normally the
/// `+Inf`) bucket.
#[derive(Default)]
struct ScrapeChecks {
    counters: HashMap<String, f64>,
    scrapes: usize,
}

impl ScrapeChecks {
    fn check(&mut self, text: &str) {
        let samples = parse_exposition(text);
        // Per label set: the highest bucket (bound, value), and `_count`.
        let mut top_buckets: HashMap<String, (f64, f64)> = HashMap::new();
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
                let (rest, le) = labels.rsplit_once(",le=\"").expect("an le label");
                let bound = match le.trim_end_matches("\"}") {
                    "+Inf" => f64::INFINITY,
                    le => le.parse().expect("a numeric le"),
                };
                let top = top_buckets
                    .entry(format!("{rest}}}"))
                    .or_insert((f64::NEG_INFINITY, 0.0));
                if bound > top.0 {
                    *top = (bound, *value);
                }
            } else if let Some(labels) = series.strip_prefix("latency_seconds_count") {
                counts.insert(labels.to_owned(), *value);
            }
        }
        // `_count` is the highest bucket: `+Inf` once a worker has created
        // all of a child's buckets. A worker killed (or caught by the
        // scrape) half-way through creating them leaves lower buckets
        // only, and Python then counts up to the highest one present; so
        // does multiprom.
        assert_eq!(
            top_buckets.len(),
            counts.len(),
            "histogram series without both _count and buckets"
        );
        for (labels, count) in &counts {
            let top = top_buckets.get(labels).map(|&(_, value)| value);
            assert_eq!(
                top,
                Some(*count),
                "latency_seconds_count{labels} differs from its highest bucket"
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
    // The server kept its memory and descriptors in bounds throughout: a
    // few dozen of its own, and one per file of the directory (kept open
    // to ask the kernel about its writers).
    let files = std::fs::read_dir(&dir).unwrap().count();
    assert!(
        fd_count(server_pid) < 64 + files,
        "{} fds, {files} files",
        fd_count(server_pid)
    );
    assert!(
        rss_kib(server_pid) < 128 * 1024,
        "RSS {} KiB",
        rss_kib(server_pid)
    );
}

/// The directory removed while served, then made again with new files:
/// scrapes keep answering, and the new files are merged.
#[test]
fn directory_removed_and_recreated() {
    let tmp = temp_dir();
    let dir = tmp.path().join("metrics");
    std::fs::create_dir(&dir).unwrap();
    write_good_counter(&dir.join("counter_1.db"), 7.0);
    let (mut server, addr) = serve(&dir, &[]);
    assert!(get(addr, "/metrics", &[])
        .text()
        .contains("\nc_total 7.0\n"));
    std::fs::remove_dir_all(&dir).unwrap();
    // While it is gone, scrapes answer with multiprom's own metrics only,
    // saying so (`multiprom_directory_listable 0`), and readiness fails
    // with the reason; the server itself stays up.
    for _ in 0..5 {
        let response = get(addr, "/metrics", &[]);
        let text = response.text();
        assert_eq!(response.status, 200, "{text}");
        assert!(
            text.contains("\nmultiprom_directory_listable 0.0\n"),
            "{text}"
        );
        assert!(!text.contains("\nc_total "), "{text}");
        let ready = get(addr, "/-/ready", &[]);
        assert_eq!(ready.status, 503, "{}", ready.text());
    }
    std::fs::create_dir(&dir).unwrap();
    write_good_counter(&dir.join("counter_2.db"), 9.0);
    eventually("the new directory's files merged", || {
        get(addr, "/metrics", &[])
            .text()
            .contains("\nc_total 9.0\n")
    });
    // A file added later is seen too (the new directory is watched).
    write_good_counter(&dir.join("counter_3.db"), 1.0);
    eventually("a later file merged", || {
        get(addr, "/metrics", &[])
            .text()
            .contains("\nc_total 10.0\n")
    });
    assert!(server.try_wait().is_none(), "{}", server.stderr());
}

/// 16,000 files, 5% of them damaged in every way the reader knows: one
/// scrape merges the 15,200 good ones exactly and reports each bad one;
/// `serve` scrapes it repeatedly without holding a descriptor per file.
#[test]
fn sixteen_thousand_files_with_damaged_ones() {
    let tmp = temp_dir();
    let dir = tmp.path().join("metrics");
    std::fs::create_dir(&dir).unwrap();
    let good = good_counter_image(1.0);
    let cases = cases();
    let mut bad = 0;
    for i in 0..16_000u32 {
        if i % 20 == 0 {
            // A bad file of each kind in turn, under a name of its own.
            let case = &cases[bad % cases.len()];
            let scratch = tmp.path().join("scratch");
            std::fs::create_dir(&scratch).unwrap();
            let made = scratch.join(std::ffi::OsStr::from_bytes(case.file));
            (case.make)(&made);
            let target = dir.join(format!("{}{}.db", case_prefix(case.file), 100_000 + i));
            std::fs::rename(&made, &target).unwrap();
            std::fs::remove_dir(&scratch).unwrap();
            bad += 1;
        } else {
            // Ids no bad case's symbolic link points at.
            std::fs::write(dir.join(format!("counter_{}.db", 1_000_000 + i)), &good).unwrap();
        }
    }
    assert_eq!(bad, 800);
    let out = multiprom()
        .arg("scrape")
        .arg("--dir")
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("\nc_total 15200.0\n"), "{stdout}");
    let warned: std::collections::HashSet<&str> = stderr
        .lines()
        .filter_map(|l| l.split_once("skipped ").map(|(_, rest)| rest))
        .filter_map(|rest| rest.split(": offset").next())
        .collect();
    assert_eq!(warned.len(), 800, "{stderr}");

    let (server, addr) = serve(&dir, &[]);
    for _ in 0..3 {
        let response = get(addr, "/metrics", &[]);
        assert_eq!(response.status, 200);
        assert!(response.text().contains("\nc_total 15200.0\n"));
    }
    let fds = fd_count(server.pid());
    assert!(fds < 64, "{fds} descriptors after scraping 16,000 files");
    let rss = rss_kib(server.pid());
    assert!(
        rss < 256 * 1024,
        "RSS {rss} KiB after scraping 16,000 files"
    );
}

/// The part of a bad-file case's name before its id, so that each copy
/// gets a distinct name of the same kind: `counter_101.db` -> `counter_`,
/// `gauge_bogus_116.db` -> `gauge_bogus_`, `app.db` -> `app`.
fn case_prefix(file: &[u8]) -> String {
    let name = String::from_utf8_lossy(file);
    let stem = name.strip_suffix(".db").unwrap_or(&name);
    match stem.rfind('_') {
        Some(at) => stem[..=at].to_owned(),
        None => stem.to_owned(),
    }
}
