//! Which writers are alive, when the number in a file's name does not say.
//!
//! prometheus_client lets an application name its files by any identifier
//! (`values.MultiProcessValue(process_identifier=...)`): applications that
//! recycle workers use a worker index, so `counter_3.db` or
//! `counter_900001.db` may be written by a process whose pid is something
//! else entirely. A pid can also be given to an unrelated process once its
//! worker is gone, and a server in another pid namespace sees none of its
//! writers' pids. In every such case what multiprom serves under `run`,
//! `serve --reap-dead` and `serve --compact` must be what prometheus_client's
//! own `MultiProcessCollector` shows for the same directory at the same
//! moment (less the live gauges of writers that are really gone): nothing
//! hidden, nothing frozen, nothing folded while its writer lives.
//!
//! Real Python workers write (`tests/python/liveness_workers.py`); at each
//! checkpoint they hold still while multiprom is scraped and Python's
//! collector reads the directory, then they go on.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::io::BufRead;
use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::compaction::dead_pid;
use crate::harness::{ensure_tool, python, python_script, run_checked, temp_dir};
use crate::http_client::get;
use crate::run::run_cmd;
use crate::serve::{partition_self, serve, split_families};
use crate::spawned_server::{Spawned, PATIENCE};

/// Seconds after the start of a watch at which the workers are held still
/// and multiprom's answer is compared with Python's collector. The last
/// one comes well after several 1 s reap and compaction passes, and after
/// the few seconds a walk of every process's open files may take to settle.
const CHECKPOINTS: [u64; 4] = [3, 9, 15, 21];

/// Scrapes between checkpoints come at 2 Hz, as a busy Prometheus's would.
const SCRAPE_EVERY: Duration = Duration::from_millis(500);

/// How long a gone worker's live gauges may still be served (its exit
/// must be noticed; a walk of the holders of its files may take a few
/// seconds).
const RETIRE_WITHIN: Duration = Duration::from_secs(30);

/// How many differing samples a failure message shows.
const SHOWN: usize = 12;

/// Worker processes running `tests/python/liveness_workers.py`, driven
/// through files in their control directory. They are told to stop when
/// this is dropped (and stop by themselves after two minutes).
struct Workers {
    control: tempfile::TempDir,
    ids: Vec<String>,
    /// The launcher, when the test started it (under `run`, `run` did).
    launcher: Option<Child>,
    /// Each worker's `worker` label (its identifier, or its pid for "pid"),
    /// once ready.
    labels: Vec<String>,
    /// Each worker's pid as seen here, once ready; `None` for workers in
    /// another pid namespace, whose pid numbers mean nothing here.
    pids: Vec<Option<u32>>,
    exited: Vec<bool>,
    pauses: u32,
}

impl Workers {
    /// Workers not started yet: [`Workers::command`] starts them.
    fn new(ids: &[&str]) -> Workers {
        Workers {
            control: temp_dir(),
            ids: ids.iter().map(|id| (*id).to_owned()).collect(),
            launcher: None,
            labels: Vec::new(),
            pids: Vec::new(),
            exited: vec![false; ids.len()],
            pauses: 0,
        }
    }

    /// Starts workers writing to `dir`, through `prefix` (a command that
    /// runs the launcher elsewhere, e.g. in another pid namespace) if given.
    fn spawn(dir: &Path, ids: &[&str], prefix: Option<Command>) -> Workers {
        let mut workers = Workers::new(ids);
        let command = workers.command();
        let mut cmd = match prefix {
            Some(mut prefix) => {
                prefix.args(&command);
                prefix
            }
            None => {
                let mut cmd = Command::new(&command[0]);
                cmd.args(&command[1..]);
                cmd
            }
        };
        cmd.env("PROMETHEUS_MULTIPROC_DIR", dir)
            .stdin(Stdio::null());
        workers.launcher = Some(cmd.spawn().expect("start the Python workers"));
        workers
    }

    /// The launcher's command line.
    fn command(&self) -> Vec<OsString> {
        let mut command = vec![
            python().as_os_str().to_owned(),
            python_script("liveness_workers.py").into_os_string(),
            self.control.path().as_os_str().to_owned(),
        ];
        command.extend(self.ids.iter().map(OsString::from));
        command
    }

    /// Waits until every worker has written; `here` says whether their
    /// pids are in this test's pid namespace.
    fn wait_ready(&mut self, here: bool) {
        let deadline = Instant::now() + PATIENCE;
        for index in 0..self.ids.len() {
            let path = self.control.path().join(format!("ready-{index}"));
            let text = loop {
                if let Ok(text) = std::fs::read_to_string(&path) {
                    break text;
                }
                if let Some(status) = self.launcher.as_mut().and_then(|l| l.try_wait().unwrap()) {
                    panic!("the Python workers exited ({status}) before worker {index} was ready");
                }
                assert!(Instant::now() < deadline, "worker {index} never got ready");
                std::thread::sleep(Duration::from_millis(20));
            };
            let (id, pid) = text.split_once(' ').unwrap();
            self.labels
                .push(if id == "pid" { pid } else { id }.to_owned());
            self.pids.push(here.then(|| pid.parse().unwrap()));
        }
    }

