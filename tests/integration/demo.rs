//! `multiprom demo`: real worker processes, the endpoint, a worker restart
//! with its live gauges reaped, and a clean stop.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rustix::process::Signal;

use crate::harness::{multiprom, temp_dir};
use crate::http_client::get;
use crate::spawned_server::{Spawned, PATIENCE};

fn start_demo(stdout: &Path, extra: &[&str]) -> Spawned {
    let mut cmd = multiprom();
    cmd.args(["demo", "--workers", "2", "--listen", "127.0.0.1:0"])
        .args(extra)
        .stdout(Stdio::from(std::fs::File::create(stdout).unwrap()));
    Spawned::start(cmd)
}

/// Polls `/metrics` until `pred` holds; returns that body.
fn metrics_until(addr: std::net::SocketAddr, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let body = get(addr, "/metrics", &[]).text();
        if pred(&body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "never saw {what}; last body:\n{body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn worker_pids(body: &str) -> Vec<String> {
    body.lines()
        .filter(|l| l.starts_with("demo_worker_start_time_seconds{"))
        .filter_map(|l| {
            l.split("pid=\"")
                .nth(1)?
                .split('"')
                .next()
                .map(str::to_owned)
        })
        .collect()
}

#[test]
fn demo_serves_restarts_a_worker_and_leaves_files_in_dir() {
    let tmp = temp_dir();
    let files = tmp.path().join("files");
    let stdout = tmp.path().join("stdout.txt");
    let mut demo = start_demo(
        &stdout,
        &[
            "--restart-every",
            "1s",
            "--reap-grace",
            "0s",
            "--dir",
            files.to_str().unwrap(),
        ],
    );
    let addr = demo.address();

    let body = metrics_until(addr, "finished requests from the workers", |b| {
        b.lines()
            .any(|l| l.starts_with("demo_requests_total{") && !l.ends_with(" 0.0"))
    });
    for family in [
        "# TYPE demo_requests_total counter",
        "# TYPE demo_generation_tokens_total counter",
        "# TYPE demo_time_to_first_token_seconds histogram",
        "# TYPE demo_e2e_request_latency_seconds histogram",
        "# TYPE demo_requests_running gauge",
        "# TYPE demo_requests_waiting gauge",
        "# TYPE demo_kv_cache_usage_ratio gauge",
        "# TYPE demo_last_request_timestamp_seconds gauge",
        "# TYPE multiprom_scrape_duration_seconds",
    ] {
        assert!(body.contains(family), "missing {family:?} in:\n{body}");
    }
    let printed = std::fs::read_to_string(&stdout).unwrap();
    assert!(
        printed.contains(&format!("curl -s http://{addr}/metrics")),
        "{printed}"
    );

    // A restart: the old worker's live gauges are reaped, its counters stay.
    let log = demo.wait_for_stderr("restarted worker");
    let line = log
        .lines()
        .find(|l| l.contains("restarted worker"))
        .unwrap();
    let old_pid = line
        .split("(pid ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_owned();
    let deadline = Instant::now() + PATIENCE;
    while files.join(format!("gauge_livesum_{old_pid}.db")).exists() {
        assert!(
            Instant::now() < deadline,
            "live gauge of dead worker {old_pid} never reaped"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        files.join(format!("counter_{old_pid}.db")).exists(),
        "counters of dead workers must stay"
    );
    assert!(
        files
            .join("native-histograms")
            .join(format!("histogram_{old_pid}.native"))
            .exists(),
        "the workers record time to first token as a native histogram too, \
         and a dead worker's stays"
    );
    let body = metrics_until(addr, "the dead worker gone from liveall", |b| {
        !worker_pids(b).contains(&old_pid) && worker_pids(b).len() == 2
    });
    assert_eq!(worker_pids(&body).len(), 2, "{body}");

    demo.signal(Signal::INT);
    let (status, stderr) = demo.wait();
    assert_eq!(status.code(), Some(0), "{stderr}");
    let printed = std::fs::read_to_string(&stdout).unwrap();
    assert!(printed.contains("files left in"), "{printed}");
    assert!(files.join(format!("counter_{old_pid}.db")).exists());
}

#[test]
fn demo_without_dir_removes_its_temporary_dir() {
    let tmp = temp_dir();
    let stdout = tmp.path().join("stdout.txt");
    let mut demo = start_demo(&stdout, &["--restart-every", "0s"]);
    let addr = demo.address();
    metrics_until(addr, "worker series", |b| {
        b.contains("demo_requests_running{")
    });
    let printed = std::fs::read_to_string(&stdout).unwrap();
    let dir = printed
        .split(" writing to ")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .expect("the directory is printed")
        .to_owned();
    assert!(Path::new(&dir).is_dir());
    demo.signal(Signal::TERM);
    let (status, stderr) = demo.wait();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!Path::new(&dir).exists(), "{dir} left behind");
}

#[test]
fn demo_and_run_refuse_bad_arguments_with_exit_2() {
    let out = multiprom()
        .args(["demo", "--workers", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));

    let tmp = temp_dir();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    for command in ["demo", "run"] {
        let mut cmd = multiprom();
        cmd.args([command, "--listen", "127.0.0.1:0", "--dir"])
            .arg(&file);
        if command == "run" {
            cmd.args(["--", "true"]);
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        assert_eq!(
            stderr,
            format!("multiprom {command}: {}: not a directory\n", file.display()),
            "{command}"
        );
    }
}

/// A `--dir` the user cannot write to is refused before any worker starts
/// (each would die of a permission error), exit 2, one line.
#[test]
fn demo_and_run_refuse_a_dir_they_cannot_write_with_exit_2() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = temp_dir();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let locked = tmp.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
    // Root writes anywhere: as root, run the binary as nobody (setpriv),
    // from a copy that user can reach.
    let root = rustix::process::geteuid().is_root();
    let setpriv = Path::new("/usr/bin/setpriv");
    assert!(
        !root || setpriv.exists(),
        "running privileged without /usr/bin/setpriv (util-linux): cannot test an unwritable directory"
    );
    let bin =
        crate::harness::executable_copy(Path::new(env!("CARGO_BIN_EXE_multiprom")), tmp.path());
    for command in ["demo", "run"] {
        let mut cmd = if root {
            let mut cmd = std::process::Command::new(setpriv);
            cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(&bin);
            cmd
        } else {
            std::process::Command::new(&bin)
        };
        cmd.args([command, "--listen", "127.0.0.1:0", "--dir"])
            .arg(&locked)
            .env_remove("PROMETHEUS_MULTIPROC_DIR")
            .stdout(Stdio::null());
        if command == "run" {
            cmd.args(["--", "true"]);
        }
        // Spawned: one that wrongly starts ends the test, not hangs it.
        let (status, stderr) = Spawned::start(cmd).wait();
        assert_eq!(status.code(), Some(2), "{command}: {stderr}");
        assert!(
            stderr.starts_with(&format!(
                "multiprom {command}: {}: workers cannot write here: ",
                locked.display()
            )) && stderr.contains("Permission denied")
                && stderr.lines().count() == 1,
            "{command}: {stderr}"
        );
    }
}

#[test]
fn demo_refuses_a_dir_holding_db_files_unless_clean() {
    let tmp = temp_dir();
    let files = tmp.path().join("files");
    std::fs::create_dir(&files).unwrap();
    let stale = files.join("counter_999999.db");
    std::fs::write(&stale, b"not the demo's").unwrap();
    // Spawned, not `output()`: a demo that wrongly starts must end the test
    // (killed on drop after PATIENCE), not hang it.
    let mut cmd = multiprom();
    cmd.args(["demo", "--listen", "127.0.0.1:0", "--dir"])
        .arg(&files)
        .stdout(Stdio::null());
    let (status, stderr) = Spawned::start(cmd).wait();
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "multiprom demo: {} already holds 1 *.db file; pass --clean to remove them first, or use an empty directory\n",
            files.display()
        )
    );
    assert!(stale.exists(), "a refused directory must be left alone");
    assert!(!stderr.contains("--keep-files"), "{stderr}");

    // --clean: removed (and logged), and one worker is "1 worker".
    let stdout = tmp.path().join("stdout.txt");
    let mut cmd = multiprom();
    cmd.args(["demo", "--workers", "1", "--restart-every", "0s"])
        .args(["--listen", "127.0.0.1:0", "--clean", "--dir"])
        .arg(&files)
        .stdout(Stdio::from(std::fs::File::create(&stdout).unwrap()));
    let mut demo = Spawned::start(cmd);
    demo.address();
    demo.wait_for_stderr("removed 1 stale *.db file from");
    assert!(!stale.exists());
    let deadline = Instant::now() + PATIENCE;
    let printed = loop {
        let printed = std::fs::read_to_string(&stdout).unwrap();
        if printed.contains("writing to") {
            break printed;
        }
        assert!(Instant::now() < deadline, "no start line: {printed}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        printed.starts_with(&format!(
            "multiprom demo: 1 worker writing to {}\n",
            files.display()
        )),
        "{printed}"
    );
    demo.signal(Signal::TERM);
    let (status, stderr) = demo.wait();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("stopping 1 worker\n"), "{stderr}");

    let out = multiprom().args(["demo", "--clean"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "--clean needs --dir");
}

#[test]
fn demo_help_shows_the_installed_command() {
    let out = multiprom().args(["demo", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("\n  multiprom demo\n"), "{help}");
    assert!(!help.contains("cargo"), "{help}");
}
