//! `multiprom serve`: real HTTP round trips against the real binary on
//! 127.0.0.1, with directories written by the real `prometheus_client`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::Signal;
use serde_json::Value;

use crate::harness::{multiprom, python, run_python, temp_dir};
use crate::http_client::{get, gunzip, request};
use crate::spawned_server::{Spawned, PATIENCE};

pub(crate) const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// The answer to an OpenMetrics range naming version 1.0.0 and no
/// escaping ([`PROMETHEUS_ACCEPT`]), as `prometheus_client` names it.
pub(crate) const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores";
/// What Prometheus sends when it prefers OpenMetrics.
pub(crate) const PROMETHEUS_ACCEPT: &str =
    "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1";

/// The self-metric families, in output order (text 0.0.4 names).
const SELF_FAMILIES: [&str; 14] = [
    "multiprom_scrape_duration_seconds",
    "multiprom_scrape_files",
    "multiprom_scrape_read_bytes",
    "multiprom_scrape_series",
    "multiprom_scrapes_total",
    "multiprom_reaped_files_total",
    "multiprom_build_info",
    "multiprom_directory_listable",
    "process_cpu_seconds_total",
    "process_open_fds",
    "process_max_fds",
    "process_virtual_memory_bytes",
    "process_resident_memory_bytes",
    "process_start_time_seconds",
];

/// A directory written by three real Python worker processes (now dead).
pub(crate) fn fixture() -> tempfile::TempDir {
    let dir = temp_dir();
    run_python(
        "serve_fixture.py",
        &[],
        &[("PROMETHEUS_MULTIPROC_DIR", dir.path())],
    );
    dir
}

/// Starts `multiprom serve --dir DIR --listen 127.0.0.1:0 EXTRA...`.
pub(crate) fn serve(dir: &Path, extra: &[&str]) -> (Spawned, SocketAddr) {
    let mut cmd = multiprom();
    cmd.arg("serve")
        .arg("--dir")
        .arg(dir)
        .args(["--listen", "127.0.0.1:0"])
        .args(extra);
    let mut server = Spawned::start(cmd);
    let addr = server.address();
    (server, addr)
}

/// Splits an exposition into families (each starts at `# HELP`); `# EOF` is
/// dropped.
pub(crate) fn split_families(text: &str) -> Vec<String> {
    let mut families: Vec<String> = Vec::new();
    for line in text.lines() {
        if line == "# EOF" {
            continue;
        }
        if line.starts_with("# HELP ") || families.is_empty() {
            families.push(String::new());
        }
        let family = families.last_mut().unwrap();
        family.push_str(line);
        family.push('\n');
    }
    families
}

fn family_name(block: &str) -> &str {
    block
        .strip_prefix("# HELP ")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or("")
}

/// (worker families, self-metric families) of an exposition.
pub(crate) fn partition_self(text: &str) -> (Vec<String>, Vec<String>) {
    split_families(text).into_iter().partition(|f| {
        let name = family_name(f);
        !name.starts_with("multiprom_") && !name.starts_with("process_")
    })
}

/// Python's parser's view of `body`: `[[name, type, [[sample, labels, value]...]]...]`.
pub(crate) fn python_parse(body: &str, format: &str) -> Value {
    let dir = temp_dir();
    let file = dir.path().join("exposition.txt");
    std::fs::write(&file, body).unwrap();
    let out = run_python("serve_parse.py", &[file.to_str().unwrap(), format], &[]);
    serde_json::from_slice(&out).unwrap()
}

/// The value of the sample `name` with `labels` in a parsed exposition.
pub(crate) fn sample_value(parsed: &Value, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    parsed.as_array()?.iter().find_map(|family| {
        family[2].as_array()?.iter().find_map(|s| {
            let matches = s[0] == name
                && s[1].as_object().is_some_and(|l| {
                    l.len() == labels.len()
                        && labels
                            .iter()
                            .all(|(k, v)| l.get(*k) == Some(&Value::from(*v)))
                });
            matches.then(|| s[2].as_f64()).flatten()
        })
    })
}

fn db_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".db"))
        .collect();
    names.sort();
    names
}

