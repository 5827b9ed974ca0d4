//! Bad files never fail a scrape: one table case per kind of bad file.
//!
//! For every case: the good files still merge (the output equals the output
//! of the directory without the bad file, in both formats), the problem names
//! the path, the byte offset and the reason, and it is reported once per file
//! state: not again on the next collect, again once the file changes.
//! `multiprom scrape` prints the same output, one warning line per bad file,
//! exits 0, and 1 with `--strict`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use multiprom_collector::{
    merge_files, CollectOptions, DirCollector, FileState, Format, Scrape, Warning,
};
use multiprom_format::{
    encode_key, layout, FileName, FileNameError, FileWriter, GaugeMode, KeyError, MetricKind,
    ReadError, ReadErrorKind,
};

use crate::harness::{executable_copy, multiprom, python, temp_dir, write_aged};
use crate::spawned_server::PATIENCE;

/// The key of every entry in a bad file: if a bad file were merged, this
/// family would show up in the output.
fn bad_key() -> String {
    encode_key("bad_family", "bad_family_total", [], "must never be merged")
}

/// A valid file image holding `keys` (values 1.0), `capacity` bytes long.
fn image(keys: &[&str], capacity: usize) -> Vec<u8> {
    layout::file_image(keys.iter().map(|k| (k.as_bytes(), 1.0, 0.0)), capacity)
}

/// A valid counter image with one `bad_family` entry.
fn good_image() -> Vec<u8> {
    image(&[&bad_key()], 4096)
}

/// `good_image()` with `f` applied.
fn damaged(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut bytes = good_image();
    f(&mut bytes);
    bytes
}

fn set_used(bytes: &mut [u8], used: i32) {
    bytes[..4].copy_from_slice(&used.to_ne_bytes());
}

fn set_key_len(bytes: &mut [u8], len: i32) {
    bytes[8..12].copy_from_slice(&len.to_ne_bytes());
}

/// Bytes in use of `good_image()`.
fn good_used() -> usize {
    8 + layout::entry_len(bad_key().len())
}

/// Writes the good files every case merges.
fn write_good_files(dir: &Path) {
    let mut counter =
        FileWriter::open(dir, &FileName::new(MetricKind::Counter, "1").unwrap()).unwrap();
    counter
        .slot(&encode_key(
            "requests",
            "requests_total",
            [("code", "200")],
            "Requests.",
        ))
        .unwrap()
        .add(5.0);
    let mut gauge = FileWriter::open(
        dir,
        &FileName::new(MetricKind::Gauge(GaugeMode::LiveSum), "1").unwrap(),
    )
    .unwrap();
    gauge
        .slot(&encode_key("busy", "busy", [], "Busy workers."))
        .unwrap()
        .set(2.0);
    let mut histogram =
        FileWriter::open(dir, &FileName::new(MetricKind::Histogram, "2").unwrap()).unwrap();
    histogram
        .slot(&encode_key("latency", "latency_sum", [], "Latency."))
        .unwrap()
        .add(0.25);
    for (le, n) in [("1.0", 1.0), ("+Inf", 0.0)] {
        histogram
            .slot(&encode_key(
                "latency",
                "latency_bucket",
                [("le", le)],
                "Latency.",
            ))
            .unwrap()
            .add(n);
    }
}

/// Sets a file's modification time without following or blocking on it.
fn touch(path: &Path) {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .unwrap();
    file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000))
        .unwrap();
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
}

fn symlink(target: &str, path: &Path) {
    std::os::unix::fs::symlink(target, path).unwrap();
}

fn sqlite_db(path: &Path) {
    let out = Command::new(python())
        .args([
            "-c",
            "import sqlite3, sys\n\
             c = sqlite3.connect(sys.argv[1])\n\
             c.execute('create table kv (k text primary key, v real)')\n\
             c.execute(\"insert into kv values ('requests', 5.0)\")\n\
             c.commit()",
        ])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(std::fs::read(path)
        .unwrap()
        .starts_with(b"SQLite format 3\0"));
}

