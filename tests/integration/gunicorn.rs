//! `multiprom run` around real gunicorn with prometheus_client's standard
//! `child_exit` hook (`mark_process_dead`), under worker churn.
//!
//! The hook lists a dead worker's `gauge_live*_<pid>.db` files and removes
//! each; if one vanishes in between, it raises `FileNotFoundError` in the
//! gunicorn master, which then stops every worker and exits. multiprom's own
//! reaping must never remove such a file while a hook may still be running.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::process::Signal;

use crate::harness::{multiprom, python, workspace_root};
use crate::http_client::get;
use crate::serve::{python_parse, sample_value};
use crate::spawned_server::{Spawned, PATIENCE};

/// How long workers churn. Before reaping waited for a grace period, this
/// setup brought gunicorn down within a few seconds in every run; the test
/// runs well past that.
const CHURN: Duration = Duration::from_secs(20);

/// A free loopback port for gunicorn (closed again before gunicorn binds it).
pub(crate) fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// `GET path` on `addr`; `true` if it answered 200. Failures (a worker
/// restarting, a server gone) are counted by the caller, never fatal here, so
/// the test reports what went down rather than a connection error.
pub(crate) fn answers_200(addr: SocketAddr, path: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(5)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(10)));
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    response.starts_with(b"HTTP/1.1 200")
}

/// The `pid` labels of `app_worker_up` in a parsed exposition.
fn worker_pids(parsed: &serde_json::Value) -> Vec<String> {
    let Some(families) = parsed.as_array() else {
        return Vec::new();
    };
    families
        .iter()
        .filter(|f| f[0] == "app_worker_up")
        .flat_map(|f| f[2].as_array().cloned().unwrap_or_default())
        .filter_map(|s| s[1]["pid"].as_str().map(str::to_owned))
        .collect()
}

/// Sets a flag when dropped, so worker threads stop even when the test
/// thread panics half-way.
pub(crate) struct StopOnDrop<'a>(pub &'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Stops `multiprom run` with SIGTERM (which it passes on to gunicorn) if a
/// test fails half-way: a plain kill would orphan gunicorn and its workers.
pub(crate) struct StopGunicornOnDrop(pub Spawned);

