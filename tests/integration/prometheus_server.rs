//! A real Prometheus server scrapes `multiprom serve`: Debian's `prometheus`
//! package (installed when missing), scraping every second with its own
//! content negotiation (it asks for OpenMetrics first), must see the target
//! up with no scrape error and store every merged series, labels (with
//! escapes and non-ASCII) and values equal to what multiprom serves.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::process::Command;

use crate::harness::{ensure_tool, free_port, temp_dir};
use crate::serve::{fixture, serve};
use crate::spawned_server::{run_checker, Spawned};

/// A real Prometheus server scraping `target` (`host:port`) every second,
/// with `flags` (feature flags) added: the server, the port of its API, and
/// the directory holding its configuration and data (removed when dropped).
pub(crate) fn start_prometheus(target: &str, flags: &[&str]) -> (Spawned, u16, tempfile::TempDir) {
    let prometheus = ensure_tool("prometheus", "prometheus");
    let work = temp_dir();
    let config = work.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
             scrape_configs:\n  - job_name: multiprom\n    static_configs:\n      \
             - targets: ['{target}']\n"
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
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .args(flags);
    (Spawned::start(cmd), port, work)
}

#[test]
fn a_prometheus_server_scrapes_serve_and_stores_every_series_as_served() {
    let dir = fixture();
    let (_server, addr) = serve(dir.path(), &[]);
    let (prometheus, port, _work) = start_prometheus(&addr.to_string(), &[]);
    assert_stores_all_served(&prometheus, port, addr);
}

/// Waits until the Prometheus at `port` has stored every series `multiprom`
/// serves at `addr`, equal (tests/python/prometheus_server_check.py).
pub(crate) fn assert_stores_all_served(prometheus: &Spawned, port: u16, addr: SocketAddr) {
    let said = run_checker(
        prometheus,
        "prometheus_server_check.py",
        &[
            format!("http://127.0.0.1:{port}").as_ref(),
            format!("http://{addr}").as_ref(),
        ],
    );
    assert!(said.contains("Prometheus stored all"), "{said}");
}
