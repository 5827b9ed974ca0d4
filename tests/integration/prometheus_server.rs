//! A real Prometheus server scrapes `multiprom serve`: Debian's `prometheus`
//! package (installed when missing), scraping every second with its own
//! content negotiation (it asks for OpenMetrics first), must see the target
//! up with no scrape error and store every merged series, labels (with
//! escapes and non-ASCII) and values equal to what multiprom serves.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::process::Command;

use crate::harness::{ensure_tool, python, python_script, temp_dir};
use crate::serve::{fixture, serve};
use crate::spawned_server::Spawned;

/// A loopback port nothing listens on now (Prometheus takes a fixed one).
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn a_prometheus_server_scrapes_serve_and_stores_every_series_as_served() {
    let prometheus = ensure_tool("prometheus", "prometheus");
    let dir = fixture();
    let (_server, addr) = serve(dir.path(), &[]);
    let work = temp_dir();
    let config = work.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
             scrape_configs:\n  - job_name: multiprom\n    static_configs:\n      \
             - targets: ['{addr}']\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let mut cmd = Command::new(prometheus);
    cmd.arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            work.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"));
    let prometheus = Spawned::start(cmd);
    let check = Command::new(python())
        .arg(python_script("prometheus_server_check.py"))
        .arg(format!("http://127.0.0.1:{port}"))
        .arg(format!("http://{addr}"))
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}\n{}\nPrometheus' log:\n{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr),
        prometheus.stderr()
    );
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(said.contains("Prometheus stored all"), "{said}");
}
