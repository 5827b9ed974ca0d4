//! Fault injection: damaged, hostile and vanishing files, killed writers and
//! abusive HTTP clients against the real binary, with real prometheus_client
//! and Rust writers in their own processes.
//!
//! Every wait is bounded ([`PATIENCE`]); background threads stop through a
//! guard that is dropped even when an assertion panics.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use multiprom_format::{encode_key, layout};

use crate::harness::{multiprom, temp_dir, write_aged};
use crate::http_client::get;
use crate::serve::serve;
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