    /// The id in worker `index`'s file names.
    fn file_id(&self, index: usize) -> &str {
        &self.labels[index]
    }

    /// Holds every running worker still; returns once each has said so.
    fn pause(&mut self) {
        self.pauses += 1;
        let generation = self.pauses.to_string();
        let tmp = self.control.path().join(".pause");
        std::fs::write(&tmp, &generation).unwrap();
        std::fs::rename(&tmp, self.control.path().join("pause")).unwrap();
        let deadline = Instant::now() + PATIENCE;
        for index in (0..self.ids.len()).filter(|&i| !self.exited[i]) {
            let path = self.control.path().join(format!("paused-{index}"));
            while std::fs::read_to_string(&path).ok().as_deref() != Some(&generation) {
                assert!(
                    Instant::now() < deadline,
                    "worker {index} did not hold still"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    /// Lets the workers go on.
    fn resume(&self) {
        std::fs::remove_file(self.control.path().join("pause")).unwrap();
    }

    /// Tells worker `index` to exit, and waits until its process is gone
    /// (its launcher collects it at once).
    fn exit(&mut self, index: usize) {
        std::fs::write(self.control.path().join(format!("exit-{index}")), b"").unwrap();
        self.exited[index] = true;
        let pid = self.pids[index].expect("a worker whose pid is visible here");
        let deadline = Instant::now() + PATIENCE;
        while Path::new(&format!("/proc/{pid}")).exists() {
            assert!(Instant::now() < deadline, "worker {index} never exited");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The labels of the workers still running.
    fn running(&self) -> Vec<String> {
        (0..self.labels.len())
            .filter(|&i| !self.exited[i])
            .map(|i| self.labels[i].clone())
            .collect()
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        let _ = std::fs::write(self.control.path().join("stop"), b"");
        let _ = std::fs::remove_file(self.control.path().join("pause"));
        let deadline = Instant::now() + Duration::from_secs(10);
        match &mut self.launcher {
            Some(launcher) => {
                while matches!(launcher.try_wait(), Ok(None)) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
                let _ = launcher.kill();
                let _ = launcher.wait();
            }
            // Started by `run`: they see the stop file and exit (their
            // control directory must outlive them).
            None => {
                for pid in self.pids.iter().flatten() {
                    while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            }
        }
    }
}

/// An unrelated process (`sleep 600`), killed on drop.
struct Sleeper(Child);

impl Sleeper {
    fn start() -> Sleeper {
        Sleeper(Command::new("sleep").arg("600").spawn().unwrap())
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What prometheus_client's `MultiProcessCollector` + `generate_latest`
/// show for `dir`, less the files named in `leave_out` (as if
/// `mark_process_dead` had removed them). A read that finds a listed file
/// gone (a compaction moving it) is tried again.
fn python_view(dir: &Path, leave_out: &[String]) -> String {
    let mut tries = 0;
    loop {
        let out = Command::new(python())
            .arg(python_script("serve_python_exposition.py"))
            .arg(dir)
            .arg("text")
            .args(leave_out)
            .env_remove("PROMETHEUS_MULTIPROC_DIR")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            return String::from_utf8(out.stdout).unwrap();
        }
        tries += 1;
        assert!(
            stderr.contains("FileNotFoundError") && tries < 10,
            "Python's collector failed on {}: {stderr}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn scrape(addr: SocketAddr) -> String {
    let response = get(addr, "/metrics", &[]);
    assert_eq!(response.status, 200, "{}", response.text());
    response.text()
}

/// The `*.db` files of `dir` with their inodes and sizes: what a
/// collector reads.
fn listing(dir: &Path) -> BTreeMap<String, (u64, u64)> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name().to_string_lossy().into_owned();
            let meta = e.metadata().ok()?;
            name.ends_with(".db")
                .then(|| (name, (meta.ino(), meta.len())))
        })
        .collect()
}

/// With the workers held still: multiprom's answer, then Python's view of
/// the same directory. multiprom is asked first: a reader opening the
/// files tells a watching multiprom to read them again, and the point is
/// what it serves when nobody else reads. Tried again if the directory
/// changed meanwhile (only multiprom's own maintenance changes it).
fn still_views(
    addr: SocketAddr,
    dir: &Path,
    leave_out: &[String],
    workers: &mut Workers,
) -> (String, String) {
    workers.pause();
    let mut tries = 0;
    let views = loop {
        let before = listing(dir);
        let served = scrape(addr);
        let python = python_view(dir, leave_out);
        tries += 1;
        if before == listing(dir) || tries == 5 {
            break (served, python);
        }
    };
    workers.resume();
    views
}

/// The sample lines of an exposition: series → value.
fn samples(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(series, value)| (series.to_owned(), value.to_owned()))
        .collect()
}

/// How multiprom's answer `served` (its own families aside) differs from
/// Python's exposition `python`: the samples that differ, at most
/// [`SHOWN`] of them; `None` if they are byte for byte the same.
fn differences(served: &str, python: &str) -> Option<String> {
    let (ours, _) = partition_self(served);
    let python = python.strip_suffix("# EOF\n").unwrap_or(python);
    if ours == split_families(python) {
        return None;
    }
    let ours = ours.concat();
    let (mine, theirs) = (samples(&ours), samples(python));
    let mut lines = Vec::new();
    for (series, value) in &theirs {
        match mine.get(series) {
            None => lines.push(format!(
                "  missing from multiprom's answer: {series} {value}"
            )),
            Some(served) if served != value => lines.push(format!(
                "  {series}: multiprom serves {served}, Python's collector shows {value}"
            )),
            Some(_) => {}
        }
    }
    for (series, value) in &mine {
        if !theirs.contains_key(series) {
            lines.push(format!("  only in multiprom's answer: {series} {value}"));
        }
    }
    if lines.is_empty() {
        let first = ours
            .lines()
            .zip(python.lines())
            .find(|(a, b)| a != b)
            .map(|(a, b)| format!("multiprom {a:?}, Python {b:?}"))
            .unwrap_or_else(|| "one is a prefix of the other".to_owned());
        lines.push(format!("  the same samples, but the text differs: {first}"));
    }
    let more = lines.len().saturating_sub(SHOWN);
    lines.truncate(SHOWN);
    if more > 0 {
        lines.push(format!("  ... and {more} more"));
    }
    Some(lines.join("\n"))
}

/// The value of `lv_jobs_total{worker="LABEL"}` in an exposition.
fn jobs(text: &str, label: &str) -> Option<f64> {
    let prefix = format!("lv_jobs_total{{worker=\"{label}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|v| v.parse().ok())
}

/// The `*_compacted.db` files in `dir`.
fn compacted_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with("_compacted.db"))
        .collect();
    names.sort();
    names
}

/// The last `n` lines of a log, for a failure message.
fn tail(log: &str, n: usize) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// What a watch does besides scraping.
struct Watch<'a> {
    /// Names the scenario in failure messages.
    name: &'a str,
    addr: SocketAddr,
    dir: &'a Path,
    /// Worker `index` exits this many seconds after the start.
    exits: Vec<(u64, usize)>,
    /// Files that must stay where they are (same name, same inode) the
    /// whole time: their writers live, or nobody may fold them.
    kept: Vec<String>,
}

/// Scrapes at 2 Hz through every checkpoint: at each, multiprom's answer
/// must equal Python's collector's, and every running worker's counter
/// must have moved since the last one; no `*_compacted.db` may appear and
/// the kept files must stay. Returns what went wrong (empty if nothing).
fn watch(w: Watch<'_>, workers: &mut Workers) -> Vec<String> {
    let stop = AtomicBool::new(false);
    let (guard_failures, mut failures) = std::thread::scope(|s| {
        let guard = s.spawn(|| guard_files(w.name, w.dir, &w.kept, !w.exits.is_empty(), &stop));
        let failures = watch_scrapes(&w, workers);
        stop.store(true, Ordering::SeqCst);
        (guard.join().unwrap(), failures)
    });
    failures.extend(guard_failures);
    failures
}

/// Watches that the `kept` files in `dir` stay where they are (same name,
/// same inode) until `stop`, looking every 2 ms: a compaction pass moves a
/// file aside for only a few milliseconds. Returns what went wrong.
fn guard_files(
    name: &str,
    dir: &Path,
    kept: &[String],
    some_exit: bool,
    stop: &AtomicBool,
) -> Vec<String> {
    let start = Instant::now();
    let inodes: Vec<(&String, u64)> = kept
        .iter()
        .map(|file| {
            let meta = std::fs::metadata(dir.join(file))
                .unwrap_or_else(|e| panic!("{name}: {file} at the start: {e}"));
            (file, meta.ino())
        })
        .collect();
    let mut failures = Vec::new();
    let mut reported = BTreeSet::new();
    while !stop.load(Ordering::SeqCst) {
        for (file, inode) in &inodes {
            let found = std::fs::metadata(dir.join(file));
            if found.as_ref().is_ok_and(|meta| meta.ino() == *inode) || reported.contains(file) {
                continue;
            }
            reported.insert(*file);
            failures.push(format!(
                "{name}: {file}, whose writer {}, was moved or removed at {:.1} s ({})",
                if some_exit {
                    "nobody here can see"
                } else {
                    "is running"
                },
                start.elapsed().as_secs_f64(),
                match found {
                    Ok(_) => "another file has its name".to_owned(),
                    Err(e) => e.to_string(),
                }
            ));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    failures
}

/// The scrapes and checkpoints of [`watch`].
fn watch_scrapes(w: &Watch<'_>, workers: &mut Workers) -> Vec<String> {
    let mut failures: Vec<String> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut once = |failures: &mut Vec<String>, key: String, message: String| {
        if seen.insert(key) {
            failures.push(message);
        }
    };
    let mut exits = w.exits.clone();
    exits.sort();
    let start = Instant::now();
    let mut checkpoint = 0;
    let mut last: Option<(f64, BTreeMap<String, f64>)> = None;
    while checkpoint < CHECKPOINTS.len() {
        let tick = Instant::now();
        let now = start.elapsed().as_secs_f64();
        while exits.first().is_some_and(|&(at, _)| now >= at as f64) {
            let (_, index) = exits.remove(0);
            workers.exit(index);
        }
        scrape(w.addr);
        for name in compacted_files(w.dir) {
            once(
                &mut failures,
                format!("compacted {name}"),
                format!(
                    "{}: {name} appeared at {now:.1} s: files were folded although no writer is known to be gone",
                    w.name
                ),
            );
        }
        if now >= CHECKPOINTS[checkpoint] as f64 {
            let (served, python) = still_views(w.addr, w.dir, &[], workers);
            if let Some(diff) = differences(&served, &python) {
                failures.push(format!(
                    "{}: at {now:.1} s multiprom's answer differs from Python's collector over the same directory:\n{diff}",
                    w.name
                ));
            }
            let counts: BTreeMap<String, f64> = workers
                .running()
                .into_iter()
                .filter_map(|label| jobs(&served, &label).map(|v| (label, v)))
                .collect();
            for label in workers.running() {
                let Some(now_count) = counts.get(&label) else {
                    failures.push(format!(
                        "{}: at {now:.1} s no lv_jobs_total{{worker=\"{label}\"}} is served for a running worker",
                        w.name
                    ));
                    continue;
                };
                if let Some(before) = last.as_ref().and_then(|(_, c)| c.get(&label)) {
                    let since = last.as_ref().unwrap().0;
                    if now_count <= before {
                        failures.push(format!(
                            "{}: lv_jobs_total{{worker=\"{label}\"}} stayed at {before} from {since:.1} s to {now:.1} s while its worker kept counting (Python's collector shows {:?})",
                            w.name,
                            jobs(&python, &label)
                        ));
                    }
                }
            }
            last = Some((now, counts));
            checkpoint += 1;
        }
        std::thread::sleep(SCRAPE_EVERY.saturating_sub(tick.elapsed()));
    }
    failures
}

/// Failures of a scenario, with the end of multiprom's log.
fn report(name: &str, failures: Vec<String>, log: &str) -> Vec<String> {
    if failures.is_empty() {
        return failures;
    }
    let mut failures = failures;
    failures.push(format!(
        "{name}: the end of multiprom's log:\n{}",
        tail(log, 15)
    ));
    failures
}

/// Fails with every failure of every scenario.
fn assert_no_failures(failures: &[String]) {
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// The message of a panic caught from a scenario's thread.
fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "(a panic without a message)".to_owned())
}

/// One scenario of [`writers_named_by_worker_index_are_served_as_python_serves_them`].
fn worker_index_scenario(name: &str, ids: &[&str]) -> Vec<String> {
    let base = temp_dir();
    let dir = base.path().join("metrics");
    let (mut workers, server, addr) = match name {
        "run" => {
            let mut workers = Workers::new(ids);
            let command = workers.command();
            let command: Vec<&OsStr> = command.iter().map(OsString::as_os_str).collect();
            let dir_arg = dir.to_str().unwrap();
            let mut server = Spawned::start(run_cmd(
                &[
                    "--dir",
                    dir_arg,
                    "--reap-interval",
                    "1s",
                    "--compact-interval",
                    "1s",
                ],
                &command,
            ));
            let addr = server.address();
            workers.wait_ready(true);
            (workers, server, addr)
        }
        "serve --reap-dead" => {
            // Serving first: the workers' files appear under a running
            // server.
            std::fs::create_dir(&dir).unwrap();
            let (server, addr) = serve(&dir, &["--reap-dead", "--reap-interval", "1s"]);
            let mut workers = Workers::spawn(&dir, ids, None);
            workers.wait_ready(true);
            (workers, server, addr)
        }
        "serve --compact" => {
            // Files first: the pass at start finds them.
            std::fs::create_dir(&dir).unwrap();
            let mut workers = Workers::spawn(&dir, ids, None);
            workers.wait_ready(true);
            let (server, addr) = serve(&dir, &["--compact", "--compact-interval", "1s"]);
            (workers, server, addr)
        }
        _ => unreachable!("{name}"),
    };
    let kept = (0..ids.len())
        .flat_map(|i| {
            let id = workers.file_id(i).to_owned();
            [format!("counter_{id}.db"), format!("histogram_{id}.db")]
        })
        .collect();
    let failures = watch(
        Watch {
            name,
            addr,
            dir: &dir,
            exits: Vec::new(),
            kept,
        },
        &mut workers,
    );
    report(name, failures, &server.stderr())
}

/// Workers named by a worker index, as uWSGI and gunicorn applications
/// that recycle workers name them: by a number no process has, by a low
/// number that some other process may have, and by the pid of an
/// unrelated live process. Under `run`, `serve --reap-dead` and
/// `serve --compact` every sample is served as prometheus_client serves
/// it, live gauges included, and the counters keep moving.
#[test]
fn writers_named_by_worker_index_are_served_as_python_serves_them() {
    let unrelated = Sleeper::start();
    let unrelated_pid = unrelated.0.id().to_string();
    let ids = ["900001", "3", unrelated_pid.as_str()];
    let scenarios = ["run", "serve --reap-dead", "serve --compact"];
    // The scenarios run side by side: each takes as long as its
    // checkpoints, and the machine is mostly idle meanwhile.
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = scenarios
            .iter()
            .map(|name| s.spawn(move || worker_index_scenario(name, &ids)))
            .collect();
        handles
            .into_iter()
            .zip(scenarios)
            .flat_map(|(handle, name)| {
                handle
                    .join()
                    .unwrap_or_else(|p| vec![format!("{name}: {}", panic_message(p))])
            })
            .collect()
    });
    drop(unrelated);
    assert_no_failures(&failures);
}

/// A live worker writing a file named by a pid whose process has exited
/// (it took over a dead worker's identifier): compaction passes must
/// neither fold its file nor freeze its values.
#[test]
fn a_live_writer_of_a_dead_pids_file_is_never_folded_or_frozen() {
    let dead = dead_pid().to_string();
    assert!(
        !Path::new(&format!("/proc/{dead}")).exists(),
        "pid {dead} was given out again at once"
    );
    let dir = temp_dir();
    let (server, addr) = serve(dir.path(), &["--compact", "--compact-interval", "1s"]);
    // Beside it a worker under its own pid, as an application has: the
    // server sees a writer holding its file.
    let mut workers = Workers::spawn(dir.path(), &[&dead, "pid"], None);
    workers.wait_ready(true);
    let kept = [format!("counter_{dead}.db"), format!("histogram_{dead}.db")];
    let mut failures = watch(
        Watch {
            name: "serve --compact",
            addr,
            dir: dir.path(),
            exits: Vec::new(),
            kept: kept.to_vec(),
        },
        &mut workers,
    );
    // The passes really ran meanwhile.
    let body = scrape(addr);
    let passes = body
        .lines()
        .find_map(|l| l.strip_prefix("multiprom_compactions_total{result=\"ok\"} "))
        .and_then(|v| v.parse::<f64>().ok());
    if !passes.is_some_and(|n| n >= 5.0) {
        failures.push(format!(
            "fewer than 5 compaction passes ran in {} s: multiprom_compactions_total{{result=\"ok\"}} is {passes:?}",
            CHECKPOINTS[CHECKPOINTS.len() - 1]
        ));
    }
    assert_no_failures(&report("serve --compact", failures, &server.stderr()));
}

/// A pid namespace of its own, with its own `/proc`, whose first process
/// only collects orphans; everything in it is killed with it on drop.
struct PidNamespace {
    unshare: Child,
    /// The first process's pid as seen here.
    init: u32,
}

impl PidNamespace {
    fn new() -> PidNamespace {
        let unshare = ensure_tool("unshare", "util-linux");
        ensure_tool("nsenter", "util-linux");
        let mut cmd = Command::new(unshare);
        cmd.args(["--pid", "--fork", "--mount-proc", "--kill-child"])
            .arg(python())
            .args([
                "-c",
                "import os, sys, time\nprint(os.getpid(), flush=True)\nwhile True:\n    try:\n        os.wait()\n    except ChildProcessError:\n        time.sleep(0.1)\n",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        let mut unshare = cmd.spawn().expect("run unshare (util-linux)");
        let mut line = String::new();
        std::io::BufReader::new(unshare.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let mut namespace = PidNamespace { unshare, init: 0 };
        assert_eq!(
            line.trim(),
            "1",
            "`unshare --pid --fork --mount-proc` (as root) gave no pid namespace of its own"
        );
        let parent = namespace.unshare.id().to_string();
        namespace.init = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .find(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                    stat.rsplit_once(") ")
                        .and_then(|(_, rest)| rest.split(' ').nth(1))
                        == Some(parent.as_str())
                })
            })
            .expect("the namespace's first process");
        namespace
    }

    /// A command run inside the namespace (and its mount namespace, for
    /// its `/proc`).
    fn enter(&self) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.args(["--target", &self.init.to_string(), "--pid", "--mount", "--"])
            .env_remove("PROMETHEUS_MULTIPROC_DIR")
            .env_remove("prometheus_multiproc_dir");
        cmd
    }
}

impl Drop for PidNamespace {
    fn drop(&mut self) {
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
    }
}

/// A worker that writes a counter and live gauges and exits at once,
/// printing its pid.
const SHORT_LIVED_WORKER: &str = "import os
from prometheus_client import Counter, Gauge
label = str(os.getpid())
Counter('lv_jobs', 'Jobs done.', ['worker']).labels(worker=label).inc(5)
Gauge('lv_busy', 'Busy.', ['worker'], multiprocess_mode='livesum').labels(worker=label).set(1)
Gauge('lv_workers', 'Running workers.', multiprocess_mode='livesum').set(1)
Gauge('lv_peak', 'Highest worker number.', multiprocess_mode='livemax').set(9)
print(label)
";

/// Whether a scrape serves the live gauges of the worker labelled `label`
/// (its own series, or its share of the shared ones: with one other
/// worker running, `lv_workers` is 1 and `lv_peak` 1 without it).
fn serves_live_gauges_of(text: &str, label: &str) -> bool {
    text.contains(&format!("lv_busy{{worker=\"{label}\"}} "))
        || !text.contains("\nlv_workers 1.0\n")
        || !text.contains("\nlv_peak 1.0\n")
}

/// Runs `cmd`, which must succeed and print a pid.
fn printed_pid(cmd: &mut Command, what: &str) -> u32 {
    let out = run_checked(cmd, what);
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{what}: no pid printed: {e}"))
}

/// A worker exits; its pid is then given to an unrelated process. The
/// worker's live gauges, gone from the output once it exited, stay gone:
/// the new process with that pid does not hold its files. Its counter
/// stays, as Python keeps it.
#[test]
fn a_dead_workers_pid_given_to_another_process_does_not_bring_its_live_gauges_back() {
    let namespace = PidNamespace::new();
    let dir = temp_dir();
    let mut server = {
        let mut cmd = namespace.enter();
        cmd.arg(env!("CARGO_BIN_EXE_multiprom"))
            .arg("serve")
            .arg("--dir")
            .arg(dir.path())
            .args([
                "--listen",
                "127.0.0.1:0",
                "--reap-dead",
                "--reap-interval",
                "1s",
            ]);
        Spawned::start(cmd)
    };
    let addr = server.address();
    // One worker keeps running: multiprom sees a writer holding its files.
    let mut live = Workers::spawn(dir.path(), &["pid"], Some(namespace.enter()));
    live.wait_ready(false);
    assert!(
        live.labels[0].parse::<u32>().is_ok_and(|pid| pid < 1000),
        "the worker runs outside the namespace: pid {}",
        live.labels[0]
    );

    let dead = printed_pid(
        namespace
            .enter()
            .arg(python())
            .args(["-c", SHORT_LIVED_WORKER])
            .env("PROMETHEUS_MULTIPROC_DIR", dir.path()),
        "run a short-lived worker",
    );
    let label = dead.to_string();
    let retired: Vec<String> = ["livesum", "livemax"]
        .iter()
        .map(|mode| format!("gauge_{mode}_{dead}.db"))
        .collect();
    for name in retired.iter().chain([&format!("counter_{dead}.db")]) {
        assert!(dir.path().join(name).exists(), "{name} was not written");
    }

    // Gone from the output once the worker is gone.
    let deadline = Instant::now() + RETIRE_WITHIN;
    loop {
        let body = scrape(addr);
        if !serves_live_gauges_of(&body, &label) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "worker {dead} exited and its live gauges are still served after {RETIRE_WITHIN:?}:\n{}\nmultiprom's log:\n{}",
            body.lines().filter(|l| l.starts_with("lv_")).collect::<Vec<_>>().join("\n"),
            tail(&server.stderr(), 15)
        );
        std::thread::sleep(SCRAPE_EVERY);
    }
    let (served, python) = still_views(addr, dir.path(), &retired, &mut live);
    if let Some(diff) = differences(&served, &python) {
        panic!("once worker {dead} exited, multiprom's answer differs from Python's collector after mark_process_dead({dead}):\n{diff}");
    }

    // The next process in the namespace gets the dead worker's pid.
    let mut reused = None;
    for _ in 0..10 {
        let pid = printed_pid(
            namespace.enter().args([
                "sh",
                "-c",
                "echo $(($1 - 1)) > /proc/sys/kernel/ns_last_pid || exit 3; sleep 600 </dev/null >/dev/null 2>&1 & echo $!",
                "sh",
                &label,
            ]),
            "set ns_last_pid and start a process",
        );
        if pid == dead {
            reused = Some(pid);
            break;
        }
        // Something else took the pid first (a thread starting); the
        // stray sleep dies with the namespace.
    }
    assert_eq!(
        reused,
        Some(dead),
        "no unrelated process got pid {dead} in the namespace"
    );

    // Scraped for several reap intervals and holder walks: the live
    // gauges stay gone, the counter stays.
    let mut failures = Vec::new();
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        let body = scrape(addr);
        if serves_live_gauges_of(&body, &label) && failures.is_empty() {
            failures.push(format!(
                "worker {dead}'s live gauges came back once pid {dead} was given to an unrelated process (sleep):\n{}",
                body.lines().filter(|l| l.starts_with("lv_busy") || l.starts_with("lv_workers") || l.starts_with("lv_peak")).collect::<Vec<_>>().join("\n")
            ));
        }
        if jobs(&body, &label) != Some(5.0) {
            failures.push(format!(
                "worker {dead}'s counter is {:?}, not 5 (Python keeps a dead worker's counter)",
                jobs(&body, &label)
            ));
            break;
        }
        std::thread::sleep(SCRAPE_EVERY);
    }
    let (served, python) = still_views(addr, dir.path(), &retired, &mut live);
    if let Some(diff) = differences(&served, &python) {
        failures.push(format!("with pid {dead} given to an unrelated process, multiprom's answer differs from Python's collector after mark_process_dead({dead}):\n{diff}"));
    }
    let failures = report("serve --reap-dead", failures, &server.stderr());
    drop(live);
    server.signal(rustix::process::Signal::TERM);
    drop(namespace);
    assert_no_failures(&failures);
}

