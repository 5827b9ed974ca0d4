//! Exemplars across processes into a real Prometheus server: Debian's
//! `prometheus` (installed when missing) with `--enable-feature=exemplar-storage`
//! scrapes `multiprom run -- gunicorn -w 4`, whose app records exemplars
//! through plain prometheus_client calls (`inc(exemplar=...)`,
//! `observe(..., exemplar=...)`) with multiprom's value class installed by
//! the start-up hook (`MULTIPROM_INSTALL=writer`) from the package built from
//! this checkout. `/api/v1/query_exemplars` must return every trace id the
//! workers wrote, on the counter and on the bucket each value fell in,
//! before and after a worker is SIGKILLed and replaced
//! (tests/python/prometheus_exemplars_check.py drives and checks).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use crate::gunicorn::run_gunicorn_app;
use crate::harness::python_script;
use crate::prometheus_server::start_prometheus;
use crate::python_package::package_python;

#[test]
fn prometheus_stores_the_exemplars_gunicorn_workers_wrote_across_a_worker_kill() {
    let python = package_python();
    let (run, metrics, app) =
        run_gunicorn_app(python, "exemplar_app", &[("MULTIPROM_INSTALL", "writer")]);

    let (prometheus, port, _work) =
        start_prometheus(&metrics.to_string(), &["--enable-feature=exemplar-storage"]);

    let check = Command::new(python)
        .arg(python_script("prometheus_exemplars_check.py"))
        .arg(format!("http://127.0.0.1:{port}"))
        .arg(format!("http://{app}"))
        .arg(run.0.pid().to_string())
        // wait_for_app's request.
        .arg("1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success(),
        "{stdout}\n{}\nmultiprom run's log:\n{}\nPrometheus's log:\n{}",
        String::from_utf8_lossy(&check.stderr),
        run.0.stderr(),
        prometheus.stderr()
    );
    let said: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    // The exemplars came through multiprom's value class, not Python's
    // (which drops them): the app names the class that wrote.
    let writers = said["writers"].as_array().unwrap();
    assert!(
        !writers.is_empty()
            && writers
                .iter()
                .all(|w| w.as_str().unwrap().starts_with("multiprom")),
        "{said}"
    );
    assert!(said["served_by_newcomer"].as_u64().unwrap() >= 2, "{said}");
}
