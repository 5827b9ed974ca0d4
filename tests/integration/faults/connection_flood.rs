//! A connection flood over the connection cap, from clients that trickle
//! their headers, idle, ask and never read, and connect and close, while new
//! connections keep scraping.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use multiprom_format::{encode_key, layout};
use multiprom_http::DEFAULT_MAX_CONNECTIONS;
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

use super::{eventually, fd_count, rss_kib, socket_count, write_good_counter};
use crate::bad_files::StopOnDrop;
use crate::harness::temp_dir;
use crate::http_client::get;
use crate::serve::serve;
use crate::spawned_server::PATIENCE;

/// Connections sending their request headers a byte at a time, reopened
/// when the server closes them.
const TRICKLING: usize = 300;
/// Connections that send nothing, reopened when the server closes them.
const IDLE: usize = 50;
/// Connections that ask for `/metrics` and never read the answers.
const NOT_READING: usize = 20;
/// Requests each of them sends at once (pipelined): more answers than the
/// socket buffers of a loopback connection hold (about 4 MiB), so the
/// server is left with an answer it cannot write.
pub(super) const PIPELINED: usize = 64;
/// How often each trickling connection sends a byte.
const TRICKLE_EVERY: Duration = Duration::from_millis(200);
/// Closed trickling or idle connections opened again each time, at most.
const REOPEN_PER_ROUND: usize = 32;
/// Connections opened and closed at once, in each burst.
const BURST: usize = 500;
/// How often a burst comes.
const BURST_EVERY: Duration = Duration::from_secs(2);
/// How long the scrapes are measured while the flood goes on.
const PROBING: Duration = Duration::from_secs(12);
/// A scrape that takes longer than this counts as failed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// The functional bound on a scrape's 99th percentile: far above what an
/// answer on loopback takes, far below a wait for a connection to free up.
const P99_BOUND: Duration = Duration::from_millis(100);
/// The start of the message logged when the cap is reached.
const CAP_MESSAGE: &str = "connections open, the limit (--max-connections)";

/// Series of the flood directory's big family, and the bytes of each
/// label value: about 100 KiB of exposition.
const SERIES: usize = 1000;
const LABEL_BYTES: usize = 80;

/// Writes one file of [`SERIES`] counter series next to `c_total` = 7.
pub(super) fn write_flood_dir(dir: &std::path::Path) {
    write_good_counter(&dir.join("counter_1.db"), 7.0);
    let keys: Vec<String> = (0..SERIES)
        .map(|i| {
            let name = format!("{i:0LABEL_BYTES$}");
            encode_key("flood", "flood_total", [("name", name.as_str())], "Flood.")
        })
        .collect();
    let image = layout::file_image(keys.iter().map(|k| (k.as_bytes(), 1.0, 0.0)), 0);
    let capacity = image.len().next_power_of_two();
    let image = layout::file_image(keys.iter().map(|k| (k.as_bytes(), 1.0, 0.0)), capacity);
    std::fs::write(dir.join("counter_2.db"), image).unwrap();
}

/// Raises this process's open-file limit to what the flood needs (its
/// clients and their reconnections), within the hard limit; the server,
/// started afterwards, inherits it.
fn raise_fd_limit() {
    const NEEDED: u64 = 4096;
    let limit = getrlimit(Resource::Nofile);
    if limit.current.is_some_and(|current| current < NEEDED) {
        let raised = limit.maximum.map_or(NEEDED, |max| max.min(NEEDED));
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(raised),
                maximum: limit.maximum,
            },
        )
        .unwrap();
    }
    let current = getrlimit(Resource::Nofile).current;
    assert!(
        current.is_none_or(|c| c >= 2048),
        "open-file limit {current:?}: too low for the flood"
    );
}

/// `multiprom_scrapes_total{result="ok"}` as the server reports it now.
fn scrapes_answered(addr: SocketAddr) -> u64 {
    let text = get(addr, "/metrics", &[]).text();
    text.lines()
        .find_map(|l| l.strip_prefix("multiprom_scrapes_total{result=\"ok\"} "))
        .and_then(|v| v.parse::<f64>().ok())
        .expect("multiprom_scrapes_total{result=\"ok\"}") as u64
}

