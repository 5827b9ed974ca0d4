//! `ValueFiles`: what one `multiprom.MultiProcessValue()` class shares
//! among its values, as the closure of `prometheus_client`'s
//! `MultiProcessValue()` does: the process identifier, the open `*.db`
//! files (one per file prefix) and every value made, in creation order.
//!
//! Only the cold paths lock: making a value, closing the files, and
//! rebinding every value after the process identifier changed. Updates go
//! through each value's own slot ([`crate::value`]); what they ask here is
//! whether the identifier changed, which with `os.getpid` is one atomic
//! load of the fork generation.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;
use multiprom_format::fork::{fork_generation, watch_forks};
use multiprom_format::{
    ExemplarSlot, GaugeMode, MetricKind, ProcessFileError, ProcessFiles, ValueSlot, WriteError,
    DIR_ENV_VAR,
};
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::MutexExt;

use crate::value_core::ValueCore;

/// The shared state of one value class.
#[pyclass(frozen, module = "multiprom._native", name = "ValueFiles")]
pub(crate) struct ValueFiles {
    /// `process_identifier`, called to learn the current identifier.
    identifier: Py<PyAny>,
    /// Whether the identifier is `os.getpid`: it only changes across a
    /// fork, so it is called only when the fork generation moved.
    by_fork_generation: bool,
    /// The fork generation at which the identifier was last called.
    generation: AtomicU64,
    /// The identifier the files are named after, compared without a lock.
    current: ArcSwap<Identifier>,
    /// Files and values; locked only on cold paths, never while Python code
    /// runs (Python code may switch threads, and a fork then would leave
    /// the lock held in the child).
    state: Mutex<State>,
}

/// A process identifier: the object `process_identifier()` returned (its
/// text in file names, `format(identifier)`, is the files' identifier).
struct Identifier {
    object: Py<PyAny>,
}

struct State {
    /// This process's files under the current identifier (`*.db` files by
    /// prefix, exemplar files, opened on first use; an exemplar file that
    /// could not be opened is reported once, then its exemplars are
    /// dropped: they must never fail an update).
    files: ProcessFiles,
    /// Every value made since the files were last closed, in creation
    /// order: a new identifier re-creates their entries in this order.
    values: Vec<Arc<ValueCore>>,
}

impl State {
    fn new(identifier: &str) -> Self {
        State {
            files: ProcessFiles::new(identifier),
            values: Vec::new(),
        }
    }
}

#[pymethods]
impl ValueFiles {
    /// `process_identifier` is called once now, as `MultiProcessValue()`
    /// does; `is_getpid` says it is `os.getpid`.
    #[new]
    fn new(py: Python<'_>, process_identifier: Py<PyAny>, is_getpid: bool) -> PyResult<Self> {
        // Forks are counted from here on; should counting be impossible,
        // the identifier is called on every update instead.
        let generation = watch_forks().ok();
        let object = process_identifier.call0(py)?;
        let text = identifier_text(object.bind(py))?;
        let state = Mutex::new(State::new(&text));
        Ok(ValueFiles {
            identifier: process_identifier,
            by_fork_generation: is_getpid && generation.is_some(),
            generation: AtomicU64::new(generation.unwrap_or(0)),
            current: ArcSwap::from_pointee(Identifier { object }),
            state,
        })
    }

    /// Closes every file and forgets every value, as the cleanup
    /// `MultiProcessValue()` registers and `close_all_files()` do. Values
    /// made before can still be read, but no longer written.
    fn close_all(&self, py: Python<'_>) {
        let closed = {
            let mut state = self.lock(py);
            for value in &state.values {
                value.close();
            }
            let identifier = state.files.id().to_owned();
            std::mem::replace(&mut *state, State::new(&identifier))
        };
        // Dropped outside the lock.
        drop(closed);
    }
}

