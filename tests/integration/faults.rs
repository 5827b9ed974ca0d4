//! Fault injection: damaged, hostile and vanishing files, killed writers and
//! abusive HTTP clients against the real binary, with real prometheus_client
//! and Rust writers in their own processes.
//!
//! Every wait is bounded ([`PATIENCE`]); background threads stop through a
//! guard that is dropped even when an assertion panics.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use crate::harness::{multiprom, temp_dir, write_aged};

/// A damaged header claiming almost 2 GiB in use, over a sparse file.
fn write_sparse_claim(path: &Path, size: u64) {
    write_aged(path, &0x7fff_fff8i32.to_ne_bytes());
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(size)
        .unwrap();
}

/// `inspect` on a header claiming 2 GiB over a sparse file, with its address
/// space limited to 1 GiB: reading (or allocating) what the header claims
/// would abort it. The dangling symbolic link, the device and the FIFO next
/// to it are reported as bad, each with its reason, without blocking.
#[test]
fn inspect_reads_what_is_there_not_what_a_header_claims() {
    let dir = temp_dir();
    let d = dir.path();
    write_sparse_claim(&d.join("counter_1.db"), 3 << 30);
    write_sparse_claim(&d.join("counter_2.db"), 10 << 30);
    std::os::unix::fs::symlink(d.join("missing"), d.join("counter_3.db")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", d.join("counter_4.db")).unwrap();
    let fifo = Command::new("mkfifo")
        .arg(d.join("counter_5.db"))
        .status()
        .unwrap();
    assert!(fifo.success());
    let bin = multiprom().get_program().to_owned();
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#"ulimit -v 1048576 && exec "$0" inspect --check "$1""#)
        .arg(bin)
        .arg(d)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let line = |name: &str| {
        stdout
            .lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("no line for {name}:\n{stdout}\n{stderr}"))
            .to_owned()
    };
    assert!(line("counter_1.db").contains("offset 8: key is not valid JSON"));
    assert!(line("counter_2.db").contains("over the 4 GiB limit"));
    assert!(line("counter_3.db").contains("dangling symbolic link"));
    assert!(line("counter_4.db").contains("not a regular file (a device)"));
    assert!(line("counter_5.db").contains("not a regular file (a FIFO)"));

    // The table shows the header as claimed, and no entries.
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#"ulimit -v 1048576 && exec "$0" inspect "$1""#)
        .arg(multiprom().get_program())
        .arg(d.join("counter_1.db"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("0 entries, used 2147483640 of 3221225472 bytes"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