/// A Unix socket at `path` (the file stays when the listener is dropped).
fn bind_socket(path: &Path) {
    std::os::unix::net::UnixListener::bind(path).unwrap();
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

/// One kind of bad file (also used by the fault suite).
pub(crate) struct Case {
    /// What kind of bad file this is.
    pub(crate) what: &'static str,
    /// File name.
    pub(crate) file: &'static [u8],
    /// Creates the bad file.
    pub(crate) make: fn(&Path),
    /// Where the problem is reported.
    offset: fn() -> u64,
    /// The problem kind expected.
    kind: fn(&ReadErrorKind) -> bool,
    /// Text the reason must contain.
    reason: &'static str,
    /// Changes the file so that it is still bad, but a new state.
    change: fn(&Path),
}

fn zero() -> u64 {
    0
}

fn eight() -> u64 {
    8
}

/// Every kind of bad file the reader knows.
pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            what: "0-byte file",
            file: b"counter_101.db",
            make: |p| write_aged(p, b""),
            offset: zero,
            kind: |k| *k == ReadErrorKind::Empty,
            reason: "0-byte file",
            change: touch,
        },
        Case {
            what: "shorter than the header",
            file: b"counter_102.db",
            make: |p| write(p, &[8, 0, 0]),
            offset: zero,
            kind: |k| *k == ReadErrorKind::TooShort { size: 3 },
            reason: "shorter than the 8-byte header",
            change: touch,
        },
        Case {
            what: "used = 0",
            file: b"counter_103.db",
            make: |p| write_aged(p, &vec![0; layout::INITIAL_CAPACITY as usize]),
            offset: zero,
            kind: |k| *k == ReadErrorKind::HeaderNotWritten,
            reason: "used = 0",
            change: touch,
        },
        Case {
            what: "used < 8",
            file: b"counter_104.db",
            make: |p| write(p, &damaged(|b| set_used(b, 4))),
            offset: zero,
            kind: |k| *k == ReadErrorKind::UsedTooSmall { used: 4 },
            reason: "less than the 8-byte header",
            change: touch,
        },
        Case {
            what: "used past the file size",
            file: b"counter_105.db",
            make: |p| write(p, &damaged(|b| set_used(b, 1 << 20))),
            offset: zero,
            kind: |k| {
                *k == ReadErrorKind::UsedPastEnd {
                    used: 1 << 20,
                    size: 4096,
                }
            },
            reason: "but the file has only 4096 bytes",
            change: touch,
        },
        Case {
            what: "used not on an entry boundary",
            file: b"counter_106.db",
            make: |p| write(p, &damaged(|b| set_used(b, good_used() as i32 + 4))),
            offset: zero,
            kind: |k| matches!(k, ReadErrorKind::UsedNotOnBoundary { .. }),
            reason: "not on an entry boundary",
            change: touch,
        },
        Case {
            what: "negative key length",
            file: b"counter_107.db",
            make: |p| write(p, &damaged(|b| set_key_len(b, -1))),
            offset: eight,
            kind: |k| *k == ReadErrorKind::BadKeyLength { len: -1 },
            reason: "invalid key length -1",
            change: touch,
        },
        Case {
            what: "oversized key length",
            file: b"counter_108.db",
            make: |p| write(p, &damaged(|b| set_key_len(b, i32::MAX))),
            offset: eight,
            kind: |k| {
                *k == ReadErrorKind::BadKeyLength {
                    len: i64::from(i32::MAX),
                }
            },
            reason: "invalid key length 2147483647",
            change: touch,
        },
        Case {
            what: "entry past used",
            file: b"counter_109.db",
            make: |p| write(p, &damaged(|b| set_key_len(b, bad_key().len() as i32 + 8))),
            offset: eight,
            kind: |k| matches!(k, ReadErrorKind::EntryPastUsed { .. }),
            reason: "past the",
            change: touch,
        },
        Case {
            what: "invalid UTF-8 in a key",
            file: b"counter_110.db",
            make: |p| write(p, &damaged(|b| b[13] = 0xff)),
            offset: || 13,
            kind: |k| *k == ReadErrorKind::InvalidUtf8,
            reason: "not valid UTF-8",
            change: touch,
        },
        Case {
            what: "invalid JSON key",
            file: b"counter_111.db",
            make: |p| write(p, &damaged(|b| b[12] = b'{')),
            offset: eight,
            kind: |k| matches!(k, ReadErrorKind::BadKey(KeyError::InvalidJson(_))),
            reason: "not valid JSON",
            change: touch,
        },
        Case {
            what: "key of the wrong shape",
            file: b"counter_112.db",
            make: |p| {
                write(
                    p,
                    &image(&[r#"["bad_family", "bad_family_total", {}, 5]"#], 4096),
                )
            },
            offset: eight,
            kind: |k| matches!(k, ReadErrorKind::BadKey(KeyError::WrongShape(_))),
            reason: "[family, sample, {labels}, help]",
            change: touch,
        },
        Case {
            what: "entry with an empty metric name",
            file: b"counter_113.db",
            make: |p| write(p, &image(&[r#"["", "_total", {}, ""]"#], 4096)),
            offset: eight,
            kind: |k| *k == ReadErrorKind::BadKey(KeyError::EmptyFamilyName),
            reason: "empty metric name",
            change: touch,
        },
        Case {
            what: "foreign *.db (a real SQLite database)",
            file: b"histogram_sqlite.db",
            make: sqlite_db,
            offset: zero,
            kind: |k| matches!(k, ReadErrorKind::UsedPastEnd { .. }),
            reason: "bytes used, but the file has only",
            change: touch,
        },
        Case {
            what: "a *.db directory",
            file: b"counter_114.db",
            make: |p| std::fs::create_dir(p).unwrap(),
            offset: zero,
            kind: |k| *k == ReadErrorKind::NotAFile("a directory"),
            reason: "not a regular file (a directory)",
            change: touch,
        },
        Case {
            what: "a FIFO named *.db",
            file: b"gauge_all_115.db",
            make: mkfifo,
            offset: zero,
            kind: |k| *k == ReadErrorKind::NotAFile("a FIFO"),
            reason: "not a regular file (a FIFO)",
            change: touch,
        },
        Case {
            what: "a socket named *.db",
            file: b"counter_140.db",
            make: bind_socket,
            offset: zero,
            kind: |k| *k == ReadErrorKind::NotAFile("a socket"),
            reason: "not a regular file (a socket)",
            // A socket cannot be opened to date it: a new one in its place.
            change: |p| {
                std::fs::remove_file(p).unwrap();
                bind_socket(p);
            },
        },
        Case {
            what: "unknown gauge mode",
            file: b"gauge_bogus_116.db",
            make: |p| {
                write(
                    p,
                    &image(&[&encode_key("bad_family", "bad_family", [], "")], 4096),
                )
            },
            offset: zero,
            kind: |k| {
                *k == ReadErrorKind::BadFileName(FileNameError::UnknownGaugeMode("bogus".into()))
            },
            reason: "unknown gauge mode \"bogus\"",
            change: touch,
        },
        Case {
            what: "unknown type prefix",
            file: b"app.db",
            make: |p| write(p, &good_image()),
            offset: zero,
            kind: |k| matches!(k, ReadErrorKind::BadFileName(FileNameError::UnknownType(_))),
            reason: "unknown type prefix",
            change: touch,
        },
        Case {
            what: "histogram le that is not a number",
            file: b"histogram_117.db",
            make: |p| {
                write(
                    p,
                    &image(
                        &[
                            &encode_key("bad_family", "bad_family_sum", [], ""),
                            &encode_key("bad_family", "bad_family_bucket", [("le", "abc")], ""),
                        ],
                        4096,
                    ),
                )
            },
            offset: || {
                8 + layout::entry_len(encode_key("bad_family", "bad_family_sum", [], "").len())
                    as u64
            },
            kind: |k| *k == ReadErrorKind::BadKey(KeyError::BadBucketBound("abc".into())),
            reason: "le=\"abc\" is not a number",
            change: touch,
        },
        Case {
            what: "histogram le that is NaN",
            file: b"histogram_118.db",
            make: |p| {
                write(
                    p,
                    &image(
                        &[&encode_key(
                            "bad_family",
                            "bad_family_bucket",
                            [("le", "NaN")],
                            "",
                        )],
                        4096,
                    ),
                )
            },
            offset: eight,
            kind: |k| *k == ReadErrorKind::BadKey(KeyError::BadBucketBound("NaN".into())),
            reason: "is not a number",
            change: touch,
        },
        Case {
            what: "symbolic link loop (an I/O error even for root)",
            file: b"counter_119.db",
            make: |p| symlink("counter_119.db", p),
            offset: zero,
            kind: |k| matches!(k, ReadErrorKind::Io(_)),
            reason: "cannot read",
            // A loop has no state of its own to change; break it differently.
            change: |p| {
                std::fs::remove_file(p).unwrap();
                write_aged(p, b"");
            },
        },
        Case {
            what: "dangling symbolic link",
            file: b"counter_120.db",
            make: |p| symlink("no-such-target", p),
            offset: zero,
            kind: |k| *k == ReadErrorKind::DanglingSymlink,
            reason: "dangling symbolic link",
            change: |p| {
                std::fs::remove_file(p).unwrap();
                write(p, &[1]);
            },
        },
    ]
}

fn path_of(dir: &Path, file: &[u8]) -> PathBuf {
    dir.join(OsStr::from_bytes(file))
}

/// The outputs of a directory in both formats.
fn outputs(scrape: &Scrape) -> (String, String) {
    (
        scrape.encode(Format::Prometheus),
        scrape.encode(Format::OpenMetrics),
    )
}

/// The file warnings of a scrape (conflicts must not appear here).
fn file_warnings(scrape: &Scrape) -> Vec<&ReadError> {
    scrape
        .warnings
        .iter()
        .map(|w| match w {
            Warning::File(p) => p,
            other => panic!("unexpected warning: {other}"),
        })
        .collect()
}

fn check_problem(case: &Case, problem: &ReadError, path: &Path) {
    let what = case.what;
    assert_eq!(problem.path, path, "{what}");
    assert_eq!(problem.offset, (case.offset)(), "{what}: {problem}");
    assert!(
        (case.kind)(&problem.kind),
        "{what}: unexpected kind {:?}",
        problem.kind
    );
    let text = problem.to_string();
    let prefix = format!("{}: offset {}: ", path.display(), problem.offset);
    assert!(
        text.starts_with(&prefix),
        "{what}: {text:?} should start with {prefix:?}"
    );
    assert!(
        text.contains(case.reason),
        "{what}: {text:?} should say {:?}",
        case.reason
    );
}

#[test]
fn each_kind_of_bad_file_is_skipped_and_reported_once_per_state() {
    for case in cases() {
        let what = case.what;
        let dir = temp_dir();
        write_good_files(dir.path());
        let baseline = outputs(&DirCollector::new(dir.path()).collect().unwrap());
        assert!(baseline.0.contains("requests_total{code=\"200\"} 5.0"));

        let path = path_of(dir.path(), case.file);
        (case.make)(&path);
        let collector = DirCollector::new(dir.path());

        let first = collector.collect().unwrap();
        assert_eq!(
            outputs(&first),
            baseline,
            "{what}: good files must merge as without it"
        );
        let warnings = file_warnings(&first);
        assert_eq!(warnings.len(), 1, "{what}: {warnings:?}");
        check_problem(&case, warnings[0], &path);
        assert_eq!(
            (first.stats.files_ok, first.stats.files_bad),
            (3, 1),
            "{what}"
        );
        let report = first.files.iter().find(|f| *f.path == *path).unwrap();
        assert_eq!(report.state(), FileState::Bad, "{what}");

        let second = collector.collect().unwrap();
        assert_eq!(outputs(&second), baseline, "{what}");
        assert!(
            second.warnings.is_empty(),
            "{what}: reported twice: {:?}",
            second.warnings
        );
        assert_eq!(second.stats.files_bad, 1, "{what}: still skipped");

        (case.change)(&path);
        let third = collector.collect().unwrap();
        assert_eq!(outputs(&third), baseline, "{what}");
        let warnings = file_warnings(&third);
        assert_eq!(
            warnings.len(),
            1,
            "{what}: a changed bad file is reported again"
        );
        assert_eq!(warnings[0].path, path, "{what}");
        assert!(collector.collect().unwrap().warnings.is_empty(), "{what}");
    }
}

/// prometheus_client creates a file, sizes it, then writes its header: a
/// scrape in between sees 0 bytes or `used` = 0. Python reads `used` = 0 as
/// empty; so does multiprom, without a warning, unless the file stays like
/// that for 10 s (counted from its modification time): then its writer was
/// killed half-way and it is reported.
#[test]
fn a_file_being_created_is_empty_until_it_stays_as_a_writer_left_it() {
    let dir = temp_dir();
    write_good_files(dir.path());
    let baseline = outputs(&DirCollector::new(dir.path()).collect().unwrap());
    let zero = dir.path().join("counter_11.db");
    let unwritten = dir.path().join("histogram_12.db");
    write(&zero, b"");
    write(&unwritten, &vec![0; layout::INITIAL_CAPACITY as usize]);
    let collector = DirCollector::new(dir.path());
    let fresh = collector.collect().unwrap();
    assert!(fresh.warnings.is_empty(), "{:?}", fresh.warnings);
    assert_eq!(outputs(&fresh), baseline);
    assert_eq!((fresh.stats.files_ok, fresh.stats.files_bad), (5, 0));
    for path in [&zero, &unwritten] {
        let report = fresh.files.iter().find(|f| *f.path == **path).unwrap();
        assert_eq!((report.state(), report.entries), (FileState::Ok, 0));
    }
    // The writer finishes one of them: it merges.
    write(&unwritten, &good_image());
    let done = collector.collect().unwrap();
    assert!(done.warnings.is_empty(), "{:?}", done.warnings);
    assert!(done
        .encode(Format::Prometheus)
        .contains("bad_family_total 1.0"));
    // The other stays as it was for longer than the grace: reported once.
    let file = std::fs::OpenOptions::new().write(true).open(&zero).unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(11))
        .unwrap();
    let stale = collector.collect().unwrap();
    let warnings = file_warnings(&stale);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].path, zero);
    assert!(
        warnings[0].to_string().contains("0-byte file"),
        "{}",
        warnings[0]
    );
    assert!(collector.collect().unwrap().warnings.is_empty());
}