impl Drop for StopGunicornOnDrop {
    fn drop(&mut self) {
        if !self.0.is_running() {
            return;
        }
        self.0.signal(Signal::TERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.0.is_running() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Appends to `cmd` (a `multiprom run ... --`) gunicorn serving the test
/// app (`tests/python/gunicorn_app`) on `app`: 4 workers, each replaced
/// after one request, and prometheus_client's `child_exit` hook calling
/// `mark_process_dead`.
pub(crate) fn add_churning_gunicorn(cmd: &mut Command, app: SocketAddr) {
    let app_dir = workspace_root().join("tests/python/gunicorn_app");
    cmd.arg(python())
        .args(["-m", "gunicorn", "--chdir"])
        .arg(&app_dir)
        .args(["-c"])
        .arg(app_dir.join("gunicorn.conf.py"))
        .args(["-w", "4", "--max-requests", "1", "-b"])
        .arg(app.to_string())
        .arg("app:app");
}

/// `multiprom run -- gunicorn -w 4` serving the WSGI app `app:app` of
/// `tests/python/<app>` with the package's Python (`python`), with `env`
/// set (the start-up hook's `MULTIPROM_INSTALL`, ...), once it answers: the
/// running command, the address of its `/metrics` and the app's.
pub(crate) fn run_gunicorn_app(
    python: &Path,
    app: &str,
    env: &[(&str, &str)],
) -> (StopGunicornOnDrop, SocketAddr, SocketAddr) {
    run_gunicorn_app_with(python, app, env, &[])
}

/// [`run_gunicorn_app`], with `flags` given to `multiprom run`.
pub(crate) fn run_gunicorn_app_with(
    python: &Path,
    app: &str,
    env: &[(&str, &str)],
    flags: &[&str],
) -> (StopGunicornOnDrop, SocketAddr, SocketAddr) {
    let metrics = free_port();
    let app_addr = free_port();
    let mut cmd = multiprom();
    cmd.args(["run", "--listen"])
        .arg(metrics.to_string())
        .args(flags)
        .arg("--")
        .arg(python)
        .args(["-m", "gunicorn", "--chdir"])
        .arg(workspace_root().join("tests/python").join(app))
        .args(["-w", "4", "-b"])
        .arg(app_addr.to_string())
        .arg("app:app")
        .envs(env.iter().copied())
        .env_remove("PROMETHEUS_MULTIPROC_DIR");
    let run = StopGunicornOnDrop(Spawned::start(cmd));
    wait_for_app(&run.0, app_addr);
    (run, metrics, app_addr)
}

/// Waits (at most [`PATIENCE`]) until the gunicorn app `run` launched
/// answers `/` at `app`.
pub(crate) fn wait_for_app(run: &Spawned, app: SocketAddr) {
    let deadline = Instant::now() + PATIENCE;
    while !answers_200(app, "/") {
        assert!(
            Instant::now() < deadline,
            "gunicorn never answered; stderr:\n{}",
            run.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What [`churn`] saw.
pub(crate) struct Churn {
    /// Requests answered 200 (counting the one [`wait_for_app`] made).
    pub ok: u64,
    /// Requests that failed on the client side (they may or may not have
    /// reached a worker).
    pub failed: u64,
    /// Scrapes made, and those not answered 200.
    pub scrapes: u64,
    pub bad_scrapes: u64,
    /// How `run` exited, if it did while the churn went on.
    pub exited_early: Option<ExitStatus>,
}

/// Requests `/` of the app at `app` from `clients` threads for `time` (with
/// `--max-requests 1`, every request is served by a new worker), and, with
/// `metrics`, scrapes that address's `/metrics` from one more thread, while
/// watching that `run` stays up.
pub(crate) fn churn(
    run: &mut Spawned,
    app: SocketAddr,
    clients: usize,
    metrics: Option<SocketAddr>,
    time: Duration,
) -> Churn {
    let stop = AtomicBool::new(false);
    let ok = AtomicU64::new(1); // wait_for_app's request
    let failed = AtomicU64::new(0);
    let scrapes = AtomicU64::new(0);
    let bad_scrapes = AtomicU64::new(0);
    let started = Instant::now();
    let exited_early = std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        for _ in 0..clients {
            s.spawn(|| {
                while !stop.load(Ordering::SeqCst) {
                    if answers_200(app, "/") {
                        ok.fetch_add(1, Ordering::SeqCst);
                    } else {
                        failed.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
        if let Some(metrics) = metrics {
            let (stop, scrapes, bad_scrapes) = (&stop, &scrapes, &bad_scrapes);
            s.spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    scrapes.fetch_add(1, Ordering::SeqCst);
                    if !answers_200(metrics, "/metrics") {
                        bad_scrapes.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
        while started.elapsed() < time {
            if let Some(status) = run.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    });
    Churn {
        ok: ok.into_inner(),
        failed: failed.into_inner(),
        scrapes: scrapes.into_inner(),
        bad_scrapes: bad_scrapes.into_inner(),
        exited_early,
    }
}

#[test]
fn reaping_never_races_gunicorns_mark_process_dead_hook() {
    let app = free_port();
    let mut cmd = multiprom();
    cmd.arg("run")
        .args(["--listen", "127.0.0.1:0"])
        // Reap as eagerly as possible: every few milliseconds and before
        // every scrape. Only the grace period keeps it off the hook's files.
        .args(["--reap-interval", "5ms", "--reap-grace", "2s"])
        .arg("--");
    add_churning_gunicorn(&mut cmd, app);
    let mut run = StopGunicornOnDrop(Spawned::start(cmd));
    let run = &mut run.0;
    let metrics = run.address();
    wait_for_app(run, app);
    // Watch the launcher: if the gunicorn master dies, `run` exits.
    let Churn {
        ok,
        failed,
        scrapes,
        bad_scrapes,
        exited_early,
    } = churn(run, app, 3, Some(metrics), CHURN);
    let stderr = run.stderr();
    assert_eq!(
        exited_early, None,
        "gunicorn went down under churn; stderr:\n{stderr}"
    );
    assert!(
        !stderr.contains("FileNotFoundError") && !stderr.contains("Traceback"),
        "{stderr}"
    );
    assert!(
        ok >= 100,
        "too little churn to test anything: {ok} requests"
    );
    assert_eq!(bad_scrapes, 0);
    assert!(scrapes >= 20);

    // Exact totals: every answered request counted once, across all the
    // workers that came and went. Requests that failed on the client side
    // may or may not have reached a worker.
    let parsed = python_parse(&get(metrics, "/metrics", &[]).text(), "text");
    let counted = sample_value(&parsed, "app_requests_total", &[]).unwrap();
    assert!(
        counted >= ok as f64 && counted <= (ok + failed) as f64,
        "counted {counted}, answered {ok}, failed {failed}"
    );
    // The dead workers' live gauges are out of the output at once: once the
    // churn stops, `app_worker_up` (liveall: one sample per pid) lists
    // exactly the 4 running workers.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let parsed = python_parse(&get(metrics, "/metrics", &[]).text(), "text");
        let pids = worker_pids(&parsed);
        let all_alive = pids
            .iter()
            .all(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists());
        if pids.len() == 4 && all_alive {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "app_worker_up never settled on the 4 live workers: {pids:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    run.signal(Signal::TERM);
    let (status, stderr) = run.wait();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("Traceback"), "{stderr}");
}
