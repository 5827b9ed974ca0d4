//! What a file that is not a metrics file is, for `inspect`'s header line.
//!
//! A handful of signatures, not a general `file(1)`: the point is to name the
//! things that end up in a multiprocess directory by mistake (the shelve/dbm
//! `*.db` files of prometheus_client before 0.4, SQLite databases, logs and
//! other text, archives, programs), and otherwise to say it is binary data.

use std::io::Read;
use std::path::Path;

/// What binary data nothing here recognises is called.
pub(super) const UNKNOWN_BINARY: &str = "binary data of an unknown kind";

/// How many leading bytes are looked at.
const SNIFF_LEN: usize = 512;

/// Describes the file at `path`, or says why it cannot be read. Only a
/// regular file is opened, and without blocking: opening a named pipe would
/// wait for a writer forever.
pub(super) fn describe(path: &Path) -> String {
    use std::os::unix::fs::FileTypeExt;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) => return format!("cannot read: {err}"),
    };
    let kind = meta.file_type();
    if kind.is_symlink() {
        return match std::fs::metadata(path) {
            Ok(target) if target.is_file() => describe_file(path),
            Ok(_) => "a symbolic link to something that is not a file".to_owned(),
            Err(err) if err.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                "a symbolic link loop".to_owned()
            }
            Err(_) => "a dangling symbolic link".to_owned(),
        };
    }
    if kind.is_dir() {
        return "a directory".to_owned();
    }
    if kind.is_fifo() {
        return "a named pipe (FIFO)".to_owned();
    }
    if kind.is_socket() {
        return "a socket".to_owned();
    }
    if kind.is_block_device() || kind.is_char_device() {
        return "a device".to_owned();
    }
    describe_file(path)
}

fn describe_file(path: &Path) -> String {
    let mut start = Vec::with_capacity(SNIFF_LEN);
    // Opened as the collector opens files: if the path was swapped for a
    // pipe or a link to a device since it was looked at, nothing but a
    // regular file is opened.
    // The reason alone: the header line already names the file.
    let file = match multiprom_format::open_for_read(path) {
        Ok((file, meta)) if meta.len() > 0 => file,
        // Nothing to look at; and a file of no size may be one whose reads
        // take something away (a link to `/proc/kmsg` consumes the kernel's
        // messages), so it is not read: the collector does not read it
        // either.
        Ok(_) => return "an empty file".to_owned(),
        Err(err) => return err.kind.to_string(),
    };
    match file.take(SNIFF_LEN as u64).read_to_end(&mut start) {
        Ok(_) => describe_bytes(&start).to_owned(),
        Err(err) => format!("cannot read: {err}"),
    }
}

/// Names what `start` (a file's first bytes) looks like.
pub(super) fn describe_bytes(start: &[u8]) -> &'static str {
    const SIGNATURES: &[(usize, &[u8], &str)] = &[
        (0, b"SQLite format 3\0", "an SQLite 3 database"),
        // Berkeley DB hash/btree magic (dbm/shelve files of prometheus_client
        // before 0.4), in both byte orders.
        (
            12,
            &[0x61, 0x15, 0x06, 0x00],
            "a Berkeley DB file (old prometheus_client shelve files were these)",
        ),
        (
            12,
            &[0x00, 0x06, 0x15, 0x61],
            "a Berkeley DB file (old prometheus_client shelve files were these)",
        ),
        (
            12,
            &[0x62, 0x31, 0x05, 0x00],
            "a Berkeley DB file (old prometheus_client shelve files were these)",
        ),
        (
            12,
            &[0x00, 0x05, 0x31, 0x62],
            "a Berkeley DB file (old prometheus_client shelve files were these)",
        ),
        (0, b"GDBM", "a GNU dbm file"),
        (0, &[0x1f, 0x8b], "gzip-compressed data"),
        (0, b"PK\x03\x04", "a zip archive"),
        (0, b"\x7fELF", "an ELF executable or library"),
        (0, b"%PDF", "a PDF document"),
        (0, b"\x89PNG", "a PNG image"),
    ];
    if start.is_empty() {
        return "an empty file";
    }
    for (offset, magic, what) in SIGNATURES {
        if start.get(*offset..offset + magic.len()) == Some(*magic) {
            return what;
        }
    }
    if start.iter().all(|&b| b == 0) {
        return "all zero bytes";
    }
    // A multi-byte character may be cut at the end of the sample.
    let text = match std::str::from_utf8(start) {
        Ok(text) => Some(text),
        Err(err) if err.error_len().is_none() => {
            std::str::from_utf8(&start[..err.valid_up_to()]).ok()
        }
        Err(_) => None,
    };
    if text.is_some_and(|t| t.chars().all(|c| !c.is_control() || c.is_whitespace())) {
        return "text";
    }
    UNKNOWN_BINARY
}

#[cfg(test)]
mod tests {
    use super::{describe, describe_bytes};

    #[test]
    fn never_opens_what_is_not_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("counter_1.db");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
        )
        .unwrap();
        // Opening it for reading would block until a writer comes: asked on
        // a thread, so a regression fails here instead of hanging.
        let (tx, rx) = std::sync::mpsc::channel();
        let asked = fifo.clone();
        std::thread::spawn(move || tx.send(describe(&asked)));
        let answer = rx.recv_timeout(std::time::Duration::from_secs(30));
        if answer.is_err() {
            // Let the blocked open return so the test process can exit.
            drop(std::fs::OpenOptions::new().write(true).open(&fifo));
        }
        assert_eq!(answer.as_deref(), Ok("a named pipe (FIFO)"));
        assert_eq!(describe(dir.path()), "a directory");
        let link = dir.path().join("counter_2.db");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).unwrap();
        assert_eq!(describe(&link), "a dangling symbolic link");
        let text = dir.path().join("counter_3.db");
        std::fs::write(&text, "hello\n").unwrap();
        assert_eq!(describe(&text), "text");
    }

    #[test]
    fn names_what_it_knows() {
        assert_eq!(describe_bytes(b""), "an empty file");
        assert_eq!(
            describe_bytes(b"SQLite format 3\0\x10\0"),
            "an SQLite 3 database"
        );
        let mut bdb = vec![0u8; 16];
        bdb[12..].copy_from_slice(&[0x61, 0x15, 0x06, 0x00]);
        assert!(describe_bytes(&bdb).starts_with("a Berkeley DB file"));
        assert_eq!(describe_bytes(b"2024-01-01 INFO started\n"), "text");
        assert_eq!(describe_bytes("caf\u{e9}".as_bytes()), "text");
        assert_eq!(describe_bytes(&"\u{e9}".as_bytes()[..1]), "text");
        assert_eq!(describe_bytes(&[0, 0, 0]), "all zero bytes");
        assert_eq!(
            describe_bytes(&[1, 2, 0xff]),
            "binary data of an unknown kind"
        );
        assert_eq!(describe_bytes(b"\x1f\x8b\x08"), "gzip-compressed data");
    }
}
