//! `multiprom._native`: the Rust half of the `multiprom` Python package.
//!
//! The Python half (`python/multiprom/__init__.py`) holds the public
//! `MultiProcessCollector` class, with `prometheus_client`'s constructor and
//! errors; this module does the work: `NativeDirCollector` keeps a
//! [`DirCollector`] (so unchanged files are not parsed again on the next
//! scrape) and `merge` merges given files once. Both read and merge with
//! the GIL released and return `(metrics, reports)`: a list of
//! `prometheus_client` `Metric` objects and a list of `(level, message)`
//! pairs for Python's `logging`. Bad files, a directory that cannot be
//! listed, even a bug in the engine, become reports, never exceptions: a
//! scrape must not fail because of one file.
//!
//! `NativeSeries` records native histograms beside the classic buckets
//! (`multiprom.install(native_histograms=True)`, `multiprom.NativeHistogram`).
//!
//! It also carries the whole `multiprom` command line (`cli::main`, the
//! `multiprom` command's and `python -m multiprom`'s engine).

mod cli;
mod metrics;
mod native_files;
mod native_series;
mod native_sum;
mod value;
mod value_core;
mod value_files;

use std::ffi::OsString;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;

use multiprom_collector::exposition::negotiate::{choose_exposition, Exposition};
use multiprom_collector::exposition::{encode_protobuf, Body, PROTOBUF_CONTENT_TYPE};
use multiprom_collector::{
    merge_files, CollectError, CollectOptions, DirCollector, Escaping, Exemplars, Format,
    NameFilter, Natives, Scrape, ServedView, Warning,
};
use multiprom_format::native_file::NATIVE_HISTOGRAM_DIR;
use multiprom_format::{EnvDir, EnvDirError};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};

/// Python `logging` levels of the reports.
const INFO: u8 = 20;
const WARNING: u8 = 30;
const ERROR: u8 = 40;

/// What a collection hands back to Python: the metrics and the reports.
type Collected<'py> = (Bound<'py, PyList>, Vec<(u8, String)>);

/// One multiprocess directory, collected again and again (the engine keeps
/// what it parsed between calls).
#[pyclass(frozen, module = "multiprom._native", name = "DirCollector")]
struct NativeDirCollector {
    /// The directory's served view: its collector, and the start times the
    /// protobuf format carries (as `multiprom serve` and `scrape` give
    /// them).
    engine: ServedView,
    /// Histogram buckets cumulative, as the protobuf format has them.
    accumulate: bool,
}

#[pymethods]
impl NativeDirCollector {
    #[new]
    #[pyo3(signature = (path, accumulate = true))]
    fn new(path: PathBuf, accumulate: bool) -> Self {
        NativeDirCollector {
            engine: ServedView::new(DirCollector::with_options(
                path,
                CollectOptions::default().accumulate(accumulate),
            )),
            accumulate,
        }
    }

