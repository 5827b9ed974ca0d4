//! Prometheus Remote-Write into a real Prometheus 3 (Debian unstable's, as
//! prometheus_server.rs fetches it) with its Remote-Write receiver on:
//!
//! * `multiprom run -- gunicorn -w 4` over tests/python/push_app (plain
//!   prometheus_client calls, exemplars and native histograms through the
//!   package's start-up hook) pushing every second: the stored series equal
//!   a scrape of the same endpoint after requests, after a worker's SIGKILL
//!   and respawn, and after the receiver was stopped for 60 seconds
//!   (tests/python/push_remote_write_check.py drives it);
//! * a batch `multiprom run --no-listen` whose command ends long before the
//!   push interval: its final totals are stored, by Remote-Write 1.0 and
//!   by 2.0 (with the counters' start, where the receiver reads it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::{Duration, Instant};

use crate::gunicorn::run_gunicorn_app_with;
use crate::harness::{free_port, multiprom, python, python_script, temp_dir};
use crate::http_client::get;
use crate::prometheus_server::{prometheus_3, start_prometheus_jobs};
use crate::python_package::package_python;
use crate::spawned_server::PATIENCE;

/// How long the receiver is stopped while requests go on.
const OUTAGE_SECONDS: &str = "60";

#[test]
fn prometheus_stores_what_gunicorn_workers_served_across_a_kill_and_an_outage() {
    let port = free_port();
    let write = format!("http://127.0.0.1:{port}/api/v1/write");
    let (run, metrics, app) = run_gunicorn_app_with(
        package_python(),
        "push_app",
        &[("MULTIPROM_INSTALL", "writer,native-histograms")],
        &["--push.remote-write", &write, "--push.interval", "1s"],
    );
    let work = temp_dir();
    let check = Command::new(package_python())
        .arg(python_script("push_remote_write_check.py"))
        .arg(prometheus_3())
        .arg(work.path())
        .arg(port.to_string())
        .arg(format!("http://{metrics}/metrics"))
        .arg(format!("http://{app}"))
        .arg(OUTAGE_SECONDS)
        // wait_for_app's request.
        .arg("1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success(),
        "{stdout}\n{}\nmultiprom run's log:\n{}",
        String::from_utf8_lossy(&check.stderr),
        run.0.stderr()
    );
    eprintln!("{}", stdout.trim());
    let said: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(
        said["third_total"].as_f64(),
        said["requests"].as_f64(),
        "{said}"
    );
    assert!(said["during_outage"].as_f64() > Some(0.0), "{said}");
}

#[test]
fn a_batch_run_pushes_its_final_totals_after_its_command_ends() {
    let batch = batch_run(&[], &[]);
    batch.wait_stored();
    assert_eq!(batch.stored("read"), Some(7.0), "{}", batch.log);
    assert_eq!(batch.stored("written"), Some(6.0), "{}", batch.log);
}

/// The same batch by Remote-Write 2.0, into a Prometheus that ingests a
/// counter's start as a zero sample at that time
/// (`created-timestamp-zero-ingestion`) when it reads one.
#[test]
fn a_batch_run_pushes_by_remote_write_2() {
    let batch = batch_run(
        &["--push.remote-write.version", "2"],
        &["--enable-feature=created-timestamp-zero-ingestion"],
    );
    batch.wait_stored();
    assert_eq!(batch.stored("read"), Some(7.0), "{}", batch.log);
    assert_eq!(batch.stored("written"), Some(6.0), "{}", batch.log);
    // The directory's start, as multiprom kept it.
    let file =
        std::fs::read_to_string(batch.dir.path().join(".multiprom-start-times.json")).unwrap();
    let file: serde_json::Value = serde_json::from_str(&file).unwrap();
    let start_ms = file["epoch_unix_nanos"].as_u64().unwrap() / 1_000_000;
    let raw = batch.raw("read");
    eprintln!(
        "start {start_ms} ms; stored {raw:?}; {}",
        batch.prometheus_version
    );
    let (_, last) = *raw.last().unwrap();
    assert_eq!(last, 7.0, "{raw:?}");
    // Prometheus up to 3.7 reads a start from 2.0's earlier schema
    // (`TimeSeries.created_timestamp`, field 6), which 3.8 moved to
    // `Sample.start_timestamp`: the field multiprom sends. The zero
    // sample is there only for a receiver that reads the latter.
    let reads_start_timestamp = batch.prometheus_minor() >= 8;
    if reads_start_timestamp {
        assert_eq!(raw.first(), Some(&(start_ms, 0.0)), "{raw:?}");
    } else {
        assert_eq!(raw.len(), 1, "{raw:?}");
    }
}

/// A Prometheus that takes only Remote-Write 1.0 answers 2.0 with 415:
/// multiprom's log says what that means.
#[test]
fn a_receiver_of_remote_write_1_only_is_said_to_refuse_2() {
    let batch = batch_run(
        &["--push.remote-write.version", "2"],
        &["--web.remote-write-receiver.accepted-protobuf-messages=prometheus.WriteRequest"],
    );
    assert!(
        batch.log.contains("HTTP 415")
            && batch
                .log
                .contains("the receiver does not take Remote-Write 2.0"),
        "{}",
        batch.log
    );
    // Before 3.7, Prometheus's handler went on after answering 415 and
    // wrote the request all the same (its log: "superfluous
    // response.WriteHeader call").
    std::thread::sleep(Duration::from_millis(500));
    let expected = (batch.prometheus_minor() < 7).then_some(7.0);
    assert_eq!(
        batch.stored("read"),
        expected,
        "{}",
        batch.prometheus_version
    );
}

