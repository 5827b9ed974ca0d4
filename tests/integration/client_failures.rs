//! `multiprom-client` under failure: a full disk and a directory it may not
//! write to give errors from the call that creates a metric or child, never
//! a panic or a SIGBUS, and leave only valid files behind.
//!
//! The full disk is real: a 256 KiB tmpfs mounted in a private mount
//! namespace (`unshare --map-root-user --mount`, so it needs no root).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use multiprom_client::{GaugeMode, MultiprocessRegistry, DEFAULT_BUCKETS};

use crate::harness::{executable_copy, multiprom, temp_dir};

/// Set in the environment of [`failing_worker_process`].
const WORKER_ENV: &str = "MULTIPROM_CLIENT_FAILURE_WORKER";

/// Not a test of its own: the body of the worker processes the tests below
/// start by running this binary again with [`WORKER_ENV`] set. It registers
/// metrics and creates children until a call fails, and prints each error as
/// `error: ...` on stdout. Without the variable it returns at once.
#[test]
fn failing_worker_process() {
    if std::env::var_os(WORKER_ENV).is_none() {
        return;
    }
    let registry = match MultiprocessRegistry::from_env() {
        Ok(registry) => registry,
        Err(err) => return println!("error: {err}"),
    };
    match registry.counter_family("requests", "Requests.", &["path"]) {
        Ok(family) => {
            // Long label values grow the counter file until the disk is full.
            let long = "x".repeat(200);
            for i in 0..100_000 {
                match family.labels(&[format!("{long}{i}")]) {
                    Ok(child) => child.inc(),
                    Err(err) => {
                        println!("error: {err}");
                        break;
                    }
                }
            }
        }
        Err(err) => println!("error: {err}"),
    }
    // A new file (another type) on the same full or forbidden directory.
    if let Err(err) = registry.histogram("latency_seconds", "Latency.", &DEFAULT_BUCKETS) {
        println!("error: {err}");
    }
    if let Err(err) = registry.gauge("running", "Running.", GaugeMode::LiveSum) {
        println!("error: {err}");
    }
}

fn worker_command(dir: &Path) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "client_failures::failing_worker_process",
        "--test-threads=1",
        "--nocapture",
        "--quiet",
    ])
    .env(WORKER_ENV, "1")
    .env("PROMETHEUS_MULTIPROC_DIR", dir)
    .env_remove("prometheus_multiproc_dir");
    cmd
}

fn errors(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("error: ").map(str::to_owned))
        .collect()
}

#[test]
fn full_disk_is_an_error_from_the_creating_call_and_files_stay_valid() {
    let tmp = temp_dir();
    let mnt = tmp.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let worker = worker_command(&mnt);
    // In a private mount namespace: mount a 256 KiB tmpfs, run the worker,
    // then check the files there with the real binary before the namespace
    // (and the mount) goes away.
    let script = r#"set -e
mount -t tmpfs -o size=256k multiprom-test "$1"
shift
"$@" > "$MNT_OUT"
ls -l "$MNT" > "$MNT_LS"
"$MULTIPROM" inspect --check "$MNT" > "$MNT_CHECK" 2>&1 || echo "inspect exit $?" >> "$MNT_CHECK"
"#;
    let out_file = tmp.path().join("worker.out");
    let ls_file = tmp.path().join("ls.out");
    let check_file = tmp.path().join("check.out");
    let status = Command::new("unshare")
        .args(["--map-root-user", "--mount", "sh", "-c", script, "sh"])
        .arg(&mnt)
        .arg(worker.get_program())
        .args(worker.get_args())
        .envs(worker.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env("MNT", &mnt)
        .env("MNT_OUT", &out_file)
        .env("MNT_LS", &ls_file)
        .env("MNT_CHECK", &check_file)
        .env("MULTIPROM", multiprom().get_program())
        .status()
        .expect("run unshare (util-linux) for a private tmpfs");
    assert!(
        status.success(),
        "the worker must end normally, not by a signal: {status}"
    );
    let out = std::fs::read_to_string(&out_file).unwrap();
    let errors: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("error: "))
        .collect();
    assert_eq!(errors.len(), 3, "one error per failing call:\n{out}");
    for (err, file) in errors
        .iter()
        .zip(["counter_", "histogram_", "gauge_livesum_"])
    {
        assert!(err.contains("No space left on device"), "{err}");
        assert!(
            err.contains(&format!("/{file}")),
            "the error names the file: {err}"
        );
    }
    let ls = std::fs::read_to_string(&ls_file).unwrap();
    assert!(
        ls.contains("counter_"),
        "the counter file was written:\n{ls}"
    );
    let check = std::fs::read_to_string(&check_file).unwrap();
    assert_eq!(
        check, "",
        "every file left on the full disk is valid:\n{check}\n{ls}"
    );
}

#[test]
fn unwritable_directory_is_an_error_from_the_creating_call() {
    let tmp = temp_dir();
    let dir = tmp.path().join("readonly");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    let mut worker = worker_command(&dir);
    // Root ignores permissions, so as root the worker runs as nobody.
    let root = rustix::process::geteuid().is_root();
    let out = if root {
        let bin = executable_copy(Path::new(worker.get_program()), tmp.path());
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(bin)
            .args(worker.get_args())
            .envs(worker.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .output()
            .expect("run setpriv (util-linux)")
    } else {
        worker.output().unwrap()
    };
    assert!(out.status.success(), "{out:?}");
    let errors = errors(&out);
    assert_eq!(errors.len(), 3, "{out:?}");
    for err in &errors {
        assert!(err.contains("Permission denied"), "{err}");
    }
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "nothing was created"
    );
}