fn python_exposition(dir: &Path, format: &str) -> String {
    String::from_utf8(run_python(
        "serve_python_exposition.py",
        &[dir.to_str().unwrap(), format],
        &[],
    ))
    .unwrap()
}

/// What `prometheus_client`'s `make_wsgi_app` answers `accept` with over
/// `dir`: (Content-Type, body).
fn python_answer(dir: &Path, accept: &str) -> (String, String) {
    let out = run_python(
        "serve_python_answer.py",
        &["answer", dir.to_str().unwrap(), accept],
        &[],
    );
    let out = String::from_utf8(out).unwrap();
    let (content_type, body) = out.split_once('\n').unwrap();
    (content_type.to_owned(), body.to_owned())
}

// Prometheus 3 asks for `escaping=allow-utf-8`, under which a `:` stays in
// OpenMetrics sample names (`vllm:num_requests_running`, not
// `vllm_num_requests_running` as under the default `underscores`) and
// other names are quoted: series named as the application's own endpoint
// names them. Each header gets prometheus_client's Content-Type and body.
#[test]
fn each_escaping_scheme_answers_as_prometheus_client_does() {
    let dir = temp_dir();
    run_python(
        "serve_python_answer.py",
        &["write"],
        &[("PROMETHEUS_MULTIPROC_DIR", dir.path())],
    );
    let (server, addr) = serve(dir.path(), &[]);
    let prometheus_3 = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
    let cases = [
        prometheus_3,
        PROMETHEUS_ACCEPT,
        "text/plain;version=1.0.0;escaping=allow-utf-8",
        "text/plain;version=1.0.0;escaping=dots",
        "application/openmetrics-text;version=1.0.0;escaping=values",
        "text/plain;version=0.0.4",
        "application/openmetrics-text",
        // Read as prometheus_client reads them: text from version 1.0.0
        // on, the first escaping of a range, an empty version as none, a
        // byte that is not ASCII in another parameter.
        "text/plain;version=2.0.0;escaping=allow-utf-8",
        "application/openmetrics-text;version=1.0.0;escaping=dots;escaping=allow-utf-8",
        "application/openmetrics-text;version=",
        "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;x=\u{fc}",
    ];
    for accept in cases {
        let response = get(addr, "/metrics", &[("Accept", accept)]);
        assert_eq!(response.status, 200, "{accept}");
        let (content_type, python) = python_answer(dir.path(), accept);
        assert_eq!(
            response.header("content-type"),
            Some(content_type.as_str()),
            "{accept}"
        );
        let body = response.text();
        let (workers, _) = partition_self(&body);
        let python_body = python.strip_suffix("# EOF\n").unwrap_or(&python);
        assert_eq!(workers, split_families(python_body), "{accept}");
        assert!(
            body.starts_with(python_body),
            "{accept}: not a byte-exact prefix"
        );
    }
    // A header sent on two lines is one list, as its lines joined.
    let (first, second) = (
        "text/plain;version=0.0.4",
        "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8",
    );
    let response = get(
        addr,
        "/metrics",
        &[
            ("Accept", first),
            ("Accept", second),
            ("Accept-Encoding", "identity"),
            ("Accept-Encoding", "gzip"),
        ],
    );
    let (content_type, _) = python_answer(dir.path(), &format!("{first},{second}"));
    assert_eq!(response.header("content-type"), Some(content_type.as_str()));
    assert_eq!(response.header("content-encoding"), Some("gzip"));
    let body = get(addr, "/metrics", &[("Accept", prometheus_3)]).text();
    assert!(
        body.contains("\nvllm:num_requests_running{\"model.name\"=\"m\"} 2.0\n"),
        "{body}"
    );
    assert!(
        body.contains("\n{\"caf\u{e9}_orders_total\"} 1.0\n"),
        "{body}"
    );
    drop(server);
}

