//! `serve --compact` and `run --compact` against real prometheus_client
//! workers coming and going: totals exact, counters never going backwards,
//! the directory bounded, a `kill -9` of multiprom survived, and gunicorn's
//! `mark_process_dead` hook never disturbed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};
use rustix::process::Signal;

use crate::gunicorn::{
    add_churning_gunicorn, churn, free_port, wait_for_app, Churn, StopGunicornOnDrop, StopOnDrop,
};
use crate::harness::{multiprom, python, python_script, run_python, temp_dir};
use crate::http_client::get;
use crate::spawned_server::{Spawned, PATIENCE};

/// `jobs_total` in a text exposition, if present.
fn jobs_total(text: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix("jobs_total "))
        .and_then(|v| v.trim().parse().ok())
}

fn db_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            let name = name.to_string_lossy();
            name.ends_with(".db") && !name.starts_with('.')
        })
        .count()
}

fn serve_compacting(dir: &Path) -> (Spawned, SocketAddr) {
    let mut cmd = multiprom();
    cmd.arg("serve").arg("--dir").arg(dir).args([
        "--listen",
        "127.0.0.1:0",
        "--compact",
        "--compact-interval",
        "50ms",
    ]);
    let mut server = Spawned::start(cmd);
    let addr = server.address();
    server.wait_for_stderr("compacting exited workers' files");
    (server, addr)
}

/// The pid of a process that has exited and been collected.
pub(crate) fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// A counter file written by a Rust writer under `pid`, as a worker would.
fn rust_worker_file(dir: &Path, pid: u32, value: f64) {
    let name = FileName::new(MetricKind::Counter, pid.to_string()).unwrap();
    let mut writer = FileWriter::open(dir, &name).unwrap();
    let key = encode_key("jobs", "jobs_total", [], "Jobs done");
    writer.slot(&key).unwrap().add(value);
}

/// The seven compacted files, the long-lived worker's counter and a Rust
/// worker's counter: what the churn test's directory holds between batches.
const SETTLED: usize = 9;