/// A `*.db` name that is not UTF-8 is not damage: Python's `glob` returns it
/// (with lone surrogates) and merges the file, and so does multiprom. Only a
/// gauge in an `all` mode shows the id, as its `pid` label: Python then
/// fails the whole scrape on encoding it; multiprom prints the bytes that are
/// not UTF-8 as U+FFFD.
#[test]
fn a_file_name_that_is_not_utf8_merges_as_in_python() {
    let dir = temp_dir();
    write_good_files(dir.path());
    write(&path_of(dir.path(), b"counter_\xff.db"), &good_image());
    let scrape = DirCollector::new(dir.path()).collect().unwrap();
    assert!(scrape.warnings.is_empty(), "{:?}", scrape.warnings);
    let ours = scrape.encode(Format::Prometheus);
    assert!(ours.contains("bad_family_total 1.0"), "{ours}");
    let python = crate::harness::run_python(
        "serve_python_exposition.py",
        &[dir.path().to_str().unwrap(), "text"],
        &[],
    );
    assert_eq!(ours, String::from_utf8(python).unwrap());

    let gauge = FileName::new(MetricKind::Gauge(GaugeMode::LiveAll), "1").unwrap();
    let mut writer = FileWriter::open(dir.path(), &gauge).unwrap();
    writer
        .slot(&encode_key("up", "up", [], "Up."))
        .unwrap()
        .set(1.0);
    drop(writer);
    std::fs::rename(
        dir.path().join("gauge_liveall_1.db"),
        path_of(dir.path(), b"gauge_liveall_\xfe.db"),
    )
    .unwrap();
    let text = DirCollector::new(dir.path())
        .collect()
        .unwrap()
        .encode(Format::Prometheus);
    assert!(text.contains("up{pid=\"\u{fffd}\"} 1.0\n"), "{text}");
}