#[test]
fn metrics_equal_python_in_both_formats_and_parse() {
    let dir = fixture();
    let files = db_files(dir.path()).len();
    assert_eq!(files, 3 * 13, "fixture: 3 workers x 13 files");
    let (server, addr) = serve(dir.path(), &[]);
    let cases = [
        ("text", None, PROMETHEUS_CONTENT_TYPE),
        (
            "openmetrics",
            Some(PROMETHEUS_ACCEPT),
            OPENMETRICS_CONTENT_TYPE,
        ),
    ];
    for (format, accept, content_type) in cases {
        let headers: Vec<(&str, &str)> = accept.map(|a| ("Accept", a)).into_iter().collect();
        let response = get(addr, "/metrics", &headers);
        assert_eq!(response.status, 200, "{format}");
        assert_eq!(response.header("content-type"), Some(content_type));
        let body = response.text();
        let python = python_exposition(dir.path(), format);

        // Family by family first (readable failures), then byte for byte.
        let (workers, own) = partition_self(&body);
        let theirs = split_families(&python);
        assert_eq!(workers.len(), 14, "{format}: 14 worker families");
        assert_eq!(workers.len(), theirs.len(), "{format}");
        for (ours, theirs) in workers.iter().zip(&theirs) {
            assert_eq!(ours, theirs, "{format}: family differs from Python's");
        }
        let python_body = python.strip_suffix("# EOF\n").unwrap_or(&python);
        assert!(
            body.starts_with(python_body),
            "{format}: not a byte-exact prefix"
        );

        // Self-metrics after the workers', one # EOF at the very end.
        let own_names: Vec<&str> = own.iter().map(|f| family_name(f)).collect();
        let expected_names: Vec<String> = SELF_FAMILIES
            .iter()
            .map(|n| match format {
                "text" => (*n).to_owned(),
                _ => n.trim_end_matches("_total").to_owned(),
            })
            .collect();
        assert_eq!(own_names, expected_names, "{format}");
        if format == "openmetrics" {
            assert!(body.ends_with("\n# EOF\n"), "{format}");
            assert_eq!(body.matches("# EOF").count(), 1, "{format}");
        } else {
            assert!(!body.contains("# EOF"), "{format}");
            assert!(!body.contains("# UNIT"), "{format}");
        }

        // The whole output parses with Python's own parser for the format.
        let parsed = python_parse(&body, format);
        let families = parsed.as_array().unwrap();
        assert_eq!(families.len(), 14 + SELF_FAMILIES.len(), "{format}");
        assert_eq!(
            sample_value(&parsed, "multiprom_scrape_files", &[("state", "ok")]),
            Some(files as f64),
            "{format}"
        );
        assert_eq!(
            sample_value(&parsed, "multiprom_scrape_files", &[("state", "bad")]),
            Some(0.0)
        );
        // Every worker sample line: 2 counter, 26 gauge, 12 histogram,
        // 2 summary, 1 unicode counter.
        let worker_samples: usize = workers
            .iter()
            .map(|f| f.lines().filter(|l| !l.starts_with('#')).count())
            .sum();
        assert_eq!(worker_samples, 43, "{format}");
        assert_eq!(
            sample_value(&parsed, "multiprom_scrape_series", &[]),
            Some(43.0),
            "{format}"
        );
        assert!(
            sample_value(&parsed, "multiprom_scrape_read_bytes", &[]).is_some_and(|v| v > 0.0),
            "{format}"
        );
        assert!(
            sample_value(&parsed, "multiprom_scrape_duration_seconds", &[])
                .is_some_and(|v| v >= 0.0),
            "{format}"
        );
        assert!(
            sample_value(&parsed, "multiprom_scrapes_total", &[("result", "ok")])
                .is_some_and(|v| v >= 1.0)
        );
        assert_eq!(
            sample_value(&parsed, "multiprom_reaped_files_total", &[]),
            Some(0.0)
        );
        assert_eq!(
            sample_value(
                &parsed,
                "multiprom_build_info",
                &[("version", env!("CARGO_PKG_VERSION"))]
            ),
            Some(1.0)
        );
        // multiprom's own process, as every exporter reports it.
        let server_pid = server.pid();
        let rss = std::fs::read_to_string(format!("/proc/{server_pid}/statm")).unwrap();
        let pages: f64 = rss.split(' ').nth(1).unwrap().parse().unwrap();
        let reported = sample_value(&parsed, "process_resident_memory_bytes", &[]).unwrap();
        assert!(
            reported > pages * 4096.0 / 4.0 && reported < pages * 4096.0 * 4.0,
            "{format}: rss {reported} vs {pages} pages"
        );
        let started = sample_value(&parsed, "process_start_time_seconds", &[]).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(
            started > now - 600.0 && started <= now + 1.0,
            "{format}: {started}"
        );
        assert!(sample_value(&parsed, "process_open_fds", &[]).is_some_and(|v| v >= 3.0));
        assert!(sample_value(&parsed, "process_max_fds", &[]).is_some_and(|v| v >= 3.0));
        assert!(sample_value(&parsed, "process_cpu_seconds_total", &[]).is_some_and(|v| v >= 0.0));
        assert!(sample_value(&parsed, "process_virtual_memory_bytes", &[])
            .is_some_and(|v| v > reported));
    }
}

