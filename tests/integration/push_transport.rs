//! How pushes travel: TLS with a private CA (`--push.ca-file`) and without
//! it (refused, logged once), a bearer token read again after it rotates,
//! basic authentication and extra headers, as a receiver
//! (tests/python/push_sink.py, HTTPS through Python's ssl) sees them; and
//! OTLP where the OpenTelemetry variables say, decoded.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::harness::{ensure_tool, python, python_script, temp_dir};
use crate::serve::{fixture, serve};
use crate::spawned_server::{Spawned, PATIENCE};

/// A CA and a certificate for 127.0.0.1 it signed, made by openssl in
/// `dir`: (ca.pem, cert.pem, key.pem).
fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let openssl = ensure_tool("openssl", "openssl");
    let run = |args: &[&str]| {
        let out = Command::new(&openssl)
            .current_dir(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=multiprom test CA",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "key.pem",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "cert.pem",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    ]);
    (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    )
}

/// The sink, listening (over TLS with `tls`; logging each body with
/// `keep_bodies`): the process, its port, its log.
fn sink(dir: &Path, tls: Option<(&Path, &Path)>, keep_bodies: bool) -> (Spawned, u16, PathBuf) {
    let port_file = dir.join("port");
    let log = dir.join("requests.jsonl");
    let mut cmd = Command::new(python());
    cmd.arg(python_script("push_sink.py"))
        .arg(&port_file)
        .arg(&log);
    if let Some((cert, key)) = tls {
        cmd.arg("--tls").arg(cert).arg(key);
    }
    if keep_bodies {
        cmd.arg("--keep-bodies");
    }
    let sink = Spawned::start(cmd);
    let deadline = Instant::now() + PATIENCE;
    let port = loop {
        if let Ok(text) = std::fs::read_to_string(&port_file) {
            break text.trim().parse().unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "the sink never listened: {}",
            sink.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    (sink, port, log)
}

/// The requests the sink has logged.
fn requests(log: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Waits until the sink has logged a request that `holds`.
fn wait_for(
    log: &Path,
    server: &Spawned,
    holds: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(found) = requests(log).into_iter().find(|r| holds(r)) {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "{:?}\n{}",
            requests(log),
            server.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn tls_with_a_private_ca_a_rotated_bearer_token_and_headers() {
    let work = temp_dir();
    let (ca, cert, key) = certificates(work.path());
    let (_sink, port, log) = sink(work.path(), Some((&cert, &key)), false);
    let token = work.path().join("token");
    std::fs::write(&token, "first-token\n").unwrap();
    let dir = fixture();
    let url = format!("https://127.0.0.1:{port}/api/v1/write");
    let (server, _) = serve(
        dir.path(),
        &[
            "--push.remote-write",
            &url,
            "--push.interval",
            "300ms",
            "--push.ca-file",
            ca.to_str().unwrap(),
            "--push.bearer-token-file",
            token.to_str().unwrap(),
            "--push.header",
            "X-Scope-OrgID=tenant-1",
        ],
    );
    let first = wait_for(&log, &server, |_| true);
    let headers = &first["headers"];
    assert_eq!(headers["authorization"], "Bearer first-token", "{first}");
    assert_eq!(headers["x-scope-orgid"], "tenant-1", "{first}");
    assert_eq!(headers["content-encoding"], "snappy", "{first}");
    assert_eq!(
        headers["x-prometheus-remote-write-version"], "0.1.0",
        "{first}"
    );
    assert_eq!(first["path"], "/api/v1/write");
    assert!(first["bytes"].as_u64().unwrap() > 100, "{first}");
    std::fs::write(&token, "second-token\n").unwrap();
    wait_for(&log, &server, |r| {
        r["headers"]["authorization"] == "Bearer second-token"
    });
}

#[test]
fn tls_to_an_unknown_ca_is_refused_and_said_once() {
    let work = temp_dir();
    let (_, cert, key) = certificates(work.path());
    let (_sink, port, log) = sink(work.path(), Some((&cert, &key)), false);
    let dir = fixture();
    let url = format!("https://127.0.0.1:{port}/api/v1/write");
    let (mut server, _) = serve(
        dir.path(),
        &["--push.remote-write", &url, "--push.interval", "200ms"],
    );
    let said = server.wait_for_stderr("failing");
    assert!(said.contains("certificate"), "{said}");
    std::thread::sleep(Duration::from_secs(2));
    assert!(requests(&log).is_empty());
    assert_eq!(
        server.stderr().matches("failing").count(),
        1,
        "{}",
        server.stderr()
    );
}

#[test]
fn basic_authentication_from_a_password_file() {
    let work = temp_dir();
    let (_sink, port, log) = sink(work.path(), None, false);
    let password = work.path().join("password");
    std::fs::write(&password, "pa:ss\n").unwrap();
    let dir = fixture();
    let url = format!("http://127.0.0.1:{port}/push");
    let (server, _) = serve(
        dir.path(),
        &[
            "--push.remote-write",
            &url,
            "--push.interval",
            "300ms",
            "--push.basic-auth-user",
            "123456",
            "--push.basic-auth-password-file",
            password.to_str().unwrap(),
        ],
    );
    let first = wait_for(&log, &server, |_| true);
    // base64("123456:pa:ss")
    assert_eq!(
        first["headers"]["authorization"], "Basic MTIzNDU2OnBhOnNz",
        "{first}"
    );
}

/// A batch `run` pushing OTLP where the OpenTelemetry variables say (the
/// base endpoint gains `/v1/metrics`): its final totals arrive gzipped, as
/// a monotonic cumulative sum per stage, starting when the directory was
/// made (its start time file), with the service name from
/// `OTEL_SERVICE_NAME` and the resource attributes given.
#[test]
fn a_batch_run_pushes_otlp_as_the_opentelemetry_variables_say() {
    use multiprom_push::otlp::proto::common::v1::any_value::Value;
    use multiprom_push::otlp::proto::metrics::v1::metric::Data;
    use multiprom_push::otlp::ExportMetricsServiceRequest;
    use prost::Message;

    let work = temp_dir();
    let (_sink, port, log) = sink(work.path(), None, true);
    let dir = work.path().join("metrics");
    let output = crate::harness::multiprom()
        .args([
            "run",
            "--no-listen",
            "--push.otlp",
            "--push.interval",
            "10m",
            "--dir",
        ])
        .arg(&dir)
        .args(["--push.otlp.resource", "deployment.environment=test"])
        .arg("--")
        .arg(python())
        .arg(python_script("push_batch.py"))
        .arg("7")
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{port}"),
        )
        .env("OTEL_SERVICE_NAME", "evaluation")
        .env_remove("PROMETHEUS_MULTIPROC_DIR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let sent = requests(&log);
    let last = sent
        .last()
        .unwrap_or_else(|| panic!("nothing pushed: {stderr}"));
    assert_eq!(last["path"], "/v1/metrics", "{last}");
    assert_eq!(last["headers"]["content-encoding"], "gzip", "{last}");
    assert_eq!(
        last["headers"]["content-type"], "application/x-protobuf",
        "{last}"
    );
    let gzipped = hex(last["body"].as_str().unwrap());
    let mut body = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gzipped[..]), &mut body).unwrap();
    let request = ExportMetricsServiceRequest::decode(&body[..]).unwrap();
    let resource = request.resource_metrics[0].resource.clone().unwrap();
    let attribute = |key: &str| {
        resource
            .attributes
            .iter()
            .find(|a| a.key == key)
            .and_then(|a| match a.value.as_ref()?.value.as_ref()? {
                Value::StringValue(text) => Some(text.clone()),
                _ => None,
            })
    };
    assert_eq!(attribute("service.name").as_deref(), Some("evaluation"));
    assert_eq!(attribute("deployment.environment").as_deref(), Some("test"));
    let metrics = &request.resource_metrics[0].scope_metrics[0].metrics;
    let items = metrics.iter().find(|m| m.name == "batch_items").unwrap();
    let Some(Data::Sum(sum)) = &items.data else {
        panic!("{items:?}")
    };
    assert!(sum.is_monotonic);
    assert_eq!(sum.aggregation_temporality, 2, "cumulative");
    let started: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join(".multiprom-start-times.json")).unwrap(),
    )
    .unwrap();
    let epoch = started["epoch_unix_nanos"].as_u64().unwrap();
    let mut points: Vec<(String, f64, u64)> = sum
        .data_points
        .iter()
        .map(|p| {
            let stage = match p.attributes[0]
                .value
                .as_ref()
                .unwrap()
                .value
                .as_ref()
                .unwrap()
            {
                Value::StringValue(text) => text.clone(),
                other => panic!("{other:?}"),
            };
            let value = match p.value {
                Some(
                    multiprom_push::otlp::proto::metrics::v1::number_data_point::Value::AsDouble(v),
                ) => v,
                other => panic!("{other:?}"),
            };
            assert!(p.start_time_unix_nano <= p.time_unix_nano);
            (stage, value, p.start_time_unix_nano)
        })
        .collect();
    points.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        points,
        [("read".into(), 7.0, epoch), ("written".into(), 6.0, epoch)]
    );
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// `run --dir` removes an earlier run's files, so its counts start anew:
/// the start it pushes is this run's, not the directory's birth or the
/// earlier run's.
#[test]
fn a_run_that_removes_an_earlier_runs_files_starts_counting_anew() {
    let work = temp_dir();
    let (_sink, port, _log) = sink(work.path(), None, false);
    let dir = work.path().join("metrics");
    let epoch = || -> u64 {
        let text = std::fs::read_to_string(dir.join(".multiprom-start-times.json")).unwrap();
        let kept: serde_json::Value = serde_json::from_str(&text).unwrap();
        kept["epoch_unix_nanos"].as_u64().unwrap()
    };
    let run = || {
        let output = crate::harness::multiprom()
            .args(["run", "--no-listen", "--push.interval", "10m", "--dir"])
            .arg(&dir)
            .arg("--push.remote-write")
            .arg(format!("http://127.0.0.1:{port}/api/v1/write"))
            .arg("--")
            .arg(python())
            .arg(python_script("push_batch.py"))
            .arg("3")
            .env_remove("PROMETHEUS_MULTIPROC_DIR")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    run();
    let first = epoch();
    std::thread::sleep(Duration::from_millis(50));
    let before_second = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    run();
    let second = epoch();
    assert!(u128::from(second) >= before_second, "{first} then {second}");
}
