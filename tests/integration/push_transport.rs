//! How pushes travel: TLS with a private CA (`--push.ca-file`) and without
//! it (refused, logged once), a bearer token read again after it rotates,
//! basic authentication and extra headers, as a receiver
//! (tests/python/push_sink.py, HTTPS through Python's ssl) sees them.

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

/// The sink, listening (over TLS with `tls`): the process, its port, its log.
fn sink(dir: &Path, tls: Option<(&Path, &Path)>) -> (Spawned, u16, PathBuf) {
    let port_file = dir.join("port");
    let log = dir.join("requests.jsonl");
    let mut cmd = Command::new(python());
    cmd.arg(python_script("push_sink.py"))
        .arg(&port_file)
        .arg(&log);
    if let Some((cert, key)) = tls {
        cmd.arg("--tls").arg(cert).arg(key);
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
    let (_sink, port, log) = sink(work.path(), Some((&cert, &key)));
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
    let (_sink, port, log) = sink(work.path(), Some((&cert, &key)));
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
    let (_sink, port, log) = sink(work.path(), None);
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