#[test]
fn a_bad_file_that_becomes_good_merges_and_is_reported_again_when_it_breaks() {
    let dir = temp_dir();
    write_good_files(dir.path());
    let baseline = outputs(&DirCollector::new(dir.path()).collect().unwrap());
    let path = dir.path().join("counter_9.db");
    write_aged(&path, b"");
    let collector = DirCollector::new(dir.path());
    assert_eq!(collector.collect().unwrap().warnings.len(), 1);
    // A Python worker with the same pid reopens it: now it is a good file
    // (rewritten in place: same inode).
    write(&path, &good_image());
    let fixed = collector.collect().unwrap();
    assert!(fixed.warnings.is_empty());
    assert!(fixed
        .encode(Format::Prometheus)
        .contains("bad_family_total 1.0"));
    // Rewritten in place again with another key of the same length at the
    // same offset: the parse cache must not serve the old key.
    let other = encode_key("bad_famiLy", "bad_famiLy_total", [], "must never be merged");
    assert_eq!(other.len(), bad_key().len());
    write(&path, &image(&[&other], 4096));
    let rewritten = collector.collect().unwrap().encode(Format::Prometheus);
    assert!(rewritten.contains("bad_famiLy_total 1.0"), "{rewritten}");
    assert!(!rewritten.contains("bad_family_total"), "{rewritten}");
    // And broken again: reported again, good files unaffected.
    write_aged(&path, &damaged(|b| set_used(b, 0)));
    let broken = collector.collect().unwrap();
    assert_eq!(file_warnings(&broken).len(), 1);
    assert_eq!(outputs(&broken), baseline);
}

