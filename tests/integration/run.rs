//! `multiprom run` around real processes: a forking Python launcher using
//! the real `prometheus_client`, signal forwarding, exit statuses, and the
//! metrics directory's life cycle.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};
use rustix::process::Signal;

use crate::harness::{multiprom, python, python_script, temp_dir};
use crate::http_client::get;
use crate::serve::{python_parse, sample_value};
use crate::spawned_server::{Spawned, PATIENCE};

/// `multiprom run --listen 127.0.0.1:0 EXTRA... -- COMMAND...`.
pub(crate) fn run_cmd(extra: &[&str], command: &[&std::ffi::OsStr]) -> Command {
    let mut cmd = multiprom();
    cmd.arg("run")
        .args(["--listen", "127.0.0.1:0"])
        .args(extra)
        .arg("--")
        .args(command);
    cmd
}

fn python_cmd(script: &str, args: &[&Path]) -> Vec<std::ffi::OsString> {
    let mut command = vec![
        python().as_os_str().to_owned(),
        python_script(script).into_os_string(),
    ];
    command.extend(args.iter().map(|a| a.as_os_str().to_owned()));
    command
}

/// The contents of `path` once it exists (at most [`PATIENCE`]).
pub(crate) fn wait_for_file(path: &Path) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn scrape(addr: SocketAddr) -> serde_json::Value {
    let response = get(addr, "/metrics", &[]);
    assert_eq!(response.status, 200);
    python_parse(&response.text(), "text")
}

#[test]
fn forking_workers_are_merged_dead_ones_reaped_and_the_dir_removed() {
    let control = temp_dir();
    let command = python_cmd("run_workers.py", &[control.path(), Path::new("3")]);
    let command: Vec<&std::ffi::OsStr> = command.iter().map(|s| s.as_os_str()).collect();
    let mut run = Spawned::start(run_cmd(&[], &command));
    let addr = run.address();
    let pids: Vec<u32> = wait_for_file(&control.path().join("ready"))
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let env = wait_for_file(&control.path().join("env"));
    let (dir, mode) = env.split_once('\n').unwrap();
    let dir = PathBuf::from(dir);
    assert_eq!(mode, "700", "private directory");
    assert!(dir.starts_with(std::env::temp_dir()), "{}", dir.display());

    // Counts from all workers (multiprom's grandchildren).
    let parsed = scrape(addr);
    assert_eq!(sample_value(&parsed, "jobs_total", &[]), Some(6.0));
    assert_eq!(sample_value(&parsed, "busy_workers", &[]), Some(3.0));

    // A worker dies (and stays a zombie): its livesum share leaves the
    // output within a second (nobody holds its file), its counter stays. The file itself stays for the grace
    // period: gunicorn's child_exit hook would remove it once the master
    // collects the zombie, and must not find it gone.
    std::fs::write(control.path().join("kill-one"), b"").unwrap();
    let killed: u32 = wait_for_file(&control.path().join("killed"))
        .parse()
        .unwrap();
    assert_eq!(killed, pids[0]);
    // Within a look at the processes (every second for the files held).
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut parsed = scrape(addr);
    while sample_value(&parsed, "busy_workers", &[]) != Some(2.0) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        parsed = scrape(addr);
    }
    assert_eq!(sample_value(&parsed, "jobs_total", &[]), Some(6.0));
    assert_eq!(sample_value(&parsed, "busy_workers", &[]), Some(2.0));
    assert!(dir.join(format!("gauge_livesum_{killed}.db")).exists());
    assert!(dir.join(format!("counter_{killed}.db")).exists());

    std::fs::write(control.path().join("finish"), b"").unwrap();
    let (status, stderr) = run.wait();
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert!(!dir.exists(), "{} left behind", dir.display());
}

