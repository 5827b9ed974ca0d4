//! OTLP against the real thing: the same recordings made by
//! `prometheus_client` (multiprocess files, in real Python processes) and
//! by the OpenTelemetry Python SDK (its OTLP/HTTP exporter's bodies),
//! multiprom's requests for the directory and the SDK's decoded by the
//! official Python protobuf classes and compared point by point, after
//! one phase of recordings and after a second, cumulative and delta.
//!
//! The test lives in this crate (not in the workspace's integration
//! binary, which is the CLI's and runs the `multiprom` binary): it needs
//! only the library, so it makes its own venv under the target directory,
//! as the workspace's harness does, once, and reuses it. It never skips:
//! without Python or PyPI it fails and says why.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use multiprom_collector::{DirCollector, Exemplars, Natives, ServedView};
use multiprom_format::{
    encode_key, ExemplarWriter, FileName, MetricKind, NativeHistogramConfig, NativeHistogramWriter,
};
use multiprom_push::otlp::{ExportMetricsServiceRequest, OtlpEncoder, Temporality};
use prost::Message;

const PROMETHEUS_CLIENT: &str = "0.26.0";
/// opentelemetry-sdk, -proto and -exporter-otlp-proto-http.
const OPENTELEMETRY: &str = "1.45.2";

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN_ID: &str = "00f067aa0ba902b7";

fn target_dir() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    match std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        Some(dir) => workspace.join(dir),
        None => workspace.join("target"),
    }
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(name)
}

/// Runs `command` to its end, at most `limit`: a hung process fails the
/// test (killed) instead of hanging it. Returns stdout.
fn run(command: &mut Command, what: &str, limit: Duration) -> String {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot {what}: {e} (is python3 installed? set MULTIPROM_TEST_PYTHON)")
        });
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?}, killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The venv's Python, with prometheus_client and the OpenTelemetry SDK
/// pinned; made on first use (in a directory of its own, renamed into
/// place, so concurrent test processes race safely).
fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let target = target_dir();
        let venv = target.join(format!(
            "py-venv-otlp-prometheus-client-{PROMETHEUS_CLIENT}-opentelemetry-{OPENTELEMETRY}"
        ));
        if !venv.join(".ready").exists() {
            std::fs::create_dir_all(&target).unwrap();
            let tmp = target.join(format!(".py-venv-otlp-tmp-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&tmp);
            let base = std::env::var("MULTIPROM_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
            let minutes = Duration::from_secs(600);
            run(
                Command::new(&base).args(["-m", "venv"]).arg(&tmp),
                "create the OTLP test venv",
                minutes,
            );
            run(
                Command::new(tmp.join("bin/python"))
                    .args([
                        "-m",
                        "pip",
                        "install",
                        "--quiet",
                        "--disable-pip-version-check",
                    ])
                    .arg(format!("prometheus_client=={PROMETHEUS_CLIENT}"))
                    .arg(format!("opentelemetry-sdk=={OPENTELEMETRY}"))
                    .arg(format!("opentelemetry-proto=={OPENTELEMETRY}"))
                    .arg(format!(
                        "opentelemetry-exporter-otlp-proto-http=={OPENTELEMETRY}"
                    )),
                "install prometheus_client and the OpenTelemetry SDK into the OTLP test venv",
                minutes,
            );
            std::fs::write(tmp.join(".ready"), OPENTELEMETRY).unwrap();
            if std::fs::rename(&tmp, &venv).is_err() {
                // Another test process finished first: theirs is used.
                let _ = std::fs::remove_dir_all(&tmp);
            }
        }
        assert!(
            venv.join(".ready").exists(),
            "no venv at {}",
            venv.display()
        );
        venv.join("bin/python")
    })
}

fn python_run(args: &[&str], dir: Option<&Path>) -> String {
    let mut command = Command::new(python());
    command.args(args);
    command
        .env_remove("PROMETHEUS_MULTIPROC_DIR")
        .env_remove("prometheus_multiproc_dir")
        // The SDK reads these: the test's recordings alone decide.
        .env_remove("OTEL_RESOURCE_ATTRIBUTES")
        .env_remove("OTEL_SERVICE_NAME")
        .env_remove("OTEL_METRICS_EXEMPLAR_FILTER")
        .env_remove("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE");
    if let Some(dir) = dir {
        command.env("PROMETHEUS_MULTIPROC_DIR", dir);
    }
    run(
        &mut command,
        &format!("python {args:?}"),
        Duration::from_secs(120),
    )
}

