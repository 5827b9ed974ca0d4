//! `multiprom._native.NativeSeries`: one native histogram series of a
//! prometheus_client `Histogram` (or child), recorded in this process's
//! native histogram file beside the classic buckets.
//!
//! `observe` is the hot path: the epoch's two atomic loads (fork
//! generation, closes), one pointer load and the series' own lock-free
//! recording. The file is opened on the first observation (or by
//! `open()`), never by the constructor, and again after a fork, in the
//! child's own file, or after `close_all_multiprocess_files()`.
//!
//! Native recording must never cost the application its classic
//! observation: every failure (no directory, an unwritable one, a full
//! file, a value that is not a number) is logged once per process and the
//! call returns normally; a series that cannot be opened stops trying
//! until the next fork.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use multiprom_format::fork::watch_forks;
use multiprom_format::native_buckets::DEFAULT_ZERO_THRESHOLD;
use multiprom_format::{encode_key, NativeHistogramConfig, NativeSeries, DIR_ENV_VAR};
use pyo3::prelude::*;

use crate::native_files::{self, Epoch};
use crate::value_files::report;

/// Whether a native failure was logged already: once per process is
/// enough to say native data is being lost; more would flood the log of a
/// busy application.
static WARNED: AtomicBool = AtomicBool::new(false);

/// One native histogram series.
#[pyclass(frozen, module = "multiprom._native", name = "NativeSeries")]
pub(crate) struct NativeSeriesHandle {
    /// The `*.db` key form: name as family and sample, labels, help.
    key: Box<str>,
    config: NativeHistogramConfig,
    /// Where observations go in the epoch it was made in; `None` until
    /// the first observation.
    binding: ArcSwapOption<Binding>,
}

struct Binding {
    epoch: Epoch,
    /// `None`: the series could not be opened in this epoch (logged).
    series: Option<NativeSeries>,
}

#[pymethods]
impl NativeSeriesHandle {
    /// The series of histogram `name` with `labelnames` = `labelvalues`
    /// and help `documentation`, with the given schema (-4 to 8), bucket
    /// limit and zero threshold (`None`: client_golang's 2^-128).
    ///
    /// `key`, when given, is the series' key as `prometheus_client`'s
    /// `mmap_key(name, name, labelnames, labelvalues, documentation)` makes
    /// it, used instead of the one made of the other arguments: for text no
    /// `str` of Rust can hold (a lone surrogate), which its `json.dumps`
    /// escapes.
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (name, labelnames, labelvalues, documentation, schema = 3, max_buckets = 160, zero_threshold = None, key = None))]
    fn new(
        name: &str,
        labelnames: Vec<String>,
        labelvalues: Vec<String>,
        documentation: &str,
        schema: i8,
        max_buckets: u32,
        zero_threshold: Option<f64>,
        key: Option<String>,
    ) -> Self {
        // Forks are counted from here on (idempotent). Should counting be
        // impossible, the generation never moves and a forked child keeps
        // its parent's series: refuse to record at all rather than that.
        let forks_counted = watch_forks().is_ok();
        let labels = labelnames
            .iter()
            .zip(&labelvalues)
            .map(|(name, value)| (name.as_str(), value.as_str()));
        let binding = (!forks_counted).then(|| {
            Arc::new(Binding {
                epoch: native_files::epoch(),
                series: None,
            })
        });
        NativeSeriesHandle {
            key: key
                .unwrap_or_else(|| encode_key(name, name, labels, documentation))
                .into_boxed_str(),
            config: NativeHistogramConfig {
                schema,
                zero_threshold: zero_threshold.unwrap_or(DEFAULT_ZERO_THRESHOLD),
                max_buckets,
            },
            binding: ArcSwapOption::new(binding),
        }
    }

    /// Records `value`. Never raises.
    fn observe(&self, py: Python<'_>, value: &Bound<'_, PyAny>) {
        match value.extract::<f64>() {
            Ok(value) => self.record(py, value),
            Err(error) => warn_once(py, &format!("{value}: {error}")),
        }
    }

    /// Opens the series in this process's file now (otherwise the first
    /// observation does), so a histogram with no observation yet is
    /// already native. `False` if it cannot record (logged once).
    fn open(&self, py: Python<'_>) -> bool {
        if let Some(binding) = &*self.binding.load() {
            if binding.epoch == native_files::epoch() {
                return binding.series.is_some();
            }
        }
        self.bind(py).is_some()
    }
}