    /// Lists, reads and merges the directory: `(metrics, reports)`. With
    /// `names` (an iterable of `str`), only the samples so named, as
    /// `prometheus_client`'s restricted registry keeps them; only the
    /// entries feeding them are read and merged.
    #[pyo3(signature = (names = None))]
    fn collect<'py>(
        &self,
        py: Python<'py>,
        names: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Collected<'py>> {
        let filter = name_filter(names)?;
        match py.detach(|| self.collect_engine(filter.as_ref(), Natives::Skip)) {
            Ok(Ok(scrape)) => to_python(py, &scrape),
            // Python's `glob` finds nothing in a directory it cannot list.
            Ok(Err(error)) => Ok((PyList::empty(py), vec![(WARNING, error.to_string())])),
            Err(panic) => Ok((PyList::empty(py), vec![engine_failure(panic.as_ref())])),
        }
    }

    /// Lists, reads and merges the directory, and encodes it as
    /// `prometheus_client`'s `generate_latest` (OpenMetrics: its
    /// `openmetrics.exposition.generate_latest`, without the final `# EOF`)
    /// prints the `Metric` objects `collect` returns: `(text, reports)`.
    /// `text` is `None` when there is nothing to gain from it: a family
    /// `prometheus_client` would reject (the `Metric` path leaves it out and
    /// says why), a directory that cannot be listed, an engine failure.
    /// `names` restricts the samples as in `collect`; `escaping` is the
    /// scheme `generate_latest(registry, escaping)` was given.
    #[pyo3(signature = (openmetrics, names = None, escaping = "underscores"))]
    fn expose<'py>(
        &self,
        py: Python<'py>,
        openmetrics: bool,
        names: Option<&Bound<'py, PyAny>>,
        escaping: &str,
    ) -> PyResult<Exposed<'py>> {
        let filter = name_filter(names)?;
        let scrape = match py.detach(|| self.collect_engine(filter.as_ref(), Natives::Skip)) {
            Ok(Ok(scrape)) => scrape,
            // The `Metric` path says what went wrong.
            Ok(Err(_)) | Err(_) => return Ok((None, Vec::new())),
        };
        // Warnings are reported once per collection: hand them back even
        // when the caller takes the `Metric` path after all.
        if !metrics::all_accepted(py, &scrape.families)? {
            return Ok((None, reports(&scrape)));
        }
        let escaping = Escaping::from_param(escaping);
        let format = if openmetrics {
            Format::OpenMetrics
        } else {
            Format::Prometheus
        };
        let encoded = py.detach(|| {
            catch_unwind(AssertUnwindSafe(|| {
                let mut text = String::with_capacity(128 * scrape.stats.series + 4096);
                // Not finished: the package writes the other collectors'
                // families after these, then OpenMetrics' `# EOF`.
                Body::new(format, escaping, &mut text).families(&scrape.families);
                text
            }))
        });
        let Ok(text) = encoded else {
            return Ok((None, reports(&scrape)));
        };
        Ok((Some(PyBytes::new(py, text.as_bytes())), reports(&scrape)))
    }

    /// The Prometheus protobuf format (delimited `MetricFamily` messages,
    /// native histograms included, names escaped as `accept` asks), when a
    /// scraper whose `Accept` header is `accept` prefers it (as Prometheus
    /// does with native histograms on) and the directory has native
    /// histograms: `(body, reports, content_type)`. `body` is `None`
    /// otherwise (the text formats carry everything then, and
    /// `prometheus_client`'s own encoder answers), and where `expose` would
    /// leave the text to `prometheus_client`. `names` restricts the samples
    /// as in `collect`.
    #[pyo3(signature = (accept, names = None))]
    fn expose_protobuf<'py>(
        &self,
        py: Python<'py>,
        accept: Option<&str>,
        names: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<ExposedProtobuf<'py>> {
        let answer = match choose_exposition(accept) {
            Some(Exposition::Protobuf(answer)) if self.accumulate => answer,
            _ => return Ok((None, Vec::new(), PROTOBUF_CONTENT_TYPE)),
        };
        let content_type = answer.content_type();
        // One `stat` spares a directory without native histograms (most)
        // a collection before prometheus_client's text one.
        let natives_dir = self.engine.dir().join(NATIVE_HISTOGRAM_DIR);
        if !py.detach(|| natives_dir.is_dir()) {
            return Ok((None, Vec::new(), content_type));
        }
        let filter = name_filter(names)?;
        let scrape = match py.detach(|| self.collect_engine(filter.as_ref(), Natives::Merge)) {
            Ok(Ok(scrape)) => scrape,
            Ok(Err(_)) | Err(_) => return Ok((None, Vec::new(), content_type)),
        };
        if scrape.natives.is_empty() || !metrics::all_accepted(py, &scrape.families)? {
            return Ok((None, reports(&scrape), content_type));
        }
        let whole = filter.is_none();
        let encoded = py.detach(|| {
            catch_unwind(AssertUnwindSafe(|| {
                // Each cumulative series with its start, as `multiprom
                // serve` and `scrape` serve it.
                let started = self.engine.start_times(&scrape, whole);
                let mut body = Vec::with_capacity(64 * scrape.stats.series + 1024);
                let (families, natives) = (&scrape.families, &scrape.natives);
                encode_protobuf(
                    families,
                    natives,
                    Some(&started),
                    answer.escaping,
                    &mut body,
                );
                body
            }))
        });
        let Ok(body) = encoded else {
            return Ok((None, reports(&scrape), content_type));
        };
        Ok((
            Some(PyBytes::new(py, &body)),
            reports(&scrape),
            content_type,
        ))
    }
}

impl NativeDirCollector {
    /// One collection, all samples or the filtered ones, with or without
    /// the native histograms; a panic in the engine is caught (it must not
    /// take the Python process down).
    fn collect_engine(
        &self,
        filter: Option<&NameFilter>,
        natives: Natives,
    ) -> std::thread::Result<Result<Arc<Scrape>, CollectError>> {
        let engine = &self.engine;
        catch_unwind(AssertUnwindSafe(|| {
            engine.collect(filter, natives, Exemplars::Attach)
        }))
    }
}