/// Unreadable (mode 000). Mode bits do not stop a privileged process (root,
/// or CAP_DAC_OVERRIDE) from reading: then the file merges in-process, and the
/// unreadable path is checked by running the real binary as `nobody` through
/// `setpriv`.
#[test]
fn unreadable_file_is_skipped_and_reported() {
    let dir = temp_dir();
    write_good_files(dir.path());
    let baseline = outputs(&DirCollector::new(dir.path()).collect().unwrap());
    let path = dir.path().join("counter_707.db");
    write(&path, &good_image());
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();

    let privileged = std::fs::read(&path).is_ok();
    let collector = DirCollector::new(dir.path());
    let scrape = collector.collect().unwrap();
    if !privileged {
        assert_eq!(outputs(&scrape), baseline);
        let warnings = file_warnings(&scrape);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert_eq!(
            (warnings[0].path.as_path(), warnings[0].offset),
            (path.as_path(), 0)
        );
        assert!(
            matches!(&warnings[0].kind, ReadErrorKind::Io(e) if e.kind() == std::io::ErrorKind::PermissionDenied),
            "{}",
            warnings[0]
        );
        assert!(collector.collect().unwrap().warnings.is_empty());
        return;
    }
    // Privileged: the mode does not apply to us, so the file is good here.
    assert!(scrape.warnings.is_empty(), "{:?}", scrape.warnings);
    assert!(scrape
        .encode(Format::Prometheus)
        .contains("bad_family_total 1.0"));

    let setpriv = Path::new("/usr/bin/setpriv");
    // Privileged here, so the permission-denied path needs another user;
    // without setpriv that path would go untested, which must not pass.
    assert!(
        setpriv.exists(),
        "running privileged without /usr/bin/setpriv (util-linux): cannot test an unreadable file"
    );
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let entry = entry.unwrap().path();
        if entry != path {
            std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
    let bin_dir = temp_dir();
    std::fs::set_permissions(bin_dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = executable_copy(Path::new(env!("CARGO_BIN_EXE_multiprom")), bin_dir.path());
    let as_nobody = |extra: &[&str]| {
        Command::new(setpriv)
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin)
            .args(["scrape", "--dir"])
            .arg(dir.path())
            .args(extra)
            .env_remove("PROMETHEUS_MULTIPROC_DIR")
            .output()
            .unwrap()
    };
    let out = as_nobody(&[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8(out.stdout).unwrap(), baseline.0);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}: offset 0: cannot read: Permission denied",
            path.display()
        )),
        "{stderr}"
    );
    assert_eq!(as_nobody(&["--strict"]).status.code(), Some(1));
}