#[test]
fn gzip_head_405_404_and_406() {
    let dir = fixture();
    let (_server, addr) = serve(dir.path(), &[]);
    let plain = get(addr, "/metrics", &[]);
    assert_eq!(plain.status, 200);
    assert_eq!(plain.header("content-encoding"), None);
    assert_eq!(plain.header("vary"), Some("Accept, Accept-Encoding"));
    let (workers, _) = partition_self(&plain.text());

    for (accept, encoding, content_type) in [
        (None, "gzip", PROMETHEUS_CONTENT_TYPE),
        (
            Some(PROMETHEUS_ACCEPT),
            "deflate, gzip;q=0.5",
            OPENMETRICS_CONTENT_TYPE,
        ),
        (None, "*", PROMETHEUS_CONTENT_TYPE),
    ] {
        let mut headers = vec![("Accept-Encoding", encoding)];
        headers.extend(accept.map(|a| ("Accept", a)));
        let zipped = get(addr, "/metrics", &headers);
        assert_eq!(zipped.status, 200);
        assert_eq!(
            zipped.header("content-encoding"),
            Some("gzip"),
            "{encoding}"
        );
        assert_eq!(zipped.header("content-type"), Some(content_type));
        let text = gunzip(&zipped.body);
        if content_type == PROMETHEUS_CONTENT_TYPE {
            assert_eq!(partition_self(&text).0, workers);
        } else {
            assert!(text.ends_with("# EOF\n"));
        }
    }
    for refused in ["gzip;q=0", "gzip;q=0, *", "identity", "br"] {
        let response = get(addr, "/metrics", &[("Accept-Encoding", refused)]);
        assert_eq!(response.status, 200);
        assert_eq!(response.header("content-encoding"), None, "{refused}");
        assert_eq!(partition_self(&response.text()).0, workers);
    }

    // Text preferred by q-value, OpenMetrics refused with q=0.
    for accept in [
        "application/openmetrics-text;version=1.0.0;q=0.2,text/plain;version=0.0.4;q=0.9",
        "application/openmetrics-text;q=0, */*",
    ] {
        let response = get(addr, "/metrics", &[("Accept", accept)]);
        assert_eq!(
            response.header("content-type"),
            Some(PROMETHEUS_CONTENT_TYPE),
            "{accept}"
        );
    }
    let refused = get(
        addr,
        "/metrics",
        &[("Accept", "text/plain;q=0, application/openmetrics-text;q=0")],
    );
    assert_eq!(refused.status, 406);

    // HEAD: the headers of GET, no body (the client checks there is none).
    let head = request(addr, "HEAD", "/metrics", &[]);
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-type"), Some(PROMETHEUS_CONTENT_TYPE));
    let length: usize = head.header("content-length").unwrap().parse().unwrap();
    assert!(length > 1000, "{length}");
    let head_page = request(addr, "HEAD", "/", &[]);
    assert_eq!(head_page.status, 200);
    assert_eq!(
        head_page.header("content-type"),
        Some("text/html; charset=utf-8")
    );

    for (method, path) in [
        ("POST", "/metrics"),
        ("PUT", "/metrics"),
        ("DELETE", "/"),
        ("PATCH", "/"),
    ] {
        let response = request(addr, method, path, &[("Content-Length", "0")]);
        assert_eq!(response.status, 405, "{method} {path}");
        let allow = response.header("allow").unwrap_or_default();
        assert!(allow.contains("GET") && allow.contains("HEAD"), "{allow}");
    }
    for path in ["/nope", "/metrics/extra", "/metricsx", "/index.html"] {
        let response = get(addr, path, &[]);
        assert_eq!(response.status, 404, "{path}");
        assert!(response.text().contains("/metrics"));
    }
}

