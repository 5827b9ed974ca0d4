//! The README's cron recipe for node_exporter's textfile collector, run as
//! written, and a real node_exporter (Debian's
//! `prometheus-node-exporter`, installed when missing) publishing the file
//! it makes: no textfile error, every series with its value.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use crate::harness::{ensure_tool, free_port, temp_dir};
use crate::serve::fixture;
use crate::spawned_server::{run_checker, Spawned};

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

    let port = free_port();
    let mut cmd = Command::new(node_exporter);
    cmd.arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--collector.disable-defaults")
        .arg("--collector.textfile")
        .arg(format!(
            "--collector.textfile.directory={}",
            textfiles.path().display()
        ));
    let exporter = Spawned::start(cmd);
    let said = run_checker(
        &exporter,
        "textfile_check.py",
        &[
            format!("http://127.0.0.1:{port}").as_ref(),
            textfiles.path().join("app.prom").as_os_str(),
        ],
    );
    assert!(said.contains("node_exporter publishes all"), "{said}");
}
