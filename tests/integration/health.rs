//! Health and readiness checks, the metrics path, HEAD, and a directory that
//! goes away while `multiprom serve` runs and comes back.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::harness::{multiprom, run_python, temp_dir};
use crate::http_client::{get, request};
use crate::serve::{fixture, partition_self, serve, split_families};
use crate::spawned_server::{Spawned, PATIENCE};

/// The address from a start line whose metrics are not at `/metrics`.
fn address_before(server: &mut Spawned, path: &str) -> SocketAddr {
    let text = server.wait_for_stderr("(status page http://");
    let start = text.find("http://").unwrap() + "http://".len();
    let end = start + text[start..].find(path).unwrap();
    text[start..end].parse().unwrap()
}

#[test]
fn healthy_ready_head_and_a_telemetry_path() {
    let dir = fixture();
    let mut cmd = multiprom();
    cmd.arg("serve").arg("--dir").arg(dir.path()).args([
        "--listen",
        "127.0.0.1:0",
        "--web.telemetry-path",
        "/app/metrics",
    ]);
    let mut server = Spawned::start(cmd);
    let addr = address_before(&mut server, "/app/metrics");

    let metrics = get(addr, "/app/metrics", &[]);
    assert_eq!(metrics.status, 200);
    assert!(metrics
        .text()
        .contains("# TYPE http_requests_total counter\n"));
    let moved = get(addr, "/metrics", &[]);
    assert_eq!(moved.status, 404);
    assert_eq!(
        moved.text(),
        "multiprom: not found; metrics are at /app/metrics\n"
    );
    let head = request(addr, "HEAD", "/app/metrics", &[]);
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    let length: usize = head.header("content-length").unwrap().parse().unwrap();
    // The self-metrics' numbers change between scrapes, so only roughly.
    assert!(length.abs_diff(metrics.body.len()) < 200, "{length}");

    for method in ["GET", "HEAD"] {
        let healthy = request(addr, method, "/-/healthy", &[]);
        assert_eq!(healthy.status, 200, "{method}");
        let ready = request(addr, method, "/-/ready", &[]);
        assert_eq!(ready.status, 200, "{method}");
        if method == "GET" {
            assert_eq!(healthy.text(), "multiprom is Healthy.\n");
            assert_eq!(ready.text(), "multiprom is Ready.\n");
        }
    }
    assert_eq!(request(addr, "POST", "/-/ready", &[]).status, 405);

    for bad in ["metrics", "/", "/-/x", "/a/"] {
        let out = multiprom()
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--web.telemetry-path",
                bad,
            ])
            .arg("--dir")
            .arg(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
    }
}

fn python_exposition(dir: &std::path::Path) -> String {
    String::from_utf8(run_python(
        "serve_python_exposition.py",
        &[dir.to_str().unwrap(), "text"],
        &[],
    ))
    .unwrap()
}

fn until(addr: SocketAddr, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let response = get(addr, "/metrics", &[]);
        assert_eq!(response.status, 200, "{}", response.text());
        let body = response.text();
        if pred(&body) {
            return body;
        }
        assert!(Instant::now() < deadline, "never saw {what}:\n{body}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_deleted_directory_is_logged_once_served_empty_and_recovered() {
    let base = temp_dir();
    let dir = base.path().join("metrics");
    std::fs::create_dir(&dir).unwrap();
    let source = fixture();
    for entry in std::fs::read_dir(source.path()).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    let (mut server, addr) = serve(&dir, &[]);
    let body = until(addr, "the workers' families", |b| {
        b.contains("http_requests_total")
    });
    assert!(
        body.contains("multiprom_directory_listable 1.0\n"),
        "{body}"
    );

    std::fs::remove_dir_all(&dir).unwrap();
    for _ in 0..3 {
        let response = get(addr, "/metrics", &[]);
        assert_eq!(response.status, 200);
        let body = response.text();
        let (workers, own) = partition_self(&body);
        assert!(workers.is_empty(), "{body}");
        assert!(
            body.contains("multiprom_directory_listable 0.0\n"),
            "{body}"
        );
        assert!(
            body.contains("multiprom_scrape_files{state=\"ok\"} 0.0\n"),
            "{body}"
        );
        assert!(!own.is_empty());
    }
    let ready = get(addr, "/-/ready", &[]);
    assert_eq!(ready.status, 503);
    assert!(
        ready.text().starts_with("multiprom is not ready: "),
        "{}",
        ready.text()
    );
    assert!(ready.text().contains("cannot list"), "{}", ready.text());
    let log = server.wait_for_stderr("serving only multiprom's own metrics");
    assert_eq!(log.matches("cannot list directory").count(), 1, "{log}");
    assert!(body_errors(addr) >= 3.0);

    // Back, with other files: served as they are now, as Python reads them.
    std::fs::create_dir(&dir).unwrap();
    run_python(
        "serve_fixture.py",
        &[],
        &[("PROMETHEUS_MULTIPROC_DIR", dir.as_path())],
    );
    let body = until(addr, "the directory back", |b| {
        b.contains("multiprom_directory_listable 1.0\n")
    });
    let (workers, _) = partition_self(&body);
    assert_eq!(workers, split_families(&python_exposition(&dir)));
    server.wait_for_stderr("can be listed again");
    assert_eq!(get(addr, "/-/ready", &[]).status, 200);
}

fn body_errors(addr: SocketAddr) -> f64 {
    let body = get(addr, "/metrics", &[]).text();
    body.lines()
        .find_map(|l| l.strip_prefix("multiprom_scrapes_total{result=\"error\"} "))
        .unwrap()
        .parse()
        .unwrap()
}