#[test]
fn status_page_shows_every_file_escaped() {
    let dir = fixture();
    crate::harness::write_aged(&dir.path().join("counter_99.db"), b"");
    // A valid file whose (custom) id needs escaping.
    let gauge = db_files(dir.path())
        .into_iter()
        .find(|n| n.starts_with("gauge_all_"))
        .unwrap();
    std::fs::copy(
        dir.path().join(&gauge),
        dir.path().join("gauge_all_<b>&x\".db"),
    )
    .unwrap();
    let (_server, addr) = serve(dir.path(), &[]);
    let page = get(addr, "/", &[]);
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let html = page.text();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<a href=\"/metrics\">/metrics</a>"));
    assert!(!html.contains("src=") && !html.contains("<script") && !html.contains("<link"));
    assert_eq!(
        html.matches("<tr class=").count(),
        db_files(dir.path()).len()
    );
    // One page: the file table is open.
    assert!(html.contains("<details id=\"files\" open>"), "{html}");
    assert!(html.contains("&lt;b&gt;&amp;x&quot;"), "{html}");
    assert!(!html.contains("<b>&x"), "{html}");
    let bad_row = html
        .lines()
        .find(|l| l.starts_with("<tr class=") && l.contains("counter_99.db"))
        .expect("row of the bad file");
    assert!(bad_row.starts_with("<tr class=\"bad\">"), "{bad_row}");
    assert!(bad_row.contains("offset 0: 0-byte file"), "{bad_row}");
    let livesum_row = html.lines().find(|l| l.contains("gauge_livesum_")).unwrap();
    // type, gauge mode, id, writer (the fixture's workers exited: nobody
    // holds their files).
    assert!(
        livesum_row.contains("<td>gauge</td><td>livesum</td>"),
        "{livesum_row}"
    );
    assert!(livesum_row.contains("<td>gone</td>"), "{livesum_row}");
    assert!(html.contains(&format!(
        "{} files: {} ok, 1 bad",
        db_files(dir.path()).len(),
        db_files(dir.path()).len() - 1
    )));
}

#[test]
fn stalled_client_does_not_block_others_and_is_cut_off() {
    let dir = fixture();
    let (_server, addr) = serve(dir.path(), &["--header-read-timeout", "300ms"]);
    // Half a request, then silence (slowloris).
    let mut stalled = TcpStream::connect(addr).unwrap();
    stalled
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    let mut idle = TcpStream::connect(addr).unwrap();
    // Others are served meanwhile.
    for _ in 0..3 {
        assert_eq!(get(addr, "/metrics", &[]).status, 200);
    }
    // The server closes both connections (after the header timeout) instead
    // of waiting forever; our read gives up only after PATIENCE.
    for stream in [&mut stalled, &mut idle] {
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut rest = Vec::new();
        match stream.read_to_end(&mut rest) {
            Ok(_) => {}
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
        }
    }
}

fn zombie_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..].chars().next()
}

/// The exposition Python serves for `dir` with `leave_out` files removed
/// (what the directory looks like after `mark_process_dead` ran for them).
fn python_exposition_without(dir: &Path, leave_out: &[String]) -> String {
    let mut args = vec![dir.to_str().unwrap(), "text"];
    args.extend(leave_out.iter().map(String::as_str));
    String::from_utf8(run_python("serve_python_exposition.py", &args, &[])).unwrap()
}

