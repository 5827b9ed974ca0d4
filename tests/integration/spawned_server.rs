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
        let deadline = Instant::now() + PATIENCE;
        loop {
            let text = self.stderr();
            if text.contains(needle) {
                return text;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                // Give the reader a moment to drain what is left.
                std::thread::sleep(Duration::from_millis(100));
                let text = self.stderr();
                if text.contains(needle) {
                    return text;
                }
                panic!("multiprom exited ({status}) before printing {needle:?}; stderr:\n{text}");
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} on stderr after {PATIENCE:?}; stderr:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The address from the start line `... at http://ADDR/metrics ...`.
    pub(crate) fn address(&mut self) -> SocketAddr {
        let text = self.wait_for_stderr("/metrics");
        let start = text.find("http://").expect("URL in start line") + "http://".len();
        let end = start + text[start..].find("/metrics").unwrap();
        text[start..end]
            .parse()
            .expect("socket address in start line")
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