/// The exemplars multiprom's Python package would have stored beside the
/// phase-A worker's files for the recordings made inside the span (plain
/// prometheus_client keeps none in multiprocess mode): the counter's and
/// the histogram bucket's the observation fell in.
fn store_exemplars(dir: &Path, pid: &str) {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let ids = [("trace_id", TRACE_ID), ("span_id", SPAN_ID)];
    let counters =
        ExemplarWriter::open(dir, &FileName::new(MetricKind::Counter, pid).unwrap()).unwrap();
    counters
        .slot(&encode_key(
            "jobs",
            "jobs_total",
            [("queue", "a")],
            "Jobs done.",
        ))
        .unwrap()
        .store(ids, 1.0, now)
        .unwrap();
    let histograms =
        ExemplarWriter::open(dir, &FileName::new(MetricKind::Histogram, pid).unwrap()).unwrap();
    histograms
        .slot(&encode_key(
            "latency_seconds",
            "latency_seconds_bucket",
            [("route", "/"), ("le", "0.1")],
            "Latency.",
        ))
        .unwrap()
        .store(ids, 0.05, now)
        .unwrap();
}

/// `rpc_seconds`'s observations of phase `phase` (as in otlp_sdk.py),
/// recorded natively (schema 3, as the SDK's most) beside the worker
/// `pid`'s classic histogram, as multiprom's client records them.
fn write_native(dir: &Path, pid: &str, phase: &str) {
    let observations: &[f64] = match phase {
        "A" => &[0.0, 0.3, 1.0, 1.5, 2.0, 3.0, 4.0, 100.0],
        _ => &[0.3, 2.0, 2.5, 8.0, 0.0],
    };
    let writer =
        NativeHistogramWriter::open(dir, &FileName::new(MetricKind::Histogram, pid).unwrap())
            .unwrap();
    let config = NativeHistogramConfig {
        schema: 3,
        ..NativeHistogramConfig::default()
    };
    let series = writer
        .series(
            &encode_key("rpc_seconds", "rpc_seconds", [], "RPC time."),
            config,
        )
        .unwrap();
    for &value in observations {
        series.observe(value);
    }
}

/// `body` after checking that it is prost's encoding of the request it
/// holds (written piece by piece, it must be byte for byte the whole
/// request encoded at once: natives, exemplars and every type here).
fn prost_bytes(body: &[u8]) -> &[u8] {
    let request = ExportMetricsServiceRequest::decode(body).unwrap();
    assert!(request.encode_to_vec() == body, "not prost's bytes");
    body
}

#[test]
fn otlp_requests_are_the_python_sdks_for_the_same_recordings() {
    let python = script("otlp_sdk.py");
    let python = python.to_str().unwrap();
    let work = tempfile::tempdir().unwrap();
    let resource = vec![("service.name".to_owned(), "otlp-test".to_owned())];
    // Made before the directory: its series started after the encoders, so
    // the first delta request carries their whole values, as the SDK's
    // first delta export does.
    let mut cumulative = OtlpEncoder::new(resource.clone(), Temporality::Cumulative);
    let mut delta = OtlpEncoder::new(resource, Temporality::Delta);
    // File times come from a coarse clock: the directory's birth must not
    // read earlier than the encoders.
    std::thread::sleep(Duration::from_millis(50));
    let dir = work.path().join("metrics");
    std::fs::create_dir(&dir).unwrap();
    let view = ServedView::new(DirCollector::new(&dir));

    let pid = python_run(&[python, "prometheus", "A"], Some(&dir));
    store_exemplars(&dir, pid.trim());
    write_native(&dir, pid.trim(), "A");
    let served = view.collect_all(Natives::Merge, Exemplars::Attach).unwrap();
    std::fs::write(
        work.path().join("multiprom-cumulative-1.pb"),
        prost_bytes(cumulative.encode(&served)),
    )
    .unwrap();
    std::fs::write(
        work.path().join("multiprom-delta-1.pb"),
        prost_bytes(delta.encode(&served)),
    )
    .unwrap();

    let pid = python_run(&[python, "prometheus", "B"], Some(&dir));
    write_native(&dir, pid.trim(), "B");
    let served = view.collect_all(Natives::Merge, Exemplars::Attach).unwrap();
    std::fs::write(
        work.path().join("multiprom-cumulative-2.pb"),
        prost_bytes(cumulative.encode(&served)),
    )
    .unwrap();
    std::fs::write(
        work.path().join("multiprom-delta-2.pb"),
        prost_bytes(delta.encode(&served)),
    )
    .unwrap();

    python_run(&[python, "sdk", work.path().to_str().unwrap()], None);
    let compared = python_run(
        &[
            script("otlp_compare.py").to_str().unwrap(),
            work.path().to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(compared.trim(), "4 request pairs the same");
}
