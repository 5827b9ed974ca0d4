//! The compaction journal: which files one fold absorbs, and the identity of
//! the file that holds them afterwards.
//!
//! It is written completely under a temporary name, flushed, and renamed
//! into place, so a journal that exists is whole. Text, one fact a line:
//!
//! ```text
//! multiprom compaction journal 1
//! target counter_compacted.db
//! new 2049 1835021
//! folded counter_4242.db
//! folded counter_4243.db
//! end
//! ```

use std::io::Write;
use std::path::Path;

use multiprom_format::{FileIdentity, FileName};

use super::error::{CompactError, JournalError, MAGIC};
use super::sync_dir::sync_dir;

/// The journal's name inside the staging directory.
pub(crate) const JOURNAL: &str = "journal";
/// The journal while it is being written.
pub(crate) const JOURNAL_TMP: &str = "journal.tmp";

/// One fold, as recorded before it is committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Journal {
    /// The compacted file being replaced (`counter_compacted.db`, ...).
    pub(crate) target: FileName,
    /// Device and inode of the new compacted file. The fold is committed
    /// exactly when `target` names this file.
    pub(crate) new: FileIdentity,
    /// The staged files whose values the new file holds.
    pub(crate) folded: Vec<FileName>,
}

impl Journal {
    /// Writes the journal durably into `staging`: when this returns, a crash
    /// leaves either no journal or this one.
    pub(crate) fn write(&self, staging: &Path) -> Result<(), CompactError> {
        let tmp = staging.join(JOURNAL_TMP);
        let path = staging.join(JOURNAL);
        let mut text = format!(
            "{MAGIC}\ntarget {}\nnew {} {}\n",
            self.target, self.new.dev, self.new.ino
        );
        for name in &self.folded {
            text.push_str("folded ");
            text.push_str(&name.to_string());
            text.push('\n');
        }
        text.push_str("end\n");
        let io = |source| CompactError::Io {
            path: tmp.clone(),
            source,
        };
        let mut file = std::fs::File::create(&tmp).map_err(io)?;
        file.write_all(text.as_bytes()).map_err(io)?;
        file.sync_all().map_err(io)?;
        drop(file);
        std::fs::rename(&tmp, &path).map_err(|source| CompactError::Io {
            path: path.clone(),
            source,
        })?;
        sync_dir(staging)
    }

    /// The journal in `staging`, if there is one.
    pub(crate) fn read(staging: &Path) -> Result<Option<Journal>, CompactError> {
        let path = staging.join(JOURNAL);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(CompactError::Io { path, source }),
        };
        Journal::parse(&text)
            .map(Some)
            .map_err(|reason| CompactError::Journal { path, reason })
    }

    fn parse(text: &str) -> Result<Journal, JournalError> {
        let mut lines = text.lines();
        if lines.next() != Some(MAGIC) {
            return Err(JournalError::NotAJournal);
        }
        let name = |line: Option<&str>, field: &'static str| -> Result<FileName, JournalError> {
            let value = line
                .and_then(|l| l.strip_prefix(field))
                .and_then(|l| l.strip_prefix(' '))
                .ok_or(JournalError::MissingLine(field))?;
            FileName::parse(value).map_err(|source| JournalError::BadName {
                field,
                value: value.to_owned(),
                source,
            })
        };
        let target = name(lines.next(), "target")?;
        let new = lines
            .next()
            .and_then(|l| l.strip_prefix("new "))
            .and_then(|l| l.split_once(' '))
            .and_then(|(dev, ino)| {
                Some(FileIdentity {
                    dev: dev.parse().ok()?,
                    ino: ino.parse().ok()?,
                })
            })
            .ok_or(JournalError::BadNewLine)?;
        let mut folded = Vec::new();
        loop {
            match lines.next() {
                Some("end") => break,
                line @ Some(_) => folded.push(name(line, "folded")?),
                None => return Err(JournalError::Incomplete),
            }
        }
        Ok(Journal {
            target,
            new,
            folded,
        })
    }

    /// Removes the journal (and any half-written one), durably.
    pub(crate) fn remove(staging: &Path) -> Result<(), CompactError> {
        for name in [JOURNAL, JOURNAL_TMP] {
            let path = staging.join(name);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(CompactError::Io { path, source }),
            }
        }
        sync_dir(staging)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_damage() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal {
            target: "counter_compacted.db".parse().unwrap(),
            new: FileIdentity { dev: 2049, ino: 77 },
            folded: vec![
                "counter_1.db".parse().unwrap(),
                "counter_2.db".parse().unwrap(),
            ],
        };
        assert_eq!(Journal::read(dir.path()).unwrap(), None);
        journal.write(dir.path()).unwrap();
        assert_eq!(Journal::read(dir.path()).unwrap(), Some(journal));
        let text = std::fs::read_to_string(dir.path().join(JOURNAL)).unwrap();
        assert_eq!(
            text,
            "multiprom compaction journal 1\ntarget counter_compacted.db\nnew 2049 77\n\
             folded counter_1.db\nfolded counter_2.db\nend\n"
        );
        let cut = &text[..text.len() - 4];
        assert_eq!(Journal::parse(cut), Err(JournalError::Incomplete));
        assert_eq!(
            JournalError::Incomplete.to_string(),
            "no \"end\" line: the journal is incomplete"
        );
        assert_eq!(Journal::parse("nonsense"), Err(JournalError::NotAJournal));
        Journal::remove(dir.path()).unwrap();
        assert_eq!(Journal::read(dir.path()).unwrap(), None);
    }
}