impl ValueFiles {
    fn lock(&self, py: Python<'_>) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock_py_attached(py)
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Rebinds every value if the process identifier changed since the
    /// last call: what `__check_for_pid_change` does before every update.
    #[inline]
    pub(crate) fn check_identifier(&self, py: Python<'_>) -> PyResult<()> {
        if self.by_fork_generation && fork_generation() == self.generation.load(Ordering::Relaxed) {
            return Ok(());
        }
        self.check_identifier_now(py)
    }

    #[cold]
    fn check_identifier_now(&self, py: Python<'_>) -> PyResult<()> {
        let generation = fork_generation();
        let actual = self.identifier.call0(py)?;
        let changed = self.current.load().object.bind(py).ne(actual.bind(py))?;
        if changed {
            self.rebind_all(py, actual)?;
        }
        self.generation.store(generation, Ordering::Relaxed);
        Ok(())
    }

    /// The identifier changed (a fork): close the files and re-create every
    /// value's entry, in creation order, in the new identifier's files,
    /// each value taking what its entry there holds (a file left by an
    /// earlier process with the same identifier is continued).
    fn rebind_all(&self, py: Python<'_>, actual: Py<PyAny>) -> PyResult<()> {
        let text = identifier_text(actual.bind(py))?;
        let dir = dir_from_environ(py)?;
        let previous = self.current.swap(Arc::new(Identifier { object: actual }));
        let mut set_aside = Vec::new();
        let (result, closed) = {
            let mut state = self.lock(py);
            // The new identifier's values and exemplars go to its own files.
            let closed = std::mem::replace(&mut state.files, ProcessFiles::new(text.as_str()));
            let State { files, values } = &mut *state;
            let mut result = Ok(());
            for (i, value) in values.iter().enumerate() {
                match open_slot(
                    files,
                    dir.as_ref(),
                    value.kind(),
                    value.key(),
                    &mut set_aside,
                ) {
                    Ok(slot) => value.bind(slot),
                    Err(error) => {
                        // Values not rebound must not write into the old
                        // files (after a fork: the parent's).
                        for value in &values[i..] {
                            value.close();
                        }
                        result = Err(error);
                        break;
                    }
                }
            }
            (result, closed)
        };
        drop((closed, previous));
        set_aside.iter().for_each(|note| report(py, note));
        result.map_err(|error| error.into_py(py))
    }

    /// A new value: its entry in the current identifier's file (created
    /// with value 0.0 if the file has none), remembered for rebinding.
    pub(crate) fn make_value(
        &self,
        py: Python<'_>,
        kind: MetricKind,
        key: String,
    ) -> PyResult<Arc<ValueCore>> {
        self.check_identifier(py)?;
        let dir = dir_from_environ(py)?;
        let mut set_aside = Vec::new();
        let mut state = self.lock(py);
        let made = match open_slot(&mut state.files, dir.as_ref(), kind, &key, &mut set_aside) {
            Ok(slot) => {
                let value = Arc::new(ValueCore::new(kind, key, slot));
                state.values.push(Arc::clone(&value));
                Ok(value)
            }
            Err(error) => Err(error),
        };
        drop(state);
        set_aside.iter().for_each(|note| report(py, note));
        made.map_err(|error| error.into_py(py))
    }
}

impl ValueFiles {
    /// The exemplar record of `value`'s entry in the current identifier's
    /// exemplar file, opening that file on first use. A failure is logged
    /// (once per file, or once per value for a full file) and gives `None`.
    pub(crate) fn exemplar_slot(&self, py: Python<'_>, value: &ValueCore) -> Option<ExemplarSlot> {
        let dir = match dir_from_environ(py) {
            Ok(Some(dir)) => dir,
            // The value itself was made, so the directory was there; a
            // program that unset the variable since loses its exemplars.
            Ok(None) | Err(_) => return None,
        };
        let (slot, failure) = {
            let mut state = self.lock(py);
            let writer = match state.files.exemplar_file(&dir, value.kind()) {
                Ok(writer) => writer,
                Err(error) => {
                    drop(state);
                    report(py, &format!("cannot keep exemplars: {error}; exemplars of this process's {} metrics are dropped, their values are not", value.kind()));
                    return None;
                }
            };
            match writer.map(|writer| writer.slot(value.key())) {
                Some(Ok(slot)) => (Some(slot), None),
                Some(Err(error)) => (None, Some(error.to_string())),
                None => (None, None),
            }
        };
        if let Some(error) = failure {
            report(py, &format!("cannot keep an exemplar: {error}"));
        }
        slot
    }
}

/// Logs `message` to the `multiprom` logger, where the package reports
/// what it skipped; a failure to log is ignored (it must not fail an
/// update either).
pub(crate) fn report(py: Python<'_>, message: &str) {
    let _ = py.import("logging").and_then(|logging| {
        logging
            .call_method1("getLogger", ("multiprom",))?
            .call_method1("warning", ("%s", message))
    });
}

/// Why a value's entry could not be made: turned into a Python exception
/// once the state lock is released.
enum OpenError {
    /// `PROMETHEUS_MULTIPROC_DIR` is not set.
    NoDir,
    /// The identifier cannot be part of a file name multiprom writes.
    BadIdentifier(String, multiprom_format::FileNameError),
    /// Opening, growing or reading the file failed.
    Write(WriteError),
}

impl OpenError {
    fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            // What os.path.join(None, ...) raises in Python.
            OpenError::NoDir => PyTypeError::new_err(format!(
                "{DIR_ENV_VAR} is not set: expected str, bytes or os.PathLike object, not NoneType"
            )),
            OpenError::BadIdentifier(identifier, error) => PyValueError::new_err(format!(
                "multiprom cannot name a file after process identifier {identifier:?}: {error}"
            )),
            OpenError::Write(error) => write_error(py, error),
        }
    }
}