/// One scrape on a new connection: its time, or why it failed (every step
/// bounded by [`PROBE_TIMEOUT`]).
fn probe(addr: SocketAddr, path: &str) -> Result<Duration, String> {
    let started = Instant::now();
    let mut stream =
        TcpStream::connect_timeout(&addr, PROBE_TIMEOUT).map_err(|e| format!("connect: {e}"))?;
    stream.set_read_timeout(Some(PROBE_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(PROBE_TIMEOUT)).unwrap();
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .map_err(|e| format!("send: {e}"))?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .map_err(|e| format!("read after {:?}: {e}", started.elapsed()))?;
    let took = started.elapsed();
    let text = String::from_utf8_lossy(&response);
    if !text.starts_with("HTTP/1.1 200 OK\r\n") {
        return Err(format!("answered {:?}", text.lines().next()));
    }
    if path == "/metrics" && !text.contains("\nc_total 7.0\n") {
        return Err("a scrape without c_total".into());
    }
    if took > PROBE_TIMEOUT {
        return Err(format!("took {took:?}"));
    }
    Ok(took)
}

/// A flood client's connection: opened with a short connect timeout (a full
/// listen backlog drops connection attempts), non-blocking once open.
fn open(addr: SocketAddr, first: &[u8]) -> Option<TcpStream> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    stream.set_nonblocking(true).ok()?;
    if !first.is_empty() && stream.write(first).is_err() {
        return None;
    }
    Some(stream)
}

/// Whether the server has closed (or answered and is closing) `stream`.
fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    !matches!(stream.read(&mut byte), Err(e) if e.kind() == ErrorKind::WouldBlock)
}

/// The trickling and idle connections: every [`TRICKLE_EVERY`] each
/// trickling one sends one more byte of a header that never ends, and up to
/// [`REOPEN_PER_ROUND`] of those the server closed are opened again, so
/// that they keep wanting more connections than the cap, at a pace that
/// leaves the machine's two cores to the server. Returns the reconnections.
fn trickle_and_idle(addr: SocketAddr, stop: &AtomicBool) -> usize {
    let head = b"GET /metrics HTTP/1.1\r\nHost: flood\r\nX-Slow: ";
    let mut trickling: Vec<Option<TcpStream>> = (0..TRICKLING).map(|_| open(addr, head)).collect();
    let mut idle: Vec<Option<TcpStream>> = (0..IDLE).map(|_| open(addr, b"")).collect();
    let mut reopened = 0;
    while !stop.load(Ordering::Relaxed) {
        let round = Instant::now();
        for slot in &mut trickling {
            if let Some(stream) = slot {
                let sent = stream.write(b"a");
                if closed_by_server(stream)
                    || matches!(&sent, Err(e) if e.kind() != ErrorKind::WouldBlock)
                {
                    *slot = None;
                }
            }
        }
        for slot in &mut idle {
            if slot.as_mut().is_some_and(closed_by_server) {
                *slot = None;
            }
        }
        let closed = trickling
            .iter_mut()
            .map(|s| (s, &head[..]))
            .chain(idle.iter_mut().map(|s| (s, &b""[..])))
            .filter(|(slot, _)| slot.is_none());
        for (slot, first) in closed.take(REOPEN_PER_ROUND) {
            *slot = open(addr, first);
            reopened += usize::from(slot.is_some());
        }
        std::thread::sleep(TRICKLE_EVERY.saturating_sub(round.elapsed()));
    }
    reopened
}

