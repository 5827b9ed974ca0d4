//! [`ProcessFiles`]: the files one process writes under one identifier.
//!
//! Every writer of multiprom (the Rust client's registries, the Python
//! package's value class and its native histograms) keeps the same table:
//! a `*.db` file per file prefix, an exemplar file per prefix, the native
//! histogram file, each opened on first use under the process identifier,
//! all dropped together when the identifier changes (a fork). One type, so
//! that they open, name and give up on files alike: a corrupt `*.db` file
//! left under the identifier is set aside ([`FileWriter::open_setting_aside`]),
//! and an exemplar file that cannot be opened is given up on until the
//! identifier changes (an exemplar must never fail a value's update).

use std::collections::BTreeMap;
use std::path::Path;

use crate::exemplar_writer::ExemplarWriter;
use crate::file_name::{FileName, FileNameError, MetricKind};
use crate::native_writer::NativeHistogramWriter;
use crate::writer::{FileWriter, SetAside};
use crate::WriteError;

/// Why a file of [`ProcessFiles`] could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ProcessFileError {
    /// The identifier cannot be part of a file name (`_` or `/` in it, say).
    #[error("{0}")]
    BadIdentifier(#[from] FileNameError),
    /// Opening, growing or reading the file failed.
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// The files one process writes under one identifier, opened on first use.
/// Made with nothing open; dropping it only unmaps and closes, in this
/// process (a forked child drops what it inherited without touching its
/// parent's files).
#[derive(Debug)]
pub struct ProcessFiles {
    id: String,
    values: BTreeMap<MetricKind, FileWriter>,
    /// `None` for a prefix whose exemplar file could not be opened.
    exemplars: BTreeMap<MetricKind, Option<ExemplarWriter>>,
    natives: Option<NativeHistogramWriter>,
}

impl ProcessFiles {
    /// The files of identifier `id`, none open. Touches nothing.
    #[must_use]
    pub fn new(id: impl Into<String>) -> Self {
        ProcessFiles {
            id: id.into(),
            values: BTreeMap::new(),
            exemplars: BTreeMap::new(),
            natives: None,
        }
    }

    /// The identifier the files are named after.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The `*.db` file of `kind` in `dir`, opened if it is not open yet.
    /// A corrupt file left there under this identifier is moved aside and
    /// a new one begun: what was moved is returned with it, for the caller
    /// to report.
    pub fn value_file(
        &mut self,
        dir: &Path,
        kind: MetricKind,
    ) -> Result<(&mut FileWriter, Option<SetAside>), ProcessFileError> {
        use std::collections::btree_map::Entry;
        match self.values.entry(kind) {
            Entry::Occupied(open) => Ok((open.into_mut(), None)),
            Entry::Vacant(vacant) => {
                let name = FileName::new(kind, self.id.as_str())?;
                let (writer, moved) = FileWriter::open_setting_aside(dir, &name)?;
                Ok((vacant.insert(writer), moved))
            }
        }
    }

    /// The `*.db` file of `kind`, if it is open.
    pub fn open_value_file(&mut self, kind: MetricKind) -> Option<&mut FileWriter> {
        self.values.get_mut(&kind)
    }

    /// The exemplar file of `kind` in `dir`, opened (with the `exemplars`
    /// subdirectory) if it is not open yet. An error is returned once: the
    /// file is then given up on, `Ok(None)`, until these files are
    /// dropped.
    pub fn exemplar_file(
        &mut self,
        dir: &Path,
        kind: MetricKind,
    ) -> Result<Option<&ExemplarWriter>, ProcessFileError> {
        use std::collections::btree_map::Entry;
        match self.exemplars.entry(kind) {
            Entry::Occupied(open) => Ok(open.into_mut().as_ref()),
            Entry::Vacant(vacant) => {
                let opened = FileName::new(kind, self.id.as_str())
                    .map_err(ProcessFileError::from)
                    .and_then(|name| Ok(ExemplarWriter::open(dir, &name)?));
                match opened {
                    Ok(writer) => Ok(vacant.insert(Some(writer)).as_ref()),
                    Err(error) => {
                        vacant.insert(None);
                        Err(error)
                    }
                }
            }
        }
    }

    /// Whether the native histogram file is open.
    #[must_use]
    pub fn has_native_file(&self) -> bool {
        self.natives.is_some()
    }

    /// The native histogram file in `dir` (the companion of the histogram
    /// `*.db` file), opened if it is not open yet.
    pub fn native_file(&mut self, dir: &Path) -> Result<&NativeHistogramWriter, ProcessFileError> {
        match &mut self.natives {
            Some(writer) => Ok(writer),
            empty => {
                let name = FileName::new(MetricKind::Histogram, self.id.as_str())?;
                Ok(empty.insert(NativeHistogramWriter::open(dir, &name)?))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode_key;

    #[test]
    fn files_open_on_first_use_under_the_identifier() {
        let dir = tempfile::tempdir().unwrap();
        let mut files = ProcessFiles::new("7");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let key = encode_key("c", "c_total", [], "C.");
        let (file, moved) = files.value_file(dir.path(), MetricKind::Counter).unwrap();
        assert!(moved.is_none());
        file.slot(&key).unwrap().set(3.0);
        assert!(dir.path().join("counter_7.db").exists());
        assert!(files
            .exemplar_file(dir.path(), MetricKind::Counter)
            .unwrap()
            .is_some());
        assert!(dir.path().join("exemplars/counter_7.exemplars").exists());
        files.native_file(dir.path()).unwrap();
        assert!(dir
            .path()
            .join("native-histograms/histogram_7.native")
            .exists());
    }

    #[test]
    fn a_corrupt_file_is_set_aside_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("gauge_all_7.db"), [0xff; 64]).unwrap();
        let mut files = ProcessFiles::new("7");
        let (_, moved) = files
            .value_file(dir.path(), MetricKind::Gauge(crate::GaugeMode::All))
            .unwrap();
        let moved = moved.expect("set aside");
        assert!(moved.moved_to.exists());
        assert!(dir.path().join("gauge_all_7.db").exists());
    }

    #[test]
    fn an_exemplar_file_that_cannot_be_opened_is_given_up_on_once() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the subdirectory should be.
        std::fs::write(dir.path().join("exemplars"), b"").unwrap();
        let mut files = ProcessFiles::new("7");
        assert!(files
            .exemplar_file(dir.path(), MetricKind::Counter)
            .is_err());
        assert!(matches!(
            files.exemplar_file(dir.path(), MetricKind::Counter),
            Ok(None)
        ));
    }

    #[test]
    fn an_identifier_no_file_can_be_named_after_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut files = ProcessFiles::new("a_b");
        assert!(matches!(
            files.value_file(dir.path(), MetricKind::Counter),
            Err(ProcessFileError::BadIdentifier(_))
        ));
    }
}
