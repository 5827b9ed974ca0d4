//! A running `multiprom serve` / `multiprom run` under test: its stderr is
//! collected by a thread, the address comes from its start line (so tests
//! can listen on port 0), and it is killed if a test fails half-way.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::process::{kill_process, Pid, Signal};

/// How long tests wait for anything a server should do promptly (generous:
/// a loaded CI machine is slow, but a hang must still end).
pub(crate) const PATIENCE: Duration = Duration::from_secs(60);

/// A spawned multiprom process.
pub(crate) struct Spawned {
    child: Option<Child>,
    stderr: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Spawned {
    /// Spawns `cmd` with stderr captured (stdout inherited unless set).
    pub(crate) fn start(mut cmd: Command) -> Spawned {
        cmd.stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn multiprom");
        let pipe = child.stderr.take().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                let mut text = sink.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        });
        Spawned {
            child: Some(child),
            stderr,
            reader: Some(reader),
        }
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Everything written to stderr so far.
    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until stderr contains `needle`; panics after [`PATIENCE`] or if
    /// the process exits first.
    pub(crate) fn wait_for_stderr(&mut self, needle: &str) -> String {
        self.wait_for_stderr_with(needle, |text| {
            text.contains(needle).then(|| text.to_owned())
        })
    }

    /// Waits until `found` finds what it looks for (`what`) in stderr, and
    /// returns it; panics after [`PATIENCE`] or if the process exits first.
    fn wait_for_stderr_with<T>(&mut self, what: &str, found: impl Fn(&str) -> Option<T>) -> T {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let text = self.stderr();
            if let Some(it) = found(&text) {
                return it;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                // Give the reader a moment to drain what is left.
                std::thread::sleep(Duration::from_millis(100));
                let text = self.stderr();
                if let Some(it) = found(&text) {
                    return it;
                }
                panic!("multiprom exited ({status}) before printing {what:?}; stderr:\n{text}");
            }
            assert!(
                Instant::now() < deadline,
                "no {what:?} on stderr after {PATIENCE:?}; stderr:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The address from the start line `... at http://ADDR/metrics ...`
    /// (not from an earlier line that merely names a directory
    /// `.../metrics`).
    pub(crate) fn address(&mut self) -> SocketAddr {
        self.wait_for_stderr_with("http://ADDR/metrics", metrics_address)
    }

    /// The exit status, if the process has exited (without waiting).
    pub(crate) fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.as_mut().unwrap().try_wait().unwrap()
    }

    /// Whether the process is still running (`false` once waited for).
    pub(crate) fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// Sends `signal` to the process.
    pub(crate) fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(self.pid() as i32).unwrap();
        kill_process(pid, signal).expect("send signal");
    }

    /// Waits for the process to exit (panics after [`PATIENCE`]); returns its
    /// status and its whole stderr.
    pub(crate) fn wait(&mut self) -> (ExitStatus, String) {
        let child = self.child.as_mut().unwrap();
        let deadline = Instant::now() + PATIENCE;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "multiprom did not exit within {PATIENCE:?}; stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        self.child = None;
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        (status, self.stderr())
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs the checker `script` from `tests/python/` with `args` against the
/// running `server` (a real Prometheus or node_exporter); panics with the
/// checker's output and the server's log unless it succeeds. Returns its
/// standard output.
pub(crate) fn run_checker(server: &Spawned, script: &str, args: &[&std::ffi::OsStr]) -> String {
    let check = Command::new(crate::harness::python())
        .arg(crate::harness::python_script(script))
        .args(args)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{script}: {}\n{}\nthe server's log:\n{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr),
        server.stderr()
    );
    String::from_utf8_lossy(&check.stdout).into_owned()
}

/// The address of the first `http://ADDR/metrics` in `text`.
fn metrics_address(text: &str) -> Option<SocketAddr> {
    text.match_indices("http://").find_map(|(at, scheme)| {
        let rest = &text[at + scheme.len()..];
        let end = rest.find('/')?;
        let addr = rest[..end].parse().ok()?;
        rest[end..].starts_with("/metrics").then_some(addr)
    })
}

#[test]
fn the_address_comes_from_the_url_not_from_a_directory_named_metrics() {
    let created = "created /tmp/run/metrics\n";
    assert_eq!(metrics_address(created), None);
    let started = format!(
        "{created}serving /tmp/run/metrics at http://127.0.0.1:9/metrics (status page http://127.0.0.1:9/)\n"
    );
    assert_eq!(
        metrics_address(&started),
        Some(SocketAddr::from(([127, 0, 0, 1], 9)))
    );
}