#[test]
fn exit_status_is_the_commands_or_128_plus_signal() {
    let py = python().as_os_str();
    let cases: [(&[&str], i32); 3] = [
        (&["-c", "import sys; sys.exit(7)"], 7),
        (&["-c", "pass"], 0),
        (
            &[
                "-c",
                "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
            ],
            128 + 9,
        ),
    ];
    for (args, expected) in cases {
        let mut command = vec![py];
        command.extend(args.iter().map(std::ffi::OsStr::new));
        let out = run_cmd(&[], &command).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(expected),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn commands_that_cannot_start_exit_127_or_126() {
    let dir = temp_dir();
    let not_executable = dir.path().join("script.sh");
    std::fs::write(&not_executable, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&not_executable, std::fs::Permissions::from_mode(0o644)).unwrap();
    let missing = dir.path().join("no-such-program");
    let cases: [(&std::ffi::OsStr, i32, &str); 4] = [
        (
            "multiprom-no-such-command".as_ref(),
            127,
            "command not found",
        ),
        (missing.as_os_str(), 127, "command not found"),
        (not_executable.as_os_str(), 126, "cannot execute"),
        (dir.path().as_os_str(), 126, "cannot execute"),
    ];
    for (program, code, message) in cases {
        let out = run_cmd(&[], &[program]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{program:?}: {stderr}");
        let line = stderr
            .lines()
            .find(|l| l.starts_with("multiprom run: "))
            .unwrap_or_else(|| panic!("no error line: {stderr}"));
        assert!(line.contains(&*program.to_string_lossy()), "{line}");
        assert!(line.contains(message), "{line}");
    }
}

#[test]
fn signals_are_passed_on_to_the_command() {
    for (signal, name, number) in [
        (Signal::INT, "SIGINT", 2),
        (Signal::TERM, "SIGTERM", 15),
        (Signal::HUP, "SIGHUP", 1),
        (Signal::QUIT, "SIGQUIT", 3),
        // gunicorn's controls: reopen the logs, re-execute, workers.
        (Signal::USR1, "SIGUSR1", 10),
        (Signal::USR2, "SIGUSR2", 12),
        (Signal::WINCH, "SIGWINCH", 28),
        (Signal::TTIN, "SIGTTIN", 21),
        (Signal::TTOU, "SIGTTOU", 22),
    ] {
        let control = temp_dir();
        let command = python_cmd("run_signals.py", &[control.path()]);
        let command: Vec<&std::ffi::OsStr> = command.iter().map(|s| s.as_os_str()).collect();
        let mut run = Spawned::start(run_cmd(&[], &command));
        wait_for_file(&control.path().join("ready"));
        run.signal(signal);
        let (status, stderr) = run.wait();
        assert_eq!(status.code(), Some(10 + number), "{name}: {stderr}");
        // Sent with kill(2), so only multiprom got it: passed on, and logged.
        assert!(
            stderr.contains(&format!("passing {name} on to pid ")),
            "{name}: {stderr}"
        );
        assert!(
            stderr.contains(&format!(") exited with status {}", 10 + number)),
            "{name}: {stderr}"
        );
        assert_eq!(wait_for_file(&control.path().join("got")), name);
    }
    // A command that does not handle the signal dies of it: 128 + 15.
    let mut run = Spawned::start(run_cmd(&[], &["sleep".as_ref(), "120".as_ref()]));
    run.wait_for_stderr("started sleep");
    run.signal(Signal::TERM);
    let (status, stderr) = run.wait();
    assert_eq!(status.code(), Some(128 + 15), "{stderr}");
    assert!(stderr.contains("sleep (pid "), "{stderr}");
    assert!(stderr.contains(") was killed by signal 15"), "{stderr}");
}

#[test]
fn as_pid_1_it_reaps_what_the_command_leaves_behind() {
    // A container's first process, in a pid namespace of its own (a user
    // namespace too, so no root is needed).
    let mut cmd = Command::new("unshare");
    cmd.args(["--map-root-user", "--pid", "--fork", "--mount-proc"])
        .arg(env!("CARGO_BIN_EXE_multiprom"))
        .args([
            "run",
            "--listen",
            "127.0.0.1:0",
            "--log.level",
            "debug",
            "--",
        ])
        .args(python_cmd("run_orphans.py", &[]));
    let out = cmd
        .output()
        .expect("run unshare (util-linux) for a pid namespace");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        stderr
            .matches(", left behind by the command: exited with status 0")
            .count(),
        5,
        "{stderr}"
    );
}

#[test]
fn given_dir_is_created_and_stale_files_removed_unless_kept() {
    let base = temp_dir();
    let dir = base.path().join("created/by/run");
    let list = [
        "sh".as_ref(),
        "-c".as_ref(),
        "ls \"$PROMETHEUS_MULTIPROC_DIR\"".as_ref(),
    ];
    let flag = ["--dir", dir.to_str().unwrap()];
    let out = run_cmd(&flag, &list).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(dir.is_dir());

    for name in ["counter_1.db", "gauge_livesum_2.db", "notes.txt"] {
        std::fs::write(dir.join(name), b"x").unwrap();
    }
    std::fs::create_dir(dir.join("histogram_3.db")).unwrap();
    let kept = run_cmd(&[flag[0], flag[1], "--keep-files"], &list)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&kept.stdout),
        "counter_1.db\ngauge_livesum_2.db\nhistogram_3.db\nnotes.txt\n"
    );
    let cleaned = run_cmd(&flag, &list).output().unwrap();
    let stderr = String::from_utf8_lossy(&cleaned.stderr);
    assert!(
        stderr.contains(&format!(
            "removed 2 stale *.db files from {}",
            dir.display()
        )),
        "{stderr}"
    );
    // Only regular *.db files go; the directory keeps what it had otherwise,
    // and with --dir nothing is removed at the end.
    assert_eq!(
        String::from_utf8_lossy(&cleaned.stdout),
        "histogram_3.db\nnotes.txt\n"
    );
    assert!(dir.join("notes.txt").exists());

    let out = multiprom()
        .args(["run", "--keep-files", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "--keep-files needs --dir");
}

/// `run --dir` removes what an earlier run left (its `*.db` files and their
/// companions: an old compacted native histogram would add to the new
/// run's), never what a running process uses: a directory another
/// multiprom compacts is refused untouched, and a file a process holds open
/// stays.
#[test]
fn stale_files_go_and_files_in_use_stay() {
    let base = temp_dir();
    let dir = base.path().join("metrics");
    std::fs::create_dir_all(dir.join("native-histograms")).unwrap();
    std::fs::create_dir_all(dir.join("exemplars")).unwrap();
    let stale = [
        "counter_1.db",
        "native-histograms/histogram_compacted.native",
        "exemplars/counter_2.exemplars",
    ];
    let ls = [
        "sh".as_ref(),
        "-c".as_ref(),
        "cd \"$PROMETHEUS_MULTIPROC_DIR\" && ls *.db native-histograms exemplars".as_ref(),
    ];
    let dir_flag = ["--dir", dir.to_str().unwrap()];
    // A run compacting the directory (the default), whose worker holds its
    // file open.
    let hold = "exec 3<>\"$PROMETHEUS_MULTIPROC_DIR/counter_$$.db\"; echo $$ > \"$PROMETHEUS_MULTIPROC_DIR/../ready\"; exec sleep 60";
    let mut first = Spawned::start({
        let mut cmd = run_cmd(&dir_flag, &["sh".as_ref(), "-c".as_ref(), hold.as_ref()]);
        cmd.stdout(std::process::Stdio::null());
        cmd
    });
    let worker = format!(
        "counter_{}.db",
        wait_for_file(&base.path().join("ready")).trim()
    );
    // Its compaction under way (the lock taken), which starts beside the
    // command, not before it.
    first.wait_for_stderr("compacting exited workers' files in");
    // (Only a *.db file here: the first run's own reaping may remove an
    // orphaned companion at any moment.)
    std::fs::write(dir.join(stale[0]), b"x").unwrap();
    let refused = run_cmd(&dir_flag, &ls).output().unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("another multiprom is using"), "{stderr}");
    assert!(stderr.contains("nothing was removed"), "{stderr}");
    for name in [stale[0], worker.as_str()] {
        assert!(dir.join(name).exists(), "{name} removed");
    }
    std::fs::remove_file(dir.join(&worker)).unwrap();
    first.signal(Signal::TERM);
    first.wait();
    for name in stale {
        std::fs::write(dir.join(name), b"x").unwrap();
    }
    // The worker holds its file, its multiprom gone: only the stale go.
    let mut holder = Command::new("sh")
        .args(["-c", "exec 3<>\"$0/counter_$$.db\"; exec sleep 60"])
        .arg(&dir)
        .spawn()
        .unwrap();
    let held = format!("counter_{}.db", holder.id());
    let deadline = Instant::now() + PATIENCE;
    while !dir.join(&held).exists() {
        assert!(Instant::now() < deadline, "{held} never appeared");
        std::thread::sleep(Duration::from_millis(10));
    }
    let cleaned = run_cmd(&dir_flag, &ls).output().unwrap();
    let _ = holder.kill();
    let _ = holder.wait();
    let stderr = String::from_utf8_lossy(&cleaned.stderr);
    assert_eq!(cleaned.status.code(), Some(0), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&cleaned.stdout),
        format!("{held}\n\nexemplars:\n\nnative-histograms:\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "removed 1 stale *.db file and 2 of their exemplar or native histogram files"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("kept 1 file in"), "{stderr}");
}

/// An option `run` does not know, before `--`, is an error (exit 2), not
/// the command to run; and so is an interval of 0, which would spin.
#[test]
fn unknown_options_and_a_zero_interval_exit_2_without_starting_anything() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["run", "--no-such-flag", "--", "true"],
            "unexpected argument '--no-such-flag'",
        ),
        (&["run", "-x", "--", "true"], "unexpected argument '-x'"),
        (
            &["run", "--compact-interval", "0s", "--", "true"],
            "\"0s\" is no interval: it must be more than 0",
        ),
        (
            &[
                "serve",
                "--dir",
                ".",
                "--compact",
                "--compact-interval",
                "0ms",
            ],
            "\"0ms\" is no interval: it must be more than 0",
        ),
    ];
    for (args, message) in cases {
        let mut cmd = multiprom();
        cmd.args(args).stdout(std::process::Stdio::null());
        // Spawned: a command that wrongly starts ends the test, not hangs it.
        let (status, stderr) = Spawned::start(cmd).wait();
        assert_eq!(status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(!stderr.contains("command not found"), "{args:?}: {stderr}");
    }
    // A command's own options after its name still reach it.
    let out = multiprom()
        .args(["run", "--listen", "127.0.0.1:0", "sh", "-c", "exit 7"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7), "{out:?}");
}

