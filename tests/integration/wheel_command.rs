//! The `multiprom` command a Python user gets from the wheel: the wheel is
//! built from `crates/python` (`maturin build --release`, once per source
//! hash) and installed into a fresh venv with the pinned prometheus_client
//! and gunicorn, and nothing else: the venv's `PATH` has no cargo, rustc or
//! maturin (checked from inside it). There, the console script is the Rust
//! CLI, and is compared with the binary built for this test run:
//!
//! * it is the `multiprom` on `PATH`, with the package's version, and
//!   `--help`, completions, man page and usage errors are the binary's;
//! * `multiprom run -- gunicorn ...` serves the workers' merged metrics,
//!   with `MULTIPROM_INSTALL=1` in effect in the same workers;
//! * `multiprom scrape` prints Python's bytes, `multiprom inspect --check`
//!   finds a damaged file, `demo` starts its workers through Python;
//! * signals: each signal `run` passes on gives the
//!   binary's exit statuses and logs (no `KeyboardInterrupt`), Ctrl-C in a
//!   terminal reaches the command once, and the commands `run` starts, and
//!   `run` itself, have the binary's signal dispositions.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};
use rustix::process::Signal;

use crate::gunicorn::{answers_200, free_port, StopGunicornOnDrop};
use crate::harness::{
    multiprom, python_script, target_dir, temp_dir, workspace_root, write_aged, GUNICORN_VERSION,
    PROMETHEUS_CLIENT_VERSION,
};
use crate::http_client::get;
use crate::python_package::{assert_success, source_hash, MATURIN_VERSION};
use crate::run::{assert_ctrl_c_reached_the_command_once, wait_for_file};
use crate::spawned_server::{Spawned, PATIENCE};

/// How long building the wheel may take (a release build of the extension
/// with the CLI linked in, on a loaded two-core machine).
const BUILD_PATIENCE: Duration = Duration::from_secs(1800);

/// Runs `cmd`, killing it after `patience`; panics unless it succeeds.
pub(crate) fn run_checked(cmd: &mut Command, what: &str, patience: Duration) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot {what}: {e} (is python3 installed?)"));
    let deadline = Instant::now() + patience;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "cannot {what}: not done after {patience:?}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    assert_success(what, &out);
    out
}

/// `python3 -m venv DIR` (`MULTIPROM_TEST_PYTHON` to use another Python).
pub(crate) fn make_venv(dir: &Path) {
    let base = std::env::var("MULTIPROM_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let _ = std::fs::remove_dir_all(dir);
    run_checked(
        Command::new(&base).args(["-m", "venv"]).arg(dir),
        "create a venv",
        PATIENCE,
    );
}

pub(crate) fn pip(venv: &Path) -> Command {
    let mut cmd = Command::new(venv.join("bin/python"));
    cmd.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ]);
    cmd
}

