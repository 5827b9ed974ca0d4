//! Files shrinking under `multiprom serve`'s memory maps: truncated,
//! replaced in place and deleted while the endpoint is scraped in a loop.
//! The server must never die of SIGBUS; the file is reported, the others
//! keep merging.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};
use rustix::process::Signal;

use crate::harness::{multiprom, temp_dir};
use crate::http_client::get;
use crate::spawned_server::Spawned;

/// A counter file for `pid` with `entries` series, so its values reach well
/// past the first pages.
fn write_counter(dir: &Path, pid: &str, entries: usize) {
    let mut file =
        FileWriter::open(dir, &FileName::new(MetricKind::Counter, pid).unwrap()).unwrap();
    for i in 0..entries {
        let key = encode_key(
            &format!("victim{pid}"),
            &format!("victim{pid}_total"),
            [("series", i.to_string().as_str())],
            "A file that will shrink.",
        );
        file.slot(&key).unwrap().add(1.0);
    }
}

fn serve(dir: &Path) -> (Spawned, std::net::SocketAddr) {
    let mut cmd = multiprom();
    cmd.env("RUST_LOG", "debug")
        .arg("serve")
        .arg("--dir")
        .arg(dir)
        .args(["--listen", "127.0.0.1:0"]);
    let mut server = Spawned::start(cmd);
    let addr = server.address();
    (server, addr)
}

/// Truncated through a hard link in another directory, the file changes
/// without any event in the watched directory, so the next scrape reads the
/// stale map and faults: the guard must turn that into a reported file.
#[test]
fn a_file_truncated_behind_the_watch_is_reported_not_a_crash() {
    let dir = temp_dir();
    let elsewhere = temp_dir();
    write_counter(dir.path(), "1", 2);
    write_counter(dir.path(), "2", 400);
    let link = elsewhere.path().join("victim.db");
    std::fs::hard_link(dir.path().join("counter_2.db"), &link).unwrap();
    assert!(std::fs::metadata(&link).unwrap().len() > 16_384);

    // A writer holds the file (as a worker would), so every scrape reads
    // it through its map rather than leaving it settled.
    let _writer = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join("counter_2.db"))
        .unwrap();
    let (mut server, addr) = serve(dir.path());
    // The first scrape reads the files; the second sets the watch and maps
    // them.
    for _ in 0..2 {
        let before = get(addr, "/metrics", &[]).text();
        assert!(
            before.contains("victim2_total{series=\"399\"} 1.0"),
            "{before}"
        );
    }

    std::fs::OpenOptions::new()
        .write(true)
        .open(&link)
        .unwrap()
        .set_len(64)
        .unwrap();
    let after = get(addr, "/metrics", &[]);
    assert_eq!(after.status, 200);
    let after = after.text();
    assert!(after.contains("victim1_total{series=\"1\"} 1.0"), "{after}");
    assert!(!after.contains("victim2_total"), "{after}");
    assert!(
        after.contains("multiprom_scrape_files{state=\"bad\"} 1.0"),
        "{after}"
    );
    assert_eq!(server.try_wait(), None, "the server died");
    let stderr = server.wait_for_stderr("counter_2.db: offset 0");
    assert!(
        stderr.contains("the file shrank under its memory map"),
        "{stderr}"
    );
    // Put back (a writer starting over): it merges again.
    std::fs::remove_file(dir.path().join("counter_2.db")).unwrap();
    write_counter(dir.path(), "2", 3);
    let again = get(addr, "/metrics", &[]).text();
    assert!(again.contains("victim2_total{series=\"2\"} 1.0"), "{again}");
    server.signal(Signal::TERM);
    let (status, _) = server.wait();
    assert_eq!(status.code(), Some(0));
}

/// Truncations, in-place rewrites and deletions, some seen by the watch and
/// some not (through a hard link elsewhere), while the endpoint is scraped
/// as fast as it answers: every scrape answers 200 with the steady file's
/// series, and the server is alive at the end.
#[test]
fn files_shrinking_during_scrapes_never_crash_the_server() {
    let dir = temp_dir();
    let elsewhere = temp_dir();
    write_counter(dir.path(), "1", 2);
    for pid in 2..6 {
        write_counter(dir.path(), &pid.to_string(), 300);
    }
    let (mut server, addr) = serve(dir.path());
    let stop = AtomicBool::new(false);
    let mut scrapes = 0;
    std::thread::scope(|s| {
        let mutator = s.spawn(|| {
            let mut round = 0u32;
            while !stop.load(Ordering::SeqCst) {
                let pid = 2 + round % 4;
                let name = format!("counter_{pid}.db");
                let path = dir.path().join(&name);
                match round % 4 {
                    // Truncated in place, seen by the watch.
                    0 => {
                        let _ = std::fs::OpenOptions::new()
                            .write(true)
                            .open(&path)
                            .and_then(|f| f.set_len(100));
                    }
                    // Truncated through a link elsewhere: no event.
                    1 => {
                        let link = elsewhere.path().join(&name);
                        let _ = std::fs::remove_file(&link);
                        if std::fs::hard_link(&path, &link).is_ok() {
                            let _ = std::fs::OpenOptions::new()
                                .write(true)
                                .open(&link)
                                .and_then(|f| f.set_len(0));
                        }
                    }
                    // Rewritten in place with other bytes.
                    2 => {
                        let _ = std::fs::write(&path, vec![7u8; 9000]);
                    }
                    // Deleted and written anew.
                    _ => {
                        let _ = std::fs::remove_file(&path);
                        write_counter(dir.path(), &pid.to_string(), 300);
                    }
                }
                round += 1;
                std::thread::sleep(Duration::from_millis(3));
            }
            round
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            while Instant::now() < deadline {
                let response = get(addr, "/metrics", &[]);
                assert_eq!(response.status, 200);
                assert!(response.text().contains("victim1_total{series=\"1\"} 1.0"));
                scrapes += 1;
            }
        }));
        stop.store(true, Ordering::SeqCst);
        let rounds = mutator.join().unwrap();
        if let Err(panic) = result {
            std::panic::resume_unwind(panic);
        }
        assert!(rounds > 100, "only {rounds} mutations");
    });
    assert!(scrapes > 20, "only {scrapes} scrapes");
    assert_eq!(server.try_wait(), None, "the server died");
    server.signal(Signal::TERM);
    let (status, stderr) = server.wait();
    assert_eq!(status.code(), Some(0), "{stderr}");
}