#[test]
fn reap_dead_retires_dead_live_gauges_at_once_and_removes_them_after_the_grace() {
    let dir = fixture();
    let names = db_files(dir.path());
    let livesum = names
        .iter()
        .find(|n| n.starts_with("gauge_livesum_"))
        .unwrap();
    let counter = names.iter().find(|n| n.starts_with("counter_")).unwrap();
    // A live writer (it maps its files, as prometheus_client's writer
    // does, once they are there) and a zombie (exited, not waited for yet).
    let mut live = Command::new(python())
        .args([
            "-c",
            "import mmap, os, sys\n\
d = sys.stdin.readline().strip()\n\
files = [open(os.path.join(d, f'{k}_{os.getpid()}.db'), 'r+b') for k in ('gauge_livesum', 'counter')]\n\
keep = [mmap.mmap(f.fileno(), 0) for f in files]\n\
print('ready', flush=True); sys.stdin.read()",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut zombie = Command::new("true").spawn().unwrap();
    let deadline = Instant::now() + PATIENCE;
    while zombie_state(zombie.id()) != Some('Z') {
        assert!(Instant::now() < deadline, "child never became a zombie");
        std::thread::sleep(Duration::from_millis(5));
    }
    for pid in [live.id(), zombie.id()] {
        std::fs::copy(
            dir.path().join(livesum),
            dir.path().join(format!("gauge_livesum_{pid}.db")),
        )
        .unwrap();
        std::fs::copy(
            dir.path().join(counter),
            dir.path().join(format!("counter_{pid}.db")),
        )
        .unwrap();
    }
    {
        let mut stdin = live.stdin.take().unwrap();
        writeln!(stdin, "{}", dir.path().display()).unwrap();
        live.stdin = Some(stdin);
        let mut ready = String::new();
        std::io::BufReader::new(live.stdout.as_mut().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert_eq!(ready.trim(), "ready");
    }
    let before = db_files(dir.path());
    let dead_live_gauges: Vec<String> = before
        .iter()
        .filter(|name| name.starts_with("gauge_live"))
        .filter(|name| !name.ends_with(&format!("_{}.db", live.id())))
        .cloned()
        .collect();
    // 3 dead workers x 5 live modes, plus the zombie's file.
    assert_eq!(dead_live_gauges.len(), 16);
    let expected_output = split_families(&python_exposition_without(dir.path(), &dead_live_gauges));
    assert!(expected_output
        .iter()
        .any(|f| f.contains("# HELP g_livesum ")));

    // Without --reap-dead nothing is removed or left out.
    let (mut server, addr) = serve(dir.path(), &[]);
    let (workers, _) = partition_self(&get(addr, "/metrics", &[]).text());
    assert_eq!(
        workers,
        split_families(&python_exposition(dir.path(), "text"))
    );
    assert_ne!(workers, expected_output);
    assert_eq!(db_files(dir.path()), before);
    server.signal(Signal::TERM);
    server.wait();

    // With it, the dead processes' live gauges leave the output at once
    // (the output equals Python's after mark_process_dead), but the files
    // stay for the grace period, so an application's own hook never finds
    // them gone under its feet.
    let (mut server, addr) = serve(dir.path(), &["--reap-dead"]);
    let body = get(addr, "/metrics", &[]).text();
    let (workers, _) = partition_self(&body);
    assert_eq!(workers, expected_output);
    assert!(
        body.contains("multiprom_reaped_files_total 0.0\n"),
        "{body}"
    );
    assert_eq!(db_files(dir.path()), before);
    server.signal(Signal::TERM);
    server.wait();

    // With no grace, the files of processes that are gone are removed
    // (before the first scrape is answered: the maintainer's first pass
    // comes before serving); the zombie's stays until its parent collects
    // it (that is when gunicorn runs its child_exit hook), then it goes
    // too, at the maintainer's next pass.
    let (mut server, addr) = serve(
        dir.path(),
        &[
            "--reap-dead",
            "--reap-grace",
            "0s",
            "--reap-interval",
            "50ms",
        ],
    );
    let body = get(addr, "/metrics", &[]).text();
    assert!(
        body.contains("multiprom_reaped_files_total 15.0\n"),
        "{body}"
    );
    let zombie_file = format!("gauge_livesum_{}.db", zombie.id());
    let mut expected_files: Vec<String> = before
        .iter()
        .filter(|name| !dead_live_gauges.contains(name) || **name == zombie_file)
        .cloned()
        .collect();
    assert_eq!(db_files(dir.path()), expected_files);
    let (workers, _) = partition_self(&body);
    assert_eq!(workers, expected_output);

    zombie.wait().unwrap();
    // Removing is the maintainer's work, not the scrape's: scrape until it
    // has made its next pass.
    let deadline = Instant::now() + PATIENCE;
    let body = loop {
        let body = get(addr, "/metrics", &[]).text();
        if !body.contains("multiprom_reaped_files_total 15.0\n") || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        body.contains("multiprom_reaped_files_total 16.0\n"),
        "{body}"
    );
    expected_files.retain(|name| *name != zombie_file);
    assert_eq!(db_files(dir.path()), expected_files);
    let (workers, _) = partition_self(&body);
    assert_eq!(workers, expected_output);
    let stderr = server.wait_for_stderr(&format!("process {} is gone", zombie.id()));
    assert!(!stderr.contains(&format!("process {} is gone", live.id())));
    drop(live.stdin.take());
    live.wait().unwrap();
}

#[test]
fn startup_errors_are_one_line_and_exit_2() {
    let dir = temp_dir();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_addr = taken.local_addr().unwrap().to_string();
    let missing = dir.path().join("missing");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--dir".into(), missing.to_str().unwrap().into()],
            "no such directory",
        ),
        (
            vec![
                "--dir".into(),
                dir.path().to_str().unwrap().into(),
                "--listen".into(),
                "nonsense".into(),
            ],
            "invalid --listen address \"nonsense\"",
        ),
        (
            vec![
                "--dir".into(),
                dir.path().to_str().unwrap().into(),
                "--listen".into(),
                "127.0.0.1:70000".into(),
            ],
            "invalid --listen address \"127.0.0.1:70000\": port \"70000\" is not a number from 0 to 65535",
        ),
        (
            vec![
                "--dir".into(),
                dir.path().to_str().unwrap().into(),
                "--listen".into(),
                "no-such-host.invalid:9478".into(),
            ],
            "invalid --listen address \"no-such-host.invalid:9478\": cannot resolve host \"no-such-host.invalid\": ",
        ),
        (
            vec![
                "--dir".into(),
                dir.path().to_str().unwrap().into(),
                "--listen".into(),
                taken_addr.clone(),
            ],
            "address already in use",
        ),
        (
            vec![],
            "no directory: pass --dir DIR or set PROMETHEUS_MULTIPROC_DIR",
        ),
    ];
    for (args, message) in cases {
        let out = multiprom().arg("serve").args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_lowercase();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("multiprom serve: "), "{stderr}");
        assert!(
            stderr.contains(&message.to_lowercase()),
            "{args:?}: {stderr}"
        );
    }
    drop(taken);
}