/// A file that vanished between listing and reading (a worker reaped by
/// `mark_process_dead`) is skipped as vanished: not bad, not an error.
#[test]
fn vanished_file_is_skipped_but_not_bad() {
    let dir = temp_dir();
    write_good_files(dir.path());
    let good: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let baseline = outputs(&merge_files(&good, CollectOptions::default()));
    // Listed, then gone: the path list a scan returned, minus the file.
    let gone = dir.path().join("gauge_livesum_999.db");
    let scrape = merge_files(good.iter().chain([&gone]), CollectOptions::default());
    assert_eq!(outputs(&scrape), baseline);
    let report = scrape.files.iter().find(|f| *f.path == *gone).unwrap();
    assert_eq!(report.state(), FileState::Vanished);
    let problem = report.problem.as_ref().unwrap();
    assert!(problem.is_vanished());
    assert_eq!(
        problem.to_string(),
        format!(
            "{}: offset 0: file vanished while being read",
            gone.display()
        )
    );
    assert_eq!(
        (
            scrape.stats.files_ok,
            scrape.stats.files_bad,
            scrape.stats.files_vanished
        ),
        (3, 0, 1)
    );
}

/// Sets a flag when dropped, so a background thread told to run until the
/// flag is set stops even when an assertion panics (`thread::scope` joins
/// its threads before passing the panic on: without this, a failing
/// assertion would hang the test instead of failing it).
pub(crate) struct StopOnDrop<'a>(pub(crate) &'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Files created and deleted while a collector scans: every file is either
/// merged or vanished, never reported as damaged, and collection never fails.
/// Scrapes go on (at least 300, at most until [`PATIENCE`]) until files were
/// seen vanishing, so the race is really exercised.
#[test]
fn files_vanishing_during_collection_are_never_bad() {
    let dir = temp_dir();
    write_good_files(dir.path());
    let stop = std::sync::atomic::AtomicBool::new(false);
    let template = dir.path().join(".template");
    let mut writer = FileWriter::open(
        dir.path(),
        &FileName::new(MetricKind::Gauge(GaugeMode::LiveAll), "500").unwrap(),
    )
    .unwrap();
    writer
        .slot(&encode_key("churn", "churn", [], "Churning workers."))
        .unwrap()
        .set(1.0);
    drop(writer);
    std::fs::rename(dir.path().join("gauge_liveall_500.db"), &template).unwrap();
    std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        s.spawn(|| {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // Appear whole (hard link), then vanish (unlink).
                let path = dir.path().join(format!("gauge_liveall_{}.db", 600 + i % 8));
                let _ = std::fs::hard_link(&template, &path);
                let _ = std::fs::remove_file(&path);
                i += 1;
            }
        });
        let collector = DirCollector::new(dir.path());
        let deadline = std::time::Instant::now() + PATIENCE;
        let mut vanished = 0;
        let mut scrapes = 0;
        while scrapes < 300 || vanished == 0 && std::time::Instant::now() < deadline {
            let scrape = collector.collect().unwrap();
            for file in scrape.files.iter() {
                assert_ne!(file.state(), FileState::Bad, "{:?}", file.problem);
            }
            vanished += scrape.stats.files_vanished;
            assert!(scrape
                .encode(Format::Prometheus)
                .contains("requests_total{code=\"200\"} 5.0"));
            scrapes += 1;
        }
        assert!(
            vanished > 0,
            "no file vanished during {scrapes} scrapes: the race was not exercised"
        );
        eprintln!(
            "files_vanishing_during_collection: {vanished} vanished files seen in {scrapes} scrapes"
        );
    });
}

