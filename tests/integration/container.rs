//! The container recipe (`Dockerfile`) and the Kubernetes sidecar recipe in
//! docs/operations.md, checked as far as they can be without a container
//! runtime: the build stage uses the workspace's minimum Rust (which CI
//! checks the workspace with, `--locked`) and the release recipe's binary
//! (`dist/build.sh`), the build context leaves build output out, and the
//! image's default command and the recipe's arguments are accepted by the
//! real binary and serve what the probes ask for.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::{multiprom, temp_dir, workspace_root};
use crate::http_client::get;
use crate::spawned_server::Spawned;

fn read(path: &str) -> String {
    std::fs::read_to_string(workspace_root().join(path)).unwrap()
}

/// The JSON array on the line of `file` that starts with `prefix`.
fn json_array_after(file: &str, prefix: &str) -> Vec<String> {
    let line = file
        .lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?}"));
    serde_json::from_str(line[prefix.len()..].trim()).unwrap()
}

/// Runs `multiprom ARGS`, with the directory and the listen address made
/// local to the test, and checks that it serves metrics and the probes.
fn serves_with(args: &[String]) {
    let dir = temp_dir();
    let mut args = args.to_vec();
    for (flag, local) in [
        ("--dir", dir.path().to_str().unwrap()),
        ("--listen", "127.0.0.1:0"),
    ] {
        let at = args
            .iter()
            .position(|a| a == flag)
            .unwrap_or_else(|| panic!("{flag} in {args:?}"));
        args[at + 1] = local.to_owned();
    }
    let mut cmd = multiprom();
    cmd.args(&args);
    let mut server = Spawned::start(cmd);
    let addr = server.address();
    assert_eq!(get(addr, "/metrics", &[]).status, 200, "{args:?}");
    assert_eq!(get(addr, "/-/healthy", &[]).status, 200);
    assert_eq!(get(addr, "/-/ready", &[]).status, 200);
}

#[test]
fn dockerfile_builds_with_the_minimum_rust_and_runs_its_default_command() {
    let dockerfile = read("Dockerfile");
    let manifest = read("Cargo.toml");
    let msrv = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap();
    assert!(
        dockerfile.contains(&format!("FROM rust:{msrv}-bookworm AS build")),
        "the build stage must use rust-version {msrv}"
    );
    // The release recipe's binary (`just dist`), built locked.
    assert!(dockerfile.contains("RUN bash dist/build.sh binary /dist"));
    assert!(read("dist/build.sh").contains("cargo build --release --locked -p multiprom"));
    // Same Debian release for build and run: the binary's glibc.
    assert!(dockerfile.contains("FROM gcr.io/distroless/cc-debian12:nonroot"));
    let ignore = read(".dockerignore");
    assert!(
        ignore.lines().any(|l| l == "target"),
        "target/ in the build context"
    );
    let entrypoint = json_array_after(&dockerfile, "ENTRYPOINT");
    assert_eq!(entrypoint, ["/usr/local/bin/multiprom"]);
    serves_with(&json_array_after(&dockerfile, "CMD"));
    // README and CI state the same minimum.
    assert!(read("README.md").contains(&format!("Rust {msrv} or later")));
    assert!(read(".ci/run").contains("rust-version = "));
}

#[test]
fn kubernetes_recipe_arguments_serve_the_probes() {
    let operations = read("docs/operations.md");
    let args = json_array_after(&operations, "args:");
    assert_eq!(args[0], "serve");
    serves_with(&args);
    assert!(operations.contains("httpGet: { path: /-/ready, port: metrics }"));
    assert!(operations.contains("httpGet: { path: /-/healthy, port: metrics }"));
    assert!(!operations.contains("placeholder"));
}