#[test]
fn sigint_and_sigterm_shut_down_gracefully_with_exit_0() {
    let dir = fixture();
    for (signal, name) in [(Signal::TERM, "SIGTERM"), (Signal::INT, "SIGINT")] {
        let (mut server, addr) = serve(dir.path(), &[]);
        assert_eq!(get(addr, "/metrics", &[]).status, 200);
        server.signal(signal);
        let (status, stderr) = server.wait();
        assert_eq!(status.code(), Some(0), "{name}: {stderr}");
        assert!(
            stderr.contains(&format!("{name}: shutting down")),
            "{stderr}"
        );
        assert!(
            TcpStream::connect(addr).is_err(),
            "still listening after {name}"
        );
    }
}

#[test]
fn listens_on_ipv6_loopback_when_the_machine_has_it() {
    let dir = fixture();
    let ipv6 = TcpListener::bind("[::1]:0").is_ok();
    let mut cmd = multiprom();
    cmd.arg("serve")
        .arg("--dir")
        .arg(dir.path())
        .args(["--listen", "[::1]:0"]);
    if ipv6 {
        let mut server = Spawned::start(cmd);
        let addr = server.address();
        assert!(addr.is_ipv6(), "{addr}");
        assert_eq!(get(addr, "/metrics", &[]).status, 200);
    } else {
        // No IPv6 here: the failure must still be one clear line and exit 2.
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("cannot listen on [::1]:0"));
    }
}

