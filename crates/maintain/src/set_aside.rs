//! Taking files out of a directory without racing a process that opens one
//! of them: move each aside, let an `open` already under way finish, look
//! for holders again, and put back whatever someone holds.
//!
//! Reaping (removing a dead process's live gauges) and compaction (folding
//! exited workers' files) both take files away that a new process with a
//! reused pid may open at the very moment they move. A check for holders
//! *before* the move cannot see such an `open`; one *after* it can, once the
//! `open` that resolved the old name has installed its file descriptor,
//! which [`SETTLE`] leaves time for. Nothing can open the file by its old
//! name after the move, so a file nobody holds after the settle is free.

use std::collections::HashSet;
use std::io;
use std::path::Path;
use std::time::Duration;

use multiprom_format::FileIdentity;
use rustix::fs::{renameat_with, RenameFlags, CWD};

/// How long files sit aside before their holders are looked for: an `open`
/// that resolved the old name just before the move has installed its file
/// descriptor well within this.
pub(crate) const SETTLE: Duration = Duration::from_millis(20);

/// Where files go aside and how they come back.
pub(crate) trait Aside<T> {
    /// Moves `item` out of the directory's namespace; returns the identity
    /// of the file moved.
    fn move_aside(&self, item: &T) -> io::Result<FileIdentity>;
    /// Moves `item` back into the directory.
    fn put_back(&self, item: &T) -> io::Result<()>;
}

/// What became of the items after the settle.
#[derive(Debug)]
pub(crate) struct SetAside<T> {
    /// Moved aside and held by nobody: the caller's to remove or fold.
    pub(crate) free: Vec<T>,
    /// Held by some process: back in place.
    pub(crate) held: Vec<T>,
    /// Not moved (gone meanwhile, or the move failed): untouched.
    pub(crate) not_moved: Vec<(T, io::Error)>,
    /// Held, but could not be put back: still aside.
    pub(crate) not_put_back: Vec<(T, io::Error)>,
}

/// Moves every item aside, waits [`SETTLE`], asks `held` which of the moved
/// files some process holds (it gets each moved item with its file's
/// identity, and answers the identities held), and puts those back.
///
/// If `held` cannot tell, every moved item is put back and its error is
/// returned: without knowing, nothing may be taken.
pub(crate) fn set_aside<T>(
    items: Vec<T>,
    aside: &impl Aside<T>,
    held: impl FnOnce(&[(T, FileIdentity)]) -> io::Result<HashSet<FileIdentity>>,
) -> io::Result<SetAside<T>> {
    let mut moved = Vec::with_capacity(items.len());
    let mut not_moved = Vec::new();
    for item in items {
        match aside.move_aside(&item) {
            Ok(id) => moved.push((item, id)),
            Err(e) => not_moved.push((item, e)),
        }
    }
    let mut outcome = SetAside {
        free: Vec::new(),
        held: Vec::new(),
        not_moved,
        not_put_back: Vec::new(),
    };
    if moved.is_empty() {
        return Ok(outcome);
    }
    std::thread::sleep(SETTLE);
    let busy = match held(&moved) {
        Ok(busy) => busy,
        Err(e) => {
            for (item, _) in &moved {
                // Left aside, it is put back by the next recovery.
                let _ = aside.put_back(item);
            }
            return Err(e);
        }
    };
    for (item, id) in moved {
        if !busy.contains(&id) {
            outcome.free.push(item);
            continue;
        }
        match aside.put_back(&item) {
            Ok(()) => outcome.held.push(item),
            Err(e) => outcome.not_put_back.push((item, e)),
        }
    }
    Ok(outcome)
}

/// `rename` that fails with `AlreadyExists` instead of replacing: a file a
/// writer has just created must never be overwritten. Where the file system
/// has no `RENAME_NOREPLACE`, a hard link (which never replaces) and an
/// unlink do the same in two steps.
pub(crate) fn move_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
            std::fs::hard_link(from, to)?;
            std::fs::remove_file(from)
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::path::PathBuf;

    /// Moves `<name>` to `.<name>.aside` in one directory.
    struct Hidden(PathBuf);

    impl Aside<String> for Hidden {
        fn move_aside(&self, name: &String) -> io::Result<FileIdentity> {
            let to = self.0.join(format!(".{name}.aside"));
            move_no_replace(&self.0.join(name), &to)?;
            FileIdentity::of(&to)
        }
        fn put_back(&self, name: &String) -> io::Result<()> {
            move_no_replace(&self.0.join(format!(".{name}.aside")), &self.0.join(name))
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn held_files_go_back_free_ones_stay_aside_missing_ones_are_untouched() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a", "b"] {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        let held_id = FileIdentity::of(&dir.path().join("b")).unwrap();
        let asked = RefCell::new(Vec::new());
        let outcome = set_aside(
            vec!["a".to_owned(), "b".to_owned(), "gone".to_owned()],
            &Hidden(dir.path().to_owned()),
            |moved| {
                asked
                    .borrow_mut()
                    .extend(moved.iter().map(|(n, _)| n.clone()));
                Ok(HashSet::from([held_id]))
            },
        )
        .unwrap();
        assert_eq!(outcome.free, ["a"]);
        assert_eq!(outcome.held, ["b"]);
        assert_eq!(outcome.not_moved.len(), 1);
        assert!(outcome.not_put_back.is_empty());
        assert_eq!(
            *asked.borrow(),
            ["a", "b"],
            "only moved files are asked about"
        );
        assert_eq!(names(dir.path()), [".a.aside", "b"]);
    }

    #[test]
    fn without_an_answer_about_holders_everything_goes_back() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), b"x").unwrap();
        let err = set_aside(vec!["a".to_owned()], &Hidden(dir.path().to_owned()), |_| {
            Err(io::Error::other("no /proc"))
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "no /proc");
        assert_eq!(names(dir.path()), ["a"]);
    }
}