/// The slot of `value`'s entry, opening its file if it is not open yet. A
/// file set aside as corrupt (see [`open_writer`]) is noted in `set_aside`,
/// to be logged once the state lock is released.
fn open_slot(
    files: &mut ProcessFiles,
    dir: Option<&PathBuf>,
    kind: MetricKind,
    key: &str,
    set_aside: &mut Vec<String>,
) -> Result<ValueSlot, OpenError> {
    // As Python, the directory is looked up only to open a file.
    if let Some(file) = files.open_value_file(kind) {
        return file.slot(key).map_err(OpenError::Write);
    }
    let dir = dir.ok_or(OpenError::NoDir)?;
    let identifier = files.id().to_owned();
    // A corrupt file left there by an earlier process with the same
    // identifier is moved aside and a new one begun, as every multiprom
    // writer does; what was moved is noted in `set_aside`.
    let (file, moved) = files.value_file(dir, kind).map_err(|error| match error {
        ProcessFileError::BadIdentifier(e) => OpenError::BadIdentifier(identifier, e),
        ProcessFileError::Write(e) => OpenError::Write(e),
    })?;
    set_aside.extend(moved.map(|moved| moved.to_string()));
    file.slot(key).map_err(OpenError::Write)
}

/// `os.environ.get('PROMETHEUS_MULTIPROC_DIR')`.
fn dir_from_environ(py: Python<'_>) -> PyResult<Option<PathBuf>> {
    py.import("os")?
        .getattr("environ")?
        .call_method1("get", (DIR_ENV_VAR,))?
        .extract()
}

/// `format(identifier)`: the text `'{}_{}.db'.format(prefix, identifier)`
/// puts in the file name.
fn identifier_text(identifier: &Bound<'_, PyAny>) -> PyResult<String> {
    identifier
        .py()
        .import("builtins")?
        .getattr("format")?
        .call1((identifier,))?
        .extract()
}

/// The file kind of a value: `typ`, or `gauge_{multiprocess_mode}`.
pub(crate) fn metric_kind(typ: &str, multiprocess_mode: &str) -> PyResult<MetricKind> {
    let kind = match typ {
        "counter" => MetricKind::Counter,
        "histogram" => MetricKind::Histogram,
        "summary" => MetricKind::Summary,
        "gauge" => MetricKind::Gauge(multiprocess_mode.parse::<GaugeMode>().map_err(|e| {
            PyValueError::new_err(format!("multiprom cannot write gauge files of mode {multiprocess_mode:?}: {e}"))
        })?),
        other => {
            return Err(PyValueError::new_err(format!(
                "multiprom cannot write files of metric type {other:?} (only counter, gauge, histogram and summary)"
            )))
        }
    };
    Ok(kind)
}

/// A write error as the Python exception closest to what
/// `prometheus_client` raises for it: `OSError` (with errno and file name,
/// so `FileNotFoundError` for a missing directory) for the operating
/// system's errors, `RuntimeError` for a corrupt file.
fn write_error(py: Python<'_>, error: WriteError) -> PyErr {
    match error {
        WriteError::Io { path, source } => match source.raw_os_error() {
            Some(errno) => {
                let strerror = py
                    .import("os")
                    .and_then(|os| os.getattr("strerror")?.call1((errno,))?.extract::<String>())
                    .unwrap_or_else(|_| source.to_string());
                // The file name as a `str`, as prometheus_client's
                // `os.path.join` gives it.
                PyOSError::new_err((errno, strerror, path.into_os_string()))
            }
            None => PyOSError::new_err(format!("{}: {source}", path.display())),
        },
        WriteError::Corrupt(error) => PyRuntimeError::new_err(format!(
            "multiprom: refusing to write into a corrupt file: {error}"
        )),
        other => PyOSError::new_err(other.to_string()),
    }
}
