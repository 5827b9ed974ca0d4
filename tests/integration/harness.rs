//! Shared test harness: temp dirs, the real `multiprom` binary, and a pinned
//! `prometheus_client` in a venv under `target/`.
//!
//! The venv is made on first use (so `cargo test --workspace` works on a fresh
//! machine with no other step) and reused after. Interop tests never skip: if
//! Python or PyPI is unavailable they fail and say why.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The `prometheus_client` release the interop tests are pinned to.
pub(crate) const PROMETHEUS_CLIENT_VERSION: &str = "0.26.0";

/// The gunicorn release the `run` tests launch, with its standard
/// `child_exit` → `mark_process_dead` hook.
pub(crate) const GUNICORN_VERSION: &str = "23.0.0";

/// The workspace root.
pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/cli sits two levels below the workspace root")
        .to_path_buf()
}

/// The target directory (honours `CARGO_TARGET_DIR`).
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| {
            if p.is_absolute() {
                p
            } else {
                workspace_root().join(p)
            }
        })
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// Path of a helper script in `tests/python/`.
pub(crate) fn python_script(name: &str) -> PathBuf {
    workspace_root().join("tests/python").join(name)
}

/// The venv's Python interpreter, with `prometheus_client` pinned. Creates the
/// venv on first use; concurrent test processes race safely (each builds in
/// its own temporary directory and renames it into place).
pub(crate) fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let venv = target_dir().join(format!(
            "py-venv-prometheus-client-{PROMETHEUS_CLIENT_VERSION}-gunicorn-{GUNICORN_VERSION}"
        ));
        let python = venv.join("bin/python");
        if venv.join(".ready").exists() {
            return python;
        }
        std::fs::create_dir_all(target_dir()).expect("create target dir");
        let tmp = target_dir().join(format!(".py-venv-tmp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let base = std::env::var("MULTIPROM_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
        run_checked(
            Command::new(&base).args(["-m", "venv"]).arg(&tmp),
            "create the test venv",
        );
        run_checked(
            Command::new(tmp.join("bin/python"))
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .arg(format!("prometheus_client=={PROMETHEUS_CLIENT_VERSION}"))
                .arg(format!("gunicorn=={GUNICORN_VERSION}")),
            "install prometheus_client and gunicorn into the test venv",
        );
        std::fs::write(tmp.join(".ready"), PROMETHEUS_CLIENT_VERSION).expect("mark venv ready");
        if std::fs::rename(&tmp, &venv).is_err() {
            // Another test process finished first; use theirs.
            let _ = std::fs::remove_dir_all(&tmp);
        }
        assert!(
            venv.join(".ready").exists(),
            "test venv missing after setup: {}",
            venv.display()
        );
        python
    })
}

pub(crate) fn run_checked(cmd: &mut Command, what: &str) -> Output {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("cannot {what}: {e} (is python3 installed? set MULTIPROM_TEST_PYTHON)")
    });
    assert!(
        out.status.success(),
        "cannot {what}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs a script from `tests/python/` with the venv's Python; panics with its
/// stderr if it fails. Returns stdout.
pub(crate) fn run_python(script: &str, args: &[&str], env: &[(&str, &Path)]) -> Vec<u8> {
    let mut cmd = Command::new(python());
    cmd.arg(python_script(script)).args(args);
    cmd.env_remove("PROMETHEUS_MULTIPROC_DIR")
        .env_remove("prometheus_multiproc_dir");
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_checked(&mut cmd, &format!("run {script} {args:?}")).stdout
}

/// The `multiprom` binary built for this test run.
pub(crate) fn multiprom() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_multiprom"));
    cmd.env_remove("PROMETHEUS_MULTIPROC_DIR")
        .env_remove("prometheus_multiproc_dir");
    cmd
}

/// What `multiprom scrape --format protobuf --dir <dir>` prints; panics with
/// its stderr if it fails.
pub(crate) fn scrape_protobuf(dir: &Path) -> Vec<u8> {
    scrape_protobuf_escaped(dir, "underscores")
}

/// [`scrape_protobuf`] with names escaped as `escaping` says
/// (`--escaping`).
pub(crate) fn scrape_protobuf_escaped(dir: &Path, escaping: &str) -> Vec<u8> {
    let out = multiprom()
        .args([
            "scrape",
            "--format",
            "protobuf",
            "--escaping",
            escaping,
            "--dir",
        ])
        .arg(dir)
        .output()
        .expect("run multiprom scrape");
    assert!(
        out.status.success(),
        "multiprom scrape --format protobuf --escaping {escaping}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Writes `bytes` to `path` and dates the file an hour back. A file a writer
/// is still creating (0 bytes, or `used` = 0) is read as empty, and only
/// reported as bad once it has stayed so for a while (10 s from its
/// modification time); tests of such bad files write them aged.
pub(crate) fn write_aged(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).expect("write file");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("reopen file");
    file.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(3600))
        .expect("date the file back");
}

/// A fresh temporary directory, removed on drop.
pub(crate) fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("multiprom-test-")
        .tempdir()
        .expect("temp dir")
}

#[test]
fn venv_has_pinned_prometheus_client() {
    let out = Command::new(python())
        .args(["-c", "import prometheus_client, sys; sys.stdout.write(prometheus_client.__version__ if hasattr(prometheus_client, '__version__') else __import__('importlib.metadata').metadata.version('prometheus_client'))"])
        .output()
        .expect("run venv python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        PROMETHEUS_CLIENT_VERSION
    );
}

/// A copy of the executable `bin` in `dir` (mode 0755), for running it as
/// another user (`setpriv --reuid=65534`): the build tree may sit below a
/// directory that user cannot enter (a checkout under `/root`), while `dir`
/// is made by the test and its mode is the test's to set. `dir` itself must
/// be traversable (0755) by that user.
pub(crate) fn executable_copy(bin: &Path, dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let name = bin.file_name().expect("an executable has a file name");
    let copy = dir.join(name);
    std::fs::copy(bin, &copy).expect("copy executable");
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755))
        .expect("chmod executable");
    copy
}

/// The path of `program`, installing Debian package `package` with
/// `apt-get install -y` if it is missing (CI runs as root on a fresh Debian
/// machine). Panics with a clear message if it cannot be had: tests that
/// need a tool never skip.
pub(crate) fn ensure_tool(program: &str, package: &str) -> PathBuf {
    let find = || {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(program))
                .find(|candidate| candidate.is_file())
        })
    };
    if let Some(found) = find() {
        return found;
    }
    static APT: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = APT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(found) = find() {
        return found;
    }
    let install = Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends", package])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .output();
    let update_and_install = || {
        Command::new("sh")
            .args([
                "-c",
                &format!("apt-get update && apt-get install -y --no-install-recommends {package}"),
            ])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
    };
    let ok = matches!(&install, Ok(out) if out.status.success())
        || matches!(update_and_install(), Ok(out) if out.status.success());
    match find() {
        Some(found) if ok => found,
        _ => panic!(
            "{program} is needed by this test and is not installed; `apt-get install -y {package}` did not provide it ({install:?}). Install {package} and run again."
        ),
    }
}

/// A loopback port nothing listens on now (for servers that take a fixed
/// port, as Prometheus and node_exporter do).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}
