//! `--log.level` and `--log.format` of the long-running commands, and the
//! debug lines that explain a scrape.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::multiprom;
use crate::http_client::get;
use crate::serve::fixture;
use crate::spawned_server::Spawned;

fn serve_with(dir: &std::path::Path, flags: &[&str], rust_log: Option<&str>) -> Spawned {
    let mut cmd = multiprom();
    cmd.arg("serve")
        .arg("--dir")
        .arg(dir)
        .args(["--listen", "127.0.0.1:0"])
        .args(flags);
    match rust_log {
        Some(filter) => cmd.env("RUST_LOG", filter),
        None => cmd.env_remove("RUST_LOG"),
    };
    Spawned::start(cmd)
}

#[test]
fn json_lines_at_debug_explain_each_scrape() {
    let dir = fixture();
    let mut server = serve_with(
        dir.path(),
        &["--log.format", "json", "--log.level", "debug"],
        None,
    );
    let addr = server.address();
    assert_eq!(get(addr, "/metrics", &[]).status, 200);
    let log = server.wait_for_stderr("scrape 1: listed 39 *.db files in ");
    for line in log.lines() {
        let object: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
        assert!(object["level"].is_string(), "{line}");
        assert!(object["fields"]["message"].is_string(), "{line}");
    }
    let summary = log
        .lines()
        .find(|l| l.contains("scrape 1: listed"))
        .unwrap();
    // serve collected twice before it answered (a warm start), and nobody
    // holds the fixture's files: they are settled, the plan is made.
    assert!(
        summary.contains(
            "read 39 ok (39 of them settled: writer gone, left unread), skipped 0 bad and 0 vanished"
        ),
        "{summary}"
    );
    assert!(summary.contains("\"level\":\"DEBUG\""), "{summary}");
    assert!(
        summary.contains("merge plan reused; looked only at files the directory watch named"),
        "{summary}"
    );
    // Nothing changed: the second scrape reuses the plan.
    assert_eq!(get(addr, "/metrics", &[]).status, 200);
    let log = server.wait_for_stderr("scrape 2: listed 39 *.db files in ");
    let second = log
        .lines()
        .find(|l| l.contains("scrape 2: listed"))
        .unwrap();
    assert!(second.contains("merge plan reused"), "{second}");
}

#[test]
fn logfmt_and_the_flag_wins_over_rust_log() {
    let dir = fixture();
    // A damaged file, so a skipped file is logged at debug and warn.
    std::fs::write(dir.path().join("counter_999999.db"), b"damaged").unwrap();
    let mut server = serve_with(
        dir.path(),
        &["--log.format", "logfmt", "--log.level", "debug"],
        Some("error"),
    );
    let addr = server.address();
    get(addr, "/metrics", &[]);
    let log = server.wait_for_stderr("skipped (bad): ");
    for line in log.lines() {
        assert!(line.starts_with("ts="), "{line}");
        assert!(line.contains(" level="), "{line}");
    }
    assert!(log.contains("level=info message=\"serving "), "{log}");
    assert!(
        log.contains("level=debug message=\"skipped (bad): "),
        "{log}"
    );
    assert!(log.contains("counter_999999.db"), "{log}");
    // logfmt has no escaped apostrophe.
    let log = server.wait_for_stderr("left out as exited processes");
    assert!(log.contains("processes' live gauges"), "{log}");

    // --log.level warn: no info lines (so no start line; the address is
    // not needed here).
    drop(server);
    let mut quiet = serve_with(dir.path(), &["--log.level", "warn"], Some("debug"));
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(quiet.try_wait().is_none(), "{}", quiet.stderr());
    assert!(!quiet.stderr().contains("INFO"), "{}", quiet.stderr());
}

/// A file name is anyone's text: one holding a line break (and a forged log
/// line after it) stays inside its own line, escaped, in the text log and
/// on `scrape`'s stderr.
#[test]
fn a_file_name_cannot_forge_a_log_line() {
    let dir = crate::harness::temp_dir();
    let forged = "counter_9\n2026-01-01T00:00:00.000000Z  INFO forged line.db";
    std::fs::write(dir.path().join(forged), b"abcd").unwrap();
    let escaped = "counter_9\\n2026-01-01T00:00:00.000000Z  INFO forged line.db";
    let scraped = multiprom()
        .args(["scrape", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8(scraped.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(escaped), "{stderr}");
    let mut server = serve_with(dir.path(), &[], None);
    let addr = server.address();
    get(addr, "/metrics", &[]);
    let log = server.wait_for_stderr("offset 0");
    assert!(
        log.lines().all(|line| !line.starts_with("2026-01-01")),
        "a forged line:\n{log}"
    );
    assert!(log.contains(escaped), "{log}");
}