impl NativeSeriesHandle {
    /// Records `value` in the current process's file.
    #[inline]
    pub(crate) fn record(&self, py: Python<'_>, value: f64) {
        if let Some(binding) = &*self.binding.load() {
            if binding.epoch == native_files::epoch() {
                if let Some(series) = &binding.series {
                    series.observe(value);
                }
                return;
            }
        }
        if let Some(series) = self.bind(py) {
            series.observe(value);
        }
    }

    /// The series in the current process's file, remembered for this
    /// epoch (also when there is none).
    #[cold]
    fn bind(&self, py: Python<'_>) -> Option<NativeSeries> {
        let epoch = native_files::epoch();
        let series = match dir_from_environ(py) {
            Ok(dir) => native_files::series(&dir, file_id(py), &self.key, self.config),
            Err(error) => Err(error),
        };
        let series = match series {
            Ok((series, opened)) => {
                if opened {
                    close_with_prometheus_client(py);
                }
                Some(series)
            }
            Err(error) => {
                warn_once(py, &error);
                None
            }
        };
        self.binding.store(Some(Arc::new(Binding {
            epoch,
            series: series.clone(),
        })));
        series
    }
}

/// Has `prometheus_client.values.close_all_multiprocess_files()` close the
/// native files with its own: registers `multiprom._native.close_native_files`
/// among its cleanups, which it empties when it runs (so a file opened
/// after a close registers it again). prometheus_client before 0.26 has no
/// such function; then, and on any failure, nothing is registered: an
/// observation never fails for it.
fn close_with_prometheus_client(py: Python<'_>) {
    let register = || -> PyResult<()> {
        let cleanups = py
            .import("prometheus_client.values")?
            .getattr("_multi_process_cleanups")?;
        let close = py
            .import("multiprom._native")?
            .getattr("close_native_files")?;
        if !cleanups.contains(&close)? {
            cleanups.call_method1("append", (close,))?;
        }
        Ok(())
    };
    let _ = register();
}

/// The id this process's histogram `*.db` file is named with, when the
/// value class's process identifier is not `os.getpid` (`None`: the pid):
/// `multiprom._native_observe.file_id()`. On any failure, the pid.
fn file_id(py: Python<'_>) -> Option<String> {
    py.import("multiprom._native_observe")
        .and_then(|module| module.call_method0("file_id"))
        .and_then(|id| id.extract())
        .ok()
        .flatten()
}

/// `os.environ['PROMETHEUS_MULTIPROC_DIR']`, as the value classes read it
/// when they open a file.
fn dir_from_environ(py: Python<'_>) -> Result<PathBuf, String> {
    let dir: Option<PathBuf> = py
        .import("os")
        .and_then(|os| os.getattr("environ"))
        .and_then(|environ| environ.call_method1("get", (DIR_ENV_VAR,)))
        .and_then(|dir| dir.extract())
        .map_err(|error| error.to_string())?;
    dir.ok_or_else(|| format!("{DIR_ENV_VAR} is not set"))
}

#[cold]
fn warn_once(py: Python<'_>, error: &str) {
    if !WARNED.swap(true, Ordering::Relaxed) {
        report(
            py,
            &format!(
                "native histogram observations are being dropped ({error}); classic histograms are unaffected. Logged once per process"
            ),
        );
    }
}

/// `multiprom._native.close_native_files()`: closes this process's native
/// histogram files (`prometheus_client.values.close_all_multiprocess_files()`
/// calls it); every series opens its file again on its next observation.
#[pyfunction]
pub(crate) fn close_native_files() {
    native_files::close_all();
}