#[test]
fn churn_with_a_kill_9_keeps_totals_exact_and_the_directory_small() {
    let dir = temp_dir();
    // One long-lived worker, as a server always has: it holds its file the
    // whole time (and shows a restarted multiprom that the writers are
    // visible from where it runs).
    let mut live = std::process::Command::new(python())
        .args([
            "-c",
            "import sys\nfrom prometheus_client import Counter\n\
             Counter('jobs', 'Jobs done').inc(7)\nprint('ready', flush=True)\nsys.stdin.read()",
        ])
        .env("PROMETHEUS_MULTIPROC_DIR", dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(live.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");
    let (server, addr) = serve_compacting(dir.path());
    let server = Mutex::new(server);
    let addr = Mutex::new(addr);
    // A Rust worker's file under a pid that then gets "reused": once the
    // first file is folded, a new file appears under the same pid.
    let reused = dead_pid();
    rust_worker_file(dir.path(), reused, 100.0);

    let stop = AtomicBool::new(false);
    let paused = AtomicBool::new(false);
    let scrapes = AtomicUsize::new(0);
    let max_files = AtomicUsize::new(0);
    let last_seen = Mutex::new(0.0f64);
    let workers = std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        s.spawn(|| {
            while !stop.load(Ordering::SeqCst) {
                if paused.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                max_files.fetch_max(db_files(dir.path()), Ordering::SeqCst);
                let text = {
                    // Held across the request, so a restart waits for it.
                    let at = addr.lock().unwrap();
                    get(*at, "/metrics", &[]).text()
                };
                // Absent only before the first worker wrote.
                if let Some(value) = jobs_total(&text) {
                    let mut last = last_seen.lock().unwrap();
                    assert!(value >= *last, "jobs_total went from {last} to {value}");
                    *last = value;
                }
                scrapes.fetch_add(1, Ordering::SeqCst);
            }
        });
        let churn = |waves: &str| {
            let out = std::process::Command::new(python())
                .arg(python_script("compaction_churn.py"))
                .args([waves, "4"])
                .env("PROMETHEUS_MULTIPROC_DIR", dir.path())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout)
                .unwrap()
                .trim()
                .parse::<usize>()
                .unwrap()
        };
        // Batches of 5 waves of 4 workers; after each, wait (bounded)
        // until the directory is back to the compacted files and the live
        // worker's: so the bound below does not depend on machine speed.
        let settled = || {
            let deadline = Instant::now() + PATIENCE;
            while db_files(dir.path()) > SETTLED {
                assert!(
                    Instant::now() < deadline,
                    "{} files never folded",
                    db_files(dir.path())
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        let mut workers = 0;
        for _ in 0..5 {
            workers += churn("5");
            settled();
        }
        // The reused pid's first file has been folded by now; a new
        // process with that pid writes again.
        assert!(!dir.path().join(format!("counter_{reused}.db")).exists());
        rust_worker_file(dir.path(), reused, 50.0);

        // kill -9 mid-churn (scrapes paused: nothing answers meanwhile),
        // then a restart on the same directory recovers and goes on.
        {
            let mut at = addr.lock().unwrap();
            paused.store(true, Ordering::SeqCst);
            let mut old = server.lock().unwrap();
            old.signal(Signal::KILL);
            let _ = old.wait();
            let (new_server, new_addr) = serve_compacting(dir.path());
            *at = new_addr;
            *old = new_server;
            paused.store(false, Ordering::SeqCst);
        }
        for _ in 0..5 {
            workers += churn("5");
            settled();
        }
        workers
    });
    assert_eq!(workers, 200);
    assert!(scrapes.load(Ordering::SeqCst) >= 20);
    let addr = *addr.lock().unwrap();
    let text = get(addr, "/metrics", &[]).text();
    assert_eq!(jobs_total(&text), Some(3.0 * 200.0 + 150.0 + 7.0), "{text}");
    assert!(text.contains("latency_seconds_count 200.0"), "{text}");
    // 200 workers wrote 800 files, and without compaction the directory
    // would end at 601 (mark_process_dead removes the live gauges). With it,
    // it holds at most one batch's files (20 workers: a counter, a histogram
    // and a max gauge each, and the running ones' live gauges) beside the
    // settled ones.
    let most = max_files.load(Ordering::SeqCst);
    assert!(
        most <= SETTLED + 20 * 3 + 4,
        "the directory grew to {most} files"
    );
    assert!(db_files(dir.path()) <= SETTLED);
    // Visible: self-metrics, the status page, inspect.
    let folded = text
        .lines()
        .find_map(|l| l.strip_prefix("multiprom_compaction_folded_files_total "))
        .and_then(|v| v.parse::<f64>().ok());
    assert!(folded.is_some_and(|n| n > 0.0), "{text}");
    assert!(
        text.contains("multiprom_compactions_total{result=\"error\"} 0"),
        "{text}"
    );
    let page = get(addr, "/", &[]).text();
    assert!(page.contains("<p>Compaction: "), "{page}");
    let inspected = multiprom()
        .arg("inspect")
        .arg(dir.path().join("counter_compacted.db"))
        .output()
        .unwrap();
    let inspected = String::from_utf8_lossy(&inspected.stdout);
    assert!(
        inspected.contains("counter, compacted: the values of exited workers"),
        "{inspected}"
    );
    let mut server = server.into_inner().unwrap();
    server.signal(Signal::TERM);
    let (_, stderr) = server.wait();
    assert!(stderr.contains("compacted "), "{stderr}");
    let problems: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("compact"))
        .collect();
    assert!(problems.is_empty(), "{stderr}");
    drop(live.stdin.take());
    live.wait().unwrap();
    // prometheus_client's own collector reads the compacted directory to
    // the same totals (with multiprom stopped: a fold under Python's
    // collector can make it miss or double a file, see docs/operations.md).
    let python_text = String::from_utf8(run_python(
        "serve_python_exposition.py",
        &[dir.path().to_str().unwrap(), "text"],
        &[],
    ))
    .unwrap();
    assert_eq!(jobs_total(&python_text), Some(757.0), "{python_text}");
    assert!(
        python_text.contains("latency_seconds_count 200.0"),
        "{python_text}"
    );
}

/// gunicorn with `--max-requests 1` (a new worker after every request),
/// prometheus_client's `child_exit` hook calling `mark_process_dead`, under
/// `run --compact` folding eagerly: gunicorn never goes down, every request
/// is counted once, and the directory does not grow with the churn.
#[test]
fn gunicorn_churn_under_run_compact_never_disturbs_the_hook() {
    let app = free_port();
    let metrics_dir = temp_dir();
    let mut cmd = multiprom();
    cmd.arg("run")
        .arg("--dir")
        .arg(metrics_dir.path())
        .args([
            "--listen",
            "127.0.0.1:0",
            "--compact",
            "--compact-interval",
            "20ms",
        ])
        .arg("--");
    add_churning_gunicorn(&mut cmd, app);
    let mut run = StopGunicornOnDrop(Spawned::start(cmd));
    let run = &mut run.0;
    let metrics = run.address();
    wait_for_app(run, app);
    let Churn {
        ok,
        failed,
        exited_early,
        ..
    } = churn(run, app, 2, None, Duration::from_secs(10));
    let stderr = run.stderr();
    assert_eq!(exited_early, None, "gunicorn went down; stderr:\n{stderr}");
    assert!(!stderr.contains("Traceback"), "{stderr}");
    assert!(ok >= 20, "too little churn to test anything: {ok} requests");
    // Each request was a worker of its own, and each left a counter file
    // (the hook removes the live gauges): without compaction the directory
    // keeps one per request. With it, once the churn stops, it holds the 4
    // running workers' files (a counter and two live gauges each) and the
    // compacted counter.
    let deadline = Instant::now() + PATIENCE;
    while db_files(metrics_dir.path()) > 4 * 3 + 1 {
        assert!(
            Instant::now() < deadline,
            "{} files after {ok} requests: compaction did not catch up",
            db_files(metrics_dir.path())
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let deadline = Instant::now() + PATIENCE;
    loop {
        let text = get(metrics, "/metrics", &[]).text();
        let counted = text
            .lines()
            .find_map(|l| l.strip_prefix("app_requests_total "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap();
        assert!(
            counted >= ok as f64 && counted <= (ok + failed) as f64,
            "counted {counted}, answered {ok}, failed {failed}"
        );
        if metrics_dir.path().join("counter_compacted.db").exists() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "nothing was compacted; stderr:\n{stderr}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    run.signal(Signal::TERM);
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = run.try_wait() {
            break status;
        }
        assert!(Instant::now() < deadline, "run did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    // Let the stderr reader drain.
    std::thread::sleep(Duration::from_millis(200));
    let stderr = run.stderr();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("Traceback"), "{stderr}");
    assert!(stderr.contains("compacted "), "{stderr}");
}
