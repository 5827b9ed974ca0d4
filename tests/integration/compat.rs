//! The compatibility matrix (docs/compatibility.md): directories written by
//! other `prometheus_client` releases, each installed from PyPI into a venv
//! of its own under `target/`. From 0.18.0 on they are merged exactly as the
//! pinned release merges them; the older file layout (no timestamps, no help
//! in the keys), which the pinned release cannot read either, is skipped
//! file by file and reported, never a crash.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

use crate::harness::{multiprom, python, python_script, run_python, target_dir, temp_dir};

/// Releases whose files are merged, besides the pinned one (which every
/// other interop test uses). Keep docs/compatibility.md in step.
pub(crate) const READ_RELEASES: [&str; 3] = ["0.18.0", "0.20.0", "0.23.1"];
/// Releases with the older file layout.
pub(crate) const OLD_LAYOUT_RELEASES: [&str; 2] = ["0.12.0", "0.17.1"];

fn write_with(version: &str) -> tempfile::TempDir {
    let dir = temp_dir();
    let out = Command::new(venv_python(version))
        .arg(python_script("compat_writer.py"))
        .env("PROMETHEUS_MULTIPROC_DIR", dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{version}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        std::fs::read_dir(dir.path()).unwrap().count() >= 2 * 8,
        "{version}"
    );
    dir
}

/// A venv with `prometheus_client==version` (made once, reused).
fn venv_python(version: &str) -> PathBuf {
    let venv = target_dir().join(format!("py-venv-compat-prometheus-client-{version}"));
    let bin = venv.join("bin/python");
    if venv.join(".ready").exists() {
        return bin;
    }
    let tmp = target_dir().join(format!(".py-venv-compat-{version}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let status = Command::new(python())
        .args(["-m", "venv"])
        .arg(&tmp)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "cannot make a venv for prometheus_client {version}"
    );
    let out = Command::new(tmp.join("bin/python"))
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg(format!("prometheus_client=={version}"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cannot install prometheus_client {version} from PyPI: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(tmp.join(".ready"), version).unwrap();
    if std::fs::rename(&tmp, &venv).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    bin
}

#[test]
fn files_of_releases_from_0_18_merge_as_the_pinned_release_merges_them() {
    for version in READ_RELEASES {
        let dir = write_with(version);
        for format in ["text", "openmetrics"] {
            let expected = String::from_utf8(run_python(
                "serve_python_exposition.py",
                &[dir.path().to_str().unwrap(), format],
                &[],
            ))
            .unwrap();
            let flag = if format == "text" {
                "prometheus"
            } else {
                "openmetrics"
            };
            let ours = multiprom()
                .args(["scrape", "--strict", "--format", flag, "--dir"])
                .arg(dir.path())
                .output()
                .unwrap();
            assert_eq!(
                ours.status.code(),
                Some(0),
                "{version}: {}",
                String::from_utf8_lossy(&ours.stderr)
            );
            assert_eq!(
                String::from_utf8(ours.stdout).unwrap(),
                expected,
                "{version} {format}"
            );
            assert!(
                expected.contains("jobs_total{queue=\"fast\"} 3.0"),
                "{version}: {expected}"
            );
        }
    }
}

#[test]
fn files_of_the_older_layout_are_skipped_and_reported() {
    for version in OLD_LAYOUT_RELEASES {
        let dir = write_with(version);
        let files = std::fs::read_dir(dir.path()).unwrap().count();
        // The pinned release cannot read them either: it raises.
        let python = Command::new(python())
            .arg(python_script("serve_python_exposition.py"))
            .arg(dir.path())
            .arg("text")
            .output()
            .unwrap();
        assert!(!python.status.success(), "{version}");
        let ours = multiprom()
            .args(["scrape", "--strict", "--dir"])
            .arg(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&ours.stderr);
        assert_eq!(ours.status.code(), Some(1), "{version}: {stderr}");
        assert_eq!(
            stderr
                .matches("multiprom scrape: warning: skipped ")
                .count(),
            files,
            "{version}: one warning per file: {stderr}"
        );
        assert_eq!(String::from_utf8(ours.stdout).unwrap(), "", "{version}");
    }
}

/// Every `module::test` docs/compatibility.md names exists, and every test
/// module it names is one of this binary's.
#[test]
fn the_matrix_names_tests_that_exist() {
    let root = crate::harness::workspace_root();
    let matrix = std::fs::read_to_string(root.join("docs/compatibility.md")).unwrap();
    let mut named = 0;
    for cell in matrix.split('`').skip(1).step_by(2) {
        let Some((module, test)) = cell.split_once("::") else {
            continue;
        };
        if !module.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
            continue;
        }
        let source = std::fs::read_to_string(root.join(format!("tests/integration/{module}.rs")))
            .unwrap_or_else(|_| panic!("docs/compatibility.md names {cell}: no module {module}"));
        assert!(
            source.contains(&format!("fn {test}(")),
            "docs/compatibility.md names {cell}, which does not exist"
        );
        named += 1;
    }
    assert!(named >= 8, "only {named} tests named");
    for version in READ_RELEASES.iter().chain(&OLD_LAYOUT_RELEASES) {
        assert!(
            matrix.contains(version),
            "{version} missing from the matrix"
        );
    }
}