/// A batch `multiprom run --no-listen` pushing to a Prometheus 3 started
/// with `prometheus_flags`, its directory kept for the test to read.
struct BatchRun {
    prometheus: crate::spawned_server::Spawned,
    prometheus_version: String,
    addr: std::net::SocketAddr,
    log: String,
    dir: tempfile::TempDir,
    _work: tempfile::TempDir,
}

fn batch_run(run_flags: &[&str], prometheus_flags: &[&str]) -> BatchRun {
    let mut flags = vec!["--web.enable-remote-write-receiver"];
    flags.extend_from_slice(prometheus_flags);
    let (prometheus, port, work) = start_prometheus_jobs(prometheus_3(), &[], &flags);
    let version = Command::new(prometheus_3())
        .arg("--version")
        .output()
        .unwrap();
    let prometheus_version = String::from_utf8_lossy(&version.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    let api = format!("http://127.0.0.1:{port}");
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let deadline = Instant::now() + PATIENCE;
    while std::net::TcpStream::connect(addr).is_err() || get(addr, "/-/ready", &[]).status != 200 {
        assert!(Instant::now() < deadline, "{}", prometheus.stderr());
        std::thread::sleep(Duration::from_millis(100));
    }
    let dir = temp_dir();
    let started = Instant::now();
    let output = multiprom()
        .args(["run", "--no-listen", "--push.interval", "10m"])
        .arg("--dir")
        .arg(dir.path())
        .arg("--push.remote-write")
        .arg(format!("{api}/api/v1/write"))
        .args(run_flags)
        .arg("--")
        .arg(python())
        .arg(python_script("push_batch.py"))
        .arg("7")
        .env_remove("PROMETHEUS_MULTIPROC_DIR")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{log}");
    // The last push follows the command at once, not the 10 minute interval.
    assert!(started.elapsed() < PATIENCE, "{log}");
    BatchRun {
        prometheus,
        prometheus_version,
        addr,
        log,
        dir,
        _work: work,
    }
}

impl BatchRun {
    /// The receiver's minor version (3.x).
    fn prometheus_minor(&self) -> u32 {
        let version = self
            .prometheus_version
            .split("version 3.")
            .nth(1)
            .unwrap_or_default();
        let minor: String = version.chars().take_while(char::is_ascii_digit).collect();
        minor.parse().unwrap()
    }
    /// Waits until the pushed totals can be queried (the receiver may
    /// take a moment to make them visible).
    fn wait_stored(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.stored("read").is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(
            self.stored("read").is_some(),
            "{}\n{}",
            self.log,
            self.prometheus.stderr()
        );
    }

    /// The query API's answer for `query` (already URL-encoded).
    fn query(&self, query: &str) -> serde_json::Value {
        let answer = get(self.addr, &format!("/api/v1/query?query={query}"), &[]);
        serde_json::from_slice(&answer.body).unwrap()
    }

    /// The value of `batch_items_total{stage="<stage>"}` now.
    fn stored(&self, stage: &str) -> Option<f64> {
        let answer = self.query(&format!("batch_items_total%7Bstage%3D%22{stage}%22%7D"));
        let value = answer["data"]["result"][0]["value"][1].as_str()?;
        value.parse::<f64>().ok()
    }

    /// Every sample stored of `batch_items_total{stage="<stage>"}` in the
    /// last hour: (milliseconds, value).
    fn raw(&self, stage: &str) -> Vec<(u64, f64)> {
        let answer = self.query(&format!(
            "batch_items_total%7Bstage%3D%22{stage}%22%7D%5B1h%5D"
        ));
        let values = answer["data"]["result"][0]["values"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        values
            .iter()
            .map(|pair| {
                // Seconds as a JSON number with up to 3 decimals.
                let seconds = pair[0].as_f64().unwrap();
                let value: f64 = pair[1].as_str().unwrap().parse().unwrap();
                ((seconds * 1000.0).round() as u64, value)
            })
            .collect()
    }
}

/// A receiver that takes connections and never answers: scrapes are
/// answered at once all the while, the pusher's trouble is logged once,
/// and SIGTERM still ends `serve` within the last push's wait.
#[test]
fn a_receiver_that_never_answers_slows_no_scrape() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/api/v1/write", silent.local_addr().unwrap());
    // Held, never read: each request waits for its timeout.
    let held = std::thread::spawn(move || {
        let mut streams = Vec::new();
        for stream in silent.incoming().take(64) {
            streams.push(stream);
        }
    });
    let dir = crate::serve::fixture();
    let (mut server, addr) = crate::serve::serve(
        dir.path(),
        &[
            "--push.remote-write",
            &url,
            "--push.interval",
            "500ms",
            "--push.timeout",
            "2s",
        ],
    );
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(4) {
        let asked = Instant::now();
        let answer = get(addr, "/metrics", &[]);
        assert_eq!(answer.status, 200);
        assert!(
            asked.elapsed() < Duration::from_secs(1),
            "{:?}",
            asked.elapsed()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let metrics = String::from_utf8(get(addr, "/metrics", &[]).body).unwrap();
    assert!(
        metrics.contains("multiprom_push_failures_total{protocol=\"remote_write\""),
        "{metrics}"
    );
    let status = String::from_utf8(get(addr, "/", &[]).body).unwrap();
    assert!(status.contains("Pushing remote_write to"), "{status}");
    server.signal(rustix::process::Signal::TERM);
    let (exit, log) = server.wait();
    assert!(exit.success(), "{log}");
    assert!(
        started.elapsed() < Duration::from_secs(4) + PATIENCE,
        "{log}"
    );
    assert_eq!(log.matches("failing: timed out").count(), 1, "{log}");
    drop(held);
}