/// `multiprom serve --reap-dead --compact` in a pid namespace of its own
/// (its `/proc` shows none of the writers), as `user` (`uid:gid`) or as
/// root.
fn serve_elsewhere(dir: &Path, user: Option<&str>) -> Command {
    let unshare = ensure_tool("unshare", "util-linux");
    let mut cmd = Command::new(unshare);
    cmd.args(["--pid", "--fork", "--mount-proc", "--kill-child"]);
    if let Some(user) = user {
        let setpriv = ensure_tool("setpriv", "util-linux");
        let (uid, gid) = user.split_once(':').unwrap();
        cmd.arg(setpriv)
            .arg(format!("--reuid={uid}"))
            .arg(format!("--regid={gid}"))
            .arg("--clear-groups")
            // The change of user clears the parent-death signal that
            // `--kill-child` set: set it again, so a test that stops
            // `unshare` (or dies) leaves no server behind.
            .arg("--pdeathsig=KILL");
    }
    cmd.arg(env!("CARGO_BIN_EXE_multiprom"))
        .arg("serve")
        .arg("--dir")
        .arg(dir)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--reap-dead",
            "--compact",
            "--compact-interval",
            "1s",
            "--reap-interval",
            "1s",
        ])
        .env_remove("PROMETHEUS_MULTIPROC_DIR")
        .env_remove("prometheus_multiproc_dir");
    cmd
}

