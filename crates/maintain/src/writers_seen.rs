//! Whether the directory's writers run where this process can see them, so
//! that a file whose pid no process here has is a file whose writer is gone
//! (see `DirCollector::settle_exited_writers`).
//!
//! The proof is positive: some process visible here has a file of the
//! directory open or mapped. In another pid namespace (a sidecar container
//! without a shared process namespace) no writer ever shows up, so no file
//! is ever taken for a gone writer's and every value is read on every
//! scrape, as without this. Looking costs a walk of every process's open
//! files and maps, so it runs on a thread of its own, at most once a minute,
//! until a writer has been seen; the answer then holds for the life of the
//! endpoint.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use multiprom_format::FileIdentity;

use crate::process::holders;

/// How often to look again while no writer has been seen.
const LOOK_EVERY: Duration = Duration::from_secs(60);

/// Whether a writer of one directory has been seen, and when it was last
/// looked for.
#[derive(Debug)]
pub struct WritersSeen {
    dir: PathBuf,
    seen: AtomicBool,
    last_look: Mutex<Option<Instant>>,
}

impl WritersSeen {
    /// Nothing seen yet, nothing looked at: see [`WritersSeen::look_if_due`].
    #[must_use]
    pub fn new(dir: &Path) -> Self {
        WritersSeen {
            dir: dir.to_path_buf(),
            seen: AtomicBool::new(false),
            last_look: Mutex::new(None),
        }
    }

    /// Whether a writer of the directory has been seen holding its file.
    #[must_use]
    pub fn seen(&self) -> bool {
        self.seen.load(Ordering::Acquire)
    }

    /// Starts a look on a thread of its own, unless a writer was seen
    /// already or the last look was less than a minute ago.
    pub fn look_if_due(self: &Arc<Self>) {
        if self.seen() {
            return;
        }
        {
            let mut last = self
                .last_look
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if last.is_some_and(|at| at.elapsed() < LOOK_EVERY) {
                return;
            }
            *last = Some(Instant::now());
        }
        let this = Arc::clone(self);
        // A thread that cannot be started only means no look this time.
        let _ = std::thread::Builder::new()
            .name("multiprom-writers".into())
            .spawn(move || {
                if writer_holds_a_file(&this.dir) {
                    tracing::debug!(
                        "{}: its writers are visible here; files of exited writers are read once more, then only when they change",
                        this.dir.display()
                    );
                    this.seen.store(true, Ordering::Release);
                }
            });
    }
}

/// Whether some process visible here (this one aside) has one of the
/// `*.db` files of `dir` open or mapped.
fn writer_holds_a_file(dir: &Path) -> bool {
    let Ok(listing) = multiprom_collector::scan_dir(dir) else {
        return false;
    };
    let files: HashSet<FileIdentity> = listing
        .iter()
        .filter_map(|path| std::fs::metadata(path).ok())
        .map(|meta| FileIdentity::from_metadata(&meta))
        .collect();
    holders(&files).is_ok_and(|found| !found.held.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_nobody_holds_shows_no_writer_and_one_held_does() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("counter_1.db");
        std::fs::write(&file, [0u8; 16]).unwrap();
        // Only this process holds it, and this process does not count.
        let open = std::fs::File::open(&file).unwrap();
        assert!(!writer_holds_a_file(dir.path()));
        drop(open);
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg("exec 3<\"$0\"; sleep 30")
            .arg(&file)
            .spawn()
            .unwrap();
        // Give the shell a moment to open it; bounded.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut held = false;
        while !held && Instant::now() < deadline {
            held = writer_holds_a_file(dir.path());
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(held, "another process holding a file is a writer seen");
    }
}
