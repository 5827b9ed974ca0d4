//! A real Prometheus server scrapes `multiprom serve`: Debian's `prometheus`
//! package (installed when missing), scraping every second with its own
//! content negotiation (it asks for OpenMetrics first), must see the target
//! up with no scrape error and store every merged series, labels (with
//! escapes and non-ASCII) and values equal to what multiprom serves. And
//! Prometheus 3 (which asks for UTF-8 names: `escaping=allow-utf-8`) must
//! store from `multiprom serve` the series it stores from the application's
//! own endpoint (prometheus_client's, over the same directory).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::harness::{
    ensure_tool, free_port, python, python_script, run_python, target_dir, temp_dir,
};
use crate::serve::{fixture, serve};
use crate::spawned_server::{run_checker, Spawned, PATIENCE};
use crate::wheel_command::{made_once, run_checked};

/// A real Prometheus server scraping `target` (`host:port`) every second,
/// with `flags` (feature flags) added: the server, the port of its API, and
/// the directory holding its configuration and data (removed when dropped).
pub(crate) fn start_prometheus(target: &str, flags: &[&str]) -> (Spawned, u16, tempfile::TempDir) {
    let prometheus = ensure_tool("prometheus", "prometheus");
    start_prometheus_jobs(&prometheus, &[("multiprom", target)], flags)
}

/// The Prometheus server `binary` scraping each `(job, target)` every
/// second, with `flags` added; as [`start_prometheus`].
pub(crate) fn start_prometheus_jobs(
    binary: &Path,
    jobs: &[(&str, &str)],
    flags: &[&str],
) -> (Spawned, u16, tempfile::TempDir) {
    let work = temp_dir();
    let config = work.path().join("prometheus.yml");
    let mut text =
        String::from("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n");
    for (job, target) in jobs {
        text.push_str(&format!(
            "  - job_name: {job}\n    static_configs:\n      - targets: ['{target}']\n"
        ));
    }
    std::fs::write(&config, text).unwrap();
    let port = free_port();
    let mut cmd = Command::new(binary);
    cmd.arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            work.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .args(flags);
    (Spawned::start(cmd), port, work)
}

/// Prometheus 3: Debian's unstable package (stable Debian has 2.x),
/// fetched from the Debian archive this machine's apt uses
/// (`dist/debian-mirror.sh`) and unpacked under `target/` once.
pub(crate) fn prometheus_3() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let dir = target_dir().join("prometheus-3-debian-unstable");
        made_once(&dir, |tmp| {
            std::fs::create_dir_all(tmp).unwrap();
            let script = "set -eu\n\
                archive=$(sh \"$1\")\n\
                arch=$(dpkg --print-architecture)\n\
                file=$(curl -fsS --max-time 120 \"$archive/dists/sid/main/binary-$arch/Packages.xz\" \\\n\
                  | xz -d | awk '/^Package: prometheus$/ {p=1} p && /^Filename:/ {print $2; exit}')\n\
                test -n \"$file\"\n\
                curl -fsS --max-time 300 -o prometheus.deb \"$archive/$file\"\n\
                dpkg-deb -x prometheus.deb unpacked\n\
                rm prometheus.deb\n";
            let mirror = crate::harness::workspace_root().join("dist/debian-mirror.sh");
            run_checked(
                Command::new("sh")
                    .args(["-c", script, "sh"])
                    .arg(mirror)
                    .current_dir(tmp),
                "fetch and unpack Debian unstable's prometheus package (needs curl, xz, dpkg-deb)",
                PATIENCE * 10,
            );
        });
        let binary = dir.join("unpacked/usr/bin/prometheus");
        let version = Command::new(&binary).arg("--version").output().unwrap();
        let version = String::from_utf8_lossy(&version.stdout);
        assert!(
            version.starts_with("prometheus, version 3."),
            "not Prometheus 3: {version}"
        );
        binary
    })
}

/// The archive Debian's packages are fetched from is the one apt uses here,
/// whichever mirror that is, in either format of apt's sources.
#[test]
fn the_debian_archive_is_the_one_apt_uses() {
    let script = crate::harness::workspace_root().join("dist/debian-mirror.sh");
    let mirror = |apt: &Path| {
        let out = Command::new("sh").arg(&script).arg(apt).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let tmp = temp_dir();
    let deb822 = tmp.path().join("deb822");
    std::fs::create_dir_all(deb822.join("sources.list.d")).unwrap();
    std::fs::write(
        deb822.join("sources.list.d/debian.sources"),
        "Types: deb\nURIs: http://security.example.org/debian-security\nSuites: trixie-security\n\n\
         Types: deb-src\nURIs: http://src.example.org/debian\nSuites: trixie\n\n\
         Types: deb\nURIs: http://mirror.example.org/debian/ http://other.example.org/debian\nSuites: trixie trixie-updates\nComponents: main\n",
    )
    .unwrap();
    assert_eq!(
        mirror(&deb822),
        (Some(0), "http://mirror.example.org/debian\n".into())
    );
    let one_line = tmp.path().join("one-line");
    std::fs::create_dir_all(&one_line).unwrap();
    std::fs::write(
        one_line.join("sources.list"),
        "# a comment\ndeb http://security.example.org/debian-security bookworm-security main\n\
         deb [arch=amd64 signed-by=/k.gpg] http://ftp.example.org/debian bookworm main\n",
    )
    .unwrap();
    assert_eq!(
        mirror(&one_line),
        (Some(0), "http://ftp.example.org/debian\n".into())
    );
    let (code, printed) = mirror(&tmp.path().join("none"));
    assert_ne!(code, Some(0), "{printed}");
    // This machine's own.
    let (code, printed) = mirror(Path::new("/etc/apt"));
    assert_eq!(code, Some(0));
    assert!(printed.starts_with("http"), "{printed}");
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

#[test]
fn prometheus_3_stores_from_serve_what_it_stores_from_the_applications_own_endpoint() {
    let dir = temp_dir();
    run_python(
        "serve_python_answer.py",
        &["write"],
        &[("PROMETHEUS_MULTIPROC_DIR", dir.path())],
    );
    let (_server, addr) = serve(dir.path(), &[]);
    let mut app = Command::new(python());
    app.arg(python_script("serve_python_answer.py"))
        .arg("serve")
        .arg(dir.path());
    let mut app = Spawned::start(app);
    let app_addr = app.address().to_string();
    let (prometheus, port, _work) = start_prometheus_jobs(
        prometheus_3(),
        &[("multiprom", &addr.to_string()), ("application", &app_addr)],
        &[],
    );
    let names = run_checker(
        &prometheus,
        "prometheus_jobs_check.py",
        &[
            format!("http://127.0.0.1:{port}").as_ref(),
            "multiprom".as_ref(),
            "application".as_ref(),
        ],
    );
    // UTF-8 names: a `:` kept in OpenMetrics sample names, the others as
    // they are.
    for name in [
        "vllm:num_requests_running",
        "vllm:prompt_tokens_total",
        "vllm:e2e_request_latency_seconds_bucket",
        "caf\u{e9}_orders_total",
    ] {
        assert!(names.lines().any(|line| line == name), "{name}: {names}");
    }
}