#[test]
fn rust_log_filters_and_each_warning_is_logged_once() {
    let dir = fixture();
    crate::harness::write_aged(&dir.path().join("counter_99.db"), b"");
    // Find a free port, then let multiprom take it (RUST_LOG=warn hides the
    // start line that would tell us a port-0 address).
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut cmd = multiprom();
    cmd.env("RUST_LOG", "warn")
        .arg("serve")
        .arg("--dir")
        .arg(dir.path())
        .args(["--listen", &addr.to_string()]);
    let mut server = Spawned::start(cmd);
    let deadline = Instant::now() + PATIENCE;
    while TcpStream::connect(addr).is_err() {
        assert!(
            Instant::now() < deadline,
            "never listened: {}",
            server.stderr()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    for _ in 0..3 {
        assert_eq!(get(addr, "/metrics", &[]).status, 200);
    }
    server.signal(Signal::TERM);
    let (status, stderr) = server.wait();
    assert_eq!(status.code(), Some(0));
    assert_eq!(
        stderr
            .matches("counter_99.db: offset 0: 0-byte file")
            .count(),
        1,
        "{stderr}"
    );
    assert!(
        !stderr.contains(" INFO "),
        "RUST_LOG=warn ignored: {stderr}"
    );
}

#[test]
fn worker_process_metrics_join_the_workers_pid_label() {
    let dir = temp_dir();
    let control = temp_dir();
    let mut worker = Command::new(crate::harness::python());
    worker
        .arg(crate::harness::python_script("serve_live_worker.py"))
        .arg(control.path())
        .env("PROMETHEUS_MULTIPROC_DIR", dir.path());
    let worker = worker.spawn().unwrap();
    // Stop the worker however the test ends.
    struct Stop<'a>(std::process::Child, &'a Path);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            let _ = std::fs::write(self.1.join("stop"), b"");
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let worker = Stop(worker, control.path());
    let deadline = Instant::now() + PATIENCE;
    let pid = loop {
        if let Ok(pid) = std::fs::read_to_string(control.path().join("ready")) {
            break pid;
        }
        assert!(Instant::now() < deadline, "the worker never got ready");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(pid, worker.0.id().to_string());

    let (_plain, addr) = serve(dir.path(), &[]);
    let body = get(addr, "/metrics", &[]).text();
    assert!(
        !body.contains("multiprom_worker_process"),
        "opt-in only:\n{body}"
    );

    let (_server, addr) = serve(dir.path(), &["--worker-process-metrics"]);
    let body = get(addr, "/metrics", &[]).text();
    let parsed = python_parse(&body, "text");
    let label = [("pid", pid.as_str())];
    assert_eq!(
        sample_value(&parsed, "worker_busy", &label),
        Some(1.0),
        "{body}"
    );
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).unwrap();
    let pages: f64 = statm.split(' ').nth(1).unwrap().parse().unwrap();
    let rss = sample_value(
        &parsed,
        "multiprom_worker_process_resident_memory_bytes",
        &label,
    )
    .unwrap_or_else(|| panic!("no rss for pid {pid}:\n{body}"));
    assert!(
        rss > pages * 4096.0 / 4.0 && rss < pages * 4096.0 * 4.0,
        "rss {rss} vs {pages} pages"
    );
    assert!(
        sample_value(
            &parsed,
            "multiprom_worker_process_cpu_seconds_total",
            &label
        )
        .is_some_and(|v| v > 0.0),
        "{body}"
    );
    assert!(
        sample_value(
            &parsed,
            "multiprom_worker_process_start_time_seconds",
            &label
        )
        .is_some(),
        "{body}"
    );
    assert!(body.contains("# TYPE multiprom_worker_process_cpu_seconds_total counter\n"));

    // Gone: its series go too (its files stay; the gauge is liveall but
    // nothing reaps here).
    drop(worker);
    let deadline = Instant::now() + PATIENCE;
    loop {
        let body = get(addr, "/metrics", &[]).text();
        if !body.contains(&format!(
            "multiprom_worker_process_resident_memory_bytes{{pid=\"{pid}\"}}"
        )) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a dead worker's process metrics stayed:\n{body}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
