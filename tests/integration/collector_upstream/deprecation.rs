//! Upstream's `TestMultiProcessDeprecation`: the legacy lowercase variable.

use super::*;

// ---------------------------------------------------------------------------
// TestMultiProcessDeprecation

/// Upstream `test_deprecation_warning`: the lowercase variable still works and
/// warns once. multiprom: `scrape` honours it and prints one deprecation warning.
#[test]
fn test_deprecation_warning() {
    let dir = temp_dir();
    let mut py = Upstream::start("test_deprecation_warning", &[(LEGACY_ENV, dir.path())]);
    py.at("after");
    let out = multiprom()
        .arg("scrape")
        .env(LEGACY_ENV, dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("PROMETHEUS_MULTIPROC_DIR"), "{stderr}");
    assert!(stderr.contains("deprecated"), "{stderr}");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "# HELP c_total help\n# TYPE c_total counter\nc_total 1.0\n"
    );
    let info = py.finish();
    // Python's half of the upstream assertions.
    assert_eq!(info[0]["uppercase_set"], dir.path().to_str().unwrap());
    let warnings = info[0]["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0]
        .as_str()
        .unwrap()
        .contains("PROMETHEUS_MULTIPROC_DIR"));
}

/// Upstream `test_mark_process_dead_respects_lowercase`: `mark_process_dead`
/// finds the directory through the lowercase variable alone. multiprom: the
/// dead process's live gauge is gone from a scrape that also only has the
/// lowercase variable.
#[test]
fn test_mark_process_dead_respects_lowercase() {
    let dir = temp_dir();
    let mut py = Upstream::start(
        "test_mark_process_dead_respects_lowercase",
        &[(ENV, dir.path()), (LEGACY_ENV, dir.path())],
    );
    let scrape_lowercase = || {
        let out = multiprom()
            .arg("scrape")
            .env(LEGACY_ENV, dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    py.at("before");
    assert_eq!(
        scrape_lowercase(),
        "# HELP g help\n# TYPE g gauge\ng{pid=\"123\"} 1.0\n"
    );
    py.resume();
    py.at("after");
    assert_eq!(scrape_lowercase(), "");
    py.finish();
}
