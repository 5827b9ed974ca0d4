//! Native histograms across processes into real Prometheus servers:
//! `multiprom run -- gunicorn -w 4` whose app observes latencies through a
//! plain prometheus_client `Histogram`, with native recording and
//! multiprom's collector turned on by the start-up hook
//! (`MULTIPROM_INSTALL=collector,native-histograms`) from the package built
//! from this checkout. Debian's `prometheus` (installed when missing) runs
//! three times: with `--enable-feature=native-histograms`, which negotiates
//! the protobuf format and stores the merged native histogram, once scraping
//! `multiprom run` and once the app's own `/metrics` (prometheus_client's
//! `make_wsgi_app` over the multiprocess collector); and without, scraping
//! `multiprom run`, which stores the classic series from the text format
//! (the packaged 2.42 keeps only the native histogram of a series that has
//! one, so the classic series are checked on that server).
//! A Prometheus 3 (Debian unstable's, as prometheus_server.rs fetches it)
//! with native histograms enabled scrapes `multiprom run` too.
//! tests/python/prometheus_native_check.py drives the requests, kills a
//! worker half-way, and checks counts, sums and quantiles.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use crate::gunicorn::run_gunicorn_app;
use crate::harness::python_script;
use crate::prometheus_server::{prometheus_3, start_prometheus, start_prometheus_jobs};
use crate::python_package::package_python;

/// Runs the check with native recording at `schema`
/// (`MULTIPROM_NATIVE_HISTOGRAM_SCHEMA`), and returns what it printed.
fn check_native_histograms_through_prometheus(schema: i8) -> serde_json::Value {
    let python = package_python();
    let schema_var = schema.to_string();
    let (run, metrics, app) = run_gunicorn_app(
        python,
        "native_app",
        &[
            ("MULTIPROM_INSTALL", "collector,native-histograms"),
            ("MULTIPROM_NATIVE_HISTOGRAM_SCHEMA", &schema_var),
        ],
    );

    let target = metrics.to_string();
    let (native, native_port, _native_work) =
        start_prometheus(&target, &["--enable-feature=native-histograms"]);
    let (classic, classic_port, _classic_work) = start_prometheus(&target, &[]);
    let (from_app, from_app_port, _from_app_work) =
        start_prometheus(&app.to_string(), &["--enable-feature=native-histograms"]);
    let (native_3, native_3_port, _native_3_work) = start_prometheus_jobs(
        prometheus_3(),
        &[("multiprom", &target)],
        &["--enable-feature=native-histograms"],
    );

    let check = Command::new(python)
        .arg(python_script("prometheus_native_check.py"))
        .arg(format!("http://127.0.0.1:{native_port}"))
        .arg(format!("http://127.0.0.1:{classic_port}"))
        .arg(format!("http://127.0.0.1:{from_app_port}"))
        .arg(format!("http://{app}"))
        .arg(run.0.pid().to_string())
        // wait_for_app's request.
        .arg("1")
        .arg(schema.to_string())
        .arg(format!("http://127.0.0.1:{native_3_port}"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success(),
        "{stdout}\n{}\nmultiprom run's log:\n{}\nnative Prometheus's log:\n{}\n\
         classic Prometheus's log:\n{}\nthe app's native Prometheus's log:\n{}\n\
         native Prometheus 3's log:\n{}",
        String::from_utf8_lossy(&check.stderr),
        run.0.stderr(),
        native.stderr(),
        classic.stderr(),
        from_app.stderr(),
        native_3.stderr()
    );
    // What Prometheus answered, in the test's output for the record.
    eprintln!("{}", stdout.trim());
    serde_json::from_str(stdout.trim()).unwrap()
}

#[test]
fn prometheus_stores_the_merged_native_histogram_of_gunicorn_workers_across_a_worker_kill() {
    let said = check_native_histograms_through_prometheus(3);
    assert_eq!(said["count"].as_f64(), Some(301.0), "{said}");
    assert_eq!(said["app_count"].as_f64(), Some(301.0), "{said}");
    assert_eq!(said["prometheus_3_count"].as_f64(), Some(301.0), "{said}");
    assert!(said["served_by_newcomer"].as_u64().unwrap() >= 5, "{said}");
}