/// Bursts of [`BURST`] connections opened and closed at once, one every
/// [`BURST_EVERY`]. Returns the connections opened.
fn connect_and_close(addr: SocketAddr, stop: &AtomicBool) -> usize {
    let mut opened = 0;
    while !stop.load(Ordering::Relaxed) {
        let burst = Instant::now();
        for _ in 0..BURST {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            if let Ok(stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                drop(stream);
                opened += 1;
            }
        }
        while burst.elapsed() < BURST_EVERY && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    opened
}

/// The 99th percentile of `times` (sorted in place).
fn p99(times: &mut [Duration]) -> Duration {
    times.sort();
    times
        .get((times.len() * 99).div_ceil(100).saturating_sub(1))
        .copied()
        .unwrap_or_default()
}

/// All at once, over the default cap of 256: 300 connections trickling
/// headers, 50 idle ones, 20 that asked for `/metrics` and never read, and
/// bursts of 500 connect-and-close. Meanwhile scrapes of `/metrics` and
/// `/-/ready` from new connections all answer 200 with a 99th percentile
/// under 100 ms; the server's descriptors stay within the cap, its memory
/// bounded, and reaching the cap is logged once. The connections that never
/// read are closed by the server (the write timeout).
///
/// The whole test takes well under a minute, the interval at which
/// reaching the cap may be logged again.
#[test]
fn connection_flood_over_the_cap_leaves_scrapes_served() {
    raise_fd_limit();
    let dir = temp_dir();
    write_flood_dir(dir.path());
    let (mut server, addr) = serve(dir.path(), &[]);
    let pid = server.pid();
    // The second scrape sets the directory watch, which holds descriptors
    // of its own for as long as the server lives.
    for _ in 0..2 {
        assert_eq!(get(addr, "/metrics", &[]).status, 200);
    }
    let baseline_fds = fd_count(pid);
    let baseline_sockets = socket_count(pid);

    // The clients that never read go first: their answers are made until
    // the server can write no more of them, before the scrapes are timed.
    let before = scrapes_answered(addr);
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n").repeat(PIPELINED);
    let not_reading: Vec<TcpStream> = (0..NOT_READING)
        .map(|_| {
            let mut stream = TcpStream::connect_timeout(&addr, PATIENCE).unwrap();
            stream.set_write_timeout(Some(PATIENCE)).unwrap();
            stream.write_all(request.as_bytes()).unwrap();
            stream
        })
        .collect();
    let mut answered = scrapes_answered(addr);
    let deadline = Instant::now() + PATIENCE;
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = scrapes_answered(addr);
        // Only this check's own scrape was answered meanwhile.
        if now <= answered + 1 {
            break;
        }
        answered = now;
        assert!(
            Instant::now() < deadline,
            "the unread answers kept coming for {PATIENCE:?}"
        );
    }
    // Fewer answers than requests: every one of those clients has an
    // answer the server cannot write.
    let made = answered - before;
    assert!(
        made >= NOT_READING as u64 && made < (NOT_READING * PIPELINED) as u64,
        "{made} answers to the clients that never read: they are not stuck"
    );

    let stop = AtomicBool::new(false);
    let (reopened, bursts, mut metrics, mut ready, failures, max_fds, max_sockets, max_rss) =
        std::thread::scope(|s| {
            let _stop = StopOnDrop(&stop);
            let slow = s.spawn(|| trickle_and_idle(addr, &stop));
            let burst = s.spawn(|| connect_and_close(addr, &stop));
            server.wait_for_stderr(CAP_MESSAGE);
            let mut metrics = Vec::new();
            let mut ready = Vec::new();
            let mut failures = Vec::new();
            let (mut max_fds, mut max_sockets, mut max_rss) = (0, 0, 0);
            let until = Instant::now() + PROBING;
            for i in 0.. {
                if Instant::now() >= until {
                    break;
                }
                let (path, times) = if i % 2 == 0 {
                    ("/metrics", &mut metrics)
                } else {
                    ("/-/ready", &mut ready)
                };
                match probe(addr, path) {
                    Ok(took) => times.push(took),
                    Err(why) => failures.push(format!("{path}: {why}")),
                }
                max_fds = max_fds.max(fd_count(pid));
                max_sockets = max_sockets.max(socket_count(pid));
                max_rss = max_rss.max(rss_kib(pid));
                std::thread::sleep(Duration::from_millis(20));
            }
            stop.store(true, Ordering::Relaxed);
            let reopened = slow.join().unwrap();
            let bursts = burst.join().unwrap();
            (
                reopened,
                bursts,
                metrics,
                ready,
                failures,
                max_fds,
                max_sockets,
                max_rss,
            )
        });
    let (metrics_p99, ready_p99) = (p99(&mut metrics), p99(&mut ready));
    eprintln!(
        "connection flood: /metrics {} answered, p99 {metrics_p99:?}, max {:?}; \
         /-/ready {} answered, p99 {ready_p99:?}, max {:?}; {} failed; \
         {reopened} flood connections reopened, {bursts} connect-and-close; \
         {made} answers made for the clients that never read; at most {max_fds} descriptors \
         (baseline {baseline_fds}), {max_sockets} sockets (baseline {baseline_sockets}), RSS at most {max_rss} KiB",
        metrics.len(),
        metrics.last().copied().unwrap_or_default(),
        ready.len(),
        ready.last().copied().unwrap_or_default(),
        failures.len(),
    );
    assert!(
        failures.is_empty(),
        "{} scrapes failed, the first ones: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(
        metrics.len() >= 50 && ready.len() >= 50,
        "too few scrapes answered"
    );
    assert!(metrics_p99 <= P99_BOUND, "/metrics p99 {metrics_p99:?}");
    assert!(ready_p99 <= P99_BOUND, "/-/ready p99 {ready_p99:?}");
    // The flood really went over the cap, and the cap held: the connections
    // served, the one being admitted, and a scrape's own files.
    assert!(
        reopened + bursts > DEFAULT_MAX_CONNECTIONS,
        "the flood never went over the cap"
    );
    assert!(
        max_sockets <= baseline_sockets + DEFAULT_MAX_CONNECTIONS + 1,
        "{max_sockets} sockets, {baseline_sockets} before the flood"
    );
    assert!(
        max_fds <= baseline_fds + DEFAULT_MAX_CONNECTIONS + 8,
        "{max_fds} descriptors, {baseline_fds} before the flood"
    );
    assert!(max_rss < 128 * 1024, "RSS {max_rss} KiB under the flood");
    let logged = server.stderr().matches(CAP_MESSAGE).count();
    assert_eq!(
        logged,
        1,
        "the cap logged {logged} times in less than a minute:\n{}",
        server.stderr()
    );
    // The flood's connections are closed by now on its side; those that
    // never read are still open, and the server lets go of them all the
    // same: their answers have waited longer than the write timeout.
    eventually("descriptors back to the baseline", || {
        fd_count(pid) <= baseline_fds
    });
    drop(not_reading);
}
