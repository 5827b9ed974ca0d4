//! The README's cron recipe for node_exporter's textfile collector, run as
//! written, and a real node_exporter (Debian's
//! `prometheus-node-exporter`, installed when missing) publishing the file
//! it makes: no textfile error, every series with its value.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;

use crate::harness::{ensure_tool, python, python_script, temp_dir};
use crate::serve::fixture;
use crate::spawned_server::Spawned;

/// The README's cron line, after the schedule and the user.
fn readme_cron_command() -> String {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let line = readme
        .lines()
        .find(|l| l.starts_with("* * * * * app "))
        .expect("the README has the cron line");
    line["* * * * * app ".len()..].to_owned()
}

#[test]
fn the_readme_cron_recipe_feeds_a_real_node_exporter() {
    let node_exporter = ensure_tool("prometheus-node-exporter", "prometheus-node-exporter");
    let dir = fixture();
    let textfiles = temp_dir();
    let command = readme_cron_command()
        .replace(
            "/var/lib/node_exporter/textfile",
            textfiles.path().to_str().unwrap(),
        )
        .replace("/run/prom", dir.path().to_str().unwrap());
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_multiprom")).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    let cron = Command::new("sh")
        .args(["-c", &command])
        .env("PATH", path)
        .env_remove("PROMETHEUS_MULTIPROC_DIR")
        .output()
        .unwrap();
    assert!(cron.status.success(), "{command}: {cron:?}");
    let names: Vec<String> = std::fs::read_dir(textfiles.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["app.prom"], "only the renamed file is left");

    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = Command::new(node_exporter);
    cmd.arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--collector.disable-defaults")
        .arg("--collector.textfile")
        .arg(format!(
            "--collector.textfile.directory={}",
            textfiles.path().display()
        ));
    let exporter = Spawned::start(cmd);
    let check = Command::new(python())
        .arg(python_script("textfile_check.py"))
        .arg(format!("http://127.0.0.1:{port}"))
        .arg(textfiles.path().join("app.prom"))
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}\n{}\nnode_exporter's log:\n{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr),
        exporter.stderr()
    );
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(said.contains("node_exporter publishes all"), "{said}");
}