#[test]
fn busy_port_exits_2_without_starting_the_command() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let control = temp_dir();
    let marker = control.path().join("started");
    let touch = format!("touch '{}'", marker.display());
    let out = multiprom()
        .args(["run", "--listen", &addr, "--", "sh", "-c", &touch])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("cannot listen on"), "{stderr}");
    assert!(
        !marker.exists(),
        "the command ran although the port was busy"
    );
    drop(taken);
}

#[test]
fn relative_dir_is_exported_as_an_absolute_path() {
    let base = temp_dir();
    let print = [
        "sh".as_ref(),
        "-c".as_ref(),
        "printf %s \"$PROMETHEUS_MULTIPROC_DIR\"".as_ref(),
    ];
    let out = run_cmd(&["--dir", "rel/metrics"], &print)
        .current_dir(base.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        base.path().join("rel/metrics").to_str().unwrap()
    );
    assert!(base.path().join("rel/metrics").is_dir());
}

#[test]
fn exported_dir_is_used_and_nothing_in_it_removed() {
    let base = temp_dir();
    let dir = base.path().join("app-metrics");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("counter_1.db"), b"x").unwrap();
    let print = [
        "sh".as_ref(),
        "-c".as_ref(),
        "printf '%s\\n' \"$PROMETHEUS_MULTIPROC_DIR\"; ls \"$PROMETHEUS_MULTIPROC_DIR\"".as_ref(),
    ];
    let out = run_cmd(&[], &print)
        .env("PROMETHEUS_MULTIPROC_DIR", &dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{}\ncounter_1.db\n", dir.display())
    );
    assert!(
        stderr.contains(&format!(
            "using the exported PROMETHEUS_MULTIPROC_DIR={}",
            dir.display()
        )),
        "{stderr}"
    );
    assert!(dir.join("counter_1.db").exists(), "not ours to remove");
    exported_dir_is_compacted_only_when_asked(&dir);

    // --dir still wins, and says so.
    let other = base.path().join("other");
    let out = run_cmd(&["--dir", other.to_str().unwrap()], &print)
        .env("PROMETHEUS_MULTIPROC_DIR", &dir)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{}\n", other.display())
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("replaces the exported"));
}