/// The files of the workers `indexes` that must stay put while they run.
fn kept_files(workers: &Workers, indexes: std::ops::Range<usize>) -> Vec<String> {
    indexes
        .flat_map(|i| {
            let id = workers.file_id(i).to_owned();
            [
                format!("counter_{id}.db"),
                format!("histogram_{id}.db"),
                format!("gauge_livesum_{id}.db"),
            ]
        })
        .collect()
}

/// The status page's paragraphs, for failure messages.
fn paragraphs(page: &str) -> String {
    page.lines()
        .filter(|l| l.starts_with("<p"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `serve` in a pid namespace of its own, its writers outside it, run as
/// root: it cannot see the writers' processes, but the kernel tells it
/// which files some process has open for writing, in any namespace. So
/// the running writers are served as Python serves them (nothing hidden,
/// folded or frozen), and one that exits is taken for gone: its live
/// gauges leave (as `mark_process_dead` would remove them) and its
/// counters are folded, totals kept.
#[test]
fn serve_in_another_pid_namespace_tells_exited_writers_by_the_kernel() {
    let dir = temp_dir();
    let mut workers = Workers::spawn(dir.path(), &["pid"; 3], None);
    workers.wait_ready(true);
    let mut server = Spawned::start(serve_elsewhere(dir.path(), None));
    let addr = server.address();
    let kept = kept_files(&workers, 0..3);
    let mut failures = watch(
        Watch {
            name: "serve in another pid namespace",
            addr,
            dir: dir.path(),
            exits: vec![],
            kept,
        },
        &mut workers,
    );
    let page = get(addr, "/", &[]).text();
    if !page.contains("Writers: known: ") {
        failures.push(format!(
            "the status page does not say the writers' liveness is known:\n{}",
            paragraphs(&page)
        ));
    }
    // The kernel knows when a writer's files are let go, whatever its
    // namespace.
    let id = workers.file_id(2).to_owned();
    workers.exit(2);
    let deadline = Instant::now() + RETIRE_WITHIN;
    let busy = format!("lv_busy{{worker=\"{id}\"}} ");
    while scrape(addr).contains(&busy) || compacted_files(dir.path()).is_empty() {
        if Instant::now() > deadline {
            failures.push(format!(
                "worker {id} exited, and {RETIRE_WITHIN:?} later its live gauges are still served or its files not folded: {:?}",
                compacted_files(dir.path())
            ));
            break;
        }
        std::thread::sleep(SCRAPE_EVERY);
    }
    let retired: Vec<String> = ["livesum", "livemax"]
        .iter()
        .map(|mode| format!("gauge_{mode}_{id}.db"))
        .collect();
    let (served, python) = still_views(addr, dir.path(), &retired, &mut workers);
    if let Some(diff) = differences(&served, &python) {
        failures.push(format!(
            "once worker {id} exited, multiprom's answer differs from Python's collector after mark_process_dead:\n{diff}"
        ));
    }
    assert_no_failures(&report(
        "serve in another pid namespace",
        failures,
        &server.stderr(),
    ));
}

/// `serve` in a pid namespace of its own, its writers outside it, run as
/// a user who neither owns their files nor may take leases on them: the
/// kernel will not answer, and `/proc` shows none of the writers. It
/// cannot tell which writers are alive, so it serves what Python serves
/// (the live gauges of writers that exited included), folds nothing,
/// freezes nothing, and says so on its status page.
#[test]
fn serve_that_can_see_no_writer_hides_folds_and_freezes_nothing() {
    let dir = temp_dir();
    // Readable by the other user (the files are, as prometheus_client
    // makes them).
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut workers = Workers::spawn(dir.path(), &["pid"; 5], None);
    workers.wait_ready(true);
    let mut server = Spawned::start(serve_elsewhere(dir.path(), Some("65534:65534")));
    let addr = server.address();
    let kept = kept_files(&workers, 0..5);
    let mut failures = watch(
        Watch {
            name: "serve seeing no writer",
            addr,
            dir: dir.path(),
            exits: vec![(5, 3), (11, 4)],
            kept,
        },
        &mut workers,
    );
    let page = get(addr, "/", &[]).text();
    if !page.to_lowercase().contains("liveness unknown") {
        failures.push(format!(
            "the status page does not say \"liveness unknown\":\n{}",
            paragraphs(&page)
        ));
    }
    let log = server.stderr();
    if !log.contains("liveness unknown") {
        failures.push("the log does not say \"liveness unknown\"".to_owned());
    }
    assert_no_failures(&report("serve seeing no writer", failures, &log));
}

#[test]
fn differences_name_the_samples_that_differ() {
    let python = "# HELP a_total A.\n# TYPE a_total counter\na_total{worker=\"1\"} 2.0\na_total{worker=\"2\"} 3.0\n";
    let served = "# HELP a_total A.\n# TYPE a_total counter\na_total{worker=\"1\"} 1.0\n# HELP multiprom_scrapes_total S.\n# TYPE multiprom_scrapes_total counter\nmultiprom_scrapes_total 1.0\n";
    assert_eq!(
        differences(
            &served.replace("1.0\n#", "2.0\na_total{worker=\"2\"} 3.0\n#"),
            python
        ),
        None
    );
    let diff = differences(served, python).unwrap();
    assert!(
        diff.contains("a_total{worker=\"1\"}: multiprom serves 1.0, Python's collector shows 2.0"),
        "{diff}"
    );
    assert!(
        diff.contains("missing from multiprom's answer: a_total{worker=\"2\"} 3.0"),
        "{diff}"
    );
    assert!(!diff.contains("multiprom_scrapes_total"), "{diff}");
}
