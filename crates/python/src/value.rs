//! `multiprom._native.Value`: the base of the class
//! `multiprom.MultiProcessValue()` returns, `prometheus_client`'s
//! `MmapedValue` on multiprom's writer.
//!
//! Each value writes its entry through its own slot, without a lock;
//! before each operation it asks its [`ValueFiles`] whether the process
//! identifier changed, as Python's class does (with `os.getpid`, one
//! atomic load).

use std::sync::Arc;

use multiprom_format::encode_key;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyFloat, PyType};

use crate::value_core::ValueCore;
use crate::value_files::{metric_kind, report, ValueFiles};

static EXEMPLAR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// One sample's value, written to its entry in this process's file.
#[pyclass(frozen, subclass, module = "multiprom._native", name = "Value")]
pub(crate) struct Value {
    files: Py<ValueFiles>,
    core: Arc<ValueCore>,
}

#[pymethods]
impl Value {
    /// Creates the value's entry (value 0.0) unless its file has it, as
    /// `MmapedValue(typ, metric_name, name, labelnames, labelvalues,
    /// help_text, multiprocess_mode)` does. `key`, when given, is the entry's
    /// key as `prometheus_client`'s `mmap_key` makes it, used instead of
    /// the one made of the other arguments: for text no `str` of Rust can
    /// hold (a lone surrogate), which `mmap_key`'s `json.dumps` escapes.
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (files, typ, metric_name, name, labelnames, labelvalues, help_text, multiprocess_mode = "", key = None))]
    fn new(
        py: Python<'_>,
        files: Py<ValueFiles>,
        typ: &str,
        metric_name: &str,
        name: &str,
        labelnames: Vec<String>,
        labelvalues: Vec<String>,
        help_text: &str,
        multiprocess_mode: &str,
        key: Option<String>,
    ) -> PyResult<Self> {
        let kind = metric_kind(typ, multiprocess_mode)?;
        // `dict(zip(labelnames, labelvalues))`: the shorter one decides.
        let labels = labelnames
            .iter()
            .zip(&labelvalues)
            .map(|(name, value)| (name.as_str(), value.as_str()));
        let key = key.unwrap_or_else(|| encode_key(metric_name, name, labels, help_text));
        let core = files.get().make_value(py, kind, key)?;
        Ok(Value { files, core })
    }

    /// `value += amount`; the timestamp is written 0.0, as Python does.
    pub(crate) fn inc(&self, py: Python<'_>, amount: f64) -> PyResult<()> {
        self.files.get().check_identifier(py)?;
        self.core.inc(amount)
    }

    /// `value = value`, with `timestamp or 0.0` as the timestamp.
    #[pyo3(signature = (value, timestamp = None))]
    fn set(
        &self,
        py: Python<'_>,
        value: f64,
        timestamp: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let timestamp = match timestamp {
            None => 0.0,
            Some(timestamp) => match timestamp.cast::<PyFloat>() {
                Ok(float) => float.value(),
                // Python's `timestamp or 0.0`: a falsy timestamp is 0.0.
                Err(_) if !timestamp.is_truthy()? => 0.0,
                Err(_) => timestamp.extract()?,
            },
        };
        // `-0.0 or 0.0` is 0.0 too.
        let timestamp = if timestamp == 0.0 { 0.0 } else { timestamp };
        self.files.get().check_identifier(py)?;
        self.core.set(value, timestamp)
    }

    /// The value, as its entry holds it.
    fn get(&self, py: Python<'_>) -> PyResult<f64> {
        self.files.get().check_identifier(py)?;
        Ok(self.core.get())
    }

    /// Keeps `exemplar` (a `prometheus_client.samples.Exemplar`) as this
    /// entry's exemplar, in the process's exemplar file, where multiprom's
    /// collector finds it (prometheus_client's own multiprocess class drops
    /// it). Never raises for what the storage cannot take: a label set
    /// over OpenMetrics' limit, or a file that cannot be opened, loses the
    /// exemplar and is logged, the value is untouched.
    fn set_exemplar(&self, py: Python<'_>, exemplar: &Bound<'_, PyAny>) -> PyResult<()> {
        let labels: PyResult<Vec<(String, String)>> = exemplar
            .getattr(intern!(py, "labels"))?
            .call_method0(intern!(py, "items"))?
            .try_iter()?
            .map(|item| item?.extract::<(String, String)>())
            .collect();
        // Text that is not UTF-8 (a lone surrogate) has no place in the
        // exemplar file: the exemplar is lost, not the observation.
        let labels = match labels {
            Ok(labels) => labels,
            Err(error) => {
                report(py, &format!("exemplar dropped: its labels are not text the exemplar file holds ({error})"));
                return Ok(());
            }
        };
        let value: f64 = exemplar.getattr(intern!(py, "value"))?.extract()?;
        // No timestamp (an `Exemplar` made without one) is kept as NaN and
        // printed without one, as prometheus_client prints it.
        let timestamp: Option<f64> = exemplar.getattr(intern!(py, "timestamp"))?.extract()?;
        let files = self.files.get();
        files.check_identifier(py)?;
        let Some(slot) = self
            .core
            .exemplar_slot(|| files.exemplar_slot(py, &self.core))
        else {
            return Ok(());
        };
        let pairs = labels.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        if let Err(error) = slot.store(pairs, value, timestamp.unwrap_or(f64::NAN)) {
            report(py, &format!("exemplar dropped: {error}"));
        }
        Ok(())
    }

    /// The exemplar this process stored last for this entry, as a
    /// `prometheus_client.samples.Exemplar`, or `None`.
    fn get_exemplar<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Some(exemplar) = self.core.exemplar() else {
            return Ok(None);
        };
        let labels = PyDict::new(py);
        for (name, value) in &exemplar.labels {
            labels.set_item(name, value)?;
        }
        let timestamp = (!exemplar.timestamp.is_nan()).then_some(exemplar.timestamp);
        let class = EXEMPLAR.import(py, "prometheus_client.samples", "Exemplar")?;
        class.call1((labels, exemplar.value, timestamp)).map(Some)
    }
}