/// An exited worker's counter in the exported `dir` stays as it is under
/// `run` (another reader, the application's own endpoint, may share the
/// directory), and is folded with `--compact`.
fn exported_dir_is_compacted_only_when_asked(dir: &Path) {
    std::fs::remove_file(dir.join("counter_1.db")).unwrap();
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let name = FileName::new(MetricKind::Counter, pid.to_string()).unwrap();
    let mut writer = FileWriter::open(dir, &name).unwrap();
    writer
        .slot(&encode_key("jobs", "jobs_total", [], "Jobs."))
        .unwrap()
        .add(3.0);
    drop(writer);
    let worker_file = dir.join(name.to_string());
    // Written a while ago: a file written in the last 30 s with no writer
    // seen holding one would hold compaction back (see operations.md).
    std::fs::File::options()
        .write(true)
        .open(&worker_file)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - Duration::from_secs(120))
        .unwrap();
    let compacted = dir.join("counter_compacted.db");
    // The command ends once a compaction would have run a few times.
    let wait = ["sleep".as_ref(), "1".as_ref()];
    let out = run_cmd(&["--compact-interval", "50ms"], &wait)
        .env("PROMETHEUS_MULTIPROC_DIR", dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("--compact to compact"), "{stderr}");
    assert!(worker_file.exists(), "{stderr}");
    assert!(!compacted.exists(), "{stderr}");

    let out = run_cmd(&["--compact", "--compact-interval", "50ms"], &wait)
        .env("PROMETHEUS_MULTIPROC_DIR", dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!worker_file.exists(), "{stderr}");
    assert!(compacted.exists(), "{stderr}");
    assert!(
        stderr.contains("compacted 1 file of exited workers into "),
        "{stderr}"
    );
}

#[test]
fn ctrl_c_in_a_terminal_reaches_the_command_once() {
    let control = temp_dir();
    let out = crate::harness::run_python(
        "run_tty.py",
        &[
            env!("CARGO_BIN_EXE_multiprom"),
            python().to_str().unwrap(),
            control.path().to_str().unwrap(),
        ],
        &[],
    );
    assert_ctrl_c_reached_the_command_once(&out);
}

/// What `tests/python/run_tty.py` saw: Ctrl-C in the terminal reached the
/// command once, and `run` exited with the command's 0, saying why; returns
/// the terminal's text.
pub(crate) fn assert_ctrl_c_reached_the_command_once(report: &[u8]) -> String {
    let result: serde_json::Value = serde_json::from_slice(report).unwrap();
    let terminal = result["terminal"].as_str().unwrap();
    assert_eq!(result["sigints"], 1, "{terminal}");
    assert_eq!(result["exit"], 0, "{terminal}");
    assert!(
        terminal.contains("SIGINT from the terminal: pid "),
        "{terminal}"
    );
    assert!(terminal.contains(") exited with status 0"), "{terminal}");
    terminal.to_owned()
}
