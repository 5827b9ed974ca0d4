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

mod metrics;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use multiprom_collector::{merge_files, CollectOptions, DirCollector, Format, Scrape, Warning};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

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
    engine: DirCollector,
}

#[pymethods]
impl NativeDirCollector {
    #[new]
    #[pyo3(signature = (path, accumulate = true))]
    fn new(path: PathBuf, accumulate: bool) -> Self {
        NativeDirCollector {
            engine: DirCollector::with_options(path, CollectOptions { accumulate }),
        }
    }

    /// Lists, reads and merges the directory: `(metrics, reports)`.
    fn collect<'py>(&self, py: Python<'py>) -> PyResult<Collected<'py>> {
        let engine = &self.engine;
        match py.detach(|| catch_unwind(AssertUnwindSafe(|| engine.collect()))) {
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
    fn expose<'py>(&self, py: Python<'py>, openmetrics: bool) -> PyResult<Exposed<'py>> {
        let engine = &self.engine;
        let scrape = match py.detach(|| catch_unwind(AssertUnwindSafe(|| engine.collect()))) {
            Ok(Ok(scrape)) => scrape,
            // The `Metric` path says what went wrong.
            Ok(Err(_)) | Err(_) => return Ok((None, Vec::new())),
        };
        // Warnings are reported once per collection: hand them back even
        // when the caller takes the `Metric` path after all.
        if !metrics::all_accepted(py, &scrape.families)? {
            return Ok((None, reports(&scrape)));
        }
        let format = if openmetrics {
            Format::OpenMetrics
        } else {
            Format::Prometheus
        };
        let encoded = py.detach(|| {
            catch_unwind(AssertUnwindSafe(|| {
                let mut text = String::with_capacity(128 * scrape.stats.series + 4096);
                format.encode(&scrape.families, &mut text);
                if let Some(body) = text.strip_suffix("# EOF\n") {
                    text.truncate(body.len());
                }
                text
            }))
        });
        let Ok(text) = encoded else {
            return Ok((None, reports(&scrape)));
        };
        Ok((Some(PyBytes::new(py, text.as_bytes())), reports(&scrape)))
    }
}

/// What `expose` hands back: the text, if any, and the reports.
type Exposed<'py> = (Option<Bound<'py, PyBytes>>, Vec<(u8, String)>);

/// Reads and merges `files` once: `(metrics, reports)`.
#[pyfunction]
#[pyo3(signature = (files, accumulate = true))]
fn merge(py: Python<'_>, files: Vec<PathBuf>, accumulate: bool) -> PyResult<Collected<'_>> {
    let options = CollectOptions { accumulate };
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

#[pymodule]
#[pyo3(name = "_native")]
fn native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<NativeDirCollector>()?;
    module.add_function(wrap_pyfunction!(merge, module)?)?;
    Ok(())
}