#[test]
fn multiprom_scrape_reports_every_bad_file_and_strict_fails() {
    let dir = temp_dir();
    write_good_files(dir.path());
    let baseline = outputs(&DirCollector::new(dir.path()).collect().unwrap());
    let cases = cases();
    for case in &cases {
        (case.make)(&path_of(dir.path(), case.file));
    }
    let scrape = |extra: &[&str]| {
        multiprom()
            .args(["scrape", "--dir"])
            .arg(dir.path())
            .args(extra)
            .output()
            .unwrap()
    };
    let out = scrape(&[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8(out.stdout).unwrap(), baseline.0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), cases.len(), "{stderr}");
    for case in &cases {
        let path = path_of(dir.path(), case.file);
        let needle = format!(
            "multiprom scrape: warning: skipped {}: offset {}: ",
            path.display(),
            (case.offset)()
        );
        let line = stderr
            .lines()
            .find(|l| l.starts_with(&needle))
            .unwrap_or_else(|| panic!("{}: no line starting {needle:?} in\n{stderr}", case.what));
        assert!(line.contains(case.reason), "{}: {line}", case.what);
    }

    let om = scrape(&["--format", "openmetrics"]);
    assert_eq!(om.status.code(), Some(0));
    assert_eq!(String::from_utf8(om.stdout).unwrap(), baseline.1);

    let strict = scrape(&["--strict"]);
    assert_eq!(strict.status.code(), Some(1));
    assert_eq!(String::from_utf8(strict.stdout).unwrap(), baseline.0);
    let stderr = String::from_utf8_lossy(&strict.stderr);
    assert!(
        stderr.ends_with(&format!(
            "multiprom scrape: {} bad file(s) skipped (--strict)\n",
            cases.len()
        )),
        "{stderr}"
    );
}