/// `names` (`None`, or an iterable of `str`) as a filter. A `str` is
/// refused: iterating it would ask for one-character names.
fn name_filter(names: Option<&Bound<'_, PyAny>>) -> PyResult<Option<NameFilter>> {
    let Some(names) = names.filter(|names| !names.is_none()) else {
        return Ok(None);
    };
    if names.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "names must be an iterable of str, not a str",
        ));
    }
    let mut collected = Vec::new();
    for name in names.try_iter()? {
        collected.push(name?.extract::<String>()?);
    }
    Ok(Some(NameFilter::new(collected)))
}

/// What `expose` hands back: the text, if any, and the reports.
type Exposed<'py> = (Option<Bound<'py, PyBytes>>, Vec<(u8, String)>);

/// [`Exposed`], with the answer's `Content-Type`.
type ExposedProtobuf<'py> = (Option<Bound<'py, PyBytes>>, Vec<(u8, String)>, &'static str);

/// Reads and merges `files` once: `(metrics, reports)`.
#[pyfunction]
#[pyo3(signature = (files, accumulate = true))]
fn merge(py: Python<'_>, files: Vec<PathBuf>, accumulate: bool) -> PyResult<Collected<'_>> {
    let options = CollectOptions::default().accumulate(accumulate);
    match py.detach(|| catch_unwind(|| merge_files(&files, options))) {
        Ok(scrape) => to_python(py, &scrape),
        Err(panic) => Ok((PyList::empty(py), vec![engine_failure(panic.as_ref())])),
    }
}

/// The collection's warnings as `(level, message)` reports.
fn reports(scrape: &Scrape) -> Vec<(u8, String)> {
    scrape
        .warnings
        .iter()
        .map(|warning| {
            let level = match warning {
                // A worker reaped mid-scrape: expected, not damage.
                Warning::File(problem) if problem.is_vanished() => INFO,
                _ => WARNING,
            };
            (level, warning.to_string())
        })
        .collect()
}

fn to_python<'py>(py: Python<'py>, scrape: &Scrape) -> PyResult<Collected<'py>> {
    let (metrics, rejected) = metrics::to_python(py, &scrape.families)?;
    let mut reports = reports(scrape);
    reports.extend(rejected.into_iter().map(|family| {
        (
            WARNING,
            format!(
                "family {:?} left out: prometheus_client rejects it: {}",
                family.name, family.error
            ),
        )
    }));
    Ok((metrics, reports))
}

fn engine_failure(panic: &(dyn std::any::Any + Send)) -> (u8, String) {
    let what = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("unknown panic");
    (
        ERROR,
        format!("internal error in the multiprom engine ({what}); this scrape has no multiprocess metrics"),
    )
}

/// The directory as the environment names it, by the one rule multiprom
/// has for it ([`EnvDir`]'s, which is prometheus_client's): `(variable,
/// path)`, where `variable` is the name that decides (`None` when neither is
/// set) and `path` is `None` when that variable is empty.
#[pyfunction]
fn dir_from_env() -> (Option<&'static str>, Option<OsString>) {
    match EnvDir::from_env() {
        Ok(env) => (Some(env.variable), Some(env.path.into_os_string())),
        Err(EnvDirError::Empty { variable }) => (Some(variable), None),
        Err(_) => (None, None),
    }
}

// Declared as needing the GIL: the module has not been run on a free-threaded
// interpreter, so one that loads it (a build from source on 3.14t; the abi3
// wheel is not offered to it) turns the GIL back on, with its warning,
// rather than letting threads race through code never tested without it.
#[pymodule(gil_used = true)]
#[pyo3(name = "_native")]
fn native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<NativeDirCollector>()?;
    module.add_class::<value::Value>()?;
    module.add_class::<value_files::ValueFiles>()?;
    module.add_class::<native_series::NativeSeriesHandle>()?;
    module.add_class::<native_sum::NativeSum>()?;
    // The bounds multiprom.NativeHistogram checks its settings against.
    module.add(
        "NATIVE_MIN_SCHEMA",
        multiprom_format::native_buckets::MIN_SCHEMA,
    )?;
    module.add(
        "NATIVE_MAX_SCHEMA",
        multiprom_format::native_buckets::MAX_SCHEMA,
    )?;
    module.add(
        "NATIVE_MAX_BUCKETS",
        multiprom_format::native_file::MAX_NATIVE_BUCKETS,
    )?;
    module.add_function(wrap_pyfunction!(merge, module)?)?;
    module.add_function(wrap_pyfunction!(native_series::close_native_files, module)?)?;
    module.add_function(wrap_pyfunction!(dir_from_env, module)?)?;
    module.add_function(wrap_pyfunction!(cli::main, module)?)?;
    // What the linked-in CLI's `--version` prints.
    module.add("__version__", multiprom_cli::VERSION)?;
    Ok(())
}