/// Makes `dir` by running `make` on a temporary directory beside it and
/// renaming that into place, unless `dir` is there already (concurrent test
/// processes race safely).
pub(crate) fn made_once(dir: &Path, make: impl FnOnce(&Path)) {
    if dir.exists() {
        return;
    }
    std::fs::create_dir_all(target_dir()).unwrap();
    let name = dir.file_name().unwrap().to_string_lossy();
    let tmp = target_dir().join(format!(".{name}-tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    make(&tmp);
    if std::fs::rename(&tmp, dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    assert!(dir.exists(), "{} missing after setup", dir.display());
}

/// Removes what older sources left under `target/` with names starting
/// with `prefix`, except `keep`.
pub(crate) fn remove_older(prefix: &str, keep: &Path) {
    for entry in std::fs::read_dir(target_dir()).unwrap().flatten() {
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with(prefix) && path != keep {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

/// The wheel `maturin build --release` makes of `crates/python`, built once
/// per source hash. The Rust build shares `target/python-wheel/` with
/// `pip install ./crates/python` (python_package.rs), so whichever runs
/// second reuses what the first compiled.
pub(crate) fn wheel() -> &'static Path {
    static WHEEL: OnceLock<PathBuf> = OnceLock::new();
    WHEEL.get_or_init(|| {
        // Only its `bin/maturin` (a binary, not a script naming the venv's
        // Python by path) is used, so it may be made elsewhere and moved.
        let maturin_venv = target_dir().join(format!("py-venv-maturin-{MATURIN_VERSION}"));
        made_once(&maturin_venv, |tmp| {
            make_venv(tmp);
            run_checked(
                pip(tmp).arg(format!("maturin=={MATURIN_VERSION}")),
                "install maturin",
                PATIENCE,
            );
        });
        let prefix = "multiprom-wheel-";
        let dir = target_dir().join(format!("{prefix}{:016x}", source_hash()));
        remove_older(prefix, &dir);
        made_once(&dir, |tmp| {
            run_checked(
                Command::new(maturin_venv.join("bin/maturin"))
                    .args(["build", "--release", "--manifest-path"])
                    .arg(workspace_root().join("crates/python/Cargo.toml"))
                    .arg("--out")
                    .arg(tmp)
                    .env("CARGO_TARGET_DIR", target_dir().join("python-wheel")),
                "maturin build --release (needs cargo)",
                BUILD_PATIENCE,
            );
        });
        let wheels: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension() == Some(OsStr::new("whl")))
            .collect();
        assert_eq!(wheels.len(), 1, "one wheel in {}", dir.display());
        wheels[0].clone()
    })
}

/// A fresh venv with the wheel, prometheus_client and gunicorn installed.
struct Venv {
    dir: PathBuf,
    /// The `PATH` of the tests' commands: the venv's `bin/` and a directory
    /// of links to the few system tools the tests run, so that nothing a
    /// build would need (cargo, rustc, maturin) is on it, on any machine.
    path: OsString,
}

fn venv() -> &'static Venv {
    static VENV: OnceLock<Venv> = OnceLock::new();
    VENV.get_or_init(|| {
        let wheel = wheel();
        let prefix = "py-venv-wheel-";
        let dir = target_dir().join(format!("{prefix}{:016x}", source_hash()));
        remove_older(prefix, &dir);
        // Made where it stays: a venv's scripts name its Python by path.
        if !dir.join(".ready").exists() {
            make_venv(&dir);
            run_checked(
                pip(&dir)
                    .arg(wheel)
                    .arg(format!("prometheus_client=={PROMETHEUS_CLIENT_VERSION}"))
                    .arg(format!("gunicorn=={GUNICORN_VERSION}")),
                "pip install the wheel, prometheus_client and gunicorn",
                PATIENCE,
            );
            let tools = dir.join("tools");
            std::fs::create_dir(&tools).unwrap();
            for tool in ["sh", "sleep", "grep", "cat"] {
                let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                    .map(|d| d.join(tool))
                    .find(|p| p.is_file())
                    .unwrap_or_else(|| panic!("{tool} is not on PATH"));
                std::os::unix::fs::symlink(found, tools.join(tool)).unwrap();
            }
            std::fs::write(dir.join(".ready"), "").unwrap();
        }
        let path = std::env::join_paths([dir.join("bin"), dir.join("tools")]).unwrap();
        Venv { dir, path }
    })
}

impl Venv {
    /// `program` found on the venv's `PATH`, in an environment with
    /// nothing of the test's but `HOME`.
    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        self.environment(&mut cmd);
        cmd
    }

    /// The tests' environment: the venv's `PATH`, `HOME`, and nothing else
    /// of the test's (no `PROMETHEUS_MULTIPROC_DIR`, no `MULTIPROM_INSTALL`).
    fn environment(&self, cmd: &mut Command) {
        // No __pycache__ left in the checkout by the apps the tests run.
        cmd.env_clear()
            .env("PATH", &self.path)
            .env("PYTHONDONTWRITEBYTECODE", "1");
        if let Some(home) = std::env::var_os("HOME") {
            cmd.env("HOME", home);
        }
    }

    fn python(&self) -> PathBuf {
        self.dir.join("bin/python")
    }
}

/// The Rust binary, in the same environment as [`Venv::command`].
fn binary() -> Command {
    let mut cmd = multiprom();
    venv().environment(&mut cmd);
    cmd
}

/// The console script and the binary, each with `args`.
fn both(args: &[&OsStr]) -> [(&'static str, Command); 2] {
    let mut script = venv().command("multiprom");
    script.args(args);
    let mut bin = binary();
    bin.args(args);
    [("the console script", script), ("the binary", bin)]
}

/// Runs a short command with stdout and stderr captured; kills it and
/// panics if it has not finished after [`PATIENCE`].
fn output(cmd: &mut Command) -> Output {
    use std::io::Read;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let read = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = read(Box::new(child.stdout.take().unwrap()));
    let stderr = read(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} not done after {PATIENCE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A log for comparing two runs: numbers (times, pids, ports) and the
/// given paths masked, lines sorted (the endpoint's start line and the
/// command's race).
fn masked(log: &str, paths: &[&Path]) -> String {
    let mut log = log.to_owned();
    for path in paths {
        log = log.replace(path.to_str().unwrap(), "<path>");
    }
    let mut out = String::with_capacity(log.len());
    let mut in_number = false;
    for c in log.chars() {
        if c.is_ascii_digit() {
            if !in_number {
                out.push('#');
            }
            in_number = true;
        } else {
            in_number = false;
            out.push(c);
        }
    }
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort_unstable();
    lines.join("\n")
}

#[test]
fn the_command_on_path_is_the_cli_of_the_packages_version() {
    let venv = venv();
    let out = output(venv.command("python").args([
        "-c",
        "import importlib.metadata, shutil, multiprom, sys; \
             print([shutil.which(t) for t in ('cargo', 'rustc', 'maturin')]); \
             print(shutil.which('multiprom')); print(multiprom.__version__); \
             print(importlib.metadata.version('multiprom')); \
             print('prometheus_client' in sys.modules)",
    ]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[0], "[None, None, None]",
        "build tools on the venv's PATH"
    );
    assert_eq!(
        Path::new(lines[1]),
        venv.dir.join("bin/multiprom"),
        "the multiprom on PATH"
    );
    let version = lines[2];
    assert_eq!(lines[3], version, "the wheel's version");
    assert_eq!(
        lines[4], "False",
        "import multiprom imported prometheus_client"
    );

    let version_line = format!("multiprom {version}\n");
    let out = output(venv.command("multiprom").arg("--version"));
    assert_eq!(text(&out.stdout), version_line);
    let module = output(
        venv.command("python")
            .args(["-m", "multiprom", "--version"]),
    );
    assert_eq!(text(&module.stdout), version_line);
    let bin = output(binary().arg("--version"));
    assert_eq!(text(&bin.stdout), version_line, "the binary's version");

    // The same CLI: help, generated completions and man page, usage errors.
    for args in [
        &["--help"][..],
        &["run", "--help"],
        &["completions", "bash"],
        &["completions", "zsh"],
        &["completions", "fish"],
        &["man"],
        &["scrape", "--no-such-flag"],
        &[],
    ] {
        let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        let [(_, mut script), (_, mut bin)] = both(&args);
        let (script, bin) = (output(&mut script), output(&mut bin));
        assert_eq!(script.status.code(), bin.status.code(), "{args:?}");
        assert_eq!(text(&script.stdout), text(&bin.stdout), "{args:?}");
        assert_eq!(text(&script.stderr), text(&bin.stderr), "{args:?}");
    }
}

#[test]
fn run_serves_gunicorn_workers_merged_with_multiprom_install_beside_it() {
    let venv = venv();
    let base = temp_dir();
    let dir = base.path().join("metrics");
    let app = free_port();
    let mut cmd = venv.command("multiprom");
    cmd.args(["run", "--listen", "127.0.0.1:0", "--dir"])
        .arg(&dir)
        .args(["--", "gunicorn", "--chdir"])
        .arg(workspace_root().join("tests/python/python_package_gunicorn"))
        .args(["-w", "2", "-b"])
        .arg(app.to_string())
        .arg("app:app")
        // The start-up hook, in every Python process: the command's own
        // interpreter and gunicorn's.
        .env("MULTIPROM_INSTALL", "1");
    let mut run = StopGunicornOnDrop(Spawned::start(cmd));
    let endpoint = run.0.address();
    let deadline = Instant::now() + PATIENCE;
    while !answers_200(app, "/") {
        assert!(
            Instant::now() < deadline,
            "gunicorn never answered; stderr:\n{}",
            run.0.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for _ in 0..2 {
        assert_eq!(get(app, "/", &[]).status, 200);
    }
    // A file prometheus_client's own collector fails on (a writer killed
    // while creating it): the app's /metrics, prometheus_client's recipe on
    // multiprom's collector through MULTIPROM_INSTALL, still answers.
    write_aged(&dir.join("counter_999999.db"), b"");
    let own = get(app, "/metrics", &[]);
    assert_eq!(own.status, 200, "{}", own.text());
    assert!(
        own.text().contains("app_requests_total 3.0\n"),
        "{}",
        own.text()
    );
    // multiprom's endpoint: both workers' files merged.
    let merged = get(endpoint, "/metrics", &[]);
    assert_eq!(merged.status, 200);
    assert!(
        merged.text().contains("app_requests_total 3.0\n"),
        "{}",
        merged.text()
    );
    run.0.signal(Signal::TERM);
    let (status, stderr) = run.0.wait();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("passing SIGTERM on to pid "), "{stderr}");
    assert!(!stderr.contains("Traceback"), "{stderr}");
}

#[test]
fn scrape_prints_pythons_bytes() {
    let venv = venv();
    let dir = temp_dir();
    let python = output(
        venv.command("python")
            .arg(python_script("collector_scrape_writer.py"))
            .env("PROMETHEUS_MULTIPROC_DIR", dir.path()),
    );
    assert!(python.status.success(), "{}", text(&python.stderr));
    let python: serde_json::Value = serde_json::from_slice(&python.stdout).unwrap();
    for (format, key) in [("prometheus", "prom"), ("openmetrics", "om")] {
        let out = output(
            venv.command("multiprom")
                .args(["scrape", "--format", format, "--dir"])
                .arg(dir.path()),
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert_eq!(text(&out.stderr), "");
        assert_eq!(
            Some(text(&out.stdout).as_str()),
            python[key].as_str(),
            "{format}"
        );
    }
}

#[test]
fn inspect_check_finds_a_damaged_file() {
    let dir = temp_dir();
    let good = FileName::new(MetricKind::Counter, "101").unwrap();
    let mut writer = FileWriter::open(dir.path(), &good).unwrap();
    let key = encode_key("jobs", "jobs_total", std::iter::empty(), "Jobs done.");
    writer.slot(&key).unwrap().set(3.0);
    drop(writer);
    write_aged(&dir.path().join("counter_202.db"), b"\x08\0\0\0");
    for (who, mut cmd) in both(&[
        OsStr::new("inspect"),
        OsStr::new("--check"),
        dir.path().as_os_str(),
    ]) {
        let out = output(&mut cmd);
        assert_eq!(out.status.code(), Some(1), "{who}: {}", text(&out.stderr));
        assert_eq!(
            text(&out.stdout),
            format!(
                "{}: offset 0: file is 4 bytes, shorter than the 8-byte header\n",
                dir.path().join("counter_202.db").display()
            ),
            "{who}"
        );
    }
}

#[test]
fn demo_starts_its_workers_through_python() {
    let venv = venv();
    let mut cmd = venv.command("multiprom");
    cmd.args(["demo", "--workers", "2", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::null());
    let mut demo = Spawned::start(cmd);
    let addr = demo.address();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let body = get(addr, "/metrics", &[]).text();
        let workers = body
            .lines()
            .filter(|l| l.starts_with("demo_worker_start_time_seconds{"))
            .count();
        if workers == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never saw 2 workers; stderr:\n{}\n{body}",
            demo.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    demo.signal(Signal::INT);
    let (status, stderr) = demo.wait();
    assert_eq!(status.code(), Some(0), "{stderr}");
}

/// `multiprom run` (the console script, then the binary) of `command`,
/// sent `signal` once `ready` exists (`None`: once the command started);
/// returns the exit code and the log with numbers and `paths` masked.
fn run_and_signal(
    who: &str,
    mut cmd: Command,
    signal: Signal,
    ready: Option<&Path>,
    paths: &[&Path],
) -> (Option<i32>, String) {
    cmd.stdout(Stdio::null());
    let mut run = Spawned::start(cmd);
    match ready {
        Some(file) => {
            wait_for_file(file);
        }
        None => {
            run.wait_for_stderr(") with PROMETHEUS_MULTIPROC_DIR=");
        }
    }
    run.signal(signal);
    let (status, stderr) = run.wait();
    assert!(
        !stderr.contains("Traceback") && !stderr.contains("KeyboardInterrupt"),
        "{who}: {stderr}"
    );
    (status.code(), masked(&stderr, paths))
}

#[test]
fn signals_end_run_as_they_end_the_binarys() {
    let venv = venv();
    for (signal, name, number) in [
        (Signal::INT, "SIGINT", 2),
        (Signal::TERM, "SIGTERM", 15),
        (Signal::HUP, "SIGHUP", 1),
        (Signal::QUIT, "SIGQUIT", 3),
        (Signal::USR1, "SIGUSR1", 10),
        (Signal::USR2, "SIGUSR2", 12),
        (Signal::WINCH, "SIGWINCH", 28),
        (Signal::TTIN, "SIGTTIN", 21),
        (Signal::TTOU, "SIGTTOU", 22),
    ] {
        let mut seen = Vec::new();
        for (who, mut cmd) in both(&[]) {
            let control = temp_dir();
            let dir = control.path().join("metrics");
            cmd.args(["run", "--listen", "127.0.0.1:0", "--dir"])
                .arg(&dir)
                .arg("--")
                .arg(venv.python())
                .arg(python_script("run_signals.py"))
                .arg(control.path());
            let ready = control.path().join("ready");
            let (code, log) =
                run_and_signal(who, cmd, signal, Some(&ready), &[&dir, &venv.python()]);
            assert_eq!(code, Some(10 + number), "{who}, {name}: {log}");
            // The log is masked: SIGUSR1 reads SIGUSR#.
            let logged = masked(&format!("passing {name} on to pid 1"), &[]);
            assert!(log.contains(&logged), "{who}: {log}");
            assert_eq!(wait_for_file(&control.path().join("got")), name, "{who}");
            seen.push(log);
        }
        assert_eq!(
            seen[0], seen[1],
            "{name}: the console script's log, then the binary's"
        );
    }
    // Commands that do not handle the signal die of it: 128 + N.
    for (signal, number) in [(Signal::INT, 2), (Signal::TERM, 15)] {
        let mut seen = Vec::new();
        for (who, mut cmd) in both(&[]) {
            let control = temp_dir();
            let dir = control.path().join("metrics");
            cmd.args(["run", "--listen", "127.0.0.1:0", "--dir"])
                .arg(&dir)
                .args(["--", "sleep", "120"]);
            let (code, log) = run_and_signal(who, cmd, signal, None, &[&dir]);
            assert_eq!(code, Some(128 + number), "{who}: {log}");
            seen.push(log);
        }
        assert_eq!(
            seen[0], seen[1],
            "{signal:?}: the console script's log, then the binary's"
        );
    }
}

#[test]
fn ctrl_c_in_a_terminal_reaches_the_command_once() {
    let venv = venv();
    let control = temp_dir();
    let out = output(
        venv.command("python")
            .arg(python_script("run_tty.py"))
            .arg(venv.dir.join("bin/multiprom"))
            .arg(venv.python())
            .arg(control.path()),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let terminal = assert_ctrl_c_reached_the_command_once(&out.stdout);
    assert!(!terminal.contains("KeyboardInterrupt"), "{terminal}");
}

/// The `Sig*` lines of a process's `/proc/PID/status`: the signals it
/// blocks, ignores and catches.
fn dispositions(status: &str) -> Vec<&str> {
    status
        .lines()
        .filter(|l| {
            ["SigBlk:", "SigIgn:", "SigCgt:"]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .collect()
}

#[test]
fn run_and_its_command_have_the_binarys_signal_dispositions() {
    // What the command inherits: it reads its own status.
    let mut seen = Vec::new();
    for (who, mut cmd) in both(&[]) {
        let out = output(cmd.args([
            "run",
            "--listen",
            "127.0.0.1:0",
            "--",
            "cat",
            "/proc/self/status",
        ]));
        assert_eq!(out.status.code(), Some(0), "{who}: {}", text(&out.stderr));
        seen.push(dispositions(&text(&out.stdout)).join("\n"));
    }
    assert_eq!(
        seen[0], seen[1],
        "the command's, under the console script then the binary"
    );

    // `run` itself while it runs, for the signals it handles (HUP, INT, QUIT,
    // USR1, USR2, PIPE, TERM, CHLD, TTIN, TTOU, WINCH) and SIGXFSZ, which
    // Python ignores and Rust does not.
    let handled: u64 = [1u64, 2, 3, 10, 12, 13, 15, 17, 21, 22, 25, 28]
        .iter()
        .map(|n| 1 << (n - 1))
        .sum();
    let mut seen = Vec::new();
    for (who, mut cmd) in both(&[]) {
        cmd.args(["run", "--listen", "127.0.0.1:0", "--", "sleep", "120"]);
        let mut run = Spawned::start(cmd);
        run.wait_for_stderr("started sleep");
        let status = std::fs::read_to_string(format!("/proc/{}/status", run.pid())).unwrap();
        let masks: Vec<String> = dispositions(&status)
            .iter()
            .map(|line| {
                let (name, hex) = line.split_once(':').unwrap();
                let mask = u64::from_str_radix(hex.trim(), 16).unwrap();
                format!("{name}: {:016x}", mask & handled)
            })
            .collect();
        run.signal(Signal::TERM);
        let (code, stderr) = run.wait();
        assert_eq!(code.code(), Some(128 + 15), "{who}: {stderr}");
        seen.push(masks.join("\n"));
    }
    assert_eq!(
        seen[0], seen[1],
        "run's own, the console script's then the binary's"
    );
}
